"""Notify the hooks when the history changes: a statement trigger on ``finished_jobs``.

Every statement that inserts, updates, deletes or truncates ``finished_jobs`` (the ingester,
a backfill, an admin's psql) sends ``NOTIFY softwalltime_history`` when its transaction
commits; PostgreSQL sends one notification per channel and transaction, however many
statements. A hook that LISTENs on its cached connection may then keep the rows of recent
lookups and use them until it is notified (softwalltime.hook.lookup): a user's burst
of ``qsub`` is served without a round trip per job, and no job is predicted from a history
older than the last commit to it.

A frozen snapshot: never import softwalltime here.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade():
    op.execute(
        "CREATE FUNCTION softwalltime_history_changed() RETURNS trigger LANGUAGE plpgsql AS"
        " $$BEGIN PERFORM pg_notify('softwalltime_history', ''); RETURN NULL; END$$"
    )
    op.execute(
        "CREATE TRIGGER softwalltime_history_notify"
        " AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON finished_jobs"
        " FOR EACH STATEMENT EXECUTE PROCEDURE softwalltime_history_changed()"
    )


def downgrade():
    op.execute("DROP TRIGGER softwalltime_history_notify ON finished_jobs")
    op.execute("DROP FUNCTION softwalltime_history_changed()")
