"""Short twin replays in ``make test-pbs``: 36 consecutive KTH-SP2 jobs where they wait,
compressed to about two and a half minutes, run as ``sleep`` jobs on the real server
against ``simulate_pbs`` of the same jobs submitted at the real release times
(``tests/pbs/twin.py``; ``make bench-twin`` is the long one): under fcfs-bf1 with perfect
soft walltimes, and live (``tests/pbs/twin_live.py``: each trace user a Unix user, the hook
with its database and the users' earlier jobs ingested, ingest and refresh on their timers
compressed, the rank sorted by ``sjf.rank``), the simulation then given what the product
set on each job.

Real jobs last a little longer than their ``sleep`` and a cycle can come a second late, so
the order is compared only between jobs whose simulated starts are more than the
tolerance apart.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path

import pbsctl
import pytest
import twin
import twin_live as tl

from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim

TRACE = pbsctl.REPO / "tests" / "data" / "traces" / "KTH-SP2-1996-2.1-cln.swf.gz"
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


HISTORY = 1000  # the trace's jobs before the segment whose users' jobs are ingested


def segment() -> tuple[list[twin.TwinJob], int, float]:
    jobs, procs, factor, _, _ = segment_of_trace()
    return jobs, procs, factor


def segment_of_trace() -> tuple[list[twin.TwinJob], int, float, sim.SimWorkload, int]:
    work = sim.read_workload(str(TRACE))
    procs = work.machine_procs
    assert procs == 100
    work = sim.fit_machine(work, procs)
    first, _wait, span = twin.choose_segment(
        work, procs, JOBS, CANDIDATES, pbsched.parse_policy("fcfs-bf1")
    )
    factor = math.ceil(span / TARGET_S)
    return twin.scale(work, first, JOBS, factor, MARGIN_S), procs, factor, work, first


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


def test_twin_live_replay_of_kth_sjf_rank(twin_server: None, tmp_path: Path) -> None:
    jobs, procs, factor, work, first = segment_of_trace()
    users = work.user[first : first + len(jobs)]
    names = [tl.unix_name(u) for u in users]
    policy = twin.policy("sjf.rank-bf1", procs, factor)
    with tl.unix_users(sorted(set(names))) as created, tl.site(factor) as s:
        assert set(created) <= set(names)
        past = tl.history(work, first, len(jobs), HISTORY, factor, int(time.time()))
        assert {p.user for p in past} & set(names), "no history for the segment's users"
        tl.ingest_history(s, past)
        live = tl.replay(s, jobs, names, procs, policy, factor)
        run, out = live.replay, live.out
        try:
            c = twin.compare(jobs, run.submit, run.real, run.simulated, TOLERANCE_S, 600 / factor)
            text = twin.report(c, jobs, run.submit, run.real, run.simulated, run.ids, first=10)
            text += "\n" + "\n".join(t.summary() for t in live.timers)
            print(f"factor {factor}\n{text}\n{tl.hook_counts(jobs, out)}")
            # the hook set every job's soft walltime (its mark, at most the walltime) and rank
            counts = tl.hook_counts(jobs, out)
            assert counts["soft walltime from the hook"] == len(jobs), (out, text)
            assert counts["rank"] == counts["rank at queuejob"] == len(jobs), (out, text)
            assert all(r is not None and 1 <= r <= j.wall for r, j in zip(out.rank, jobs))
            # the users' history made some soft walltimes shorter than the walltime
            assert counts["soft walltime below the walltime"] > 0, (out, text)
            # the timers ran, without a failure (replay raises on one)
            assert all(len(t.runs) >= 2 for t in live.timers), text
            # every finished job is in the history, under its own user
            assert tl.ingested(s.dsn, run.ids) == dict(zip(run.ids, names))
            fig = tl.report(s, run.epoch, tmp_path / "report.html")
            totals = fig["totals"]
            assert (totals["jobs"], totals["users"]) == (len(jobs), len(set(names))), totals
            page = (tmp_path / "report.html").read_text()
            # its per-user figure names every user; the page its worst users, if any
            per_user, worst = tl.report_users(fig)
            assert sorted(per_user) == sorted(set(names)), per_user
            assert set(worst) <= set(names) and all(n in page for n in worst), worst
            # the scheduler's order with the product's outputs is the model's (seen: 429/429,
            # 428/428 and 426/442 pairs). Not the mean wait: seen +3.1 %, +18.8 % and
            # -71.4 %, the last from one pair: #23 (38 cpus, 139 s) was queued at second 9
            # and #24 (64 cpus, 2 s) at 10; the scheduler's log first considers #23 at 10,
            # with #24 queued, and sjf.rank ran #24 first, where the model starts #23 alone
            # at 9 (a cycle's timing). One of 36 jobs waiting 139 s moves the mean by 4 s.
            assert c.pairs > 100, text
            assert twin.agreement(c) >= MIN_SAME_ORDER, text
        finally:
            twin.purge_all(run.ids)
