"""``hooks install|uninstall --qmgr`` that cannot run: one line and exit 1, never a traceback
(found on a fresh clone: FileNotFoundError from subprocess)."""

from __future__ import annotations

import pytest

from softwalltime import cli


@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_a_missing_or_broken_qmgr_is_one_line(capsys, tmp_path, command):
    def run(qmgr: str) -> tuple[int, str]:
        code = cli.main(["--dsn", "host=/nowhere", "hooks", command, "--qmgr", qmgr])
        out, err = capsys.readouterr()
        assert out == "" and "Traceback" not in err
        return code, err

    assert run("/nonexistent/qmgr") == (
        1,
        "softwalltime: error: --qmgr /nonexistent/qmgr: no such file\n",
    )
    plain = tmp_path / "qmgr.txt"
    plain.write_text("")
    assert run(str(plain)) == (1, f"softwalltime: error: --qmgr {plain}: not an executable file\n")
    broken = tmp_path / "qmgr"
    broken.write_text("#!/nonexistent/interpreter\n")
    broken.chmod(0o755)  # executable, but exec fails
    assert run(str(broken)) == (
        1,
        f"softwalltime: error: cannot run {broken}: No such file or directory\n",
    )


def test_install_and_status_run_the_same_qmgr(tmp_path, monkeypatch):
    """Issue 51: one PBS command runner. ``hooks install``/``uninstall`` and ``status``/
    ``refresh`` find qmgr in the same order (here: on PATH, before /etc/pbs.conf's
    PBS_EXEC), and install's 60 s is a per-call limit of that runner."""
    import argparse
    import subprocess

    from softwalltime.cli import hooks
    from softwalltime.core.config import load_settings
    from softwalltime.pbsserver.commands import Pbs

    qmgr = tmp_path / "qmgr"
    qmgr.write_text("#!/bin/sh\nexit 0\n")
    qmgr.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    settings = load_settings(environ={})
    args = argparse.Namespace(qmgr=None, dry_run=False)
    runner = hooks._pbs(args, settings)
    assert runner.argv("qmgr") == Pbs.from_settings(settings).argv("qmgr") == [str(qmgr)]
    calls = []

    def run(argv, **kwargs):
        calls.append((argv, kwargs["timeout"]))
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(subprocess, "run", run)
    hooks._qmgr_run(runner, "list server")
    runner.run("qstat", "-B")
    assert calls == [
        ([str(qmgr), "-c", "list server"], hooks.QMGR_TIMEOUT_S),
        ([runner.path("qstat"), "-B"], 120.0),
    ]
