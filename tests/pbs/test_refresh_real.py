"""``softwalltime refresh`` against the real server (issue 11): jobs queued behind a job
that holds the node get the hook's prediction; newer history arrives; refresh has the hook
predict again; ``qstat -f`` shows the new value; a manager's value is left alone."""

from __future__ import annotations

import json
import subprocess

import pbsctl
from conftest import HOOK, SOFTWALLTIME, seed, v3

from softwalltime.units import parse_duration

H = 3600


def soft(jobid: str) -> int | None:
    value = pbsctl.resource(jobid, "soft_walltime")
    return None if value is None else parse_duration(value)


def refresh(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    cfg = tmp_path / "refresh.json"
    cfg.write_text(json.dumps({"pbs_command_prefix": [str(pbsctl.PBSX)]}))
    return subprocess.run(
        [SOFTWALLTIME, "--config", str(cfg), "refresh", "--hook", HOOK]
        + ["--lock-file", str(tmp_path / "refresh.lock"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_refresh_follows_newer_history_and_keeps_a_managers_value(install, hook_db, jobs, tmp_path):
    # pbs_server's Python keeps modules between hook runs: start from a fresh interpreter
    # (the session restores both attributes)
    pbsctl.qmgr("set server python_restart_max_hooks = 1")
    pbsctl.qmgr("set server python_restart_min_interval = 1")
    install(dsn=hook_db)
    jobs.append(pbsctl.qsub("-l select=1:ncpus=2 -l walltime=00:10:00", script="sleep 300"))
    pbsctl.wait_state(jobs[0], "R")
    ours, managers, held = (pbsctl.qsub("-l walltime=10:00:00") for _ in range(3))
    jobs.extend([ours, managers, held])
    pbsctl.run("qhold", held)
    pbsctl.run("qalter", "-l", "soft_walltime=05:00:00", managers)
    assert pbsctl.job(ours)["job_state"] == "Q"
    assert soft(ours) == soft(held) == v3(10 * H)
    assert soft(managers) == 5 * H

    # nothing new yet: nothing to do
    proc = refresh(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "0 changed, 2 unchanged" in proc.stdout and "set by a manager 1" in proc.stdout

    # alice's newest job used half its walltime: v3 now predicts 0.5 x walltime + 900 s
    seed(hook_db, "alice", [(5 * H, 10 * H)], start=100)
    proc = refresh(tmp_path, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert f"{ours} user=alice walltime=10:00:00: soft_walltime 02:45:00 -> 05:15:00" in proc.stdout
    assert "2 would change" in proc.stdout
    assert soft(ours) == v3(10 * H)  # dry run: nothing altered

    proc = refresh(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "3 queued jobs seen, 2 changed, 0 unchanged, 1 skipped (set by a manager 1)" in (
        proc.stdout
    )
    for job in (ours, held):
        assert soft(job) == 5 * H + 900
        info = pbsctl.job(job)
        assert int(info["Resource_List"]["softwalltime_set"]) == 5 * H + 900  # still ours
        assert info["Resource_List"]["walltime"] == "10:00:00"
        assert info["Variable_List"]["PBS_O_LOGNAME"] == "alice"  # variables untouched
    assert pbsctl.job(held)["job_state"] == "H"
    assert soft(managers) == 5 * H

    # the value refresh had set is still the hook's: a user's qalter predicts again
    pbsctl.as_user(f"qalter -l walltime=20:00:00 {ours}")
    assert soft(ours) == 10 * H + 900


def test_refresh_cannot_run_without_the_hook(pbs_server, tmp_path):
    proc = refresh(tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"softwalltime refresh: error: hook {HOOK!r} is not installed"
