"""Real-PostgreSQL fixtures. Never a mock of the database.

The server comes from, in order:
1. ``SOFTWALLTIME_TEST_DSN`` (a role allowed to CREATE DATABASE);
2. testcontainers, when a Docker engine answers;
3. a private throwaway cluster started with initdb/pg_ctl (softwalltime.db.localpg).
If none works the run fails with a message saying what to install; DB tests never skip.

Isolation: ``conn`` runs each test in a transaction that is rolled back; ``fresh_dsn``
gives a brand-new database cloned from a migrated template, for tests that commit,
spawn processes or use psycopg2 directly.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg2
import pytest
import sqlalchemy as sa
from psycopg2 import sql
from psycopg2.extensions import make_dsn, parse_dsn

from softwalltime.db import engine as db
from softwalltime.db.localpg import INSTALL_HINT, LocalCluster
from softwalltime.replay import native

REPO = Path(__file__).resolve().parents[1]
TEMPLATE_DB = f"swt_template_{os.getpid()}"
_counter = itertools.count()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Never test a compiled simulator older than its sources (make compile rebuilds it)."""
    old = native.stale(str(REPO / "softwalltime" / "replay"))
    if old:
        names = ", ".join(Path(p).name for p in old)
        pytest.exit(
            f"stale compiled simulator ({names}): run `make compile`, or "
            "`python packaging/compile_simulator.py --clean` to run it as plain Python",
            returncode=4,
        )


class PgServer:
    """A PostgreSQL server we may create and drop databases on."""

    def __init__(self, admin_dsn: str, how: str) -> None:
        self.admin_dsn = admin_dsn
        self.how = how
        self._version: int | None = None

    def dsn_for(self, dbname: str) -> str:
        return make_dsn(self.admin_dsn, dbname=dbname)

    def execute(self, statement: sql.Composable) -> None:
        conn = psycopg2.connect(self.admin_dsn)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(statement)
        finally:
            conn.close()

    def create_database(self, name: str, template: str | None = None) -> str:
        stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template:
            # FILE_COPY (PostgreSQL 15+): a small template is copied as files, several times
            # faster than the default WAL_LOG's block by block (one per fresh_dsn test)
            strategy = sql.SQL(" STRATEGY FILE_COPY" if self.version() >= 150000 else "")
            stmt = sql.SQL("CREATE DATABASE {} TEMPLATE {}{}").format(
                sql.Identifier(name), sql.Identifier(template), strategy
            )
        self.execute(stmt)
        return self.dsn_for(name)

    def version(self) -> int:
        """The server's ``server_version_num`` (asked once)."""
        if self._version is None:
            conn = psycopg2.connect(self.admin_dsn)
            try:
                self._version = conn.server_version
            finally:
                conn.close()
        return self._version

    def drop_database(self, name: str) -> None:
        self.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=2).ping()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    env_dsn = os.environ.get("SOFTWALLTIME_TEST_DSN")
    if env_dsn:
        dbname = parse_dsn(env_dsn).get("dbname") or "postgres"
        yield PgServer(make_dsn(env_dsn, dbname=dbname), "SOFTWALLTIME_TEST_DSN")
        return
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16", driver=None) as pg:
            yield PgServer(pg.get_connection_url(), "testcontainers")
        return
    tmp = tempfile.mkdtemp(prefix="swt-pg-")
    try:
        cluster = LocalCluster(tmp)
        cluster.start()
    except Exception as err:
        pytest.fail(f"no PostgreSQL for the tests: {err}. To fix: {INSTALL_HINT}", pytrace=False)
    try:
        yield PgServer(cluster.dsn("postgres"), f"local cluster in {tmp}")
    finally:
        cluster.destroy()


@pytest.fixture(scope="session")
def template_db(pg_server: PgServer) -> Iterator[str]:
    """Name of a database migrated to head, used only as a template (never connected to)."""
    dsn = pg_server.create_database(TEMPLATE_DB)
    engine = db.make_engine(dsn, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        db.upgrade(conn, "head")
        conn.commit()
    engine.dispose()
    yield TEMPLATE_DB
    pg_server.drop_database(TEMPLATE_DB)


@pytest.fixture(scope="session")
def migrated_dsn(pg_server: PgServer, template_db: str) -> Iterator[str]:
    """A database at head shared by the session; tests must not commit into it."""
    name = f"swt_session_{os.getpid()}"
    dsn = pg_server.create_database(name, template=template_db)
    yield dsn
    pg_server.drop_database(name)


@pytest.fixture(scope="session")
def engine(migrated_dsn: str) -> Iterator[sa.Engine]:
    eng = db.make_engine(migrated_dsn)
    yield eng
    eng.dispose()


@pytest.fixture()
def conn(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A connection inside a transaction that is rolled back after the test."""
    with engine.connect() as connection:
        trans = connection.begin()
        try:
            yield connection
        finally:
            trans.rollback()


@pytest.fixture()
def fresh_dsn(pg_server: PgServer, template_db: str) -> Iterator[str]:
    """A brand-new database at head, dropped after the test (commits allowed)."""
    name = f"swt_t_{os.getpid()}_{next(_counter)}"
    dsn = pg_server.create_database(name, template=template_db)
    yield dsn
    pg_server.drop_database(name)


@pytest.fixture()
def empty_dsn(pg_server: PgServer) -> Iterator[str]:
    """A brand-new database with no schema at all (for migration tests)."""
    name = f"swt_empty_{os.getpid()}_{next(_counter)}"
    dsn = pg_server.create_database(name)
    yield dsn
    pg_server.drop_database(name)


@pytest.fixture()
def pbs(monkeypatch):
    """A fresh fake ``pbs`` module installed in sys.modules, as pbs_server provides it; the
    hook path's module state (cached connection, calibration, log route) reset afterwards."""
    import importlib.util
    import logging
    import sys

    from softwalltime.hook import hooklog
    from softwalltime.hook.state import STATE

    spec = importlib.util.spec_from_file_location("pbs", REPO / "tests" / "fakes" / "pbs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pbs", module)
    # The hook imports softwalltime afresh when the package's folders changed on disk (an
    # upgrade), and in a fresh clone writing __pycache__ changes them: modules imported after
    # such a test would then raise exception classes other modules do not catch. Restore.
    ours = {n: m for n, m in sys.modules.items() if n.split(".")[0] == "softwalltime"}
    yield module
    for name in [n for n in sys.modules if n.split(".")[0] == "softwalltime"]:
        if name not in ours:
            del sys.modules[name]
    sys.modules.update(ours)
    STATE.reset()
    logger = logging.getLogger("softwalltime")
    for h in [h for h in logger.handlers if h.get_name() == hooklog.HANDLER_NAME]:
        logger.removeHandler(h)
    logger.propagate = True
    logger.setLevel(logging.NOTSET)


@pytest.fixture()
def fake():
    """``fake(script, **kw)`` starts a FakeServer, closed after the test."""
    servers = []

    def start(script, **kw):
        from helpers_fakepg import FakeServer

        servers.append(FakeServer(script, **kw))
        return servers[-1]

    yield start
    for server in servers:
        server.close()
