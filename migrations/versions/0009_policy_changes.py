"""The scheduling policy, recorded (issue 48): one row per change of the settings
``softwalltime policy`` manages (``job_sort_formula``, ``backfill_depth``,
``eligible_time_enable``, ``opt_backfill_fuzzy``, sched_config's ``strict_ordering`` and
``fair_share``): when, by whom, the settings before and after, the commands run, and the
search that recommended it (capped JSON). ``action``: ``apply`` and ``revert`` (``softwalltime
policy``), ``outside`` (a change ``softwalltime status`` saw and did not make).

A frozen snapshot: never import softwalltime here.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "policy_changes",
        sa.Column("id", sa.BigInteger, sa.Identity(always=True), nullable=False, comment="order of the records"),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("changed_by", sa.Text, nullable=False, comment="OS user (and SUDO_USER), or qmgr (seen by status)"),
        sa.Column("action", sa.Text, nullable=False, comment="apply, revert or outside"),
        sa.Column("label", sa.Text, nullable=True, comment="the search label applied, if any"),
        sa.Column("before", postgresql.JSONB, nullable=True, comment="the settings before (NULL: first seen)"),
        sa.Column("after", postgresql.JSONB, nullable=False, comment="the settings after"),
        sa.Column("commands", sa.Text, nullable=False, server_default="", comment="the commands run, one a line"),
        sa.Column("search", postgresql.JSONB, nullable=True, comment="simulate --search --json that recommended it (capped)"),
        sa.PrimaryKeyConstraint("id", name="pk_policy_changes"),
        sa.CheckConstraint("action IN ('apply', 'revert', 'outside')", name="ck_policy_changes_action"),
        comment="The scheduling policy's changes: by softwalltime policy, or seen by status.",
    )


def downgrade():
    op.drop_table("policy_changes")
