"""Database access for the CLI, the ingester and migrations (SQLAlchemy + alembic).

Not on the hook path: the hook talks to PostgreSQL through ``softwalltime.hook.lookup``
over ``softwalltime.hook.pgwire``, a client of the standard library only (no psycopg2,
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

from ..core import dsn as dsnlib
from ..core.config import libpq_dsn, redact_dsn
from ..errors import ConfigError, DatabaseError
from .keepalive import with_keepalives

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
    libpq = with_keepalives(text)  # a long report or prune notices a dead server too
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


def _migrate(connection: Connection, how: str, revision: str) -> None:
    """Run alembic's upgrade or downgrade; its refusals become one line.

    :raises DatabaseError: an unknown revision, or one that is no target from here
    """
    from alembic import command
    from alembic.util import CommandError

    try:
        getattr(command, how)(alembic_config(connection), revision)
    except CommandError as err:
        known = ", ".join(known_revisions())
        reason = " ".join(str(err).split())
        raise DatabaseError(
            f"db {how} {revision}: {reason} (revisions: base, {known}, head)"
        ) from None


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Upgrade the schema to ``revision`` on this connection (committed by the caller).

    :raises DatabaseError: no such revision, or below the current one
    """
    _migrate(connection, "upgrade", revision)


def downgrade(connection: Connection, revision: str) -> None:
    """Downgrade the schema to ``revision`` (``base`` removes everything).

    :raises DatabaseError: no such revision, or above the current one
    """
    _migrate(connection, "downgrade", revision)


def known_revisions() -> list[str]:
    """The revisions shipped with this version, oldest first."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at, or None for an empty database."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    """The newest revision shipped with this version."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


# The tables whose rows a downgrade must not drop unasked: the history and what was
# learned from it (history_version is a counter the next upgrade starts again).
DATA_TABLES = (
    "finished_jobs",
    "job_reruns",
    "ingest_checkpoints",
    "calibration_cells",
    "calibration_state",
    "learned_cells",
    "learned_state",
)


def table_rows(connection: Connection) -> dict[str, int]:
    """Rows in each of :data:`DATA_TABLES` that exists and holds any."""
    held = {}
    for table in DATA_TABLES:
        exists = connection.execute(
            sa.text("SELECT to_regclass(:name) IS NOT NULL"), {"name": table}
        ).scalar()
        if exists:
            # the table name comes from the fixed tuple above, never from input
            count = connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar()  # noqa: S608
            if count:
                held[table] = int(count)
    return held


def history_rows(connection: Connection) -> str:
    """What the history tables hold, e.g. "1234 rows in finished_jobs"; "" when empty."""
    return ", ".join(f"{n} rows in {t}" for t, n in table_rows(connection).items())


def dropped_rows(connection: Connection, before: dict[str, int]) -> dict[str, int]:
    """Of ``before`` (:func:`table_rows` earlier in this transaction), the tables that are
    gone now, with the rows they held."""
    return {
        table: n
        for table, n in before.items()
        if not connection.execute(
            sa.text("SELECT to_regclass(:name) IS NOT NULL"), {"name": table}
        ).scalar()
    }
