"""What the scheduler core asks of a machine (issue 46): the interface between the one cycle
(:func:`.pbsched.schedule_cycle`) and a machine model, the one pool of processors the model
began with (:class:`.pool.PoolModel`), or a site's vnodes, chunks, queues and limits
(:mod:`.nodes`, :mod:`.limits`).

Jobs are indices into the workload; a model holds each job's demand (processors, or select
chunks, place, queue, user and group) and the running jobs' allocations between cycles.

A cycle (PBS's ``main_sched_loop``, fifo.cpp:786-1066) asks, for each job in sort order:

- :meth:`CycleResources.check`: can the job start now, ending by ``end`` (now + its soft
  walltime, or walltime), without delaying a reservation made earlier in this cycle? The
  answer says why not, as PBS's ``is_ok_to_run`` does (check.cpp:690-1020: the resources
  over all nodes first, then the run limits):

  - :data:`NO_RESOURCES` and :data:`LIMITED` are alike to the cycle: the job may become a
    *top job* (``should_backfill_with_job``, fifo.cpp:1603-1663, reads the backfill depth,
    ``can_never_run``, ``topjob_ineligible`` and ``strict_ordering``, never the error
    code; a run limit's error is ``NOT_RUN``, limits.cpp:1006), and its class is marked
    (fifo.cpp:990-996, every error but ``MAX_RUN_SUBJOBS``). The model's
    :meth:`CycleResources.reserve` must then find when the limit lets it start, as PBS's
    calendar simulation does (``calc_run_time``, simulate.cpp:747-768, runs
    ``is_ok_to_run`` with the limits at each event);
  - :data:`NEVER`: the job never fits the machine (``NEVER_RUN``, check.cpp:795-799); PBS
    sets ``can_never_run`` (fifo.cpp:861-862) and never makes it a top job
    (fifo.cpp:1647-1649); its class is marked too.
- :meth:`CycleResources.start`: the job starts, holding its allocation for ``d`` seconds;
- :meth:`CycleResources.reserve`: the job becomes a top job: its earliest start on the
  calendar, and its resources held from then on for the rest of the cycle.

Between cycles the driver keeps the running jobs' estimates (soft-walltime extensions) and
tells the model of ends (:meth:`MachineModel.release`) and, for a queue snapshot, of the
jobs already running (:meth:`MachineModel.hold`), where a model of the same machine saw
them run (:meth:`MachineModel.where`: the ground truth's vnodes, or a live job's
``exec_vnode``)."""

from __future__ import annotations

from typing import Callable, Hashable, Optional, Protocol, Sequence, Tuple

OK = 0  # can start now
NO_RESOURCES = 1  # not enough free now, or would delay a reservation: may be a top job
LIMITED = 2  # held by a run limit (max_run, max_run_res): may be a top job all the same
NEVER = 3  # can never run on this machine (wider than any pool it may use)

Where = Hashable
"""Where a running job runs, in a model's own terms (the node model: its parts on the
site's vnodes, :data:`.nodes.model.Placed`): read by :meth:`MachineModel.where`, given
back to :meth:`MachineModel.hold` of another model of the same machine."""


class CycleResources(Protocol):
    """The machine during one cycle: free resources now and the calendar of estimated ends,
    changed by the jobs the cycle starts and reserves."""

    def check(self, j: int, now: int, end: int) -> int:
        """:data:`OK`, or why job ``j`` cannot start at ``now`` to run until ``end``. Once a
        job of an equivalence class fails, the cycle does not ask about the class's later
        jobs: they copy its answer (check.cpp:710-714). Within a cycle a no stays a no
        (what is free now, and beside the reservations, only shrinks)."""
        ...

    def start(self, j: int, now: int, end: int, d: int) -> None:
        """Job ``j``, checked to run until ``end``, starts at ``now`` and holds its
        allocation for ``d`` seconds on the calendar (its estimate as it starts, which may
        differ from the one checked); also in the model between cycles, until
        :meth:`MachineModel.release`."""
        ...

    def reserve(self, j: int, d: int, window: int, epoch: int) -> int:
        """Job ``j`` is a top job: its earliest start (searched in ``window``s on the epoch
        clock, :meth:`.profile.Profile.earliest`); its resources are held from then for
        ``d`` seconds for the rest of the cycle."""
        ...

    def full(self) -> bool:
        """Nothing more can start in this cycle (no free processor anywhere). Asked at the
        start of the cycle and after each start and reservation (nothing else changes it);
        full at the start, the cycle still tries its first job, which may become a top
        job (as PBS's cycle does)."""
        ...


class MachineModel(Protocol):
    """The machine between cycles: which jobs run where."""

    class_part: Optional[Callable[[int], Hashable]]
    """What the machine adds to job ``j``'s equivalence class key, beside its processors
    and walltime (:func:`.pbsched.class_keys`), or None: nothing. PBS's key
    (``create_resresv_set_by_resresv``, job_info.cpp:2309-2342) holds the select and
    place, the queue where it has nodes or limits (``resresv_set_use_queue``, :2223), and
    the user, group or project where limits count them (``resresv_set_use_user``, :2160;
    ``_grp``, :2178). Read once per job and run."""

    def can_ever_run(self, j: int) -> bool:
        """Whether job ``j`` fits the machine when it is empty (else it never starts)."""
        ...

    def cycle(self, now: int, ends: Sequence[Tuple[int, int]]) -> CycleResources:
        """The resources of a cycle at ``now``; ``ends``: ``(estimated end, job)`` of the
        running jobs, sorted."""
        ...

    def hold(self, j: int, where: Optional[Where] = None) -> bool:
        """Job ``j`` runs already (a queue snapshot's running job, started before the
        model): its allocation is held until :meth:`release`. ``where``: where it runs
        (:meth:`where` of a model of the same machine, or a live job's ``exec_vnode``);
        None, or a ``where`` whose resources are not free: where the model places it (the
        node model: first fit). False: a ``where`` given was not free, the job was placed
        by the model instead (the pool ignores ``where``: True).

        :raises ValueError: it fits nowhere in what is free
        """
        ...

    def where(self, j: int) -> Optional[Where]:
        """Where running job ``j`` runs, for :meth:`hold` in a fresh model of the same
        machine (the pool: None, a job runs anywhere)."""
        ...

    def release(self, j: int) -> None:
        """Running job ``j`` ended: its allocation is free again."""
        ...

    def full(self) -> bool:
        """No job can start now whatever it asks (no free processor anywhere): a driver
        may skip the cycle."""
        ...
