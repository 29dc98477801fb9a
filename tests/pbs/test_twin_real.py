"""A short twin replay in ``make test-pbs``: 36 consecutive KTH-SP2 jobs where they wait,
compressed to about two and a half minutes, run as ``sleep`` jobs on the real server under
fcfs-bf1 with perfect soft walltimes, against ``simulate_pbs`` of the same jobs submitted
at the real release times (``tests/pbs/twin.py``; ``make bench-twin`` is the long one).

Real jobs last a little longer than their ``sleep`` and a cycle can come a second late, so
the order is compared only between jobs whose simulated starts are more than the
tolerance apart.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pbsctl
import pytest
import twin

from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim

TRACE = pbsctl.REPO.parent / "shared" / "data" / "traces" / "KTH-SP2-1996-2.1-cln.swf.gz"
JOBS = 36
CANDIDATES = 16
TARGET_S = 150  # the segment's simulated makespan, compressed
MARGIN_S = 2  # walltime over the run time: PBS never kills a job
TOLERANCE_S = 2
MIN_SAME_ORDER = 0.90  # seen: 425/425 and 440/440 pairs
# Mean wait, real against simulated. Seen: +13 % (submit times taken by the harness) and
# +1.2 % (from the server's etime, as now). Where it drifts: a job the simulator
# starts at once starts 0-2 s later on the server (the cycle, the run request, the MoM;
# 0.7-1.7 s on average in bench-twin's KTH replays) and a job lasts its sleep + 0.3-0.5 s,
# against a mean wait of a few seconds at this compression. Adding 0 or 1 s at random to
# every run time moves the simulated mean wait of this segment by 1 % only.
WAIT_MARGIN = 0.25


def segment() -> tuple[list[twin.TwinJob], int, float]:
    work = sim.read_workload(str(TRACE))
    procs = work.machine_procs
    assert procs == 100
    work = sim.fit_machine(work, procs)
    first, _wait, span = twin.choose_segment(
        work, procs, JOBS, CANDIDATES, pbsched.parse_policy("fcfs-bf1")
    )
    factor = math.ceil(span / TARGET_S)
    return twin.scale(work, first, JOBS, factor, MARGIN_S), procs, factor


@pytest.fixture()
def twin_server(pbs_server: None) -> Iterator[None]:
    with twin.server(100):
        yield


def test_twin_replay_of_kth_fcfs_bf1_perfect(twin_server: None) -> None:
    jobs, procs, factor = segment()
    policy = twin.policy("fcfs-bf1", procs, factor)  # PBS's defaults, compressed
    run = twin.replay(jobs, twin.PERFECT, procs, policy)
    try:
        c = twin.compare(jobs, run.submit, run.real, run.simulated, TOLERANCE_S, 600 / factor)
        text = twin.report(c, jobs, run.submit, run.real, run.simulated, run.ids, first=10)
        m = twin.compare(jobs, run.submit, run.real, run.measured, TOLERANCE_S, 600 / factor)
        text += "\nagainst the run times measured on the server:\n"
        text += twin.report(m, jobs, run.submit, run.real, run.measured, run.ids, first=10)
        print(f"factor {factor}\n{text}")
        assert c.pairs > 100, text  # the segment makes jobs wait: there is an order to check
        assert twin.agreement(c) >= MIN_SAME_ORDER, text
        rel = twin.relative(c.wait_real, c.wait_sim)
        assert rel is not None and abs(rel) <= WAIT_MARGIN, text
    finally:
        twin.purge_all(run.ids)
