"""The recent-jobs index carries ``server``, so a history limited to one server
(``history_scope = server``) stays an index-only scan.

A frozen snapshot: never import softwalltime.db.schema here.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _recreate(include):
    op.drop_index("ix_finished_jobs_user_recent", table_name="finished_jobs")
    op.create_index(
        "ix_finished_jobs_user_recent",
        "finished_jobs",
        ["username", sa.text("ended_at DESC"), sa.text("job_seq DESC")],
        postgresql_include=include,
    )


def upgrade():
    _recreate(["runtime_s", "walltime_s", "server"])


def downgrade():
    _recreate(["runtime_s", "walltime_s"])
