"""The site's queues and limits in the one cycle (simulate_pbs with site= and SiteLimits):
the real-server scenarios of tests/pbs/test_queues_real.py, simulated; and a site without
queues or limits changes nothing."""

from __future__ import annotations

import pytest
from test_simulate_reference import workload

from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim
from softwalltime.replay.limits import Limits, SiteLimits, job_entities
from softwalltime.replay.pool import PoolModel
from softwalltime.replay.queues import (
    SKIP_UNROUTED,
    execution_queues,
    route_workload,
    site_order,
    site_rules,
)
from softwalltime.site_file import Queue, Scheduler, Site, Vnode

GREEDY = pbsched.parse_policy("fcfs-greedy")
STRICT = pbsched.parse_policy("fcfs-bf1")


WORKQ = (Queue("workq"),)


def _site(cpus, queues=WORKQ, **kw):
    return Site("t", (Vnode("n", "n", cpus),), queues, "workq", **kw)


def site_starts(site, jobs, policy, limits=True):
    """Starts of ``(user, queue, ncpus, run s, walltime s)``, all submitted at 0, on the
    site's cpus: with its queues and limits, or (``limits`` False) the one pool."""
    rows = [(u, 0, wall, run, cpus) for u, _q, cpus, run, wall in jobs]
    work = sim.make_workload("t", rows, site.ncpus)
    pool = PoolModel(site.ncpus, work.procs)
    if not limits:
        return pbsched.simulate_pbs(work, sim.WalltimeSource(), site.ncpus, policy).start
    queues = execution_queues(site, [q for _u, q, *_ in jobs], work.wall)
    lim = Limits(site, job_entities(queues, work.user, work.user, work.procs))
    model = SiteLimits(pool, lim)
    order = site_order(site, queues, lim.class_key)
    return pbsched.simulate_pbs(
        work, sim.WalltimeSource(), site.ncpus, policy, model=model, site=order
    ).start


# alice's two jobs and root's, 1 cpu each, on 2 cpus (test_queues_real's LIMITED_JOBS)
THREE = [("alice", "", 1, 4, 60), ("alice", "", 1, 4, 60), ("root", "", 1, 4, 60)]
PER_USER = "[u:PBS_GENERIC=1]"


def test_a_run_limit_holds_a_users_second_job_as_on_the_server():
    for site in (
        _site(2, max_run=PER_USER),
        _site(2, (Queue("workq", max_run=PER_USER),)),
        _site(2, max_run_res={"ncpus": PER_USER}),
    ):
        assert site_starts(site, THREE, GREEDY) == [0, 4, 0]
    assert site_starts(_site(2, max_run=PER_USER), THREE, GREEDY, limits=False) == [0, 0, 4]


def test_a_held_job_is_the_top_job_and_holds_another_users_back():
    # test_queues_real's TOP_JOBS on 3 cpus, strict ordering, backfill_depth 1
    jobs = [("alice", "", 1, 5, 10), ("alice", "", 2, 2, 60), ("root", "", 2, 2, 600)]
    site = _site(3, max_run=PER_USER)
    assert site_starts(site, jobs, STRICT) == [0, 5, 7]
    assert site_starts(site, jobs, STRICT, limits=False) == [0, 0, 2]


def test_queue_priority_and_round_robin_order_the_cycle():
    prio = (Queue("workq"), Queue("low", priority=10), Queue("high", priority=100))
    jobs = [("alice", "low", 2, 3, 60), ("alice", "high", 2, 3, 60)]
    assert site_starts(_site(2, prio), jobs, GREEDY) == [3, 0]
    off = _site(2, prio, scheduler=Scheduler(by_queue=False))
    assert site_starts(off, jobs, GREEDY) == [0, 3]
    turns = (Queue("workq"), Queue("a", priority=10), Queue("b", priority=10))
    rr = _site(2, turns, scheduler=Scheduler(by_queue=False, round_robin=True))
    jobs = [("alice", "a", 1, 3, 60), ("alice", "a", 1, 3, 60), ("alice", "b", 1, 3, 60)]
    assert site_starts(rr, jobs, GREEDY) == [0, 3, 0]
    assert site_starts(_site(2, turns), jobs, GREEDY) == [0, 0, 3]


def test_a_job_no_count_lets_run_stays_queued_and_is_no_top_job():
    jobs = [("alice", "", 1, 5, 10), ("root", "", 1, 2, 60)]
    site = _site(2, max_run="[u:alice=0]")
    assert site_starts(site, jobs, STRICT) == [-1, 0]


def test_a_site_without_queues_or_limits_changes_nothing():
    work = workload("kth")
    n = 3000
    work = work._replace(
        user=work.user[:n], submit=work.submit[:n], run=work.run[:n], wall=work.wall[:n],
        procs=work.procs[:n],
    )  # fmt: skip
    procs = 100
    site = _site(procs)
    lim = Limits(site, job_entities(["workq"] * n, work.user, work.user, work.procs))
    assert not lim.any()
    for policy in (STRICT, pbsched.parse_policy("sjf-bf2")):
        plain = pbsched.simulate_pbs(work, sim.make_source("v3"), procs, policy).start
        model = SiteLimits(PoolModel(procs, work.procs), lim)
        order = site_order(site, ["workq"] * n, lim.class_key)
        got = pbsched.simulate_pbs(
            work, sim.make_source("v3"), procs, policy, model=model, site=order
        ).start
        assert got == plain


def test_route_workload_keeps_the_jobs_a_started_queue_takes():
    site = Site(
        "r",
        (Vnode("n", "n", 4),),
        (
            Queue("route", kind="route", destinations=("short", "long")),
            Queue("short", walltime_max=3600),
            Queue("long", walltime_min=3601, walltime_max=7200, started=False),
        ),
        "route",
    )
    rows = [("a", 0, w, 10, 1) for w in (600, 5000, 9000, 3600)]
    work = sim.make_workload("t", rows, 4)
    kept, queues = route_workload(site, work)
    assert queues == ["short", "short"] and kept.wall == [600, 3600]
    assert kept.skipped[SKIP_UNROUTED] == 2  # one to a stopped queue, one to none
    model, order = site_rules(site, kept, queues, PoolModel(4, kept.procs))
    assert isinstance(model, PoolModel)  # no limits: the inner model as it is
    assert order.order([1, 0]) == [1, 0]
    limited = site._replace(max_run="[o:PBS_ALL=1]")
    model, _ = site_rules(limited, kept, queues, PoolModel(4, kept.procs))
    assert isinstance(model, SiteLimits)
    with pytest.raises(ValueError, match="stopped"):
        site_order(site, ["long"])
