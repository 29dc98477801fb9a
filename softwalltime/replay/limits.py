"""Run limits in the scheduler model (issue 46): ``max_run`` and ``max_run_res.ncpus`` of the
server and of each queue, per user, group, project and overall (pure).

Each rule follows OpenPBS 23.06.06's scheduler (``src/scheduler/limits.cpp``, line numbers of
that tree); ``tests/pbs/test_queues_real.py`` shows them on the real server.

- **Spelling** (:func:`parse_limits`): ``[o:PBS_ALL=N]``, ``[u:PBS_GENERIC=N]``,
  ``[u:name=N]``, ``[g:PBS_GENERIC=N]``, ``[g:name=N]``, ``[p:PBS_GENERIC=N]``,
  ``[p:name=N]``, comma-separated, names optionally quoted, as PBS parses them
  (``entlim_parse_one``, entlim_parse.c:172-297: ``o`` only with ``PBS_ALL``, the others
  never with it, no negative value). The old attributes (``max_user_run``...) are the same
  limits with other names (limits.cpp:350-355) and are not read here.
- **Counts**: the running jobs and their ncpus per user, group, project and overall, on the
  server and in each queue (``update_server_on_run``/``..._on_end``, server_info.cpp;
  ``update_queue_on_run``, queue_info.cpp). :meth:`Limits.start` and
  :meth:`Limits.release` keep them.
- **The check** (:meth:`Limits.check`, ``check_limits``, limits.cpp:787-1030, every function
  of ``limfuncs``, limits.cpp:288-305): a job is held (:data:`.machine.LIMITED`) when, on
  the server or in its queue, a run limit is already reached, ``max <= used``
  (``check_server_max_user_run``, limits.cpp:1181-1190; ``check_server_max_run``,
  limits.cpp:1813-1819), or a resource limit would be passed, ``used + request > max``
  (``check_max_user_res``, limits.cpp:2759-2768; ``check_queue_max_res``,
  limits.cpp:1688-1692). A limit on the named user (group, project) replaces the generic
  one for that entity, even when higher ("ignore a generic limit", limits.cpp:1181-1186,
  2759-2763).
- **A job that can never satisfy a limit** (its ncpus above a ``max_run_res.ncpus`` that
  applies to it, or a ``max_run`` of 0): PBS does not say "never" (a limit error is
  ``NOT_RUN``, check.cpp:821-830, not ``NEVER_RUN``); the job is checked every cycle and
  stays queued, and no start time is ever found for it (``calc_run_time`` runs out of
  events: "Can't find start time estimate", simulate.cpp:784-789), so it is never a top
  job. :meth:`Limits.can_ever_run` is False for it.
- **A held job and the top jobs**: ``should_backfill_with_job`` (fifo.cpp:1603-1663) does
  not look at why a job cannot run: with ``strict_ordering`` a job held by a limit is a top
  job candidate like one short of resources, and ``add_job_to_calendar``
  (fifo.cpp:1690-1733) places it where ``calc_run_time`` (simulate.cpp:752-771) first finds
  it runnable, limits included: the simulated ends free the counts
  (``update_server_on_end``, server_info.cpp:1713-1724). :meth:`Limits.free_at` gives that
  time for the limits alone.
- **Equivalence classes**: a held job marks its class like any job that cannot run
  (fifo.cpp:989-997); with limits the class key includes the queue (when the queue has
  limits or its own vnodes, ``resresv_set_use_queue``, job_info.cpp:2223-2233) and the
  user, group or project when a limit of that kind exists on the server or that queue
  (job_info.cpp:2158-2203). :meth:`Limits.class_key` is that part of the key.

Not modelled: soft limits (``max_run_soft``..., used only for preemption), limits on other
resources than ncpus (refused by :func:`parse_limits`' caller), ``max_queued``, and
``check_limits``' look-ahead: when a top job's planned start falls before a candidate's end,
the counts at that start are checked too (limits.cpp:818-936).
"""

from __future__ import annotations

import bisect
import re
from typing import Any, Dict, List, NamedTuple, Optional, Protocol, Sequence, Set, Tuple

from ..errors import ParseError
from ..site_file import Site
from .machine import LIMITED, NEVER, OK, Where

ALL = "PBS_ALL"
GENERIC = "PBS_GENERIC"
DEFAULT_PROJECT = "_pbs_project_default"  # PBS_DEFAULT_PROJECT (include/job.h:978)
KINDS = ("o", "u", "g", "p")
MAX_LIMITS = 10_000  # entries in one attribute: a site file is input
MODELLED_RESOURCES = ("ncpus",)
# One entry: '[' kind ':' name '=' value ']', the name quoted or bare (entlim_parse.c)
_ENTRY = re.compile(
    r"""\s*\[\s*([ugpo]):(?:"([^"]*)"|'([^']*)'|([^\s=\]"']+))\s*=\s*(\d+)\s*\]\s*"""
)
_BAD_NAME = set('/[]";:|<>+,?*')  # ETLIM_INVALIDCHAR (include/pbs_entlim.h:63)


class LimitSet(NamedTuple):
    """One limit attribute (``max_run``, or ``max_run_res.ncpus``) of the server or a queue:
    the overall limit, and per user, group and project by name (:data:`GENERIC`: every one
    without a limit of its own)."""

    overall: Optional[int] = None
    user: Dict[str, int] = {}
    group: Dict[str, int] = {}
    project: Dict[str, int] = {}

    def empty(self) -> bool:
        return self.overall is None and not (self.user or self.group or self.project)


def parse_limits(text: Optional[str], where: str) -> LimitSet:
    """A :class:`LimitSet` from PBS's spelling (None or "": no limit).

    :raises ParseError: ``where`` and the entry that is not a limit
    """
    if not text:
        return LimitSet()
    entries = _split(text)
    if len(entries) > MAX_LIMITS:
        raise ParseError(f"{where}: more than {MAX_LIMITS} limits")
    overall: Optional[int] = None
    by: Dict[str, Dict[str, int]] = {"u": {}, "g": {}, "p": {}}
    for entry in entries:
        kind, name, value = _entry(entry, where)
        if kind == "o":
            overall = value
        else:
            by[kind][name] = value
    return LimitSet(overall, by["u"], by["g"], by["p"])


def _split(text: str) -> List[str]:
    # Commas between entries; a quoted name may hold one.
    out: List[str] = []
    cur: List[str] = []
    quote = ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == ",":
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur))
    return out


def _entry(entry: str, where: str) -> Tuple[str, str, int]:
    m = _ENTRY.fullmatch(entry)
    if m is None:
        raise ParseError(f"{where}: {entry.strip()!r} is not a limit like [u:PBS_GENERIC=2]")
    kind, name = m.group(1), next(g for g in m.group(2, 3, 4) if g is not None)
    if (kind == "o") != (name == ALL):
        raise ParseError(f"{where}: {entry.strip()!r}: PBS_ALL goes with o: and only with it")
    if not name or _BAD_NAME & set(name):
        raise ParseError(f"{where}: {entry.strip()!r}: not an entity name")
    value = int(m.group(5))
    if value > 2**31:
        raise ParseError(f"{where}: {entry.strip()!r}: value too large")
    return kind, name, value


def entity_limit(limits: Dict[str, int], name: str) -> Optional[int]:
    """The limit on entity ``name``: its own if set, else the generic one, else None
    (limits.cpp:1181-1190)."""
    own = limits.get(name)
    return own if own is not None else limits.get(GENERIC)


class ScopeLimits(NamedTuple):
    """The hard limits of the server (``scope`` None) or of one queue."""

    scope: Optional[str]
    run: LimitSet
    ncpus: LimitSet

    def kinds(self) -> Set[str]:
        """The entity kinds (``u``, ``g``, ``p``) these limits name."""
        out = set()
        for lim in (self.run, self.ncpus):
            out |= {k for k, d in (("u", lim.user), ("g", lim.group), ("p", lim.project)) if d}
        return out


def scope_limits(scope: Optional[str], max_run: Optional[str], res: Dict[str, str]) -> ScopeLimits:
    """Parse one scope's ``max_run`` and ``max_run_res``.

    :raises ParseError: a limit that is not one, or on a resource the model does not count
    """
    where = "server" if scope is None else f"queue {scope}"
    other = sorted(set(res) - set(MODELLED_RESOURCES))
    if other:
        raise ParseError(f"{where}: max_run_res.{other[0]}: only max_run_res.ncpus is modelled")
    return ScopeLimits(
        scope,
        parse_limits(max_run, f"{where} max_run"),
        parse_limits(res.get("ncpus"), f"{where} max_run_res.ncpus"),
    )


class JobEntity(NamedTuple):
    """What the limits know of a job: its queue, owner, group, project and ncpus."""

    queue: str
    user: str
    group: str
    project: str
    ncpus: int


_Key = Tuple[Optional[str], str, str]  # (scope, kind, entity name)
_Rule = Tuple[_Key, Optional[int], Optional[int]]  # a count key, its max_run, its max ncpus


class Limits:
    """The site's run limits and the counts of the running jobs (between and during
    cycles). Jobs are indices into ``jobs``."""

    def __init__(self, site: Site, jobs: Sequence[JobEntity]) -> None:
        self.jobs = jobs
        self.scopes: Dict[Optional[str], ScopeLimits] = {
            None: scope_limits(None, site.max_run, site.max_run_res)
        }
        for q in site.queues:
            lim = scope_limits(q.name, q.max_run, q.max_run_res)
            if not (lim.run.empty() and lim.ncpus.empty()):
                self.scopes[q.name] = lim
        self.pooled = {v.queue for v in site.vnodes if v.queue is not None}
        self.jobs_of: Dict[_Key, int] = {}
        self.ncpus_of: Dict[_Key, int] = {}
        self.class_keys: Dict[int, Tuple[str, ...]] = {}  # class_key's, kept (it never changes)
        # per job, kept (a job's entities and the limits never change): its count keys, and
        # the limits that apply to it (_rules); the forward runs ask them of every queued
        # job at every cycle and at each top job's reservation
        self.keys_of: Dict[int, Tuple[_Key, ...]] = {}
        self.rules_of: Dict[int, Tuple[_Rule, ...]] = {}

    def any(self) -> bool:
        """Whether the site has any limit (else every check is OK)."""
        return any(not (s.run.empty() and s.ncpus.empty()) for s in self.scopes.values())

    def _applying(self, j: int) -> List[ScopeLimits]:
        q = self.jobs[j].queue
        return [s for s in (self.scopes.get(q), self.scopes[None]) if s is not None]

    @staticmethod
    def _entities(job: JobEntity) -> Tuple[Tuple[str, str], ...]:
        return (("o", ALL), ("u", job.user), ("g", job.group), ("p", job.project))

    def _keys(self, j: int) -> Tuple[_Key, ...]:
        """The counts job ``j`` is in: its entities' on the server and in its queue."""
        keys = self.keys_of.get(j)
        if keys is None:
            job = self.jobs[j]
            keys = self.keys_of[j] = tuple(
                (scope, kind, name)
                for scope in (None, job.queue)
                for kind, name in self._entities(job)
            )
        return keys

    def _rules(self, j: int) -> Tuple[_Rule, ...]:
        """The limits that apply to job ``j``: per count key of its entities, on the server
        and in its queue (when that has limits), the ``max_run`` and the ``max_run_res.ncpus``
        limit (None: none), the keys without either left out."""
        rules = self.rules_of.get(j)
        if rules is None:
            job, out = self.jobs[j], []
            for lim in self._applying(j):
                for kind, name in self._entities(job):
                    run, cap = _limit(lim.run, kind, name), _limit(lim.ncpus, kind, name)
                    if run is not None or cap is not None:
                        out.append(((lim.scope, kind, name), run, cap))
            rules = self.rules_of[j] = tuple(out)
        return rules

    def start(self, j: int) -> None:
        """Job ``j`` started: it counts against its entities on the server and its queue."""
        p = self.jobs[j].ncpus
        jobs_of, ncpus_of = self.jobs_of, self.ncpus_of
        for key in self._keys(j):
            jobs_of[key] = jobs_of.get(key, 0) + 1
            ncpus_of[key] = ncpus_of.get(key, 0) + p

    def release(self, j: int) -> None:
        """Running job ``j`` ended."""
        p = self.jobs[j].ncpus
        for key in self._keys(j):
            self.jobs_of[key] -= 1
            self.ncpus_of[key] -= p

    def check(self, j: int) -> int:
        """:data:`.machine.OK`, or :data:`.machine.LIMITED` when a limit holds job ``j``."""
        ok = _within(self._rules(j), self.jobs_of, self.ncpus_of, self.jobs[j].ncpus)
        return OK if ok else LIMITED

    def can_ever_run(self, j: int) -> bool:
        """False when no count could ever let job ``j`` start (see the module docstring)."""
        p = self.jobs[j].ncpus
        return not any(run == 0 or (cap is not None and p > cap) for _, run, cap in self._rules(j))

    def free_at(self, j: int, ends: Sequence[Tuple[int, int]], now: int) -> Optional[int]:
        """When the limits first let job ``j`` start, as the running jobs end at ``ends``
        (``(estimated end, job)``, sorted): ``now`` if they already do, None if never
        (the limits alone; ``calc_run_time`` checks them with the resources at each
        event, simulate.cpp:752-771). The counts are left as they were: the ends are
        applied to a copy of the counts the job's limits read (an end changes no other)."""
        rules, p = self._rules(j), self.jobs[j].ncpus
        jobs_of = {key: self.jobs_of.get(key, 0) for key, _, _ in rules}
        ncpus_of = {key: self.ncpus_of.get(key, 0) for key, _, _ in rules}
        if _within(rules, jobs_of, ncpus_of, p):
            return now
        for end, k in ends:
            pk, changed = self.jobs[k].ncpus, False
            for key in self._keys(k):
                if key in jobs_of:
                    jobs_of[key] -= 1
                    ncpus_of[key] -= pk
                    changed = True
            if changed and _within(rules, jobs_of, ncpus_of, p):
                return max(end, now)
        return None

    def class_key(self, j: int) -> Tuple[str, ...]:
        """What the limits add to job ``j``'s equivalence class key (job_info.cpp:2158-2233):
        its queue when that has limits or its own vnodes, then its user, group and project
        when a limit of that kind exists on the server or in that queue. Kept per job: the
        cycle asks it of every queued job at every cycle (on CERIT-SC, a third of
        ``eval-start --site``'s time before it was kept)."""
        key = self.class_keys.get(j)
        if key is None:
            key = self.class_keys[j] = self._class_key(j)
        return key

    def _class_key(self, j: int) -> Tuple[str, ...]:
        job = self.jobs[j]
        qlim = self.scopes.get(job.queue)
        key: List[str] = []
        if qlim is not None or job.queue in self.pooled:
            key.append(job.queue)
        kinds = self.scopes[None].kinds() | (qlim.kinds() if qlim is not None else set())
        key += [name for kind, name in self._entities(job)[1:] if kind in kinds]
        return tuple(key)


def _within(rules: Sequence[_Rule], jobs_of: Dict[_Key, int], ncpus_of: Dict[_Key, int],
            ncpus: int) -> bool:  # fmt: skip
    """Whether a job of ``ncpus`` passes its ``rules`` (:meth:`Limits._rules`) with these
    counts: no run limit reached, ``max <= used`` (limits.cpp:1181-1190, 1813-1819), no
    resource limit passed, ``used + request > max`` (limits.cpp:2759-2768, 1688-1692)."""
    for key, run, cap in rules:
        if run is not None and run <= jobs_of.get(key, 0):
            return False
        if cap is not None and ncpus_of.get(key, 0) + ncpus > cap:
            return False
    return True


def _limit(lim: LimitSet, kind: str, name: str) -> Optional[int]:
    if kind == "o":
        return lim.overall
    return entity_limit({"u": lim.user, "g": lim.group, "p": lim.project}[kind], name)


# ---------------------------------------------------------------------------------------
# The limits around a machine model


class ReservesAfter(Protocol):
    """A cycle's resources that can place a top job no earlier than a given time (what a
    job held by a limit needs: ``calc_run_time`` takes the first event at which both its
    resources and its limits let it run, simulate.cpp:752-771), e.g.
    :class:`.pool.PoolCycle`."""

    def check(self, j: int, now: int, end: int) -> int: ...

    def start(self, j: int, now: int, end: int, d: int) -> None: ...

    def reserve(self, j: int, d: int, window: int, epoch: int, after: int = ...) -> int: ...

    def full(self) -> bool: ...


class _LimitedCycle:
    """One cycle of :class:`SiteLimits`: the inner model's resources behind the limits."""

    def __init__(
        self, inner: ReservesAfter, limits: Limits, now: int, ends: Sequence[Tuple[int, int]]
    ) -> None:
        self.inner, self.limits, self.now = inner, limits, now
        self.ends = list(ends)  # and the jobs this cycle starts: they free the counts too

    def check(self, j: int, now: int, end: int) -> int:
        """:data:`.machine.LIMITED` when a limit holds the job (the inner model's
        :data:`.machine.NEVER` first, as PBS checks the resources over all nodes before the
        limits, check.cpp:781-800, 821); :data:`.machine.NEVER` when no count could ever
        let it run, so that it is no top job (see the module docstring)."""
        if self.limits.check(j) == OK:
            return self.inner.check(j, now, end)
        if not self.limits.can_ever_run(j) or self.inner.check(j, now, end) == NEVER:
            return NEVER
        return LIMITED

    def start(self, j: int, now: int, end: int, d: int) -> None:
        self.inner.start(j, now, end, d)
        self.limits.start(j)
        bisect.insort(self.ends, (now + d, j))

    def reserve(self, j: int, d: int, window: int, epoch: int) -> int:
        """The top job's start: the inner model's, no earlier than the limits let it run
        (the limits' check came first: :meth:`check` says NEVER when they never will)."""
        after = self.limits.free_at(j, self.ends, self.now)
        if after is None or after <= self.now:
            return self.inner.reserve(j, d, window, epoch)
        return self.inner.reserve(j, d, window, epoch, after=after)

    def full(self) -> bool:
        return self.inner.full()


class SiteLimits:
    """A machine model (:class:`.machine.MachineModel`) with the site's run limits in front:
    a job a limit holds is :data:`.machine.LIMITED` before its resources are asked; the
    counts follow the starts and ends. A site without limits changes nothing (use the
    inner model as it is: :meth:`Limits.any`)."""

    def __init__(self, inner: Any, limits: Limits) -> None:
        self.inner, self.limits = inner, limits
        self.class_part = inner.class_part  # the limits' part comes with the SiteOrder

    def can_ever_run(self, j: int) -> bool:
        """The inner model's answer: a job no limit count lets run stays queued, as in PBS
        (its checks say :data:`.machine.NEVER`)."""
        return bool(self.inner.can_ever_run(j))

    def cycle(self, now: int, ends: Sequence[Tuple[int, int]]) -> _LimitedCycle:
        # ends: (estimated end, job) sorted, the order the limits free in
        return _LimitedCycle(self.inner.cycle(now, ends), self.limits, now, ends)

    def hold(self, j: int, where: Optional[Where] = None) -> bool:
        held = bool(self.inner.hold(j, where))
        self.limits.start(j)
        return held

    def where(self, j: int) -> Optional[Where]:
        return self.inner.where(j)  # type: ignore[no-any-return]

    def release(self, j: int) -> None:
        self.inner.release(j)
        self.limits.release(j)

    def full(self) -> bool:
        return bool(self.inner.full())

    def class_key(self, j: int) -> Tuple[str, ...]:
        return self.limits.class_key(j)


def job_entities(
    queues: Sequence[str], users: Sequence[str], groups: Sequence[str], ncpus: Sequence[int]
) -> List[JobEntity]:
    """The :class:`JobEntity` of each job from the workload's columns (its execution
    queue, user, group: ``""`` for none, ncpus); the project is PBS's default one (the
    traces record none)."""
    return [
        JobEntity(q, u, g, DEFAULT_PROJECT, p) for q, u, g, p in zip(queues, users, groups, ncpus)
    ]
