"""PBS's fairshare, as OpenPBS 23.06's scheduler keeps and uses it (pure; issue 47).

Line numbers are those of the 23.06.06 source (``src/scheduler/``);
``tests/pbs/test_fairshare_real.py`` shows the order, the decay and a formula on the real server.

- **The tree** (:class:`Tree`): a root (``TREEROOT``) whose children are the groups and
  entities of ``resource_group`` (``name cresgrp parent shares``, parent ``root`` for the
  root, fairshare.cpp:208-299) and the ``unknown`` group, with ``unknown_shares`` shares
  (sched_config; 0 unless set, parse.cpp:117; fairshare.cpp:330-339). An entity the file does
  not list joins ``unknown`` with 1 share (``find_alloc_ginfo``, fairshare.cpp:188-194). A
  node's share of the machine is its shares over its siblings' times its parent's
  (``calc_fair_share_perc``, fairshare.cpp:382-406): ``fairshare_perc``.
- **Usage** (:meth:`Tree.accrue`): a node's usage starts at 1 (``FAIRSHARE_MIN_USAGE``,
  constant.h:335, fairshare.cpp:817) and an entity's usage counts on every node of its path
  to the root (fairshare.cpp:433-434, fifo.cpp:353-354). At each cycle the scheduler adds
  to each job it saw running at the end of the last cycle, and still finds running, the
  growth of ``fairshare_usage_res`` evaluated over its ``resources_used`` since then
  (fifo.cpp:334-358; the list is made at the end of each cycle, fifo.cpp:1080-1082,
  prev_job_info.cpp:73-89). A job that ended between two cycles is not found: its usage
  since the last cycle is never counted.
- **Decay** (:meth:`Tree.decay`): at a cycle, as many times as ``fairshare_decay_time``
  has passed since the last decay (strictly more than it, fifo.cpp:368-377), every node's
  usage is multiplied by ``fairshare_decay_factor`` and kept at least 1
  (fairshare.cpp:451-462); the last decay time then moves to the last multiple
  (fifo.cpp:380-386). Usage accrues before the decay of the same cycle.
- **The order** (:meth:`Tree.compare`): with ``fair_share``, jobs sort by
  ``job_sort_formula`` first (higher first), then by fairshare, then in submit order
  (``cmp_sort``, sort.cpp:735-770). Fairshare compares the two entities' paths from the
  root: at the first node where they differ, the lower ``temp_usage / tree_percentage``
  runs first; a node with no share of the machine runs after one with a share
  (``compare_path``, fairshare.cpp:480-512). ``temp_usage`` is the usage at the cycle's
  start (fifo.cpp:393) plus, for each job started or made a top job in this cycle, its
  ``fairshare_usage_res`` over its *requested* resources (``update_usage_on_run``,
  fairshare.cpp:420-438, server_info.cpp:2861-2862, fifo.cpp:1832-1840); after each such
  job the queue is sorted again (fifo.cpp:866-871, 2035-2038).
- **Formula terms**: ``fairshare_perc`` (the entity's ``tree_percentage``),
  ``fairshare_tree_usage`` (its ``usage_factor``: its usage over the root's, blended with
  its parent's factor by its share of the group, fairshare.cpp:980-1021) and
  ``fairshare_factor`` (``2 ** -(usage_factor / tree_percentage)``, 0 without a share),
  job_info.cpp:4030-4033; the usage factor is computed once per cycle, before the formula
  (fifo.cpp:394, 426), from ``usage``, not ``temp_usage``.
- **No shares** (``fairshare_enforce_no_shares``, on unless sched_config turns it off,
  parse.cpp:99): with ``fair_share``, a job whose entity has no share of the machine never
  runs (job_info.cpp:514-521). With ``unknown_shares`` 0 (PBS's default) that is every
  entity ``resource_group`` does not list.
- **Entities** (``fairshare_entity``): ``euser``, ``egroup``, ``Account_Name``,
  ``egroup:euser`` or ``queue`` (parse.cpp:333-342); a job without one is the entity
  ``egroup:euser`` (job_info.cpp:1187-1200).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Callable, Deque, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

from ..site_file import Scheduler

ROOT = "TREEROOT"  # config.h:75
UNKNOWN = "unknown"  # config.h:66
MIN_USAGE = 1.0  # FAIRSHARE_MIN_USAGE, constant.h:335
# unknown_shares for a flat tree of the users with equal shares: no resource_group, every
# entity in the unknown group with 1 share of it (sched_config's "give everyone equal
# shares" example); the stated assumption where a site's tree is not known
EQUAL_SHARES = 10
ENTITIES = ("euser", "egroup", "Account_Name", "egroup:euser", "queue")  # parse.cpp:333-342
MAX_NODES = 1_000_000  # resource_group entries plus the entities met in a workload
# The names fairshare_usage_res may read, and how a job's value of each is known here: over
# resources_used (accrual) and over Resource_List (a job started in the cycle). A trace has
# no CPU time: cput is taken as ncpus x elapsed (every cpu busy), and a job asks for none.
USAGE_NAMES = ("cput", "walltime", "ncpus")
LINEAR_CHECKS = (2, 3, 600, 3601, 86_399, 31_622_400)  # elapsed seconds (Accrual.rate)
FORMULA_NAMES = ("fairshare_perc", "fairshare_tree_usage", "fairshare_factor")

Group = Tuple[str, int, str, int]  # resource_group: (name, cresgrp id, parent, shares)


class Settings(NamedTuple):
    """sched_config's fairshare lines, PBS's defaults (parse.cpp:77, 99, 112-120), the
    ``resource_group`` entries, and the usage file as the simulation starts."""

    fair_share: bool = True
    """The ``fair_share`` line: the order (False: only the formula terms, which PBS keeps
    up to date with a ``job_sort_formula`` too, fifo.cpp:321)."""
    entity: str = "euser"
    usage_res: str = "cput"
    decay_time: int = 24 * 3600  # seconds, at least 1
    decay_factor: float = 0.5
    enforce_no_shares: bool = True
    unknown_shares: int = 0
    groups: Tuple[Group, ...] = ()
    usage: Tuple[Tuple[str, float], ...] = ()
    """Entities' usage at time 0 (``pbsfs -s``; 1 for any other)."""
    last_decay: int = 0
    """The usage file's last decay, in the simulation's time."""


def from_scheduler(sched: Scheduler, unknown_shares: Optional[int] = None) -> Settings:
    """The fairshare settings of a site file's scheduler (``unknown_shares``: instead of the
    file's, PBS's default 0)."""
    if unknown_shares is None:
        unknown_shares = sched.unknown_shares
    return Settings(
        fair_share=sched.fair_share,
        entity=sched.fairshare_entity,
        usage_res=sched.fairshare_usage_res,
        decay_time=sched.fairshare_decay_time,
        decay_factor=sched.fairshare_decay_factor,
        enforce_no_shares=sched.fairshare_enforce_no_shares,
        unknown_shares=unknown_shares,
        groups=tuple(sched.resource_group),
    )


def of_site(sched: Scheduler) -> Optional[Settings]:
    """The fairshare of a site file's scheduler (None: no ``fair_share``).

    :raises ValueError: no entity can have a share (``unknown_shares`` 0 and no group with
        shares): under ``fairshare_enforce_no_shares`` no job would ever run
    """
    if not sched.fair_share:
        return None
    settings = from_scheduler(sched)
    check(settings)
    if settings.enforce_no_shares and not settings.unknown_shares:
        if not any(shares > 0 for *_, shares in settings.groups):
            raise ValueError(
                "the site's fairshare gives no entity a share (unknown_shares 0 and no "
                "resource_group entry with shares): under fairshare_enforce_no_shares PBS "
                "would run no job; set unknown_shares in the site file"
            )
    return settings


def describe(settings: Settings) -> str:
    """One line: what the fairshare is."""
    t = settings.decay_time
    tree = (
        f"{len(settings.groups)} resource_group entries, unknown_shares {settings.unknown_shares}"
        if settings.groups
        else "a flat tree of the "
        + ("users" if settings.entity == "euser" else f"{settings.entity} entities")
        + " with equal shares"
    )
    return (
        f"fair_share by {settings.entity}, usage {settings.usage_res}, decay x"
        f"{settings.decay_factor:g} every {t / 3600:g} h, {tree}"
    )


def config_lines(settings: Settings) -> List[str]:
    """The sched_config lines of ``settings`` (``resource_group`` is a file of its own)."""
    t = settings.decay_time
    hms = f"{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"
    return [
        f"fair_share: {settings.fair_share} ALL",
        f"fairshare_entity: {settings.entity}",
        f"fairshare_usage_res: {settings.usage_res}",
        f"fairshare_decay_time: {hms}",
        f"fairshare_decay_factor: {settings.decay_factor}",
        f"fairshare_enforce_no_shares: {settings.enforce_no_shares}",
        f"unknown_shares: {settings.unknown_shares}",
    ]


def check(settings: Settings) -> None:
    """:raises ValueError: a setting PBS refuses (parse.cpp:314-342) or a bad usage_res"""
    if settings.entity not in ENTITIES:
        raise ValueError(f"fairshare_entity {settings.entity!r}: expected one of {ENTITIES}")
    if not 0 < settings.decay_factor < 1:
        raise ValueError("fairshare_decay_factor must be between 0 and 1 (parse.cpp:317)")
    if settings.decay_time < 1:
        raise ValueError("fairshare_decay_time must be at least 1 s")
    if settings.unknown_shares < 0:
        raise ValueError("unknown_shares must be >= 0")
    usage_function(settings.usage_res)


def usage_function(expression: str) -> Callable[[float, float, float], float]:
    """``fairshare_usage_res`` as a function of ``(cput, walltime, ncpus)``; PBS evaluates it
    with its formula evaluator (fairshare.cpp:431, fifo.cpp:347), 0 when it raises.

    :raises ValueError: not an expression, or it reads a name other than :data:`USAGE_NAMES`
    """
    try:
        code = compile(expression, "<fairshare_usage_res>", "eval")
    except SyntaxError as err:
        raise ValueError(f"fairshare_usage_res {expression!r}: {err.msg}") from None
    unknown = set(code.co_names) - set(USAGE_NAMES)
    if unknown:
        raise ValueError(
            f"fairshare_usage_res {expression!r}: unknown {', '.join(sorted(unknown))}"
            f" (known: {', '.join(USAGE_NAMES)})"
        )
    raw = eval(f"lambda {', '.join(USAGE_NAMES)}: ({expression})", {"__builtins__": {}})

    def value(cput: float, walltime: float, ncpus: float) -> float:
        try:
            return float(raw(cput, walltime, ncpus))
        except ArithmeticError:
            return 0.0

    return value


class _Node:
    __slots__ = ("name", "shares", "parent", "children", "group_perc", "tree_perc", "usage",
                 "temp", "factor", "factor_at", "path")  # fmt: skip

    def __init__(self, name: str, shares: int, parent: Optional[_Node]) -> None:
        self.name, self.shares, self.parent = name, shares, parent
        self.children: List[_Node] = []
        self.group_perc = self.tree_perc = self.factor = 0.0
        self.factor_at = -1  # the Tree.cycle its factor is of (-1: none yet)
        self.usage = self.temp = MIN_USAGE  # fairshare.cpp:817-818
        self.path: List[_Node] = (parent.path if parent else []) + [self]
        if parent is not None:
            parent.children.append(self)


class Tree:
    """The fairshare tree of ``settings.groups``, with usage (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        check(settings)
        self.settings = settings
        self.root = _Node(ROOT, -1, None)
        self.root.tree_perc = 1.0  # fairshare.cpp:328
        self.nodes: Dict[str, _Node] = {ROOT: self.root}
        self.dirty: Set[_Node] = set()  # usage or temp usage changed since start_cycle
        self.cycle = 0  # start_cycle's count: a node's factor is of the cycle factor_at
        self.unknown = self._add(UNKNOWN, settings.unknown_shares, self.root)
        for k, (name, _cgroup, parent, shares) in enumerate(settings.groups):
            self._group(k, name, parent, shares)
        self.percentages(self.root)

    def _group(self, k: int, name: str, parent: str, shares: int) -> None:
        # parse_group (fairshare.cpp:239-297) skips a line whose entity is not unique or
        # whose parent is not yet known, and logs it; a model refuses the file instead.
        where = f"resource_group[{k}] {name!r}"
        if name in self.nodes:
            raise ValueError(f"{where}: not unique (fairshare.cpp:252)")
        up = self.nodes.get(ROOT if parent in ("root", ROOT) else parent)
        if up is None:
            raise ValueError(f"{where}: parent {parent!r} is not listed before it")
        if shares < 0:
            raise ValueError(f"{where}: shares must be >= 0")
        self._add(name, shares, up)

    def _add(self, name: str, shares: int, parent: _Node) -> _Node:
        if len(self.nodes) >= MAX_NODES:
            raise ValueError(f"fairshare tree: more than {MAX_NODES} entities")
        node = self.nodes[name] = _Node(name, shares, parent)
        return node

    def percentages(self, top: _Node) -> None:
        """``calc_fair_share_perc`` below ``top`` (fairshare.cpp:382-406)."""
        total = sum(c.shares for c in top.children)
        for c in top.children:
            if total * top.tree_perc == 0:
                c.group_perc = c.tree_perc = 0.0
            else:
                c.group_perc = c.shares / total
                c.tree_perc = c.group_perc * top.tree_perc
            self.percentages(c)

    def entity(self, name: str) -> _Node:
        """The node of entity ``name``; one not in the tree joins ``unknown`` with 1 share
        and the shares of ``unknown``'s children are counted again (fairshare.cpp:131-139,
        178-196)."""
        node = self.nodes.get(name)
        if node is None:
            node = self._add(name, 1, self.unknown)
            self.percentages(self.unknown)
        return node

    def set_usage(self, name: str, usage: float) -> None:
        """Entity ``name``'s usage as the scheduler reads the usage file (``pbsfs -s``
        writes it): the leaf's value, added to every node above it, which start at 1
        (fairshare.cpp:738-749; an entity at 1 is not in the file, fairshare.cpp:586)."""
        node = self.entity(name)
        if usage < 0:
            raise ValueError(f"usage of {name!r} must be >= 0")
        node.usage = usage
        for g in node.path[:-1]:
            g.usage += usage
        self.dirty.update(node.path)

    def accrue(self, node: _Node, delta: float) -> None:
        """Add ``delta`` of usage to ``node`` and every node above it (fifo.cpp:353-354)."""
        for g in node.path:
            g.usage += delta
        self.dirty.update(node.path)

    def decay(self, times: int = 1) -> None:
        """``times`` decays of every node (fairshare.cpp:451-462): a usage kept at 1 stays
        there, so ``times`` in one product."""
        f = self.settings.decay_factor**times
        for g in self.nodes.values():
            g.usage = max(g.usage * f, MIN_USAGE)
        self.dirty.update(self.nodes.values())

    def start_cycle(self) -> None:
        """``temp_usage`` back to ``usage`` and the usage factors (fifo.cpp:393-394). Only
        the nodes whose usage or temp usage changed since are set again (``dirty``), and the
        factors, which only the formula terms read, when :meth:`terms` first needs them."""
        for g in self.dirty:
            g.temp = g.usage
        self.dirty = set()
        self.cycle += 1

    def _factor(self, node: _Node) -> float:
        # The usage factor of calc_usage_factor (fairshare.cpp:980-1021), computed along
        # node's path only, when a formula term first reads it in a cycle: usage does not
        # change within a cycle (add_temp changes temp), so it is the value the whole
        # tree's pass at the start of the cycle gives.
        if node.factor_at == self.cycle:
            return node.factor
        root = self.root
        parent = node.parent
        if parent is root:  # fairshare.cpp:1017-1020
            f = node.usage / root.usage
        else:  # calc_usage_factor_rec (fairshare.cpp:980-993)
            assert parent is not None
            u = node.usage / root.usage
            f = u + (self._factor(parent) - u) * node.group_perc
        node.factor, node.factor_at = f, self.cycle
        return f

    def add_temp(self, node: _Node, usage: float) -> None:
        """A job started or made a top job: its usage on its path, for this cycle only
        (fairshare.cpp:431-434)."""
        for g in node.path:
            g.temp += usage
        self.dirty.update(node.path)

    @staticmethod
    def compare(a: _Node, b: _Node) -> int:
        """-1 when ``a``'s jobs go first, 1 when ``b``'s, 0 a tie (fairshare.cpp:480-512)."""
        for x, y in zip(a.path, b.path):
            if x is y:
                continue
            if x.tree_perc <= 0 or y.tree_perc <= 0:
                return (x.tree_perc <= 0) - (y.tree_perc <= 0)
            v, w = x.temp / x.tree_perc, y.temp / y.tree_perc
            if v != w:
                return -1 if v < w else 1
        return 0

    def terms(self, node: _Node) -> Tuple[float, float, float]:
        """``fairshare_perc``, ``fairshare_tree_usage`` and ``fairshare_factor`` of an entity
        (job_info.cpp:4030-4033), after :meth:`start_cycle`."""
        perc, factor = node.tree_perc, self._factor(node)
        return perc, factor, (0.0 if perc == 0 else math.pow(2, -(factor / perc)))


def entity_names(
    entity: str,
    user: Sequence[str],
    group: Optional[Sequence[str]] = None,
    account: Optional[Sequence[str]] = None,
    queue: Optional[Sequence[str]] = None,
) -> List[str]:
    """Each job's fairshare entity; a job without one is ``egroup:euser``
    (job_info.cpp:1187-1200).

    :raises ValueError: the workload lacks the column the entity reads
    """
    column = {"euser": user, "egroup": group, "Account_Name": account, "queue": queue}
    groups = group if group is not None else [""] * len(user)
    if entity == "egroup:euser":
        return [f"{g}:{u}" for g, u in zip(groups, user)]
    values = column.get(entity)
    if values is None:
        raise ValueError(f"fairshare_entity {entity}: the workload has no such column")
    return [v or f"{g}:{u}" for v, g, u in zip(values, groups, user)]


class Accrual(NamedTuple):
    """What a job's ``fairshare_usage_res`` reads: its processors and requested walltime."""

    procs: Sequence[int]
    wall: Sequence[int]

    def used(self, value: Callable[[float, float, float], float], j: int, elapsed: int) -> float:
        """Over ``resources_used`` after ``elapsed`` seconds (cput: every cpu busy)."""
        p = self.procs[j]
        return value(p * elapsed, elapsed, p)

    def requested(self, value: Callable[[float, float, float], float], j: int) -> float:
        """Over ``Resource_List`` (no cput requested)."""
        return value(0, self.wall[j], self.procs[j])

    def rate(self, value: Callable[[float, float, float], float], j: int) -> Optional[float]:
        """The growth per second of :meth:`used` when it is exactly linear in the elapsed
        time (checked at times up to a year), else None."""
        at0, at1 = self.used(value, j, 0), self.used(value, j, 1)
        rate = at1 - at0
        for e in LINEAR_CHECKS:
            if self.used(value, j, e) != at0 + rate * e:
                return None
        return rate


class State:
    """The scheduler's fairshare between cycles: the tree, the last decay, and the jobs
    running at the end of the last cycle (``last_running``, job -> start) and when that
    was (``last_end``)."""

    def __init__(self, settings: Settings, entities: Sequence[str], accrual: Accrual) -> None:
        self.tree = Tree(settings)
        self.settings = settings
        self.value = usage_function(settings.usage_res)
        self.accrual = accrual
        for name, usage in settings.usage:
            self.tree.set_usage(name, usage)
        self.node = [self.tree.entity(e) for e in entities]
        self.last_decay = settings.last_decay
        self.last_running: Dict[int, int] = {}
        self.last_end = 0
        self.last_rates: Dict[_Node, float] = {}  # the linear jobs' rates per entity
        self.nonlinear: Set[int] = set()  # the others of last_running
        # each job's growth of usage per second when its usage is linear in its elapsed
        # time (cput, walltime, ncpus*walltime: every expression of USAGE_NAMES a site
        # uses), found once per job; None: not linear (then computed at each cycle)
        self.rate: Dict[int, Optional[float]] = {}

    def start_cycle(self, now: int, running: Dict[int, int]) -> None:
        """init_scheduling_cycle's upkeep (fifo.cpp:334-394) at ``now``, with ``running``
        (job -> start) the jobs running now: accrue the growth of those that ran at the end
        of the last cycle, decay, then temp usage and usage factors."""
        if self.last_running:
            self._accrue(now, running)
        dt = self.tree.settings.decay_time
        if now - self.last_decay > dt:
            # fifo.cpp:368-377 decays while now - k * dt - last_decay > dt: k times
            self.tree.decay((now - self.last_decay - 1) // dt)
            self.last_decay = now - (now - self.last_decay) % dt  # fifo.cpp:380-386
        self.tree.start_cycle()

    def _accrue(self, now: int, running: Dict[int, int]) -> None:
        # Each job found running again grows by its usage now less its usage at the end of
        # the last cycle (fifo.cpp:344-354; a job gone since is not found), never below 0
        # (IF_NEG_THEN_ZERO); summed per entity, then added up its path once. A linear job
        # grows by its rate times the time since: the rates were summed per entity at the
        # end of the last cycle, less those of the jobs gone since.
        acc, value, last = self.accrual, self.value, self.last_end
        rates = dict(self.last_rates)
        node, rate = self.node, self.rate
        for j in self.last_running.keys() - running.keys():
            r = rate[j]
            if r is not None:
                rates[node[j]] -= r
        dt = now - last
        gained = {n: r * dt for n, r in rates.items()}
        for j in sorted(self.nonlinear):
            start = running.get(j)
            if start is not None:
                delta = acc.used(value, j, now - start) - acc.used(value, j, last - start)
                if delta > 0:
                    gained[node[j]] = gained.get(node[j], 0.0) + delta
        for n, delta in gained.items():
            if delta > 0:
                self.tree.accrue(n, delta)

    def end_cycle(self, now: int, running: Dict[int, int]) -> None:
        """``last_running`` from the jobs running at the end of the cycle, kept only with
        ``fair_share`` (fifo.cpp:1080-1082); the rates per entity follow it, the jobs
        gone since the last cycle's end out, those started in this one in."""
        if not self.settings.fair_share:
            return
        rates, node, rate = self.last_rates, self.node, self.rate
        for j in self.last_running.keys() - running.keys():
            r = rate[j]
            if r is None:
                self.nonlinear.discard(j)
            else:
                rates[node[j]] -= r
        for j in running.keys() - self.last_running.keys():
            r = rate.get(j, -1.0)
            if r is not None and r < 0:
                r = rate[j] = self._rate(j)
            if r is None:
                self.nonlinear.add(j)
            else:
                n = node[j]
                rates[n] = rates.get(n, 0.0) + r
        self.last_running, self.last_end = running, now

    def _rate(self, j: int) -> Optional[float]:
        r = self.accrual.rate(self.value, j)
        return r if r is not None and r >= 0 else None  # a negative one: clamped per cycle

    def on_run(self, j: int) -> None:
        self.tree.add_temp(self.node[j], self.accrual.requested(self.value, j))

    def never_runs(self, j: int) -> bool:
        """``fairshare_enforce_no_shares`` and no share (job_info.cpp:514-521)."""
        s = self.settings
        return s.fair_share and s.enforce_no_shares and self.node[j].tree_perc == 0


class CycleOrder:
    """The queue of one cycle in PBS's fairshare order, sorted again after each job that
    starts or becomes a top job (fifo.cpp:2035-2038): iterate it as the cycle considers
    jobs; :meth:`started` is told of each job started.

    ``values``: each queued job's ``job_sort_formula`` value (None: no formula). Jobs sort
    by value (higher first), then by fairshare, then in submit order; within one value and
    one entity the order never changes, so each step compares the entities' first jobs.
    ``group``: each job's group (:func:`.queues.queue_groups`: with ``by_queue``, its
    queue's place), taken in ascending order before the value (None: one group): with
    ``by_queue`` PBS sorts each queue's jobs on its own (sort.cpp:1142-1160) and takes the
    queues in turn (fifo.cpp:2112-2130), sorting again after each start or top job
    (fifo.cpp:2036-2040).
    ``top_jobs``: how many jobs that do not start become top jobs (the cycle's
    ``backfill_depth`` under ``strict_ordering``, else 0), whose usage counts as if run
    (fifo.cpp:1832-1840): the first ``top_jobs`` handed out that do not start, as the
    cycle makes them (a job that can never run is no top job, but ``simulate_pbs`` refuses
    a workload with one).
    """

    def __init__(
        self,
        state: State,
        queue: Sequence[int],
        values: Optional[Dict[int, float]],
        top_jobs: int,
        group: Optional[Callable[[int], int]] = None,
    ) -> None:
        self.state = state
        self.tops_left = top_jobs
        self.last: Optional[int] = None
        self.last_started = False
        by_key: Dict[Tuple[int, float], Dict[int, Deque[int]]] = {}
        for j in sorted(queue):  # submit order: the workload's is FCFS
            key = (0 if group is None else group(j), 0.0 if values is None else -values[j])
            by_key.setdefault(key, {}).setdefault(id(state.node[j]), deque()).append(j)
        self.buckets = deque(by_key[k] for k in sorted(by_key))

    def __iter__(self) -> CycleOrder:
        return self

    def __next__(self) -> int:
        self._settle()
        while self.buckets and not self.buckets[0]:
            self.buckets.popleft()
        if not self.buckets:
            raise StopIteration
        bucket, node, cmp = self.buckets[0], self.state.node, self.state.tree.compare
        best, first = -1, -1
        for key, jobs in bucket.items():  # the entity whose first job goes first
            j = jobs[0]
            if best < 0 or (cmp(node[j], node[first]) or j - first) < 0:
                best, first = key, j
        jobs = bucket[best]
        jobs.popleft()
        if not jobs:
            del bucket[best]
        self.last, self.last_started = first, False
        return first

    def _settle(self) -> None:
        # The job handed out last became a top job if it did not start while top jobs were
        # still being made: its usage counts for the rest of the cycle (fifo.cpp:1832-1840).
        if self.last is not None and not self.last_started and self.tops_left > 0:
            self.tops_left -= 1
            self.state.on_run(self.last)
        self.last = None

    def started(self, j: int) -> None:
        """Job ``j`` (the one handed out last) starts (server_info.cpp:2861-2862)."""
        self.last_started = True
        self.state.on_run(j)
