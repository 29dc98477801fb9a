"""The throwaway cluster used by tests, the demo and benchmarks."""

import shutil
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
            assert cur.fetchone()[0] == "127.0.0.1"
        conn.close()
        assert localpg.main(["dsn", str(tmp_path)]) == 0
    finally:
        cluster.destroy()
        shutil.rmtree(tmp_path, ignore_errors=True)
    assert not cluster.is_running()
