"""PBS's own ``estimated.start_time`` for every queued job, and the product's ``wait``
beside it (``tests/pbs/twin_start.py``, issue 47), on a replay of five hand-made jobs on
4 processors: a job holding all four for 20 s, four queued behind it.

With ``backfill_depth`` at least the queue (``fcfs-bf5``, strict_ordering on) the
scheduler calendars every queued job and so sets each one's ``estimated.start_time``
(fifo.cpp:1610-1660, 1788-1809); with PBS's default depth 1 only the first of them gets
one. At each release and every look the recorder reads the estimates and predicts every
queued job's P50 and P90 as ``softwalltime wait`` does from qstat.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import twin
import twin_start as ts

PROCS = 4
J = twin.TwinJob
JOBS = [  # submit, run, wall, procs (seconds): nothing can backfill beside the first
    J(0, 20, 22, 4),
    J(1, 5, 7, 2),
    J(1, 5, 7, 2),
    J(2, 5, 7, 4),
    J(3, 3, 5, 1),
]
SETTLED_S = 2  # a job released this long ago has been through a scheduling cycle


@pytest.fixture()
def four_cpus(pbs_server: None) -> Iterator[None]:
    with twin.server(PROCS):
        yield


def replay(depth: int) -> tuple[ts.Recorder, twin.Replay]:
    policy = twin.policy(f"fcfs-bf{depth}", PROCS, 1.0)
    rec = ts.Recorder(PROCS, policy, 1.0)
    cost: list[ts.SchedCost] = []
    with ts.sched_cost(cost), ts.polling(rec):
        run = twin.replay(JOBS, twin.USERS, PROCS, policy, before_release=rec.look)
    twin.purge_all(run.ids)
    print(f"backfill_depth {depth}: {cost[0]}")  # what it cost the scheduler (pytest -s)
    assert cost[0].cycles > 0, "the scheduler's log shows its cycles"
    return rec, run


def settled(rec: ts.Recorder, run: twin.Replay) -> list[ts.Sample]:
    """The later looks at jobs released at least SETTLED_S before."""
    release = {i: run.epoch + s for i, s in zip(run.ids, run.submit)}
    return [s for s in rec.samples if not s.release and s.at - release[s.job] >= SETTLED_S]


def test_every_queued_job_has_pbs_estimate_with_depth_over_the_queue(four_cpus: None) -> None:
    rec, run = replay(len(JOBS))
    release = {i: run.epoch + s for i, s in zip(run.ids, run.submit)}
    start = {i: run.epoch + s for i, s in zip(run.ids, run.real)}
    at_release = {s.job for s in rec.samples if s.release}
    assert at_release == set(run.ids), "the product predicted every job at its release"
    for s in rec.samples:
        assert s.at <= s.p50 <= s.p90, s
    looks = settled(rec, run)
    waited = [i for i in run.ids if start[i] - release[i] > SETTLED_S + 1]
    assert len(waited) >= 3, f"the four jobs behind the first wait: {run.real}"
    assert {s.job for s in looks} >= set(waited), "every waiting job was looked at"
    none = [s for s in looks if s.pbs == ts.NONE]
    assert not none, f"queued jobs without estimated.start_time: {none}"
    rows = ts.at_release(rec.samples, release, start)
    assert {r.job for r in rows} == set(run.ids)
    assert all(r.pbs != ts.NONE for r in rows), rows
    fig = ts.figures(rows, 1.0)
    assert fig["all"]["jobs"] == len(JOBS) and fig["all"]["pbs_none"] == 0


def test_pbs_default_depth_leaves_queued_jobs_without_estimate(four_cpus: None) -> None:
    rec, run = replay(1)
    looks = settled(rec, run)
    without = {s.job for s in looks if s.pbs == ts.NONE}
    assert without, "depth 1: only the top job is calendared"
    assert len(without) < len({s.job for s in looks}), "but the top job has one"
