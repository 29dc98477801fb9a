"""Predictor "learned": its site table, and the one row the hook reads.

* ``learned_cells``: the table as ``softwalltime.core.learned.Learner`` keeps it, per level
  (0 fine bin, 1 coarse bin, 2 the site, bin 0), bin and rule: the jobs (fractions: the
  shipped prior's pseudo-jobs), the under-estimates and the accuracy sum of the jobs ended
  so far. Only bins that saw a job are stored.
* ``learned_state``: one row with lambda (and its log, kept exactly), the totals, the
  target and, as compact JSON, what the hook needs precomputed: the rule chosen in each
  fine bin for the soft walltime and the rank's rule in each fine bin (one short row; the
  hook never reads the cells).

The hook's history query needs the time since the user's last job ended: ``ended_at`` is a
key column of ``ix_finished_jobs_user_recent``, so that query stays an index-only scan and
the index is unchanged.

A frozen snapshot: never import softwalltime here.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "learned_cells",
        sa.Column("level", sa.SmallInteger, nullable=False, comment="0 fine bin, 1 coarse bin, 2 site"),
        sa.Column("bin", sa.Integer, nullable=False, comment="bin of the level (site: 0)"),
        sa.Column("rule", sa.Integer, nullable=False, comment="rule id (learned.RULES)"),
        sa.Column("jobs", sa.Float(53), nullable=False, comment="jobs seen in the bin (prior: fractions)"),
        sa.Column("under_jobs", sa.Float(53), nullable=False, comment="of them, under-estimated by the rule"),
        sa.Column("accuracy_sum", sa.Float(53), nullable=False, comment="sum of the rule's accuracies"),
        sa.PrimaryKeyConstraint("level", "bin", "rule", name="pk_learned_cells"),
        comment="Predictor learned: outcomes of each rule per bin and level (site-wide).",
    )
    op.create_table(
        "learned_state",
        sa.Column("id", sa.Integer, nullable=False, comment="always 1: one row"),
        sa.Column("lam", sa.Float(53), nullable=False, comment="under-estimate penalty lambda"),
        sa.Column("log_lam", sa.Float(53), nullable=False, comment="its logarithm, as learned"),
        sa.Column("jobs", sa.BigInteger, nullable=False, comment="finished jobs learned from"),
        sa.Column("under_jobs", sa.BigInteger, nullable=False, comment="of them, under-estimated"),
        sa.Column("v3_under_jobs", sa.BigInteger, nullable=False, comment="of them, under-estimated by v3"),
        sa.Column("site_jobs", sa.Float(53), nullable=False, comment="jobs in the site's cells (prior included)"),
        sa.Column("target", sa.Text, nullable=False, comment="fixed or v3"),
        sa.Column("target_under_pct", sa.Float(53), nullable=False, comment="target used (v3: v3's rate)"),
        sa.Column("prior", sa.Boolean, nullable=False, comment="started from the shipped prior"),
        sa.Column("choices", sa.Text, nullable=False, server_default="{}", comment="JSON: the rule per fine bin, soft walltime and rank (what the hook reads)"),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("id", name="pk_learned_state"),
        sa.CheckConstraint("id = 1", name="ck_learned_state_one_row"),
        sa.CheckConstraint("target IN ('fixed', 'v3')", name="ck_learned_state_target"),
        comment="Predictor learned: lambda, totals and the rules per fine bin (one row).",
    )


def downgrade():
    op.drop_table("learned_state")
    op.drop_table("learned_cells")
