"""Predictor "calibrated": the site calibration table, and ncpus in the recent-jobs index.

* ``calibration_cells``: per (bin, rule) the finished jobs, under-estimates and accuracy sum
  that the predictor's rules had; ``calibration_state``: one row with lambda, the running
  totals, and the rule the table chooses in each bin as one JSON list (what the hook reads:
  one short row; reading the thousands of cells took it 25-100 ms).
* ``ix_finished_jobs_user_recent`` is recreated with ``ncpus`` in its INCLUDE list (beside
  revision 0003's ``server``), so the predictor's history query stays an index-only scan.

A frozen snapshot: never import softwalltime.db.schema here.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade():
    op.drop_index("ix_finished_jobs_user_recent", table_name="finished_jobs")
    op.create_index(
        "ix_finished_jobs_user_recent",
        "finished_jobs",
        ["username", sa.text("ended_at DESC"), sa.text("job_seq DESC")],
        postgresql_include=["runtime_s", "walltime_s", "ncpus", "server"],
    )
    op.create_table(
        "calibration_cells",
        sa.Column("bin", sa.Integer, nullable=False, comment="job class bin of the predictor"),
        sa.Column("rule", sa.Integer, nullable=False, comment="rule id (calibrated.RULES)"),
        sa.Column("jobs", sa.BigInteger, nullable=False, comment="finished jobs seen in the bin"),
        sa.Column("under_jobs", sa.BigInteger, nullable=False, comment="of them, under-estimated by the rule"),
        sa.Column("accuracy_sum", sa.Float(53), nullable=False, comment="sum of the rule's accuracies"),
        sa.PrimaryKeyConstraint("bin", "rule", name="pk_calibration_cells"),
        comment="Predictor calibrated: outcomes of each rule per job class bin (site-wide).",
    )
    op.create_table(
        "calibration_state",
        sa.Column("id", sa.Integer, nullable=False, comment="always 1: one row"),
        sa.Column("lam", sa.Float(53), nullable=False, comment="under-estimate penalty lambda"),
        sa.Column("jobs", sa.BigInteger, nullable=False, comment="finished jobs learned from"),
        sa.Column("under_jobs", sa.BigInteger, nullable=False, comment="of them, under-estimated"),
        sa.Column("target_under_pct", sa.Float(53), nullable=False, comment="target used"),
        sa.Column("choices", sa.Text, nullable=False, server_default="[]", comment="JSON list: the rule chosen in each bin (what the hook reads)"),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("id", name="pk_calibration_state"),
        sa.CheckConstraint("id = 1", name="one_row"),
        comment="Predictor calibrated: lambda, totals and the rule per bin (one row).",
    )


def downgrade():
    op.drop_table("calibration_state")
    op.drop_table("calibration_cells")
    op.drop_index("ix_finished_jobs_user_recent", table_name="finished_jobs")
    op.create_index(
        "ix_finished_jobs_user_recent",
        "finished_jobs",
        ["username", sa.text("ended_at DESC"), sa.text("job_seq DESC")],
        postgresql_include=["runtime_s", "walltime_s", "server"],
    )
