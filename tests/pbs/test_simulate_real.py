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

import time
from collections.abc import Iterator
from typing import Any

import pbsctl
import pytest

from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim

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
    return int(time.mktime(time.strptime(info["stime"], "%a %b %d %H:%M:%S %Y")))


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
    for cpus, run, soft in JOBS:
        jobid = pbsctl.qsub(f"-l select=1:ncpus={cpus} -l walltime={WALLTIME_S}", f"sleep {run}")
        jobs.append(jobid)
        pbsctl.run("qalter", "-l", f"soft_walltime={soft}", jobid)
    pbsctl.qmgr("set server scheduling = True")
    for jobid in jobs:
        pbsctl.wait_state(jobid, "F", timeout=120)
    real = [_stime(pbsctl.job(jobid)) for jobid in jobs]
    wrong = [
        (a, b)
        for a in range(len(JOBS))
        for b in range(len(JOBS))
        if expected[a] < expected[b] and real[a] > real[b]
    ]
    assert not wrong, f"simulated starts {expected}, real {[r - min(real) for r in real]}"
