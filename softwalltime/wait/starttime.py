"""When will a job start: forward simulation of the queue with PBS's rules (issue 35; pure).

PBS answers with ``estimated.start_time``: its calendar places the queued jobs as if every
job ran exactly its soft walltime. This module runs the same scheduler model
(:func:`..replay.pbsched.schedule_cycle`: the site's sort, backfill depth, strict ordering
and equivalence classes) forward from a :class:`QueueSnapshot` of the queue and the running jobs,
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
    Generic,
    Hashable,
    List,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    TypeVar,
)

from ..core import calibrated as cal
from ..replay import pbsched
from ..replay.profile import Profile

MAX_EVENTS = 100_000  # ends simulated for one prediction (each frees processors)
DEFAULT_SAMPLES = 9
WIDEN_WINDOW = 200  # predictions the P90's correction learns from (Widening)
WIDEN_MIN = 20  # below this many, no correction
WIDEN_SCALE_S = 600  # the scale of a wait: errors of short waits count in ten minutes
WIDEN_SPLIT_S = 600  # Widening's wait classes: a predicted P90 wait below 10 min, or not
SITE_RATIOS = 1000  # run/walltime ratios of the site's last jobs: a user with no history
T = TypeVar("T")


class Runs(Protocol):
    """Run times by queued job: a list, or :class:`Lazy`."""

    def __getitem__(self, j: int, /) -> int: ...


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


class QueueSnapshot(NamedTuple):
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


def _order(
    queue: List[int], snap: QueueSnapshot, formula: pbsched.SortFormula, now: int
) -> List[int]:
    value = formula.value
    if value is None:
        return queue
    q = snap.queued

    def key(j: int) -> Tuple[float, int]:
        job = q[j]
        return (-value(job.est or job.wall, job.wall, now - job.submit, job.procs, job.rank), j)

    return sorted(queue, key=key)


class _Cycles:
    """The queue between cycles, and one cycle (:func:`..replay.pbsched.schedule_cycle`):
    the order sorted anew at each cycle. Jobs are indices into ``snap.queued``."""

    def __init__(self, snap: QueueSnapshot, policy: pbsched.Policy, est: List[int]) -> None:
        self.snap = snap
        self.policy = policy
        self.formula = pbsched.sort_formula(policy.job_sort_formula)
        self.est = est
        self.procs = [job.procs for job in snap.queued]
        self.hard = (
            [job.wall for job in snap.queued] if policy.backfill_by == pbsched.WALLTIME else None
        )
        self.cls = _class_key(policy, snap.queued)
        self.queue = list(range(len(snap.queued)))

    def cycle(self, now: int, free: int, ends: Sequence[Tuple[int, int]]) -> List[int]:
        """The jobs that start at ``now``; they leave the queue."""
        order = _order(self.queue, self.snap, self.formula, now)
        policy = self.policy
        started, _top = pbsched.schedule_cycle(
            now, order, free, ends, self.procs, self.est, policy.backfill_depth,
            policy.strict_ordering, None, self.hard, self.cls, policy.fuzzy_window,
        )  # fmt: skip
        if started:
            gone = set(started)
            self.queue = [j for j in self.queue if j not in gone]
        return started


class _ClassCycles(_Cycles):
    """The same cycles, for an order that does not change between cycles (no
    ``eligible_time`` in the sort) and at most one top job: the queue kept as FIFOs of its
    equivalence classes, so that a cycle costs the classes that fit the free processors,
    not the whole queue.

    Why this is the same: within a cycle, once a job of a class cannot start, no later job
    of the class starts (PBS marks the class can't-run; with ``classes none`` every job is
    a class of its own); so the jobs of a class start in order, and a cycle is a merge of
    the classes' first jobs by their place in the order. The first job that cannot start
    becomes the top job (its reservation placed as schedule_cycle places it); after it,
    a class whose processors exceed the free ones cannot start a job and is not looked at.
    ``tests/test_starttime.py`` checks the two against each other on random queues.
    """

    def __init__(self, snap: QueueSnapshot, policy: pbsched.Policy, est: List[int]) -> None:
        super().__init__(snap, policy, est)
        order = _order(self.queue, snap, self.formula, snap.now)
        self.pos = [0] * len(order)
        fifos: Dict[Hashable, Deque[int]] = {}
        for i, j in enumerate(order):
            self.pos[j] = i
            fifos.setdefault(j if self.cls is None else self.cls(j), deque()).append(j)
        self.fifos = sorted(fifos.values(), key=lambda f: self.procs[f[0]])
        self.fifo_procs = [self.procs[f[0]] for f in self.fifos]
        self.heads = [(self.pos[f[0]], c) for c, f in enumerate(self.fifos)]
        heapq.heapify(self.heads)  # (place of a class's first job, class); stale ones skipped

    def _first(self) -> Optional[Tuple[int, int]]:
        heads, fifos = self.heads, self.fifos
        while heads:
            i, c = heads[0]
            if fifos[c] and self.pos[fifos[c][0]] == i:
                return heads[0]
            heapq.heappop(heads)
        return None

    def _start(self, c: int) -> int:
        j = self.fifos[c].popleft()
        if self.fifos[c]:
            heapq.heappush(self.heads, (self.pos[self.fifos[c][0]], c))
        return j

    def cycle(self, now: int, free: int, ends: Sequence[Tuple[int, int]]) -> List[int]:
        profile = Profile(now, free, ends)
        started: List[int] = []
        procs, est, hard = self.procs, self.est, self.hard
        while True:  # in order, until a job cannot start
            first = self._first()
            if first is None:
                return started
            c = first[1]
            j = self.fifos[c][0]
            if procs[j] > free:
                break
            self._start(c)
            profile.occupy(now, est[j], procs[j])
            free -= procs[j]
            started.append(j)
            if free == 0:
                return started
        resv_s, resv_x = -1, 0  # the top job's reservation, if any
        if self.policy.strict_ordering:
            if self.policy.backfill_depth == 0:
                return started
            p, d = procs[j], est[j]
            resv_s = profile.earliest(p, d, self.policy.fuzzy_window)
            profile.occupy(resv_s, d, p)
            resv_x = profile.least_from(resv_s)
        if free == 0:
            return started
        top = c
        # the classes whose first job could start now: free and the reservation's extra
        # processors only shrink during a cycle, so a job that cannot start now cannot later
        fits: List[Tuple[int, int]] = []
        pos, fifos, fifo_procs = self.pos, self.fifos, self.fifo_procs
        no_resv = resv_s < 0
        for c, f in enumerate(fifos):
            p = fifo_procs[c]
            if p > free:
                break
            if f and c != top:
                j = f[0]
                if no_resv or p <= resv_x or now + (est[j] if hard is None else hard[j]) <= resv_s:
                    fits.append((pos[j], c))
        heapq.heapify(fits)
        while fits:
            _, c = heapq.heappop(fits)
            j = self.fifos[c][0]
            p = procs[j]
            end = now + (est[j] if hard is None else hard[j])
            if p > free or not (resv_s < 0 or end <= resv_s or p <= resv_x):
                continue  # the class cannot start a job in this cycle
            if resv_s >= 0 and end > resv_s:
                resv_x -= p
            self._start(c)
            free -= p
            started.append(j)
            if free == 0:
                return started
            if self.fifos[c]:
                heapq.heappush(fits, (self.pos[self.fifos[c][0]], c))
        return started


def _cycles(snap: QueueSnapshot, policy: pbsched.Policy, est: List[int], fast: bool) -> _Cycles:
    formula = pbsched.sort_formula(policy.job_sort_formula)
    one_top = policy.backfill_depth <= 1 or not policy.strict_ordering
    if fast and one_top and not formula.time_dependent:
        return _ClassCycles(snap, policy, est)
    return _Cycles(snap, policy, est)


def forward_start(
    snap: QueueSnapshot,
    policy: pbsched.Policy,
    queued_run: Runs,
    running_end: Sequence[int],
    fast: bool = True,
) -> int:
    """The target's start when queued job ``j`` runs ``queued_run[j]`` seconds and running
    job ``i`` ends at ``running_end[i]`` (both clamped to the walltime; an end at or before
    ``now`` counts as ``now + 1``). ``fast``: use :class:`_ClassCycles` where it applies.

    :raises ValueError: the target needs more processors than the machine has, or
        :data:`MAX_EVENTS` ends pass without it starting
    """
    if snap.queued[snap.target].procs > snap.procs_total:
        raise ValueError("the job needs more processors than the machine has")
    start = forward_starts(snap, policy, queued_run, running_end, fast, snap.target)
    if start[snap.target] < 0:
        raise ValueError(f"no start within {MAX_EVENTS} job ends")
    return start[snap.target]


def forward_starts(
    snap: QueueSnapshot,
    policy: pbsched.Policy,
    queued_run: Runs,
    running_end: Sequence[int],
    fast: bool = True,
    until: Optional[int] = None,
) -> List[int]:
    """Every queued job's start in one forward run (as :func:`forward_start`), or only until
    job ``until`` starts; -1 for a job that does not start (wider than the machine, or not
    within :data:`MAX_EVENTS` ends)."""
    q = snap.queued
    now = snap.now
    formula = pbsched.sort_formula(policy.job_sort_formula)
    period = policy.scheduler_iteration if formula.time_dependent else 0
    est = [job.est or job.wall for job in q]
    cycles = _cycles(snap, policy, est, fast)
    start = [-1] * len(q)
    left = sum(1 for job in q if job.procs <= snap.procs_total)
    # running jobs by id: (estimated end, processors) for the scheduler; heap of real ends
    planned: Dict[int, Tuple[int, int]] = {}
    ends: List[Tuple[int, int]] = []
    free = snap.procs_total
    for i, (r, end) in enumerate(zip(snap.running, running_end)):
        planned[i] = (r.start + (r.est or r.wall), r.procs)
        ends.append((max(now + 1, min(end, r.start + r.wall)), i))
        free -= r.procs
    heapq.heapify(ends)
    ids = len(planned)
    for _ in range(MAX_EVENTS):
        profile = sorted((e if e > now else now, p) for e, p in planned.values())
        for j in cycles.cycle(now, free, profile):
            start[j] = now
            left -= 1
            free -= q[j].procs
            planned[ids] = (now + est[j], q[j].procs)
            heapq.heappush(ends, (now + max(1, min(queued_run[j], q[j].wall)), ids))
            ids += 1
        if (until is not None and start[until] >= 0) or left <= 0 or not ends:
            break
        now = ends[0][0] if not period else min(ends[0][0], now + period)
        while ends and ends[0][0] <= now:
            _, i = heapq.heappop(ends)
            free += planned.pop(i)[1]
    return start


def pbs_estimate(snap: QueueSnapshot, policy: pbsched.Policy) -> int:
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


class Lazy(Generic[T]):
    """``n`` values, each computed by ``item(j)`` when first read, then kept: a forward run
    reads the run times of the jobs that start before the target only."""

    def __init__(self, n: int, item: Callable[[int], T]) -> None:
        self.item = item
        self.values: List[Optional[T]] = [None] * n

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, j: int) -> T:
        value = self.values[j]
        if value is None:
            value = self.values[j] = self.item(j)
        return value


def _sampled_runs(
    snap: QueueSnapshot,
    policy: pbsched.Policy,
    sampler: RunSampler,
    queued_kinds: Callable[[int], Sequence[int]],
    running_runs: Sequence[Sequence[int]],
    samples: int,
    until: Optional[int],
) -> List[List[int]]:
    """The queued jobs' starts (:func:`forward_starts`) in each of ``samples`` forward runs
    with drawn run times, each run up to job ``until``'s start (None: the last start)."""
    if samples < 1:
        raise ValueError("samples must be >= 1")
    kinds = Lazy(len(snap.queued), queued_kinds)
    out = []
    for _ in range(samples):
        runs = Lazy(len(snap.queued), lambda j: sampler.queued_run(kinds[j]))
        ends = [sampler.running_end(job, snap.now, r) for job, r in zip(snap.running, running_runs)]
        out.append(forward_starts(snap, policy, runs, ends, True, until))
    return out


def start_quantiles(
    snap: QueueSnapshot,
    policy: pbsched.Policy,
    sampler: RunSampler,
    queued_kinds: Callable[[int], Sequence[int]],
    running_runs: Sequence[Sequence[int]],
    samples: int = DEFAULT_SAMPLES,
) -> StartAnswer:
    """P50 and P90 of the target's start over ``samples`` forward runs (run times drawn from
    ``queued_kinds(j)`` and ``running_runs[i]``: :meth:`RunSampler.runs_of`), with PBS's
    estimate beside them.

    :raises ValueError: as :func:`forward_start`
    """
    pbs = pbs_estimate(snap, policy)  # raises for a job wider than the machine
    target = snap.target
    runs = _sampled_runs(snap, policy, sampler, queued_kinds, running_runs, samples, target)
    starts = sorted(run[target] for run in runs)
    if starts[0] < 0:
        raise ValueError(f"no start within {MAX_EVENTS} job ends")
    return StartAnswer(quantile(starts, 0.5), quantile(starts, 0.9), pbs)


def all_quantiles(
    snap: QueueSnapshot,
    policy: pbsched.Policy,
    sampler: RunSampler,
    queued_kinds: Callable[[int], Sequence[int]],
    running_runs: Sequence[Sequence[int]],
    samples: int = DEFAULT_SAMPLES,
) -> List[Optional[StartAnswer]]:
    """:func:`start_quantiles` for every queued job at once (``snap.target`` is ignored):
    ``samples`` + 1 forward runs to the last start; None for a job that does not start."""
    runs = _sampled_runs(snap, policy, sampler, queued_kinds, running_runs, samples, None)
    pbs = forward_starts(
        snap,
        policy,
        [job.est or job.wall for job in snap.queued],
        [r.start + (r.est or r.wall) for r in snap.running],
    )
    out: List[Optional[StartAnswer]] = []
    for j, by_pbs in enumerate(pbs):
        starts = sorted(run[j] for run in runs)
        if starts[0] < 0 or by_pbs < 0:
            out.append(None)
        else:
            out.append(StartAnswer(quantile(starts, 0.5), quantile(starts, 0.9), by_pbs))
    return out


class Widening:
    """A learned correction of the P90 (split conformal prediction, normalised), per wait
    class (a Mondrian split, issue 47): of the last :data:`WIDEN_WINDOW` predictions of the
    class whose job has started, the P90 of ``(real wait - predicted P90 wait) / (predicted
    P90 wait + WIDEN_SCALE_S)``; a new P90 wait ``w`` becomes ``w + q * (w + WIDEN_SCALE_S)``.
    Nothing is learned from a job before it starts, so the correction uses only what is
    known at each prediction.

    The class is the predicted P90 wait itself: below :data:`WIDEN_SPLIT_S` (the forward
    runs start the job within 10 minutes) or not. One correction for all (``split_s`` 0, as
    before issue 47) is set by the many jobs that start at once and are predicted so: it
    leaves the P90 of the jobs that wait too short (on the bundled traces it covered 67-81 %
    of the starts of jobs that waited >= 10 min; per class 87-89 %). A class with fewer than
    :data:`WIDEN_MIN` scores borrows the scores of all classes."""

    def __init__(self, window: int = 0, split_s: int = WIDEN_SPLIT_S) -> None:
        self.window = window or WIDEN_WINDOW
        self.split_s = split_s
        self.scores: Deque[float] = deque(maxlen=self.window)  # every class's
        self.by_class: Dict[int, Deque[float]] = {}

    def wait_class(self, predicted_wait: int) -> int:
        """0: a predicted P90 wait below ``split_s`` (or no split); 1: at least that."""
        return int(self.split_s > 0 and predicted_wait >= self.split_s)

    def learn(self, predicted_wait: int, real_wait: int) -> None:
        score = (real_wait - predicted_wait) / (predicted_wait + WIDEN_SCALE_S)
        self.scores.append(score)
        cls = self.wait_class(predicted_wait)
        self.by_class.setdefault(cls, deque(maxlen=self.window)).append(score)

    def widen(self, predicted_wait: int) -> int:
        scores = self.by_class.get(self.wait_class(predicted_wait), ())
        if len(scores) < WIDEN_MIN:
            scores = self.scores
        if len(scores) < WIDEN_MIN:
            return predicted_wait
        q = quantile(sorted(scores), 0.9)
        return max(0, int(predicted_wait + q * (predicted_wait + WIDEN_SCALE_S)))
