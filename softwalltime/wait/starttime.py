"""When will a job start: forward simulation of the queue with PBS's rules (issue 35; pure).

PBS answers with ``estimated.start_time``: its calendar places the queued jobs as if every
job ran exactly its soft walltime. This module runs the same scheduler model
(:func:`..replay.pbsched.schedule_cycle`: the site's sort, backfill depth, strict ordering
and equivalence classes) forward from a :class:`Snapshot` of the queue and the running jobs,
with run times given per job, and returns the target job's start:

* :func:`pbs_estimate`: every job runs its soft walltime (PBS's own method);
* :func:`start_quantiles`: ``samples`` runs with run times drawn from each job's user's
  history (:class:`RunSampler`), the target's start P50 and P90 among them.

The scheduler plans with the soft walltimes either way (reservations, backfilling); only
when jobs really end differs. Jobs submitted after the snapshot are not simulated (PBS's
calendar does not know them either); a periodic cycle is simulated only for a sort that
depends on time (``eligible_time``).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from typing import (
    Callable,
    Deque,
    Dict,
    Hashable,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
)

from ..hookpath import calibrated as cal
from ..replay import pbsched

MAX_EVENTS = 100_000  # ends simulated for one prediction (each frees processors)
DEFAULT_SAMPLES = 9
WIDEN_WINDOW = 200  # predictions the P90's correction learns from (Widening)
WIDEN_MIN = 20  # below this many, no correction
WIDEN_SCALE_S = 600  # the scale of a wait: errors of short waits count in ten minutes
SITE_RATIOS = 1000  # run/walltime ratios of the site's last jobs: a user with no history
T = TypeVar("T")
Row = Tuple[int, int, int]  # (run time s, walltime s, ncpus), newest end first


class QueuedJob(NamedTuple):
    """A job waiting now: its submit time, soft walltime (0: none), walltime, processors and
    ``softwalltime_rank`` (0: none)."""

    submit: int
    est: int
    wall: int
    procs: int
    rank: int = 0


class RunningJob(NamedTuple):
    """A job running now: its start, soft walltime at start (0: none), walltime, processors."""

    start: int
    est: int
    wall: int
    procs: int


class Snapshot(NamedTuple):
    """The queue (in submit order) and the running jobs at ``now``; ``target`` indexes
    ``queued``."""

    now: int
    procs_total: int
    running: Sequence[RunningJob]
    queued: Sequence[QueuedJob]
    target: int


def _class_key(
    policy: pbsched.Policy, queued: Sequence[QueuedJob]
) -> Optional[Callable[[int], Hashable]]:
    # The equivalence class of a queued job, as pbsched._classes keys it.
    if policy.classes == pbsched.CLASSES_NONE:
        return None
    if policy.classes == pbsched.CLASSES_RANK:
        return lambda j: (queued[j].procs, queued[j].wall, queued[j].rank)
    return lambda j: (queued[j].procs, queued[j].wall)


def _order(queue: List[int], snap: Snapshot, formula: pbsched.SortFormula, now: int) -> List[int]:
    value = formula.value
    if value is None:
        return queue
    q = snap.queued

    def key(j: int) -> Tuple[float, int]:
        job = q[j]
        return (-value(job.est or job.wall, job.wall, now - job.submit, job.procs, job.rank), j)

    return sorted(queue, key=key)


def forward_start(
    snap: Snapshot,
    policy: pbsched.Policy,
    queued_run: Sequence[int],
    running_end: Sequence[int],
) -> int:
    """The target's start when queued job ``j`` runs ``queued_run[j]`` seconds and running
    job ``i`` ends at ``running_end[i]`` (both clamped to the walltime; an end at or before
    ``now`` counts as ``now + 1``).

    :raises ValueError: the target needs more processors than the machine has, or
        :data:`MAX_EVENTS` ends pass without it starting
    """
    q = snap.queued
    if q[snap.target].procs > snap.procs_total:
        raise ValueError("the job needs more processors than the machine has")
    now = snap.now
    formula = pbsched.sort_formula(policy.job_sort_formula)
    period = policy.scheduler_iteration if formula.time_dependent else 0
    est = [job.est or job.wall for job in q]
    procs = [job.procs for job in q]
    cls = _class_key(policy, q)
    hard = [job.wall for job in q] if policy.backfill_by == pbsched.WALLTIME else None
    # running jobs by id: (estimated end, processors) for the scheduler; heap of real ends
    planned: Dict[int, Tuple[int, int]] = {}
    ends: List[Tuple[int, int]] = []
    free = snap.procs_total
    for i, (r, end) in enumerate(zip(snap.running, running_end)):
        planned[i] = (r.start + (r.est or r.wall), r.procs)
        ends.append((max(now + 1, min(end, r.start + r.wall)), i))
        free -= r.procs
    heapq.heapify(ends)
    queue = list(range(len(q)))
    ids = len(planned)
    for _ in range(MAX_EVENTS):
        order = _order(queue, snap, formula, now)
        profile = sorted((e if e > now else now, p) for e, p in planned.values())
        started, _top = pbsched.schedule_cycle(
            now, order, free, profile, procs, est, policy.backfill_depth,
            policy.strict_ordering, None, hard, cls,
        )  # fmt: skip
        if snap.target in started:
            return now
        if started:
            gone = set(started)
            queue = [j for j in queue if j not in gone]
            for j in started:
                free -= procs[j]
                planned[ids] = (now + est[j], procs[j])
                heapq.heappush(ends, (now + max(1, min(queued_run[j], q[j].wall)), ids))
                ids += 1
        if not ends:
            raise ValueError("nothing runs and the job cannot start")  # defensive
        now = ends[0][0] if not period else min(ends[0][0], now + period)
        while ends and ends[0][0] <= now:
            _, i = heapq.heappop(ends)
            free += planned.pop(i)[1]
    raise ValueError(f"no start within {MAX_EVENTS} job ends")


def pbs_estimate(snap: Snapshot, policy: pbsched.Policy) -> int:
    """PBS's method: every job runs exactly its soft walltime (its walltime when it has
    none); a running job past it ends at once."""
    runs = [job.est or job.wall for job in snap.queued]
    ends = [r.start + (r.est or r.wall) for r in snap.running]
    return forward_start(snap, policy, runs, ends)


class RunSampler:
    """Draws run times from what each user's similar jobs ran (``calibrated``'s key: the
    user's last jobs with this walltime and processors, else this walltime, else all the
    user's jobs scaled to this walltime); a user with no history draws from the site's last
    :data:`SITE_RATIOS` run/walltime ratios."""

    def __init__(self, rng: random.Random, site_ratios: Sequence[float]) -> None:
        self.rng = rng
        self.site = list(site_ratios) or [1.0]

    def runs_of(self, wall: int, procs: int, history: Sequence[Row]) -> List[int]:
        """The run times a job like this may take (non-empty)."""
        _level, runs, _n = cal.features(wall, procs, history)
        return runs or [max(1, int(wall * r)) for r in self.site]

    def queued_run(self, runs: Sequence[int]) -> int:
        return self.rng.choice(runs)

    def running_end(self, job: RunningJob, now: int, runs: Sequence[int]) -> int:
        """An end after ``now`` for a job that has run ``now - start`` seconds: a run time
        of its kind longer than that, else uniform up to its walltime."""
        elapsed = now - job.start
        longer = [r for r in runs if r > elapsed]
        if longer:
            return job.start + self.rng.choice(longer)
        return self.rng.randint(now + 1, max(now + 1, job.start + job.wall))


class StartAnswer(NamedTuple):
    """A predicted start: P50 and P90 over the samples, and PBS's estimate."""

    p50: int
    p90: int
    pbs: int


def quantile(ordered: Sequence[T], q: float) -> T:
    """The nearest-rank ``q`` quantile of a sorted non-empty list."""
    k = math.ceil(q * len(ordered)) - 1
    return ordered[max(0, min(len(ordered) - 1, k))]


def start_quantiles(
    snap: Snapshot,
    policy: pbsched.Policy,
    sampler: RunSampler,
    queued_runs: Sequence[Sequence[int]],
    running_runs: Sequence[Sequence[int]],
    samples: int = DEFAULT_SAMPLES,
) -> StartAnswer:
    """P50 and P90 of the target's start over ``samples`` forward runs (run times drawn from
    ``queued_runs[j]`` and ``running_runs[i]``: :meth:`RunSampler.runs_of`), with PBS's
    estimate beside them."""
    if samples < 1:
        raise ValueError("samples must be >= 1")
    starts = []
    for _ in range(samples):
        runs = [sampler.queued_run(r) for r in queued_runs]
        ends = [sampler.running_end(job, snap.now, r) for job, r in zip(snap.running, running_runs)]
        starts.append(forward_start(snap, policy, runs, ends))
    starts.sort()
    return StartAnswer(quantile(starts, 0.5), quantile(starts, 0.9), pbs_estimate(snap, policy))


class Widening:
    """A learned correction of the P90 (split conformal prediction, normalised): of the last
    :data:`WIDEN_WINDOW` predictions whose job has started, the P90 of
    ``(real wait - predicted P90 wait) / (predicted P90 wait + WIDEN_SCALE_S)``; a new P90
    wait ``w`` becomes ``w + q * (w + WIDEN_SCALE_S)``. Nothing is learned from a job before
    it starts, so the correction uses only what is known at each prediction."""

    def __init__(self, window: int = 0) -> None:
        self.scores: Deque[float] = deque(maxlen=window or WIDEN_WINDOW)

    def learn(self, predicted_wait: int, real_wait: int) -> None:
        self.scores.append((real_wait - predicted_wait) / (predicted_wait + WIDEN_SCALE_S))

    def widen(self, predicted_wait: int) -> int:
        if len(self.scores) < WIDEN_MIN:
            return predicted_wait
        q = quantile(sorted(self.scores), 0.9)
        return max(0, int(predicted_wait + q * (predicted_wait + WIDEN_SCALE_S)))
