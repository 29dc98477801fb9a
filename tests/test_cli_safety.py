"""Issue 9 items 12 and 16: a downgrade that drops history needs --yes; every command that
reads the history says the same thing when the schema is missing."""

import psycopg2
import pytest
from helpers_history import add_jobs

from softwalltime import cli


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _tables(dsn):
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT to_regclass('finished_jobs') IS NOT NULL")
            return cur.fetchone()[0]
    finally:
        conn.close()


def test_downgrade_that_drops_history_needs_yes(capsys, fresh_dsn, monkeypatch):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10), (200, 1000, 20)])
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)  # as under cron or a script
    code, out, err = run(capsys, "--dsn", fresh_dsn, "db", "downgrade", "base")
    assert code == 1 and out == ""
    assert err.strip() == (
        "softwalltime: error: db downgrade base drops tables and the rows they hold"
        " (2 rows in finished_jobs); nothing done: pass --yes to go ahead"
    )
    assert _tables(fresh_dsn)  # nothing dropped
    code, out, err = run(capsys, "--dsn", fresh_dsn, "db", "downgrade", "base", "--yes")
    assert code == 0 and "revision base" in out
    assert not _tables(fresh_dsn)


@pytest.mark.slow
def test_downgrade_asks_on_a_terminal(capsys, fresh_dsn, monkeypatch):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    code, _, _ = run(capsys, "--dsn", fresh_dsn, "db", "downgrade", "base")
    assert code == 1 and _tables(fresh_dsn)
    monkeypatch.setattr("builtins.input", lambda prompt: "yes")
    code, _, _ = run(capsys, "--dsn", fresh_dsn, "db", "downgrade", "base")
    assert code == 0 and not _tables(fresh_dsn)


@pytest.mark.slow
def test_downgrade_of_an_empty_history_needs_no_confirmation(capsys, fresh_dsn, monkeypatch):
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    code, out, _ = run(capsys, "--dsn", fresh_dsn, "db", "downgrade", "base")
    assert code == 0 and "revision base" in out


NO_SCHEMA = (
    "softwalltime: error: the softwalltime tables do not exist in this database:"
    " run 'softwalltime db upgrade' first"
)


@pytest.mark.parametrize(
    "argv",
    [
        ["predict", "--user", "alice", "--walltime", "01:00:00"],
        ["evaluate", "--db"],
        ["ingest", "--no-progress", "softwalltime/data/openpbs-23.06-local.log"],
    ],
    ids=["predict", "evaluate", "ingest"],
)
def test_every_command_says_run_db_upgrade_on_an_empty_database(capsys, empty_dsn, argv):
    code, out, err = run(capsys, "--dsn", empty_dsn, *argv)
    assert code == 1
    assert err.strip().splitlines()[-1] == NO_SCHEMA, err
