"""The retention timer and cron line of the package (issue 21): daily ``softwalltime db
prune`` as the system user, with the pruner's database role from its own environment file
read after the shared one (the ingester's role may not delete)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from test_packaging import PKG, unit

MAINT = PKG / "libexec" / "softwalltime-maint"


def test_the_prune_unit_runs_daily_as_the_system_user_with_its_own_dsn():
    timer = unit(PKG / "systemd" / "softwalltime-prune.timer")
    assert timer["OnCalendar"] == ["*-*-* 03:17:00"] and timer["Persistent"] == ["true"]
    assert timer["WantedBy"] == ["timers.target"]
    service = unit(PKG / "systemd" / "softwalltime-prune.service")
    assert service["User"] == ["softwalltime"] and service["Type"] == ["oneshot"]
    assert service["ExecStart"] == ["/opt/softwalltime/bin/softwalltime db prune"]
    # later files override earlier ones: the prune file's SOFTWALLTIME_DSN wins
    assert service["EnvironmentFile"] == [
        "-/etc/default/softwalltime",
        "-/etc/sysconfig/softwalltime",
        "-/etc/default/softwalltime-prune",
        "-/etc/sysconfig/softwalltime-prune",
    ]


def test_removal_stops_the_prune_timer_too():
    text = MAINT.read_text()
    assert "softwalltime-prune.timer" in text.split('TIMERS="')[1].split('"')[0]
    assert "softwalltime-prune.service" in text.split('SERVICES="')[1].split('"')[0]


def _cron_prune(tmp_path: Path, files: dict[str, str]) -> str:
    """Run the cron file's prune command with sh, /etc and /opt/softwalltime/bin moved to
    scratch folders and softwalltime a stub that prints the DSN it was given."""
    (line,) = [
        ln
        for ln in (PKG / "softwalltime.cron").read_text().splitlines()
        if ln.endswith(" db prune")
    ]
    fields = line.split(None, 6)
    assert fields[:6] == ["17", "3", "*", "*", "*", "softwalltime"]
    etc, stub = tmp_path / "etc", tmp_path / "bin"
    for sub in ("default", "sysconfig"):
        (etc / sub).mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (etc / name).write_text(text)
    stub.mkdir(exist_ok=True)
    out = tmp_path / "out"
    (stub / "softwalltime").write_text(f'#!/bin/sh\necho "$SOFTWALLTIME_DSN $*" >{out}\n')
    (stub / "softwalltime").chmod(0o755)
    command = fields[6].replace("/etc/", f"{etc}/").replace("/opt/softwalltime/bin/", f"{stub}/")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOFTWALLTIME_")}
    proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return out.read_text()


def test_the_cron_line_uses_the_pruners_dsn_over_the_ingesters(tmp_path):
    shared = "SOFTWALLTIME_DSN=postgresql://softwalltime_ingest@db/swt\n"
    pruner = "SOFTWALLTIME_DSN=postgresql://softwalltime_prune@db/swt\n"
    got = _cron_prune(tmp_path, {"default/softwalltime": shared})
    assert got == "postgresql://softwalltime_ingest@db/swt --quiet db prune\n"
    got = _cron_prune(tmp_path, {"default/softwalltime-prune": pruner})
    assert got == "postgresql://softwalltime_prune@db/swt --quiet db prune\n"
    got = _cron_prune(tmp_path / "el", {"sysconfig/softwalltime-prune": pruner})
    assert got == "postgresql://softwalltime_prune@db/swt --quiet db prune\n"
    # no environment file at all: it still runs (history_keep_days 0 needs no database)
    assert _cron_prune(tmp_path / "none", {}) == " --quiet db prune\n"


def test_every_cron_line_is_quiet_and_discards_nothing():
    """Issue 33: --quiet (warnings and errors only) instead of >/dev/null, so a cron mail
    means something happened, and an error is never thrown away."""
    lines = [
        ln
        for ln in (PKG / "softwalltime.cron").read_text().splitlines()
        if ln.lstrip("#")[:1].isdigit() or ln[:1] == "*"
    ]
    assert len(lines) == 6, lines  # ingest, refresh, status, wait --publish, calibrate, prune
    for line in lines:
        assert "/dev/null" not in line.rsplit(";", 1)[-1], line
        assert "--quiet" in line, line
