"""Rank estimates: numbers to *sort* jobs by, as distinct from the soft walltime (issue 17).

A soft walltime must rarely be too short (reservations are placed by it), so v3 takes the
largest run/walltime ratio of the user's last jobs plus 15 minutes. A sort key only has to
put jobs in the order of their run times, so it may be a typical value instead of a safe
one. On PBS the two can be different numbers: the hook publishes the rank in a custom
resource and ``job_sort_formula`` reads it, while ``soft_walltime`` stays v3.

Every estimate here is a pure function of the job's walltime and processors and the user's
finished jobs ``(runtime_s, walltime_s, ncpus)``, newest end first (every walltime > 0), and
is clamped to ``[1, walltime]``; no history gives the walltime. :func:`estimates` gives all
candidates of :data:`CANDIDATES` for one job in one pass; :func:`replay` computes them for a
whole trace in the order the jobs ended; :func:`agreement` measures how well a candidate
orders job pairs by run time.

Candidates (``key``: the finest similarity key of ``calibrated`` with >= 3 jobs among the
user's last 100: walltime+ncpus, else walltime, else the user's jobs with their run times
scaled to this job's walltime; its 10 newest jobs):

* ``walltime``, ``v1`` (mean of the last 2 run times), ``v3`` (the hook's, 15 jobs + 900 s);
* ``key-median``, ``key-p25``, ``key-min``, ``key-last``: a statistic of the key's run times;
* ``ratio-median``, ``ratio-p25``: walltime x that statistic of run/walltime over the
  user's last 15 jobs;
* ``min-v3-ratio-p75``: min(v3, walltime x the 75th percentile ratio);
* ``geo-wall-key-median``, ``geo-v3-key-median``: the geometric mean of the walltime (or
  v3) and key-median, rounded down (a hedge between what the user asked and what the
  user's similar jobs ran);
* ``key-mean``: the mean of the key's run times, rounded up; ``key-p75``: their 75th
  percentile;
* ``tight-key-median``: key-median where the key's run times agree (max < 2 x min, and the
  key is walltime+ncpus or walltime), else v3: history trusted only where it is consistent.
"""

from __future__ import annotations

import bisect
import math
import random
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from ..core import calibrated as cal
from ..core import learned_site as ls
from ..core import rank as hook_rank
from ..core.predict import predict

Row = Tuple[int, int, int]  # (runtime_s, walltime_s, ncpus), newest end first

CANDIDATES = (
    "walltime",
    "v1",
    "v3",
    "key-median",
    "key-p25",
    "key-min",
    "key-last",
    "ratio-median",
    "ratio-p25",
    "min-v3-ratio-p75",
    "geo-wall-key-median",
    "geo-v3-key-median",
    "key-mean",
    "key-p75",
    "tight-key-median",
)
TIGHT_SPREAD = 2  # tight-key-median: the key's max run time below 2 x its min
RATIO_JOBS = 15  # as many jobs as v3 reads
HISTORY_ROWS = cal.HISTORY_ROWS  # the user's jobs kept (the hook's one query reads as many)
T = TypeVar("T")


def percentile(ordered: Sequence[T], num: int, den: int) -> T:
    """Nearest-rank percentile ``num/den`` of a sorted non-empty list (as ``calibrated``:
    the smallest value with at least ``num/den`` of the values at or below it)."""
    m = len(ordered)
    return ordered[max(0, -(-num * m // den) - 1)]


def _clamp(value: int, walltime_s: int) -> int:
    return max(1, min(int(value), walltime_s))


def _ratio_estimate(walltime_s: int, rows: Sequence[Row], num: int, den: int) -> int:
    # walltime x the num/den percentile of run/walltime over the newest RATIO_JOBS jobs
    # (sorted by the float ratio; the estimate itself is computed exactly, rounded up)
    ratios = sorted(rows[:RATIO_JOBS], key=lambda r: r[0] / r[1])
    run, wall, _ = percentile(ratios, num, den)
    return -(-run * walltime_s // wall)


def estimates(walltime_s: int, ncpus: int, history: Sequence[Row]) -> Tuple[int, ...]:
    """Every candidate of :data:`CANDIDATES` for one job, in that order.

    :param walltime_s: the job's walltime (> 0)
    :param ncpus: its processors
    :param history: the user's finished jobs, newest end first, every walltime > 0
    """
    if not history:
        return (walltime_s,) * len(CANDIDATES)
    pairs = [(run, wall) for run, wall, _ in history[: max(RATIO_JOBS, 2)]]
    v1 = predict("v1", walltime_s, pairs).soft_walltime_s
    v3 = predict("v3", walltime_s, pairs).soft_walltime_s
    assert v1 is not None and v3 is not None
    level, runs, _n = cal.features(walltime_s, ncpus, history)
    ordered = sorted(runs)
    key_median = _clamp(percentile(ordered, 1, 2), walltime_s)
    tight = level != cal.LEVEL_USER and ordered[-1] < TIGHT_SPREAD * ordered[0]
    p75 = _clamp(_ratio_estimate(walltime_s, history, 3, 4), walltime_s)
    return (
        walltime_s,
        v1,
        v3,
        key_median,
        _clamp(percentile(ordered, 1, 4), walltime_s),
        _clamp(ordered[0], walltime_s),
        _clamp(runs[0], walltime_s),
        _clamp(_ratio_estimate(walltime_s, history, 1, 2), walltime_s),
        _clamp(_ratio_estimate(walltime_s, history, 1, 4), walltime_s),
        min(v3, p75),
        max(1, math.isqrt(walltime_s * key_median)),
        max(1, math.isqrt(v3 * key_median)),
        hook_rank.key_mean(walltime_s, ncpus, history),  # what the hook publishes
        _clamp(percentile(ordered, 3, 4), walltime_s),
        key_median if tight else v3,
    )


class UserHistory:
    """Each user's finished jobs, newest end first, at most :data:`HISTORY_ROWS`."""

    def __init__(self) -> None:
        self.rows: Dict[str, List[Row]] = {}

    def add(self, user: str, row: Row) -> None:
        rows = self.rows.setdefault(user, [])
        rows.insert(0, row)
        del rows[HISTORY_ROWS:]

    def of(self, user: str) -> List[Row]:
        return self.rows.get(user, [])


def replay(
    user: Sequence[str],
    submit: Sequence[int],
    end: Sequence[int],
    run: Sequence[int],
    wall: Sequence[int],
    procs: Sequence[int],
) -> List[Tuple[int, ...]]:
    """Every candidate for every job (jobs in submit order), each from the user's jobs
    whose ``end`` is at or before the job's submit, learnt in end order (ties: job order).

    :param end: when each job ended (in a trace: submit + wait + run time)
    :param run: the run time each job is learnt with
    """
    n = len(submit)
    ends = sorted(range(n), key=lambda k: (end[k], k))
    hist = UserHistory()
    out: List[Tuple[int, ...]] = []
    e = 0
    for j in range(n):
        while e < n and end[ends[e]] <= submit[j]:
            k = ends[e]
            hist.add(user[k], (run[k], wall[k], procs[k]))
            e += 1
        out.append(estimates(wall[j], procs[j], hist.of(user[j])))
    return out


def sample_pairs(
    run: Sequence[int],
    count: int,
    rng: random.Random,
    accept: Optional[Sequence[bool]] = None,
    either: bool = False,
) -> List[Tuple[int, int]]:
    """``count`` random pairs of jobs with different run times.

    :param accept: per job; with it, a pair is kept only if both jobs are accepted, or with
        ``either`` only if at least one is
    """
    n = len(run)
    pairs: List[Tuple[int, int]] = []
    if n < 2 or len(set(run)) < 2:
        return pairs
    if accept is not None:  # no pair can pass: return rather than loop for ever
        chosen = {run[k] for k in range(n) if accept[k]}
        if not chosen or (not either and len(chosen) < 2):
            return pairs
    while len(pairs) < count:
        a, b = rng.randrange(n), rng.randrange(n)
        if run[a] == run[b]:
            continue
        if accept is not None:
            ok = (accept[a] or accept[b]) if either else (accept[a] and accept[b])
            if not ok:
                continue
        pairs.append((a, b))
    return pairs


def coqueued_pairs(
    submit: Sequence[int],
    start: Sequence[int],
    run: Sequence[int],
    count: int,
    rng: random.Random,
) -> List[Tuple[int, int]]:
    """``count`` random pairs of jobs that were queued together (different run times): a job
    ``a`` that waited, and a job ``b`` submitted after it while it waited; only such pairs
    are ever compared by a sort. Jobs in submit order (``submit`` sorted). A job whose next
    50 jobs of that window all have its run time is left out (so that drawing ends)."""
    n = len(submit)
    upto = [bisect.bisect_left(submit, start[a], a + 1) for a in range(n)]
    waited = [
        a
        for a in range(n)
        if upto[a] > a + 1 and any(run[b] != run[a] for b in range(a + 1, min(upto[a], a + 50)))
    ]
    pairs: List[Tuple[int, int]] = []
    if not waited:
        return pairs
    while len(pairs) < count:
        a = waited[rng.randrange(len(waited))]
        b = rng.randrange(a + 1, upto[a])
        if run[a] != run[b]:
            pairs.append((a, b))
    return pairs


def agreement(est: Sequence[int], run: Sequence[int], pairs: Sequence[Tuple[int, int]]) -> float:
    """Share of ``pairs`` that ``est`` puts in the order of their run times (equal estimates
    count half): 0.5 is a coin, 1 is perfect; the Kendall tau of the pairs is 2 x it - 1."""
    if not pairs:
        return float("nan")
    agree = 0.0
    for a, b in pairs:
        if est[a] == est[b]:
            agree += 0.5
        elif (est[a] < est[b]) == (run[a] < run[b]):
            agree += 1.0
    return agree / len(pairs)


# The cost of gaming the rank (issue 31): the cheap jobs a user submits to move one job.
GAME_RUNS_S = (1, 10, 60, 600, 3600)  # the cheap jobs' run times tried
GAME_MAX_JOBS = HISTORY_ROWS  # more would push the oldest out of the hook's 100 rows


def gaming_cost(
    ranker: Callable[[int, Optional[int], Sequence[Row]], int],
    walltime_s: int,
    ncpus: int,
    honest: Sequence[Row],
    target_s: int,
    widths: Sequence[int] = (1,),
) -> Optional[Tuple[float, int, int, int]]:
    """The cheapest way found to get ``ranker`` to rank the job at ``target_s`` or below.

    The user submits ``n`` cheap jobs with the job's walltime, each of one run time of
    :data:`GAME_RUNS_S` and one width of ``widths``, on top of the ``honest`` history (newest
    first); all ``n`` end before the job is submitted.

    :returns: ``(core_hours, n, run_s, width)`` of the cheapest, or ``None``: no such way
        within :data:`GAME_MAX_JOBS` jobs
    """
    best: Optional[Tuple[float, int, int, int]] = None
    for run_s in GAME_RUNS_S:
        for width in widths:
            cheap = (run_s, walltime_s, width)
            for n in range(1, GAME_MAX_JOBS + 1):
                history = [cheap] * n + list(honest)
                if ranker(walltime_s, ncpus, history[:HISTORY_ROWS]) <= target_s:
                    cost = n * run_s * width / 3600.0
                    if best is None or cost < best[0]:
                        best = (cost, n, run_s, width)
                    break
    return best


GAME_NOW_S = 1_000_000_000  # the job's submit in learned_ranker's history


def learned_ranker(
    choices: ls.LearnedChoices, paid: bool = False
) -> Callable[[int, Optional[int], Sequence[Row]], int]:
    """The hook's rank ``learned`` (``paid``: ``learned-paid``) of a site table's decisions,
    as a :func:`gaming_cost` ranker: the history as the hook reads it, with the rows' ends
    one second apart, the newest one second before the job's submit (the cheap jobs end
    just before it; only the newest end matters, through the time since the user's last
    job ended)."""

    def ranker(walltime_s: int, ncpus: Optional[int], history: Sequence[Row]) -> int:
        site = [(r[0], r[1], r[2], GAME_NOW_S - 1 - i) for i, r in enumerate(history)]
        own = ls.predict(choices, walltime_s, site, GAME_NOW_S).rank_s
        if not paid:
            return own
        return hook_rank.paid_floor(walltime_s, ncpus, list(history[:HISTORY_ROWS]), own)

    return ranker
