"""Initial schema: finished_jobs, job_reruns, ingest_checkpoints.

A frozen snapshot: never import softwalltime.db.schema here.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "finished_jobs",
        sa.Column("server", sa.Text, nullable=False, comment="PBS server name, e.g. pbs01"),
        sa.Column("job_id", sa.Text, nullable=False, comment="full id as logged: 123.pbs01, 7[3].pbs01"),
        sa.Column("ctime", TS, nullable=False, comment="job creation time"),
        sa.Column("job_seq", sa.BigInteger, nullable=False, comment="numeric part of the id; orders ties"),
        sa.Column("array_index", sa.Integer, nullable=True, comment="subjob index, NULL for plain jobs"),
        sa.Column("username", sa.Text, nullable=False),
        sa.Column("groupname", sa.Text, nullable=True),
        sa.Column("project", sa.Text, nullable=True),
        sa.Column("account", sa.Text, nullable=True),
        sa.Column("queue", sa.Text, nullable=True),
        sa.Column("job_name", sa.Text, nullable=True),
        sa.Column("walltime_s", sa.Integer, nullable=True, comment="Resource_List.walltime"),
        sa.Column("soft_walltime_s", sa.Integer, nullable=True, comment="Resource_List.soft_walltime"),
        sa.Column("runtime_s", sa.Integer, nullable=True, comment="resources_used.walltime of the last run"),
        sa.Column("started_at", TS, nullable=True),
        sa.Column("ended_at", TS, nullable=False),
        sa.Column("exit_status", sa.Integer, nullable=True),
        sa.Column("ncpus", sa.Integer, nullable=True),
        sa.Column("ngpus", sa.Integer, nullable=True),
        sa.Column("nodect", sa.Integer, nullable=True),
        sa.Column("mem_bytes", sa.BigInteger, nullable=True, comment="Resource_List.mem"),
        sa.Column("select_spec", sa.Text, nullable=True, comment="Resource_List.select as typed"),
        sa.Column("run_count", sa.Integer, nullable=True),
        sa.Column("source_file", sa.Text, nullable=True, comment="accounting file the E record came from"),
        sa.Column("source_offset", sa.BigInteger, nullable=True, comment="byte offset of the E record"),
        sa.Column("ingested_at", TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("server", "job_id", "ctime", name="pk_finished_jobs"),
        comment="One row per finished job (PBS E record); what the predictors read.",
    )
    op.create_index(
        "ix_finished_jobs_user_recent",
        "finished_jobs",
        ["username", sa.text("ended_at DESC"), sa.text("job_seq DESC")],
        postgresql_include=["runtime_s", "walltime_s"],
    )
    op.create_table(
        "job_reruns",
        sa.Column("server", sa.Text, nullable=False),
        sa.Column("job_id", sa.Text, nullable=False),
        sa.Column("ctime", TS, nullable=False),
        sa.Column("run_count", sa.Integer, nullable=False, comment="run_count of the R record"),
        sa.Column("username", sa.Text, nullable=False),
        sa.Column("runtime_s", sa.Integer, nullable=True, comment="resources_used.walltime of that run"),
        sa.Column("started_at", TS, nullable=True),
        sa.Column("ended_at", TS, nullable=False),
        sa.Column("exit_status", sa.Integer, nullable=True),
        sa.Column("source_file", sa.Text, nullable=True),
        sa.Column("source_offset", sa.BigInteger, nullable=True),
        sa.Column("ingested_at", TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("server", "job_id", "ctime", "run_count", name="pk_job_reruns"),
        comment="PBS R records: runs that ended in a rerun/requeue (the E record has the last run).",
    )
    op.create_table(
        "ingest_checkpoints",
        sa.Column("path", sa.Text, nullable=False, comment="absolute path of the accounting file"),
        sa.Column("inode", sa.BigInteger, nullable=True),
        sa.Column("fingerprint", sa.Text, nullable=False, comment="hash of the first line: detects replacement"),
        sa.Column("byte_offset", sa.BigInteger, nullable=False, comment="end of the last complete line"),
        sa.Column("line_number", sa.BigInteger, nullable=False, comment="lines consumed so far"),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("path", name="pk_ingest_checkpoints"),
        comment="Ingester state per file, committed with the rows it covers.",
    )


def downgrade():
    op.drop_table("ingest_checkpoints")
    op.drop_table("job_reruns")
    op.drop_index("ix_finished_jobs_user_recent", table_name="finished_jobs")
    op.drop_table("finished_jobs")
