"""Paths through a symlink (issue 21: ``make test`` failed with the trace folder a symlink,
because tests compared resolved paths with the path the ingester stores, which is the
absolute path as given, never resolved; status looks checkpoints up by the same path)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psycopg2

from softwalltime import cli
from softwalltime.hook import pgwire
from softwalltime.pbsserver import status

SAMPLE = Path(__file__).resolve().parents[1] / "softwalltime" / "data" / "openpbs-23.06-local.log"


def test_a_symlinked_directory_is_stored_as_given(capsys, fresh_dsn, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "20261122").write_bytes(SAMPLE.read_bytes())
    link = tmp_path / "accounting"
    link.symlink_to(real, target_is_directory=True)
    given = link / "20261122"
    assert cli.main(["--dsn", fresh_dsn, "ingest", "--no-progress", "--dir", str(link)]) == 0
    capsys.readouterr()
    conn = psycopg2.connect(fresh_dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT DISTINCT source_file FROM finished_jobs")
            assert cur.fetchall() == [(os.path.abspath(given),)]
            cur.execute("SELECT path FROM ingest_checkpoints")
            assert cur.fetchall() == [(os.path.abspath(given),)]
    finally:
        conn.close()
    assert os.path.abspath(given) != str(given.resolve())
    # status finds that checkpoint through the same directory: read to the end
    deadline = time.monotonic() + 10
    pg = pgwire.connect(fresh_dsn, deadline)
    try:
        state = status.ingest_state(pg, str(link), deadline)
    finally:
        pg.close()
    assert (state.newest_file, state.lag_records) == (str(given), 0)
    assert state.offset == given.stat().st_size
