"""PBS's scheduler knobs (softwalltime.replay.pbsched): each unit alone, then the loop
against the naive reference and its own slow path."""

from __future__ import annotations

from typing import Any, List, Set, Tuple

import pytest
from simulate_reference import reference
from test_simulate import _check_invariants
from test_simulate_reference import SLOW, first_mismatch, workload

from softwalltime.replay import corrections, pbsched
from softwalltime.replay import simulate as sim
from softwalltime.replay.machine import LIMITED
from softwalltime.replay.pool import PoolCycle, PoolModel
from softwalltime.replay.profile import Profile

# --- job_sort_formula


@pytest.mark.parametrize("name", ["sjf", "xfactor", "small", "sjfage"])
def test_named_sorts_equal_their_formula(name: str) -> None:
    # The fast key of a named sort is the value PBS computes from its expression.
    fast = pbsched.sort_formula(name)
    assert fast.expression is not None and fast.value is not None
    slow = pbsched._compiled(fast.expression)
    for est, wall, waited, ncpus in [(60, 3600, 0, 1), (0, 7200, 500, 8), (3600, 3600, 99, 64)]:
        assert fast.value(est, wall, waited, ncpus) == slow(est, wall, waited, ncpus)


@pytest.mark.parametrize(
    "expression",
    [
        "3600 * (eligible_time + 600) / (((softwalltime_rank or soft_walltime or walltime)"
        " + 600) * ((softwalltime_rank or soft_walltime or walltime) + 600))"
        " + eligible_time / 259200 + 1 * (soft_walltime or walltime) / 86400 + 8 * ncpus / 64",
        "(eligible_time + 600) / (soft_walltime - 600) + ncpus",  # raises for some jobs
        "eligible_time - walltime",
    ],
)
def test_an_expressions_inlined_sort_key_orders_as_its_value_does(expression: str) -> None:
    # order_queue sorts a cycle's queue with sort_keys, the expression inlined, and falls back
    # to value (PBS's 0 for a job whose value raises): the same order, ties by job.
    import random

    formula = pbsched.sort_formula(expression)
    assert formula.time_dependent and formula.value is not None
    assert formula.sort_keys is not None
    slow = formula._replace(sort_keys=None)
    rng = random.Random(expression)
    rows = [
        (f"u{rng.randrange(5)}", rng.randrange(9000), rng.choice([600, 1200, 3600]),
         rng.randrange(1, 3600), rng.choice([1, 8, 64]))
        for _ in range(300)
    ]  # fmt: skip
    work = sim.make_workload("t", sorted(rows, key=lambda r: r[1]), 64)
    est = [rng.choice([0, 600, w // 2, w]) for w in work.wall]
    rank = [rng.choice([0, 1, 600, 3600]) for _ in work.wall]
    queue = list(range(len(work.wall)))
    rng.shuffle(queue)
    for now in (9000, 20000):
        got = pbsched.order_queue(list(queue), formula, now, work, est, {}, rank)
        want = pbsched.order_queue(list(queue), slow, now, work, est, {}, rank)
        assert got == want
        assert got != sorted(queue)  # the formula orders them, not the job numbers


def test_formula_expressions_and_errors() -> None:
    custom = pbsched.sort_formula("ncpus * walltime")
    assert custom.value is not None and custom.value(1, 10, 0, 4) == 40.0
    assert not custom.time_dependent and pbsched.sort_formula("xfactor").time_dependent
    assert pbsched.sort_formula("1 / (soft_walltime - 60)").value(60, 60, 0, 1) == 0.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="unknown mem"):
        pbsched.sort_formula("mem + 1")
    with pytest.raises(ValueError, match="job_sort_formula"):
        pbsched.sort_formula("walltime +")


def test_parse_policy_and_pbs_settings() -> None:
    assert pbsched.parse_policy("sjf-bf4") == pbsched.Policy("sjf", 4, True)
    assert pbsched.parse_policy("fcfs") == pbsched.Policy()
    # PBS's rules are the default (issue 29): by the soft walltime, PBS's classes
    assert pbsched.Policy().backfill_by == pbsched.ESTIMATE == "estimate"
    assert pbsched.Policy().classes == pbsched.CLASSES_PBS == "pbs"
    assert pbsched.Policy().extension_strictly_past
    assert pbsched.parse_policy("sjf-greedy").backfill_by == "estimate"
    assert pbsched.parse_policy("sjf-bf2", 0, "walltime").backfill_by == pbsched.WALLTIME
    assert pbsched.parse_policy("sjf-bf2", 0, "estimate", "rank").classes == "rank"
    with pytest.raises(ValueError, match="backfill_by must be one of"):
        pbsched.parse_policy("sjf-bf1", backfill_by="soft")
    with pytest.raises(ValueError, match="classes must be one of"):
        pbsched.parse_policy("sjf-bf1", classes="user")
    assert pbsched.parse_policy("small-greedy").strict_ordering is False
    assert pbsched.parse_policy("fcfs-strict").backfill_depth == 0
    assert pbsched.parse_policy("xfactor-bf2").name == "xfactor-bf2"
    expression = pbsched.parse_policy("eligible_time - walltime-bf2")
    assert expression == pbsched.Policy("eligible_time - walltime", 2, True)
    assert pbsched.parse_policy("-ncpus").job_sort_formula == "-ncpus"
    for bad in ("fcfs-bfx", "sjf-", "mem-bf1"):
        with pytest.raises(ValueError):
            pbsched.parse_policy(bad)
    lines = pbsched.pbs_settings(pbsched.parse_policy("xfactor-bf2"))
    assert lines[0].startswith("qmgr -c \"set sched job_sort_formula = '(eligible_time + ")
    assert 'qmgr -c "set server eligible_time_enable = True"' in lines
    assert 'qmgr -c "set server backfill_depth = 2"' in lines
    assert 'qmgr -c "set sched scheduler_iteration = 600"' in lines
    assert lines[-1].endswith("strict_ordering: True ALL")
    ranked = pbsched.pbs_settings(pbsched.parse_policy("sjf.rank-bf1", classes="rank"))
    assert any(ln.endswith(pbsched.SCHED_RESOURCES_RANK) for ln in ranked)
    assert "softwalltime_rank" in pbsched.SCHED_RESOURCES_RANK
    assert not any("resources:" in ln for ln in lines)


# --- one cycle: 10 processors, 6 free; running jobs end at 100 (2 procs) and 200 (2 procs)

ENDS = [(100, 2), (200, 2)]


def pool(procs: List[int]) -> PoolCycle:
    # The machine of ENDS: a pool of 10 processors, the two running jobs (indices after the
    # queued ones) held on it.
    n = len(procs)
    model = PoolModel(10, procs + [p for _e, p in ENDS])
    for i in range(len(ENDS)):
        model.hold(n + i)
    assert model.free == 6
    return model.cycle(0, [(e, n + i) for i, (e, _p) in enumerate(ENDS)])


def cycle(
    order: List[int], procs: List[int], est: List[int], depth: int = 1, strict: bool = True
) -> Tuple[List[int], List[Tuple[int, int]]]:
    return pbsched.schedule_cycle(0, order, pool(procs), est, depth, strict)


def test_cycle_starts_in_order_then_reserves_the_first_blocked() -> None:
    # J0 (4 procs, 1000 s) starts (2 free); J1 (9) is blocked: 9 free only at 1000, its
    # reservation; J2 (2, 50 s) ends by then: starts; no processor is left for J3.
    procs, est = [4, 9, 2, 1], [1000, 100, 50, 500]
    assert cycle([0, 1, 2, 3], procs, est) == ([0, 2], [(1, 1000)])
    # Without J0: J1 reserved at 200 (10 free, extra 1); J3 (1, 500 s) runs past 200 on
    # the extra processor; J2 then still ends by 200.
    assert cycle([1, 3, 2], procs, est) == ([3, 2], [(1, 200)])
    # J1 reserved at 100 if it needed 8 (extra 0): J3 must wait.
    assert cycle([1, 3], [4, 8, 2, 1], est) == ([], [(1, 100)])


def test_top_job_start_is_searched_in_opt_backfill_fuzzy_windows() -> None:
    # 10 processors, none free; ends at 100 (4), 130 (4) and 200 (2). A 6-processor job
    # fits from 130 on. PBS checks now, then takes every event up to the window's boundary
    # after the next event at once and checks at the last (simulate.cpp:190-214).
    ends = [(100, 4), (130, 4), (200, 2)]

    def earliest(window: int, epoch: int = 0, p: int = 6) -> int:
        return Profile(0, 0, ends).earliest(p, 50, window, epoch)

    assert earliest(0) == 130  # every event: the first that fits
    assert earliest(1) == 130  # off: 1-second windows, here the same
    assert earliest(60) == 130  # 100's window ends at 120; 130's at 180
    assert earliest(150) == 130  # [100, 150]: 130 is the last event in it
    assert earliest(200) == 200  # 100's window ends at 200: all three at once
    # A 4-processor job fits from 100 on: where the window's boundary falls on the epoch
    # clock decides whether 130 is taken with it.
    assert earliest(0, p=4) == 100
    assert earliest(60, epoch=0, p=4) == 100  # boundary at 120
    assert earliest(60, epoch=20, p=4) == 130  # boundary at epoch 180, here 160
    assert earliest(3600, p=4) == 200  # all at once
    # Fits now: checked at once, whatever the window.
    assert Profile(0, 6, ends).earliest(6, 50, 3600) == 0


def test_parse_fuzzy_as_pbs_reads_it() -> None:
    assert [pbsched.parse_fuzzy(v) for v in ("off", "LOW", "medium", "med", "high")] == [
        0, 60, 600, 600, 3600,
    ]  # fmt: skip
    assert pbsched.parse_fuzzy("90") == 90
    for bad in ("-1", "lowest", "1.5", ""):
        with pytest.raises(ValueError, match="opt_backfill_fuzzy"):
            pbsched.parse_fuzzy(bad)
    assert pbsched.Policy().backfill_fuzzy == pbsched.DEFAULT_FUZZY_S == 60
    assert pbsched.Policy(backfill_fuzzy=0).fuzzy_window == 1  # off: PBS's 1 s window
    assert pbsched.Policy(backfill_fuzzy=None).fuzzy_window == 0
    assert not any("fuzzy" in ln for ln in pbsched.pbs_settings(pbsched.Policy()))
    assert 'qmgr -c "set sched opt_backfill_fuzzy = 0"' in pbsched.pbs_settings(
        pbsched.Policy(backfill_fuzzy=0)
    )


def test_cycle_strict_without_backfill_and_greedy() -> None:
    procs, est = [8, 2], [100, 50]
    assert cycle([0, 1], procs, est, depth=0) == ([], [])
    assert cycle([0, 1], procs, est, depth=0, strict=False) == ([1], [])
    # greedy: a job that fits runs even if it delays a wider one forever
    assert cycle([0, 1], [8, 2], [100, 5000], strict=False) == ([1], [])


def test_cycle_depth_two_protects_both() -> None:
    # J0 (7, 100 s) reserved at 100 (extra 1 from then on); J1 (10) at 200 (extra 0);
    # J2 (1, 250 s) fits J0's extra but would delay J1: it starts at depth 1 only; J3
    # (1, 150 s) ends by J1's reservation: it starts at depth 2.
    procs, est = [7, 10, 1, 1], [100, 100, 250, 150]
    assert cycle([0, 1, 2], procs, est, depth=2) == ([], [(0, 100), (1, 200)])
    assert cycle([0, 1, 2], procs, est, depth=1) == ([2], [(0, 100)])
    assert cycle([0, 1, 3], procs, est, depth=2) == ([3], [(0, 100), (1, 200)])


def test_cycle_backfill_by_walltime_as_pbs() -> None:
    # J0 (9 procs) reserved at 200 (10 free then, extra 1); J1 (2, 50 s estimate) ends by
    # it by its estimate; by its walltime (2000 s) it would not, and it needs more than the
    # extra: as PBS 23.06 checks it (its hard duration), it waits. J2 (1, walltime 3000)
    # runs past the reservation on the extra processor either way.
    procs, est, walls = [9, 2, 1], [1000, 50, 60], [1000, 2000, 3000]
    assert pbsched.schedule_cycle(0, [0, 1, 2], pool(procs), est, 1, True) == (
        [1, 2],
        [(0, 200)],
    )
    assert pbsched.schedule_cycle(0, [0, 1, 2], pool(procs), est, 1, True, None, walls) == (
        [2],
        [(0, 200)],
    )


def test_simulate_pbs_backfills_by_the_soft_walltime_by_default() -> None:
    # 4 processors. a (2 procs, 1000 s) runs; b (4 procs) is the top job, reserved at 1000;
    # c (2 procs, runs 50 s, walltime 5000 s) ends by the reservation by its (perfect)
    # estimate but not by its walltime: PBS starts it (check.cpp:921-924, the soft
    # duration); the walltime rule (PBS's next to an advance reservation) keeps it behind b.
    rows = [("a", 0, 1000, 1000, 2), ("b", 1, 1000, 1000, 4), ("c", 2, 5000, 50, 2)]
    work = sim.make_workload("t", rows, 4)

    def starts(policy: pbsched.Policy) -> List[int]:
        return pbsched.simulate_pbs(work, sim.make_source("perfect"), 4, policy).start

    assert starts(pbsched.Policy()) == [0, 1000, 2]
    assert starts(pbsched.Policy(backfill_by=pbsched.ESTIMATE)) == [0, 1000, 2]
    assert starts(pbsched.Policy(backfill_by=pbsched.WALLTIME)) == [0, 1000, 2000]
    with pytest.raises(ValueError, match="backfill_by must be one of"):
        starts(pbsched.Policy(backfill_by="soft"))
    with pytest.raises(ValueError, match="classes must be one of"):
        starts(pbsched.Policy(classes="queue"))


def test_a_job_that_can_never_run_on_the_model_is_refused_by_its_index() -> None:
    # The pool of 4 processors: the 5-processor job (index 1 in submit order) never fits
    # (PBS: can_never_run, check.cpp:795-799); the run is refused rather than left waiting.
    rows = [("a", 0, 100, 10, 2), ("b", 1, 100, 10, 5)]
    work = sim.make_workload("t", rows)
    with pytest.raises(ValueError, match=r"job 1 \(in submit order, from 0\) needs more"):
        pbsched.simulate_pbs(work, sim.make_source("perfect"), 4, pbsched.Policy())
    # the model decides, not procs_total: on a pool of 5 both run
    pool = PoolModel(5, work.procs)
    result = pbsched.simulate_pbs(work, sim.make_source("perfect"), 4, pbsched.Policy(), model=pool)
    assert result.start == [0, 10] and pool.free == 5


# --- equivalence classes


def test_cycle_class_marked_cant_run_blocks_its_later_jobs() -> None:
    # J0 (9 procs) reserved at 200 (extra 1). J1 (2 procs, 500 s) cannot pass it; J2 (2
    # procs, 50 s) could, but shares J1's class: PBS gives it J1's error (check.cpp:710-714).
    # In another class (or without classes) it starts.
    procs, est = [9, 2, 2], [1000, 500, 50]
    same = [(9, 1000), (2, 600), (2, 600)].__getitem__
    other = [(9, 1000), (2, 600), (2, 601)].__getitem__

    def run(cls: Any) -> Tuple[List[int], List[Tuple[int, int]]]:
        return pbsched.schedule_cycle(0, [0, 1, 2], pool(procs), est, 1, True, None, None, cls)

    assert run(same) == ([], [(0, 200)])
    assert run(other) == ([2], [(0, 200)])
    assert run(None) == ([2], [(0, 200)])


def test_cycle_class_members_may_still_become_top_jobs() -> None:
    # With backfill_depth 2, J1 (9 procs) fails and marks its class; J2 of the same class
    # gets the copied error but is still added to the calendar (fifo.cpp:909,
    # should_backfill_with_job, counts top jobs only): two reservations.
    procs, est = [9, 9], [100, 100]
    cls = [(9, 600), (9, 600)].__getitem__
    started, top = pbsched.schedule_cycle(0, [0, 1], pool(procs), est, 2, True, None, None, cls)
    assert started == [] and [j for j, _s in top] == [0, 1]


class _Held(PoolCycle):
    """The pool with some jobs held by a run limit (max_run...): check says LIMITED."""

    def __init__(self, cycle: PoolCycle, held: Set[int]) -> None:
        super().__init__(cycle.model, 0, [])
        self.profile, self.held = cycle.profile, held

    def check(self, j: int, now: int, end: int) -> int:
        return LIMITED if j in self.held else super().check(j, now, end)


def test_a_job_held_by_a_run_limit_may_be_a_top_job_and_marks_its_class() -> None:
    # should_backfill_with_job (fifo.cpp:1603-1663) never reads the error: a job held by a
    # limit (NOT_RUN, limits.cpp:1006) is added to the calendar as a job short of cpus is,
    # and its class is marked (fifo.cpp:990-996). J0 (2 procs) is held; J1, of its class,
    # copies its error; J2 (1 proc, another class) starts beside the reservation.
    procs, est = [2, 2, 1], [50, 50, 50]
    cls = [(2, 60), (2, 60), (1, 60)].__getitem__
    for depth, tops in ((1, [0]), (2, [0, 1])):
        res = _Held(pool(procs), {0})
        started, top = pbsched.schedule_cycle(0, [0, 1, 2], res, est, depth, True, None, None, cls)
        assert started == [2] and [j for j, _s in top] == tops
    # a job that can never run (11 procs of 10) is no top job: the next blocked one is
    procs = [11, 9, 1]
    started, top = pbsched.schedule_cycle(0, [0, 1, 2], pool(procs), [50, 1000, 50], 1, True)
    assert started == [2] and top == [(1, 200)]


def test_the_machine_model_adds_to_the_class_key() -> None:
    # PBS adds the user to the key where limits count users (resresv_set_use_user,
    # job_info.cpp:2160): jobs alike but for their user are two classes, while the pool
    # (class_part None) keeps PBS's processors and walltime.
    rows = [("u", 0, 600, 6, 2), ("v", 0, 600, 3, 2), ("u", 0, 600, 8, 2)]
    work = sim.make_workload("t", rows)
    assert PoolModel(4, work.procs).class_part is None
    plain = pbsched.class_keys(pbsched.CLASSES_PBS, work, [0, 0, 0])
    assert plain is not None and plain(0) == plain(1) == plain(2)
    by_user = pbsched.class_keys(pbsched.CLASSES_PBS, work, [0, 0, 0], work.user.__getitem__)
    assert by_user is not None and by_user(0) == by_user(2) != by_user(1)
    ranked = pbsched.class_keys(pbsched.CLASSES_RANK, work, [1, 1, 2], work.user.__getitem__)
    assert ranked is not None and len({ranked(0), ranked(1), ranked(2)}) == 3
    assert pbsched.class_keys(pbsched.CLASSES_NONE, work, [0, 0, 0], work.user.__getitem__) is None


def test_rank_classes_split_by_rank() -> None:
    # The pair of issue 29 with equal walltimes: under PBS's classes J3 waits with J2;
    # with softwalltime_rank on the resources: line (ranks 8 and 3) it backfills at once.
    rows = [("u", 0, 600, 6, 1), ("u", 0, 600, 3, 2), ("u", 0, 600, 8, 1), ("u", 0, 600, 3, 1)]
    work = sim.make_workload("t", rows, 2)

    class Ranks(pbsched.Ranker):
        def value(self, j: int) -> int:
            return [6, 3, 8, 3][j]

    def starts(classes: str) -> List[int]:
        policy = pbsched.Policy(classes=classes)
        return pbsched.simulate_pbs(
            work, sim.make_source("perfect"), 2, policy, ranker=Ranks()
        ).start

    assert starts(pbsched.CLASSES_PBS) == [0, 6, 9, 9]
    assert starts(pbsched.CLASSES_RANK) == [0, 6, 9, 0]
    assert starts(pbsched.CLASSES_NONE) == [0, 6, 9, 0]


# --- PBS's timing


def test_extension_only_strictly_past_the_soft_walltime() -> None:
    # a (1 proc, soft 100 s, runs 300 s) is running; b (2 procs) is reserved at a's
    # estimated end. At 100 a is at its soft walltime, not past it: PBS keeps the end at
    # 100 (job_info.cpp:5197-5204) and c (1 proc, soft 50, queued at 100) would end after
    # it: c waits. Extended at equality (the reference's model), a's end is 200 at 100 and
    # c passes the reservation.
    rows = [("a", 0, 5000, 300, 1), ("b", 1, 5000, 10, 2), ("c", 100, 5000, 50, 1)]
    work = sim.make_workload("t", rows, 2)

    class Soft(sim.EstimateSource):
        name = "soft"

        def on_submit(self, j: int, now: int) -> int:
            return [100, 10, 50][j]

    def starts(policy: pbsched.Policy) -> List[int]:
        return pbsched.simulate_pbs(work, Soft(), 2, policy).start

    pbs = pbsched.Policy(scheduler_iteration=0)
    assert starts(pbs) == [0, 300, 310]
    assert starts(pbs._replace(extension_strictly_past=False)) == [0, 300, 100]


def test_periodic_cycle_an_iteration_after_the_last_cycle() -> None:
    # a (1 of 2 procs, soft 1000 s) runs 3000 s; b (2 procs) is the top job at a's soft
    # end; c (1 proc, soft 400 s) arrives at 900 and would end after b's reservation. Only
    # a periodic cycle can let c in: once a is past its soft walltime it is extended to
    # 2000 and c ends by the moved reservation. PBS runs that cycle an iteration after the
    # last one, c's arrival (pbsd_main.c:1360): at 1500, not at 1200 (a multiple of 600).
    rows = [("a", 0, 5000, 3000, 1), ("b", 10, 5000, 10, 2), ("c", 900, 5000, 400, 1)]
    work = sim.make_workload("t", rows, 2)

    class Soft(sim.EstimateSource):
        name = "soft"

        def on_submit(self, j: int, now: int) -> int:
            return [1000, 10, 400][j]

    policy = pbsched.Policy(scheduler_iteration=600)
    assert pbsched.simulate_pbs(work, Soft(), 2, policy).start == [0, 3000, 1500]
    slow = pbsched.simulate_pbs(work, Soft(), 2, policy, skip_idle_cycles=False)
    assert slow.start == [0, 3000, 1500]


# --- estimates of running jobs


def _pbs_server(soft: int, wall: int, elapsed: int) -> int:
    # openpbs src/scheduler/job_info.cpp extend_soft_walltime(), for elapsed > soft
    return min(soft + (elapsed // soft) * soft, wall)


@pytest.mark.parametrize("correction", sim.CORRECTIONS)
def test_extended_estimate_closed_form_equals_steps(correction: str) -> None:
    for orig, wall in [(60, 7200), (1, 500), (900, 900), (1000, 86400)]:
        for elapsed in range(0, wall + 10, max(1, wall // 97)):
            est, n = corrections.extended_estimate(correction, orig, orig, 0, wall, elapsed)
            e, c = orig, 0  # one correction at a time, as the reference does
            margin = 60 if correction == "simple" else 0
            while e < wall and elapsed >= e - margin:
                c += 1
                e = {
                    "pbs": min(e + max(orig, 1), wall),
                    "simple": min(e + 3600, wall),
                    "power": min(e + (450 << (c - 1)), wall),
                    "walltime": wall,
                }[correction]
            assert (est, n) == (e, c)
            if correction == "pbs" and elapsed > orig and elapsed % orig:
                assert est == _pbs_server(orig, wall, elapsed)


# --- the loop


@pytest.mark.slow
@pytest.mark.parametrize(
    "source,correction",
    [("v3", "pbs"), ("v3", "simple"), ("fixed10", "power"), ("perfect", "walltime")]
    + (
        [(s, c) for s in ("users", "v1", "v2", "calibrated") for c in sim.CORRECTIONS]
        if SLOW
        else []
    ),
)
def test_easy_with_correction_events_is_the_reference(source: str, correction: str) -> None:
    # fcfs, backfill_depth 1, strict ordering, backfilling by the estimate, a cycle at every
    # event and extension, no classes, extensions at equality, a top job's start searched
    # at every event: the model of the naive reference, start for start on whole KTH-SP2.
    work = workload("kth")
    policy = pbsched.Policy(
        scheduler_iteration=0,
        correction_events=True,
        backfill_by=pbsched.ESTIMATE,
        classes=pbsched.CLASSES_NONE,
        extension_strictly_past=False,
        backfill_fuzzy=None,
    )
    got = pbsched.simulate_pbs(work, sim.make_source(source), 100, policy, correction).start
    want = reference(work, sim.make_source(source), 100, correction)
    assert first_mismatch(work, got, want) == ""


@pytest.mark.slow
@pytest.mark.parametrize(
    "policy,backfill_by,classes",
    [("fcfs-bf1", "walltime", "pbs"), ("fcfs-bf1", "estimate", "pbs")]
    + [("fcfs-bf1", "estimate", "none"), ("sjf-bf2", "walltime", "pbs")]
    + [("sjf-bf2", "estimate", "pbs"), ("small-greedy", "estimate", "pbs")]
    + [("fcfs-strict", "estimate", "pbs")],
)
def test_skipping_idle_cycles_changes_nothing(policy: str, backfill_by: str, classes: str) -> None:
    work = workload("kth")
    p = pbsched.parse_policy(policy, 600, backfill_by, classes)
    fast = pbsched.simulate_pbs(work, sim.make_source("v3"), 100, p)
    slow = pbsched.simulate_pbs(work, sim.make_source("v3"), 100, p, skip_idle_cycles=False)
    assert fast.start == slow.start and fast.corrections == slow.corrections
    assert fast.passes < slow.passes
    _check_invariants(work, fast, 100)


@pytest.mark.slow
def test_xfactor_and_iteration_invariants() -> None:
    work = workload("kth")
    for policy in ("xfactor-bf1", "sjf-bf4"):
        p = pbsched.parse_policy(policy, 300)
        result = pbsched.simulate_pbs(work, sim.make_source("v1"), 100, p)
        _check_invariants(work, result, 100)
        assert sum(result.corrections) > 0


def test_lazy_cycle_delays_nothing_past_the_next_cycle() -> None:
    # One wide job waits behind a job with a 1-second estimate that runs 1000 s; with
    # cycles every 600 s and no extension events, it starts at the end (an event).
    rows = [("a", 0, 5000, 1000, 2), ("b", 10, 500, 50, 2)]
    work = sim.make_workload("t", rows, 2)

    class One(sim.EstimateSource):
        name = "one"

        def on_submit(self, j: int, now: int) -> int:
            return 1

    result = pbsched.simulate_pbs(work, One(), 2, pbsched.Policy(scheduler_iteration=600))
    assert result.start == [0, 1000]
    assert result.corrections[0] == 999


# --- simulate_pbs's run state, alone


def test_run_events_queue_arrivals_and_say_what_changed() -> None:
    # 4 processors: a (2 procs, runs 100 s of 1000) and b (4 procs) at 0, c at 50.
    rows = [("a", 0, 1000, 100, 2), ("b", 0, 1000, 100, 4), ("c", 50, 1000, 100, 2)]
    work = sim.make_workload("t", rows, 4)
    run = pbsched._Run(
        work, sim.make_source("perfect"), PoolModel(4, work.procs), pbsched.Policy(), "pbs", None
    )
    assert run.events(0) is True and run.queue == [0, 1] and run.next_arrival == 2
    assert run.events(10) is False  # nothing arrived, ended or was extended
    run.cycle(0)
    # a starts (with its perfect estimate, as checked: no restart); b is the top job
    assert run.machine.start[:2] == [0, -1] and run.queue == [1] and run.passes == 1
    assert run.reservation[1] == 100 and run.restarted is False
    assert run.events(50) is True and run.queue == [1, 2]
    assert run.events(100) is True  # a ended
    assert run.model.free == 4


def test_run_a_job_started_with_another_estimate_than_checked_is_a_change() -> None:
    # Backfilling by walltime: a job is checked with its walltime and starts with its
    # estimate, so the next cycle may differ though nothing else changed.
    rows = [("a", 0, 1000, 100, 2)]
    work = sim.make_workload("t", rows, 4)
    policy = pbsched.Policy(backfill_by=pbsched.WALLTIME)
    run = pbsched._Run(
        work, sim.make_source("perfect"), PoolModel(4, work.procs), policy, "pbs", None
    )
    run.events(0)
    run.cycle(0)
    assert run.machine.start == [0] and run.restarted is True
    assert run.events(1) is True
