"""When will a job start: forward simulation of the queue with PBS's rules (issue 35; pure).

PBS answers with ``estimated.start_time``: its calendar places the queued jobs as if every
job ran exactly its soft walltime. This module runs the scheduler core forward
(:func:`..replay.pbsched.schedule_cycle`, the cycle ``simulate`` runs, on a
:class:`..replay.machine.MachineModel`; the order and the classes of
:func:`..replay.pbsched.order_queue` and :func:`..replay.pbsched.class_keys`: the site's
sort, backfill depth, strict ordering and equivalence classes) from a
:class:`QueueSnapshot` of the queue and the running jobs, with run times given per job, and
returns the target job's start:

* :func:`pbs_estimate`: every job runs its soft walltime (PBS's own method);
* :func:`start_quantiles`: ``samples`` runs with run times drawn from each job's user's
  history (:class:`RunSampler`), the target's start P50 and P90 among them.

The scheduler plans with the soft walltimes either way (reservations, backfilling); only
when jobs really end differs. Jobs submitted after the snapshot are not simulated (PBS's
calendar does not know them either); a periodic cycle is simulated only for a sort that
depends on time (``eligible_time``).
"""

from __future__ import annotations

import bisect
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
    Set,
    Tuple,
    TypeVar,
)

from ..core import calibrated as cal
from ..replay import pbsched
from ..replay.machine import NEVER, OK, MachineModel, Where
from ..replay.pool import PoolCycle, PoolModel
from ..replay.queues import SiteOrder

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


class SiteMachine(NamedTuple):
    """A snapshot's machine beyond one pool (issue 46): ``build`` makes a fresh model of the
    snapshot's jobs (the queued ones ``j``, then the running ones ``len(queued) + i``) and
    the cycle's queue order (:meth:`..replay.site_model.SiteModel.build` of them), once per
    forward run (a model holds the running jobs); ``where[i]``: where running job ``i``
    runs (:meth:`..replay.machine.MachineModel.where`; None: where the model places it)."""

    build: Callable[[], Tuple[MachineModel, Optional[SiteOrder]]]
    where: Sequence[Optional[Where]]


class QueueSnapshot(NamedTuple):
    """The queue (in submit order) and the running jobs at ``now``; ``target`` indexes
    ``queued``. ``machine``: the site model they run on (None: one pool of
    ``procs_total``)."""

    now: int
    procs_total: int
    running: Sequence[RunningJob]
    queued: Sequence[QueuedJob]
    target: int
    machine: Optional[SiteMachine] = None


class _Columns(NamedTuple):
    """The queued jobs' columns the sort and the classes read
    (:class:`..replay.pbsched.JobColumns`)."""

    submit: List[int]
    wall: List[int]
    procs: List[int]


class _Cycles:
    """The queue between cycles, and one cycle of the scheduler core
    (:func:`..replay.pbsched.schedule_cycle` on ``model``'s resources): the order sorted
    anew at each cycle (:func:`..replay.pbsched.order_queue`), the classes of
    :func:`..replay.pbsched.class_keys`. Jobs are indices into ``snap.queued``."""

    def __init__(
        self,
        snap: QueueSnapshot,
        policy: pbsched.Policy,
        est: List[int],
        model: MachineModel,
        site: Optional[SiteOrder] = None,
    ) -> None:
        q = snap.queued
        self.cols = _Columns([j.submit for j in q], [j.wall for j in q], [j.procs for j in q])
        self.rank = [j.rank for j in q]
        self.policy = policy
        self.model = model
        self.formula = pbsched.sort_formula(policy.job_sort_formula)
        self.est = est
        self.hard = self.cols.wall if policy.backfill_by == pbsched.WALLTIME else None
        self.cls = pbsched.class_keys(policy.classes, self.cols, self.rank, model.class_part)
        self.site = site
        if self.cls is not None and site is not None and site.class_key is not None:
            # as simulate_pbs's (job_info.cpp:2158-2233), read once: ranks do not change here
            cls, part = self.cls, site.class_key
            self.cls = [(cls(j), part(j)) for j in range(len(q))].__getitem__
        self.keys: Dict[int, Tuple[float, int]] = {}  # time-independent sort keys
        self.queue = list(range(len(q)))

    def cycle(self, now: int, ends: Sequence[Tuple[int, int]]) -> List[int]:
        """The jobs that start at ``now`` (``ends``: ``(estimated end, job)`` of the running
        jobs, sorted); they leave the queue."""
        order = pbsched.order_queue(
            self.queue, self.formula, now, self.cols, self.est, self.keys, self.rank
        )
        if self.site is not None:
            order = self.site.order(order)  # by_queue, round_robin, express queues
        policy = self.policy
        started, _top = pbsched.schedule_cycle(
            now, order, self.model.cycle(now, ends), self.est, policy.backfill_depth,
            policy.strict_ordering, None, self.hard, self.cls, policy.fuzzy_window,
        )  # fmt: skip
        if started:
            gone = set(started)
            self.queue = [j for j in self.queue if j not in gone]
        return started


class _PoolClassCycles(_Cycles):
    """The same cycles on the pool (:class:`..replay.pool.PoolModel`), faster for an order
    that does not change between cycles (no ``eligible_time`` in the sort) and at most one
    top job: the queue kept as FIFOs of its equivalence classes, so that a cycle costs the
    classes that fit the free processors, not the whole queue (on a 5,000-job queue,
    ``make bench-wait``'s start times take 9x the CPU through :class:`_Cycles`).

    Not a second scheduler: every decision (does a job fit now and pass the reservation,
    where the top job's reservation lies, what a start takes) is the pool's
    (:class:`..replay.pool.PoolCycle`'s ``check``, ``start`` and ``reserve``, which
    :func:`..replay.pbsched.schedule_cycle` asks); this class only chooses which jobs to ask,
    and skips the ones whose answer is known. Why the answers are the same: within a cycle,
    once a job of a class cannot start, no later job of the class starts (PBS marks the
    class, fifo.cpp:990-996; with ``classes none`` every job is a class of its own); so the
    jobs of a class start in order, and a cycle is a merge of the classes' first jobs by
    their place in the order. The first job that cannot start and can ever run becomes the
    top job; after it, free processors and the reservation's extra ones only shrink, so a
    class whose first job does not fit then (or needs more processors than are free) cannot
    start a job in this cycle and is not looked at again. ``tests/test_starttime.py`` checks
    the two against each other on random queues.
    """

    model: PoolModel

    def __init__(
        self, snap: QueueSnapshot, policy: pbsched.Policy, est: List[int], model: PoolModel
    ) -> None:
        super().__init__(snap, policy, est, model)
        order = pbsched.order_queue(
            self.queue, self.formula, snap.now, self.cols, est, self.keys, self.rank
        )
        procs = self.cols.procs
        self.pos = [0] * len(order)
        fifos: Dict[Hashable, Deque[int]] = {}
        for i, j in enumerate(order):
            self.pos[j] = i
            fifos.setdefault(j if self.cls is None else self.cls(j), deque()).append(j)
        self.fifos = sorted(fifos.values(), key=lambda f: procs[f[0]])
        self.fifo_procs = [procs[f[0]] for f in self.fifos]
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

    def _end(self, now: int, j: int) -> int:
        return now + (self.est[j] if self.hard is None else self.hard[j])

    def _start(self, res: PoolCycle, now: int, c: int) -> int:
        j = self.fifos[c].popleft()
        if self.fifos[c]:
            heapq.heappush(self.heads, (self.pos[self.fifos[c][0]], c))
        res.start(j, now, self._end(now, j), self.est[j])
        return j

    def cycle(self, now: int, ends: Sequence[Tuple[int, int]]) -> List[int]:
        res = self.model.cycle(now, ends)
        started: List[int] = []
        marked: Set[int] = set()  # classes that cannot start a job in this cycle
        passed: List[Tuple[int, int]] = []  # heads of classes that can never run, set aside
        if not res.full() and self._in_order(res, now, started, marked, passed):
            self._backfill(res, now, started, marked)
        for head in passed:
            heapq.heappush(self.heads, head)
        return started

    def _in_order(
        self,
        res: PoolCycle,
        now: int,
        started: List[int],
        marked: Set[int],
        passed: List[Tuple[int, int]],
    ) -> bool:
        """Start jobs in order until one cannot start: it becomes the top job. Whether jobs
        may still pass it."""
        policy = self.policy
        while True:
            first = self._first()
            if first is None:
                return False
            c = first[1]
            j = self.fifos[c][0]
            code = res.check(j, now, self._end(now, j))
            if code == OK:
                started.append(self._start(res, now, c))
                if res.full():
                    return False
                continue
            marked.add(c)
            if not policy.strict_ordering:
                return True
            if policy.backfill_depth == 0:
                return False  # nothing passes it (fifo.cpp:1008-1017)
            if code != NEVER:  # a job that can never run is no top job (fifo.cpp:1647-1649)
                res.reserve(j, self.est[j], policy.fuzzy_window, 0)
                return not res.full()
            passed.append(heapq.heappop(self.heads))

    def _backfill(self, res: PoolCycle, now: int, started: List[int], marked: Set[int]) -> None:
        """After the top job: the classes whose first job fits now, merged in order."""
        fits: List[Tuple[int, int]] = []
        pos, fifos, fifo_procs, check = self.pos, self.fifos, self.fifo_procs, res.check
        est = self.est if self.hard is None else self.hard
        for c, f in enumerate(fifos):
            if fifo_procs[c] > res.free:
                break
            if f and c not in marked and check(f[0], now, now + est[f[0]]) == OK:
                fits.append((pos[f[0]], c))
        heapq.heapify(fits)
        while fits:
            _, c = heapq.heappop(fits)
            j = fifos[c][0]
            if res.check(j, now, self._end(now, j)) != OK:
                continue  # the class cannot start a job in this cycle
            started.append(self._start(res, now, c))
            if res.full():
                return
            if fifos[c]:
                heapq.heappush(fits, (pos[fifos[c][0]], c))


def _cycles(
    snap: QueueSnapshot,
    policy: pbsched.Policy,
    est: List[int],
    model: Optional[MachineModel],
    fast: bool,
    site: Optional[SiteOrder] = None,
) -> _Cycles:
    nq = len(snap.queued)
    if model is not None:
        return _Cycles(snap, policy, est, model, site)
    procs = [job.procs for job in snap.queued] + [r.procs for r in snap.running]
    pool = PoolModel(snap.procs_total, procs)
    formula = pbsched.sort_formula(policy.job_sort_formula)
    one_top = policy.backfill_depth <= 1 or not policy.strict_ordering
    if fast and one_top and not formula.time_dependent and nq:
        return _PoolClassCycles(snap, policy, est, pool)
    return _Cycles(snap, policy, est, pool)


def forward_start(
    snap: QueueSnapshot,
    policy: pbsched.Policy,
    queued_run: Runs,
    running_end: Sequence[int],
    fast: bool = True,
) -> int:
    """The target's start when queued job ``j`` runs ``queued_run[j]`` seconds and running
    job ``i`` ends at ``running_end[i]`` (both clamped to the walltime; an end at or before
    ``now`` counts as ``now + 1``). ``fast``: use :class:`_PoolClassCycles` where it
    applies.

    :raises ValueError: the target needs more processors than the machine has, or
        :data:`MAX_EVENTS` ends pass without it starting
    """
    if snap.machine is None and snap.queued[snap.target].procs > snap.procs_total:
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
    model: Optional[MachineModel] = None,
) -> List[int]:
    """Every queued job's start in one forward run (as :func:`forward_start`), or only until
    job ``until`` starts; -1 for a job that does not start (one that can never run on the
    machine, or not within :data:`MAX_EVENTS` ends).

    ``model``: the machine (a :class:`..replay.machine.MachineModel`, fresh: nothing held),
    whose jobs are the queued ones (``j``) then the running ones (``len(snap.queued) + i``);
    None: ``snap.machine``'s, else one pool of ``snap.procs_total`` processors
    (:class:`..replay.pool.PoolModel`)."""
    site: Optional[SiteOrder] = None
    where: Sequence[Optional[Where]] = ()
    if model is None and snap.machine is not None:
        model, site = snap.machine.build()
        where = snap.machine.where
    q = snap.queued
    nq = len(q)
    now = snap.now
    formula = pbsched.sort_formula(policy.job_sort_formula)
    period = policy.scheduler_iteration if formula.time_dependent else 0
    est = [job.est or job.wall for job in q]
    # the jobs of the model: the queued ones, then the running ones (nq + i)
    cycles = _cycles(snap, policy, est, model, fast, site)
    model = cycles.model
    start = [-1] * nq
    left = sum(1 for j in range(nq) if model.can_ever_run(j))
    planned: Dict[int, int] = {}  # running job -> its estimated end, for the scheduler
    ends: List[Tuple[int, int]] = []  # heap of (real end, running job)
    for i, (r, end) in enumerate(zip(snap.running, running_end)):
        model.hold(nq + i, where[i] if where else None)
        planned[nq + i] = r.start + (r.est or r.wall)
        ends.append((max(now + 1, min(end, r.start + r.wall)), nq + i))
    heapq.heapify(ends)
    # (estimated end, running job), sorted: the cycle's ends, kept as jobs start and end
    by_end = sorted((e, k) for k, e in planned.items())
    for _ in range(MAX_EVENTS):
        for j in cycles.cycle(now, list(by_end)):
            start[j] = now
            left -= 1
            planned[j] = now + est[j]
            bisect.insort(by_end, (planned[j], j))
            heapq.heappush(ends, (now + max(1, min(queued_run[j], q[j].wall)), j))
        if (until is not None and start[until] >= 0) or left <= 0 or not ends:
            break
        now = ends[0][0] if not period else min(ends[0][0], now + period)
        while ends and ends[0][0] <= now:
            _, k = heapq.heappop(ends)
            del by_end[bisect.bisect_left(by_end, (planned.pop(k), k))]
            model.release(k)
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
