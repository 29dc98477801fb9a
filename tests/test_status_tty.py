"""``softwalltime status`` as a terminal and Nagios see it (issue 21): colour only on a
terminal and never with NO_COLOR (https://no-color.org); with --nagios a usage error is one
UNKNOWN line and exit 3, not argparse's exit 2 (CRITICAL to Nagios)."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from softwalltime import cli
from softwalltime.cli.status import nagios_requested
from softwalltime.cli.tty import use_color

BIN = Path(sys.executable).parent
ESC = "\x1b["


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    "environ, on_tty",
    [
        ({}, True),
        ({"NO_COLOR": "1"}, False),
        ({"NO_COLOR": "0"}, False),  # any non-empty value, even "0" or "false"
        ({"NO_COLOR": ""}, True),  # empty is unset
        ({"TERM": "dumb"}, False),
        ({"TERM": "xterm-256color"}, True),
    ],
)
def test_use_color(environ, on_tty):
    assert use_color(_Tty(), environ) is on_tty
    assert use_color(io.StringIO(), environ) is False  # not a terminal: never


def _status_on_a_terminal(tmp_path: Path, **env: str) -> str:
    """``softwalltime status`` with its stdout on a pseudo-terminal; what it printed."""
    home = tmp_path / "pbs_home"
    (home / "server_logs").mkdir(parents=True, exist_ok=True)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"pbs_exec": str(tmp_path / "nopbs")}))
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    environ = {k: v for k, v in environ.items() if not k.startswith("SOFTWALLTIME_")}
    environ.update(PBS_HOME=str(home), **env)
    main, child = pty.openpty()
    try:
        proc = subprocess.run(
            [str(BIN / "softwalltime"), "--config", str(cfg), "status"],
            stdout=child,
            stderr=subprocess.PIPE,
            env=environ,
            timeout=60,
            check=False,
        )
        os.close(child)
        child = -1
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(main)
        if child != -1:
            os.close(child)
    assert proc.returncode == 3, proc.stderr  # no PBS here: UNKNOWN
    out = b"".join(chunks).decode()
    assert "softwalltime status: UNKNOWN" in out
    return out


@pytest.mark.slow
def test_the_table_is_coloured_on_a_terminal_unless_no_color(tmp_path):
    assert f"{ESC}35mUNKNOWN" in _status_on_a_terminal(tmp_path)
    assert ESC not in _status_on_a_terminal(tmp_path, NO_COLOR="1")
    assert ESC not in _status_on_a_terminal(tmp_path, TERM="dumb")
    assert ESC in _status_on_a_terminal(tmp_path, NO_COLOR="")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["status", "--nagios", "--since", "soon"], "argument --since: "),
        (["status", "--nagios", "--bogus"], "unrecognized arguments: --bogus"),
        (["status", "--nagios", "--json"], "argument --json: not allowed with argument"),
        (["--bogus", "status", "--nagios"], "unrecognized arguments: --bogus"),
        (["--conf", "/x.json", "status", "--nag", "--since=-1"], "argument --since: "),
        (["status", "--nagios", "--hook"], "argument --hook: expected one argument"),
    ],
)
def test_a_nagios_usage_error_is_unknown(argv, message, capsys):
    assert cli.main(argv) == 3
    out, err = capsys.readouterr()
    assert out.startswith("SOFTWALLTIME UNKNOWN - softwalltime") and message in out, out
    assert out.count("\n") == 1 and err == ""


def test_usage_errors_without_nagios_stay_argparses(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["status", "--since", "soon"])
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "softwalltime status: error: argument --since" in err
    with pytest.raises(SystemExit) as stop:  # --nagios of another command's words
        cli.main(["predict", "--nagios"])
    assert stop.value.code == 2


def test_nagios_help_is_help(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["status", "--nagios", "--help"])
    assert stop.value.code == 0 and "usage: softwalltime status" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, wanted",
    [
        (["status", "--nagios"], True),
        (["status", "--nag"], True),
        (["--config", "status", "status", "--nagios"], True),
        (["--config=/x", "status", "--nagios"], True),
        (["--dsn", "status", "predict", "--nagios"], False),  # the DSN is "status"
        (["status", "--json"], False),
        (["status", "--", "--nagios"], False),
        (["predict", "status", "--nagios"], False),
        ([], False),
    ],
)
def test_nagios_requested(argv, wanted):
    assert nagios_requested(argv) is wanted
