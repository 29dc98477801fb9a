"""The predictors PQStar is compared with: IBL, a QBETS-style quantile bound, log-uniform.

All three learn only from waits already known, i.e. of jobs that have started; the replay
in :mod:`.pqstar` feeds them in start order (:meth:`observe`) and asks at submit times.

- :class:`QuantileBound` (after Nurmi, Brevik and Wolski, QBETS): the upper
  ``confidence`` bound on the ``quantile`` of the recent waits of jobs of the same class,
  by the binomial order-statistic method; too few observations in the class: the same over
  all jobs. Classes stand in for QBETS's clustering on processors and requested time:
  processors by powers of two x ERT by powers of two of 10 minutes. No change-point
  detection: a fixed window of the most recent ``window`` waits per class stands in.
- :func:`loguniform_bound`: waits modelled as log-uniform between the least and the
  greatest recent wait of the class; its ``quantile``.
- :class:`Ibl` (Li et al., instance-based learning): the distance-weighted mean wait of the
  ``k`` nearest started jobs by a heterogeneous Euclidean-overlap distance over job
  attributes (user: overlap; log processors, log estimated run time) and the system state
  at submit (log queue length, log queued processors, free fraction). The paper compares
  the target with *all* jobs of the history; the candidates here are the last ``window``
  started jobs and, of the target's user, the ``user_window`` most recent older ones. The
  user term is 1 for another user and every other term at most about 1, so the nearest
  jobs are the user's own whenever the user has enough: on CTC-SP2 and HPC2N these
  candidates give the whole history's marks within a point (the last 400 jobs alone mark
  4-9 % more quick starters, and misguide more, on CTC-SP2).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from functools import cache
from itertools import repeat
from operator import add, mul, ne, sub
from typing import Deque, Dict, List, Optional, Sequence, Tuple

# The normal approximation of the binomial is used above this many observations (the
# exact sum below it costs O(n) per n and is only computed once per n).
_EXACT_BINOMIAL_MAX = 200


@cache
def order_statistic(n: int, quantile: float, confidence: float) -> Optional[int]:
    """The 1-based rank k of the order statistic that bounds the ``quantile`` from above
    with probability ``confidence`` among ``n`` observations, or None if n is too small.

    k is the least with P(Binomial(n, quantile) <= k - 1) >= confidence.
    """
    if n < 1:
        return None
    if n > _EXACT_BINOMIAL_MAX:
        z = _normal_quantile(confidence)
        k = math.ceil(n * quantile + z * math.sqrt(n * quantile * (1 - quantile)) + 0.5)
        return k if k <= n else None
    cdf = 0.0
    log_q, log_p = math.log(quantile), math.log1p(-quantile)
    for j in range(n + 1):  # j = number of observations below the quantile
        cdf += math.exp(
            math.lgamma(n + 1)
            - math.lgamma(j + 1)
            - math.lgamma(n - j + 1)
            + j * log_q
            + (n - j) * log_p
        )
        if cdf >= confidence:
            return j + 1 if j + 1 <= n else None
    return None


def _normal_quantile(p: float) -> float:
    """Inverse of the standard normal CDF (bisection on erf; only called once per n)."""
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def size_class(procs: int) -> int:
    """Request-size class: processors by power of two (1, 2, 3-4, 5-8, ...)."""
    return max(0, procs - 1).bit_length()


def job_class(procs: int, ert_s: int) -> Tuple[int, int]:
    """QBETS-style job class: the size class, and the ERT by powers of two of 10 minutes
    (< 10 min, < 20 min, < 40 min, ...)."""
    return size_class(procs), (max(0, ert_s) // 600).bit_length()


class _Window:
    """The most recent waits, in arrival order and sorted."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.recent: Deque[int] = deque()
        self.sorted: List[int] = []

    def add(self, wait_s: int) -> None:
        self.recent.append(wait_s)
        bisect.insort(self.sorted, wait_s)
        if len(self.recent) > self.size:
            old = self.recent.popleft()
            del self.sorted[bisect.bisect_left(self.sorted, old)]


class QuantileBound:
    """QBETS-style bounds and the log-uniform model over the same per-class windows.

    :param quantile: the quantile bounded (0.95)
    :param confidence: the confidence of the bound (0.95)
    :param window: waits kept per size class and overall
    """

    def __init__(self, quantile: float = 0.95, confidence: float = 0.95, window: int = 1000):
        self.quantile = quantile
        self.confidence = confidence
        self.window = window
        self.classes: Dict[Tuple[int, int], _Window] = {}
        self.all = _Window(window)

    def observe(self, procs: int, ert_s: int, wait_s: int) -> None:
        """A job of ``procs`` processors and ERT ``ert_s`` started after waiting ``wait_s``."""
        key = job_class(procs, ert_s)
        win = self.classes.get(key)
        if win is None:
            win = self.classes[key] = _Window(self.window)
        win.add(wait_s)
        self.all.add(wait_s)

    def _windows(self, procs: int, ert_s: int) -> Tuple[_Window, ...]:
        win = self.classes.get(job_class(procs, ert_s))
        return (win, self.all) if win is not None else (self.all,)

    def bound(self, procs: int, ert_s: int) -> int:
        """The upper bound on the wait of a job of ``procs`` processors and ERT ``ert_s``,
        seconds (0 with no history at all; the longest wait seen when too few for the
        confidence)."""
        for win in self._windows(procs, ert_s):
            k = order_statistic(len(win.sorted), self.quantile, self.confidence)
            if k is not None:
                return win.sorted[k - 1]
        return self.all.sorted[-1] if self.all.sorted else 0

    def loguniform(self, procs: int, ert_s: int, quantile: float = 0.95) -> int:
        """The log-uniform model's ``quantile`` (class window, else overall), seconds."""
        for win in self._windows(procs, ert_s):
            if len(win.sorted) >= 2:
                return loguniform_bound(win.sorted[0], win.sorted[-1], quantile)
        return self.all.sorted[-1] if self.all.sorted else 0


def loguniform_bound(least_s: int, greatest_s: int, quantile: float) -> int:
    """The ``quantile`` of a log-uniform distribution of 1 + wait between 1 + the bounds."""
    lo, hi = math.log1p(max(0, least_s)), math.log1p(max(0, greatest_s))
    return int(round(math.expm1(lo + quantile * (hi - lo))))


# Feature vector of a job at its submit time: user, then the numeric attributes already
# divided by their scale (so that each contributes at most about 1 to the distance).
Features = Tuple[str, float, float, float, float, float]


def features(
    user: str,
    procs: int,
    ert_s: int,
    queued_jobs: int,
    queued_procs: int,
    free_procs: int,
    machine_procs: int,
) -> Features:
    """IBL's attributes of a job and the system at its submit time, scaled to about [0, 1]."""
    scale_p = math.log2(max(2, machine_procs))
    return (
        user,
        math.log2(max(1, procs)) / scale_p,
        math.log1p(max(0, ert_s)) / 14.0,  # log(1 + 2 weeks) is about 14
        math.log1p(queued_jobs) / 7.0,  # log(1 + 1000 jobs)
        math.log1p(queued_procs) / (1.0 + math.log1p(machine_procs) + 2.3),  # 10 machines
        max(0, free_procs) / max(1, machine_procs),
    )


class _Columns:
    """Started jobs' features by column (user, then the numeric ones) and their waits."""

    def __init__(self) -> None:
        self.cols: Tuple[
            Deque[str], Deque[float], Deque[float], Deque[float], Deque[float], Deque[float]
        ] = (deque(), deque(), deque(), deque(), deque(), deque())
        self.waits: Deque[int] = deque()

    def append(self, feats: Features, wait_s: int) -> None:
        for col, value in zip(self.cols, feats):
            col.append(value)  # type: ignore[attr-defined]
        self.waits.append(wait_s)

    def popleft(self) -> Tuple[Features, int]:
        feats = tuple(col.popleft() for col in self.cols)
        return feats, self.waits.popleft()  # type: ignore[return-value]

    def nearest(self, feats: Features, k: int) -> List[Tuple[float, int]]:
        """The ``k`` least (squared distance, wait) pairs."""
        users, c1, c2, c3, c4, c5 = self.cols
        u, x1, x2, x3, x4, x5 = feats
        # Squared per-attribute distances, summed, all in C (map over deques).
        d1 = map(sub, c1, repeat(x1))
        e1 = map(sub, c1, repeat(x1))
        d2 = map(sub, c2, repeat(x2))
        e2 = map(sub, c2, repeat(x2))
        d3 = map(sub, c3, repeat(x3))
        e3 = map(sub, c3, repeat(x3))
        d4 = map(sub, c4, repeat(x4))
        e4 = map(sub, c4, repeat(x4))
        d5 = map(sub, c5, repeat(x5))
        e5 = map(sub, c5, repeat(x5))
        # The same order of additions as ibl_predict_reference(): the user term last.
        numeric = map(
            add,
            map(
                add,
                map(add, map(add, map(mul, d1, e1), map(mul, d2, e2)), map(mul, d3, e3)),
                map(mul, d4, e4),
            ),
            map(mul, d5, e5),
        )
        total = map(add, map(ne, users, repeat(u)), numeric)
        return heapq.nsmallest(k, zip(total, self.waits))


class Ibl:
    """Instance-based learning over the last ``window`` started jobs and, per user, the
    ``user_window`` most recent of that user's started jobs older than those.

    :param k: neighbours averaged (weighted by 1 / (distance + 0.01))
    :param window: started jobs kept, most recent starts
    :param user_window: per user, started jobs kept after they left ``window`` (0: none)
    """

    def __init__(self, k: int = 10, window: int = 400, user_window: int = 200) -> None:
        self.k = k
        self.window = window
        self.user_window = user_window
        self.recent = _Columns()
        self.older: Dict[str, _Columns] = {}

    def observe(self, feats: Features, wait_s: int) -> None:
        """A job with these submit-time features started after waiting ``wait_s``."""
        self.recent.append(feats, wait_s)
        if len(self.recent.waits) > self.window:
            old, old_wait = self.recent.popleft()
            if self.user_window > 0:
                mine = self.older.get(old[0])
                if mine is None:
                    mine = self.older[old[0]] = _Columns()
                mine.append(old, old_wait)
                if len(mine.waits) > self.user_window:
                    mine.popleft()

    def predict(self, feats: Features) -> int:
        """The predicted wait of a job with these features, seconds (0 without history)."""
        if not self.recent.waits:
            return 0
        nearest = self.recent.nearest(feats, self.k)
        mine = self.older.get(feats[0])
        if mine is not None:
            nearest = heapq.nsmallest(self.k, nearest + mine.nearest(feats, self.k))
        num = den = 0.0
        for dist2, wait in nearest:
            w = 1.0 / (math.sqrt(dist2) + 0.01)
            num += w * wait
            den += w
        return int(round(num / den))


def ibl_predict_reference(
    history: Sequence[Tuple[Features, int]], feats: Features, k: int = 10
) -> int:
    """The same prediction written plainly (tests check :meth:`Ibl.predict` against it)."""
    if not history:
        return 0
    scored = []
    for f, wait in history:
        dist2 = float(f[0] != feats[0]) + sum((a - b) ** 2 for a, b in zip(f[1:], feats[1:]))
        scored.append((dist2, wait))
    scored.sort()
    num = den = 0.0
    for dist2, wait in scored[:k]:
        w = 1.0 / (math.sqrt(dist2) + 0.01)
        num += w * wait
        den += w
    return int(round(num / den))
