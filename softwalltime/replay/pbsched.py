"""PBS's scheduling knobs, in PBS's names, as small pure units and one small event loop.

The model follows OpenPBS 23.06's scheduler (``src/scheduler/``; line numbers of the
23.06.06 source); ``tests/pbs/test_simulate_real.py`` shows each rule on the real server.

**The scheduler core** (issue 46) is this module's :func:`schedule_cycle` (one cycle: top
jobs, calendar, backfilling, classes, over a :class:`.machine.MachineModel`'s
resources, :class:`.pool.PoolModel` for one pool of processors), :func:`order_queue`
(the sort) and :func:`class_keys` (the classes), driven by :func:`simulate_pbs` (estimates,
extensions, events: ``simulate --policies``, ``--search``, ``eval-start``'s ground
truth) and by :func:`softwalltime.wait.starttime.forward_starts` (``wait``,
``eval-start``'s predictions). Nothing else schedules PBS's way. **Oracles**, outside the
core: :mod:`.easy` (the plain ``simulate``: the literature's EASY backfilling on one pool,
with a compiled fast path; no PBS classes, fuzzy windows or machine model) and the naive
reference ``tests/benchmarks/simulate_reference.py``; tests compare the core with them
where their models meet (``tests/test_simulate_pbsched.py``).

- **Job sort** (:class:`SortFormula`): PBS's ``job_sort_formula``, a Python expression over
  the job's numeric resources (``soft_walltime``, ``walltime``, ``ncpus``, the custom
  ``softwalltime_rank``) and ``eligible_time`` (seconds eligible, i.e. waiting, with
  ``eligible_time_enable``); the highest value runs first, ties in submit order. ``fcfs``
  is no formula (submit order).
- **The rank** (:class:`Ranker`): the ``softwalltime_rank`` the hook publishes (the
  key-mean of the user's history, at submit and again by ``softwalltime refresh``), for
  the formulas that read it (``sjf.rank``, ``xfactor.rank``, ``sjfage.rank``).
- **One cycle** (:func:`schedule_cycle`): jobs are taken in sort order; one that fits now
  without delaying a reservation starts; with ``strict_ordering`` the first
  ``backfill_depth`` jobs that cannot start are *top jobs* and get a reservation on the
  availability profile (a job is added to the calendar while fewer than the server's
  ``backfill_depth`` have been, fifo.cpp:1622-1639, each added one counted,
  fifo.cpp:909-939; ``backfill_depth`` 0: nothing passes the first blocked job);
  without it, jobs that do not fit are passed over (no reservation). A job passes a
  reservation if its *soft walltime* ends by it (:attr:`Policy.backfill_by`): PBS checks a
  job with its soft duration (check.cpp:921-924, ``calc_time_left(resresv, 0)``) and with
  its walltime only when an advance or standing reservation lies within it
  (``exists_resv_event``, simulate.cpp:685-690, true only for ``is_resv``); advance
  reservations are not modelled.
- **Equivalence classes** (:attr:`Policy.classes`): jobs with the same select (here their
  processors), place, walltime and sched_config ``resources:`` (job_info.cpp:2283-2288,
  :2331-2342; soft_walltime is not among them) form a class; once one of them cannot run
  in a cycle, the class is marked (fifo.cpp:990-996) and the rest get its error without a
  check of their own (check.cpp:710-714), though they may still become top jobs
  (fifo.cpp:909, ``should_backfill_with_job``). With ``softwalltime_rank`` on the
  ``resources:`` line the rank is part of the key (``classes="rank"``).
- **Estimated ends** (:func:`.corrections.extended_estimate`): a running job's estimate
  after the soft-walltime extensions due by now; the first extension happens only once
  the job is strictly past its soft walltime (job_info.cpp:5197-5204: ``start + duration
  >= server_time`` keeps it), each later one when its multiple is reached
  (``extend_soft_walltime``, job_info.cpp:4732-4735).
- **The cycle** (:func:`simulate_pbs`): the scheduler runs on job arrivals and ends, and
  ``scheduler_iteration`` seconds after the last cycle (pbsd_main.c:1360 sets
  ``sch_next_schedule = time_now + scheduler_iteration`` at every cycle); each cycle first
  extends the estimates of the running jobs found past theirs (as PBS's scheduler does),
  then schedules. ``correction_events`` makes every extension an event with a cycle of its
  own (the model of :func:`simulate` and of the naive reference, which tests compare it
  with, with classes off and extensions at equality).
- **Queues and limits** (``simulate_pbs``'s ``site`` and ``model``): the queue order
  (``by_queue``, ``round_robin``, express queues) applied after the job sort and the class
  key's queue/user/group part (:mod:`.queues`), the run limits in front of the machine
  model (:class:`.limits.SiteLimits`).
"""

from __future__ import annotations

import bisect
import functools
import heapq
import re
from typing import (
    Any,
    Callable,
    Dict,
    Hashable,
    Iterable,
    List,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    Tuple,
)

from ..core import learned, registry
from ..core import rank as hook_rank
from . import fairshare as fs
from .corrections import CORRECTIONS, PBS, SIMPLE_MARGIN_S, extended_estimate
from .easy import SimResult
from .learned_native import new_learner
from .machine import NEVER, OK, CycleResources, MachineModel
from .pool import PoolModel
from .queues import SiteOrder
from .rank import Row, UserHistory
from .sim_workload import SimWorkload
from .sources import EstimateSource

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
# The same sorts by the rank the hook publishes in a custom resource, else the estimate (a
# job submitted before the hook published ranks has none: 0 in a formula). The name's
# ".rank" cannot be taken for a -bfK/-strict/-greedy suffix, nor for an expression.
RANK = hook_rank.RANK_RESOURCE
_RANK = f"({RANK} or soft_walltime or walltime)"
FORMULAS.update(
    {
        "sjf.rank": f"-{_RANK}",
        "xfactor.rank": f"(eligible_time + {_RANK}) / {_RANK}",
        "sjfage.rank": f"eligible_time - {_RANK}",
    }
)
NAMES = ("soft_walltime", "walltime", "eligible_time", "ncpus", RANK)  # a formula may read
# and the fairshare terms (job_info.cpp:4030-4033), with a fairshare tree (Policy.fairshare)
FAIRSHARE_NAMES = fs.FORMULA_NAMES
DEFAULT_RANK_REFRESH_S = 900  # softwalltime-refresh.timer: OnCalendar=*:0/15
DEFAULT_ITERATION_S = 600  # PBS's default scheduler_iteration
# sched's opt_backfill_fuzzy (fifo.cpp:2251-2264, config.h:210-214): the window in which a
# top job's start is searched (see Profile.earliest); PBS's default is "low".
FUZZY = {"off": 0, "low": 60, "medium": 600, "med": 600, "high": 3600}
DEFAULT_FUZZY_S = FUZZY["low"]
ESTIMATE = "estimate"  # backfill by the soft walltime: PBS's rule (check.cpp:921-924)
WALLTIME = "walltime"  # by the walltime: PBS's rule only next to an advance reservation
BACKFILL_BY = (ESTIMATE, WALLTIME)
# Equivalence classes (Policy.classes): PBS's key, processors and walltime (job_info.cpp:
# 2283-2288); the same with softwalltime_rank on sched_config's resources: line; none
# (every job checked on its own, as EASY in the literature and the naive reference).
CLASSES_PBS = "pbs"
CLASSES_RANK = "rank"
CLASSES_NONE = "none"
CLASSES = (CLASSES_PBS, CLASSES_RANK, CLASSES_NONE)
# sched_config's default resources: line with the rank added (then kill -HUP pbs_sched)
SCHED_RESOURCES_RANK = f'resources: "ncpus, mem, arch, host, vnode, aoe, eoe, {RANK}"'


class SortValue(Protocol):
    """A job's ``job_sort_formula`` value from its estimate (soft walltime), walltime,
    seconds eligible, processors and rank (0: none)."""

    def __call__(self, est: int, wall: int, waited: int, ncpus: int, rank: int = 0) -> float: ...


class SortKeys(Protocol):
    """The sort key of each queued job ``j`` at ``now``, ``(-value, j)``, from the arrays of
    estimates, walltimes, submit times, processors and ranks (may raise ArithmeticError)."""

    def __call__(
        self,
        est: Sequence[int],
        wall: Sequence[int],
        submit: Sequence[int],
        procs: Sequence[int],
        rank: Sequence[int],
        now: int,
    ) -> Callable[[int], Tuple[float, int]]: ...


class SortFormula(NamedTuple):
    """A ``job_sort_formula``: ``value(est, wall, waited, ncpus, rank)``, highest first."""

    name: str
    expression: Optional[str]
    value: Optional[SortValue]
    time_dependent: bool
    reads_rank: bool = False
    """It reads ``softwalltime_rank``: the simulation needs a :class:`Ranker`."""
    sort_keys: Optional[SortKeys] = None
    """An expression's sort key for a whole cycle (:func:`_sort_keys`), None for a named
    sort."""
    fairshare_value: Optional[Callable[..., float]] = None
    """For an expression that reads :data:`FAIRSHARE_NAMES`: ``value`` with those terms
    after the rank, ``(est, wall, waited, ncpus, rank, perc, tree_usage, factor)``;
    ``value`` reads them as 0 (no fairshare tree)."""


def _compiled(expression: str) -> SortValue:
    # The expression as a function of the names it may read (positional, in the order of
    # SortValue), without builtins: as fast as a hand-written one (the search evaluates a
    # time-dependent formula for every queued job at every cycle), the same value as
    # eval() over a dict of the names. PBS's scheduler evaluates the formula with eval()
    # in its embedded Python and uses 0 when it raises (job_info.cpp:4046-4065).
    args = ", ".join(NAMES)
    raw = eval(f"lambda {args}: ({expression})", {"__builtins__": {}})

    def value(est: int, wall: int, waited: int, ncpus: int, rank: int = 0) -> float:
        try:
            return float(raw(est, wall, waited, ncpus, rank))
        except ArithmeticError:
            return 0.0  # PBS: an exception makes the value 0

    return value


def _compiled_fairshare(expression: str) -> Callable[..., float]:
    # As _compiled, with the fairshare terms after the rank.
    raw = eval(f"lambda {', '.join(NAMES + FAIRSHARE_NAMES)}: ({expression})", {"__builtins__": {}})

    def value(est: int, wall: int, waited: int, ncpus: int, rank: int = 0, *terms: float) -> float:
        try:
            return float(raw(est, wall, waited, ncpus, rank, *(terms or (0.0, 0.0, 0.0))))
        except ArithmeticError:
            return 0.0  # PBS: an exception makes the value 0

    return value


def _sort_keys(expression: str) -> SortKeys:
    # The key order_queue sorts a cycle's queue by, the expression inlined: one Python call per
    # queued job instead of three (the key, value, the expression), the same floats as
    # _compiled's (the same expression over the same names, then float). The formula
    # search evaluates a time-dependent formula for every queued job at every cycle: on a
    # loaded half of HPC2N this was 45 % of a simulation's time. ArithmeticError is left
    # to the caller, which then sorts with value (PBS's 0 for a formula that raises).
    names = ("est", "wall", "submit", "procs", "rank", "now")
    source = (
        f"def keys({', '.join(names)}):\n"
        "    def key(j):\n"
        "        soft_walltime = est[j]\n"
        "        walltime = wall[j]\n"
        "        eligible_time = now - submit[j]\n"
        "        ncpus = procs[j]\n"
        f"        {RANK} = rank[j]\n"
        f"        return (-float({expression}), j)\n"
        "    return key\n"
    )
    scope: Dict[str, Any] = {"__builtins__": {"float": float}}
    exec(compile(source, "<job_sort_formula>", "exec"), scope)
    keys: SortKeys = scope["keys"]
    return keys


def _sjf(est: int, wall: int, waited: int, ncpus: int, rank: int = 0) -> float:
    return -float(est or wall)


def _xfactor(est: int, wall: int, waited: int, ncpus: int, rank: int = 0) -> float:
    e = est or wall
    return (waited + e) / e if e else 0.0


def _small(est: int, wall: int, waited: int, ncpus: int, rank: int = 0) -> float:
    return -float(ncpus)


def _sjfage(est: int, wall: int, waited: int, ncpus: int, rank: int = 0) -> float:
    return float(waited - (est or wall))


def _sjf_rank(est: int, wall: int, waited: int, ncpus: int, rank: int = 0) -> float:
    return -float(rank or est or wall)


def _xfactor_rank(est: int, wall: int, waited: int, ncpus: int, rank: int = 0) -> float:
    e = rank or est or wall
    return (waited + e) / e if e else 0.0


def _sjfage_rank(est: int, wall: int, waited: int, ncpus: int, rank: int = 0) -> float:
    return float(waited - (rank or est or wall))


_FAST: Dict[str, SortValue] = {
    "sjf": _sjf,
    "xfactor": _xfactor,
    "small": _small,
    "sjfage": _sjfage,
    "sjf.rank": _sjf_rank,
    "xfactor.rank": _xfactor_rank,
    "sjfage.rank": _sjfage_rank,
}


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
    unknown = set(code.co_names) - set(NAMES) - set(FAIRSHARE_NAMES)
    if unknown:
        raise ValueError(
            f"job_sort_formula {expression!r}: unknown {', '.join(sorted(unknown))} "
            f"(known: {', '.join(NAMES + FAIRSHARE_NAMES)})"
        )
    names = code.co_names
    if set(names) & set(FAIRSHARE_NAMES):  # usage changes at every cycle: time-dependent
        full = _compiled_fairshare(expression)
        return SortFormula(spec, expression, full, True, RANK in names, None, full)
    fast = _FAST.get(spec)
    value = fast or _compiled(expression)
    keys = None if fast else _sort_keys(expression)
    return SortFormula(spec, expression, value, "eligible_time" in names, RANK in names, keys)


class Policy(NamedTuple):
    """PBS scheduler settings (PBS's names)."""

    job_sort_formula: str = FCFS
    backfill_depth: int = 1
    strict_ordering: bool = True
    scheduler_iteration: int = DEFAULT_ITERATION_S
    """Seconds between periodic cycles (0: cycles on events only)."""
    correction_events: bool = False
    backfill_by: str = ESTIMATE
    """What must end by a top job's reservation for a job to pass it (unless it fits the
    processors left beside it): ``estimate``, its soft walltime, as PBS 23.06's scheduler
    checks it (check.cpp:921-924: the soft duration unless an advance reservation lies
    within the walltime; issue 29), or ``walltime`` (PBS's rule next to an advance
    reservation, which the real-server test shows). Soft walltimes place the reservations
    (running jobs' estimated ends) and feed the sort either way."""
    classes: str = CLASSES_PBS
    """Equivalence classes (:data:`CLASSES`): ``pbs`` (processors, walltime), ``rank``
    (and ``softwalltime_rank``, with it on sched_config's ``resources:`` line) or ``none``."""
    extension_strictly_past: bool = True
    """PBS extends a soft walltime only once the job is strictly past it (job_info.cpp:
    5197-5204); False: at equality too (the naive reference's model)."""
    backfill_fuzzy: Optional[int] = DEFAULT_FUZZY_S
    """sched's ``opt_backfill_fuzzy`` in seconds (``off`` 0, which PBS runs as 1 s; ``low``
    60, PBS's default; ``medium`` 600; ``high`` 3600): a top job's start is searched in
    windows of it (:meth:`.profile.Profile.earliest`). None: at every event (the naive
    reference's and :mod:`.easy`'s model; no PBS setting)."""
    fairshare: Optional[fs.Settings] = None
    """sched_config's fairshare (:mod:`.fairshare`): with ``fair_share``, jobs of equal
    formula value in fairshare order; a formula's fairshare terms either way. None: no tree
    (the terms read 0)."""

    @property
    def fuzzy_window(self) -> int:
        """The window :meth:`.profile.Profile.earliest` searches in (0: every event)."""
        return 0 if self.backfill_fuzzy is None else max(1, self.backfill_fuzzy)

    @property
    def name(self) -> str:
        if not self.strict_ordering:
            how = "greedy"
        elif self.backfill_depth == 0:
            how = "strict"
        else:
            how = f"bf{self.backfill_depth}"
        sort = self.job_sort_formula
        if self.fairshare is not None and self.fairshare.fair_share:
            sort = FAIRSHARE if sort == FCFS else f"{sort}+{FAIRSHARE}"
        return f"{sort}-{how}"


# The sort name of fair_share with no formula, as simulate --policies takes it: a flat tree
# of the users with equal shares (every user in PBS's unknown group, EQUAL_SHARES for it:
# sched_config's own "give everyone equal shares" example), PBS's other defaults.
FAIRSHARE = "fairshare"
EQUAL_SHARES = fs.EQUAL_SHARES


_HOW = re.compile(r"^(?P<sort>.+?)(?:-(?P<how>bf\d+|strict|greedy))?$")


def parse_policy(
    text: str,
    scheduler_iteration: int = DEFAULT_ITERATION_S,
    backfill_by: str = ESTIMATE,
    classes: str = CLASSES_PBS,
    backfill_fuzzy: Optional[int] = DEFAULT_FUZZY_S,
) -> Policy:
    """``SORT[-bfK|-strict|-greedy]`` (e.g. ``fcfs-bf1``, ``sjf-bf4``, ``xfactor-greedy``);
    SORT is a name of :data:`FORMULAS` or a ``job_sort_formula`` expression.

    :raises ValueError: unknown sort or form, ``backfill_by`` not in :data:`BACKFILL_BY`
        or ``classes`` not in :data:`CLASSES`
    """
    _check_rules(backfill_by, classes)
    match = _HOW.match(text.strip())
    if match is None:
        raise ValueError(f"policy {text!r}: expected SORT, SORT-bfK, SORT-strict or SORT-greedy")
    sort, how = match.group("sort"), match.group("how") or "bf1"
    if sort not in FORMULAS and re.match(r"^\w+-", sort):
        raise ValueError(f"policy {text!r}: expected SORT, SORT-bfK, SORT-strict or SORT-greedy")
    fairshare = fs.Settings(unknown_shares=EQUAL_SHARES) if sort == FAIRSHARE else None
    sort = FCFS if sort == FAIRSHARE else sort
    sort_formula(sort)  # validates
    depth = 0 if how in ("greedy", "strict") else int(how[2:])
    strict = how != "greedy"
    return Policy(
        sort, depth, strict, scheduler_iteration, backfill_by=backfill_by, classes=classes,
        backfill_fuzzy=backfill_fuzzy, fairshare=fairshare,
    )  # fmt: skip


def reads_fairshare(policy: Policy) -> bool:
    """``policy`` orders by fairshare or its formula reads a fairshare term: a model
    without :mod:`.fairshare` (``wait``'s start times) would get it wrong."""
    formula = sort_formula(policy.job_sort_formula)
    return policy.fairshare is not None or formula.fairshare_value is not None


def parse_fuzzy(text: str) -> int:
    """An ``opt_backfill_fuzzy`` value as PBS reads it: off, low, medium (med), high or
    whole seconds (fifo.cpp:2251-2264).

    :raises ValueError: anything else, or a negative number
    """
    value = FUZZY.get(text.strip().lower())
    if value is not None:
        return value
    try:
        seconds = int(text)
    except ValueError:
        raise ValueError(
            f"opt_backfill_fuzzy {text!r}: expected off, low, medium, high or seconds"
        ) from None
    if seconds < 0:
        raise ValueError(f"opt_backfill_fuzzy {text!r}: seconds must be >= 0")
    return seconds


def _check_rules(backfill_by: str, classes: str) -> None:
    if backfill_by not in BACKFILL_BY:
        raise ValueError(f"backfill_by must be one of {BACKFILL_BY}, not {backfill_by!r}")
    if classes not in CLASSES:
        raise ValueError(f"classes must be one of {CLASSES}, not {classes!r}")


def pbs_settings(
    policy: Policy, rank_refresh_s: int = DEFAULT_RANK_REFRESH_S, rank: str = hook_rank.NAME
) -> List[str]:
    """The ``qmgr`` commands and ``sched_config`` lines that express ``policy`` on PBS; for a
    formula that reads the rank, also the custom resource, the hook setting that publishes
    it (``rank``, as simulated) and the timer that refreshes it (``rank_refresh_s``, as
    simulated; 0: none)."""
    formula = sort_formula(policy.job_sort_formula)
    lines = []
    if formula.reads_rank:
        lines.append(f'qmgr -c "create resource {RANK} type=long, flag=r"  # skip if it exists')
    if formula.expression is None:
        lines.append('qmgr -c "unset sched job_sort_formula"')
    else:
        lines.append(f"qmgr -c \"set sched job_sort_formula = '{formula.expression}'\"")
        if formula.time_dependent:
            lines.append('qmgr -c "set server eligible_time_enable = True"')
    lines.append(f'qmgr -c "set server backfill_depth = {policy.backfill_depth}"')
    if policy.scheduler_iteration:
        lines.append(f'qmgr -c "set sched scheduler_iteration = {policy.scheduler_iteration}"')
    if policy.backfill_fuzzy is not None and policy.backfill_fuzzy != DEFAULT_FUZZY_S:
        lines.append(f'qmgr -c "set sched opt_backfill_fuzzy = {policy.backfill_fuzzy}"')
    strict = "True" if policy.strict_ordering else "False"
    lines.append(f"# $PBS_HOME/sched_priv/sched_config: strict_ordering: {strict} ALL")
    if policy.fairshare is not None:
        lines += [
            f"# $PBS_HOME/sched_priv/sched_config: {ln}" for ln in fs.config_lines(policy.fairshare)
        ]
    if policy.classes == CLASSES_RANK:
        lines.append(f"# $PBS_HOME/sched_priv/sched_config: {SCHED_RESOURCES_RANK}")
    if formula.reads_rank:
        if rank == hook_rank.DEFAULT:
            lines.append(f'# hook config: "rank": "{rank}" (softwalltime hooks install --rank)')
        elif rank in (hook_rank.NAME, hook_rank.PAID_NAME):
            lines.append(
                f'# hook config: "rank": "{rank}" (softwalltime hooks install --rank {rank})'
            )
        else:  # learned, learned-paid: that predictor's, and its soft walltimes with it
            lines.append(
                f'# hook config: "predictor": "learned", "rank": "{rank}" (the rank needs the'
                " predictor: the soft walltimes are then learned's, not the source simulated)"
            )
        if rank_refresh_s == DEFAULT_RANK_REFRESH_S:
            lines.append(
                "# refresh timer: softwalltime refresh every 15 min re-ranks queued jobs "
                "(systemctl enable --now softwalltime-refresh.timer)"
            )
        elif rank_refresh_s:
            lines.append(
                f"# refresh timer: softwalltime refresh every {rank_refresh_s} s re-ranks queued "
                "jobs (softwalltime-refresh.timer's OnCalendar, or cron)"
            )
        else:
            lines.append("# no softwalltime refresh: the rank is set at submit only")
    return lines


# ---------------------------------------------------------------------------------------
# The rank


class Ranker:
    """Each job's ``softwalltime_rank``, as the hook and ``softwalltime refresh`` set it.

    At submit: :meth:`value` (the hook's :func:`~softwalltime.core.rank.key_mean`) from
    the user's jobs that have ended *in the simulation*, newest end first (:meth:`on_end`
    is told of every end, in end order, as the estimate sources are). :meth:`refresh`, at
    the first cycle of every ``refresh_s`` seconds (the refresh timer's quarter hours; 0:
    never, the rank stays the submit-time one), ranks again the queued jobs whose user has
    had a job end since their rank was computed; the scheduler reads the new ranks from
    that cycle on. Subclasses may rank by something else (:class:`PerfectRanker`).
    """

    name = hook_rank.NAME

    def __init__(self, refresh_s: int = DEFAULT_RANK_REFRESH_S) -> None:
        if refresh_s < 0:
            raise ValueError("refresh_s must be >= 0")
        self.refresh_s = refresh_s

    def bind(self, work: SimWorkload) -> None:
        """Start a simulation of ``work`` (called by :func:`simulate_pbs`)."""
        n = len(work.submit)
        self.work = work
        self.history = UserHistory()
        self.rank = [0] * n
        self.seen = [0] * n  # the version of the user's history each rank was computed from
        self.version: Dict[str, int] = {}
        self.next_refresh = refresh_due(0, self.refresh_s)
        # key_mean by (walltime, procs), per user, for the version of the user's history
        # it was computed from: a user's queued jobs of one key share their rank
        self.memo: Dict[str, Tuple[int, Dict[Tuple[int, int], int]]] = {}

    def value(self, j: int) -> int:
        """Job ``j``'s rank now."""
        w = self.work
        user = w.user[j]
        version = self.version.get(user, 0)
        memo = self.memo.get(user)
        if memo is None or memo[0] != version:
            memo = self.memo[user] = (version, {})
        key = (w.wall[j], w.procs[j])
        rank = memo[1].get(key)
        if rank is None:
            rank = memo[1][key] = self.compute(key[0], key[1], self.history.of(user))
        return rank

    def compute(self, walltime_s: int, procs: int, rows: List[Row]) -> int:
        """The rank of a job of ``walltime_s`` and ``procs`` from the user's ``rows``."""
        return hook_rank.key_mean(walltime_s, procs, rows)

    def on_submit(self, j: int, now: int) -> None:
        self.rank[j] = self.value(j)
        self.seen[j] = self.version.get(self.work.user[j], 0)

    def on_end(self, j: int, now: int) -> None:
        w = self.work
        self.history.add(w.user[j], (w.run[j], w.wall[j], w.procs[j]))
        self.version[w.user[j]] = self.version.get(w.user[j], 0) + 1

    def refresh(self, queue: Sequence[int], now: int) -> List[int]:
        """At a cycle at ``now``: rank ``queue`` again if a refresh is due; the jobs whose
        rank changed."""
        if now < self.next_refresh:
            return []
        self.next_refresh = refresh_due(now, self.refresh_s)
        users, changed = self.work.user, []
        for j in queue:
            v = self.version.get(users[j], 0)
            if v != self.seen[j]:
                self.seen[j] = v
                r = self.value(j)
                if r != self.rank[j]:
                    self.rank[j] = r
                    changed.append(j)
        return changed


def refresh_due(now: int, refresh_s: int) -> float:
    """When the next refresh after ``now`` is due: the next multiple of ``refresh_s``."""
    return (now // refresh_s + 1) * refresh_s if refresh_s else float("inf")


class PaidRanker(Ranker):
    """The hook's rank ``key-mean-paid``: ``key-mean`` no lower than the user's paid
    evidence allows (:func:`~softwalltime.core.rank.paid_key_mean`, from the same rows)."""

    name = hook_rank.PAID_NAME

    def compute(self, walltime_s: int, procs: int, rows: List[Row]) -> int:
        return hook_rank.paid_key_mean(walltime_s, procs, rows)


class PerfectRanker(Ranker):
    """The real (simulated) run time as the rank: the ideal a rank could reach. With
    ``perfect`` estimates a ``*.rank`` sort then reads what its plain sort does (a run time
    of 0 is no rank: the formula falls back to the estimate, as it does)."""

    name = "perfect"

    def value(self, j: int) -> int:
        return self.work.run[j]


class LearnedRanker(Ranker):
    """The hook's rank ``learned`` (``paid``: ``learned-paid``, floored by the user's paid
    evidence, :func:`~softwalltime.core.rank.paid_floor`): the value of the rule of best
    accuracy in the job's bin (:meth:`~softwalltime.core.learned.Learner.rank_rule`).

    Online, as :class:`~.sources.CalibratedSource` and ``evaluate`` learn: the site table
    starts empty (the shipped prior holds HPC2N and CTC-SP2: the future of two of the
    traces simulated) and learns each job when it ends in the simulation, from the outcome
    its rank was last computed with; a job's bins and rules read the user's jobs ended in
    the simulation (at most ``learned.HISTORY_ROWS``, with their ends) and the time since
    the newest ended. The cells learnt do not depend on the soft walltime the job got
    (only lambda does, which the rank does not read): the update is given v3's. The table
    learns at every end, where a site's is rewritten by each ``softwalltime calibrate``.
    """

    def __init__(self, refresh_s: int = DEFAULT_RANK_REFRESH_S, paid: bool = False) -> None:
        super().__init__(refresh_s)
        self.paid = paid
        self.name = RANK_LEARNED_PAID if paid else RANK_LEARNED

    def bind(self, work: SimWorkload) -> None:
        super().bind(work)
        self.table = new_learner()
        self.rows: Dict[str, List[learned.Row]] = {}  # per user, newest end first
        self.outcome: Dict[int, learned.Outcome] = {}  # job -> its last rank's outcome
        self.now = 0

    def value(self, j: int) -> int:
        w = self.work
        user, wall = w.user[j], w.wall[j]
        out = learned.outcome(wall, self.rows.get(user, ()), self.now)
        self.outcome[j] = out
        rank = out.softs[self.table.rank_rule(out)]
        if self.paid:
            rank = hook_rank.paid_floor(wall, w.procs[j], self.history.of(user), rank)
        return rank

    def on_submit(self, j: int, now: int) -> None:
        self.now = now
        super().on_submit(j, now)

    def refresh(self, queue: Sequence[int], now: int) -> List[int]:
        self.now = now
        return super().refresh(queue, now)

    def on_end(self, j: int, now: int) -> None:
        w = self.work
        out = self.outcome.pop(j)
        self.table.update(out, w.run[j], out.softs[learned.R_V3], None)
        rows = self.rows.setdefault(w.user[j], [])
        rows.insert(0, (w.run[j], w.wall[j], now))
        del rows[learned.HISTORY_ROWS :]
        super().on_end(j, now)


RANK_LEARNED = registry.LEARNED
RANK_LEARNED_PAID = registry.LEARNED_PAID
RANK_BY = registry.RANKS  # --rank-by


def make_ranker(name: str, refresh_s: int = DEFAULT_RANK_REFRESH_S) -> Ranker:
    """The ranker called ``name`` (:data:`RANK_BY`)."""
    if name == hook_rank.NAME:
        return Ranker(refresh_s)
    if name == hook_rank.PAID_NAME:
        return PaidRanker(refresh_s)
    if name in (RANK_LEARNED, RANK_LEARNED_PAID):
        return LearnedRanker(refresh_s, paid=name == RANK_LEARNED_PAID)
    raise ValueError(f"unknown rank {name!r}; known: {', '.join(RANK_BY)}")


# ---------------------------------------------------------------------------------------
# One cycle


def schedule_cycle(
    now: int,
    order: Iterable[int],
    res: CycleResources,
    est: Sequence[int],
    backfill_depth: int,
    strict_ordering: bool,
    on_start: Optional[Callable[[int], int]] = None,
    hard: Optional[Sequence[int]] = None,
    cls: Optional[Callable[[int], Hashable]] = None,
    window: int = 0,
    epoch: int = 0,
) -> Tuple[List[int], List[Tuple[int, int]]]:
    """One scheduling cycle (the core; PBS's ``main_sched_loop``, fifo.cpp:786-1066): the
    jobs of ``order`` (queued, sorted) that start ``now`` on the machine ``res`` (a
    :class:`.machine.CycleResources`, e.g. :class:`.pool.PoolCycle`), and the top jobs'
    reservations ``(job, start)``.

    A job starts if ``res`` says it fits now without delaying a reservation made so far in
    this cycle (:meth:`~.machine.CycleResources.check`, to run until now + ``est[j]``, or
    ``hard[j]``). One that does not: with ``strict_ordering``, while fewer than
    ``backfill_depth`` top jobs have been made, it becomes one (fifo.cpp:1622-1639; each
    added one counted, fifo.cpp:909-939), unless it can never run (``can_never_run``,
    fifo.cpp:1647-1649); ``backfill_depth`` 0: nothing passes it (fifo.cpp:1008-1017). The
    cycle ends when nothing more can start (``res.full()``).

    :param on_start: called as each job starts; returns the estimate it runs with (default:
        ``est[j]``), which then holds its resources on the calendar
    :param hard: the jobs' walltimes, when a job must end by a reservation by its walltime
        (:attr:`Policy.backfill_by` ``walltime``; None: by its estimate)
    :param cls: a job's equivalence class (None: no classes): once a job cannot start, the
        class is marked (fifo.cpp:990-996) and its later jobs get that error without a
        check of their own (check.cpp:710-714), though they may still become top jobs
    :param window: :attr:`Policy.fuzzy_window`, the window a top job's start is searched
        in, ``epoch`` the epoch second of time 0 (:meth:`.profile.Profile.earliest`)

    Long because (parameters) the cycle is a pure function of plain values: its two
    drivers (:func:`simulate_pbs`, over the workload's columns, and
    :func:`softwalltime.wait.starttime.forward_starts`, over a live queue's) each pass their
    own lists, and tests pass literals; an object bundling them would belong to neither.
    """
    check, start, reserve, full = res.check, res.start, res.reserve, res.full
    top: List[Tuple[int, int]] = []
    started: List[int] = []
    # the classes marked can't-run in this cycle, with the error their later jobs copy
    cannot: Dict[Hashable, int] = {}
    tops = strict_ordering and backfill_depth > 0  # whether top jobs may still be made
    # Nothing can start: the first job is still tried (it may become a top job). Only a
    # start or a reservation changes what is free, so full() is asked after them only.
    stop = full()
    for j in order:
        key = None if cls is None else cls(j)
        code = OK if key is None else cannot.get(key, OK)
        if code != OK and not tops:
            continue  # a marked class's job, and no top job left to make: nothing to do
        d = est[j]
        end = now + (d if hard is None else hard[j])  # by when it must be gone
        if code == OK:
            code = check(j, now, end)
            if code == OK:
                start(j, now, end, d if on_start is None else on_start(j))
                started.append(j)
                if full():
                    break
                continue
            if key is not None:
                cannot[key] = code  # fifo.cpp:990-996
        if strict_ordering:
            if backfill_depth == 0:
                break  # strict order without backfilling: nothing passes this job
            if tops and code != NEVER:  # fifo.cpp:1637-1638; can_never_run: 1647-1649
                top.append((j, reserve(j, d, window, epoch)))
                tops = len(top) < backfill_depth
                stop = stop or full()
        if stop:
            break
    return started, top


# ---------------------------------------------------------------------------------------
# Estimates of running jobs


# ---------------------------------------------------------------------------------------
# The event loop


class _Machine:
    """Running jobs: estimates, estimated ends (sorted), the end heap and the heap of
    extensions due (each running job has one entry there while it can still be extended);
    ``model`` (a :class:`.machine.MachineModel`) holds where they run."""

    def __init__(
        self, work: SimWorkload, model: MachineModel, correction: str, strictly_past: bool = False
    ) -> None:
        n = len(work.submit)
        self.work = work
        self.model = model
        self.correction = correction
        self.margin = SIMPLE_MARGIN_S if correction == "simple" else 0
        # PBS's first extension only strictly past the soft walltime (Policy docstring)
        self.strict = strictly_past and correction == PBS
        self.est = [0] * n
        self.start_est = [0] * n  # the estimate each job started with
        self.ncorr = [0] * n
        self.start = [-1] * n
        self.by_end: List[Tuple[int, int]] = []  # (estimated end, job), sorted
        self.ends: List[Tuple[int, int]] = []  # heap (end, job)
        self.due: List[Tuple[int, int]] = []  # heap (next extension, job)

    def _watch(self, j: int) -> None:
        # Note when running job j is next extended, if it still runs then.
        e = self.est[j]
        if e < self.work.wall[j]:
            when = self.start[j] + e - self.margin + (self.strict and e == self.start_est[j])
            if when < self.start[j] + self.work.run[j]:
                heapq.heappush(self.due, (when, j))

    def begin(self, j: int, now: int, estimate: int) -> int:
        """Start job ``j`` with ``estimate``; returns its estimate after any extension."""
        w = self.work
        self.start[j] = now
        self.start_est[j] = estimate
        self.est[j] = estimate
        if self.correction == "simple":  # already within the margin at start
            self._extend(j, now)
        bisect.insort(self.by_end, (now + self.est[j], j))
        heapq.heappush(self.ends, (now + w.run[j], j))
        self._watch(j)
        return self.est[j]

    def _extend(self, j: int, now: int) -> bool:
        # Apply the extensions of job j due by now (the estimate only; see extend).
        w = self.work
        elapsed = min(now, self.start[j] + w.run[j] - 1) - self.start[j]
        if self.strict and elapsed <= self.start_est[j]:
            return False  # not strictly past the soft walltime it started with
        e, c = extended_estimate(
            self.correction, self.est[j], self.start_est[j], self.ncorr[j], w.wall[j], elapsed
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
            self.model.release(j)
            done.append(j)
        return done


class JobColumns(Protocol):
    """What the sort and the classes read of the queued jobs, by index: submit times,
    walltimes and processors (a :class:`.sim_workload.SimWorkload`, or a queue snapshot's
    columns)."""

    @property
    def submit(self) -> Sequence[int]: ...

    @property
    def wall(self) -> Sequence[int]: ...

    @property
    def procs(self) -> Sequence[int]: ...


def class_keys(
    classes: str,
    cols: JobColumns,
    rank: Sequence[int],
    part: Optional[Callable[[int], Hashable]] = None,
) -> Optional[Callable[[int], Hashable]]:
    """A job's equivalence class (:attr:`Policy.classes`; None: no classes): its processors
    (the select) and walltime (job_info.cpp:2283-2288), what the machine model adds
    (``part``, :attr:`.machine.MachineModel.class_part`), and its current ``rank[j]`` with
    the rank on sched_config's ``resources:`` line."""
    if classes == CLASSES_NONE:
        return None
    procs, wall = cols.procs, cols.wall
    if part is not None:
        parts = [part(j) for j in range(len(procs))]
        if classes == CLASSES_RANK:
            return lambda j: (procs[j], wall[j], parts[j], rank[j])
        return list(zip(procs, wall, parts)).__getitem__
    if classes == CLASSES_RANK:
        return lambda j: (procs[j], wall[j], rank[j])
    keys = list(zip(procs, wall))
    return keys.__getitem__


def order_queue(
    queue: List[int],
    formula: SortFormula,
    now: int,
    cols: JobColumns,
    est: Sequence[int],
    keys: Dict[int, Tuple[float, int]],
    rank: Sequence[int],
) -> List[int]:
    """``queue`` in ``job_sort_formula`` order at ``now`` (highest first, then submit order,
    i.e. index), over the jobs' estimates ``est`` and ranks ``rank``. A formula that does
    not depend on time is evaluated once per job (kept in ``keys``; the caller drops a
    job's key when its rank changes)."""
    value = formula.value
    if value is None:
        return queue
    wall, procs, submit = cols.wall, cols.procs, cols.submit
    if not formula.time_dependent:
        for j in queue:
            if j not in keys:
                keys[j] = (-value(est[j], wall[j], 0, procs[j], rank[j]), j)
        return sorted(queue, key=keys.__getitem__)
    if formula.sort_keys is not None:
        try:
            return sorted(queue, key=formula.sort_keys(est, wall, submit, procs, rank, now))
        except ArithmeticError:
            pass  # a job's value raises: value gives it PBS's 0
    return sorted(
        queue,
        key=lambda j: (-value(est[j], wall[j], now - submit[j], procs[j], rank[j]), j),
    )


def _with_site_key(
    cls: Callable[[int], Hashable], site: Callable[[int], Hashable]
) -> Callable[[int], Hashable]:
    # The class key with what the site's queues and limits add (job_info.cpp:2158-2233)
    return lambda j: (cls(j), site(j))


class _Run:
    """One :func:`simulate_pbs` run between its cycles: the machine, the queue, the
    estimates and ranks the queued jobs are sorted and checked with, and whether anything
    changed since the last cycle."""

    def __init__(
        self,
        work: SimWorkload,
        source: EstimateSource,
        model: MachineModel,
        policy: Policy,
        correction: str,
        ranker: Optional[Ranker],
        epoch: int = 0,
        site: Optional[SiteOrder] = None,
    ) -> None:
        n = len(work.submit)
        self.epoch = epoch
        self.site = site
        self.work, self.source, self.policy, self.ranker = work, source, policy, ranker
        self.formula = sort_formula(policy.job_sort_formula)
        source.bind(work)
        if ranker is not None:
            ranker.bind(work)
        self.rank = ranker.rank if ranker is not None else [0] * n
        self.model = model
        self.machine = _Machine(work, model, correction, policy.extension_strictly_past)
        self.cls = class_keys(policy.classes, work, self.rank, model.class_part)
        if self.cls is not None and site is not None and site.class_key is not None:
            self.cls = _with_site_key(self.cls, site.class_key)
        self.queue: List[int] = []
        self.queued_est = self.machine.est  # a queued job's estimate: its submit-time one
        self.next_arrival = 0  # the next job to arrive
        # A job started with another estimate than it was checked with (see begin).
        self.restarted = False
        self.keys: Dict[int, Tuple[float, int]] = {}  # time-independent sort keys
        self.hard = work.wall if policy.backfill_by == WALLTIME else None
        self.passes = 0
        self.reservation = [-1] * n
        self.fairshare = None if policy.fairshare is None else _fairshare_state(work, policy)
        # the fairshare order's queue groups (raises for what it does not model)
        self.fair_groups = (
            site.groups() if site is not None and self.fairshare is not None else None
        )
        # a cycle may order the queue anew though nothing else changed: usage grows
        self.time_dependent = self.formula.time_dependent or self.fairshare is not None

    def running(self) -> Dict[int, int]:
        """The running jobs and their starts."""
        start = self.machine.start
        return {j: start[j] for _, j in self.machine.ends}

    def events(self, t: int) -> bool:
        """The ends, extensions, arrivals and rank refreshes at ``t``; whether anything
        changed since the last cycle (a job restarted included)."""
        m, source, ranker = self.machine, self.source, self.ranker
        work, queue = self.work, self.queue
        changed = self.restarted
        for j in m.end_due(t):
            source.on_end(j, t)
            if ranker is not None:
                ranker.on_end(j, t)
            changed = True
        changed = m.extend_due(t) or changed
        a, n = self.next_arrival, len(work.submit)
        while a < n and work.submit[a] == t:
            self.queued_est[a] = source.on_submit(a, t)
            if ranker is not None:
                ranker.on_submit(a, t)
            queue.append(a)
            a += 1
            changed = True
        self.next_arrival = a
        if ranker is not None:
            for j in ranker.refresh(queue, t):
                self.keys.pop(j, None)  # its sort value changed with its rank
                changed = True
        return changed

    def begin(self, now: int, j: int) -> int:
        """Start job ``j``; its estimate. A job that starts with another estimate than it
        was checked with (its walltime when backfilling by walltime) leaves a state that an
        idle cycle cannot be trusted to leave unchanged: the next cycle's profile frees its
        processors at its estimated end, so a job the reservation's extra processors could
        not take may now fit."""
        est = self.queued_est
        checked = est[j] if self.hard is None else self.hard[j]
        e = self.machine.begin(j, now, self.source.on_start(j, now))
        self.restarted = self.restarted or e != checked
        return e

    def cycle(self, t: int) -> None:
        """One scheduling cycle at ``t``: the jobs that start leave the queue; the top jobs'
        first reservations are noted."""
        self.passes += 1
        self.restarted = False
        m, work, policy, queue = self.machine, self.work, self.policy, self.queue
        begin: Callable[[int], int] = functools.partial(self.begin, t)
        if self.fairshare is None:
            order: Iterable[int] = order_queue(
                queue, self.formula, t, work, self.queued_est, self.keys, self.rank
            )
            if self.site is not None:
                order = self.site.order(list(order))  # by_queue, round_robin, express queues
        else:
            order, begin = self._fair_order(t, begin)
        started, top = schedule_cycle(
            t, order, self.model.cycle(t, m.by_end), self.queued_est, policy.backfill_depth,
            policy.strict_ordering, begin, self.hard, self.cls, policy.fuzzy_window, self.epoch,
        )  # fmt: skip
        reservation = self.reservation
        for j, s in top:
            if reservation[j] < 0:
                reservation[j] = s
        if started:
            gone = set(started)
            queue[:] = [j for j in queue if j not in gone]

    def _fair_values(self, t: int) -> Optional[Dict[int, float]]:
        # Each queued job's formula value, its fairshare terms from the tree (None: no
        # formula).
        state, formula, work, est, rank = (
            self.fairshare,
            self.formula,
            self.work,
            self.queued_est,
            self.rank,
        )
        assert state is not None
        if formula.value is None:
            return None
        wall, submit, procs = work.wall, work.submit, work.procs
        full = formula.fairshare_value
        if full is None:
            value = formula.value
            return {j: value(est[j], wall[j], t - submit[j], procs[j], rank[j]) for j in self.queue}
        node, terms = state.node, state.tree.terms
        return {
            j: full(est[j], wall[j], t - submit[j], procs[j], rank[j], *terms(node[j]))
            for j in self.queue
        }

    def _fair_order(
        self, t: int, begin: Callable[[int], int]
    ) -> Tuple[Iterable[int], Callable[[int], int]]:
        # The queue in the order of the formula (with its fairshare terms) and, with
        # fair_share, fairshare within equal values (fs.CycleOrder: sorted again after each
        # job started, whose start it is told of). A job of an entity with no share never
        # runs under fairshare_enforce_no_shares.
        state = self.fairshare
        assert state is not None
        values = self._fair_values(t)
        site = self.site
        if not state.settings.fair_share:  # the formula, then submit order
            plain = (
                self.queue if values is None else sorted(self.queue, key=lambda j: (-values[j], j))
            )
            return (plain if site is None else site.order(plain)), begin
        policy = self.policy
        tops = policy.backfill_depth if policy.strict_ordering else 0
        queue = [j for j in self.queue if not state.never_runs(j)]
        order = fs.CycleOrder(state, queue, values, tops, self.fair_groups)

        def started(j: int) -> int:
            order.started(j)
            return begin(j)

        return order, started


def _fairshare_state(work: SimWorkload, policy: Policy) -> fs.State:
    settings = policy.fairshare
    assert settings is not None
    site = work.site
    entities = fs.entity_names(
        settings.entity, work.user,
        *((site.group, site.account, site.queue) if site is not None else ()),
    )  # fmt: skip
    return fs.State(settings, entities, fs.Accrual(work.procs, work.wall))


def simulate_pbs(
    work: SimWorkload,
    source: EstimateSource,
    procs_total: int,
    policy: Policy,
    correction: str = "pbs",
    skip_idle_cycles: bool = True,
    ranker: Optional[Ranker] = None,
    epoch: int = 0,
    model: Optional[MachineModel] = None,
    site: Optional[SiteOrder] = None,
) -> SimResult:
    """Simulate PBS's scheduler with ``policy`` and the estimates of ``source`` on ``model``
    (None: one pool of ``procs_total`` processors, :class:`.pool.PoolModel`).

    ``skip_idle_cycles``: a cycle that would start nothing is skipped: no processor free,
    or nothing changed since the last cycle (no arrival, end, extension, rank changed by a
    refresh or job started with another estimate than it was checked with, and a sort that
    does not depend on time). Tests check this against running every cycle.
    ``procs_total`` is reported in the result whatever the model.

    Long because (parameters) each is a setting of its own, passed by keyword by the
    callers that set it (``--search``, the twin, ``eval-start``, tests); ``model`` is the
    machine beyond one pool, which most callers leave to the default; ``site`` the order
    and class keys a site's queues and limits add (:func:`.queues.site_order`; None: one
    queue, no limits).

    ``ranker``: the ``softwalltime_rank`` of the jobs, for a formula that reads it (None:
    every job's rank is 0, as for jobs the hook gave none). Its refreshes run at the cycles
    whether they are skipped or not.

    ``epoch``: the epoch second of time 0, for :attr:`Policy.backfill_fuzzy`'s windows
    (0: the workload's times are epoch seconds, as traces with a ``UnixStartTime`` and
    accounting logs are read).

    :raises ValueError: bad parameters or a job that can never run on the model
    """
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}, not {correction!r}")
    if policy.backfill_depth < 0 or policy.scheduler_iteration < 0:
        raise ValueError("backfill_depth and scheduler_iteration must be >= 0")
    _check_rules(policy.backfill_by, policy.classes)
    n = len(work.submit)
    if model is None:
        model = PoolModel(procs_total, work.procs)
    never = next((j for j in range(n) if not model.can_ever_run(j)), None)
    if never is not None:
        raise ValueError(
            f"job {never} (in submit order, from 0) needs more than the machine has: it can "
            "never run"
        )
    run = _Run(work, source, model, policy, correction, ranker, epoch, site)
    m, queue, time_dependent = run.machine, run.queue, run.time_dependent
    upkeep = run.fairshare
    period = policy.scheduler_iteration
    inf = float("inf")
    t = -1
    last_cycle = 0  # pbsd_main.c:1360: the next periodic cycle is an iteration after it
    while run.next_arrival < n or m.ends:
        t_corr = m.next_extension(t) if policy.correction_events else inf
        t_end = m.ends[0][0] if m.ends else inf
        # A periodic cycle an iteration after the last cycle (none while the queue is
        # empty: it would start nothing, and the next arrival is a cycle of its own).
        next_tick = last_cycle + period if period and queue else inf
        a = run.next_arrival
        t = int(min(work.submit[a] if a < n else inf, t_end, t_corr, next_tick))
        last_cycle = t
        changed = run.events(t)
        if upkeep is not None:  # at every cycle, one that starts nothing too
            upkeep.start_cycle(t, run.running())
        if not queue:
            pass
        elif skip_idle_cycles and (model.full() or not (changed or time_dependent)):
            pass  # nothing can start (every job needs a processor; nothing changed)
        else:
            run.cycle(t)
        if upkeep is not None:
            upkeep.end_cycle(t, run.running())
    return SimResult(
        source=source.name,
        correction=correction,
        procs_total=procs_total,
        start=m.start,
        corrections=m.ncorr,
        reservation=run.reservation,
        refresh_changes=0,
        passes=run.passes,
    )
