"""PBS's fairshare model (:mod:`softwalltime.replay.fairshare`) and its place in the sort
of :func:`softwalltime.replay.pbsched.simulate_pbs`; the real server's orders are in
``tests/pbs/test_fairshare_real.py``."""

import pytest

from softwalltime.replay import fairshare as fs
from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim
from softwalltime.replay.sim_workload import SiteColumns, take

DAY = 24 * 3600


def tree(groups=(), **settings):
    return fs.Tree(fs.Settings(groups=tuple(groups), **settings))


def test_percentages_follow_the_shares_down_the_tree():
    # root: unknown 0, physics 30, chem 10; physics: ann 1, bob 3 (fairshare.cpp:382-406)
    t = tree([("physics", 1, "root", 30), ("chem", 2, "root", 10),
              ("ann", 3, "physics", 1), ("bob", 4, "physics", 3)])  # fmt: skip
    perc = {n: t.nodes[n].tree_perc for n in ("physics", "chem", "ann", "bob", "unknown")}
    assert perc == pytest.approx(
        {"physics": 0.75, "chem": 0.25, "ann": 0.1875, "bob": 0.5625, "unknown": 0.0}
    )


def test_an_unlisted_entity_joins_unknown_with_one_share():
    t = tree([("ann", 1, "root", 10)], unknown_shares=10)
    x, y = t.entity("xavier"), t.entity("yves")
    assert x.parent is t.unknown and x.shares == 1
    # unknown's half of the machine, split between its two children
    assert (x.tree_perc, y.tree_perc, t.nodes["ann"].tree_perc) == pytest.approx((0.25, 0.25, 0.5))
    assert tree().entity("xavier").tree_perc == 0  # unknown_shares 0, PBS's default


def test_a_bad_resource_group_is_refused_with_its_entry():
    with pytest.raises(ValueError, match=r"resource_group\[1\] 'ann': not unique"):
        tree([("ann", 1, "root", 1), ("ann", 2, "root", 1)])
    with pytest.raises(ValueError, match=r"resource_group\[0\] 'ann': parent 'lab'"):
        tree([("ann", 1, "lab", 1)])
    with pytest.raises(ValueError, match="fairshare_entity"):
        tree(entity="uid")
    with pytest.raises(ValueError, match="decay_factor"):
        tree(decay_factor=1.0)
    with pytest.raises(ValueError, match="decay_time"):
        tree(decay_time=0)


def test_usage_res_is_an_expression_of_cput_walltime_ncpus():
    assert fs.usage_function("ncpus*walltime")(0, 30, 4) == 120
    assert fs.usage_function("cput / 0")(5, 1, 1) == 0  # PBS: an exception gives 0
    with pytest.raises(ValueError, match="unknown mem"):
        fs.usage_function("mem*walltime")
    with pytest.raises(ValueError, match="fairshare_usage_res"):
        fs.usage_function("ncpus*")


def test_compare_goes_down_to_where_the_paths_part():
    labs = [("physics", 1, "root", 10), ("chem", 2, "root", 10)]
    t = tree(labs + [("ann", 3, "physics", 1), ("bob", 4, "physics", 1), ("carl", 5, "chem", 1)])
    ann, bob, carl = (t.nodes[n] for n in ("ann", "bob", "carl"))
    t.set_usage("ann", 100)
    t.set_usage("carl", 50)
    t.start_cycle()
    # physics (101 + 1 + 1 usage) against chem: chem has used less, carl goes first
    assert t.compare(carl, ann) == -1 and t.compare(carl, bob) == -1
    assert t.compare(bob, ann) == -1  # within physics: bob's 1 against ann's 100
    assert t.compare(bob, bob) == 0
    nobody = t.entity("nobody")  # unknown: no share of the machine goes last
    t.start_cycle()
    assert t.compare(nobody, ann) == 1 and t.compare(ann, nobody) == -1


def test_decay_halves_usage_and_keeps_it_at_least_one():
    t = tree([("ann", 1, "root", 1)])
    t.set_usage("ann", 3)
    t.decay()
    assert t.nodes["ann"].usage == 1.5
    t.decay(5)
    assert t.nodes["ann"].usage == 1.0


def state(entities, procs, wall, **settings):
    return fs.State(fs.Settings(**settings), entities, fs.Accrual(procs, wall))


def test_decays_at_a_cycle_once_strictly_more_than_the_decay_time_passed():
    s = state(["ann"], [1], [10], usage=(("ann", 64.0),), unknown_shares=1)
    ann = s.node[0]
    s.start_cycle(DAY, {})  # exactly one decay time: not yet (fifo.cpp:369 ">")
    assert ann.usage == 64 and s.last_decay == 0
    s.start_cycle(2 * DAY, {})  # two: one decay, and the last decay moves to now
    assert ann.usage == 32 and s.last_decay == 2 * DAY
    s.start_cycle(4 * DAY + 1, {})  # 2 days + 1 s: two decays, last decay at 4 days
    assert ann.usage == 8 and s.last_decay == 4 * DAY


def test_usage_accrues_between_cycles_and_is_lost_after_the_last():
    # ncpus*walltime: job 0 (2 cpus) runs from 100; cycles at 100 (its start), 160, 200.
    s = state(["ann"], [2], [600], usage_res="ncpus*walltime", unknown_shares=1)
    ann = s.node[0]
    s.start_cycle(100, {})
    s.end_cycle(100, {0: 100})
    s.start_cycle(160, {0: 100})
    assert ann.usage == 1 + 2 * 60
    s.end_cycle(160, {0: 100})
    s.start_cycle(200, {})  # it ended at 190: not found, its last 30 s never count
    assert ann.usage == 1 + 2 * 60


def _workload(users, procs, run, wall, submit=None):
    n = len(users)
    submit = submit or [0] * n
    rows = [(u, submit[j], wall[j], run[j], procs[j]) for j, u in enumerate(users)]
    return sim.make_workload("t", rows, 4)


class Walltime(sim.EstimateSource):
    name = "walltime"

    def on_submit(self, j, now):
        return self.work.wall[j]

    def bind(self, work):
        self.work = work


def starts(work, policy, procs=1):
    return pbsched.simulate_pbs(work, Walltime(), procs, policy).start


def test_a_job_started_counts_its_requested_usage_within_the_cycle():
    # ann's two jobs, then bob's, all queued at 0 on 3 cpus; ann has used a little more.
    # With ncpus*walltime, ann's first start adds 1 x 600 to her temp usage and the queue
    # is sorted again (fifo.cpp:866-871, 2035-2038): bob's job next. With cput, a job
    # asks for no cput: ann keeps going first.
    work = _workload(["ann", "ann", "bob"], [1, 1, 1], [10, 10, 10], [600, 600, 600])
    base = fs.Settings(unknown_shares=10, usage=(("ann", 2.0), ("bob", 1.5)))
    greedy = pbsched.parse_policy("fcfs-bf1")
    by_walltime = greedy._replace(fairshare=base._replace(usage_res="ncpus*walltime"))
    by_cput = greedy._replace(fairshare=base)
    assert starts(work, by_cput) == [10, 20, 0]  # one cpu: bob (least usage), ann's two
    # two cpus, two starts in the first cycle: bob's first job, then ...
    run_two = _workload(["ann", "ann", "bob", "bob"], [1, 1, 1, 1], [10] * 4, [600] * 4)
    assert starts(run_two, by_walltime, 2) == [0, 10, 0, 10]  # ... ann's (bob's 601.5)
    assert starts(run_two, by_cput, 2) == [10, 10, 0, 0]  # ... bob's second (still 1.5)


def test_fairshare_orders_by_usage_where_fcfs_goes_by_submit():
    # bob submits after ann but has used less (usage read from the usage file)
    work = _workload(["ann", "bob"], [1, 1], [10, 10], [600, 600], submit=[0, 1])
    policy = pbsched.parse_policy("fairshare-bf1")
    assert policy.name == "fairshare-bf1" and policy.fairshare.unknown_shares == 10
    used = policy._replace(fairshare=policy.fairshare._replace(usage=(("ann", 500.0),)))
    # one cpu busy until 5 with a third user's job, so both wait for the same cycle
    busy = _workload(["carl", "ann", "bob"], [1, 1, 1], [5, 10, 10], [600] * 3, [0, 1, 1])
    assert starts(busy, used) == [0, 15, 5]
    assert starts(busy, pbsched.parse_policy("fcfs-bf1")) == [0, 5, 15]
    assert starts(work, used) == [0, 10]  # ann alone at 0: she starts


def test_the_formula_comes_first_and_fairshare_breaks_its_ties():
    # sort.cpp:735-746: job_sort_formula, then fairshare. -walltime puts ann's short job
    # first; her long one and bob's tie, and bob has used less. One cpu, busy until 5.
    work = _workload(["carl", "ann", "bob", "ann"], [1] * 4, [5, 10, 10, 10],
                     [600, 600, 600, 300], [0, 1, 1, 1])  # fmt: skip
    fair = fs.Settings(unknown_shares=10, usage=(("ann", 500.0),))
    policy = pbsched.parse_policy("-walltime-bf1")._replace(fairshare=fair)
    assert policy.name == "-walltime+fairshare-bf1"
    assert starts(work, policy) == [0, 25, 15, 5]
    assert starts(work, policy._replace(fairshare=None)) == [0, 15, 25, 5]  # submit order


def test_formula_terms_read_the_tree():
    formula = pbsched.sort_formula("fairshare_perc - fairshare_tree_usage + fairshare_factor")
    assert formula.time_dependent and formula.fairshare_value is not None
    assert formula.value(1, 1, 0, 1) == 0  # no tree: the terms read 0
    assert formula.fairshare_value(1, 1, 0, 1, 0, 0.5, 0.25, 2.0) == 2.25
    with pytest.raises(ValueError, match="unknown fairshare_usage"):
        pbsched.sort_formula("fairshare_usage")
    t = tree([("ann", 1, "root", 1), ("bob", 2, "root", 3)])
    t.set_usage("ann", 9)  # root 1 + 9: bob's 1 is not in the usage file
    t.start_cycle()
    perc, usage, factor = t.terms(t.nodes["ann"])
    assert (perc, usage) == pytest.approx((0.25, 9 / 10))
    assert factor == pytest.approx(2 ** -(usage / perc))


def test_enforce_no_shares_keeps_an_entity_without_shares_from_running():
    # unknown_shares 0 (PBS's default): bob, not in resource_group, has no share
    work = _workload(["ann", "bob"], [1, 1], [10, 10], [600, 600])
    fair = fs.Settings(groups=(("ann", 1, "root", 1),))
    policy = pbsched.parse_policy("fcfs-bf1")._replace(fairshare=fair)
    assert starts(work, policy) == [0, -1]
    allowed = policy._replace(fairshare=fair._replace(enforce_no_shares=False))
    assert starts(work, allowed) == [0, 10]


def test_entities_by_group_account_or_default():
    users, groups = ["ann", "bob"], ["phys", "chem"]
    assert fs.entity_names("egroup", users, groups) == ["phys", "chem"]
    assert fs.entity_names("Account_Name", users, groups, ["a1", ""]) == ["a1", "chem:bob"]
    assert fs.entity_names("egroup:euser", users, groups) == ["phys:ann", "chem:bob"]
    with pytest.raises(ValueError, match="egroup"):
        fs.entity_names("egroup", users)


def test_account_entities_from_the_site_columns():
    work = _workload(["ann", "ann"], [1, 1], [10, 10], [600, 600])
    blank = ["", ""]
    work = work._replace(site=SiteColumns(blank, blank, blank, blank, ["big", "small"]))
    fair = fs.Settings(entity="Account_Name", unknown_shares=1, usage=(("big", 99.0),))
    busy = pbsched.parse_policy("fcfs-bf1")._replace(fairshare=fair)
    assert starts(work, busy) == [10, 0]


def test_from_site_file_scheduler():
    from softwalltime.site_file import Scheduler

    sched = Scheduler(fair_share=True, fairshare_entity="egroup", fairshare_decay_time=3600,
                      resource_group=(("phys", 1, "root", 5),))  # fmt: skip
    settings = fs.from_scheduler(sched, unknown_shares=3)
    assert settings.entity == "egroup" and settings.decay_time == 3600
    assert settings.groups == (("phys", 1, "root", 5),) and settings.unknown_shares == 3


@pytest.mark.parametrize("policy", ["fairshare-bf1", "fairshare-greedy", "small-bf1"])
def test_skipping_idle_cycles_changes_nothing_under_fairshare(policy):
    # The upkeep (accrual, decay) runs at every cycle the loop visits, skipped or not;
    # a skipped one has no free processor. A quick decay and walltime-based usage make
    # usage matter at every cycle; small's -ncpus leaves ties for fairshare to break.
    from test_simulate import _check_invariants
    from test_simulate_reference import workload

    work = take(workload("kth"), range(4000))
    fair = fs.Settings(unknown_shares=10, usage_res="ncpus*walltime", decay_time=3600)
    p = pbsched.parse_policy(policy)._replace(fairshare=fair)
    fast = pbsched.simulate_pbs(work, sim.make_source("v3"), 100, p)
    slow = pbsched.simulate_pbs(work, sim.make_source("v3"), 100, p, skip_idle_cycles=False)
    assert fast.start == slow.start
    assert fast.passes < slow.passes
    _check_invariants(work, fast, 100)
    fcfs = pbsched.simulate_pbs(work, sim.make_source("v3"), 100, p._replace(fairshare=None))
    assert fcfs.start != fast.start  # fairshare changed the order


def test_the_settings_of_a_fairshare_policy_include_its_sched_config_lines():
    lines = pbsched.pbs_settings(pbsched.parse_policy("fairshare-bf1"))
    assert "# $PBS_HOME/sched_priv/sched_config: fair_share: True ALL" in lines
    assert "# $PBS_HOME/sched_priv/sched_config: unknown_shares: 10" in lines
    assert "# $PBS_HOME/sched_priv/sched_config: fairshare_decay_time: 24:00:00" in lines
    assert not pbsched.reads_fairshare(pbsched.parse_policy("sjf-bf1"))
    assert pbsched.reads_fairshare(pbsched.parse_policy("fairshare_perc-bf1"))


def test_wait_refuses_a_fairshare_policy():
    import argparse

    from softwalltime.cli.wait import _policy
    from softwalltime.errors import ConfigError

    with pytest.raises(ConfigError, match="fairshare is modelled by simulate only"):
        _policy(argparse.Namespace(policy="fairshare-greedy"))
    assert _policy(argparse.Namespace(policy="fcfs-greedy")).fairshare is None


def test_a_top_job_counts_its_requested_usage_within_the_cycle():
    # 2 cpus, carl's job holds one until 100. ann (usage 2) goes before bob (3): her 2-cpu
    # job is the top job; with ncpus*walltime its 2 x 600 counts at once (fifo.cpp:1832-1840)
    # and bob's short job passes before ann's; with cput (none requested) ann's goes first.
    work = _workload(["carl", "ann", "bob", "ann"], [1, 2, 1, 1], [100, 10, 40, 40],
                     [600, 600, 50, 50], [0, 1, 1, 1])  # fmt: skip
    fair = fs.Settings(unknown_shares=10, usage=(("ann", 2.0), ("bob", 3.0)))
    policy = pbsched.parse_policy("fcfs-bf1")
    by_cput = policy._replace(fairshare=fair)
    by_walltime = policy._replace(fairshare=fair._replace(usage_res="ncpus*walltime"))
    assert starts(work, by_cput, 2) == [0, 100, 41, 1]
    assert starts(work, by_walltime, 2) == [0, 100, 1, 41]


def test_a_formula_of_fairshare_perc_without_fair_share():
    # fair_share off: the formula alone (then submit order), its terms from the tree; the
    # entity not in resource_group takes the unknown group's share (unknown_shares 20)
    work = _workload(["ann", "bob", "carl"], [1, 1, 1], [10, 10, 10], [600] * 3)
    fair = fs.Settings(fair_share=False, unknown_shares=20,
                       groups=(("ann", 1, "root", 10), ("bob", 2, "root", 30)))  # fmt: skip
    policy = pbsched.parse_policy("fairshare_perc-bf1")._replace(fairshare=fair)
    assert policy.name == "fairshare_perc-bf1"
    assert starts(work, policy) == [20, 0, 10]  # bob 1/2, carl 1/3, ann 1/6
    assert starts(work, policy._replace(fairshare=None)) == [0, 10, 20]  # all 0: submit order


def _queued(work, queues, priority, **order):
    from softwalltime.replay.queues import SiteOrder

    return SiteOrder(queues, priority, **order)


def test_by_queue_sorts_each_queue_by_fairshare_and_takes_the_queues_in_priority():
    # sort.cpp:1142-1160: with fair_share and by_queue, each queue's jobs are sorted on
    # their own; next_job takes the queues in descending priority (fifo.cpp:2112-2130).
    # One cpu busy with carl's job until 10; then ann (heavy user) and bob in queue
    # "low", dave in queue "high". Fairshare alone: bob, dave, ann (dave's usage is
    # between). by_queue: dave (high) first, then low's fairshare order: bob, ann.
    work = _workload(["carl", "ann", "bob", "dave"], [1] * 4, [10] * 4, [600] * 4, [0, 1, 1, 1])
    fair = fs.Settings(unknown_shares=10, usage=(("ann", 900.0), ("bob", 2.0), ("dave", 50.0)))
    policy = pbsched.parse_policy("fcfs-bf1")._replace(fairshare=fair)
    queues = ["low", "low", "low", "high"]
    priority = {"low": 10, "high": 20}
    run = pbsched.simulate_pbs
    alone = run(work, Walltime(), 1, policy).start
    assert alone == [0, 30, 10, 20]
    by_queue = run(work, Walltime(), 1, policy, site=_queued(work, queues, priority)).start
    assert by_queue == [0, 30, 20, 10]
    # without by_queue (and no express queue) one list: fairshare's order again
    flat = _queued(work, queues, priority, by_queue=False)
    assert run(work, Walltime(), 1, policy, site=flat).start == alone
    # an express queue (priority >= preempt_queue_prio, 150) first even without by_queue
    express = _queued(work, queues, {"low": 10, "high": 200}, by_queue=False)
    assert run(work, Walltime(), 1, policy, site=express).start == [0, 30, 20, 10]
    with pytest.raises(ValueError, match="round_robin"):
        run(work, Walltime(), 1, policy, site=_queued(work, queues, priority, round_robin=True))


@pytest.mark.parametrize("usage_res", ["cput", "ncpus*walltime", "walltime*walltime", "ncpus"])
def test_accrual_matches_the_job_by_job_rule(usage_res):
    # State sums linear jobs' rates per entity; the rule (fifo.cpp:344-354) is job by job:
    # each job running at the end of the last cycle and still running grows by its usage
    # now less its usage then, never below 0. Random cycles, jobs starting and ending.
    import random

    rng = random.Random(7)
    users = ["ann", "bob", "cy"]
    n = 40
    procs = [rng.randint(1, 8) for _ in range(n)]
    entity = [rng.choice(users) for _ in range(n)]
    settings = fs.Settings(unknown_shares=10, usage_res=usage_res, decay_time=10**9)
    state = fs.State(settings, entity, fs.Accrual(procs, [3600] * n))
    value = fs.usage_function(usage_res)
    expected = dict.fromkeys(users, 1.0)
    running, last, last_running, now = {}, 0, {}, 0
    for _ in range(200):
        now += rng.randint(1, 900)
        for j in list(running):
            if rng.random() < 0.1:
                del running[j]  # ended between cycles
        state.start_cycle(now, dict(running))
        for j, s in last_running.items():
            if j in running:
                p = procs[j]
                delta = value(p * (now - s), now - s, p) - value(p * (last - s), last - s, p)
                expected[entity[j]] += max(delta, 0.0)
        for _ in range(rng.randint(0, 2)):
            j = rng.randrange(n)
            running.setdefault(j, now)  # started in this cycle
        state.end_cycle(now, dict(running))
        last, last_running = now, dict(running)
    got = {u: state.tree.nodes[u].usage for u in users}
    assert got == pytest.approx(expected, rel=1e-12)
    assert max(expected.values()) > 1.0 or usage_res == "ncpus"
