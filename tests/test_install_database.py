"""Issue 50 item 1: install.md's database lines (database, owner, pg_hba.conf, passwords and
passfiles), run as written, as root, against a fresh cluster with Debian's defaults (``peer``
on the local socket, ``scram-sha-256`` over TCP, the socket in ``/var/run/postgresql``); then
the hook predicts a job through its role and passfile, over the socket and over TCP.

The lines are read from the page, never retyped; only the site's paths and values are
replaced by this test's (each must be in the lines, so none goes unreplaced), and the port.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import psycopg2
import pytest
from helpers_history import add_jobs
from helpers_runtime import skip_or_fail

from softwalltime.db import localpg
from softwalltime.hook import pgwire

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "install.md"
MARK = "<!-- database: run by tests/test_install_database.py -->"
HOOK = str(REPO / "hooks" / "softwalltime_hook.py")
SOCKET_DIR = "/var/run/postgresql"  # Debian's, libpq's default there: in the passfile as localhost
H = 3600


def database_lines() -> str:
    """The shell block after the page's marker."""
    text = PAGE.read_text()
    assert MARK in text, f"{PAGE}: no {MARK!r}"
    after = text.split(MARK, 1)[1].lstrip("\n")
    assert after.startswith("```sh\n"), "the marker must be right before a ```sh fence"
    return after[len("```sh\n") :].split("\n```", 1)[0] + "\n"


def page_dsns() -> list[str]:
    """The DSNs the section shows (indented lines)."""
    section = PAGE.read_text().split("## The database", 1)[1]
    return re.findall(r"^    (postgresql://\S+)$", section, re.M)


class Cluster(NamedTuple):
    top: Path
    data: Path
    port: int


def _as_postgres(*argv: str) -> None:
    proc = subprocess.run(
        ["runuser", "-u", "postgres", "--", *argv], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr or proc.stdout


@pytest.fixture()
def debian_cluster() -> Iterator[Cluster]:
    """initdb as Debian's postgresql-common does (peer, scram-sha-256), socket in
    /var/run/postgresql on a free port, TCP on 127.0.0.1; stopped and removed afterwards."""
    if os.geteuid() != 0:
        skip_or_fail("needs root (runuser postgres, the page's lines run as root)", "CI is root")
    try:
        entry = pwd.getpwnam("postgres")
    except KeyError:
        skip_or_fail("no user postgres (Debian's postgresql package makes it)", "apt postgresql")
    if not os.path.isdir(SOCKET_DIR):
        skip_or_fail(f"no {SOCKET_DIR} (Debian's postgresql package makes it)", "apt postgresql")
    bindir = localpg.find_bindir()
    top = Path(tempfile.mkdtemp(prefix="swt-debian-pg-"))
    os.chown(top, entry.pw_uid, entry.pw_gid)
    data = top / "data"
    port = localpg._free_port()
    try:
        _as_postgres(
            str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-E", "UTF8",
            "--auth-local=peer", "--auth-host=scram-sha-256", "--no-sync",
        )  # fmt: skip
        options = (
            f"-c port={port} -c unix_socket_directories={SOCKET_DIR}"
            " -c listen_addresses=127.0.0.1 -c fsync=off"
        )
        _as_postgres(
            str(bindir / "pg_ctl"), "-D", str(data), "-l", str(top / "log"), "-w", "-o",
            options, "start",
        )  # fmt: skip
        yield Cluster(top, data, port)
    finally:
        if (data / "postmaster.pid").exists():
            _as_postgres(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(top)


def test_the_database_lines_of_install_md_then_the_hook_predicts(debian_cluster, pbs, tmp_path):
    home = tmp_path / "root"  # root's home: ~/.pgpass
    home.mkdir()
    hook_pass, timers_pass = tmp_path / "hook.pgpass", tmp_path / "timers.pgpass"
    port = str(debian_cluster.port)
    site = {
        "/etc/postgresql/15/main/pg_hba.conf": str(debian_cluster.data / "pg_hba.conf"),
        "/etc/softwalltime-hook.pgpass": str(hook_pass),
        "/var/lib/softwalltime/.pgpass": str(timers_pass),
        "192.0.2.10": "127.0.0.1",
        "dbhost": "127.0.0.1",
        "5432": port,
    }

    def ours(text: str) -> str:
        for theirs, mine in site.items():
            text = text.replace(theirs, mine)
        return text

    lines = database_lines()
    assert [k for k in site if k not in lines] == []
    hba = (debian_cluster.data / "pg_hba.conf").read_text()
    assert re.search(r"^local\s+all\s+all\s+peer$", hba, re.M)  # Debian's default
    config = tmp_path / "softwalltime.json"
    config.write_text("{}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOFTWALLTIME_", "PG"))}
    env.update(
        HOME=str(home),
        PGPORT=port,  # the lines' 5432, for psql and libpq (they name no port)
        SOFTWALLTIME_CONFIG=str(config),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    proc = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", ours(lines)],
        cwd="/",  # one postgres may enter (psql says so of any other)
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stdout + proc.stderr
    assert "is at revision" in proc.stdout, proc.stdout
    assert "softwalltime_hook" in proc.stdout and "softwalltime_ingest" in proc.stdout
    for path in (home / ".pgpass", hook_pass, timers_pass):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert len(timers_pass.read_text().splitlines()) == 4  # ingest and prune, socket and TCP

    # history for alice, by the owner (its password from root's passfile, as the lines left it)
    owner = (
        f"host={SOCKET_DIR} port={port} dbname=softwalltime user=softwalltime_owner"
        f" passfile={home / '.pgpass'}"
    )
    add_jobs(owner, "alice", [(H, 4 * H, 100), (2 * H, 10 * H, 200)])
    expected = 86400 // 4 + 900  # v3: 24 h x the ratio 0.25, + the 900 s reserve

    dsns = [ours(d) for d in page_dsns()]
    hook_socket = [d for d in dsns if "softwalltime_hook@/" in d]
    hook_tcp = [d for d in dsns if "softwalltime_hook@127.0.0.1" in d]
    assert len(hook_socket) == 1 and len(hook_tcp) == 1, dsns
    for dsn in (hook_socket[0], hook_tcp[0]):
        path = tmp_path / "softwalltime.CF"
        path.write_text(json.dumps({"dsn": dsn}))
        pbs.hook_config_filename = str(path)
        job = pbs.job(resources={"walltime": "24:00:00"}, queue="")
        pbs.new_event(pbs.QUEUEJOB, "alice", job)
        out = pbs.run_hook(HOOK)
        problems = [m for level, m in pbs.logged if level in (pbs.LOG_WARNING, pbs.LOG_ERROR)]
        assert out == {"accepted": True, "message": "", "soft_walltime": expected}, problems
        assert problems == []

    # the timers' roles through their passfile: the ingester's DSNs (socket: libpq's default)
    ingest = [d for d in dsns if "softwalltime_ingest@" in d]
    assert len(ingest) == 2, dsns
    for dsn in ingest:
        conn = psycopg2.connect(dsn, port=port)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT current_user")
                assert cur.fetchone() == ("softwalltime_ingest",)
        finally:
            conn.close()
    # and over TCP with the hook's own client, as refresh's timer would
    conn2 = pgwire.connect(hook_tcp[0], time.monotonic() + 10)
    try:
        assert conn2.query("SELECT current_user") == [("softwalltime_hook",)]
    finally:
        conn2.close()
