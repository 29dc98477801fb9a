"""The policy simulator against the real PBS scheduler (``make test-pbs``).

A dozen seconds of ``sleep`` jobs on the 2-core node, all queued before the scheduler may
run (``scheduling = False``), their soft walltimes set by the manager (``qalter``, as the
hook would), a ``job_sort_formula`` set with ``qmgr``: the real scheduler must start them
in the order :func:`softwalltime.replay.pbsched.simulate_pbs` predicts for the same workload
and settings. Real jobs take a little longer than their ``sleep`` (start and exit), so
only the order is compared: a job the simulator starts earlier than another must not start
later on the server (equal simulated starts may come in either order).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pbsctl
import pytest

from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim
from softwalltime.units import qstat_time

NODE_CPUS = 2
# (ncpus, sleep s, soft_walltime s); walltime 10 min. Sorted shortest soft_walltime first:
# J3, J1, J2, J4, J5, J0. Greedy (strict_ordering false, PBS's default): J3 (2 cpus) runs
# first; at its end J1 and J2; J4 at J2's end; J5 at J4's end while J1 still runs; the
# wide J0, first in FCFS order, is passed over until the node is empty.
JOBS = [
    (2, 3, 60),
    (1, 8, 20),
    (1, 3, 30),
    (2, 3, 10),
    (1, 3, 40),
    (1, 3, 50),
]
WALLTIME_S = 600


class _Soft(sim.EstimateSource):
    name = "soft_walltime"

    def on_submit(self, j: int, now: int) -> int:
        return JOBS[j][2]


def simulated_starts(policy: pbsched.Policy) -> list[int]:
    rows = [(pbsctl.USER, 0, WALLTIME_S, run, cpus) for cpus, run, _soft in JOBS]
    work = sim.make_workload("real", rows, NODE_CPUS)
    return pbsched.simulate_pbs(work, _Soft(), NODE_CPUS, policy).start


def _stime(info: dict[str, Any]) -> int:
    stime = qstat_time(info["stime"])
    assert stime is not None
    return stime


def _assert_real_order(
    specs: list[tuple[int, int, int]], expected: list[int], jobs: list[str]
) -> None:
    """Submit ``specs`` (ncpus, sleep s, soft_walltime s) while scheduling is off, then let
    the real scheduler run them: a job simulated to start before another must not start
    after it on the server."""
    for cpus, run, soft in specs:
        jobid = pbsctl.qsub(f"-l select=1:ncpus={cpus} -l walltime={WALLTIME_S}", f"sleep {run}")
        jobs.append(jobid)
        pbsctl.run("qalter", "-l", f"soft_walltime={soft}", jobid)
    pbsctl.qmgr("set server scheduling = True")
    for jobid in jobs:
        pbsctl.wait_state(jobid, "F", timeout=120)
    real = [_stime(pbsctl.job(jobid)) for jobid in jobs]
    wrong = [
        (a, b)
        for a in range(len(specs))
        for b in range(len(specs))
        if expected[a] < expected[b] and real[a] > real[b]
    ]
    assert not wrong, f"simulated starts {expected}, real {[r - min(real) for r in real]}"


@pytest.fixture()
def sort_formula(pbs_server: None) -> Iterator[None]:
    """The scheduler's job_sort_formula and the server's scheduling, restored afterwards."""
    out = pbsctl.qmgr("list sched").stdout
    before = [ln.split("=", 1)[1].strip() for ln in out.splitlines() if "job_sort_formula" in ln]
    try:
        yield
    finally:
        pbsctl.qmgr("set server scheduling = True", check=False)
        if before:
            pbsctl.qmgr(f"set sched job_sort_formula = '{before[0]}'", check=False)
        else:
            pbsctl.qmgr("unset sched job_sort_formula", check=False)


def test_real_scheduler_starts_jobs_in_the_simulated_order(
    sort_formula: None, jobs: list[str]
) -> None:
    policy = pbsched.parse_policy("sjf-greedy")
    expected = simulated_starts(policy)
    assert expected == [12, 3, 3, 0, 6, 9]  # the order worked out above

    setting = next(s for s in pbsched.pbs_settings(policy) if "job_sort_formula" in s)
    formula = setting.split("=", 1)[1].strip().strip("'\"")
    pbsctl.qmgr("set server scheduling = False")
    pbsctl.qmgr(f"set sched job_sort_formula = '{formula}'")
    _assert_real_order(JOBS, expected, jobs)


# strict_ordering with backfill_depth 1, FCFS (no formula): (ncpus, sleep s, soft_walltime s).
# J0 starts; J1 (2 cpus) is the top job, reserved at J0's soft end (6 s). J3 ends before it
# by its soft walltime (3 s) but not by its walltime (10 min), and PBS checks a job against
# a top job with its walltime (check.cpp, the hard duration; this test found it: with soft
# walltimes the simulator had J3 backfilled at once), so J2 and J3 wait for J1's end.
# Greedy (PBS's default) would start J2 at once and J3 before J1.
STRICT_JOBS = [(1, 6, 6), (2, 3, 3), (1, 8, 8), (1, 3, 3)]
SCHED_CONFIG = pbsctl.PBS_HOME / "sched_priv" / "sched_config"
SCHED_LOCK = pbsctl.PBS_HOME / "sched_priv" / "sched.lock"


def _reload_scheduler() -> None:
    # pbs_sched re-reads sched_config on SIGHUP (its pid is in sched_priv/sched.lock).
    pid = SCHED_LOCK.read_text().split()[0]
    pbsctl.run("kill", "-HUP", pid)


@pytest.fixture()
def strict_ordering(sort_formula: None) -> Iterator[None]:
    """sched_config's strict_ordering True and backfill_depth 1, both restored afterwards."""
    before = SCHED_CONFIG.read_text()
    depth = pbsctl.server_attribute("backfill_depth")
    lines = [
        "strict_ordering: True\tALL" if line.startswith("strict_ordering:") else line
        for line in before.splitlines()
    ]
    assert lines != before.splitlines(), "no strict_ordering line in sched_config"
    SCHED_CONFIG.write_text("\n".join(lines) + "\n")
    try:
        pbsctl.qmgr("set server backfill_depth = 1")
        _reload_scheduler()
        yield
    finally:
        SCHED_CONFIG.write_text(before)
        _reload_scheduler()
        if depth is None:
            pbsctl.qmgr("unset server backfill_depth", check=False)
        else:
            pbsctl.qmgr(f"set server backfill_depth = {depth}", check=False)


def _simulated(jobs: list[tuple[int, int, int]], policy: pbsched.Policy) -> list[int]:
    class Soft(sim.EstimateSource):
        name = "soft_walltime"

        def on_submit(self, j: int, now: int) -> int:
            return jobs[j][2]

    rows = [(pbsctl.USER, 0, WALLTIME_S, run, cpus) for cpus, run, _soft in jobs]
    work = sim.make_workload("real", rows, NODE_CPUS)
    return pbsched.simulate_pbs(work, Soft(), NODE_CPUS, policy).start


def test_real_strict_ordering_backfills_only_what_ends_before_the_top_job(
    strict_ordering: None, jobs: list[str]
) -> None:
    policy = pbsched.parse_policy("fcfs-bf1")  # backfilling by walltime: the default
    assert policy.strict_ordering and policy.backfill_depth == 1
    expected = _simulated(STRICT_JOBS, policy)
    assert expected == [0, 6, 9, 9]  # the order worked out above
    # Backfilling by the soft walltime (the EASY model) and greedy predict other orders.
    easy = pbsched.parse_policy("fcfs-bf1", backfill_by=pbsched.ESTIMATE)
    assert _simulated(STRICT_JOBS, easy) == [0, 6, 9, 0]
    assert _simulated(STRICT_JOBS, pbsched.parse_policy("fcfs-greedy")) == [0, 9, 0, 6]

    pbsctl.qmgr("set server scheduling = False")
    pbsctl.qmgr("unset sched job_sort_formula", check=False)
    _assert_real_order(STRICT_JOBS, expected, jobs)
