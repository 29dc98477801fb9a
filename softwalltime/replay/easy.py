"""The FCFS + EASY simulation of :mod:`.simulate`, as one state and its small steps (pure).

:class:`Easy` holds a simulation's state; each step of the event loop (:meth:`Easy.run`) and
each part of a scheduling pass is a method that can be driven alone:

- **the instant** (:meth:`Easy.next_instant`): the next arrival, end, refresh or correction
  that can change a decision;
- **ends, corrections, refresh, arrivals** (:meth:`Easy.end_jobs`, :meth:`Easy.correct`,
  :meth:`Easy.refresh_estimates`, :meth:`Easy.arrive`), in that order at equal times;
- **the pass** (:meth:`Easy.schedule`): :meth:`Easy.pass_depth1` (EASY: the blocked head's
  shadow time and extra processors, :meth:`Easy.blocked_shadow`) or :meth:`Easy.pass_depth`
  (``backfill_depth`` reservations on the availability profile);
- **the shortcuts** of depth 1: corrections are taken in closed form only when a pass reads
  the running jobs' ends (:meth:`Easy.take_due`), the next instant a correction can change
  a decision is computed (:meth:`Easy.compute_next_cross`), and windows in which provably no job can
  start are skipped (:meth:`Easy.noop_until`, :meth:`Easy.gap_bound`).

The correction rules themselves are :mod:`.corrections` (the hottest paths take the ``pbs``
step with :func:`.corrections.pbs_steps`, millions of times on a large trace), and tests
hold the shortcuts equal to a pass at every instant (``every_instant``) and to a naive
reference simulator.
"""

from __future__ import annotations

import bisect
import copy
import heapq
from typing import Dict, List, NamedTuple, Optional, Set, Tuple

from . import corrections as rules
from .profile import Profile
from .sim_workload import SimWorkload
from .sources import EstimateSource

_INF = float("inf")
_NO_TOP = 1 << 62  # no top job yet: every end is before its start


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


_STATE = (  # every attribute of an Easy (its __slots__; copy() copies them all)
    "backfill_depth",
    "correction",
    "corrections_due",
    "deferred",
    "dirty",
    "ends",
    "est",
    "est_end",
    "every_instant",
    "extra",
    "free",
    "is_pbs",
    "is_simple",
    "lazy",
    "margin",
    "min_est",
    "min_p",
    "n",
    "ncorr",
    "next_arrival",
    "next_cross",
    "next_refresh",
    "passes",
    "period",
    "procs",
    "procs_total",
    "queue",
    "queued_by_user",
    "refresh",
    "refresh_changes",
    "reservation",
    "restale",
    "run_s",
    "running",
    "shift",
    "shadow",
    "shadow_job",
    "sjbf",
    "source",
    "start",
    "start_est",
    "submit",
    "track",
    "track_shadow",
    "wall",
    "work",
)
_SHARED = ("work", "source", "refresh", "submit", "run_s", "wall", "procs")  # never changed


class Easy:
    """One simulation: FCFS + EASY backfilling with the estimates of ``source``.

    ``lazy_corrections``: corrections get no scheduling pass of their own; they are applied
    (in closed form) when a pass happens for an end or an arrival, as PBS's scheduler
    extends soft walltimes when it runs a cycle. ``track_shadow`` and ``every_instant`` turn
    shortcuts off (tests): the shadow that moves with the job it waits for, and every one
    (each correction an event, a full pass at every instant).
    """

    __slots__ = _STATE

    def __init__(
        self,
        work: SimWorkload,
        source: EstimateSource,
        procs_total: int,
        correction: str = rules.PBS,
        backfill_depth: int = 1,
        sjbf: bool = False,
        refresh: Optional[Refresh] = None,
        lazy_corrections: bool = False,
        track_shadow: bool = True,
        every_instant: bool = False,
        bind: bool = True,
    ) -> None:
        """Long because mypyc compiles ``Easy`` with fixed slots (``_STATE``): every one is
        given its first value here, a line each, and each option above is a slot the event
        loop reads (``simulate``'s switches and the tests' shortcuts off), kept one by one
        so that the compiled loop reads a native attribute, not a settings object."""
        n = len(work.submit)
        self.n = n
        self.work = work
        self.source = source
        self.procs_total = procs_total
        self.correction = correction
        self.backfill_depth = backfill_depth
        self.sjbf = sjbf
        self.refresh = refresh
        self.lazy = lazy_corrections
        self.track_shadow = track_shadow
        self.every_instant = every_instant
        self.submit = work.submit
        self.run_s = work.run
        self.wall = work.wall
        self.procs = work.procs
        self.is_pbs = correction == rules.PBS
        self.is_simple = correction == rules.SIMPLE
        self.margin = rules.margin(correction)
        # Depth 1, pbs, corrections as events: corrections are taken only when a pass reads
        # the running jobs' ends (take_due).
        self.deferred = (
            self.is_pbs and backfill_depth == 1 and not lazy_corrections and not every_instant
        )

        self.est = [0] * n  # queued: submit-time estimate; running: current estimate
        self.start_est = [0] * n  # estimate at start
        self.est_end = [0] * n
        self.start = [-1] * n
        self.ncorr = [0] * n
        self.reservation = [-1] * n
        self.queue: List[int] = []
        # The running jobs, sorted by estimated end then job, each as one int key
        # (end << shift | job; see key): ints compare and bisect without tuples.
        self.shift = max(n.bit_length(), 1)
        self.running: List[int] = []
        self.ends: List[Tuple[int, int]] = []  # heap (end, job)
        self.corrections_due: List[Tuple[int, int]] = []  # heap (correction time, job)
        self.free = procs_total
        self.next_arrival = 0  # the next job to arrive
        self.passes = 0

        # Refresh
        self.period = refresh.every_s if refresh is not None and source.refreshable else 0
        self.queued_by_user: Dict[str, List[int]] = {}
        self.dirty: Set[str] = set()
        self.next_refresh: float = _INF
        self.refresh_changes = 0

        # After the last pass (depth 1): the blocked head's shadow, the extra processors
        # left, and over the candidates left that fit the free processors, the shortest
        # estimate and the fewest processors.
        self.shadow: float = -1.0  # -1: no blocked head (queue empty after the pass)
        self.extra = 0
        self.min_est: float = _INF
        self.min_p: float = _INF
        self.next_cross: float = _INF
        self.restale = False  # a job started with another estimate than it was admitted with
        self.track = -1  # the running job the shadow moves with (see next_cross)
        self.shadow_job = -1  # the running job whose end is the shadow (blocked_shadow)
        if bind:  # False: a copy, whose source is bound already
            source.bind(work)

    def copy(self) -> Easy:
        """A copy of this state that steps on alone (tests); it shares the workload and the
        source (give it another one if it will start jobs)."""
        other = Easy(self.work, self.source, self.procs_total, bind=False)
        for name in _STATE:
            value = getattr(self, name)
            if name not in _SHARED:
                value = copy.deepcopy(value)
            setattr(other, name, value)
        return other

    # -----------------------------------------------------------------------------------
    # The event loop

    def run(self) -> SimResult:
        """Simulate every job; the starts, corrections and reservations."""
        n = self.n
        ends = self.ends
        step = self.step
        while self.next_arrival < n or ends:
            step()
        source = self.source
        return SimResult(
            source=source.name,
            correction=self.correction,
            procs_total=self.procs_total,
            start=self.start,
            corrections=self.ncorr,
            reservation=self.reservation,
            refresh_changes=self.refresh_changes,
            passes=self.passes,
        )

    def step(self) -> int:
        """Move to the next instant and do what happens then (ends, corrections, refresh,
        arrivals, one pass); returns the instant. A job must be left to arrive or to end."""
        ends = self.ends
        t, t_corr = self.next_instant()
        full = self.every_instant or self.restale
        moved = t == t_corr  # a correction may move the shadow
        if ends and ends[0][0] == t:
            self.end_jobs(t)
            full = True
        # Step 2, corrections: deferred ones only for a tracked shadow (see correct).
        if self.deferred:
            if self.track >= 0:
                self.take_due(t)
        else:
            due = self.corrections_due
            if due and due[0][0] <= t and self.correct(t):
                full = True
        if self.track >= 0:
            self.shadow = float(self.est_end[self.track])  # it moves with the tracked job
        if self.next_refresh == t and self.refresh_estimates(t):
            full = True
        queue = self.queue
        first_new = len(queue)
        arrival = self.next_arrival
        if arrival < self.n and self.submit[arrival] == t:
            self.arrive(t)
        if not queue:
            self.shadow = -1.0
            self.next_cross = _INF
            self.restale = False
        elif self.backfill_depth == 1:
            self.schedule(t, full, moved, first_new)
        else:
            self.passes += 1
            self.pass_depth(t)
        return t

    def next_instant(self) -> Tuple[int, float]:
        """The next instant the model passes at, and the correction instant among its
        candidates (an arrival, an end, a refresh, or a correction that can change a
        decision: each one with ``every_instant``; at depth 1, a crossing of the shadow)."""
        arrival = self.next_arrival
        t_arr = self.submit[arrival] if arrival < self.n else _INF
        t_next = self.ends[0][0] if self.ends else _INF
        if self.lazy:
            t_corr = _INF
        elif self.backfill_depth == 1 and not self.every_instant:
            t_corr = self.next_cross
            if self.restale and self.deferred:
                t_corr = min(t_corr, self.next_due())
            elif self.restale:
                # The next instant the model has a pass at: also the next correction.
                t_corr = min(t_corr, self.next_correction())
        else:
            due = self.corrections_due
            t_corr = due[0][0] if due else _INF
        return int(min(t_arr, t_next, t_corr, self.next_refresh)), t_corr

    def end_jobs(self, t: int) -> None:
        """Step 1: the jobs that end at ``t`` free their processors and teach the source."""
        ends = self.ends
        running = self.running
        procs = self.procs
        users = self.work.user
        on_end = self.source.on_end
        period = self.period
        while ends and ends[0][0] == t:
            _, j = heapq.heappop(ends)
            self.advance(j, t - 1)  # count the corrections before the end
            self.free += procs[j]
            del running[bisect.bisect_left(running, self.key(self.est_end[j], j))]
            on_end(j, t)
            if period and self.queued_by_user.get(users[j]):
                self.dirty.add(users[j])
                if self.next_refresh == _INF:
                    self.next_refresh = float(-(-t // period) * period)

    def correct(self, t: int) -> bool:
        """Step 2: the corrections due by ``t``, taken lazily (in closed form for pbs); not
        while the queue stays empty (no pass reads an estimate; an ending job counts its
        own). True when the next pass must recompute everything (lazy corrections: no
        crossing events). Deferred corrections (depth 1, pbs) are not taken here but by
        :meth:`take_due`, when a pass reads the running jobs' ends or the shadow is
        tracked."""
        arrival = self.next_arrival
        arriving = arrival < self.n and self.submit[arrival] == t
        if not (
            self.queue or arriving or self.backfill_depth != 1 or self.lazy or self.every_instant
        ):
            return False
        full = False
        if self.is_pbs and self.take_pbs_corrections(t) and self.lazy:
            full = True
        due = self.corrections_due
        start = self.start
        run = self.run_s
        while due and due[0][0] <= t:
            when, j = heapq.heappop(due)
            if start[j] + run[j] <= t or self.step_time(j, self.est[j]) != when:
                continue  # ended, or already advanced
            self.advance(j, t)
            self.schedule_correction(j)
            if self.lazy:
                full = True
        return full

    def refresh_estimates(self, t: int) -> bool:
        """Step 2b: queued jobs of users with newly ended jobs are predicted again; True if
        an estimate changed."""
        refresh = self.refresh
        assert refresh is not None
        self.next_refresh = _INF
        est = self.est
        changed = False
        for user in sorted(self.dirty):
            for j in self.queued_by_user.get(user, ()):
                new_e = self.source.on_refresh(j, t)
                diff = abs(new_e - est[j])
                if diff >= refresh.min_s and diff * 100.0 > refresh.pct * est[j]:
                    est[j] = new_e
                    self.refresh_changes += 1
                    changed = True
        self.dirty.clear()
        return changed

    def arrive(self, t: int) -> None:
        """Step 3: the jobs submitted at ``t`` join the queue with their estimate."""
        submit = self.submit
        est = self.est
        queue = self.queue
        on_submit = self.source.on_submit
        n = self.n
        arrival = self.next_arrival
        while arrival < n and submit[arrival] == t:
            est[arrival] = on_submit(arrival, t)
            queue.append(arrival)
            if self.period:
                self.queued_by_user.setdefault(self.work.user[arrival], []).append(arrival)
            arrival += 1
        self.next_arrival = arrival

    def schedule(self, t: int, full: bool, moved: bool, first_new: int) -> None:
        """Step 4 at depth 1: one pass, all of it (``full``), only over the jobs that arrived
        (queue[first_new:]) when the last pass's shadow and extra still hold, or none when
        a correction moved the shadow without admitting the best candidate of the last
        scan; then the next instant a correction can change a decision."""
        if self.deferred and (full or moved or self.shadow < 0):
            self.take_due(t)  # the pass reads the ends
        if moved and not full and self.shadow >= 0:
            # Queue, free processors and head unchanged: no job can start unless the new
            # shadow or extra admits the best candidate of the last scan.
            sh, ex = self.blocked_shadow(t, self.queue[0])
            if t + self.min_est > sh and self.min_p > ex:
                self.shadow = float(sh)
                self.extra = ex
            else:
                full = True
        if full or self.shadow < 0:
            self.passes += 1
            self.restale = False
            self.pass_depth1(t, 0)
        elif first_new < len(self.queue):
            self.passes += 1
            self.pass_depth1(t, first_new)
        elif not moved:
            return
        self.next_cross = self.compute_next_cross(t)
        if self.deferred and self.restale:
            self.take_due(t)  # the next instant is the next correction

    # -----------------------------------------------------------------------------------
    # Running jobs and their corrections

    def step_time(self, j: int, e: int) -> int:
        """When running job ``j`` with estimate ``e`` is next corrected."""
        return self.start[j] + e - self.margin

    def schedule_correction(self, j: int) -> None:
        """Note the next correction of running job ``j``, if it will outlive its estimate."""
        e = self.est[j]
        if e < self.wall[j]:
            when = self.step_time(j, e)
            if when < self.start[j] + self.run_s[j]:
                heapq.heappush(self.corrections_due, (when, j))

    def next_correction(self) -> float:
        """The next correction due (its heap's stale entries dropped)."""
        due = self.corrections_due
        start = self.start
        run = self.run_s
        while due and (
            start[due[0][1]] + run[due[0][1]] <= due[0][0]
            or self.step_time(due[0][1], self.est[due[0][1]]) != due[0][0]
        ):
            heapq.heappop(due)
        return due[0][0] if due else _INF

    def advance(self, j: int, limit: int) -> None:
        """Apply the corrections of running job ``j`` due at or before ``limit`` (and before
        the job ends)."""
        st = self.start[j]
        e = self.est[j]
        elapsed = min(limit, st + self.run_s[j] - 1) - st
        if e >= self.wall[j] or elapsed < e - self.margin:
            return  # none due (rules.extended_estimate's first test)
        e, self.ncorr[j] = rules.extended_estimate(
            self.correction, self.est[j], self.start_est[j], self.ncorr[j], self.wall[j], elapsed
        )
        if e != self.est[j]:
            self.set_estimate(j, e)

    def set_estimate(self, j: int, e: int) -> None:
        running = self.running
        del running[bisect.bisect_left(running, self.key(self.est_end[j], j))]
        self.est[j] = e
        new = self.start[j] + e
        self.est_end[j] = new
        bisect.insort(running, self.key(new, j))

    def key(self, end: int, j: int) -> int:
        """Running job ``j``'s entry in ``running`` while its estimated end is ``end``."""
        return (end << self.shift) | j

    def running_ends(self) -> List[Tuple[int, int]]:
        """``running`` decoded: (estimated end, job), sorted (tests)."""
        shift = self.shift
        mask = (1 << shift) - 1
        return [(k >> shift, k & mask) for k in self.running]

    def take_due(self, t: int) -> None:
        """Deferred: take the pbs corrections due by ``t``.

        Taken only before a pass that reads the running jobs' ends in order (a full pass, a
        moved shadow, a tracked job). Until then a due job's entry in ``running`` holds an
        end <= now: every other reader works from it in closed form (crossing, virtual_end)
        or only loosens a bound with it (gap_bound, noop_until's extra), so no decision
        changes. The due jobs are the entries with an end <= now (a job at its walltime, or
        whose next step is past its end, ends after now), so no heap."""
        running = self.running
        shift = self.shift
        after = (t + 1) << shift  # the least key of an end after t
        if not running or running[0] >= after:
            return  # none due (the common case)
        k = bisect.bisect_left(running, after)
        mask = (1 << shift) - 1
        start = self.start
        wall = self.wall
        start_est = self.start_est
        ncorr = self.ncorr
        est = self.est
        est_end = self.est_end
        taken = []
        for key in running[:k]:
            when = key >> shift
            j = key & mask
            st = start[j]
            e, m = rules.pbs_steps(when - st, start_est[j], wall[j], t - when)
            ncorr[j] += m
            est[j] = e
            est_end[j] = st + e
            taken.append(((st + e) << shift) | j)
        del running[:k]
        if k > 4:
            running.extend(taken)
            running.sort()  # two sorted runs: merged
        else:
            for x in taken:
                bisect.insort(running, x)

    def next_due(self) -> float:
        """Deferred: when the next pbs correction of a running job is due (all are > now)."""
        start = self.start
        wall = self.wall
        run = self.run_s
        shift = self.shift
        mask = (1 << shift) - 1
        for key in self.running:
            e = key >> shift
            j = key & mask
            st = start[j]
            if e < st + wall[j] and e < st + run[j]:
                return e
        return _INF

    def take_pbs_corrections(self, t: int) -> bool:
        """Step 2 under pbs (not deferred): advance() and schedule_correction() of each due
        job, inlined (millions of corrections on a large trace with short estimates). True
        if any."""
        due = self.corrections_due
        running = self.running
        start = self.start
        est = self.est
        wall = self.wall
        start_est = self.start_est
        run = self.run_s
        taken = False
        while due and due[0][0] <= t:
            when, j = heapq.heappop(due)
            st = start[j]
            e = est[j]
            end = st + run[j]
            if end <= t or st + e != when:
                continue  # ended, or already advanced
            e, m = rules.pbs_steps(e, start_est[j], wall[j], t - when)
            self.ncorr[j] += m
            del running[bisect.bisect_left(running, self.key(when, j))]
            est[j] = e
            new = st + e
            self.est_end[j] = new
            bisect.insort(running, self.key(new, j))
            if e < wall[j] and new < end:
                heapq.heappush(due, (new, j))
            taken = True
        return taken

    def crossing(self, j: int, sh: float) -> float:
        """When running job ``j``'s estimated end (now <= sh) would first move past sh."""
        return rules.crossing(
            self.correction,
            self.est[j],
            self.start_est[j],
            self.ncorr[j],
            self.wall[j],
            self.start[j],
            self.run_s[j],
            sh,
        )

    def virtual_end(self, j: int, e_end: int, when: float) -> int:
        """Running job ``j``'s estimated end (now ``e_end``) after the corrections due by
        ``when``."""
        st = self.start[j]
        limit = min(when, st + self.run_s[j] - 1)
        e, _ = rules.extended_estimate(
            self.correction,
            self.est[j],
            self.start_est[j],
            self.ncorr[j],
            self.wall[j],
            int(limit) - st,
        )
        return st + e if e != self.est[j] else e_end

    def start_job(self, j: int, t: int) -> None:
        """Start queued job ``j`` at ``t`` with the source's estimate at start."""
        self.start[j] = t
        e = self.source.on_start(j, t)
        self.start_est[j] = e
        w = self.wall[j]
        run = self.run_s[j]
        if self.is_simple:
            # Already within 60 s of the estimate at start: corrected at once.
            m = rules.SIMPLE_MARGIN_S
            while e < w and e - m <= 0 and run > e - m:
                e = min(e + rules.SIMPLE_STEP_S, w)
                self.ncorr[j] += 1
        if e != self.est[j]:
            # Not the estimate it was admitted with (re-predicted at start, or corrected at
            # once): the shadow and extra kept from this pass no longer equal a
            # recomputation, so the next instant the model passes at gets a full pass.
            self.restale = True
        self.est[j] = e
        self.est_end[j] = t + e
        bisect.insort(self.running, self.key(t + e, j))
        self.free -= self.procs[j]
        heapq.heappush(self.ends, (t + run, j))
        if not self.deferred:
            self.schedule_correction(j)
        if self.period:
            self.queued_by_user[self.work.user[j]].remove(j)

    # -----------------------------------------------------------------------------------
    # Passes

    def blocked_shadow(self, t: int, head: int) -> Tuple[int, int]:
        """Shadow time and extra processors of a head that does not fit now (and, in
        ``shadow_job``, the running job whose estimated end completes what the head
        needs)."""
        procs = self.procs
        running = self.running
        free = self.free
        need = procs[head] - free
        shift = self.shift
        mask = (1 << shift) - 1
        acc = 0
        sh = t
        k = 0
        nrun = len(running)
        while k < nrun:
            key = running[k]
            r = key & mask
            acc += procs[r]
            k += 1
            if acc >= need:
                e = key >> shift
                sh = e if e > t else t
                self.shadow_job = r
                break
        after = (sh + 1) << shift
        while k < nrun and running[k] < after:
            acc += procs[running[k] & mask]
            k += 1
        return sh, free + acc - procs[head]

    def pass_depth1(self, t: int, first: int) -> None:
        """One EASY pass; ``first`` > 0: only queue[first:] is new since a pass whose shadow
        and extra still hold. Also keeps, over the candidates left that fit the free
        processors (a superset), the shortest estimate and the fewest processors."""
        q = self.queue
        procs = self.procs
        start_job = self.start_job
        if first == 0:
            self.min_est = self.min_p = _INF
            while q and procs[q[0]] <= self.free:
                start_job(q[0], t)
                del q[0]
            if not q:
                self.shadow = -1.0
                return
            head = q[0]
            sh, ex = self.blocked_shadow(t, head)
            if self.reservation[head] < 0:
                self.reservation[head] = sh
            first = 1
        else:
            sh = int(self.shadow)
            ex = self.extra
        if self.free > 0 and first < len(q):
            if self.sjbf:
                ex = self._scan_sjbf(t, first, sh, ex)
            else:
                ex = self._scan_fcfs(t, first, sh, ex)
        self.shadow = float(sh)
        self.extra = ex

    def _scan_fcfs(self, t: int, first: int, sh: int, ex: int) -> int:
        # Backfill queue[first:] in queue order; returns the extra processors left.
        q = self.queue
        procs = self.procs
        est = self.est
        start_job = self.start_job
        min_est = self.min_est
        min_p = self.min_p
        k = first
        while k < len(q):
            j = q[k]
            p = procs[j]
            if p <= self.free:
                if t + est[j] <= sh:
                    start_job(j, t)
                    del q[k]
                    if self.free == 0:
                        break
                    continue
                if p <= ex:
                    ex -= p
                    start_job(j, t)
                    del q[k]
                    if self.free == 0:
                        break
                    continue
                if est[j] < min_est:
                    min_est = float(est[j])
                if p < min_p:
                    min_p = float(p)
            k += 1
        self.min_est = min_est
        self.min_p = min_p
        return ex

    def _scan_sjbf(self, t: int, first: int, sh: int, ex: int) -> int:
        # Backfill queue[first:] shortest estimate first; returns the extra processors left.
        q = self.queue
        procs = self.procs
        est = self.est
        cands = sorted(q[first:], key=lambda j: (est[j], j))
        started = []
        for j in cands:
            p = procs[j]
            if p <= self.free:
                if t + est[j] <= sh:
                    started.append(j)
                    self.start_job(j, t)
                elif p <= ex:
                    ex -= p
                    started.append(j)
                    self.start_job(j, t)
                else:
                    if est[j] < self.min_est:
                        self.min_est = float(est[j])
                    if p < self.min_p:
                        self.min_p = float(p)
                if self.free == 0:
                    break
        if started:
            gone = set(started)
            q[first:] = [j for j in q[first:] if j not in gone]
        return ex

    def pass_depth(self, t: int) -> None:
        """Backfilling with up to ``backfill_depth`` reservations on the availability
        profile: a job starts if the free processors over its run stay >= its own
        (:meth:`_passes`)."""
        q = self.queue
        procs = self.procs
        est = self.est
        while q and procs[q[0]] <= self.free:
            self.start_job(q[0], t)
            del q[0]
        if not q:
            self.shadow = -1.0
            return
        profile = Profile(t, self.free, [(e, procs[r]) for e, r in self.running_ends()])
        top = [_NO_TOP, 0]  # the earliest top job's start; at most the least free from it on
        shadow = -1  # the first top job's start
        order = list(q)
        rest: List[int] = []
        started: Set[int] = set()
        tops = 0
        for idx, j in enumerate(order):
            if tops >= self.backfill_depth:
                rest = order[idx:]
                break
            p = procs[j]
            d = est[j]
            if self._passes(t, p, d, profile, top):
                self._take(j, t, profile, top)
                started.add(j)
                continue
            s = profile.earliest(p, max(d, 1))
            profile.occupy(s, max(d, 1), p)
            top[0] = min(top[0], s)
            top[1] = profile.least_from(top[0])
            tops += 1
            shadow = s if shadow < 0 else shadow
            if self.reservation[j] < 0:
                self.reservation[j] = s
        if self.sjbf:
            rest.sort(key=lambda j: (est[j], j))
        for j in rest:
            if self.free == 0:
                break
            if self._passes(t, procs[j], est[j], profile, top):
                self._take(j, t, profile, top)
                started.add(j)
        if started:
            q[:] = [j for j in q if j not in started]
        self.shadow = float(shadow)

    def _passes(self, t: int, p: int, d: int, profile: Profile, top: List[int]) -> bool:
        """Whether a job of ``p`` processors and estimate ``d`` may start at ``t``: the free
        processors over ``[t, t + d)`` stay >= ``p`` on the profile with the reservations
        made so far, as PBS's ``simulate_resmin`` (simulate.cpp:1800-1802); the profile is
        looked at only past the earliest top job's start ``top[0]`` and when the bound
        ``top[1]`` does not already answer."""
        if p > self.free:
            return False
        return t + d <= top[0] or p <= top[1] or profile.holds(top[0], t + d, p)

    def _take(self, j: int, t: int, profile: Profile, top: List[int]) -> None:
        p = self.procs[j]
        d = max(self.est[j], 1)
        profile.occupy(t, d, p)
        if t + d > top[0]:
            top[1] -= p
        self.start_job(j, t)

    # -----------------------------------------------------------------------------------
    # Depth 1: when the next correction can change a decision

    def compute_next_cross(self, t: int) -> float:
        """The first instant a correction moves an estimated end past the shadow (until then
        corrections change no decision and are applied lazily).

        Tracking: when the job whose end is the shadow is corrected under pbs, the shadow
        moves with it (now + its increment) and extra stays, until its end reaches the next
        running job's; if no candidate of the last scan could start then (shortest estimate
        > increment, fewest processors > extra), those passes are no-ops too."""
        self.track = -1
        shadow = self.shadow
        if shadow < 0:
            return _INF
        dj = self.shadow_job
        limit = shadow
        if (
            self.is_pbs
            and self.track_shadow
            and dj >= 0
            and self.start[dj] >= 0
            and self.est_end[dj] == shadow
            and self.min_p > self.extra
            and self.min_est > max(self.start_est[dj], 1)
        ):
            limit = self.tracked_limit(t, dj)
        track = self.track
        running = self.running
        start = self.start
        wall = self.wall
        start_est = self.start_est
        run = self.run_s
        is_pbs = self.is_pbs
        shift = self.shift
        mask = (1 << shift) - 1
        sh = int(shadow)
        best = _INF
        for key in running:
            e = key >> shift
            if e > sh:
                break
            j = key & mask
            if j == track:
                # Reaching the next end (not only passing it) adds that job to extra.
                c = self.crossing(j, limit - 1) if limit < _INF else _INF
            elif is_pbs:  # rules.crossing under pbs, inlined
                st = start[j]
                if st + wall[j] <= sh:
                    continue
                inc = start_est[j] if start_est[j] > 1 else 1
                c = float(e + (sh - e) // inc * inc)
                if c >= st + run[j]:
                    continue
            else:
                c = self.crossing(j, shadow)
            if c < best:
                best = c
        if best < _INF and self.queue:
            # Many short pbs increments (a 1-second estimate of a long job) cross often;
            # skip windows in which provably no pass could start a job.
            arrival = self.next_arrival
            bound = min(
                self.submit[arrival] if arrival < self.n else _INF,
                self.ends[0][0] if self.ends else _INF,
                self.next_refresh,
            )
            if best < bound:
                ok = self.noop_until(t, bound - 1)
                if ok > best:
                    return ok
        return best

    def tracked_limit(self, t: int, dj: int) -> float:
        """Whether the shadow moves with running job ``dj`` (whose estimated end it is, with
        no candidate of the last scan admitted by its increment or by extra): then ``track``
        is set and the shadow moves until the next running job's end (returned); else the
        shadow itself."""
        if self.deferred:
            self.take_due(t)  # equal ends and the next end, as they are now
        running = self.running
        end = self.est_end[dj]
        lo = bisect.bisect_left(running, end << self.shift)
        hi = bisect.bisect_left(running, (end + 1) << self.shift)
        if hi - lo != 1:
            return self.shadow
        self.track = dj
        return running[hi] >> self.shift if hi < len(running) else _INF

    def gap_bound(self, t: int, need: int) -> float:
        """G >= S(t') - t' for every t' >= t until the next end, arrival or refresh, where
        S(t') is the blocked head's shadow then.

        A running job's estimated end at t' is at most max(e, t' + B) (e: its end now; B:
        :func:`.corrections.reach`, unbounded for some rules) and at most start + walltime;
        minus t', that bound never grows with t'. The jobs that end first now hold the
        head's need; the largest of their bounds bounds S(t') - t'."""
        start = self.start
        wall = self.wall
        start_est = self.start_est
        procs = self.procs
        correction = self.correction
        is_pbs = self.is_pbs
        shift = self.shift
        mask = (1 << shift) - 1
        acc = 0
        gap = 0
        for key in self.running:
            e = key >> shift
            j = key & mask
            w = start[j] + wall[j]
            if is_pbs:  # rules.reach, inlined
                b = t + (start_est[j] if start_est[j] > 1 else 1)
            else:
                step = rules.reach(correction, start_est[j])
                b = w if step is None else t + step
            if b < e:
                b = e
            if w < b:
                b = w
            if b > gap:
                gap = b
            acc += procs[j]
            if acc >= need:
                return gap - t
        return _INF

    def noop_until(self, t: int, last: float) -> int:
        """The latest instant T <= last such that no pass in [t, T] can start a job, with
        nothing but corrections happening.

        Estimated ends only grow, so the shadow at any such instant is at most S_T (the
        shadow with the ends due by T), and extra at most the processors of jobs ending by
        S_T now. A candidate backfills by its estimate at t' only if t' + min_est <= S(t') <=
        t' + G (gap_bound): never when min_est > G; then extra alone can admit one, and only
        once the jobs ending by t' + G now hold min_p processors."""
        running = self.running
        procs = self.procs
        head = self.queue[0]
        need = procs[head] - self.free
        min_est = self.min_est
        min_p = self.min_p
        shift = self.shift
        mask = (1 << shift) - 1
        ok = t
        gap = self.gap_bound(t, need)
        if min_est > gap:
            x = self.free - procs[head]
            reach = _INF
            for key in running:
                x += procs[key & mask]
                if x >= min_p:
                    reach = (key >> shift) - gap
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
            s_t = self.shadow_by(cand, need)
            if s_t == _INF or (t + min_est <= s_t and min_est <= gap):
                return ok
            x_max = self.free - procs[head]
            for key in running:
                if key >> shift > s_t:
                    break
                x_max += procs[key & mask]
            if min_p <= x_max:
                return ok
            ok = int(cand)
            d *= 4

    def shadow_by(self, cand: float, need: int) -> float:
        """The blocked head's shadow (``need`` more processors) with the corrections due by
        ``cand`` applied: only the ends due by then move; the others keep their order."""
        running = self.running
        procs = self.procs
        shift = self.shift
        mask = (1 << shift) - 1
        k = bisect.bisect_left(running, (int(cand) + self.margin + 1) << shift)  # ends by then
        if self.is_pbs:  # virtual_end, inlined
            start = self.start
            wall = self.wall
            run = self.run_s
            start_est = self.start_est
            vends = []
            for key in running[:k]:
                e = key >> shift
                j = key & mask
                st = start[j]
                w = st + wall[j]
                lim = st + run[j] - 1
                if cand < lim:
                    lim = int(cand)
                if e < w and e <= lim:
                    inc = start_est[j] if start_est[j] > 1 else 1
                    e += (int((lim - e) // inc) + 1) * inc
                    if e > w:
                        e = w
                vends.append((e, procs[j]))
            vends.sort()
        else:
            vends = sorted(
                (self.virtual_end(key & mask, key >> shift, cand), procs[key & mask])
                for key in running[:k]
            )
        acc = 0
        i = 0
        for key in running[k:]:
            e = key >> shift
            j = key & mask
            while i < k and vends[i][0] <= e:
                acc += vends[i][1]
                if acc >= need:
                    return vends[i][0]
                i += 1
            acc += procs[j]
            if acc >= need:
                return e
        while i < k:
            acc += vends[i][1]
            if acc >= need:
                return vends[i][0]
            i += 1
        return _INF
