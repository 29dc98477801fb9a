"""The EASY simulator's units, each driven alone: the correction rules
(:mod:`softwalltime.replay.corrections`) and the steps of :class:`softwalltime.replay.easy.Easy`
on hand-built states and on real states met while stepping through KTH-SP2.

Whole simulations against the naive reference are in test_simulate_reference.py.
"""

from __future__ import annotations

from typing import Iterator, List, Tuple

import pytest
from test_simulate_reference import workload

from softwalltime.replay import corrections as rules
from softwalltime.replay import simulate as sim
from softwalltime.replay.easy import Easy

# ---------------------------------------------------------------------------------------
# The correction rules


def _steps(correction: str, est: int, orig: int, wall: int, start: int, run: int):
    # Each correction of a running job one by one: (instant, estimate after it).
    i = 0
    while est < wall:
        when = start + est - rules.margin(correction)
        if when >= start + run:
            return
        i += 1
        est = rules.next_estimate(correction, est, orig, wall, i)
        yield when, est


@pytest.mark.slow
@pytest.mark.parametrize("correction", rules.CORRECTIONS)
def test_crossing_is_the_first_correction_past_the_bound(correction: str) -> None:
    checked = 0
    for orig in (1, 7, 600, 5000):
        for wall in (orig, orig + 1, 3 * orig + 5, 20000):
            for run in (1, orig, wall // 2 + 1, wall):
                start = 1000
                for sh in range(start + orig, start + wall + 2 * orig + 4000, 97):
                    want = next(
                        (
                            w
                            for w, e in _steps(correction, orig, orig, wall, start, run)
                            if start + e > sh
                        ),
                        float("inf"),
                    )
                    got = rules.crossing(correction, orig, orig, 0, wall, start, run, sh)
                    assert got == want, (orig, wall, run, sh)
                    checked += want < float("inf")
    assert checked > 100  # the bound is crossed in many of the cases


@pytest.mark.parametrize("correction", rules.CORRECTIONS)
def test_reach_bounds_how_far_one_correction_moves_the_end(correction: str) -> None:
    farthest = 0
    for orig in (1, 60, 600, 3600):
        wall = 100000
        reach = rules.reach(correction, orig)
        for when, est in _steps(correction, orig, orig, wall, 0, wall):
            past = est - when
            farthest = max(farthest, past)
            if reach is not None:
                assert past <= reach, (orig, when, est)
    if correction in ("pbs", "simple"):
        assert farthest == rules.reach(correction, 3600)  # the bound is tight
    else:
        assert rules.reach(correction, 1) is None and farthest > 3600 + rules.SIMPLE_STEP_S


# ---------------------------------------------------------------------------------------
# Easy on a hand-built state


def _tiny() -> Easy:
    # A 10-processor machine; jobs (user, submit, walltime, run time, processors).
    rows = [
        ("a", 0, 100, 100, 6),  # A: runs 0..100
        ("c", 1, 500, 500, 8),  # C: the head, waits for A
        ("d", 1, 300, 300, 2),  # D: past the shadow, fits the extra processors
        ("e", 1, 50, 50, 1),  # E: ends before the shadow
        ("f", 1, 200, 200, 1),  # F: past the shadow, no extra left
    ]
    work = sim.make_workload("tiny", rows)
    return Easy(work, sim.make_source(sim.PERFECT), 10)


def test_blocked_shadow_is_the_end_that_frees_enough_processors() -> None:
    easy = _tiny()
    assert easy.step() == 0  # A starts
    assert easy.start[0] == 0 and easy.free == 4
    easy.queue.extend([1])
    sh, extra = easy.blocked_shadow(1, 1)  # C needs 8: 4 free + A's 6 at 100
    assert (sh, extra) == (100, 2)
    assert easy.shadow_job == 0


def test_pass_backfills_what_does_not_delay_the_head() -> None:
    easy = _tiny()
    easy.step()  # A starts at 0
    assert easy.step() == 1  # C, D, E, F arrive; one pass
    assert easy.start[1:] == [-1, 1, 1, -1]  # D by the extra processors, E by its end
    assert easy.queue == [1, 4]
    assert (easy.shadow, easy.extra) == (100, 0)
    assert (easy.min_est, easy.min_p) == (200, 1)  # F: the best candidate left
    assert easy.reservation[1] == 100


def test_pass_with_two_reservations_protects_both() -> None:
    rows = [
        ("a", 0, 100, 100, 6),  # A: runs 0..100
        ("c", 1, 500, 500, 8),  # C: reserved at 100 (A's end)
        ("g", 1, 100, 100, 10),  # G: the whole machine, reserved at 600 (C's end)
        ("d", 1, 300, 300, 2),  # D: past C's reservation, on its 2 spare processors
        ("e", 1, 50, 50, 1),  # E: ends before both
        ("f", 1, 200, 200, 1),  # F: past C's, no spare processor left there
    ]
    easy = Easy(sim.make_workload("two", rows), sim.make_source(sim.PERFECT), 10, backfill_depth=2)
    easy.step()
    assert easy.step() == 1
    assert easy.start[1:] == [-1, -1, 1, 1, -1]
    assert easy.reservation[1:3] == [100, 600]
    assert easy.queue == [1, 2, 5]
    assert easy.shadow == 100


def test_a_job_ending_before_the_later_reservation_passes() -> None:
    # Issue 46, as PBS checks a job (simulate_resmin, simulate.cpp:1800-1802): the free
    # processors over its own run only. T1 (the whole machine) is reserved at B's end, 20;
    # T2 (3) at A's end, 6, with 1 processor beside it until 9. C (1, ends at 12) takes
    # it: T1's 0 at 20 is after C's end. E (2) then waits; before issue 46 E started and
    # C was refused (T2's extra was the least free from 6 on, T1's 0 included).
    rows = [
        ("a", 0, 6, 6, 2),  # A: runs 0..6
        ("b", 0, 20, 20, 1),  # B: runs 0..20
        ("t", 1, 3, 3, 5),  # T1: reserved at 20
        ("u", 1, 3, 3, 3),  # T2: reserved at 6
        ("c", 1, 12, 12, 1),  # C: beside T2, gone before T1
        ("e", 1, 5, 5, 2),  # E: 1 processor left after C
    ]
    easy = Easy(sim.make_workload("two", rows), sim.make_source(sim.PERFECT), 5, backfill_depth=2)
    easy.step()
    assert easy.step() == 1
    assert easy.start[2:] == [-1, -1, 1, -1]
    assert easy.reservation[2:4] == [20, 6]
    assert easy.queue == [2, 3, 5]
    assert easy.shadow == 20


# ---------------------------------------------------------------------------------------
# Easy on real states: stepping through KTH-SP2


def _kth(source: str, correction: str, jobs: int = 1500) -> sim.SimWorkload:
    work = workload("kth")
    return work._replace(
        **{f: getattr(work, f)[:jobs] for f in ("user", "submit", "run", "wall", "procs")}
    )


def _after_passes(easy: Easy, every: int) -> Iterator[int]:
    # Step through the simulation; yield the instant after every ``every``-th pass that
    # left a blocked head (arrivals after it are not yet in the state).
    passes = 0
    while easy.next_arrival < easy.n or easy.ends:
        before = easy.passes
        t = easy.step()
        if easy.passes > before and easy.shadow >= 0:
            passes += 1
            if passes % every == 0:
                yield t


@pytest.mark.slow
@pytest.mark.parametrize("source", ["fixed10", "v1"])
def test_shadow_by_is_the_shadow_once_the_corrections_are_taken(source: str) -> None:
    work = _kth(source, "pbs")
    easy = Easy(work, sim.make_source(source), work.machine_procs or 0, "pbs")
    compared = moved = 0
    for t in _after_passes(easy, 7):
        head = easy.queue[0]
        need = easy.procs[head] - easy.free
        # shadow_by holds while nothing but corrections happen: before the next end.
        bound = easy.ends[0][0] if easy.ends else float("inf")
        for later in (t + 1, t + 600, t + 7200):
            if later >= bound:
                break
            other = easy.copy()
            other.take_due(later)
            want, _ = other.blocked_shadow(later, head)
            assert easy.shadow_by(later, need) == max(want, later), (t, later)
            compared += 1
            moved += want != easy.shadow
    assert compared > 100 and moved > 10  # corrections did move shadows


@pytest.mark.slow
@pytest.mark.parametrize("source", ["fixed10", "v1"])
def test_noop_until_admits_no_job_in_its_window(source: str) -> None:
    work = _kth(source, "pbs")
    easy = Easy(work, sim.make_source(source), work.machine_procs or 0, "pbs")
    windows = 0
    for t in _after_passes(easy, 3):
        bound = min(
            easy.submit[easy.next_arrival] if easy.next_arrival < easy.n else float("inf"),
            easy.ends[0][0] if easy.ends else float("inf"),
        )
        if bound == float("inf"):
            continue
        last = easy.noop_until(t, bound - 1)
        if last <= t + 1:
            continue
        windows += 1
        for later in sorted({t + 1, (t + last) // 2, last}):
            other = easy.copy()
            other.source = sim.make_source(sim.PERFECT)  # a pass asks it at start
            other.source.bind(work)
            other.take_due(later)
            queued = list(other.queue)
            other.pass_depth1(later, 0)
            assert other.queue == queued, (t, later, last)
    assert windows > 20


def _starts(source: str, correction: str, **shortcuts: bool) -> Tuple[List[int], int]:
    work = _kth(source, correction, 1000)
    easy = Easy(work, sim.make_source(source), work.machine_procs or 0, correction, **shortcuts)
    result = easy.run()
    return result.start, result.passes


@pytest.mark.parametrize(
    "source,correction", [("fixed10", "pbs"), ("v1", "pbs"), ("v3", "power"), ("v1", "simple")]
)
def test_the_shortcuts_change_no_start(source: str, correction: str) -> None:
    fast, fast_passes = _starts(source, correction)
    untracked, _ = _starts(source, correction, track_shadow=False)
    naive, naive_passes = _starts(source, correction, every_instant=True)
    assert fast == untracked == naive
    assert naive_passes > fast_passes  # the shortcuts did skip passes
