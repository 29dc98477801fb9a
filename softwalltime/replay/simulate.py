"""Scheduler simulation: what soft walltimes do to waiting times and slowdown (pure).

The model (also in ``softwalltime simulate --help`` and the README):

- **Machine**: a pool of ``procs_total`` processors. A job uses its allocated (else
  requested) processors.
- **Jobs** arrive at their submit time and run for their real run time, cut at their
  requested walltime (PBS kills there).
- **Estimates** the scheduler plans with come from an :class:`EstimateSource`: the users'
  walltimes, a predictor of the hook (v1, v2, v3 through
  :func:`softwalltime.hookpath.predict.predict`), ``perfect`` (the real run time) or
  ``fixed10`` (10 minutes, at most the walltime). A source is asked at submit
  (``queuejob``) and again at start (``runjob``); predictors use the history of the user's
  jobs that have *ended in the simulation* by then, most recent end first.
- **Scheduler**: first come first served (submit time, then trace order) with EASY
  backfilling. At each pass, jobs start from the head while the head fits. For the head that
  does not fit, its *shadow time* is the earliest estimated end of a running job
  (``max(now, start + current estimate)``) at which enough processors are free, and *extra*
  is the number of processors free at the shadow time counting every running job whose
  estimated end is at or before it, minus the head's processors. The rest of the queue is
  scanned in order: a job that fits now starts if ``now + estimate <= shadow``, or else if it
  needs no more than *extra* processors (which it then uses up). A queued job's estimate is
  its submit-time prediction. ``backfill_depth`` K > 1 gives the first K jobs that cannot
  start a reservation each (computed on the availability profile, earlier reservations
  included), each protected the same way (extra = the least number of processors free from
  the shadow time on). ``sjbf`` scans backfill candidates shortest estimate first.
- **Event order** at equal times: job ends (reported to the estimate source in FCFS
  order: a source that learns from ends, like ``calibrated``, may depend on it), then
  estimate corrections (and refreshes), then arrivals, then one scheduling pass.
- **Corrections** when a running job outlives its estimate: ``pbs`` (each time the
  estimate is exceeded it grows by the estimate the job started with), ``simple`` (+1 h
  once the job is within 60 s of its estimate), ``power`` (the i-th correction adds
  15 x 2^(i-2) minutes) and ``walltime`` (the user's walltime). Never past the walltime.
  Steps of ``pbs`` that cannot change any scheduling decision (no other event in between and
  the estimated end does not cross the head's shadow time) are taken in one closed-form
  jump, so a 1-second estimate of a day-long job costs a few operations, not 86,400 events.
  With ``backfill_depth`` 1 they are applied only when a pass reads the running jobs' ends
  in order, and windows in which provably no job can start are skipped (the shadow can
  run ahead of now by at most the largest increment of the jobs it waits for).
- **Refresh** (optional, ``refresh_every_s``): at every multiple of that period, queued
  jobs of users with newly ended jobs are predicted again; the new value replaces the
  estimate when it differs by more than ``refresh_pct`` % and at least ``refresh_min_s``.

Metrics: wait (start - submit), bounded slowdown ``max(1, (wait + run) / max(run, 600 s))``,
overall and per runtime class of ``evaluate``; utilization; makespan; corrections.
"""

from __future__ import annotations

import bisect
import heapq
import math
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

from .evaluate import CLASSES, runtime_class, target_text
from .sources import (
    BASELINE,
    CALIBRATED,
    FIXED10,
    PERFECT,
    SOURCE_NAMES,
    CalibratedSource,
    EstimateSource,
    FixedSource,
    PerfectSource,
    PredictorSource,
    WalltimeSource,
    make_source,
)
from .workload import (
    SKIP_PROCS,
    SKIP_TOO_WIDE,
    Workload,
    fit_machine,
    make_workload,
    read_workload,
)

# The workload and the estimate sources are re-exported: callers of simulate name them here.
__all__ = [
    "BASELINE",
    "BSLD_BOUND_S",
    "CALIBRATED",
    "CORRECTIONS",
    "FIXED10",
    "PERFECT",
    "SIMPLE_MARGIN_S",
    "SIMPLE_STEP_S",
    "SKIP_PROCS",
    "SKIP_TOO_WIDE",
    "SOURCE_NAMES",
    "CalibratedSource",
    "EstimateSource",
    "FixedSource",
    "PerfectSource",
    "PredictorSource",
    "Refresh",
    "SimResult",
    "Stats",
    "WalltimeSource",
    "Workload",
    "fit_machine",
    "format_table",
    "job_outcomes",
    "make_source",
    "make_workload",
    "read_workload",
    "simulate",
    "stats",
    "summarize",
]

CORRECTIONS = ("pbs", "simple", "power", "walltime")
BSLD_BOUND_S = 600
_TRACK = True  # tests may turn the moving-shadow shortcut off
_FULL = False  # tests: every correction an event, a full pass at every instant
SIMPLE_MARGIN_S = 60
SIMPLE_STEP_S = 3600


# ---------------------------------------------------------------------------------------
# Simulation


class Refresh(NamedTuple):
    every_s: int
    pct: float = 10.0
    min_s: int = 300


class SimResult(NamedTuple):
    source: str
    correction: str
    procs_total: int
    start: List[int]
    corrections: List[int]
    """Corrections per job."""
    reservation: List[int]
    """First shadow time computed for each job as the head (-1: never the blocked head)."""
    refresh_changes: int
    passes: int


def _power_step(i: int) -> int:
    # 15 x 2^(i-2) minutes for the i-th correction (i >= 1): 450 s, 900 s, 1800 s, ...
    return 450 << (i - 1)


def simulate(
    work: Workload,
    source: EstimateSource,
    procs_total: int,
    correction: str = "pbs",
    backfill_depth: int = 1,
    sjbf: bool = False,
    refresh: Optional[Refresh] = None,
    lazy_corrections: bool = False,
) -> SimResult:
    """Simulate FCFS + EASY backfilling with the estimates of ``source``; see the module doc.

    ``lazy_corrections``: corrections get no scheduling pass of their own; they are applied
    (in closed form) when a pass happens for an end or an arrival, as PBS's scheduler
    extends soft walltimes when it runs a cycle.

    :param work: the jobs (none wider than ``procs_total``: see :func:`fit_machine`)
    :raises ValueError: bad parameters or a job wider than the machine
    """
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}, not {correction!r}")
    if backfill_depth < 1:
        raise ValueError("backfill_depth must be at least 1")
    if procs_total < 1:
        raise ValueError("the machine needs at least 1 processor")
    n = len(work.submit)
    submit = work.submit
    run = work.run
    wall = work.wall
    procs = work.procs
    users = work.user
    if n and max(procs) > procs_total:
        raise ValueError("a job needs more processors than the machine has")
    source.bind(work)
    on_submit = source.on_submit
    on_start = source.on_start
    on_end = source.on_end
    is_pbs = correction == "pbs"
    is_simple = correction == "simple"
    is_power = correction == "power"

    est = [0] * n  # queued: submit-time estimate; running: current estimate
    orig = [0] * n  # estimate at start
    est_end = [0] * n
    start = [-1] * n
    ncorr = [0] * n
    reservation = [-1] * n
    queue: List[int] = []
    running: List[Tuple[int, int]] = []  # (estimated end, job), sorted
    ends: List[Tuple[int, int]] = []  # heap (end, job)
    corr: List[Tuple[int, int]] = []  # heap (correction time, job)
    free = procs_total
    inf = float("inf")
    heappush = heapq.heappush
    heappop = heapq.heappop
    insort = bisect.insort
    bisect_left = bisect.bisect_left
    bisect_right = bisect.bisect_right

    deferred = is_pbs and backfill_depth == 1 and not lazy_corrections and not _FULL
    # Refresh state
    period = refresh.every_s if refresh is not None and source.refreshable else 0
    queued_by_user: Dict[str, List[int]] = {}
    dirty: Set[str] = set()
    next_refresh: float = inf
    refresh_changes = 0

    # State after the last pass (depth 1): the blocked head's shadow and remaining extra.
    shadow: float = -1.0  # -1: no blocked head (queue empty after the pass)
    extra = 0
    min_est: float = inf
    min_p: float = inf
    next_cross: float = inf
    restale = False  # a job started with another estimate than it was admitted with
    track = -1  # depth 1: the running job the shadow moves with (see compute_next_cross)
    shadow_job = -1  # the running job whose end is the shadow, per blocked_shadow()
    passes = 0
    a = 0

    def step_time(j: int, e: int) -> int:
        # When running job j with estimate e is next corrected.
        return start[j] + e - SIMPLE_MARGIN_S if is_simple else start[j] + e

    def next_estimate(j: int, e: int, i: int) -> int:
        # The estimate after the i-th correction (i >= 1) of job j, from e.
        if is_pbs:
            return min(e + max(orig[j], 1), wall[j])
        if is_simple:
            return min(e + SIMPLE_STEP_S, wall[j])
        if is_power:
            return min(e + _power_step(i), wall[j])
        return wall[j]

    def schedule_correction(j: int) -> None:
        # Note the next correction of running job j, if it will outlive its estimate then.
        e = est[j]
        if e < wall[j]:
            when = step_time(j, e)
            if when < start[j] + run[j]:
                heappush(corr, (when, j))

    def advance(j: int, limit: int) -> None:
        # Apply the corrections of running job j that happen at or before ``limit`` (and
        # before the job ends), in closed form for pbs.
        e = est[j]
        w = wall[j]
        limit = min(limit, start[j] + run[j] - 1)
        first = step_time(j, e)
        if e >= w or first > limit:
            return
        if is_pbs:
            inc = max(orig[j], 1)
            m = min((limit - first) // inc + 1, -(-(w - e) // inc))
            ncorr[j] += m
            set_estimate(j, min(e + m * inc, w))
            return
        while e < w and step_time(j, e) <= limit:
            ncorr[j] += 1
            e = next_estimate(j, e, ncorr[j])
        set_estimate(j, e)

    def take_due(t: int) -> None:
        # The pbs corrections due by now, deferred (depth 1, corrections as events): taken
        # only before a pass that reads the running jobs' ends in order (a full pass, a
        # moved shadow, a tracked job). Until then a due job's entry in ``running`` holds
        # an end <= now: every other reader works from it in closed form (crossing,
        # virtual_end) or only loosens a bound with it (gap_bound, noop_until's extra), so
        # no decision changes. The due jobs are the entries with an end <= now (a job at
        # its walltime, or whose next step is past its end, ends after now), so no heap.
        k = bisect_right(running, (t, n))
        if not k:
            return
        taken = []
        for when, j in running[:k]:
            st = start[j]
            e = when - st
            w = wall[j]
            inc = orig[j] if orig[j] > 1 else 1
            m = (t - when) // inc + 1
            cap = -(-(w - e) // inc)
            if cap < m:
                m = cap
            ncorr[j] += m
            e += m * inc
            if e > w:
                e = w
            est[j] = e
            est_end[j] = st + e
            taken.append((st + e, j))
        del running[:k]
        if k > 4:
            running.extend(taken)
            running.sort()  # two sorted runs: merged
        else:
            for x in taken:
                insort(running, x)

    def next_due() -> float:
        # Deferred: when the next pbs correction of a running job is due (all are > now).
        for e, j in running:
            st = start[j]
            if e < st + wall[j] and e < st + run[j]:
                return e
        return inf

    def take_pbs_corrections(t: int) -> bool:
        # Step 2 under pbs: advance() and schedule_correction() of each due job, inlined
        # (millions of corrections on a large trace with short estimates). True if any.
        taken = False
        while corr and corr[0][0] <= t:
            when, j = heappop(corr)
            st = start[j]
            e = est[j]
            end = st + run[j]
            if end <= t or st + e != when:
                continue  # ended, or already advanced
            w = wall[j]
            inc = orig[j] if orig[j] > 1 else 1
            m = (t - when) // inc + 1
            cap = -(-(w - e) // inc)
            if cap < m:
                m = cap
            ncorr[j] += m
            e += m * inc
            if e > w:
                e = w
            del running[bisect_left(running, (when, j))]
            est[j] = e
            new = st + e
            est_end[j] = new
            insort(running, (new, j))
            if e < w and new < end:
                heappush(corr, (new, j))
            taken = True
        return taken

    def crossing(j: int, sh: float) -> float:
        # When running job j's estimated end (now <= sh) would first move past sh.
        e = est[j]
        w = wall[j]
        st = start[j]
        end = st + run[j]
        if st + w <= sh:
            return inf
        if is_pbs:
            inc = max(orig[j], 1)
            c = st + e + int((sh - st - e) // inc) * inc
            return c if c < end else inf
        i = ncorr[j]
        while e < w:
            c = step_time(j, e)
            if c >= end:
                return inf
            i += 1
            e = next_estimate(j, e, i)
            if st + e > sh:
                return c
        return inf

    def start_job(j: int, t: int) -> None:
        nonlocal free, restale
        start[j] = t
        e = on_start(j, t)
        orig[j] = e
        w = wall[j]
        if is_simple:
            # Already within 60 s of the estimate at start: corrected at once.
            while e < w and t + e - SIMPLE_MARGIN_S <= t and run[j] > e - SIMPLE_MARGIN_S:
                e = min(e + SIMPLE_STEP_S, w)
                ncorr[j] += 1
        if e != est[j]:
            # Not the estimate it was admitted with (re-predicted at start, or corrected at
            # once): the shadow and extra kept from this pass no longer equal a
            # recomputation, so the next instant the model passes at gets a full pass.
            restale = True
        est[j] = e
        est_end[j] = t + e
        insort(running, (t + e, j))
        free -= procs[j]
        heappush(ends, (t + run[j], j))
        if not deferred:
            schedule_correction(j)
        if period:
            queued_by_user[users[j]].remove(j)

    def set_estimate(j: int, e: int) -> Tuple[int, int]:
        old = est_end[j]
        k = bisect_left(running, (old, j))
        del running[k]
        est[j] = e
        new = start[j] + e
        est_end[j] = new
        insort(running, (new, j))
        return old, new

    def blocked_shadow(t: int, head: int) -> Tuple[int, int]:
        # Shadow time and extra processors of a head that does not fit now (and, in
        # shadow_job, the running job whose estimated end completes what the head needs).
        nonlocal shadow_job
        need = procs[head] - free
        acc = 0
        sh = t
        k = 0
        nrun = len(running)
        while k < nrun:
            e, r = running[k]
            acc += procs[r]
            k += 1
            if acc >= need:
                sh = e if e > t else t
                shadow_job = r
                break
        while k < nrun and running[k][0] <= sh:
            acc += procs[running[k][1]]
            k += 1
        return sh, free + acc - procs[head]

    def pass_depth1(t: int, first: int) -> None:
        # One EASY pass; ``first`` > 0: only queue[first:] is new since a pass whose shadow
        # and extra still hold. Also keeps, over the candidates left that fit the free
        # processors (a superset), the shortest estimate and the fewest processors.
        nonlocal free, shadow, extra, min_est, min_p
        if first == 0:
            min_est = min_p = inf
        q = queue
        if first == 0:
            while q and procs[q[0]] <= free:
                start_job(q[0], t)
                del q[0]
            if not q:
                shadow = -1.0
                return
            head = q[0]
            sh, ex = blocked_shadow(t, head)
            if reservation[head] < 0:
                reservation[head] = sh
            first = 1
        else:
            sh = int(shadow)
            ex = extra
        if free > 0 and first < len(q):
            if sjbf:
                cands = sorted(q[first:], key=lambda j: (est[j], j))
                started = []
                for j in cands:
                    p = procs[j]
                    if p <= free:
                        if t + est[j] <= sh:
                            started.append(j)
                            start_job(j, t)
                        elif p <= ex:
                            ex -= p
                            started.append(j)
                            start_job(j, t)
                        else:
                            if est[j] < min_est:
                                min_est = est[j]
                            if p < min_p:
                                min_p = p
                        if free == 0:
                            break
                if started:
                    gone = set(started)
                    q[first:] = [j for j in q[first:] if j not in gone]
            else:
                k = first
                while k < len(q):
                    j = q[k]
                    p = procs[j]
                    if p <= free:
                        if t + est[j] <= sh:
                            start_job(j, t)
                            del q[k]
                            if free == 0:
                                break
                            continue
                        if p <= ex:
                            ex -= p
                            start_job(j, t)
                            del q[k]
                            if free == 0:
                                break
                            continue
                        if est[j] < min_est:
                            min_est = est[j]
                        if p < min_p:
                            min_p = p
                    k += 1
        shadow = sh
        extra = ex

    def pass_depth(t: int) -> None:
        # Backfilling with up to backfill_depth reservations on the availability profile.
        nonlocal free, shadow
        q = queue
        while q and procs[q[0]] <= free:
            start_job(q[0], t)
            del q[0]
        if not q:
            shadow = -1.0
            return
        # Profile: breakpoint times and processors free from each time on.
        times = [t]
        frees = [free]
        for e, r in running:
            if e <= times[-1]:
                frees[-1] += procs[r]
            else:
                times.append(e)
                frees.append(frees[-1] + procs[r])

        def occupy(s: int, d: int, p: int) -> None:
            end = s + d
            for x in (s, end):
                k = bisect_left(times, x)
                if k == len(times) or times[k] != x:
                    times.insert(k, x)
                    frees.insert(k, frees[k - 1])
            k = bisect_left(times, s)
            while k < len(times) and times[k] < end:
                frees[k] -= p
                k += 1

        resv: List[List[int]] = []  # [shadow, extra]
        order = list(q)
        rest: List[int] = []
        started: Set[int] = set()
        for idx, j in enumerate(order):
            if len(resv) >= backfill_depth:
                rest = order[idx:]
                break
            p = procs[j]
            d = est[j]
            if p <= free and all(t + d <= s or p <= x for s, x in resv):
                for rv in resv:
                    if t + d > rv[0]:
                        rv[1] -= p
                occupy(t, max(d, 1), p)
                start_job(j, t)
                started.add(j)
                continue
            # Reserve: earliest breakpoint from which p processors stay free for d seconds.
            for k in range(len(times)):
                s = times[k]
                m = k
                ok = True
                while m < len(times) and (m == k or times[m] < s + max(d, 1)):
                    if frees[m] < p:
                        ok = False
                        break
                    m += 1
                if ok:
                    break
            occupy(s, max(d, 1), p)
            k = bisect_left(times, s)
            resv.append([s, min(frees[k:])])
            if reservation[j] < 0:
                reservation[j] = s
        if sjbf:
            rest.sort(key=lambda j: (est[j], j))
        for j in rest:
            if free == 0:
                break
            p = procs[j]
            d = est[j]
            if p <= free and all(t + d <= s or p <= x for s, x in resv):
                for rv in resv:
                    if t + d > rv[0]:
                        rv[1] -= p
                start_job(j, t)
                started.add(j)
        if started:
            q[:] = [j for j in q if j not in started]
        shadow = float(resv[0][0]) if resv else -1.0

    def compute_next_cross(t: int) -> float:
        # Depth 1: the first instant a correction moves an estimated end past the shadow
        # (until then corrections change no decision and are applied lazily).
        #
        # Tracking: when the job whose end is the shadow is corrected under pbs, the shadow
        # moves with it (now + its increment) and extra stays, until its end reaches the next
        # running job's; if no candidate of the last scan could start then (shortest
        # estimate > increment, fewest processors > extra), those passes are no-ops too.
        nonlocal track
        track = -1
        if shadow < 0:
            return inf
        limit = shadow
        dj = shadow_job
        if (
            is_pbs
            and _TRACK
            and dj >= 0
            and start[dj] >= 0
            and est_end[dj] == shadow
            and min_p > extra
            and min_est > max(orig[dj], 1)
        ):
            if deferred:
                take_due(t)  # equal ends and the next end, as they are now
            lo = bisect_left(running, (est_end[dj], -1))
            hi = bisect_left(running, (est_end[dj], n))
            if hi - lo == 1:
                track = dj
                limit = running[hi][0] if hi < len(running) else inf
        best = inf
        for e, j in running:
            if e > shadow:
                break
            if j == track:
                # Reaching the next end (not only passing it) adds that job to extra.
                c = crossing(j, limit - 1) if limit < inf else inf
            elif is_pbs:  # crossing(j, shadow), inlined
                st = start[j]
                if st + wall[j] <= shadow:
                    continue
                inc = orig[j] if orig[j] > 1 else 1
                c = e + int((shadow - e) // inc) * inc
                if c >= st + run[j]:
                    continue
            else:
                c = crossing(j, shadow)
            if c < best:
                best = c
        if best < inf and queue:
            # Many short pbs increments (a 1-second estimate of a long job) cross often;
            # skip windows in which provably no pass could start a job.
            bound = min(submit[a] if a < n else inf, ends[0][0] if ends else inf, next_refresh)
            if best < bound:
                ok = noop_until(t, bound - 1)
                if ok > best:
                    return ok
        return best

    def virtual_end(j: int, e_end: int, when: float) -> int:
        # Running job j's estimated end after the corrections due by ``when``.
        e = est[j]
        st = start[j]
        w = wall[j]
        limit = min(when, st + run[j] - 1)
        if e >= w or step_time(j, e) > limit:
            return e_end
        if is_pbs:
            inc = max(orig[j], 1)
            m = min(int((limit - st - e) // inc) + 1, -(-(w - e) // inc))
            return st + min(e + m * inc, w)
        i = ncorr[j]
        while e < w and step_time(j, e) <= limit:
            i += 1
            e = next_estimate(j, e, i)
        return st + e

    def gap_bound(t: int, need: int) -> float:
        # G >= S(t') - t' for every t' >= t until the next end, arrival or refresh, where
        # S(t') is the blocked head's shadow then. A running job's estimated end at t' is
        # at most max(e, t' + B) (e: its end now; B: the most a correction can put its end
        # past the instant it happens: the increment under pbs, 1 h + 60 s under simple,
        # unbounded otherwise) and at most start + walltime; minus t', that bound never
        # grows with t'. The jobs that end first now hold the head's need; the largest of
        # their bounds bounds S(t') - t'.
        acc = 0
        gap = 0
        for e, j in running:
            if is_pbs:
                b = t + max(orig[j], 1)
            elif is_simple:
                b = t + SIMPLE_STEP_S + SIMPLE_MARGIN_S
            else:
                b = start[j] + wall[j]
            if b < e:
                b = e
            w = start[j] + wall[j]
            if w < b:
                b = w
            if b > gap:
                gap = b
            acc += procs[j]
            if acc >= need:
                return gap - t
        return inf

    def noop_until(t: int, last: float) -> int:
        # The latest instant T <= last such that no pass in [t, T] can start a job, with
        # nothing but corrections happening: estimated ends only grow, so the shadow
        # at any such instant is at most S_T (the shadow with the ends due by T), and extra
        # at most the processors of jobs ending by S_T now. A candidate backfills by its
        # estimate at t' only if t' + min_est <= S(t') <= t' + G (gap_bound): never when
        # min_est > G; then extra alone can admit one, and only once the jobs ending by
        # t' + G now hold min_p processors.
        head = queue[0]
        need = procs[head] - free
        margin = SIMPLE_MARGIN_S if is_simple else 0
        ok = t
        gap = gap_bound(t, need)
        if min_est > gap:
            x = free - procs[head]
            reach = inf
            for e, j in running:
                x += procs[j]
                if x >= min_p:
                    reach = e - gap
                    break
            if reach - 1 >= last:
                return int(last)
            if reach - 1 > t:
                ok = int(reach - 1)
        d = 256
        while True:
            cand = min(t + d, last)
            if cand <= ok:
                if d > last - t:
                    return ok
                d *= 4
                continue
            # Only the ends due by cand move; the others keep their order in running.
            k = bisect_right(running, (cand + margin, n))
            if is_pbs:  # virtual_end, inlined
                vends = []
                for e, j in running[:k]:
                    st = start[j]
                    w = st + wall[j]
                    lim = st + run[j] - 1
                    if cand < lim:
                        lim = int(cand)
                    if e < w and e <= lim:
                        inc = orig[j] if orig[j] > 1 else 1
                        e += (int((lim - e) // inc) + 1) * inc
                        if e > w:
                            e = w
                    vends.append((e, procs[j]))
                vends.sort()
            else:
                vends = sorted((virtual_end(j, e, cand), procs[j]) for e, j in running[:k])
            acc = 0
            s_t = inf
            i = 0
            for e, j in running[k:]:
                while i < k and vends[i][0] <= e:
                    acc += vends[i][1]
                    if acc >= need:
                        s_t = vends[i][0]
                        break
                    i += 1
                if s_t < inf:
                    break
                acc += procs[j]
                if acc >= need:
                    s_t = e
                    break
            else:
                while i < k:
                    acc += vends[i][1]
                    if acc >= need:
                        s_t = vends[i][0]
                        break
                    i += 1
            if s_t == inf or (t + min_est <= s_t and min_est <= gap):
                return ok
            x_max = free - procs[head]
            for e, j in running:
                if e > s_t:
                    break
                x_max += procs[j]
            if min_p <= x_max:
                return ok
            ok = int(cand)
            d *= 4

    while a < n or ends:
        t_arr = submit[a] if a < n else inf
        t_next = ends[0][0] if ends else inf
        if lazy_corrections:
            t_corr = inf
        elif backfill_depth == 1 and not _FULL:
            t_corr = next_cross
            if restale and deferred:
                t_corr = min(t_corr, next_due())
            elif restale:
                # The next instant the model has a pass at: also the next correction.
                while corr and (
                    start[corr[0][1]] + run[corr[0][1]] <= corr[0][0]
                    or step_time(corr[0][1], est[corr[0][1]]) != corr[0][0]
                ):
                    heappop(corr)
                if corr and corr[0][0] < t_corr:
                    t_corr = corr[0][0]
        else:
            t_corr = corr[0][0] if corr else inf
        t = int(min(t_arr, t_next, t_corr, next_refresh))
        full = _FULL or restale
        moved = t == t_corr  # a correction may move the shadow
        # 1. ends
        ended = False
        while ends and ends[0][0] == t:
            _, j = heappop(ends)
            advance(j, t - 1)  # count the corrections before the end
            free += procs[j]
            k = bisect_left(running, (est_end[j], j))
            del running[k]
            on_end(j, t)
            ended = True
            if period and queued_by_user.get(users[j]):
                dirty.add(users[j])
                if next_refresh == inf:
                    next_refresh = -(-t // period) * period
        if ended:
            full = True
        # 2. corrections due by now (taken lazily, in closed form for pbs). Depth 1: pbs
        # corrections are taken only when a pass reads the running jobs' ends (deferred,
        # see take_pbs_corrections); the others not while the queue stays empty (no pass
        # reads an estimate; an ending job counts its own).
        if deferred:
            if track >= 0:
                take_due(t)
        elif queue or a < n and submit[a] == t or backfill_depth != 1 or lazy_corrections or _FULL:
            if is_pbs and take_pbs_corrections(t) and lazy_corrections:
                full = True  # no crossing events: the next pass recomputes everything
            while corr and corr[0][0] <= t:
                when, j = heappop(corr)
                if start[j] + run[j] <= t or step_time(j, est[j]) != when:
                    continue  # ended, or already advanced
                advance(j, t)
                schedule_correction(j)
                if lazy_corrections:
                    full = True  # no crossing events: the next pass recomputes everything
        if track >= 0:
            shadow = float(est_end[track])  # the shadow moves with the tracked job
        # 2b. refresh
        if next_refresh == t:
            next_refresh = inf
            assert refresh is not None
            for user in sorted(dirty):
                for j in queued_by_user.get(user, ()):
                    new_e = source.on_refresh(j, t)
                    diff = abs(new_e - est[j])
                    if diff >= refresh.min_s and diff * 100.0 > refresh.pct * est[j]:
                        est[j] = new_e
                        refresh_changes += 1
                        full = True
            dirty.clear()
        # 3. arrivals
        first_new = len(queue)
        while a < n and submit[a] == t:
            est[a] = on_submit(a, t)
            queue.append(a)
            if period:
                queued_by_user.setdefault(users[a], []).append(a)
            a += 1
        # 4. one scheduling pass
        if not queue:
            shadow = -1.0
            next_cross = inf
            restale = False
            continue
        if backfill_depth == 1:
            if deferred and (full or moved or shadow < 0):
                take_due(t)  # the pass reads the ends
            if moved and not full and shadow >= 0:
                # Queue, free processors and head unchanged: no job can start unless the new
                # shadow or extra admits the best candidate of the last scan.
                sh, ex = blocked_shadow(t, queue[0])
                if t + min_est > sh and min_p > ex:
                    shadow = sh
                    extra = ex
                else:
                    full = True
            if full or shadow < 0:
                passes += 1
                restale = False
                pass_depth1(t, 0)
            elif first_new < len(queue):
                passes += 1
                pass_depth1(t, first_new)
            elif not moved:
                continue
            next_cross = compute_next_cross(t)
            if deferred and restale:
                take_due(t)  # the next instant is the next correction
        else:
            passes += 1
            pass_depth(t)

    return SimResult(
        source=source.name,
        correction=correction,
        procs_total=procs_total,
        start=start,
        corrections=ncorr,
        reservation=reservation,
        refresh_changes=refresh_changes,
        passes=passes,
    )


# ---------------------------------------------------------------------------------------
# Metrics


class Stats(NamedTuple):
    jobs: int
    wait_mean_h: Optional[float]
    wait_median_h: Optional[float]
    wait_p95_h: Optional[float]
    bsld_mean: Optional[float]
    bsld_median: Optional[float]
    bsld_p95: Optional[float]


def _pct(sorted_values: Sequence[float], q: float) -> float:
    # Linear interpolation between closest ranks (numpy's default).
    n = len(sorted_values)
    pos = (n - 1) * q
    lo = int(math.floor(pos))
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def stats(waits: Sequence[int], bslds: Sequence[float]) -> Stats:
    n = len(waits)
    if n == 0:
        return Stats(0, None, None, None, None, None, None)
    w = sorted(waits)
    b = sorted(bslds)
    return Stats(
        n,
        sum(w) / n / 3600.0,
        _pct(w, 0.5) / 3600.0,
        _pct(w, 0.95) / 3600.0,
        sum(b) / n,
        _pct(b, 0.5),
        _pct(b, 0.95),
    )


def job_outcomes(work: Workload, result: SimResult) -> Tuple[List[int], List[float]]:
    """Per job: wait (s) and bounded slowdown (10-minute bound)."""
    waits = [s - sub for s, sub in zip(result.start, work.submit)]
    bslds = [max(1.0, (w + r) / max(r, BSLD_BOUND_S)) for w, r in zip(waits, work.run)]
    return waits, bslds


def summarize(
    work: Workload, result: SimResult, source: Optional[EstimateSource] = None
) -> Dict[str, Any]:
    """Metrics of one simulation as a JSON-ready dict.

    :param source: the estimate source simulated: ``calibrated`` adds its target and the
        under-estimate rate it achieved (:meth:`CalibratedSource.target_report`)
    """
    waits, bslds = job_outcomes(work, result)
    classes = [runtime_class(r) for r in work.run]
    by_class = {}
    for cls, _limit in CLASSES:
        idx = [k for k, c in enumerate(classes) if c == cls]
        by_class[cls] = stats([waits[k] for k in idx], [bslds[k] for k in idx])._asdict()
    n = len(waits)
    if n:
        first = min(work.submit)
        last = max(s + r for s, r in zip(result.start, work.run))
        span = last - first
        work_ps = sum(p * r for p, r in zip(work.procs, work.run))
        util = work_ps / (result.procs_total * span) if span > 0 else None
    else:
        span = 0
        util = None
    obj: Dict[str, Any] = stats(waits, bslds)._asdict()
    obj.update(
        {
            "utilization": util,
            "makespan_h": span / 3600.0,
            "corrections": sum(result.corrections),
            "jobs_corrected": sum(1 for c in result.corrections if c),
            "refresh_changes": result.refresh_changes,
            "by_class": by_class,
        }
    )
    if isinstance(source, CalibratedSource):
        obj.update(source.target_report())
    return obj


def _fmt(value: Optional[float], spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _rel(value: Optional[float], base: Optional[float]) -> str:
    if value is None or not base:
        return "-"
    return format(100.0 * (value - base) / base, "+.1f")


def format_table(report: Dict[str, Any]) -> str:
    """Render one trace's report (``sources`` -> summarize() dicts) as text."""
    # As evaluate's table says it: the skip counts by reason after the total.
    why = ", ".join(f"{k} {v}" for k, v in sorted(report.get("skipped_by_reason", {}).items()))
    lines = [
        "source: {}".format(report["source"]),
        "machine: {} processors   jobs: {}   skipped: {}   correction: {}   "
        "backfill depth: {}{}{}".format(
            report["procs"],
            report["jobs"],
            "{}{}".format(report["skipped"], f" ({why})" if why else ""),
            report["correction"],
            report["backfill_depth"],
            "   SJBF" if report["sjbf"] else "",
            "   refresh every {} min".format(report["refresh_every_min"])
            if report.get("refresh_every_min")
            else "",
        ),
        "",
        "{:<17}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>7}{:>12}".format(
            "wait in hours",
            "jobs",
            "mean",
            "median",
            "p95",
            "vs usr%",
            "bsld",
            "vs usr%",
            "bsld95",
            "util",
            "corrections",
        ),
    ]
    sources = report["sources"]
    base = sources.get(BASELINE)
    groups = [("all jobs", None)] + [
        ("short (<= 2 h)", "short"),
        ("medium (2-24 h]", "medium"),
        ("long (> 24 h)", "long"),
    ]
    for title, cls in groups:
        lines.append(title)
        for name, obj in sources.items():
            m = obj if cls is None else obj["by_class"][cls]
            b = None if base is None else (base if cls is None else base["by_class"][cls])
            lines.append(
                "  {:<15}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>7}{:>12}".format(
                    name,
                    m["jobs"],
                    _fmt(m["wait_mean_h"], ".2f"),
                    _fmt(m["wait_median_h"], ".2f"),
                    _fmt(m["wait_p95_h"], ".2f"),
                    _rel(m["wait_mean_h"], b["wait_mean_h"] if b else None),
                    _fmt(m["bsld_mean"], ".2f"),
                    _rel(m["bsld_mean"], b["bsld_mean"] if b else None),
                    _fmt(m["bsld_p95"], ".1f"),
                    _fmt(obj["utilization"], ".3f") if cls is None else "",
                    str(obj["corrections"]) if cls is None else "",
                ).rstrip()
            )
    lines.append("")
    lines.append(
        "makespan (h): "
        + "   ".join("{} {:.1f}".format(k, v["makespan_h"]) for k, v in sources.items())
    )
    for name, obj in sources.items():
        if "target" in obj:  # calibrated: its target and the rate achieved, as evaluate's
            lines.append(f"{name}: {target_text(obj)} (estimates the jobs started with)")
    if report.get("refresh_every_min"):
        lines.append(
            "refresh changes: "
            + "   ".join("{} {}".format(k, v["refresh_changes"]) for k, v in sources.items())
        )
    return "\n".join(lines) + "\n"
