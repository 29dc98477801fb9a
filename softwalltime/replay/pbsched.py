"""PBS's scheduling knobs, in PBS's names, as small pure units and one small event loop.

- **Job sort** (:class:`SortFormula`): PBS's ``job_sort_formula``, a Python expression over
  the job's numeric resources (``soft_walltime``, ``walltime``, ``ncpus``) and
  ``eligible_time`` (seconds eligible, i.e. waiting, with ``eligible_time_enable``); the
  highest value runs first, ties in submit order. ``fcfs`` is no formula (submit order).
- **One cycle** (:func:`schedule_cycle`): jobs are taken in sort order; one that fits now
  without delaying a reservation starts; with ``strict_ordering`` the first
  ``backfill_depth`` jobs that cannot start are *top jobs* and get a reservation on the
  availability profile (``backfill_depth`` 0: nothing passes the first blocked job);
  without it, jobs that do not fit are passed over (no reservation). A job passes a
  reservation if its *walltime* ends by it, as PBS checks it (:attr:`Policy.backfill_by`;
  ``estimate``: its soft walltime, EASY as the literature models it).
- **Estimated ends** (:func:`extended_estimate`): a running job's estimate after the
  soft-walltime extensions due by now (see :mod:`.simulate` for the rules).
- **The cycle** (:func:`simulate_pbs`): the scheduler runs on job arrivals and ends and every
  ``scheduler_iteration`` seconds; each cycle first extends the estimates of the running
  jobs found past theirs (as PBS's scheduler does), then schedules. ``correction_events``
  makes every extension an event with a cycle of its own (the model of :func:`simulate`
  and of the naive reference, which tests compare it with).
"""

from __future__ import annotations

import bisect
import functools
import heapq
import re
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from .simulate import (
    CORRECTIONS,
    SIMPLE_MARGIN_S,
    SIMPLE_STEP_S,
    EstimateSource,
    SimResult,
    Workload,
)

FCFS = "fcfs"
# Named sorts and the job_sort_formula that expresses each; the estimate is the job's
# soft_walltime, else its walltime (a job the hook left alone has soft_walltime 0 in a
# formula, hence "or walltime").
_EST = "(soft_walltime or walltime)"
FORMULAS: Dict[str, Optional[str]] = {
    FCFS: None,
    "sjf": f"-{_EST}",  # shortest estimate first
    "xfactor": f"(eligible_time + {_EST}) / {_EST}",  # largest expansion factor first
    "small": "-ncpus",  # fewest processors first
    # shortest estimate first, aged by the wait: earliest submit + estimate first, so a job
    # waits for newer ones no longer than its own estimate (bounded starvation)
    "sjfage": f"eligible_time - {_EST}",
}
DEFAULT_ITERATION_S = 600  # PBS's default scheduler_iteration
WALLTIME = "walltime"  # backfill by the walltime: PBS's rule (the default)
ESTIMATE = "estimate"  # backfill by the estimate: EASY as in the literature
BACKFILL_BY = (WALLTIME, ESTIMATE)


class SortFormula(NamedTuple):
    """A ``job_sort_formula``: ``value(est, wall, waited, ncpus)``, highest first."""

    name: str
    expression: Optional[str]
    value: Optional[Callable[[int, int, int, int], float]]
    time_dependent: bool


def _compiled(expression: str) -> Callable[[int, int, int, int], float]:
    code = compile(expression, "<job_sort_formula>", "eval")

    def value(est: int, wall: int, waited: int, ncpus: int) -> float:
        names = {
            "soft_walltime": est,
            "walltime": wall,
            "eligible_time": waited,
            "ncpus": ncpus,
        }
        try:
            return float(eval(code, {"__builtins__": {}}, names))
        except ArithmeticError:
            return 0.0  # PBS: an exception makes the value 0

    return value


def _sjf(est: int, wall: int, waited: int, ncpus: int) -> float:
    return -float(est or wall)


def _xfactor(est: int, wall: int, waited: int, ncpus: int) -> float:
    e = est or wall
    return (waited + e) / e if e else 0.0


def _small(est: int, wall: int, waited: int, ncpus: int) -> float:
    return -float(ncpus)


def _sjfage(est: int, wall: int, waited: int, ncpus: int) -> float:
    return float(waited - (est or wall))


_FAST = {"sjf": _sjf, "xfactor": _xfactor, "small": _small, "sjfage": _sjfage}


def sort_formula(spec: str) -> SortFormula:
    """A named sort (:data:`FORMULAS`) or a ``job_sort_formula`` expression.

    :raises ValueError: the expression is not valid Python or uses an unknown name
    """
    if spec == FCFS:
        return SortFormula(FCFS, None, None, False)
    expression = FORMULAS.get(spec, spec)
    assert expression is not None
    try:
        code = compile(expression, "<job_sort_formula>", "eval")
    except SyntaxError as err:
        raise ValueError(f"job_sort_formula {expression!r}: {err.msg}") from err
    unknown = set(code.co_names) - {"soft_walltime", "walltime", "eligible_time", "ncpus"}
    if unknown:
        raise ValueError(
            f"job_sort_formula {expression!r}: unknown {', '.join(sorted(unknown))} "
            "(known: soft_walltime, walltime, eligible_time, ncpus)"
        )
    value = _FAST.get(spec) or _compiled(expression)
    return SortFormula(spec, expression, value, "eligible_time" in code.co_names)


class Policy(NamedTuple):
    """PBS scheduler settings (PBS's names)."""

    job_sort_formula: str = FCFS
    backfill_depth: int = 1
    strict_ordering: bool = True
    scheduler_iteration: int = DEFAULT_ITERATION_S
    """Seconds between periodic cycles (0: cycles on events only)."""
    correction_events: bool = False
    backfill_by: str = WALLTIME
    """What must end by a top job's reservation for a job to pass it (unless it fits the
    processors left beside it): ``walltime``, as PBS 23.06's scheduler checks it
    (``check.cpp``: a job with a calendar event within its walltime is checked with its
    walltime, its *hard duration*; found by the real-server test, issue 17), or
    ``estimate``, its soft walltime (EASY backfilling as the literature models it). Soft
    walltimes place the reservations (running jobs' estimated ends) and feed the sort
    either way."""

    @property
    def name(self) -> str:
        if not self.strict_ordering:
            how = "greedy"
        elif self.backfill_depth == 0:
            how = "strict"
        else:
            how = f"bf{self.backfill_depth}"
        return f"{self.job_sort_formula}-{how}"


_HOW = re.compile(r"^(?P<sort>.+?)(?:-(?P<how>bf\d+|strict|greedy))?$")


def parse_policy(
    text: str, scheduler_iteration: int = DEFAULT_ITERATION_S, backfill_by: str = WALLTIME
) -> Policy:
    """``SORT[-bfK|-strict|-greedy]`` (e.g. ``fcfs-bf1``, ``sjf-bf4``, ``xfactor-greedy``);
    SORT is a name of :data:`FORMULAS` or a ``job_sort_formula`` expression.

    :raises ValueError: unknown sort or form, or ``backfill_by`` not in :data:`BACKFILL_BY`
    """
    if backfill_by not in BACKFILL_BY:
        raise ValueError(f"backfill_by must be one of {BACKFILL_BY}, not {backfill_by!r}")
    match = _HOW.match(text.strip())
    if match is None:
        raise ValueError(f"policy {text!r}: expected SORT, SORT-bfK, SORT-strict or SORT-greedy")
    sort, how = match.group("sort"), match.group("how") or "bf1"
    if sort not in FORMULAS and re.match(r"^\w+-", sort):
        raise ValueError(f"policy {text!r}: expected SORT, SORT-bfK, SORT-strict or SORT-greedy")
    sort_formula(sort)  # validates
    if how == "greedy":
        return Policy(sort, 0, False, scheduler_iteration, backfill_by=backfill_by)
    if how == "strict":
        return Policy(sort, 0, True, scheduler_iteration, backfill_by=backfill_by)
    return Policy(sort, int(how[2:]), True, scheduler_iteration, backfill_by=backfill_by)


def pbs_settings(policy: Policy) -> List[str]:
    """The ``qmgr`` commands and ``sched_config`` lines that express ``policy`` on PBS."""
    formula = sort_formula(policy.job_sort_formula)
    lines = []
    if formula.expression is None:
        lines.append('qmgr -c "unset sched job_sort_formula"')
    else:
        lines.append(f"qmgr -c \"set sched job_sort_formula = '{formula.expression}'\"")
        if formula.time_dependent:
            lines.append('qmgr -c "set server eligible_time_enable = True"')
    lines.append(f'qmgr -c "set server backfill_depth = {policy.backfill_depth}"')
    if policy.scheduler_iteration:
        lines.append(f'qmgr -c "set sched scheduler_iteration = {policy.scheduler_iteration}"')
    strict = "True" if policy.strict_ordering else "False"
    lines.append(f"# $PBS_HOME/sched_priv/sched_config: strict_ordering: {strict} ALL")
    return lines


# ---------------------------------------------------------------------------------------
# One cycle


class Profile:
    """Processors free from each breakpoint on (breakpoints sorted, the first is now)."""

    def __init__(self, now: int, free: int, ends: Sequence[Tuple[int, int]]) -> None:
        # ends: (estimated end, processors) of the running jobs, sorted.
        self.times = [now]
        self.frees = [free]
        for e, p in ends:
            if e <= self.times[-1]:
                self.frees[-1] += p
            else:
                self.times.append(e)
                self.frees.append(self.frees[-1] + p)

    def _point(self, x: int) -> int:
        k = bisect.bisect_left(self.times, x)
        if k == len(self.times) or self.times[k] != x:
            self.times.insert(k, x)
            self.frees.insert(k, self.frees[k - 1])
        return k

    def occupy(self, s: int, d: int, p: int) -> None:
        """Take ``p`` processors over ``[s, s + d)``."""
        if d <= 0:
            return
        end = s + d
        k = self._point(s)
        self._point(end)
        while self.times[k] < end:
            self.frees[k] -= p
            k += 1

    def earliest(self, p: int, d: int) -> int:
        """Earliest breakpoint from which ``p`` processors stay free for ``d`` seconds."""
        times, frees = self.times, self.frees
        for k, s in enumerate(times):
            m = k
            while m < len(times) and (m == k or times[m] < s + d):
                if frees[m] < p:
                    break
                m += 1
            else:
                return s
        return times[-1]  # unreachable when p fits the machine: the last point is all free

    def least_from(self, s: int) -> int:
        return min(self.frees[bisect.bisect_left(self.times, s) :])


def schedule_cycle(
    now: int,
    order: Sequence[int],
    free: int,
    ends: Sequence[Tuple[int, int]],
    procs: Sequence[int],
    est: Sequence[int],
    backfill_depth: int,
    strict_ordering: bool,
    on_start: Optional[Callable[[int], int]] = None,
    hard: Optional[Sequence[int]] = None,
) -> Tuple[List[int], List[Tuple[int, int]]]:
    """One scheduling cycle: the jobs of ``order`` (queued, sorted) that start ``now``, and
    the top jobs' reservations ``(job, start)``.

    A job starts if it fits the free processors and, for each reservation ``(s, x)`` made so
    far, it ends by ``s`` or needs at most ``x`` processors (then taken from ``x``); ``x``
    is the least number of processors free from ``s`` on once the top job is placed.

    :param ends: ``(estimated end, processors)`` of the running jobs, sorted
    :param on_start: called as each job starts; returns the estimate it runs with (default:
        ``est[j]``), which then holds its processors in the profile
    :param hard: the jobs' walltimes, when a job must end by a reservation by its walltime
        (:attr:`Policy.backfill_by` ``walltime``; None: by its estimate)
    """
    profile = Profile(now, free, ends)
    resv: List[List[int]] = []  # [start, extra]
    top: List[Tuple[int, int]] = []
    started: List[int] = []
    for j in order:
        p = procs[j]
        d = est[j]
        end = now + (d if hard is None else hard[j])  # by when it must be gone
        if p <= free and all(end <= s or p <= x for s, x in resv):
            for rv in resv:
                if end > rv[0]:
                    rv[1] -= p
            profile.occupy(now, d if on_start is None else on_start(j), p)
            free -= p
            started.append(j)
        elif strict_ordering:
            if len(top) >= backfill_depth:
                if backfill_depth == 0:
                    break  # strict order without backfilling: nothing passes this job
                continue
            s = profile.earliest(p, d)
            profile.occupy(s, d, p)
            resv.append([s, profile.least_from(s)])
            top.append((j, s))
        if free == 0:
            break
    return started, top


# ---------------------------------------------------------------------------------------
# Estimates of running jobs


def extended_estimate(
    correction: str, est: int, orig: int, ncorr: int, wall: int, elapsed: int
) -> Tuple[int, int]:
    """A running job's ``(estimate, corrections so far)`` after the extensions due once it
    has run ``elapsed`` seconds (the rules of :mod:`.simulate`; never past ``wall``)."""
    margin = SIMPLE_MARGIN_S if correction == "simple" else 0
    if est >= wall or elapsed < est - margin:
        return est, ncorr
    if correction == "pbs":
        inc = max(orig, 1)
        m = min((elapsed - est) // inc + 1, -(-(wall - est) // inc))
        return min(est + m * inc, wall), ncorr + m
    while est < wall and elapsed >= est - margin:
        ncorr += 1
        if correction == "simple":
            est = min(est + SIMPLE_STEP_S, wall)
        elif correction == "power":
            est = min(est + (450 << (ncorr - 1)), wall)
        else:
            est = wall
    return est, ncorr


# ---------------------------------------------------------------------------------------
# The event loop


class _Machine:
    """Running jobs: estimates, estimated ends (sorted), the end heap and the heap of
    extensions due (each running job has one entry there while it can still be extended)."""

    def __init__(self, work: Workload, procs_total: int, correction: str) -> None:
        n = len(work.submit)
        self.work = work
        self.correction = correction
        self.margin = SIMPLE_MARGIN_S if correction == "simple" else 0
        self.free = procs_total
        self.est = [0] * n
        self.orig = [0] * n
        self.ncorr = [0] * n
        self.start = [-1] * n
        self.by_end: List[Tuple[int, int]] = []  # (estimated end, job), sorted
        self.ends: List[Tuple[int, int]] = []  # heap (end, job)
        self.due: List[Tuple[int, int]] = []  # heap (next extension, job)

    def _watch(self, j: int) -> None:
        # Note when running job j is next extended, if it still runs then.
        e = self.est[j]
        if e < self.work.wall[j]:
            when = self.start[j] + e - self.margin
            if when < self.start[j] + self.work.run[j]:
                heapq.heappush(self.due, (when, j))

    def begin(self, j: int, now: int, estimate: int) -> int:
        """Start job ``j`` with ``estimate``; returns its estimate after any extension."""
        w = self.work
        self.start[j] = now
        self.orig[j] = estimate
        self.est[j] = estimate
        if self.correction == "simple":  # already within the margin at start
            self._extend(j, now)
        self.free -= w.procs[j]
        bisect.insort(self.by_end, (now + self.est[j], j))
        heapq.heappush(self.ends, (now + w.run[j], j))
        self._watch(j)
        return self.est[j]

    def _extend(self, j: int, now: int) -> bool:
        # Apply the extensions of job j due by now (the estimate only; see extend).
        w = self.work
        elapsed = min(now, self.start[j] + w.run[j] - 1) - self.start[j]
        e, c = extended_estimate(
            self.correction, self.est[j], self.orig[j], self.ncorr[j], w.wall[j], elapsed
        )
        changed = e != self.est[j]
        self.est[j], self.ncorr[j] = e, c
        return changed

    def _running(self, j: int, now: int) -> bool:
        return 0 <= self.start[j] and now < self.start[j] + self.work.run[j]

    def extend_due(self, now: int) -> bool:
        """Apply the extensions due by ``now`` (ends at ``now`` done first); True if any."""
        changed = False
        while self.due and self.due[0][0] <= now:
            _, j = heapq.heappop(self.due)
            if not self._running(j, now):
                continue
            old = self.start[j] + self.est[j]
            if self._extend(j, now):
                changed = True
                del self.by_end[bisect.bisect_left(self.by_end, (old, j))]
                bisect.insort(self.by_end, (self.start[j] + self.est[j], j))
            self._watch(j)
        return changed

    def next_extension(self, now: int) -> float:
        """When the next extension of a running job is due (inf: none before it ends)."""
        while self.due and not self._running(self.due[0][1], now):
            heapq.heappop(self.due)
        return self.due[0][0] if self.due else float("inf")

    def end_due(self, now: int) -> List[int]:
        done = []
        while self.ends and self.ends[0][0] == now:
            _, j = heapq.heappop(self.ends)
            old = self.start[j] + self.est[j]
            self._extend(j, now - 1)  # count the extensions before the end
            del self.by_end[bisect.bisect_left(self.by_end, (old, j))]
            self.free += self.work.procs[j]
            done.append(j)
        return done

    def estimated_ends(self, now: int) -> List[Tuple[int, int]]:
        p = self.work.procs
        return [(e if e > now else now, p[j]) for e, j in self.by_end]


def _order(
    queue: List[int],
    formula: SortFormula,
    now: int,
    work: Workload,
    est: Sequence[int],
    keys: Dict[int, Tuple[float, int]],
) -> List[int]:
    # The queue in job_sort_formula order (highest first, then submit order). A formula
    # that does not depend on time is evaluated once per job (in ``keys``).
    value = formula.value
    if value is None:
        return queue
    if not formula.time_dependent:
        for j in queue:
            if j not in keys:
                keys[j] = (-value(est[j], work.wall[j], 0, work.procs[j]), j)
        return sorted(queue, key=keys.__getitem__)
    return sorted(
        queue,
        key=lambda j: (-value(est[j], work.wall[j], now - work.submit[j], work.procs[j]), j),
    )


def simulate_pbs(
    work: Workload,
    source: EstimateSource,
    procs_total: int,
    policy: Policy,
    correction: str = "pbs",
    skip_idle_cycles: bool = True,
) -> SimResult:
    """Simulate PBS's scheduler with ``policy`` and the estimates of ``source``.

    ``skip_idle_cycles``: a cycle that would start nothing is skipped: no processor free,
    or nothing changed since the last cycle (no arrival, end, extension or job started
    with another estimate than it was checked with, and a sort that does not depend on
    time). Tests check this against running every cycle.

    :raises ValueError: bad parameters or a job wider than the machine
    """
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}, not {correction!r}")
    if policy.backfill_depth < 0 or policy.scheduler_iteration < 0:
        raise ValueError("backfill_depth and scheduler_iteration must be >= 0")
    if policy.backfill_by not in BACKFILL_BY:
        raise ValueError(f"backfill_by must be one of {BACKFILL_BY}, not {policy.backfill_by!r}")
    n = len(work.submit)
    if n and max(work.procs) > procs_total:
        raise ValueError("a job needs more processors than the machine has")
    formula = sort_formula(policy.job_sort_formula)
    source.bind(work)
    m = _Machine(work, procs_total, correction)
    queue: List[int] = []
    queued_est = m.est  # a queued job's estimate is its submit-time prediction
    period = policy.scheduler_iteration
    inf = float("inf")
    t = -1
    a = 0
    restarted = False
    keys: Dict[int, Tuple[float, int]] = {}
    hard = work.wall if policy.backfill_by == WALLTIME else None

    def begin(now: int, j: int) -> int:
        # A job that starts with another estimate than it was checked with (its walltime
        # when backfilling by walltime) leaves a state that an idle cycle cannot be trusted
        # to leave unchanged: the next cycle's profile frees its processors at its estimated
        # end, so a job the reservation's extra processors could not take may now fit.
        nonlocal restarted
        checked = queued_est[j] if hard is None else hard[j]
        e = m.begin(j, now, source.on_start(j, now))
        restarted = restarted or e != checked or e != queued_est[j]
        return e

    passes = 0
    reservation = [-1] * n
    while a < n or m.ends:
        t_corr = m.next_extension(t) if policy.correction_events else inf
        t_end = m.ends[0][0] if m.ends else inf
        # Periodic cycles at the multiples of the period (none while the queue is empty).
        next_tick = (t // period + 1) * period if period and queue else inf
        t = int(min(work.submit[a] if a < n else inf, t_end, t_corr, next_tick))
        changed = restarted
        for j in m.end_due(t):
            source.on_end(j, t)
            changed = True
        changed = m.extend_due(t) or changed
        while a < n and work.submit[a] == t:
            queued_est[a] = source.on_submit(a, t)
            queue.append(a)
            a += 1
            changed = True
        if not queue:
            continue
        if skip_idle_cycles and (m.free == 0 or not (changed or formula.time_dependent)):
            continue  # nothing can start (every job needs a processor; nothing changed)
        passes += 1
        restarted = False
        order = _order(queue, formula, t, work, queued_est, keys)
        started, top = schedule_cycle(
            t,
            order,
            m.free,
            m.estimated_ends(t),
            work.procs,
            queued_est,
            policy.backfill_depth,
            policy.strict_ordering,
            functools.partial(begin, t),
            hard,
        )
        for j, s in top:
            if reservation[j] < 0:
                reservation[j] = s
        if started:
            gone = set(started)
            queue[:] = [j for j in queue if j not in gone]
    return SimResult(
        source=source.name,
        correction=correction,
        procs_total=procs_total,
        start=m.start,
        corrections=m.ncorr,
        reservation=reservation,
        refresh_changes=0,
        passes=passes,
    )
