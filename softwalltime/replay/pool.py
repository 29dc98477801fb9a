"""The machine as one pool of processors (pure): the :class:`.machine.MachineModel` the
scheduler core (:func:`.pbsched.schedule_cycle`) began with, and the default of
:func:`.pbsched.simulate_pbs` and :mod:`softwalltime.wait.starttime`.

A job needs ``procs[j]`` processors anywhere in the pool. A cycle's calendar is a
:class:`.profile.Profile` of the processors free from each estimated end on; a top job's
reservation is ``[start, extra]``: a later job may run past ``start`` only on the ``extra``
processors left beside the top job (the least free from ``start`` on once it is placed),
and takes them from ``extra``. This is the test PBS makes of a job against the calendar
(check.cpp:921-1000, ``simulate_resmin`` of the processors free until the job's end),
for a machine whose only resource is a count of processors.
"""

from __future__ import annotations

from typing import Callable, Hashable, List, Optional, Sequence, Tuple

from .machine import NEVER, NO_RESOURCES, OK
from .profile import Profile


class PoolCycle:
    """One cycle on the pool (a :class:`.machine.CycleResources`): the free processors, the
    calendar and the reservations made so far."""

    __slots__ = ("model", "procs", "total", "free", "profile", "resv")

    def __init__(self, model: PoolModel, now: int, ends: Sequence[Tuple[int, int]]) -> None:
        self.model = model
        procs = self.procs = model.procs
        self.total = model.total
        self.free = model.free
        self.profile = Profile(now, model.free, [(e, procs[j]) for e, j in ends])
        self.resv: List[List[int]] = []  # [start, extra] of each top job, in order

    def check(self, j: int, now: int, end: int) -> int:
        p = self.procs[j]
        if p > self.free:
            return NEVER if p > self.total else NO_RESOURCES
        for s, x in self.resv:  # ends by the top job's start, or fits beside it
            if end > s and p > x:
                return NO_RESOURCES
        return OK

    def start(self, j: int, now: int, end: int, d: int) -> None:
        p = self.procs[j]
        for rv in self.resv:
            if end > rv[0]:
                rv[1] -= p
        self.profile.occupy(now, d, p)
        self.free -= p
        self.model.free -= p

    def reserve(self, j: int, d: int, window: int, epoch: int) -> int:
        p = self.procs[j]
        profile = self.profile
        s = profile.earliest(p, d, window, epoch)
        profile.occupy(s, d, p)
        self.resv.append([s, profile.least_from(s)])
        return s

    def full(self) -> bool:
        return self.free == 0


class PoolModel:
    """``total`` processors, each job needing ``procs[j]`` of them anywhere (a
    :class:`.machine.MachineModel`)."""

    class_part: Optional[Callable[[int], Hashable]] = None  # processors: in the key already

    def __init__(self, total: int, procs: Sequence[int]) -> None:
        if total < 1:
            raise ValueError(f"the pool needs >= 1 processor, not {total}")
        self.total = total
        self.procs = procs
        self.free = total

    def can_ever_run(self, j: int) -> bool:
        return self.procs[j] <= self.total

    def cycle(self, now: int, ends: Sequence[Tuple[int, int]]) -> PoolCycle:
        return PoolCycle(self, now, ends)

    def hold(self, j: int) -> None:
        self.free -= self.procs[j]

    def release(self, j: int) -> None:
        self.free += self.procs[j]

    def full(self) -> bool:
        return self.free == 0
