"""The hook's own lines as ``softwalltime status --hook NAME`` reads them back.

pbs.logmsg puts no hook name in a server log line, so a hook installed under another name
than ``softwalltime`` tags its lines ``softwalltime[NAME]: ``; status counts only the lines
of the hook it is asked about (found on the real server: it counted every hook's)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from helpers_history import add_jobs

from softwalltime.pbsserver import status as s

REPO = Path(__file__).resolve().parents[1]
HOOK = str(REPO / "hooks" / "softwalltime_hook.py")
WHEN = dt.datetime(2026, 11, 23, 2, 39, 54)


def as_server_log(logged: list[tuple[int, str]]) -> list[str]:
    """pbs.logmsg calls as pbs_server writes them to server_logs/YYYYMMDD."""
    return [
        f"{WHEN:%m/%d/%Y %H:%M:%S};{level:04x};Server@pbshost;Hook;Server@pbshost;{msg}"
        for level, msg in logged
    ]


def run_as(pbs, hook_name: str, config: Path) -> list[str]:
    pbs.hook_config_filename = str(config)
    ev = pbs.new_event(pbs.QUEUEJOB, "alice", pbs.job(resources={"walltime": "10:00:00"}))
    ev.hook_name = hook_name
    pbs.run_hook(HOOK)
    return as_server_log(pbs.logged)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["softwalltime", "softwalltime_test"])
def test_status_counts_the_decisions_of_the_named_hook_only(pbs, fresh_dsn, tmp_path, name):
    add_jobs(fresh_dsn, "alice", [(3600, 4 * 3600, 0)])
    config = tmp_path / "hook.CF"
    config.write_text(json.dumps({"dsn": fresh_dsn}))
    lines = run_as(pbs, name, config)
    other = "swt_other" if name == "softwalltime" else "softwalltime"
    lines += run_as(pbs, other, config)
    mine = s.parse_hook_log(lines, WHEN, name)
    assert (mine.set, mine.events) == (1, 1), lines
    assert s.parse_hook_log(lines, WHEN, other).set == 1
    assert s.parse_hook_log(lines, WHEN, "nosuchhook").events == 0


def test_status_counts_the_failures_of_the_named_hook_only(pbs, tmp_path):
    config = tmp_path / "hook.CF"
    config.write_text(json.dumps({"dsn": f"host={tmp_path}/nodb", "connect_timeout_s": 0.2}))
    lines = run_as(pbs, "softwalltime_test", config) + run_as(pbs, "softwalltime", config)
    ours = s.parse_hook_log(lines, WHEN, "softwalltime_test")
    assert dict(ours.failures) == {"DatabaseError": 1}, lines
    assert ours.first is not None and ours.first.startswith("job left unchanged after")
    assert sum(";softwalltime[softwalltime_test]: job left unchanged" in ln for ln in lines) == 1
    assert dict(s.parse_hook_log(lines, WHEN, "softwalltime").failures) == {"DatabaseError": 1}
