"""The throwaway cluster used by tests, the demo and benchmarks."""

import errno
import os
import pwd
import shutil
import socket
import stat
import tempfile
from pathlib import Path

import pytest

from softwalltime.db import localpg
from softwalltime.errors import SoftwalltimeError


def test_missing_server_binaries_say_what_to_install(monkeypatch):
    monkeypatch.setattr(localpg.shutil, "which", lambda name: None)
    monkeypatch.setattr(localpg.glob, "glob", lambda pattern: [])
    with pytest.raises(SoftwalltimeError, match="apt-get install postgresql"):
        localpg.find_bindir()


@pytest.mark.slow
def test_cluster_starts_answers_and_stops():
    import psycopg2

    # Not pytest's tmp_path: when we are root the server runs as 'postgres', which cannot
    # enter pytest's private (0700) base directory.
    tmp_path = Path(tempfile.mkdtemp(prefix="swt-localpg-"))
    cluster = localpg.LocalCluster(tmp_path)
    cluster.start()
    try:
        assert cluster.is_running()
        conn = psycopg2.connect(cluster.dsn("postgres"))
        with conn.cursor() as cur:
            cur.execute("SHOW fsync")
            assert cur.fetchone()[0] == "off"
            cur.execute("SHOW listen_addresses")
            assert cur.fetchone()[0] == ""
        conn.close()
        assert localpg.main(["dsn", str(tmp_path)]) == 0
    finally:
        cluster.destroy()
        shutil.rmtree(tmp_path, ignore_errors=True)
    assert not cluster.is_running()


def _try_connect_as(user, socket_path):
    """Connect to a unix socket as another OS user (we are root): its errno, or 0."""
    entry = pwd.getpwnam(user)
    pid = os.fork()
    if pid == 0:  # the child drops to that user and reports by exit status
        code = 255
        try:
            os.setgroups([])
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(str(socket_path))
            code = 0
        except OSError as err:
            code = err.errno or 254
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.slow
def test_only_the_owner_can_reach_the_cluster():
    """No TCP listener, and the socket's directory is closed to every other local user."""
    import psycopg2

    tmp_path = Path(tempfile.mkdtemp(prefix="swt-localpg-"))
    cluster = localpg.LocalCluster(tmp_path)
    cluster.start()
    try:
        mode = stat.S_IMODE(os.stat(tmp_path).st_mode)
        assert mode == 0o700, oct(mode)
        assert os.stat(tmp_path).st_uid == pwd.getpwnam(cluster.superuser).pw_uid
        # nothing on TCP: the cluster's port refuses on every loopback address
        for family, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                assert sock.connect_ex((addr, cluster.port)) != 0
        # the owner gets in
        psycopg2.connect(cluster.dsn("postgres")).close()
        if os.geteuid() == 0:
            # another user (CI runs as root, so this always runs there) is refused by the
            # file system before PostgreSQL sees anything
            assert _try_connect_as("nobody", cluster.socket_path) == errno.EACCES
    finally:
        cluster.destroy()
        shutil.rmtree(tmp_path, ignore_errors=True)
