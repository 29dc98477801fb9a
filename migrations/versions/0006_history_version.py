"""A change counter for the history, in place of NOTIFY: ``history_version``.

Revision 0005 sent ``NOTIFY softwalltime_history`` at every change to ``finished_jobs``, and
the hook kept lookups until notified. But NOTIFY needs no privilege: any role that may
connect can flood the channel, and a hook that drains it pays for every message (issue 16:
jobs were rejected by PBS's alarm). Here a one-row table counts the changes instead: a
statement trigger increments it in the same transaction as any insert, update, delete or
truncate of ``finished_jobs``, so the new value becomes visible exactly when the rows do.
Only a role that may update ``history_version`` (the history's writer) moves it. The hook
reads it with each event and uses the rows it kept while the value is unchanged.

A frozen snapshot: never import softwalltime here.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade():
    op.execute("DROP TRIGGER softwalltime_history_notify ON finished_jobs")
    op.execute("DROP FUNCTION softwalltime_history_changed()")
    op.execute(
        "CREATE TABLE history_version ("
        " one boolean DEFAULT true NOT NULL,"
        " version bigint DEFAULT 0 NOT NULL,"
        " CONSTRAINT history_version_pkey PRIMARY KEY (one),"
        " CONSTRAINT one_row CHECK (one))"
    )
    op.execute(
        "COMMENT ON TABLE history_version IS"
        " 'Change counter of finished_jobs (one row; the hook''s kept lookups use it).'"
    )
    op.execute("COMMENT ON COLUMN history_version.one IS 'always true'")
    op.execute(
        "COMMENT ON COLUMN history_version.version IS 'changes to finished_jobs committed so far'"
    )
    op.execute("INSERT INTO history_version (one, version) VALUES (true, 0)")
    op.execute(
        "CREATE FUNCTION softwalltime_history_version() RETURNS trigger LANGUAGE plpgsql AS"
        " $$BEGIN UPDATE history_version SET version = version + 1; RETURN NULL; END$$"
    )
    op.execute(
        "CREATE TRIGGER softwalltime_history_version"
        " AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON finished_jobs"
        " FOR EACH STATEMENT EXECUTE PROCEDURE softwalltime_history_version()"
    )


def downgrade():
    op.execute("DROP TRIGGER softwalltime_history_version ON finished_jobs")
    op.execute("DROP FUNCTION softwalltime_history_version()")
    op.execute("DROP TABLE history_version")
    op.execute(
        "CREATE FUNCTION softwalltime_history_changed() RETURNS trigger LANGUAGE plpgsql AS"
        " $$BEGIN PERFORM pg_notify('softwalltime_history', ''); RETURN NULL; END$$"
    )
    op.execute(
        "CREATE TRIGGER softwalltime_history_notify"
        " AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON finished_jobs"
        " FOR EACH STATEMENT EXECUTE PROCEDURE softwalltime_history_changed()"
    )
