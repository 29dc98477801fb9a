"""What the scheduler model's replay of a site's own jobs needs (issue 46): each finished
job's ``qtime`` and ``etime`` (when it entered its queue and became eligible),
``Resource_List.place`` and ``exec_vnode`` (the vnodes and resources it ran on), read from
the E record. Older rows keep NULL: their records are not re-read.

A frozen snapshot: never import softwalltime here.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

COLUMNS = (
    ("qtime", sa.DateTime(timezone=True), "entered its queue"),
    ("etime", sa.DateTime(timezone=True), "became eligible"),
    ("place", sa.Text, "Resource_List.place as logged"),
    ("exec_vnode", sa.Text, "the vnodes and resources it ran on"),
)


def upgrade():
    for name, kind, comment in COLUMNS:
        op.add_column("finished_jobs", sa.Column(name, kind, nullable=True, comment=comment))


def downgrade():
    for name, _kind, _comment in reversed(COLUMNS):
        op.drop_column("finished_jobs", name)
