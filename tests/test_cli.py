"""The softwalltime command, run in-process and as the installed console script."""

import os
import re
import subprocess
import sys

import pytest
import sqlalchemy as sa

from softwalltime import cli
from softwalltime.db import engine as db


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert sub.choices, "no commands registered"
    # The command list under "commands:": one "    NAME  one-line help" per command.
    listed = re.findall(r"^    (\S+) +\S", out.split("\ncommands:\n", 1)[1], re.MULTILINE)
    assert listed == list(sub.choices)
    for name, subparser in sub.choices.items():
        assert subparser.description, f"{name} has no description"


def test_db_help(capsys):
    with pytest.raises(SystemExit):
        cli.main(["db", "--help"])
    out = capsys.readouterr().out
    for word in ("upgrade", "downgrade", "current"):
        assert word in out


@pytest.mark.slow
def test_db_upgrade_downgrade_current(capsys, empty_dsn):
    code, out, _ = run(capsys, "--dsn", empty_dsn, "db", "current")
    assert code == 1 and "base (empty)" in out and "run 'softwalltime db upgrade'" in out
    code, out, _ = run(capsys, "--dsn", empty_dsn, "db", "upgrade")
    assert code == 0, out
    assert f"is at revision {db.head_revision()}" in out
    engine = sa.create_engine(
        "postgresql+psycopg2://", creator=lambda: __import__("psycopg2").connect(empty_dsn)
    )
    with engine.connect() as conn:
        assert "finished_jobs" in sa.inspect(conn).get_table_names()
    code, out, _ = run(capsys, "--dsn", empty_dsn, "db", "current")
    assert code == 0 and "up to date" in out
    code, out, _ = run(capsys, "--dsn", empty_dsn, "db", "downgrade", "base")
    assert code == 0 and "revision base" in out
    with engine.connect() as conn:
        assert "finished_jobs" not in sa.inspect(conn).get_table_names()
    engine.dispose()


def test_wrong_dsn_one_line_error_without_password(capsys):
    code, out, err = run(
        capsys, "--dsn", "postgresql://pbs:s3cret@127.0.0.1:1/hist", "db", "upgrade"
    )
    assert code == 1
    lines = [ln for ln in err.splitlines() if ln.startswith("softwalltime: error:")]
    assert len(lines) == 1
    assert "127.0.0.1:1" in lines[0] and "s3cret" not in err and "Traceback" not in err


@pytest.mark.slow
def test_wrong_dsn_with_debug_shows_traceback():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "softwalltime",
            "--debug",
            "--dsn",
            "host=127.0.0.1 port=1 password=s3cret",
            "db",
            "current",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "s3cret" not in proc.stderr


def test_missing_dsn_says_how_to_give_one(capsys, monkeypatch):
    monkeypatch.delenv("SOFTWALLTIME_DSN", raising=False)
    monkeypatch.delenv("SOFTWALLTIME_CONFIG", raising=False)
    code, _, err = run(capsys, "db", "current")
    assert code == 1 and "SOFTWALLTIME_DSN" in err and "--dsn" in err


def test_config_show_hides_password(capsys):
    code, out, _ = run(capsys, "--dsn", "postgresql://pbs:s3cret@db/hist", "config")
    assert code == 0
    assert "postgresql://pbs:***@db/hist" in out and "s3cret" not in out


@pytest.mark.slow
def test_console_script_is_installed():
    proc = subprocess.run(
        [sys.executable, "-m", "softwalltime", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    from softwalltime import __version__

    assert proc.stdout.strip() == f"softwalltime {__version__}"


def test_closed_pipe_is_quiet():
    """`softwalltime config | head -1`: no traceback when the reader has gone away."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write now fails with EPIPE, deterministically
    proc = subprocess.run(
        [sys.executable, "-m", "softwalltime", "config"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    os.close(write_end)
    assert proc.returncode == 141
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def _all_help_texts():
    """(command path, --help text) for the top parser and every (nested) subcommand."""
    out = []
    todo = [("softwalltime", cli.build_parser())]
    while todo:
        name, parser = todo.pop()
        out.append((name, parser.format_help()))
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                todo.extend((f"{name} {sub}", p) for sub, p in action.choices.items())
    return out


def test_every_help_is_at_most_60_lines(monkeypatch):
    """Issue 51: usage, one paragraph, the options; the rest is the man page's. At 80
    columns, for every command and the softwalltime-ingest script."""
    from softwalltime_ingest.__main__ import build_parser as build_ingest_parser

    from softwalltime.cli.helptext import MAX_HELP_LINES

    monkeypatch.setenv("COLUMNS", "80")
    texts = _all_help_texts() + [("softwalltime-ingest", build_ingest_parser().format_help())]
    lines = {name: len(text.splitlines()) for name, text in texts}
    assert len(lines) > 20 and MAX_HELP_LINES == 60
    assert {name: n for name, n in lines.items() if n > MAX_HELP_LINES} == {}
    assert max(lines.values()) > 40  # the count is of the real text


def test_no_help_names_a_development_checkout_path():
    # Issue 9 item 18: a folder beside the clone exists only beside a development worktree.
    texts = _all_help_texts()
    assert len(texts) > 5
    beside = re.compile(r"\.\./shared|shared/data")
    offenders = [name for name, text in texts if beside.search(text)]
    assert offenders == []
