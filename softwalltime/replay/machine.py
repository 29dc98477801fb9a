"""What the scheduler core asks of a machine (issue 46): the interface between the one cycle
(:func:`.pbsched.schedule_cycle`) and a machine model, the one pool of processors the model
began with, or a site's vnodes, chunks, queues and limits (:mod:`.nodes`, :mod:`.limits`).

Jobs are indices into the workload; a model holds each job's demand (processors, or select
chunks, place, queue, user and group) and the running jobs' allocations between cycles.

A cycle (PBS's ``main_sched_loop``, fifo.cpp) asks, for each job in sort order:

- :meth:`CycleResources.check`: can the job start now, ending by ``end`` (now + its soft
  walltime, or walltime), without delaying a reservation made earlier in this cycle? The
  answer says why not: a job short of resources and a job held by a run limit
  (``max_run``...) may both become a *top job* (``should_backfill_with_job``,
  fifo.cpp:1603-1663, does not ask why), reserved where its resources and its limits
  both let it run (``calc_run_time``, simulate.cpp:752-771; :class:`.limits.SiteLimits`;
  ``tests/pbs/test_queues_real.py`` shows a held job's reservation on the real server);
  a job that can never run is never one;
- :meth:`CycleResources.start`: the job starts, holding its allocation for ``d`` seconds;
- :meth:`CycleResources.reserve`: the job becomes a top job: its earliest start on the
  calendar, and its resources held from then on for the rest of the cycle.
"""

from __future__ import annotations

from typing import Protocol, Sequence, Tuple

OK = 0  # can start now
NO_RESOURCES = 1  # not enough free now, or would delay a reservation: may be a top job
LIMITED = 2  # held by a run limit (max_run, max_run_res): a top job once the limit frees
NEVER = 3  # can never run on this machine (wider than any pool it may use)


class CycleResources(Protocol):
    """The machine during one cycle: free resources now and the calendar of estimated ends,
    changed by the jobs the cycle starts and reserves."""

    def check(self, j: int, now: int, end: int) -> int:
        """:data:`OK`, or why job ``j`` cannot start at ``now`` to run until ``end``."""
        ...

    def start(self, j: int, now: int, d: int) -> None:
        """Job ``j`` starts at ``now`` and holds its allocation for ``d`` seconds (also in
        the model between cycles, until :meth:`MachineModel.release`)."""
        ...

    def reserve(self, j: int, d: int, window: int, epoch: int) -> int:
        """Job ``j`` is a top job: its earliest start (searched in ``window``s on the epoch
        clock, :meth:`.profile.Profile.earliest`); its resources are held from then for
        ``d`` seconds for the rest of the cycle."""
        ...

    def full(self) -> bool:
        """Nothing more can start in this cycle (no free processor anywhere)."""
        ...


class MachineModel(Protocol):
    """The machine between cycles: which jobs run where."""

    def can_ever_run(self, j: int) -> bool:
        """Whether job ``j`` fits the machine when it is empty (else it never starts)."""
        ...

    def cycle(self, now: int, ends: Sequence[Tuple[int, int]]) -> CycleResources:
        """The resources of a cycle at ``now``; ``ends``: ``(estimated end, job)`` of the
        running jobs, sorted."""
        ...

    def release(self, j: int) -> None:
        """Running job ``j`` ended: its allocation is free again."""
        ...
