"""The sort rank on the real server (issue 17): ``hooks install --rank`` creates the
resource ``softwalltime_rank`` (long, flag r); the hook sets it at queuejob, modifyjob and
runjob; a user can neither request nor alter it; the scheduler's ``job_sort_formula`` reads
it (0 when unset, so ``rank or soft_walltime or walltime`` falls back) and starts jobs in
rank order; ``softwalltime refresh`` keeps it fresh; uninstall deletes the resource.

Only alice can submit here; bob's history is seeded as well, and must change none of
alice's ranks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pbsctl
import pytest
from conftest import ALICE_HISTORY, seed
from test_refresh_real import refresh, soft

from softwalltime.core import rank
from softwalltime.units import qstat_time

RANK = "softwalltime_rank"
SCHED_LOGS = pbsctl.PBS_HOME / "sched_logs"
# alice's jobs per walltime: three each, so the walltime key holds them; their run time is
# the rank. Their largest run/walltime ratio is 1500/1800: v3 predicts 0.83 x walltime +
# 900 s, capped at the walltime. Rank order B < C < A, soft walltime order A < B < C.
RUNS = {1800: 1500, 3600: 100, 7200: 600}
# what the formula reads for a job: its rank, else its soft walltime, else its walltime;
# shortest first (the scheduler runs the highest value first; its threshold is INT_MIN)
SJF_BY_RANK = "-(softwalltime_rank or soft_walltime or walltime)"
# the formula docs/hook.md gives (an expansion factor: needs eligible_time_enable)
EXPANSION = (
    "(eligible_time + (softwalltime_rank or soft_walltime or walltime))"
    " / (softwalltime_rank or soft_walltime or walltime)"
)


def alice_rows() -> list[tuple[int, int, None]]:
    """alice's history as the hook reads it, newest first (ncpus unknown: seeded so)."""
    rows = [(run, wall) for wall, run in RUNS.items() for _ in range(3)]
    return [(r, w, None) for r, w in reversed(ALICE_HISTORY + rows)]


def v3(walltime_s: int) -> int:
    return min(walltime_s, -(-1500 * walltime_s // 1800) + 900)


def ranked(jobid: str) -> int | None:
    value = pbsctl.resource(jobid, RANK)
    return None if value is None else int(value)


def resource_exists(name: str) -> bool:
    return pbsctl.qmgr(f"list resource {name}", check=False).returncode == 0


@pytest.fixture()
def rank_server(install: Any) -> Iterator[list[str]]:
    """Job ids (deleted with their history afterwards); the scheduler's formula, log
    events and the server's scheduling restored; the hook uninstalled, which must delete
    the rank's resource."""
    ids: list[str] = []
    formula, events = (
        pbsctl.sched_attribute("job_sort_formula"),
        pbsctl.sched_attribute("log_events"),
    )
    assert not resource_exists(RANK), "softwalltime_rank left over: delete it first"
    try:
        yield ids
    finally:
        pbsctl.qmgr("set server scheduling = True", check=False)
        if formula is None:
            pbsctl.qmgr("unset sched job_sort_formula", check=False)
        else:
            pbsctl.qmgr(f"set sched job_sort_formula = '{formula}'", check=False)
        if events is not None:
            pbsctl.qmgr(f"set sched log_events = {events}", check=False)
        pbsctl.purge(ids)
        install.uninstall()
        assert not resource_exists(RANK), "hooks uninstall left softwalltime_rank"


def formula_values(since: dict[str, int]) -> dict[str, float]:
    """The scheduler's ``Formula Evaluation = X`` per job since ``since`` (log sizes)."""
    out: dict[str, float] = {}
    for path in sorted(SCHED_LOGS.glob("*")):
        with open(path, "rb") as fh:
            fh.seek(since.get(path.name, 0))
            for line in fh.read().decode("utf-8", "replace").splitlines():
                m = re.search(r";Job;([^;]+);Formula Evaluation = (-?[\d.]+)", line)
                if m:  # the first cycle's: a job that ran is evaluated again with its rank
                    out.setdefault(m.group(1), float(m.group(2)))
    return out


def _stime(jobid: str) -> int:
    stime = qstat_time(pbsctl.job(jobid)["stime"])
    assert stime is not None
    return stime


def qsub(ids: list[str], walltime_s: int, options: str = "") -> str:
    jobid = pbsctl.qsub(f"-l select=1:ncpus=2 -l walltime={walltime_s} {options}", "sleep 1")
    ids.append(jobid)
    return jobid


def test_the_scheduler_starts_jobs_in_rank_order(rank_server: list[str], install, hook_db):
    ids = rank_server
    for wall, run in RUNS.items():
        seed(hook_db, "alice", [(run, wall)] * 3, start=wall)
        seed(hook_db, "bob", [(10, wall)] * 3, start=100000 + wall)  # not alice's
    pbsctl.qmgr("set server scheduling = False")

    # E: queued before the rank was on, so it has a soft walltime and no rank
    install(dsn=hook_db)
    assert not resource_exists(RANK)
    e = qsub(ids, 1800)
    assert soft(e) == 1800 and ranked(e) is None

    # key-mean named: --rank alone installs key-mean-paid since issue 52
    proc = install("--rank", "key-mean", dsn=hook_db)
    assert "rank key-mean in softwalltime_rank" in proc.stdout, proc.stdout
    listed = pbsctl.qmgr(f"list resource {RANK}").stdout
    assert "type = long" in listed and "flag = r" in listed

    a, c, b = (qsub(ids, wall) for wall in (1800, 7200, 3600))
    for job, wall in ((a, 1800), (b, 3600), (c, 7200)):
        assert ranked(job) == RUNS[wall] == rank.key_mean(wall, 2, alice_rows())
        assert soft(job) == v3(wall)
        mark = pbsctl.resource(job, "softwalltime_set")
        assert mark is not None and int(mark) == soft(job)

    # a user can neither request a rank nor alter one; a manager can
    asked = pbsctl.as_user("echo 'sleep 1' | qsub -l softwalltime_rank=1", check=False)
    assert asked.returncode != 0 and "read only or insufficient permission" in asked.stderr
    altered = pbsctl.as_user(f"qalter -l softwalltime_rank=1 {a}", check=False)
    assert altered.returncode != 0 and "read only or insufficient permission" in altered.stderr
    assert ranked(a) == 1500
    # a user's qalter of the walltime: modifyjob ranks for the new walltime
    f = qsub(ids, 1800, "-h")
    assert ranked(f) == 1500
    pbsctl.as_user(f"qalter -l walltime=01:00:00 {f}")
    assert ranked(f) == 100 and soft(f) == 3600

    # the formula is accepted as the docs give it, and reads the rank
    pbsctl.qmgr(f"set sched job_sort_formula = '{EXPANSION}'")
    pbsctl.qmgr(f"set sched job_sort_formula = '{SJF_BY_RANK}'")
    pbsctl.qmgr("set sched log_events = 1023")  # 0x100: "Formula Evaluation = X" per job
    marks = {p.name: p.stat().st_size for p in SCHED_LOGS.glob("*")}
    pbsctl.qmgr("set server scheduling = True")
    for job in (a, b, c, e):
        pbsctl.wait_state(job, "F", timeout=120)
    starts = {job: _stime(job) for job in (a, b, c, e)}
    # one job at a time (each takes the node's 2 cpus): by rank, E (no rank) by its soft
    # walltime, which the unset rank (0) lets the formula fall back to
    assert starts[b] < starts[c] < starts[a] < starts[e], starts
    values = formula_values(marks)
    assert values[b] == -100 and values[c] == -600 and values[a] == -1500
    assert values[e] == -1800  # softwalltime_rank unset reads 0
    assert ranked(a) == 1500  # runjob ranked it again: the same value


def test_refresh_keeps_the_rank_fresh(rank_server: list[str], install, hook_db, tmp_path):
    ids = rank_server
    # alice's 1 h jobs ran 3000 s: v3 predicts 0.83 x 1 h + 900 s, capped at the walltime
    seed(hook_db, "alice", [(3000, 3600)] * 3, start=10)
    pbsctl.qmgr("set server scheduling = False")
    install("--rank", "key-mean", dsn=hook_db)  # named: --rank alone is key-mean-paid
    ours, managers = qsub(ids, 3600), qsub(ids, 3600)
    pbsctl.run("qalter", "-l", "soft_walltime=00:50:00", managers)
    assert ranked(ours) == ranked(managers) == 3000
    assert soft(ours) == 3600 and soft(managers) == 3000

    proc = refresh(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "0 changed (0 ranks), 1 unchanged, 1 skipped (set by a manager 1)" in proc.stdout

    # newer 1 h jobs ran 1000 s: the key's mean (the rank) moves, v3 stays capped
    seed(hook_db, "alice", [(1000, 3600)] * 3, start=20)
    proc = refresh(tmp_path, "--dry-run")
    assert f"{ours} user=alice walltime=01:00:00: softwalltime_rank 3000 s -> 2000 s" in (
        proc.stdout
    )
    assert ranked(ours) == 3000
    proc = refresh(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "2 queued jobs seen, 2 changed (2 ranks), 0 unchanged, 0 skipped" in proc.stdout
    assert ranked(ours) == ranked(managers) == 2000
    assert soft(ours) == 3600 and int(pbsctl.resource(ours, "softwalltime_set") or 0) == 3600
    assert soft(managers) == 3000  # the manager's value kept


def test_key_mean_paid_asks_the_users_history_to_have_paid_for_the_rank(
    rank_server: list[str], install, hook_db
):
    # hooks install --rank key-mean-paid. alice's three 1 h jobs ran 100 s (seeded without
    # a processor count: 1 each): 300 core-seconds of evidence for her key mean of 100 s,
    # 150 s of a 1 h x 2-cpu job; her longer runs (1 h, 2 h) are not consistent with it.
    # The hook ranks the job 3600 - 150 = 3450 s, where key-mean ranks it 100 s.
    ids = rank_server
    seed(hook_db, "alice", [(100, 3600)] * 3, start=10)
    pbsctl.qmgr("set server scheduling = False")
    proc = install("--rank", "key-mean-paid", dsn=hook_db)
    assert "rank key-mean-paid in softwalltime_rank" in proc.stdout, proc.stdout
    job = qsub(ids, 3600)
    rows = [(100, 3600, None)] * 3 + [(r, w, None) for r, w in reversed(ALICE_HISTORY)]
    assert rank.key_mean(3600, 2, rows) == 100
    assert ranked(job) == rank.paid_key_mean(3600, 2, rows) == 3450
    assert soft(job) == 3600 // 4 + 900  # v3: her largest ratio, 1 h of 4 h, + 900 s
