"""The availability profile a scheduler reserves on: processors free from each instant on
(pure). Both simulators (:mod:`.easy` with ``backfill_depth`` > 1, :mod:`.pbsched`) use it."""

from __future__ import annotations

import bisect
from typing import Sequence, Tuple


class Profile:
    """Processors free from each breakpoint on (breakpoints sorted, the first is now)."""

    def __init__(self, now: int, free: int, ends: Sequence[Tuple[int, int]]) -> None:
        # ends: (estimated end, processors) of the running jobs, sorted.
        self.times = [now]
        self.frees = [free]
        for e, p in ends:
            if e <= self.times[-1]:
                self.frees[-1] += p
            else:
                self.times.append(e)
                self.frees.append(self.frees[-1] + p)

    def copy(self) -> Profile:
        other = Profile(self.times[0], 0, [])
        other.times = list(self.times)
        other.frees = list(self.frees)
        return other

    def _point(self, x: int) -> int:
        k = bisect.bisect_left(self.times, x)
        if k == len(self.times) or self.times[k] != x:
            self.times.insert(k, x)
            self.frees.insert(k, self.frees[k - 1])
        return k

    def occupy(self, s: int, d: int, p: int) -> None:
        """Take ``p`` processors over ``[s, s + d)``."""
        if d <= 0:
            return
        end = s + d
        k = self._point(s)
        self._point(end)
        while self.times[k] < end:
            self.frees[k] -= p
            k += 1

    def earliest(self, p: int, d: int, window: int = 0, epoch: int = 0, after: int = 0) -> int:
        """Earliest breakpoint from which ``p`` processors stay free for ``d`` seconds, at
        or after ``after`` (a job held by a run limit until then, :mod:`.limits`; the
        search starts there, a breakpoint added if need be).

        ``window`` > 0: as PBS's scheduler finds a top job's start (simulate.cpp:747-768,
        calc_run_time; the window is sched's ``opt_backfill_fuzzy``, fifo.cpp:2251-2264,
        default 60 s and off 1 s, simulate.cpp:190-196): checked now, then, while it does
        not fit, every event up to the window boundary after the next event is taken at
        once, ``(e + window) // window * window`` on the epoch clock, and it is checked at
        the last of them (simulate.cpp:198-214). A window of top jobs' starts only is not
        checked (simulate.cpp:745-748), which changes nothing here: free processors only
        fell since the last check. ``epoch``: the epoch second of time 0.
        ``window`` 0: checked at every breakpoint (no PBS setting does this).
        """
        first = self._point(after) if after > self.times[0] else 0
        times = self.times
        if window <= 0:
            for k in range(first, len(times)):
                if self._fits(k, p, d):
                    return times[k]
            return times[-1]  # unreachable when p fits the machine: the last point is all free
        k = first
        last = len(times) - 1
        while not self._fits(k, p, d) and k < last:
            e = times[k + 1] + epoch
            boundary = (e + window) // window * window - epoch
            k = bisect.bisect_right(times, boundary) - 1
        return times[k]

    def _fits(self, k: int, p: int, d: int) -> bool:
        """Whether ``p`` processors stay free for ``d`` seconds from breakpoint ``k``."""
        times, frees = self.times, self.frees
        end = times[k] + d
        m = k
        while m < len(times) and (m == k or times[m] < end):
            if frees[m] < p:
                return False
            m += 1
        return True

    def least_from(self, s: int) -> int:
        return min(self.frees[bisect.bisect_left(self.times, s) :])

    def holds(self, s: int, end: int, p: int) -> bool:
        """Whether ``p`` processors stay free over ``[s, end)`` (``s`` a breakpoint or
        before the first): PBS's test of a job against the calendar, the least free over
        the events before its end (``simulate_resmin``, simulate.cpp:1800-1802)."""
        times, frees = self.times, self.frees
        k = max(bisect.bisect_right(times, s) - 1, 0)
        while k < len(times) and times[k] < end:
            if frees[k] < p:
                return False
            k += 1
        return True
