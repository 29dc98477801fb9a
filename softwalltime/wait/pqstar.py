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


class Snapshot(NamedTuple):
    """What PQStar reads of the system at a target's submit time (for tests and ``wait``)."""

    near_start: int
    mid_start: int
    free_procs: int


def _similar_started_in(
    indexes: List[int],
    lo: int,
    hi: int,
    ert: Sequence[int],
    start: Sequence[int],
    r: int,
    similar_s: int,
    t: int,
    submit: Sequence[int],
    max_wait_s: Optional[int],
) -> bool:
    """Whether a job of ``indexes`` (one request size, ascending) in [lo, hi) has an ERT
    within ``similar_s`` of ``r`` and started by ``t`` (after waiting at most
    ``max_wait_s``, unless None); scans from the most recent."""
    k = bisect.bisect_left(indexes, hi) - 1
    first = bisect.bisect_left(indexes, lo)
    while k >= first:
        j = indexes[k]
        if (
            start[j] <= t
            and -similar_s <= ert[j] - r <= similar_s
            and (max_wait_s is None or start[j] - submit[j] <= max_wait_s)
        ):
            return True
        k -= 1
    return False


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
    if params is None:
        params = WaitParams()
    quick_s, similar_s = params.quick_s, params.similar_s
    n = len(jobs)
    first, last = max(0, params.first_target), min(n, params.last_target)
    sub = [j.submit_s for j in jobs]
    st = [j.start_s for j in jobs]
    en = [max(j.end_s, j.start_s) for j in jobs]
    procs = [j.procs for j in jobs]
    ert = [j.ert_s for j in jobs]
    large = large_job_procs(machine_procs)
    is_large = [p >= large for p in procs]

    by_size: Dict[int, List[int]] = {}
    for i, p in enumerate(procs):
        by_size.setdefault(p, []).append(i)

    events: List[Tuple[int, int, int]] = []  # (time, kind, job)
    queue: Dict[int, None] = {}  # insertion-ordered: submit order
    queued_by_size: Dict[int, Dict[int, None]] = {}
    q_sizes: List[int] = []
    q_erts: List[int] = []
    q_procs = 0
    running_starts: List[Tuple[int, int]] = []  # heap (start, job), ended ones removed lazily
    ended = [False] * n
    used = 0
    nlarge = 0

    n_large_at = [0] * n
    near_from = [0] * n
    rank_size = [0.0] * n
    rank_ert = [0.0] * n
    feats: List[Optional[Features]] = [None] * n

    # Far-term history: jobs before the mid boundary that have started, per request size.
    far_ptr = 0
    far_pending: List[Tuple[int, int]] = []  # (start, job) not started yet
    far_all: Dict[int, List[int]] = {}  # size -> sorted ERTs
    far_slow: Dict[int, List[int]] = {}  # size -> sorted ERTs of those waiting > quick_s

    def far_add(j: int) -> None:
        bisect.insort(far_all.setdefault(procs[j], []), ert[j])
        if st[j] - sub[j] > quick_s:
            bisect.insort(far_slow.setdefault(procs[j], []), ert[j])

    qbets = QuantileBound(params.quantile, params.confidence, params.window)
    ibl = Ibl(params.ibl_k, params.ibl_window, params.ibl_user_window)

    out = WaitPredictions([], [], [], {m: [] for m in METHODS}, [], [], [])
    pred_lu, pred_qb = out.predicted_s["loguniform"], out.predicted_s["qbets"]
    pred_ibl, pred_pq = out.predicted_s["ibl"], out.predicted_s["pqstar"]
    pred_arb = out.predicted_s["pqstar_ibl"]
    heappush, heappop = heapq.heappush, heapq.heappop

    for i in range(last):  # jobs submitted after the last target change nothing
        t = sub[i]
        while events and events[0][0] <= t:
            _time, kind, j = heappop(events)
            p = procs[j]
            if kind == _START:
                del queue[j]
                del queued_by_size[p][j]
                del q_sizes[bisect.bisect_left(q_sizes, p)]
                del q_erts[bisect.bisect_left(q_erts, ert[j])]
                q_procs -= p
                used += p
                nlarge += is_large[j]
                heappush(events, (en[j], _END, j))
                heappush(running_starts, (st[j], j))
                wait = st[j] - sub[j]
                qbets.observe(p, ert[j], wait)
                f = feats[j]
                assert f is not None  # set when j was submitted
                ibl.observe(f, wait)
            else:
                used -= p
                nlarge -= is_large[j]
                ended[j] = True
        n_large_at[i] = nlarge
        near_from[i] = near_from[i - 1] if i and n_large_at[i - 1] == nlarge else i
        p_i, r_i = procs[i], ert[i]
        qn = len(queue)
        rank_size[i] = bisect.bisect_left(q_sizes, p_i) / (qn + 1)
        rank_ert[i] = bisect.bisect_left(q_erts, r_i) / (qn + 1)
        free = machine_procs - used
        f_i = feats[i] = features(jobs[i].user, p_i, r_i, qn, q_procs, free, machine_procs)

        if first <= i < last:
            while running_starts and ended[running_starts[0][1]]:
                heappop(running_starts)
            earliest = running_starts[0][0] if running_starts else t
            mid_from = bisect.bisect_left(sub, earliest, 0, i)
            while far_ptr < mid_from:
                if st[far_ptr] <= t:
                    far_add(far_ptr)
                else:
                    heappush(far_pending, (st[far_ptr], far_ptr))
                far_ptr += 1
            while far_pending and far_pending[0][0] <= t:
                far_add(heappop(far_pending)[1])

            b = near_from[i]
            ibl_s = ibl.predict(f_i)
            pred_ibl.append(ibl_s)
            pred_qb.append(qbets.bound(p_i, r_i))
            pred_lu.append(qbets.loguniform(p_i, r_i, params.quantile))
            out.targets.append(i)
            out.wait_s.append(st[i] - t)
            out.run_s.append(en[i] - st[i])
            out.near_jobs.append(i - b)

            rule, criteria = _decide(
                i, t, b, mid_from, free, quick_s, similar_s, params.quick_similar,
                params.block_started_slow,
                sub, st, procs, ert, by_size, queue, queued_by_size,
                rank_size, rank_ert, far_all, far_slow,
            )  # fmt: skip
            out.rule.append(rule)
            out.mid_criteria.append(criteria)
            pred_pq.append(quick_s if rule != IBL else ibl_s)
            pred_arb.append(arbitrate(rule, ibl_s, params))

        queue[i] = None
        queued_by_size.setdefault(p_i, {})[i] = None
        bisect.insort(q_sizes, p_i)
        bisect.insort(q_erts, r_i)
        q_procs += p_i
        heappush(events, (st[i], _START, i))
    return out


def _decide(
    i: int,
    t: int,
    b: int,
    mid_from: int,
    free: int,
    quick_s: int,
    similar_s: int,
    quick_similar: bool,
    block_started_slow: bool,
    sub: Sequence[int],
    st: Sequence[int],
    procs: Sequence[int],
    ert: Sequence[int],
    by_size: Dict[int, List[int]],
    queue: Dict[int, None],
    queued_by_size: Dict[int, Dict[int, None]],
    rank_size: Sequence[float],
    rank_ert: Sequence[float],
    far_all: Dict[int, List[int]],
    far_slow: Dict[int, List[int]],
) -> Tuple[str, str]:
    """PQStar's rule for target ``i`` submitted at ``t`` (near boundary ``b``, mid
    boundary ``mid_from``): near, mid or far if marked a quick starter, else ibl; and
    for mid, which of its criteria held (see :attr:`WaitPredictions.mid_criteria`)."""
    p, r = procs[i], ert[i]
    same = by_size[p]
    # The latest similar job that has waited more than quick_s (still queued, or started
    # by t after waiting that long): a boundary at or before it fails the "no similar job
    # has waited too long" condition.
    blocked = -1
    for j in queued_by_size.get(p, ()):
        if t - sub[j] > quick_s and -similar_s <= ert[j] - r <= similar_s and j > blocked:
            blocked = j
    if block_started_slow:
        k = bisect.bisect_left(same, i) - 1
        first = bisect.bisect_left(same, min(b, mid_from))
        while k >= first and same[k] > blocked:
            j = same[k]
            if st[j] <= t and st[j] - sub[j] > quick_s and -similar_s <= ert[j] - r <= similar_s:
                blocked = j
                break
            k -= 1
    max_wait = quick_s if quick_similar else None
    if blocked < b and _similar_started_in(same, b, i, ert, st, r, similar_s, t, sub, max_wait):
        return NEAR, ""
    if (
        mid_from < b
        and blocked < mid_from
        and _similar_started_in(same, mid_from, b, ert, st, r, similar_s, t, sub, max_wait)
    ):
        known: List[Tuple[int, bool]] = []
        for j in range(b, i):
            if st[j] <= t:
                known.append((j, st[j] - sub[j] <= quick_s))
            elif t - sub[j] > quick_s:
                known.append((j, False))
        held = ""
        if rank_threshold_met(rank_size[i], [(rank_size[j], fast) for j, fast in known]):
            held += "S"
        if rank_threshold_met(rank_ert[i], [(rank_ert[j], fast) for j, fast in known]):
            held += "E"
        if free_node_criterion(free, p, r, [(procs[j], ert[j]) for j in queue]):
            held += "F"
        if held:
            return MID, held
    # Far-term: jobs before min(mid boundary, near boundary) that have started.
    lo_e, hi_e = r - similar_s, r + similar_s
    ertlist = far_all.get(p)
    total = slow = 0
    if ertlist:
        total = bisect.bisect_right(ertlist, hi_e) - bisect.bisect_left(ertlist, lo_e)
        slowlist = far_slow.get(p)
        if slowlist:
            slow = bisect.bisect_right(slowlist, hi_e) - bisect.bisect_left(slowlist, lo_e)
    if b < mid_from and total:
        # The near-term history reaches back past the mid boundary: its jobs are not far.
        lo = bisect.bisect_left(same, b)
        hi = bisect.bisect_left(same, mid_from)
        for j in same[lo:hi]:
            if st[j] <= t and lo_e <= ert[j] <= hi_e:
                total -= 1
                slow -= st[j] - sub[j] > quick_s
    if total > 0 and slow == 0:
        return FAR, ""
    return IBL, ""


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
