"""Fixtures for the real-PBS suite (``make test-pbs``): the hook inside a real pbs_server.

Every test here is marked ``pbs``; ``make test`` deselects them and ``make test-pbs`` (CI)
runs them. They never skip: without a running OpenPBS the session fails and says what to
run. The session holds the machine-wide PBS lock, gives the hook a throwaway PostgreSQL
on a unix socket (the only way into PBS's network namespace), installs the hook with the
product's own ``softwalltime hooks install`` and leaves the server as it found it.

Set ``SOFTWALLTIME_TEST_BROKEN_HOOK=1`` to install a hook script that accepts every job
and does nothing else: the suite must then fail (a check that it tests the hook at all).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pbsctl
import psycopg2
import pytest
import sqlalchemy as sa

from softwalltime.db import engine as db
from softwalltime.db.localpg import LocalCluster

H = 3600
HOOK = "softwalltime_test"
SOFTWALLTIME = str(Path(sys.executable).with_name("softwalltime"))
# alice's history: her jobs ran at most a quarter of their walltime, so v3 predicts
# 0.25 x walltime + 900 s.
ALICE_HISTORY = [(H, 4 * H), (2 * H, 10 * H)]
# Server attributes the tests change; restored (or unset) at the end of the session.
SERVER_ATTRIBUTES = (
    "python_restart_max_hooks",
    "python_restart_min_interval",
    "python_restart_max_objects",
    "job_history_enable",
    "operators",  # hooks install/uninstall --operator (unset, not emptied: see its test)
)


def v3(walltime_s: int) -> int:
    return walltime_s // 4 + 900


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.pbs)


def seed(dsn: str, user: str, jobs: list[tuple[int, int]], start: int = 1) -> None:
    """Finished jobs of ``user`` (runtime_s, walltime_s), most recent last."""
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            for i, (runtime_s, walltime_s) in enumerate(jobs, start):
                cur.execute(
                    "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username,"
                    " walltime_s, runtime_s, ended_at)"
                    " VALUES ('seed', %s, to_timestamp(%s), %s, %s, %s, %s,"
                    " now() - interval '1 day' + %s * interval '1 minute')",
                    (f"{i}.seed", i, i, user, walltime_s, runtime_s, i),
                )
    finally:
        conn.close()


@pytest.fixture(scope="session")
def pbs_server() -> Iterator[None]:
    """The real server, held exclusively; its attributes restored afterwards."""
    why = pbsctl.available()
    if why:
        pytest.fail(f"real-PBS suite: {why}", pytrace=False)
    with pbsctl.exclusive():
        before = {name: pbsctl.server_attribute(name) for name in SERVER_ATTRIBUTES}
        pbsctl.qmgr("set server job_history_enable = true")
        try:
            yield
        finally:
            for name, value in before.items():
                pbsctl.set_attribute("server", name, value)


@pytest.fixture(scope="session")
def hook_cluster(pbs_server: None) -> Iterator[LocalCluster]:
    tmp = tempfile.mkdtemp(prefix="swt-pbs-")
    cluster = LocalCluster(tmp)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.destroy()
        shutil.rmtree(tmp, ignore_errors=True)


def _new_database(cluster: LocalCluster, name: str) -> str:
    conn = psycopg2.connect(cluster.dsn("postgres"))
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            cur.execute(f'CREATE DATABASE "{name}"')
    finally:
        conn.close()
    dsn = cluster.dsn(name)
    engine = db.make_engine(dsn, poolclass=sa.pool.NullPool)
    with engine.connect() as conn2:
        db.upgrade(conn2, "head")
        conn2.commit()
    engine.dispose()
    return dsn


@pytest.fixture()
def hook_db(hook_cluster: LocalCluster) -> str:
    """A migrated database with alice's history, fresh for each test."""
    dsn = _new_database(hook_cluster, "hook")
    seed(dsn, pbsctl.USER, ALICE_HISTORY)
    return dsn


class Installer:
    """Install the hook with ``softwalltime hooks install``, as an admin would."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.installed = False

    def __call__(self, *options: str, **settings: Any) -> subprocess.CompletedProcess[str]:
        """``hooks install --name HOOK [options]`` with ``settings`` as its config file."""
        cfg = self.workdir / "softwalltime.json"
        cfg.write_text(json.dumps(settings))
        proc = pbsctl.run(
            SOFTWALLTIME, "--config", str(cfg), "hooks", "install", "--name", HOOK, *options,
            timeout=120,
        )  # fmt: skip
        self.installed = True
        if os.environ.get("SOFTWALLTIME_TEST_BROKEN_HOOK"):
            broken = self.workdir / "broken.py"
            broken.write_text("import pbs\npbs.event().accept()\n")
            pbsctl.qmgr(f"import hook {HOOK} application/x-python default {broken}")
        return proc  # type: ignore[no-any-return]

    def uninstall(self) -> None:
        if self.installed:
            pbsctl.run(SOFTWALLTIME, "hooks", "uninstall", "--name", HOOK, check=False)
            self.installed = False


@pytest.fixture()
def install(pbs_server: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installer]:
    installer = Installer(tmp_path_factory.mktemp("hookcfg"))
    try:
        yield installer
    finally:
        installer.uninstall()


@pytest.fixture()
def jobs(pbs_server: None) -> Iterator[list[str]]:
    """Job ids a test submits; all deleted afterwards with their job history, and waited
    for: while a job (a finished one too) holds the hook's resources, ``hooks uninstall``
    cannot delete them, and the server would not be left as found."""
    ids: list[str] = []
    try:
        yield ids
    finally:
        pbsctl.purge(ids)
