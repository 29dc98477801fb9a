"""PQStar (Kumar and Vadhiyar) and the replay that predicts every target job's wait.

The system state is rebuilt from submit, start and end times, without simulating a
scheduler: at a target's submit time ``t`` the queue is the jobs submitted before it that
start after ``t``, the running set the jobs with start <= t < end. A job's wait is known
(and used) only once it has started, i.e. start <= t. Events are swept once in time order;
each target costs a few bisections and scans of small sets, never a rescan of the history.

The criteria, as published (section 3), with the quick-starter threshold ``quick_s``
(default 1 h) and similar jobs = same processor request and estimated run times (ERT) at
most ``similar_s`` (1 h) apart:

- **near-term history**: back from the target while the number of running *large* jobs
  (request >= the next power of two >= sqrt(machine size)) at each job's submit is the
  target's. Quick starter if a similar job in it has started and no similar job submitted
  since the boundary has waited more than ``quick_s``: still queued after more than
  ``quick_s`` at the target's submit, or started by then after waiting longer (the paper's
  "have waited for more than an hour"; ``block_started_slow=False``: only the queued ones).
- **mid-term history**: from the near boundary back until the running set at a job's
  submit shares no job with the target's. The same two conditions (the queued check from
  the mid boundary on), and one of: the request-size rank criterion, the ERT rank criterion
  (rank = jobs in the queue with a smaller value / (queue length + 1); the threshold from
  the near-term history is the lesser of the greatest rank of its jobs that waited <=
  ``quick_s`` and the least rank of those known to wait longer; the target's rank must be
  less than it), or the free-node
  criterion (free processors minus those requested by queued jobs with a smaller request
  or a smaller ERT > the target's request).
- **far-term history**: everything before the mid boundary; quick starter if it has
  started similar jobs and all of them waited <= ``quick_s``.
- otherwise IBL's prediction (:class:`.baselines.Ibl`).

A marked quick starter gets the bound ``quick_s``.

**PQStar+IBL** (not in the paper; :func:`arbitrate`): the two see different things --
PQStar the processor occupancy and the queue, IBL the user's own jobs and the system
state -- and where they disagree strongly IBL is believed: a job PQStar's rules mark is
not marked when IBL predicts more than ``veto_s`` (6 h; it gets IBL's wait), and a job
the rules leave is marked when IBL predicts at most ``accept_s`` (1.5 h), not only
``quick_s``. The same settings on every trace: on HPC2N it marks more quick starters and
misguides less than PQStar; on CTC-SP2, KTH-SP2 and SDSC-SP2 it marks more and misguides
more (README).

Since running jobs started at or before ``t`` and end after it, a job submitted at ``s``
shares a running job with the target exactly when ``s`` >= the earliest start among the
target's running jobs: the mid boundary is a bisection on submit times. That earliest
start never decreases with ``t``, so the far-term history only grows and is kept
incrementally, per request size, as sorted ERT lists.
"""

from __future__ import annotations

import bisect
import heapq
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from .baselines import Features, Ibl, QuantileBound, features
from .workload import WaitJob, large_job_procs

METHODS = ("loguniform", "qbets", "ibl", "pqstar", "pqstar_ibl")
# Which rule decided a PQStar prediction.
NEAR, MID, FAR, IBL = "near", "mid", "far", "ibl"
RULES = (NEAR, MID, FAR, IBL)
_START, _END = 1, 0  # event kinds; at equal times ends come first


class WaitParams(NamedTuple):
    """Settings of the wait predictors and of the replay's target range."""

    quick_s: int = 3600
    """Quick-starter threshold and the bound a marked job gets."""
    similar_s: int = 3600
    """Similar jobs: same request, ERTs at most this far apart."""
    quick_similar: bool = False
    """Not in the paper: the near- and mid-term rules count only similar jobs that started
    within ``quick_s`` (the paper: any similar job that started)."""
    first_target: int = 10_000
    """0-based index of the first target job (the paper: the 10,001st)."""
    last_target: int = 50_000
    """Targets end before this index (the paper: the 50,000th job, or the trace's end)."""
    block_started_slow: bool = True
    """A similar job submitted since the boundary that started after waiting more than
    ``quick_s`` blocks the near- and mid-term marks, as one still queued that long does
    (False: only the queued ones block)."""
    ibl_k: int = 10
    ibl_window: int = 400
    ibl_user_window: int = 200
    """IBL also compares with this many of the user's started jobs older than its window."""
    veto_s: int = 6 * 3600
    """PQStar+IBL: a job the rules mark is not marked when IBL predicts more."""
    accept_s: int = 5400
    """PQStar+IBL: a job the rules leave is marked when IBL predicts at most this."""
    quantile: float = 0.95
    confidence: float = 0.95
    window: int = 1000


class WaitPredictions(NamedTuple):
    """Per target (parallel lists): actual wait, run time, each method's prediction."""

    targets: List[int]
    """Indexes of the target jobs in the workload."""
    wait_s: List[int]
    run_s: List[int]
    predicted_s: Dict[str, List[int]]
    rule: List[str]
    """Which PQStar rule decided: near, mid, far or ibl."""
    near_jobs: List[int]
    """Jobs in each target's near-term history."""
    mid_criteria: List[str]
    """For targets marked by the mid rule, the criteria that held: ``S`` request-size
    rank, ``E`` ERT rank, ``F`` free nodes (e.g. ``"SF"``); ``""`` for the others."""


class TargetView(NamedTuple):
    """What PQStar reads of the system at a target's submit time (for tests and ``wait``)."""

    near_start: int
    mid_start: int
    free_procs: int


def rank_threshold_met(rank: float, ranks: Sequence[Tuple[float, bool]]) -> bool:
    """The request-size or ERT rank criterion.

    :param rank: the target's rank in the queue
    :param ranks: (rank at submit, waited <= quick_s) of the near-term jobs whose wait is
        known (started, or still queued after more than quick_s)
    :return: the rank is less than the paper's threshold, the lesser of the greatest rank
        of a quick job and the least rank of a slow one (no quick job: no threshold)
    """
    quick = [x for x, fast in ranks if fast]
    if not quick:
        return False
    slow = [x for x, fast in ranks if not fast]
    return rank < min(max(quick), min(slow)) if slow else rank < max(quick)


def free_node_criterion(
    free_procs: int, procs: int, ert_s: int, queued: Sequence[Tuple[int, int]]
) -> bool:
    """Free processors minus those of queued jobs with a smaller request or ERT exceed the
    target's request.

    :param queued: (processors, ERT) of the jobs in the queue
    """
    ahead = sum(p for p, e in queued if p < procs or e < ert_s)
    return free_procs - ahead > procs


def arbitrate(rule: str, ibl_s: int, params: WaitParams) -> int:
    """PQStar+IBL's prediction: ``quick_s`` (marked) or IBL's wait.

    :param rule: the PQStar rule that decided (:data:`RULES`)
    :param ibl_s: IBL's predicted wait, seconds
    """
    if rule != IBL:
        return params.quick_s if ibl_s <= params.veto_s else ibl_s
    return min(ibl_s, params.quick_s) if ibl_s <= params.accept_s else ibl_s


def replay_waits(
    jobs: Sequence[WaitJob], machine_procs: int, params: Optional[WaitParams] = None
) -> WaitPredictions:
    """Predict the wait of each target job by every method of :data:`METHODS`.

    :param jobs: the workload in submit order (see :func:`.workload.build`)
    :param machine_procs: the machine's processors
    :param params: settings (default ``WaitParams()``)
    """
    replay = WaitReplay(jobs, machine_procs, params or WaitParams())
    first, last = replay.first, replay.last
    for i in range(last):  # jobs submitted after the last target change nothing
        t = replay.submit_s[i]
        replay.advance(t)
        replay.arrive(i)
        if first <= i:
            replay.predict(i, t)
        replay.enqueue(i)
    return replay.out


class WaitReplay:
    """The system as the replay rebuilds it, one submit at a time, and PQStar's rules on it.

    :func:`replay_waits` drives it: for each job in submit order, :meth:`advance` to its
    submit time (starts and ends up to then: :meth:`observe_start`, :meth:`observe_end`),
    :meth:`arrive` (its ranks and features in the queue it finds), :meth:`predict` for a
    target (every method; PQStar's rule is :meth:`decide`), then :meth:`enqueue`. Tests
    drive the same methods on hand-made states.
    """

    def __init__(self, jobs: Sequence[WaitJob], machine_procs: int, params: WaitParams) -> None:
        self.jobs, self.machine_procs, self.params = jobs, machine_procs, params
        n = len(jobs)
        self.first, self.last = max(0, params.first_target), min(n, params.last_target)
        self.submit_s = [j.submit_s for j in jobs]
        self.start_s = [j.start_s for j in jobs]
        self.end_s = [max(j.end_s, j.start_s) for j in jobs]
        self.procs = [j.procs for j in jobs]
        self.ert = [j.ert_s for j in jobs]
        large = large_job_procs(machine_procs)
        self.is_large = [p >= large for p in self.procs]
        self.by_size: Dict[int, List[int]] = {}  # request size -> its jobs, ascending
        for i, p in enumerate(self.procs):
            self.by_size.setdefault(p, []).append(i)
        self.events: List[Tuple[int, int, int]] = []  # heap (time, kind, job)
        self.queue: Dict[int, None] = {}  # insertion-ordered: submit order
        self.queued_by_size: Dict[int, Dict[int, None]] = {}
        self.queued_sizes: List[int] = []  # sorted
        self.queued_erts: List[int] = []  # sorted
        self.queued_procs = 0
        self.running_starts: List[Tuple[int, int]] = []  # heap (start, job); ended: lazily
        self.ended = [False] * n
        self.used = 0
        self.large_running = 0
        self.near_from = [0] * n  # each job's near-term boundary
        self.near_large = 0  # running large jobs when the previous job arrived
        self.rank_size = [0.0] * n
        self.rank_ert = [0.0] * n
        self.feats: List[Optional[Features]] = [None] * n
        # Far-term history: jobs before the mid boundary that have started, per request size.
        self.mid_from = 0  # the mid boundary of the target being predicted
        self.far_next = 0  # jobs before this one are in the far history or far_pending
        self.far_pending: List[Tuple[int, int]] = []  # heap (start, job) not started yet
        self.far_all: Dict[int, List[int]] = {}  # size -> sorted ERTs
        self.far_slow: Dict[int, List[int]] = {}  # size -> sorted ERTs of waits > quick_s
        self.qbets = QuantileBound(params.quantile, params.confidence, params.window)
        self.ibl = Ibl(params.ibl_k, params.ibl_window, params.ibl_user_window)
        self.out = WaitPredictions([], [], [], {m: [] for m in METHODS}, [], [], [])

    def advance(self, t: int) -> None:
        """Every start and end at or before ``t``, in time order (ends first at a tie)."""
        events = self.events
        while events and events[0][0] <= t:
            _time, kind, j = heapq.heappop(events)
            if kind == _START:
                self.observe_start(j)
            else:
                self.observe_end(j)

    def observe_start(self, j: int) -> None:
        """Job ``j`` leaves the queue and runs; its wait is known from now on."""
        p, ert = self.procs[j], self.ert[j]
        del self.queue[j]
        del self.queued_by_size[p][j]
        del self.queued_sizes[bisect.bisect_left(self.queued_sizes, p)]
        del self.queued_erts[bisect.bisect_left(self.queued_erts, ert)]
        self.queued_procs -= p
        self.used += p
        self.large_running += self.is_large[j]
        heapq.heappush(self.events, (self.end_s[j], _END, j))
        heapq.heappush(self.running_starts, (self.start_s[j], j))
        wait = self.start_s[j] - self.submit_s[j]
        self.qbets.observe(p, ert, wait)
        f = self.feats[j]
        assert f is not None  # set when j arrived
        self.ibl.observe(f, wait)

    def observe_end(self, j: int) -> None:
        """Job ``j`` ends: its processors are free."""
        self.used -= self.procs[j]
        self.large_running -= self.is_large[j]
        self.ended[j] = True

    def arrive(self, i: int) -> None:
        """Job ``i`` is submitted: its near boundary, ranks and features in the queue now."""
        large = self.large_running
        same = i > 0 and self.near_large == large  # the near-term history goes on
        self.near_from[i] = self.near_from[i - 1] if same else i
        self.near_large = large
        p, r = self.procs[i], self.ert[i]
        places = len(self.queue) + 1
        self.rank_size[i] = bisect.bisect_left(self.queued_sizes, p) / places
        self.rank_ert[i] = bisect.bisect_left(self.queued_erts, r) / places
        free = self.machine_procs - self.used
        self.feats[i] = features(
            self.jobs[i].user, p, r, len(self.queue), self.queued_procs, free, self.machine_procs
        )

    def enqueue(self, i: int) -> None:
        """Job ``i`` joins the queue until its start."""
        p = self.procs[i]
        self.queue[i] = None
        self.queued_by_size.setdefault(p, {})[i] = None
        bisect.insort(self.queued_sizes, p)
        bisect.insort(self.queued_erts, self.ert[i])
        self.queued_procs += p
        heapq.heappush(self.events, (self.start_s[i], _START, i))

    def predict(self, i: int, t: int) -> None:
        """Every method's prediction for target ``i`` submitted at ``t`` (into :attr:`out`)."""
        params, out = self.params, self.out
        p, r = self.procs[i], self.ert[i]
        f = self.feats[i]
        assert f is not None  # set by arrive()
        ibl_s = self.ibl.predict(f)
        out.predicted_s["ibl"].append(ibl_s)
        out.predicted_s["qbets"].append(self.qbets.bound(p, r))
        out.predicted_s["loguniform"].append(self.qbets.loguniform(p, r, params.quantile))
        out.targets.append(i)
        out.wait_s.append(self.start_s[i] - t)
        out.run_s.append(self.end_s[i] - self.start_s[i])
        out.near_jobs.append(i - self.near_from[i])
        rule, criteria = self.decide(i, t)
        out.rule.append(rule)
        out.mid_criteria.append(criteria)
        out.predicted_s["pqstar"].append(params.quick_s if rule != IBL else ibl_s)
        out.predicted_s["pqstar_ibl"].append(arbitrate(rule, ibl_s, params))

    def _grow_far_history(self, i: int, t: int) -> int:
        """The mid boundary of target ``i`` at ``t``; the far history brought up to it."""
        running = self.running_starts
        while running and self.ended[running[0][1]]:
            heapq.heappop(running)
        earliest = running[0][0] if running else t
        mid_from = bisect.bisect_left(self.submit_s, earliest, 0, i)
        start, pending = self.start_s, self.far_pending
        while self.far_next < mid_from:
            j = self.far_next
            if start[j] <= t:
                self._far_add(j)
            else:
                heapq.heappush(pending, (start[j], j))
            self.far_next += 1
        while pending and pending[0][0] <= t:
            self._far_add(heapq.heappop(pending)[1])
        return mid_from

    def _far_add(self, j: int) -> None:
        bisect.insort(self.far_all.setdefault(self.procs[j], []), self.ert[j])
        if self.start_s[j] - self.submit_s[j] > self.params.quick_s:
            bisect.insort(self.far_slow.setdefault(self.procs[j], []), self.ert[j])

    def decide(self, i: int, t: int) -> Tuple[str, str]:
        """PQStar's rule for target ``i`` submitted at ``t``, on the state now: near, mid or
        far if marked a quick starter, else ibl; and for mid, which of its criteria held
        (see :attr:`WaitPredictions.mid_criteria`)."""
        self.mid_from = mid_from = self._grow_far_history(i, t)
        near_from = self.near_from[i]
        blocked = self._blocked(i, t, min(near_from, mid_from))
        if blocked < near_from and self._similar_started(i, t, near_from, i):
            return NEAR, ""
        if (
            mid_from < near_from
            and blocked < mid_from
            and self._similar_started(i, t, mid_from, near_from)
        ):
            held = self._mid_criteria(i, t)
            if held:
                return MID, held
        return (FAR, "") if self._far_marks(i, t) else (IBL, "")

    def _similar_started(self, i: int, t: int, lo: int, hi: int) -> bool:
        """Whether a job similar to target ``i`` (same request, ERT within ``similar_s``)
        among jobs ``lo``..``hi - 1`` started by ``t`` (having waited at most ``quick_s``
        with ``quick_similar``); scans from the most recent."""
        quick_s, similar_s = self.params.quick_s, self.params.similar_s
        max_wait = quick_s if self.params.quick_similar else None
        same, ert, start, submit = (
            self.by_size[self.procs[i]],
            self.ert,
            self.start_s,
            self.submit_s,
        )
        r = ert[i]
        k = bisect.bisect_left(same, hi) - 1
        first = bisect.bisect_left(same, lo)
        while k >= first:
            j = same[k]
            if (
                start[j] <= t
                and -similar_s <= ert[j] - r <= similar_s
                and (max_wait is None or start[j] - submit[j] <= max_wait)
            ):
                return True
            k -= 1
        return False

    def _blocked(self, i: int, t: int, oldest: int) -> int:
        """The latest similar job that has waited more than quick_s (still queued, or
        started by ``t`` after waiting that long; -1: none): a boundary at or before it
        fails the "no similar job has waited too long" condition. Started jobs are looked
        at back to ``oldest`` only."""
        quick_s, similar_s = self.params.quick_s, self.params.similar_s
        p, r = self.procs[i], self.ert[i]
        submit, start, ert = self.submit_s, self.start_s, self.ert
        blocked = -1
        for j in self.queued_by_size.get(p, ()):
            if t - submit[j] > quick_s and -similar_s <= ert[j] - r <= similar_s and j > blocked:
                blocked = j
        if self.params.block_started_slow:
            same = self.by_size[p]
            k = bisect.bisect_left(same, i) - 1
            first = bisect.bisect_left(same, oldest)
            while k >= first and same[k] > blocked:
                j = same[k]
                if (
                    start[j] <= t
                    and start[j] - submit[j] > quick_s
                    and (-similar_s <= ert[j] - r <= similar_s)
                ):
                    return j
                k -= 1
        return blocked

    def _mid_criteria(self, i: int, t: int) -> str:
        """Which of the mid rule's criteria hold for target ``i`` at ``t``: ``S``, ``E``,
        ``F`` (see :attr:`WaitPredictions.mid_criteria`)."""
        quick_s, start, submit = self.params.quick_s, self.start_s, self.submit_s
        known: List[Tuple[int, bool]] = []  # near-term jobs whose wait is known: quick?
        for j in range(self.near_from[i], i):
            if start[j] <= t:
                known.append((j, start[j] - submit[j] <= quick_s))
            elif t - submit[j] > quick_s:
                known.append((j, False))
        held = ""
        rank_size, rank_ert = self.rank_size, self.rank_ert
        if rank_threshold_met(rank_size[i], [(rank_size[j], fast) for j, fast in known]):
            held += "S"
        if rank_threshold_met(rank_ert[i], [(rank_ert[j], fast) for j, fast in known]):
            held += "E"
        free = self.machine_procs - self.used
        queued = [(self.procs[j], self.ert[j]) for j in self.queue]
        if free_node_criterion(free, self.procs[i], self.ert[i], queued):
            held += "F"
        return held

    def _far_marks(self, i: int, t: int) -> bool:
        """Far-term: jobs before min(mid boundary, near boundary) that have started; marked
        if some are similar and none of those waited more than quick_s."""
        quick_s, similar_s = self.params.quick_s, self.params.similar_s
        p, r = self.procs[i], self.ert[i]
        lo_e, hi_e = r - similar_s, r + similar_s
        ertlist = self.far_all.get(p)
        total = slow = 0
        if ertlist:
            total = bisect.bisect_right(ertlist, hi_e) - bisect.bisect_left(ertlist, lo_e)
            slowlist = self.far_slow.get(p)
            if slowlist:
                slow = bisect.bisect_right(slowlist, hi_e) - bisect.bisect_left(slowlist, lo_e)
        near_from, mid_from = self.near_from[i], self.mid_from
        if near_from < mid_from and total:
            # The near-term history reaches back past the mid boundary: its jobs are not far.
            same, start, submit, ert = self.by_size[p], self.start_s, self.submit_s, self.ert
            lo = bisect.bisect_left(same, near_from)
            hi = bisect.bisect_left(same, mid_from)
            for j in same[lo:hi]:
                if start[j] <= t and lo_e <= ert[j] <= hi_e:
                    total -= 1
                    slow -= start[j] - submit[j] > quick_s
        return total > 0 and slow == 0


# A start or end time not known yet (a queued job's start, a running job's end): later
# than any instant a prediction is made at.
UNKNOWN_S = 1 << 62


class WaitAnswer(NamedTuple):
    """One job's predicted wait by every method, and the PQStar rule that decided."""

    rule: str
    predicted_s: Dict[str, int]
    near_jobs: int


def predict_one(
    history: Sequence[WaitJob],
    job: WaitJob,
    machine_procs: int,
    params: Optional[WaitParams] = None,
) -> WaitAnswer:
    """Predict the wait of ``job`` from the jobs submitted before it (live use).

    :param history: jobs in submit order, all submitted at or before ``job``; a queued
        job's start and a running job's end are :data:`UNKNOWN_S`
    :param job: the job to predict (its start and end are not used)
    :param machine_procs: the machine's processors
    :param params: settings; the target range is ignored
    """
    params = (params or WaitParams())._replace(
        first_target=len(history), last_target=len(history) + 1
    )
    target = job._replace(start_s=UNKNOWN_S, end_s=UNKNOWN_S)
    res = replay_waits(list(history) + [target], machine_procs, params)
    return WaitAnswer(res.rule[0], {m: res.predicted_s[m][0] for m in METHODS}, res.near_jobs[0])
