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

    def earliest(self, p: int, d: int) -> int:
        """Earliest breakpoint from which ``p`` processors stay free for ``d`` seconds."""
        times, frees = self.times, self.frees
        for k, s in enumerate(times):
            m = k
            while m < len(times) and (m == k or times[m] < s + d):
                if frees[m] < p:
                    break
                m += 1
            else:
                return s
        return times[-1]  # unreachable when p fits the machine: the last point is all free

    def least_from(self, s: int) -> int:
        return min(self.frees[bisect.bisect_left(self.times, s) :])
