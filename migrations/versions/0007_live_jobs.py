"""Live job states: ``live_jobs``, what the Q, S, R and D records say is queued or running now.

The ingester keeps one row per job that is queued (Q, or R: requeued) or running (S),
deletes it when the job's E record arrives (``finished_jobs`` then has the job), and marks
it ``deleted`` on a D or A record (a job deleted while queued never gets an E). A deleted
row is a tombstone: a Q or S record of that job read again later (a rotated or compressed
file is read from its start) cannot bring it back. Stale rows and old tombstones are
dropped by every ingest run. ``softwalltime wait`` reads the queue from here.

A frozen snapshot: never import softwalltime here.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "live_jobs",
        sa.Column("server", sa.Text, nullable=False, comment="PBS server name"),
        sa.Column("job_id", sa.Text, nullable=False, comment="full id as logged"),
        sa.Column("ctime", sa.DateTime(timezone=True), nullable=False, comment="job creation time"),
        sa.Column("job_seq", sa.BigInteger, nullable=False, comment="numeric part of the id"),
        sa.Column(
            "state", sa.Text, nullable=False, comment="queued, running, or deleted (tombstone)"
        ),
        sa.Column("username", sa.Text, nullable=False),
        sa.Column("queue", sa.Text, nullable=True),
        sa.Column("ncpus", sa.Integer, nullable=True, comment="Resource_List.ncpus"),
        sa.Column("walltime_s", sa.Integer, nullable=True, comment="Resource_List.walltime"),
        sa.Column(
            "soft_walltime_s", sa.Integer, nullable=True, comment="Resource_List.soft_walltime"
        ),
        sa.Column("qtime", sa.DateTime(timezone=True), nullable=True, comment="entered its queue"),
        sa.Column(
            "started_at",
            sa.DateTime(timezone=True),
            nullable=True,
            comment="start of the current run (running only)",
        ),
        sa.Column(
            "event_at",
            sa.DateTime(timezone=True),
            nullable=False,
            comment="when the state began: qtime (Q), start (S), end of the run (R)",
        ),
        sa.Column("source_file", sa.Text, nullable=True, comment="file of the record"),
        sa.Column("source_offset", sa.BigInteger, nullable=True, comment="its byte offset"),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.now(),
        ),
        sa.CheckConstraint("state IN ('queued', 'running', 'deleted')", name="ck_live_jobs_state"),
        sa.PrimaryKeyConstraint("server", "job_id", "ctime", name="pk_live_jobs"),
        comment="Jobs queued or running now, from Q, S, R and D records (deleted: tombstones).",
    )


def downgrade():
    op.drop_table("live_jobs")
