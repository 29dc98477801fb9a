"""When will my job start, on the real server (issue 20): a job queued behind a full node
is in the database's live states after an ingest of the real accounting log,
``softwalltime wait JOBID`` answers for it, ``wait --publish`` sets its
``Resource_List.softwalltime_wait``, and alice reads it with her own ``qstat -f`` (and
cannot set it)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pbsctl
import psycopg2
from conftest import SOFTWALLTIME, _new_database

from softwalltime.pbsserver import publish

RESOURCE = publish.RESOURCE


def softwalltime(dsn: str, tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    cfg = tmp_path / "wait.json"
    cfg.write_text(json.dumps({"pbs_command_prefix": [str(pbsctl.PBSX)]}))
    return subprocess.run(
        [SOFTWALLTIME, "--config", str(cfg), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=dict(os.environ, SOFTWALLTIME_DSN=dsn),
    )


def test_a_job_queued_behind_a_full_node_is_predicted_and_its_owner_sees_it(
    hook_cluster, jobs, tmp_path
):
    dsn = _new_database(hook_cluster, "waitreal")
    # the node's 2 processors, held for 5 minutes; alice's 1-processor job waits behind
    jobs.append(pbsctl.qsub("-l select=1:ncpus=2 -l walltime=00:10:00", script="sleep 300"))
    blocker = jobs[-1]
    pbsctl.wait_state(blocker, "R")
    jobs.append(pbsctl.qsub("-l walltime=00:20:00", script="sleep 1"))
    mine = jobs[-1]
    assert pbsctl.job(mine)["job_state"] == "Q"

    proc = softwalltime(dsn, tmp_path, "ingest", "--no-progress", "--dir", str(pbsctl.ACCOUNTING))
    assert proc.returncode == 0, proc.stderr
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT job_id, state, username, ncpus, walltime_s FROM live_jobs"
            " WHERE job_id IN (%s, %s) ORDER BY job_id",
            (blocker, mine),
        )
        assert sorted(cur.fetchall()) == sorted(
            [(blocker, "running", "alice", 2, 600), (mine, "queued", "alice", 1, 1200)]
        )
    conn.close()

    proc = softwalltime(dsn, tmp_path, "wait", mine, "--machine-procs", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["job_id"] == mine and answer["source"] == "database"
    assert answer["decided_by"] in ("near", "mid", "far", "ibl")
    assert answer["quick_starter"] == (answer["decided_by"] != "ibl")
    assert answer["running"] >= 1 and answer["queued"] >= 1
    assert 0 <= answer["database_lag_s"] <= 300  # the newest record: this test's qsub
    text = softwalltime(dsn, tmp_path, "wait", mine, "--machine-procs", "2")
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"job {mine} (alice, 1 processors): queued for ")
    proc = softwalltime(dsn, tmp_path, "wait", blocker)
    assert proc.returncode == 1 and f"job {blocker} is running" in proc.stderr

    had_resource = pbsctl.qmgr(f"list resource {RESOURCE}", check=False).returncode == 0
    try:
        proc = softwalltime(dsn, tmp_path, "wait", "--publish", "--machine-procs", "2")
        assert proc.returncode == 0, proc.stderr
        assert "publish: " in proc.stdout and " 0 errors" in proc.stdout
        # what alice's own qstat shows her
        seen = pbsctl.as_user(f"/opt/pbs/bin/qstat -f {mine}").stdout
        lines = [x for x in seen.splitlines() if f"Resource_List.{RESOURCE} = " in x]
        assert len(lines) == 1, (proc.stdout, seen)
        line = lines[0]
        shown = line.split(" = ", 1)[1].strip()
        parsed = publish.parse_value(shown)
        assert parsed is not None, shown
        quick, start_s = parsed
        assert quick == answer["quick_starter"]
        assert abs(start_s - answer["starts_by_s"]) <= 300, (shown, answer["starts_by_s"])
        # users read it, cannot set it
        forged = pbsctl.as_user(
            f"/opt/pbs/bin/qalter -l {RESOURCE}=quick_starter:by_now {mine}", check=False
        )
        assert forged.returncode != 0
        assert pbsctl.resource(mine, RESOURCE) == shown
        # a second run changes nothing: the answer is the same
        again = softwalltime(dsn, tmp_path, "wait", "--publish", "--machine-procs", "2")
        assert again.returncode == 0, again.stderr
        assert " 0 changed" in again.stdout
    finally:
        pbsctl.purge(jobs)  # with their history: PBS refuses while a job holds it
        jobs.clear()
        if not had_resource:
            # PBS refuses while a job (finished ones in its history too) holds it
            pbsctl.qmgr(f"delete resource {RESOURCE}", check=False)


SCHED_CONFIG = pbsctl.PBS_HOME / "sched_priv" / "sched_config"


def _scheduler_hup() -> None:
    pid = subprocess.run(["pidof", "pbs_sched"], capture_output=True, text=True, check=True)
    for p in pid.stdout.split():
        os.kill(int(p), 1)  # SIGHUP: pbs_sched reads sched_config again


def _estimate(jobid: str, other_than: int | None = None, timeout: float = 60) -> int:
    """The scheduler's estimated.start_time of a job (a new cycle asked for each look)."""
    from softwalltime.units import qstat_time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pbsctl.qmgr("set server scheduling = true")
        value = qstat_time(pbsctl.job(jobid).get("estimated", {}).get("start_time"))
        if value is not None and value != other_than:
            return value
        time.sleep(0.5)
    raise pbsctl.PbsError(f"{jobid}: no new estimated.start_time within {timeout} s")


def test_compared_with_pbss_own_estimate_with_walltimes_and_soft_walltimes(
    hook_cluster, jobs, tmp_path
):
    """With strict_ordering on, the scheduler plans the job queued behind the full node and
    sets its estimated.start_time (qstat -T): from the running job's walltime, then from its
    soft walltime once a manager sets one. `wait JOBID --source qstat` shows it next to
    ours; all three against the start the job really got."""
    dsn = _new_database(hook_cluster, "waitpbs")
    original = SCHED_CONFIG.read_text()
    fuzzy = pbsctl.sched_attribute("opt_backfill_fuzzy")
    assert fuzzy is None, f"opt_backfill_fuzzy = {fuzzy} left over: unset it first"
    assert "\nstrict_ordering: false\tALL\n" in original
    SCHED_CONFIG.write_text(original.replace("strict_ordering: false", "strict_ordering: true"))
    _scheduler_hup()
    try:
        jobs.append(pbsctl.qsub("-l select=1:ncpus=2 -l walltime=00:10:00", script="sleep 40"))
        blocker = jobs[-1]
        pbsctl.wait_started(blocker)
        blocker_start = qstat_time_of(blocker, "stime")
        jobs.append(pbsctl.qsub("-l walltime=00:20:00", script="sleep 1"))
        mine = jobs[-1]
        by_walltime = _estimate(mine)
        assert by_walltime - blocker_start == 600  # PBS plans with the 10 min walltime
        pbsctl.run("qalter", "-l", "soft_walltime=00:01:00", blocker)
        by_soft = _estimate(mine, other_than=by_walltime)
        assert by_soft - blocker_start == 60  # and with a soft walltime where set

        proc = softwalltime(
            dsn, tmp_path, "ingest", "--no-progress", "--dir", str(pbsctl.ACCOUNTING)
        )
        assert proc.returncode == 0, proc.stderr
        proc = softwalltime(
            dsn, tmp_path, "wait", mine, "--source", "qstat", "--machine-procs", "2", "--json"
        )
        assert proc.returncode == 0, proc.stderr
        ours = json.loads(proc.stdout)
        assert ours["pbs_estimated_start_s"] == by_soft
        asked = ours["starts_by_s"] - ours["predicted_wait_s"]
        # the start time (issue 35): PBS's method, run by our scheduler model from qstat's
        # queue, is PBS's own calendar; the P50 and P90 from the history lie after now
        start = ours["start"]
        assert start["pbs_method_s"] == by_soft
        assert asked <= start["p50_s"] <= start["p90_s"]
        # the scheduler's opt_backfill_fuzzy, read with the real qmgr: unset is PBS's 60 s
        assert (start["backfill_fuzzy_s"], start["backfill_fuzzy_from"]) == (60, "the scheduler's")
        pbsctl.qmgr("set sched opt_backfill_fuzzy = high")
        proc = softwalltime(
            dsn, tmp_path, "wait", mine, "--source", "qstat", "--machine-procs", "2", "--json"
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["start"]["backfill_fuzzy_s"] == 3600
        pbsctl.wait_state(mine, "RF", timeout=120)
        started = qstat_time_of(mine, "stime")
        assert blocker_start + 40 <= started <= by_soft + 5
        print(
            f"\n{mine} asked at {asked}: ours"
            f" {'quick starter, by' if ours['quick_starter'] else 'predicted'}"
            f" +{ours['starts_by_s'] - asked} s ({ours['decided_by']}); PBS by walltime"
            f" +{by_walltime - asked} s, by soft walltime +{by_soft - asked} s; start time"
            f" P50 +{start['p50_s'] - asked} s, P90 +{start['p90_s'] - asked} s; started"
            f" +{started - asked} s"
        )
        if ours["quick_starter"]:
            assert started <= ours["starts_by_s"]
    finally:
        pbsctl.qmgr("unset sched opt_backfill_fuzzy", check=False)
        SCHED_CONFIG.write_text(original)
        _scheduler_hup()


def qstat_time_of(jobid: str, key: str) -> int:
    from softwalltime.units import qstat_time

    value = qstat_time(pbsctl.job(jobid).get(key))
    assert value is not None, (jobid, key)
    return value
