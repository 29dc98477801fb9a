"""The simulation's ``calibrated`` source keeps state to go fast (per-class history lists, a
memo per user, the answer of a job asked again with no end since); it must answer what the
hook's own functions answer, and the table must learn the same, bit for bit."""

from __future__ import annotations

import random
from typing import Dict, List, Optional, Tuple

import pytest
from helpers_data import TRACES

from softwalltime.core import calibrated as cal
from softwalltime.replay import simulate as sim
from softwalltime.replay.simulate import SimWorkload

KTH = TRACES / "KTH-SP2-1996-2.1-cln.swf.gz"


@pytest.fixture(scope="module")
def kth() -> SimWorkload:
    return sim.fit_machine(sim.read_workload(str(KTH)), 100)


class Reference(sim.CalibratedSource):
    """The slow path: ``Calibration.predict`` on the user's whole history list at every
    question, a history of its own, ``update`` with the job's last Choice at its end."""

    def bind(self, work: SimWorkload) -> None:
        super().bind(work)
        self.rows: Dict[str, List[Tuple[int, int, int]]] = {}
        self.last: Dict[int, cal.Choice] = {}

    def on_submit(self, j: int, now: int) -> int:
        work = self.work
        hist = self.rows.get(work.user[j], [])
        choice = self.table.predict(work.wall[j], work.procs[j], hist)  # type: ignore[arg-type]
        self.last[j] = choice
        return choice.soft_walltime_s

    def on_end(self, j: int, now: int) -> None:
        work = self.work
        choice = self.last.pop(j)
        self.table.update(choice.outcome, work.run[j], self.target, choice.soft_walltime_s)
        hist = self.rows.setdefault(work.user[j], [])
        hist.insert(0, (work.run[j], work.wall[j], work.procs[j]))
        del hist[cal.HISTORY_ROWS :]


class Answers(sim.CalibratedSource):
    """The source as the simulation runs it, recording every answer and the ends before it."""

    def bind(self, work: SimWorkload) -> None:
        super().bind(work)
        self.answers: List[Tuple[int, int, int]] = []
        self.ends_before: List[int] = []
        self.ends = 0

    def on_submit(self, j: int, now: int) -> int:
        value = super().on_submit(j, now)
        self.answers.append((j, now, value))
        self.ends_before.append(self.ends)
        return value

    def on_end(self, j: int, now: int) -> None:
        super().on_end(j, now)
        self.ends += 1


class ReferenceAnswers(Reference):
    def bind(self, work: SimWorkload) -> None:
        super().bind(work)
        self.answers: List[Tuple[int, int, int]] = []

    def on_submit(self, j: int, now: int) -> int:
        value = super().on_submit(j, now)
        self.answers.append((j, now, value))
        return value


@pytest.mark.slow
@pytest.mark.parametrize("target", [cal.DEFAULT_TARGET_UNDER_PCT, None])
def test_the_source_answers_and_learns_what_the_hooks_functions_do(
    kth: SimWorkload, target: Optional[float]
) -> None:
    fast, slow = Answers(target), ReferenceAnswers(target)
    a = sim.simulate(kth, fast, 100, "pbs")
    b = sim.simulate(kth, slow, 100, "pbs")
    assert len(fast.answers) == 2 * len(kth.submit)
    assert fast.answers == slow.answers
    assert a == b
    # the table: every cell, lambda and its controller, bit for bit
    assert fast.table.rows() == slow.table.rows()
    assert (fast.table.deficit, fast.table.log_lam) == (slow.table.deficit, slow.table.log_lam)
    assert fast.target_report() == slow.target_report()
    # both kinds of start were met: with no end since the submit (the source repeats its
    # answer) and after ends (a new prediction)
    ends_at_submit: Dict[int, int] = {}
    repeated = predicted = 0
    for (j, _now, _value), ends in zip(fast.answers, fast.ends_before):
        if j not in ends_at_submit:
            ends_at_submit[j] = ends
        elif ends == ends_at_submit[j]:
            repeated += 1
        else:
            predicted += 1
    assert repeated > 1000 and predicted > 1000


@pytest.mark.slow
def test_outcome_with_the_callers_class_rows_is_the_outcome() -> None:
    rng = random.Random(7)
    walls = [600, 3600, 7200, 86400]
    checked = {cal.LEVEL_WALL_NCPUS: 0, cal.LEVEL_WALL: 0, cal.LEVEL_USER: 0}
    for _ in range(3000):
        rows = [
            (rng.randint(0, 90000), rng.choice(walls), rng.choice([1, 2, 8]))
            for _ in range(rng.randint(1, 120))
        ]
        wall, ncpus = rng.choice(walls), rng.choice([1, 2, 8])
        usable = rows[: cal.HISTORY_ROWS]
        same_wall = [row for row in usable if row[1] == wall]
        same_both = [row for row in same_wall if row[2] == ncpus]
        out = cal.outcome_of_usable(wall, ncpus, usable, same_wall, same_both)
        assert out == cal.outcome(wall, ncpus, rows)
        checked[out.level] += 1
    assert min(checked.values()) > 100  # every key level was exercised
