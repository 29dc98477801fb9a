"""Estimate sources: what a simulated scheduler plans with (pure).

A source answers at submit (the hook's ``queuejob``) and again at start (``runjob``), and
learns when a job ends: the users' walltimes, a predictor of the hook fed with the jobs that
ended in the simulation, ``calibrated``, ``perfect`` (the real run time) or ``fixed10``.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple

from ..core import calibrated as cal
from ..core import learned, registry
from ..core.predict import PREDICTORS as HOOK_PREDICTORS
from ..core.predict import PredictorParams, predict
from .learned_native import new_learner
from .sim_workload import SimWorkload

BASELINE = registry.USERS
FIXED10 = registry.FIXED10
PERFECT = registry.PERFECT
CALIBRATED = registry.CALIBRATED
LEARNED = registry.LEARNED


class EstimateSource:
    """What the scheduler plans with. Subclasses answer at submit and start, and learn at end.

    ``bind`` is called once with the workload before the simulation; job ``j`` is an index
    into it. ``refreshable`` sources are asked again by the refresh (``on_refresh``).
    """

    name = "?"
    refreshable = False

    def bind(self, work: SimWorkload) -> None:
        self.work = work

    def on_submit(self, j: int, now: int) -> int:
        raise NotImplementedError

    def on_start(self, j: int, now: int) -> int:
        return self.on_submit(j, now)

    def on_end(self, j: int, now: int) -> None:
        """Job ``j`` ended at ``now`` (its simulated run time is ``work.run[j]``)."""

    def on_refresh(self, j: int, now: int) -> int:
        return self.on_submit(j, now)


class WalltimeSource(EstimateSource):
    """The users' walltimes (the baseline)."""

    name = BASELINE

    def on_submit(self, j: int, now: int) -> int:
        return self.work.wall[j]


class RecordedSource(EstimateSource):
    """The soft walltimes the jobs had on the site (``work.recorded_soft``), else their
    walltimes: what the site's scheduler planned with (:mod:`.fit` replays it)."""

    name = "recorded"

    def on_submit(self, j: int, now: int) -> int:
        soft = self.work.recorded_soft
        wall = self.work.wall[j]
        if soft is None or soft[j] <= 0:
            return wall
        return min(soft[j], wall)


class PerfectSource(EstimateSource):
    """The real (simulated) run time."""

    name = PERFECT

    def on_submit(self, j: int, now: int) -> int:
        return self.work.run[j]


class FixedSource(EstimateSource):
    """Every job predicted ``seconds`` (at most its walltime): Rubio et al.'s correction alone."""

    def __init__(self, seconds: int = 600, name: str = FIXED10) -> None:
        self.seconds = seconds
        self.name = name

    def on_submit(self, j: int, now: int) -> int:
        return min(self.seconds, self.work.wall[j])


class PredictorSource(EstimateSource):
    """A predictor of the hook, fed with the jobs that ended in the simulation."""

    refreshable = True

    def __init__(self, name: str, params: Optional[PredictorParams] = None) -> None:
        if name not in HOOK_PREDICTORS:
            raise ValueError(f"unknown predictor {name!r}")
        self.name = name
        self.params = params or PredictorParams.create()

    def bind(self, work: SimWorkload) -> None:
        self.work = work
        self.keep = max(self.params.history_jobs(self.name), 1)
        self.history: Dict[str, Deque[Tuple[int, int]]] = {}
        self.ids: Dict[str, Deque[int]] = {}
        self.memo: Dict[str, Tuple[Any, int, int]] = {}

    def on_submit(self, j: int, now: int) -> int:
        user = self.work.user[j]
        wall = self.work.wall[j]
        hist = self.history.get(user)
        if hist is None:
            return wall
        head = hist[0]
        last = self.memo.get(user)
        if last is not None and last[0] is head and last[1] == wall:
            return last[2]
        value = predict(self.name, wall, hist, self.params).soft_walltime_s
        assert value is not None
        self.memo[user] = (head, wall, value)
        return value

    def on_end(self, j: int, now: int) -> None:
        user = self.work.user[j]
        hist = self.history.get(user)
        if hist is None:
            hist = self.history[user] = deque(maxlen=self.keep)
            self.ids[user] = deque(maxlen=self.keep)
        hist.appendleft((self.work.run[j], self.work.wall[j]))
        self.ids[user].appendleft(j)

    def history_ids(self, user: str) -> List[int]:
        """Jobs in the user's history now, most recent end first (for tests)."""
        return list(self.ids.get(user, ()))


class CalibratedSource(EstimateSource):
    """The hook's ``calibrated`` predictor: each user's jobs that ended in the simulation
    (newest first, at most the hook's ``HISTORY_ROWS``) and a site table that learns each
    job's outcome when it ends, as ``softwalltime calibrate`` would from the history.

    :param target_under_pct: the under-estimate target, percent; ``None``: as many
        under-estimates as v3 on the same jobs (:meth:`Calibration.update` compares v3's
        soft walltime, which the job's outcome holds, with its run time at each end)
    """

    refreshable = True
    name = CALIBRATED

    def __init__(self, target_under_pct: Optional[float] = cal.DEFAULT_TARGET_UNDER_PCT) -> None:
        self.target = None if target_under_pct is None else float(target_under_pct)

    def bind(self, work: SimWorkload) -> None:
        self.work = work
        self.users = work.user
        self.walls = work.wall
        self.ncpus = work.procs
        self.runs = work.run
        self.table = cal.Calibration()
        # Per user: the jobs ended in the simulation, newest first, at most HISTORY_ROWS
        # (every one has a walltime > 0: make_workload keeps no other); per walltime those
        # of them with it, and per (walltime, procs) those with both, in the same order:
        # what cal.outcome_of_usable reads without a scan of the history.
        self.history: Dict[str, List[Tuple[int, int, int]]] = {}
        self.by_wall: Dict[str, Dict[int, List[Tuple[int, int, int]]]] = {}
        self.by_class: Dict[str, Dict[Tuple[int, int], List[Tuple[int, int, int]]]] = {}
        # job -> (soft walltime, rule, outcome, self.ended then) of its last answer (a
        # Choice's fields, and when): the answer is a pure function of the history and the
        # table, which change only at an end, so a job that starts with no end since its
        # submit (most do) gets the same answer again
        self.chosen: Dict[int, Any] = {}
        self.ended = 0
        # user -> (walltime, procs, outcome) of the last prediction, dropped when the
        # user's history changes: the outcome (the costly, table-independent part of a
        # prediction) is a pure function of these, so a job asked again at start, or the
        # next job of a burst, reuses it.
        self.memo: Dict[str, Tuple[int, int, cal.Outcome]] = {}

    def on_submit(self, j: int, now: int) -> int:
        last = self.chosen.get(j)
        if last is not None and last[3] == self.ended:
            return last[0]  # type: ignore[no-any-return]
        user = self.users[j]
        wall = self.walls[j]
        procs = self.ncpus[j]
        memo = self.memo.get(user)
        if memo is not None and memo[0] == wall and memo[1] == procs:
            out = memo[2]
        else:
            hist = self.history.get(user)
            if hist is None:
                out = cal.outcome_of_usable(wall, procs, [])
            else:
                out = cal.outcome_of_usable(
                    wall,
                    procs,
                    hist,  # type: ignore[arg-type]
                    self.by_wall[user].get(wall, []),  # type: ignore[arg-type]
                    self.by_class[user].get((wall, procs), []),  # type: ignore[arg-type]
                )
            self.memo[user] = (wall, procs, out)
        rule = self.table.choose(out.bin)  # what Calibration.predict does with the outcome
        soft = out.softs[rule]
        self.chosen[j] = (soft, rule, out, self.ended)
        return soft

    def on_end(self, j: int, now: int) -> None:
        last = self.chosen.pop(j)
        run = self.runs[j]
        self.table.update(last[2], run, self.target, last[0])
        self.ended += 1
        user = self.users[j]
        wall = self.walls[j]
        procs = self.ncpus[j]
        entry = (run, wall, procs)
        hist = self.history.get(user)
        if hist is None:
            hist = self.history[user] = []
            walls = self.by_wall[user] = {}
            classes = self.by_class[user] = {}
        else:
            walls = self.by_wall[user]
            classes = self.by_class[user]
        self.memo.pop(user, None)  # the history changes
        hist.insert(0, entry)
        same = walls.get(wall)
        if same is None:
            walls[wall] = [entry]
        else:
            same.insert(0, entry)
        key = (wall, procs)
        same = classes.get(key)
        if same is None:
            classes[key] = [entry]
        else:
            same.insert(0, entry)
        if len(hist) > cal.HISTORY_ROWS:  # the oldest leaves every list
            _, old_wall, old_procs = hist.pop()
            walls[old_wall].pop()
            classes[old_wall, old_procs].pop()

    def target_report(self) -> Dict[str, Any]:
        """The target and the rate achieved, as ``evaluate`` reports them: ``target``
        (``"v3"`` or ``"fixed"``), ``target_under_pct`` (for ``v3``: v3's rate on the same
        jobs, computed alongside) and ``under_pct`` (jobs whose last estimate, the one they
        started with, was below their run time), percent of the jobs ended."""
        table = self.table
        n = table.total
        target = self.target
        if target is None and n:
            target = 100.0 * table.v3_under() / n
        return {
            "target": "v3" if self.target is None else "fixed",
            "target_under_pct": target,
            "under_pct": 100.0 * table.total_under / n if n else None,
        }


class LearnedSource(EstimateSource):
    """The predictor ``learned`` (:mod:`softwalltime.core.learned`): each job's bins and
    rules read the user's jobs ended in the simulation (newest end first, at most
    ``learned.HISTORY_ROWS``, with their ends) and the time since the newest ended; the
    site table starts empty (the shipped prior holds HPC2N and CTC-SP2: the future of two
    of the traces simulated) and learns each job when it ends, from the outcome and soft
    walltime of its last answer, toward the target, as ``evaluate --predictors learned``
    replays it. A site's table changes at each ``softwalltime calibrate`` instead.

    :param target_under_pct: the under-estimate target, percent; ``None``: v3's rate on the
        same jobs
    """

    refreshable = True
    name = LEARNED

    def __init__(self, target_under_pct: Optional[float] = None) -> None:
        self.target = None if target_under_pct is None else float(target_under_pct) / 100.0
        self.target_pct = None if target_under_pct is None else float(target_under_pct)

    def bind(self, work: SimWorkload) -> None:
        self.work = work
        self.table = new_learner()
        self.rows: Dict[str, List[learned.Row]] = {}  # per user, newest end first
        self.chosen: Dict[int, Tuple[int, learned.Outcome]] = {}  # job -> its last answer

    def on_submit(self, j: int, now: int) -> int:
        w = self.work
        out = learned.outcome(w.wall[j], self.rows.get(w.user[j], ()), now)
        soft = out.softs[self.table.choose(out)]
        self.chosen[j] = (soft, out)
        return soft

    def on_end(self, j: int, now: int) -> None:
        w = self.work
        soft, out = self.chosen.pop(j)
        self.table.update(out, w.run[j], soft, self.target)
        rows = self.rows.setdefault(w.user[j], [])
        rows.insert(0, (w.run[j], w.wall[j], now))
        del rows[learned.HISTORY_ROWS :]

    def target_report(self) -> Dict[str, Any]:
        """As :meth:`CalibratedSource.target_report`."""
        table = self.table
        n = table.total
        target = self.target_pct
        if target is None and n:
            target = 100.0 * table.v3_under / n
        return {
            "target": "v3" if self.target_pct is None else "fixed",
            "target_under_pct": target,
            "under_pct": 100.0 * table.total_under / n if n else None,
        }


SOURCE_NAMES = registry.SIMULATED  # users, every predictor, perfect, fixed10


def make_source(
    name: str,
    params: Optional[PredictorParams] = None,
    target_under_pct: Optional[float] = cal.DEFAULT_TARGET_UNDER_PCT,
) -> EstimateSource:
    """Build the estimate source called ``name`` (see :data:`SOURCE_NAMES`).

    :param target_under_pct: ``calibrated``'s and ``learned``'s target, percent, or
        ``None`` for v3's rate
    """
    if name == BASELINE:
        return WalltimeSource()
    if name == PERFECT:
        return PerfectSource()
    if name == FIXED10:
        return FixedSource(600)
    if name in HOOK_PREDICTORS:
        return PredictorSource(name, params)
    if name == CALIBRATED:
        return CalibratedSource(target_under_pct)
    if name == LEARNED:
        return LearnedSource(target_under_pct)
    raise ValueError("unknown estimate source {!r}; known: {}".format(name, ",".join(SOURCE_NAMES)))
