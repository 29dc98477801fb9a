"""PQStar's fast replay against a slow reference written from the paper's definitions
(rescans, sets), on a slice of a real trace: every target gets the same rule.

The reference recomputes the queue and the running set of every instant by scanning all
jobs, walks the history back job by job to find the boundaries, and intersects running
sets literally; it shares nothing with softwalltime.wait.pqstar but the rank and free-node
criteria (tested alone in test_wait.py).
"""

from __future__ import annotations

import pytest
from helpers_data import TRACES

from softwalltime.replay.trace_readers import read_sources
from softwalltime.wait import pqstar
from softwalltime.wait.pqstar import FAR, IBL, MID, NEAR, WaitParams, replay_waits
from softwalltime.wait.workload import build, large_job_procs

KTH = TRACES / "KTH-SP2-1996-2.1-cln.swf.gz"


def reference_rules(jobs, machine, params):
    quick, sim = params.quick_s, params.similar_s
    n = len(jobs)
    large = large_job_procs(machine)
    sub = [j.submit_s for j in jobs]
    st = [j.start_s for j in jobs]
    en = [max(j.end_s, j.start_s) for j in jobs]

    def running(i, x):  # jobs submitted before job i that run at instant x
        return {a for a in range(i) if st[a] <= x < en[a]}

    def queued(i, x):
        return [a for a in range(i) if st[a] > x]

    def rank(values, i):
        q = queued(i, sub[i])
        return sum(1 for a in q if values[a] < values[i]) / (len(q) + 1)

    procs = [j.procs for j in jobs]
    ert = [j.ert_s for j in jobs]
    n_large = [sum(1 for a in running(i, sub[i]) if procs[a] >= large) for i in range(n)]
    rank_p = [rank(procs, i) for i in range(n)]
    rank_e = [rank(ert, i) for i in range(n)]

    def similar(a, i):
        return procs[a] == procs[i] and abs(ert[a] - ert[i]) <= sim

    rules = []
    for i in range(params.first_target, min(n, params.last_target)):
        t = sub[i]
        b = i
        while b > 0 and n_large[b - 1] == n_large[i]:
            b -= 1
        now = running(i, t)
        m = b
        # literally: B = jobs running at the history job's submit (among those known at t)
        while m > 0 and now & {a for a in range(i) if st[a] <= sub[m - 1] < en[a]}:
            m -= 1

        def started(lo, hi, i=i, t=t):
            return any(similar(a, i) and st[a] <= t for a in range(lo, hi))

        def blocked(lo, i=i, t=t):  # a similar job since lo has waited more than quick
            return any(
                similar(a, i)
                and (
                    (st[a] > t and t - sub[a] > quick)
                    or (params.block_started_slow and st[a] <= t and st[a] - sub[a] > quick)
                )
                for a in range(lo, i)
            )

        if started(b, i) and not blocked(b):
            rules.append(NEAR)
            continue
        if m < b and started(m, b) and not blocked(m):
            known = [
                (a, st[a] - sub[a] <= quick)
                for a in range(b, i)
                if st[a] <= t or t - sub[a] > quick
            ]
            free = machine - sum(procs[a] for a in now)
            if (
                pqstar.rank_threshold_met(rank_p[i], [(rank_p[a], f) for a, f in known])
                or pqstar.rank_threshold_met(rank_e[i], [(rank_e[a], f) for a, f in known])
                or pqstar.free_node_criterion(
                    free, procs[i], ert[i], [(procs[a], ert[a]) for a in queued(i, t)]
                )
            ):
                rules.append(MID)
                continue
        far = [a for a in range(min(m, b)) if similar(a, i) and st[a] <= t]
        if far and all(st[a] - sub[a] <= quick for a in far):
            rules.append(FAR)
        else:
            rules.append(IBL)
    return rules


@pytest.fixture(scope="module")
def kth_slice():
    if not KTH.is_file():
        pytest.fail(f"{KTH} is missing")
    work = build(read_sources([str(KTH)]))
    return work.jobs[:1400]


@pytest.mark.slow
@pytest.mark.parametrize("quick_s, block_started_slow", [(3600, True), (600, True), (3600, False)])
def test_fast_replay_agrees_with_the_reference(kth_slice, quick_s, block_started_slow):
    params = WaitParams(
        quick_s=quick_s,
        block_started_slow=block_started_slow,
        first_target=600,
        last_target=1400,
    )
    fast = replay_waits(kth_slice, 100, params).rule
    slow = reference_rules(kth_slice, 100, params)
    assert fast == slow
    # the slice exercises every rule
    assert {NEAR, MID, FAR, IBL} <= set(fast)


@pytest.mark.slow
def test_only_what_was_known_at_submit_matters(kth_slice):
    """A job's wait is used only once it started: with every start and end after a
    target's submit replaced by "unknown", each method predicts exactly the same."""
    params = WaitParams(first_target=600, last_target=1400)
    res = replay_waits(kth_slice, 100, params)
    for k in range(0, len(res.targets), 37):
        i = res.targets[k]
        t = kth_slice[i].submit_s
        known = [
            j._replace(
                start_s=j.start_s if j.start_s <= t else pqstar.UNKNOWN_S,
                end_s=j.end_s if j.end_s <= t else pqstar.UNKNOWN_S,
            )
            for j in kth_slice[:i]
        ]
        answer = pqstar.predict_one(known, kth_slice[i], 100, params)
        assert answer.rule == res.rule[k]
        assert answer.predicted_s == {m: p[k] for m, p in res.predicted_s.items()}
        assert answer.near_jobs == res.near_jobs[k]
