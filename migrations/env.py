"""Alembic environment: the target schema is softwalltime.db.schema, the URL comes from
softwalltime's one configuration loader, and a caller may pass its own connection
(``config.attributes["connection"]``), as the CLI and the tests do."""

from alembic import context

from softwalltime.core.config import load_settings, require_dsn
from softwalltime.db import schema

config = context.config
target_metadata = schema.metadata


def _configure_and_run(connection):
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online():
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
        return
    from softwalltime.db.engine import make_engine

    engine = make_engine(require_dsn(load_settings()))
    with engine.connect() as conn:
        _configure_and_run(conn)
        conn.commit()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; connect to a database")
run_migrations_online()
