"""``softwalltime policy apply / history / revert`` and ``status``'s policy check on the real
OpenPBS server (issue 48): the commands printed change nothing, ``--yes`` sets the
scheduler's job_sort_formula, the server's backfill_depth and eligible_time_enable and
sched_config's strict_ordering (pbs_sched told by SIGHUP), every change is recorded, revert
puts the server back byte for byte, and a ``qmgr`` change made directly is recorded by the
next ``status``. The server's formula, attributes and sched_config are restored afterwards."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pbsctl
import pytest
from conftest import SOFTWALLTIME

from softwalltime.pbsserver import policy
from softwalltime.replay import formula as fm

pytestmark = pytest.mark.pbs

LABEL = "xf2+age72h+len1-bf3"  # built-in resources only (a .rank label needs the resource)
SERVER = ("backfill_depth", "eligible_time_enable")


def sw(cfg: Path, *args: str, sudo: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SUDO_USER", "SOFTWALLTIME_DSN")}
    if sudo:
        env["SUDO_USER"] = sudo
    return subprocess.run(
        [SOFTWALLTIME, "--config", str(cfg), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def history(cfg: Path) -> list[dict]:
    return list(json.loads(ok(sw(cfg, "policy", "history", "--json"))))


def policy_check(cfg: Path) -> dict:
    proc = sw(cfg, "status", "--hook", "swt_policy_no_hook", "--json")
    return next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "policy")


def live() -> tuple[str | None, ...]:
    return (
        pbsctl.sched_attribute("job_sort_formula"),
        *(pbsctl.server_attribute(name) for name in SERVER),
        pbsctl.SCHED_CONFIG.read_text(),
    )


def test_apply_history_revert_and_a_direct_qmgr_change(pbs_server, hook_db, tmp_path):
    cfg = tmp_path / "softwalltime.json"
    cfg.write_text(json.dumps({"pbs_command_prefix": [str(pbsctl.PBSX)], "dsn": hook_db}))
    search = tmp_path / "search.json"
    search.write_text(json.dumps({"recommended": {"label": LABEL}, "candidates": []}))
    expr = fm.expression(fm.parse_label("xf2+age72h+len1"), 1)
    found = live()
    try:
        # printed only: the server as it was, nothing recorded
        out = ok(sw(cfg, "policy", "apply", "--from-search", str(search)))
        assert f"qmgr -c \"set sched job_sort_formula = '{expr}'\"" in out.splitlines()
        assert 'qmgr -c "set server backfill_depth = 3"' in out.splitlines()
        assert out.endswith("# nothing changed: pass --yes to run these and record them\n")
        assert live() == found and history(cfg) == []

        # --yes: set, and recorded after the server's state as first seen
        ok(sw(cfg, "policy", "apply", "--from-search", str(search), "--yes", sudo="alice"))
        assert pbsctl.sched_attribute("job_sort_formula") == expr
        assert [pbsctl.server_attribute(n) for n in SERVER] == ["3", "True"]
        text = pbsctl.SCHED_CONFIG.read_text()
        assert policy.config_value(text, "strict_ordering") == "True ALL"
        applied, seen = history(cfg)
        assert (seen["action"], seen["before"], seen["changed_by"]) == (
            "outside", None, policy.OUTSIDE_BY,
        )  # fmt: skip
        assert (applied["action"], applied["label"]) == ("apply", LABEL)
        assert applied["changed_by"] == "root (sudo: alice)"
        assert applied["before"] == seen["after"]
        assert applied["after"]["job_sort_formula"] == expr
        assert applied["after"]["strict_ordering"] == "True ALL"
        assert policy_check(cfg)["summary"].startswith(f"as recorded (#{applied['id']}, apply")

        # revert: back to the server as found, byte for byte
        ok(sw(cfg, "policy", "revert", "--yes"))
        assert live() == found
        assert history(cfg)[0]["action"] == "revert"

        # again, then qmgr directly: the next status records it, the one after finds it
        ok(sw(cfg, "policy", "apply", LABEL, "--yes"))
        pbsctl.qmgr("set server backfill_depth = 5")
        check = policy_check(cfg)
        assert check["state"] == "OK"
        assert check["summary"].startswith("INFO: changed outside softwalltime, recorded as #")
        assert check["summary"].endswith(": backfill_depth 3 -> 5")
        newest = history(cfg)[0]
        assert (newest["action"], newest["changed_by"]) == ("outside", policy.OUTSIDE_BY)
        assert newest["after"]["backfill_depth"] == "5"
        assert policy_check(cfg)["summary"].startswith(f"as recorded (#{newest['id']}, outside")

        # revert goes back to the policy before the outside change
        ok(sw(cfg, "policy", "revert", "--yes"))
        assert pbsctl.server_attribute("backfill_depth") == "3"
        assert pbsctl.sched_attribute("job_sort_formula") == expr
        assert [r["action"] for r in history(cfg)] == [
            "revert", "outside", "apply", "revert", "apply", "outside",
        ]  # fmt: skip
    finally:
        formula, depth, eligible, text = found
        pbsctl.set_attribute("sched", "job_sort_formula", formula)
        pbsctl.set_attribute("server", "backfill_depth", depth)
        pbsctl.set_attribute("server", "eligible_time_enable", eligible)
        pbsctl.SCHED_CONFIG.write_text(str(text))
        pbsctl.reload_scheduler()
    assert live() == found
