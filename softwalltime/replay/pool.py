"""The machine as one pool of processors (pure): the :class:`.machine.MachineModel` the
scheduler core (:func:`.pbsched.schedule_cycle`) began with, and the default of
:func:`.pbsched.simulate_pbs` and :mod:`softwalltime.wait.starttime`.

A job needs ``procs[j]`` processors anywhere in the pool. A cycle's calendar is a
:class:`.profile.Profile` of the processors free from each estimated end on, with the jobs
started and the top jobs reserved so far in the cycle. A job may start now if the free
processors over ``[now, end)`` never fall below its own: the test PBS makes of a job
against the calendar (check.cpp:921-1000, ``simulate_resmin`` of the resources free over the
events before the job's end, simulate.cpp:1800-1802), for a machine whose only resource is
a count of processors. Only the part from the first top job's start on needs a look (the
free count only rises before it), and ``floor``, a lower bound of the least free from there
on, spares even that for a job it leaves room for.

Two profiles: top jobs' starts are searched on ``profile``, where a job started in the cycle
runs for the estimate it starts with; jobs are checked on ``calendar`` (a copy taken at the
first reservation), where it runs until the end it was checked with (``end``, as the
scheduler's own view of the job in its cycle has it). The two differ only where a job
starts with another estimate than it was queued with.
"""

from __future__ import annotations

from typing import Callable, Hashable, Optional, Sequence, Tuple

from .machine import NEVER, NO_RESOURCES, OK, Where
from .profile import Profile

NO_TOP = 1 << 62  # no top job yet: every end is before its start


class PoolCycle:
    """One cycle on the pool (a :class:`.machine.CycleResources`): the free processors, the
    calendar and the reservations made so far."""

    __slots__ = ("model", "procs", "total", "free", "profile", "calendar", "first", "floor")

    def __init__(self, model: PoolModel, now: int, ends: Sequence[Tuple[int, int]]) -> None:
        self.model = model
        procs = self.procs = model.procs
        self.total = model.total
        self.free = model.free
        self.profile = Profile(now, model.free, [(e, procs[j]) for e, j in ends])
        self.calendar: Optional[Profile] = None  # the checks' profile, from the first top job
        self.first = NO_TOP  # the earliest top job's start so far
        self.floor = 0  # at most the least free from ``first`` on

    def check(self, j: int, now: int, end: int) -> int:
        p = self.procs[j]
        if p > self.free:
            return NEVER if p > self.total else NO_RESOURCES
        if end <= self.first or p <= self.floor:
            return OK
        assert self.calendar is not None  # first is a top job's start
        return OK if self.calendar.holds(self.first, end, p) else NO_RESOURCES

    def start(self, j: int, now: int, end: int, d: int) -> None:
        p = self.procs[j]
        self.profile.occupy(now, d, p)
        if self.calendar is not None:
            self.calendar.occupy(now, end - now, p)
            if end > self.first:
                self.floor -= p
        self.free -= p
        self.model.free -= p

    def reserve(self, j: int, d: int, window: int, epoch: int, after: int = 0) -> int:
        """``after``: no earlier than then (a run limit holds the job until then,
        :class:`.limits.SiteLimits`)."""
        p = self.procs[j]
        profile = self.profile
        s = profile.earliest(p, d, window, epoch, after)
        profile.occupy(s, d, p)
        if self.calendar is None:
            self.calendar = profile.copy()
        else:
            self.calendar.occupy(s, d, p)
        self.first = min(self.first, s)
        self.floor = self.calendar.least_from(self.first)
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

    def hold(self, j: int, where: Optional[Where] = None) -> bool:
        self.free -= self.procs[j]  # anywhere: ``where`` says nothing the pool keeps
        return True

    def where(self, j: int) -> Optional[Where]:
        return None

    def release(self, j: int) -> None:
        self.free += self.procs[j]

    def full(self) -> bool:
        return self.free == 0
