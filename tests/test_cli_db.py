"""``softwalltime db``: one-line errors for revisions alembic refuses, ``db current``'s exit
status, and a downgrade that asks for --yes only when it drops rows (issue 21)."""

from __future__ import annotations

import psycopg2
import pytest
from helpers_history import add_jobs

from softwalltime import cli
from softwalltime.db import engine as db


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _revision(dsn):
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT version_num FROM alembic_version")
            return cur.fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize(
    "argv",
    [["upgrade", "9999"], ["downgrade", "--yes", "nosuchrev"], ["downgrade", "nosuchrev"]],
)
def test_an_unknown_revision_is_one_line(capsys, fresh_dsn, argv):
    """Found on a fresh clone: alembic's CommandError came out as a traceback."""
    code, out, err = run(capsys, "--dsn", fresh_dsn, "db", *argv)
    assert code == 1 and out == ""
    (line,) = err.splitlines()
    rev = argv[-1]
    assert line.startswith(f"softwalltime: error: db {argv[0]} {rev}: "), line
    assert f"'{rev}'" in line and "(revisions: base, 0001, 0002" in line
    assert line.endswith(f"{db.head_revision()}, head)")
    assert _revision(fresh_dsn) == db.head_revision()


@pytest.mark.slow
def test_db_current_exits_1_when_behind(capsys, fresh_dsn, empty_dsn):
    """Found on a fresh clone: 'db current' exited 0 with the schema behind."""
    code, out, _ = run(capsys, "--dsn", empty_dsn, "db", "current")
    assert code == 1 and "base (empty)" in out and "behind: run 'softwalltime db upgrade'" in out
    code, out, _ = run(capsys, "--dsn", fresh_dsn, "db", "current")
    assert code == 0 and out.endswith("up to date\n")
    code, _, _ = run(capsys, "--dsn", fresh_dsn, "db", "downgrade", "0004")
    code, out, _ = run(capsys, "--dsn", fresh_dsn, "db", "current")
    assert code == 1 and out.startswith("current: 0004\n")
    conn = psycopg2.connect(fresh_dsn)
    with conn, conn.cursor() as cur:
        cur.execute("UPDATE alembic_version SET version_num = '0099'")
    conn.close()
    code, out, _ = run(capsys, "--dsn", fresh_dsn, "db", "current")
    assert code == 1 and "revision 0099 is newer than this version of softwalltime knows" in out


def test_a_downgrade_that_drops_no_rows_does_not_ask(capsys, fresh_dsn, monkeypatch):
    """Found on a fresh clone: 'db downgrade 0004' warned that it drops tables and rows
    although it removes a trigger (and now the change counter) only."""
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10), (200, 1000, 20)])
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)  # as under cron or a script
    code, out, err = run(capsys, "--dsn", fresh_dsn, "db", "downgrade", "0004")
    assert (code, err) == (0, ""), err
    assert out.endswith("is at revision 0004\n")
    # below 0004 the calibration tables go: they hold rows once calibrate ran
    conn = psycopg2.connect(fresh_dsn)
    with conn, conn.cursor() as cur:
        cur.execute("INSERT INTO calibration_cells VALUES (1, 1, 10, 1, 5.0), (1, 2, 10, 2, 6.0)")
    conn.close()
    code, out, err = run(capsys, "--dsn", fresh_dsn, "db", "downgrade", "0003")
    assert code == 1 and out == ""
    assert err == (
        "softwalltime: error: db downgrade 0003 drops tables and the rows they hold"
        " (2 rows in calibration_cells); nothing done: pass --yes to go ahead\n"
    )
    assert _revision(fresh_dsn) == "0004"  # rolled back whole
    code, out, err = run(capsys, "--dsn", fresh_dsn, "db", "downgrade", "--yes", "0003")
    assert code == 0 and out.endswith("is at revision 0003\n")
    code, out, err = run(capsys, "--dsn", fresh_dsn, "db", "downgrade", "base")
    assert code == 1 and "(2 rows in finished_jobs)" in err
    assert _revision(fresh_dsn) == "0003"
