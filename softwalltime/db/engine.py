"""Database access for the CLI, the ingester and migrations (SQLAlchemy + alembic).

Not on the hook path: the hook talks to PostgreSQL through ``softwalltime.hookpath.lookup``
over ``softwalltime.hookpath.pgwire``, a client of the standard library only (no psycopg2,
no SQLAlchemy: see pgwire's docstring for why). Query functions take a Connection; the
caller owns the transaction.
"""

from __future__ import annotations

import getpass
import os
import sys
from importlib.util import find_spec
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..errors import ConfigError, DatabaseError
from ..hookpath import dsn as dsnlib
from ..hookpath.config import libpq_dsn, redact_dsn

# How long the CLI waits for a server before saying it cannot connect (libpq needs >= 2 s
# to be exact); the hook uses its own, much shorter, bound.
CLI_CONNECT_TIMEOUT_S = 5


def make_engine(dsn: str, **kwargs: Any) -> Engine:
    """Create an engine from a libpq DSN (URI or ``key=value``) or a SQLAlchemy URL.

    :raises ConfigError: the DSN is not PostgreSQL
    """
    import psycopg2

    text = dsn.strip()
    if "://" in text and not text.split("://", 1)[0].startswith("postgres"):
        raise ConfigError(f"not a PostgreSQL DSN: {redact_dsn(text)}")
    libpq = libpq_dsn(text)
    extra: dict[str, Any] = {}
    if "connect_timeout" not in text:
        extra["connect_timeout"] = CLI_CONNECT_TIMEOUT_S

    def _connect() -> Any:
        # The DSN goes to libpq verbatim, so keyword strings, URIs with query parameters
        # and service names behave exactly as in psql.
        return psycopg2.connect(libpq, **extra)

    return sa.create_engine("postgresql+psycopg2://", creator=_connect, **kwargs)


def dsn_target(dsn: str) -> str:
    """``user@host:port/dbname`` the DSN points at (password never included)."""
    import psycopg2.extensions

    try:
        parts = psycopg2.extensions.parse_dsn(libpq_dsn(dsn))
    except psycopg2.ProgrammingError:
        return redact_dsn(dsn)
    host = parts.get("host") or os.environ.get("PGHOST") or "local socket"
    port = parts.get("port") or os.environ.get("PGPORT") or "5432"
    user = parts.get("user") or os.environ.get("PGUSER") or getpass.getuser()
    dbname = parts.get("dbname") or os.environ.get("PGDATABASE") or user
    return f"{user}@{host}:{port}/{dbname}"


def describe_connect_error(dsn: str, err: BaseException) -> str:
    """One line: which server we tried and libpq's reason, with any password removed."""
    reason = str(getattr(err, "orig", None) or err).strip().splitlines()
    first = reason[0] if reason else type(err).__name__
    # libpq can echo parts of the connection string in its message.
    first = dsnlib.scrub(first, dsn)
    return f"cannot connect to PostgreSQL at {dsn_target(dsn)}: {first}"


def connect(engine: Engine, dsn: str) -> Connection:
    """Open a connection, turning connection failures into a one-line DatabaseError."""
    try:
        return engine.connect()
    except sa.exc.OperationalError as err:
        raise DatabaseError(describe_connect_error(dsn, err)) from err
    except sa.exc.ProgrammingError as err:  # malformed DSN
        raise DatabaseError(describe_connect_error(dsn, err)) from err


def migrations_dir() -> str:
    """Path of the alembic scripts (the installed ``softwalltime_migrations`` package)."""
    spec = find_spec("softwalltime_migrations")
    if spec is None or not spec.submodule_search_locations:
        raise DatabaseError("migrations are not installed (package softwalltime_migrations)")
    return list(spec.submodule_search_locations)[0]


def alembic_config(connection: Connection | None = None) -> Any:
    """An alembic Config for our scripts; ``connection`` is used by env.py when given."""
    from alembic.config import Config

    # Config's default stdout is bound when alembic is imported; pass the current one.
    cfg = Config(stdout=sys.stdout)
    cfg.set_main_option("script_location", migrations_dir())
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Upgrade the schema to ``revision`` on this connection (committed by the caller)."""
    from alembic import command

    command.upgrade(alembic_config(connection), revision)


def downgrade(connection: Connection, revision: str) -> None:
    """Downgrade the schema to ``revision`` (``base`` removes everything)."""
    from alembic import command

    command.downgrade(alembic_config(connection), revision)


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at, or None for an empty database."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    """The newest revision shipped with this version."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def history_rows(connection: Connection) -> str:
    """What the history tables hold, e.g. "1234 rows in finished_jobs"; "" when empty."""
    held = []
    for table in ("finished_jobs", "job_reruns", "ingest_checkpoints"):
        exists = connection.execute(
            sa.text("SELECT to_regclass(:name) IS NOT NULL"), {"name": table}
        ).scalar()
        if exists:
            # the table name comes from the fixed tuple above, never from input
            count = connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar()  # noqa: S608
            if count:
                held.append(f"{count} rows in {table}")
    return ", ".join(held)
