"""Run limits in the scheduler model (replay/limits.py)."""

from __future__ import annotations

import random

import pytest

from softwalltime.errors import ParseError
from softwalltime.replay.limits import (
    GENERIC,
    JobEntity,
    Limits,
    LimitSet,
    SiteLimits,
    entity_limit,
    job_entities,
    parse_limits,
)
from softwalltime.replay.machine import LIMITED, NEVER, OK
from softwalltime.replay.pool import PoolModel
from softwalltime.replay.profile import Profile
from softwalltime.site_file import Queue, Site, Vnode


def test_pbs_spelling_is_parsed():
    got = parse_limits(
        "[o:PBS_ALL=10],[u:PBS_GENERIC=2], [g:grp=4],[u:alice=1],[p:'a b'=3]", "max_run"
    )
    assert got == LimitSet(10, {GENERIC: 2, "alice": 1}, {"grp": 4}, {"a b": 3})
    assert parse_limits(None, "x") == LimitSet() and parse_limits("", "x").empty()


@pytest.mark.parametrize(
    "text",
    [
        "[u:alice]",
        "[x:alice=1]",
        "[u:PBS_ALL=1]",
        "[o:alice=1]",
        "[u:alice=-1]",
        "u:alice=1",
        "[u:alice=1],",
        "[u:al ice=1]",
        "[u:a/b=1]",
    ],
)
def test_a_bad_limit_is_refused_with_where_it_is(text):
    with pytest.raises(ParseError, match="queue q max_run"):
        parse_limits(text, "queue q max_run")


def test_a_named_limit_replaces_the_generic_one_even_when_higher():
    lim = {GENERIC: 1, "alice": 3}
    assert entity_limit(lim, "alice") == 3
    assert entity_limit(lim, "bob") == 1
    assert entity_limit({}, "bob") is None


def _site(**kw):
    queues = (Queue("a", max_run=kw.pop("qa", None), max_run_res=kw.pop("qa_res", {})), Queue("b"))
    return Site("s", (Vnode("n", "n", 8),), queues, "a", **kw)


def _jobs(*specs):
    return [JobEntity(q, u, u + "g", "_pbs_project_default", p) for q, u, p in specs]


def test_server_max_run_per_user_holds_a_users_second_job_not_another_users():
    jobs = _jobs(("a", "alice", 1), ("b", "alice", 1), ("a", "bob", 1))
    lim = Limits(_site(max_run="[u:PBS_GENERIC=1]"), jobs)
    assert [lim.check(j) for j in range(3)] == [OK, OK, OK]
    lim.start(0)
    assert [lim.check(1), lim.check(2)] == [LIMITED, OK]  # server: across queues
    lim.release(0)
    assert lim.check(1) == OK


def test_queue_max_run_counts_only_its_queue():
    jobs = _jobs(("a", "alice", 1), ("a", "alice", 1), ("b", "alice", 1))
    lim = Limits(_site(qa="[u:PBS_GENERIC=1]"), jobs)
    lim.start(0)
    assert [lim.check(1), lim.check(2)] == [LIMITED, OK]


def test_max_run_res_ncpus_allows_up_to_the_limit_and_overall_counts_everyone():
    jobs = _jobs(("a", "alice", 2), ("a", "alice", 2), ("a", "alice", 1), ("a", "bob", 3))
    lim = Limits(_site(max_run_res={"ncpus": "[u:PBS_GENERIC=3]"}), jobs)
    lim.start(0)
    assert [lim.check(1), lim.check(2), lim.check(3)] == [LIMITED, OK, OK]
    overall = Limits(_site(max_run="[o:PBS_ALL=1]"), jobs)
    overall.start(0)
    assert overall.check(3) == LIMITED


def test_group_limits_and_a_job_that_can_never_satisfy_one():
    jobs = _jobs(("a", "alice", 1), ("a", "alice", 1), ("a", "bob", 5))
    lim = Limits(
        _site(max_run="[g:other=0],[g:PBS_GENERIC=1]", qa_res={"ncpus": "[o:PBS_ALL=4]"}), jobs
    )
    assert lim.can_ever_run(0) and not lim.can_ever_run(2)  # 5 cpus > queue a's 4
    lim.start(0)
    assert lim.check(1) == LIMITED  # group alice's generic limit 1
    never = Limits(_site(max_run="[u:alice=0]"), jobs)
    assert not never.can_ever_run(0) and never.can_ever_run(2)


def test_free_at_is_when_enough_of_the_entitys_jobs_have_ended():
    jobs = _jobs(("a", "alice", 1), ("a", "bob", 1), ("a", "alice", 1), ("a", "alice", 1))
    lim = Limits(_site(max_run="[u:PBS_GENERIC=1]"), jobs)
    lim.start(0)
    lim.start(1)
    ends = [(50, 1), (100, 0)]
    assert lim.free_at(2, ends, 10) == 100  # bob's end frees nothing for alice
    assert lim.check(2) == LIMITED  # counts as they were
    assert lim.free_at(0, [], 10) is None  # alice's own job holds her: no end to wait for
    assert Limits(_site(), jobs).free_at(2, [], 10) == 10
    never = Limits(_site(max_run="[u:alice=0]"), jobs)
    never.start(1)
    assert never.free_at(2, [(50, 1)], 10) is None


def _check_by_definition(lim, j):
    # check's definition: each limit of the server and of the job's queue on each of its
    # entities, read from the parsed limits
    job = lim.jobs[j]
    for scope in (job.queue, None):
        limits = lim.scopes.get(scope)
        for kind, name in () if limits is None else lim._entities(job):
            key = (scope, kind, name)
            for limit, used, extra in ((limits.run, lim.jobs_of, 0),
                                       (limits.ncpus, lim.ncpus_of, job.ncpus - 1)):  # fmt: skip
                by = {"u": limit.user, "g": limit.group, "p": limit.project}.get(kind)
                most = limit.overall if kind == "o" else entity_limit(by, name)
                if most is not None and used.get(key, 0) + extra >= most:
                    return LIMITED
    return OK


def _free_at_by_releases(lim, j, ends, now):
    # free_at's definition: release the ends one by one, checking after each
    if _check_by_definition(lim, j) == OK:
        return now
    gone, found = [], None
    for end, k in ends:
        lim.release(k)
        gone.append(k)
        if _check_by_definition(lim, j) == OK:
            found = max(end, now)
            break
    for k in gone:
        lim.start(k)
    return found


_RUN = ["", "[o:PBS_ALL=2]", "[u:PBS_GENERIC=1]", "[u:alice=2],[g:PBS_GENERIC=2]"]
_NCPUS = [{}, {"ncpus": "[o:PBS_ALL=5]"}, {"ncpus": "[u:PBS_GENERIC=3]"}, {"ncpus": "[u:bob=0]"}]


def test_free_at_and_the_kept_rules_agree_with_releasing_the_ends_one_by_one():
    # free_at applies the ends to a copy of the counts the job's own limits read, and check
    # reads limits kept per job: on random limits, jobs and ends, the same answers as the
    # definitions (the counts released and checked after each end)
    rng = random.Random(7)
    pick = rng.choice
    for _ in range(300):
        site = _site(max_run=pick(_RUN) or None, qa=pick(_RUN) or None, qa_res=pick(_NCPUS),
                     max_run_res=pick(_NCPUS))  # fmt: skip
        users = ["alice", "bob", "carol"]
        jobs = _jobs(*[(pick("ab"), pick(users), rng.randint(1, 3)) for _ in range(12)])
        lim = Limits(site, jobs)
        running = rng.sample(range(12), rng.randint(0, 8))
        for k in running:
            lim.start(k)
        ends = sorted((rng.randint(0, 100), k) for k in running)
        for j in set(range(12)) - set(running):
            before = (dict(lim.jobs_of), dict(lim.ncpus_of))
            assert lim.check(j) == _check_by_definition(lim, j)
            assert lim.free_at(j, ends, 5) == _free_at_by_releases(lim, j, ends, 5)
            assert (lim.jobs_of, lim.ncpus_of) == before


def test_the_class_key_holds_what_the_limits_tell_apart():
    jobs = _jobs(("a", "alice", 1), ("b", "bob", 1))
    assert Limits(_site(), jobs).class_key(0) == ()
    assert Limits(_site(max_run="[u:PBS_GENERIC=1]"), jobs).class_key(0) == ("alice",)
    q = Limits(_site(qa="[g:PBS_GENERIC=1]"), jobs)
    assert q.class_key(0) == ("a", "aliceg") and q.class_key(1) == ()
    site = _site()._replace(vnodes=(Vnode("n", "n", 8, queue="b"),))
    assert Limits(site, jobs).class_key(1) == ("b",)


def test_limits_on_other_resources_are_refused():
    with pytest.raises(ParseError, match="max_run_res.mem"):
        Limits(_site(max_run_res={"mem": "[u:PBS_GENERIC=4gb]"}), [])


def test_site_limits_hold_before_the_resources_and_reserve_when_the_limit_frees():
    jobs = _jobs(("a", "alice", 1), ("a", "alice", 1), ("a", "bob", 1), ("a", "bob", 9))
    need = [job.ncpus for job in jobs]
    model = SiteLimits(PoolModel(4, need), Limits(_site(max_run="[u:PBS_GENERIC=1]"), jobs))
    assert model.can_ever_run(0) and not model.can_ever_run(3)  # 9 cpus: the pool says
    cycle = model.cycle(0, [])
    assert cycle.check(0, 0, 10) == OK
    cycle.start(0, 0, 10, 10)
    assert cycle.check(1, 0, 10) == LIMITED  # cpus free, alice's limit reached
    assert cycle.check(3, 0, 10) == NEVER  # the pool's answer first
    assert cycle.reserve(1, 10, 0, 0) == 10  # when her first job ends, not now
    assert cycle.check(2, 0, 5) == OK
    cycle.start(2, 0, 5, 5)
    assert not cycle.full() and not model.full()
    model.release(0)
    assert model.cycle(10, [(5, 2)]).check(1, 10, 20) == OK
    never = SiteLimits(PoolModel(4, need), Limits(_site(max_run="[u:alice=0]"), jobs))
    assert never.cycle(0, []).check(0, 0, 10) == NEVER  # no count lets it run: no top job
    assert never.can_ever_run(0) and never.class_key(0) == ("alice",)
    never.hold(2)  # a snapshot's running job counts
    assert never.limits.jobs_of[(None, "u", "bob")] == 1


def test_job_entities_from_the_workload_columns():
    got = job_entities(["a", "b"], ["alice", "bob"], ["g1", ""], [1, 4])
    assert got[1] == JobEntity("b", "bob", "", "_pbs_project_default", 4)
    lim = Limits(_site(max_run="[g:g1=0]"), got)
    assert not lim.can_ever_run(0) and lim.can_ever_run(1)


def test_a_reservation_no_earlier_than_the_limit_frees():
    ends = [(100, 4), (130, 4), (200, 2)]  # 10 processors, none free now
    assert Profile(0, 0, ends).earliest(4, 50) == 100
    assert Profile(0, 0, ends).earliest(4, 50, after=130) == 130
    assert Profile(0, 0, ends).earliest(4, 50, after=110) == 110  # between two ends
    assert Profile(0, 0, ends).earliest(6, 50, after=110) == 130  # 6 fit from 130 only
    assert Profile(0, 0, ends).earliest(4, 50, 60, 0, after=110) == 110
