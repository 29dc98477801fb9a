"""The machine at node level: a site's vnodes, the jobs' chunks on them, and PBS's calendar
(pure, issue 46). :class:`NodeModel` is a :class:`.machine.MachineModel`; its cycles
(:class:`NodeCycle`) are :class:`.machine.CycleResources`.

- **Running jobs** hold their parts (vnode, ncpus, mem, ngpus) until they end; an
  ``excl`` job holds its vnodes whole (:mod:`.placement`).
- **A job that may start now** (``check``): its chunks are placed (:func:`.placement.place`)
  on the vnodes as free now and as they stay free until its end (its soft walltime, or
  what the caller passes) given the top jobs reserved earlier in this cycle: PBS's
  ``check_resources_for_node`` walks the calendar's run and end events up to the job's
  end, frees what ends and takes what starts on the vnode, and takes the least it saw
  (node_info.cpp:3440-3520); a vnode where a job starts before this job's end is none of
  this job's when either is exclusive (node_info.cpp:3497-3498).
- **A top job's start** (``reserve``): PBS's ``calc_run_time`` (simulate.cpp:714-825)
  tries the job now and, while it does not fit, runs the calendar forward (running jobs
  end, top jobs start and end, ``simulate_events``) in the windows of ``opt_backfill_fuzzy``
  (simulate.cpp:190-214), trying it again after each; where it fits it is placed, and its
  parts are held from its start to its end for the rest of the cycle (a run and an end
  event on the calendar, simulate.cpp:801-817). The window arithmetic is
  :meth:`.profile.Profile.earliest`'s. A job that fits nowhere even once every event has
  passed (wider than its node pool) is given the last event and holds nothing (PBS:
  "Can't find start time estimate", simulate.cpp:783-790).

On a site of one vnode holding every cpu, with every job one chunk of its processors, this
is the pool of :mod:`.pool` (``tests/test_nodes.py`` checks the two give the same
simulation).
"""

from __future__ import annotations

import bisect
from typing import (
    Callable,
    Dict,
    FrozenSet,
    Hashable,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
    cast,
)

from ...site_file import Site
from ..machine import NEVER, NO_RESOURCES, OK, Where
from ..sim_workload import SimWorkload, take
from .placement import Alloc, View, place
from .spec import Request, parse_request

NodeFilter = Callable[[int], Sequence[int]]
"""The vnodes (indices into the site's, in order) job ``j`` may use: its queue's pool."""

Placed = Tuple[Alloc, Tuple[int, ...]]
"""Where a job runs on the vnodes (:data:`.machine.Where`): its parts and the vnodes it
holds exclusively."""

SKIP_NEVER_FITS = "chunks no vnode pool holds"  # the sites' fit_machine reason
_END, _RUN = 0, 1  # at one instant, ends before starts (the start is placed on what ended)


def queue_pool(site: Site, work: SimWorkload) -> NodeFilter:
    """PBS's node pool of a job's queue: the vnodes whose ``queue`` is that queue, if it
    has any (queue_info.cpp:305-310, 169-171; check.cpp:1614-1618), else the vnodes with no
    queue (``unassoc_nodes``, server_info.cpp:258-262; check.cpp:1621-1622). A job with no
    queue is in the site's default queue."""
    by_queue: Dict[Optional[str], List[int]] = {}
    for v, node in enumerate(site.vnodes):
        by_queue.setdefault(node.queue, []).append(v)
    free = by_queue.get(None, [])
    queues = work.site.queue if work.site is not None else None

    def pool(j: int) -> Sequence[int]:
        name = (queues[j] if queues is not None else "") or site.default_queue
        return by_queue.get(name, free) if name is not None else free

    return pool


def fit_site(
    work: SimWorkload, site: Site, node_filter: Optional[NodeFilter] = None
) -> SimWorkload:
    """Drop the jobs whose chunks their node pool can never hold (counted as skipped): PBS
    leaves them queued for ever ("Not Running: Insufficient amount of resource"), and
    :func:`.pbsched.simulate_pbs` refuses a job that can never run, as
    :func:`.sim_workload.fit_machine` drops jobs wider than the pool.

    :raises ValueError: a job's select or place is not one PBS reads (naming it)
    """
    model = NodeModel(site, work, node_filter)
    keep = [j for j in range(len(work.submit)) if model.can_ever_run(j)]
    if len(keep) == len(work.submit):
        return work
    skipped = dict(work.skipped)
    skipped[SKIP_NEVER_FITS] = skipped.get(SKIP_NEVER_FITS, 0) + len(work.submit) - len(keep)
    return take(work, keep)._replace(skipped=skipped)


class _Job:
    """What the model keeps of one job: its request, hosts of its pool, and the vnodes of
    the pool each chunk kind's other resources allow."""

    __slots__ = ("req", "hosts", "ok", "flat", "ever")

    def __init__(self, req: Request, hosts: List[List[int]], ok: List[Set[int]]) -> None:
        self.req, self.hosts, self.ok = req, hosts, ok
        self.flat = all(len(h) == 1 for h in hosts)
        self.ever: Optional[bool] = None  # fits the empty pool: the kind's, asked once


class NodeModel:
    """A site's vnodes between cycles: free resources, running jobs' parts (module
    docstring). ``node_filter``: each job's vnodes (default :func:`queue_pool`)."""

    def __init__(self, site: Site, work: SimWorkload,
                 node_filter: Optional[NodeFilter] = None) -> None:  # fmt: skip
        self.site, self.work = site, work
        self.filter = node_filter or queue_pool(site, work)
        vn = site.vnodes
        line = set(site.scheduler.resources)
        self.checked = ("ncpus" in line, "mem" in line, "ngpus" in line)
        self.strings = line  # non-boolean custom resources compared (check.cpp:1243)
        self.fc = [v.ncpus for v in vn]
        self.fm = [v.mem_kb for v in vn]
        self.fg = [v.ngpus for v in vn]
        self.free_cpus = sum(self.fc)
        self.njobs = [0] * len(vn)
        self.xheld = [0] * len(vn)
        self.on: List[Set[int]] = [set() for _ in vn]  # the running jobs on each vnode
        self.parts: Dict[int, Alloc] = {}
        self.held: Dict[int, Tuple[int, ...]] = {}
        self.jobs: Dict[int, _Job] = {}
        self.names = frozenset(v.name for v in vn)
        self._reqs: Dict[Tuple[str, str], Request] = {}
        self._kinds: Dict[Tuple[Request, Tuple[int, ...]], _Job] = {}
        self.ever: Dict[int, bool] = {}
        self.class_part: Optional[Callable[[int], Hashable]] = self._class_part

    def _class_part(self, j: int) -> Hashable:
        """The select and place in PBS's class key (job_info.cpp:2309-2342), and the
        queue, whose node pool the job may use (``resresv_set_use_queue``, :2223)."""
        w = self.work
        if w.site is None:
            return None
        return (w.site.select[j], w.site.place[j], w.site.queue[j])

    # -- a job's request and pool ---------------------------------------------------
    def request(self, j: int) -> Request:
        """Job ``j``'s chunks and place: its site columns; without a select, one chunk of
        its processors (the server makes ``select=1:ncpus=P`` of a job's ``-l ncpus=P``,
        svr_jobfunc.c:1819-1860).

        :raises ValueError: its select or place is not one PBS reads (naming it)
        """
        w = self.work
        select = w.site.select[j] if w.site is not None else ""
        place = w.site.place[j] if w.site is not None else ""
        key = (select or f"1:ncpus={w.procs[j]}", place)
        req = self._reqs.get(key)
        if req is None:
            req = self._reqs[key] = parse_request(key[0], key[1], self.names)
        return req

    def _matches(self, v: int, name: str, want: object) -> bool:
        node = self.site.vnodes[v]
        if name == "host":
            have: object = node.host
        elif name == "vnode":
            have = node.name
        else:
            have = node.resources.get(name, False if isinstance(want, bool) else None)
        if isinstance(want, bool):
            return have is want or (have is None and not want)
        if name not in self.strings:
            return True  # not on the resources: line: not checked (check.cpp:1243-1244)
        if isinstance(want, int) and isinstance(have, int) and not isinstance(have, bool):
            return want <= have
        return have is not None and str(want) in str(have).split(",")

    def job(self, j: int) -> _Job:
        """Job ``j``'s request, hosts and eligible vnodes; one :class:`_Job` is shared by
        the jobs of one request and pool (read only: matching a request's properties
        against every vnode was half the site model's time on CERIT-SC)."""
        info = self.jobs.get(j)
        if info is None:
            req = self.request(j)
            pool = tuple(self.filter(j))
            info = self._kinds.get((req, pool))
            if info is None:
                info = self._kinds[(req, pool)] = self._kind(req, pool)
            self.jobs[j] = info
        return info

    def _kind(self, req: Request, pool: Sequence[int]) -> _Job:
        ok = [{v for v in pool if all(self._matches(v, n, x) for n, x in c.other)}
              for c in req.chunks]  # fmt: skip
        hosts: Dict[str, List[int]] = {}
        for v in pool:
            hosts.setdefault(self.site.vnodes[v].host, []).append(v)
        return _Job(req, list(hosts.values()), ok)

    # -- MachineModel ---------------------------------------------------------------
    def can_ever_run(self, j: int) -> bool:
        """Whether job ``j``'s chunks fit its node pool when no job runs."""
        ever = self.ever.get(j)
        if ever is None:
            ever = self.ever[j] = self._fits_empty(j)
        return ever

    def _fits_empty(self, j: int) -> bool:
        # the same for every job of a kind (its request and pool): asked per job, of the
        # whole queue in every forward run, it was 7 % of eval-start --site's time on CERIT-SC
        info = self.job(j)
        if info.ever is None:
            info.ever = self._kind_fits_empty(info)
        return info.ever

    def _kind_fits_empty(self, info: _Job) -> bool:
        vn = self.site.vnodes
        c, m, g = [v.ncpus for v in vn], [v.mem_kb for v in vn], [v.ngpus for v in vn]
        return (
            place(info.req, info.hosts, View(c, m, g, c, m, g, info.ok), self.checked) is not None
        )

    def cycle(self, now: int, ends: Sequence[Tuple[int, int]]) -> NodeCycle:
        return NodeCycle(self, now, ends)

    def take(self, j: int, parts: Alloc, held: Tuple[int, ...]) -> None:
        """Job ``j`` runs on ``parts``, ``held`` exclusively."""
        self.parts[j], self.held[j] = parts, held
        self._add(parts, held, -1)
        for v in {v for v, *_ in parts}:
            self.on[v].add(j)

    def hold(self, j: int, where: Optional[Where] = None) -> bool:
        """Job ``j`` runs already (a queue snapshot's): on ``where`` (a :data:`Placed`)
        when its parts are free there, else placed where it fits now (first fit, as
        :meth:`NodeCycle.check` places a job); False: ``where`` was not free.

        :raises ValueError: it does not fit what is free
        """
        if where is not None:
            parts, held = cast(Placed, where)
            if self._free_for(parts, held):
                self.take(j, parts, held)
                return True
        self._first_fit(j)
        return where is None

    def where(self, j: int) -> Optional[Where]:
        parts = self.parts.get(j)
        return None if parts is None else (parts, self.held[j])

    def _free_for(self, parts: Alloc, held: Tuple[int, ...]) -> bool:
        """Whether ``parts`` (and ``held`` whole) are free now: on vnodes of the site, with
        the checked resources free, no exclusive job there, and none at all on ``held``."""
        need: Dict[int, List[int]] = {}
        for v, c, m, g in parts:
            if not 0 <= v < len(self.fc):
                return False
            x = need.setdefault(v, [0, 0, 0])
            x[0], x[1], x[2] = x[0] + c, x[1] + m, x[2] + g
        free = (self.fc, self.fm, self.fg)
        for v, x in need.items():
            if self.xheld[v] or (v in held and self.njobs[v]):
                return False
            if any(on and x[k] > free[k][v] for k, on in enumerate(self.checked)):
                return False
        return all(v in need for v in held)

    def _first_fit(self, j: int) -> None:
        cycle = self.cycle(0, [])
        if cycle.check(j, 0, 0) != OK:
            raise ValueError(f"running job {j} does not fit the free vnodes")
        cycle.start(j, 0, 0, 0)

    def full(self) -> bool:
        """No cpu free on any vnode (every job asks for one: a chunk's ncpus is at least
        the server's ``default_chunk.ncpus``, 1)."""
        return self.checked[0] and self.free_cpus <= 0

    def release(self, j: int) -> None:
        parts = self.parts.pop(j)
        self._add(parts, self.held.pop(j), 1)
        for v in {v for v, *_ in parts}:
            self.on[v].discard(j)
        self.jobs.pop(j, None)
        self.ever.pop(j, None)

    def _add(self, parts: Alloc, held: Tuple[int, ...], sign: int) -> None:
        _State(self.fc, self.fm, self.fg, self.njobs, self.xheld).apply(parts, held, sign)
        self.free_cpus += sign * sum(c for _, c, _, _ in parts)


class _State:
    """The vnodes at one instant of a cycle's calendar: free resources, jobs on each and
    exclusive holds (the model's own lists at ``now``, copies when run forward)."""

    def __init__(self, fc: List[int], fm: List[int], fg: List[int], njobs: List[int],
                 xheld: List[int]) -> None:  # fmt: skip
        self.fc, self.fm, self.fg, self.njobs, self.xheld = fc, fm, fg, njobs, xheld

    def copy(self) -> _State:
        return _State(list(self.fc), list(self.fm), list(self.fg), list(self.njobs),
                      list(self.xheld))  # fmt: skip

    def apply(self, parts: Alloc, held: Tuple[int, ...], sign: int) -> None:
        """``sign`` 1: a job ends (frees ``parts``); -1: it starts."""
        fc, fm, fg, njobs = self.fc, self.fm, self.fg, self.njobs
        for v, c, m, g in parts:
            fc[v] += sign * c
            fm[v] += sign * m
            fg[v] += sign * g
        if len(parts) == 1:  # most jobs: one part
            njobs[parts[0][0]] -= sign
        else:
            for v in {v for v, *_ in parts}:
                njobs[v] -= sign
        for v in held:
            self.xheld[v] -= sign


class _Top(NamedTuple):
    """A top job reserved in this cycle: from ``start`` to ``end`` on ``parts``."""

    start: int
    end: int
    parts: Alloc
    held: Tuple[int, ...]
    excl: bool


class _Through(NamedTuple):
    """The vnodes as they stay free from one instant while some top jobs start (the least
    free at their starts, :meth:`NodeCycle._least`; the free lists themselves when none
    does), the vnodes those top jobs use, and the vnodes of the exclusive ones."""

    ac: List[int]
    am: List[int]
    ag: List[int]
    touched: FrozenSet[int]
    excl: FrozenSet[int]


class _Memo:
    """What :meth:`NodeCycle.check` found in a cycle since the vnodes and the calendar last
    changed (a start or a reservation makes a new one).

    Between those changes a check's answer depends only on the job's kind (its request and
    pool, :class:`_Job`), the instant, and which top jobs start before its end: the view
    is the state at that instant, the least free at those top jobs' starts (an event
    after the last of them changes no least: ``check_resources_for_node`` takes the least
    at each run event, node_info.cpp:3463-3516), and the vnodes they block; so the jobs of
    one kind, whatever their walltime, user or class, have one answer per set of top jobs
    before their end (``found``); what stays free under each set is shared by every kind
    (``through``)."""

    def __init__(self) -> None:
        self.found: Dict[Tuple[_Job, int, Tuple[int, ...]], Optional[Placed]] = {}
        self.through: Dict[Tuple[int, Tuple[int, ...]], _Through] = {}


class NodeCycle:
    """The vnodes during one cycle at ``now`` (module docstring): the model's free
    resources, the running jobs' estimated ends and the top jobs reserved so far."""

    def __init__(self, model: NodeModel, now: int, ends: Sequence[Tuple[int, int]]) -> None:
        self.m, self.now = model, now
        self.ends = [(e if e > now else now, j) for e, j in ends]
        self.end_of = {j: e for e, j in self.ends}
        self.tops: List[_Top] = []
        self.state = _State(model.fc, model.fm, model.fg, model.njobs, model.xheld)
        self.last: Optional[Tuple[int, Optional[Tuple[Alloc, Tuple[int, ...]]]]] = None
        # what check found, kept until a start or a reservation changes the vnodes or the
        # calendar (_Memo)
        self.memo = _Memo()

    def _least(self, view_of: List[int], runs: List[_Top], state: _State, t: int,
               until: int) -> Dict[int, Tuple[int, int, int]]:  # fmt: skip
        """The least free on each vnode ``view_of`` at the starts of ``runs`` before
        ``until``, from ``state`` at ``t``, the calendar's ends and starts applied in time
        order (node_info.cpp:3463-3516)."""
        touched = set(view_of)
        events: List[Tuple[int, int, int, Alloc]] = []
        parts_of, end_of, on = self.m.parts, self.end_of, self.m.on
        for j in {j for v in touched for j in on[v]}:
            e = end_of.get(j)
            if e is not None and t < e < until:
                events.append((e, _END, j, parts_of[j]))
        for k, top in enumerate(self.tops):
            if t < top.start < until:
                events.append((top.start, _RUN, k, top.parts))
            if t < top.end < until:
                events.append((top.end, _END, -1 - k, top.parts))
        cur = {v: [state.fc[v], state.fm[v], state.fg[v]] for v in touched}
        least = {v: tuple(x) for v, x in cur.items()}
        for _, kind, _, parts in sorted(events):
            sign = -1 if kind == _RUN else 1
            for v, c, m, g in parts:
                x = cur.get(v)
                if x is not None:
                    x[0] += sign * c
                    x[1] += sign * m
                    x[2] += sign * g
            if kind == _RUN:
                for v, *_ in parts:
                    if v in cur:
                        lo, x = least[v], cur[v]
                        least[v] = (min(lo[0], x[0]), min(lo[1], x[1]), min(lo[2], x[2]))
        return least  # type: ignore[return-value]

    def _runs(self, lo: int, until: int) -> Tuple[int, ...]:
        """The top jobs (indices into ``tops``) that start in ``[lo, until)``."""
        return tuple(k for k, top in enumerate(self.tops) if lo <= top.start < until)

    def _through(self, runs: Tuple[int, ...], state: _State, t: int, until: int,
                 applied: bool) -> _Through:  # fmt: skip
        """What stays free on each vnode from ``t`` while the top jobs ``runs`` start, the
        vnodes they use, and the vnodes of the exclusive ones (:meth:`_view`)."""
        if not runs:
            return _Through(state.fc, state.fm, state.fg, frozenset(), frozenset())
        tops = [self.tops[k] for k in runs]
        touched = sorted({v for top in tops for v, *_ in top.parts})
        excl = frozenset(v for top in tops if top.excl for v, *_ in top.parts)
        least = self._least(touched, tops, state, t - (not applied), until)
        ac, am, ag = list(state.fc), list(state.fm), list(state.fg)
        for v, (c, m, g) in least.items():
            ac[v], am[v], ag[v] = c, m, g
        return _Through(ac, am, ag, frozenset(touched), excl)

    def _view(self, j: int, state: _State, t: int, until: int, applied: bool,
              through: Optional[_Through] = None) -> View:  # fmt: skip
        """Job ``j``'s view of the vnodes at ``t`` for a run until ``until``; ``applied``:
        the calendar's events at ``t`` are already in ``state``; ``through``: what
        :meth:`_through` gives for them (else computed here)."""
        info = self.m.job(j)
        excl = info.req.place.excl
        if through is None:
            lo = t + 1 if applied else t  # the starts at t are in ``state`` already
            through = self._through(self._runs(lo, until), state, t, until, applied)
        ac, am, ag = through.ac, through.am, through.ag
        # node_info.cpp:3497-3498: a vnode where a top job starts before this job's end is
        # none of this job's when either is exclusive
        blocked = through.touched if excl else through.excl
        nj, xh = state.njobs, state.xheld
        if not excl and not blocked and not any(xh):
            ok = info.ok  # nothing but the job's own pool and properties to apply
        else:
            ok = [{v for v in kind if not xh[v] and not (excl and nj[v]) and v not in blocked}
                  for kind in info.ok]  # fmt: skip
        return View(state.fc, state.fm, state.fg, ac, am, ag, ok)

    def _place(self, j: int, view: View) -> Optional[Tuple[Alloc, Tuple[int, ...]]]:
        info = self.m.job(j)
        return place(info.req, info.hosts, view, self.m.checked, info.flat)

    # -- CycleResources --------------------------------------------------------------
    def check(self, j: int, now: int, end: int) -> int:
        if not self.m.can_ever_run(j):
            return NEVER
        found = self._check_place(j, now, end)
        self.last = (j, found)
        return OK if found is not None else NO_RESOURCES

    def _check_place(self, j: int, now: int, end: int) -> Optional[Placed]:
        """Where job ``j`` fits now until ``end`` (None: nowhere), from the memo when a job
        of its kind was placed on the same vnodes and top jobs (:class:`_Memo`)."""
        info, runs, memo = self.m.job(j), self._runs(now, end), self.memo
        key = (info, now, runs)
        if key in memo.found:
            return memo.found[key]
        through = memo.through.get((now, runs))
        if through is None:
            through = memo.through[(now, runs)] = self._through(runs, self.state, now, end, False)
        view = self._view(j, self.state, now, end, False, through)
        found = memo.found[key] = self._place(j, view)
        return found

    def start(self, j: int, now: int, end: int, d: int) -> None:
        if self.last is None or self.last[0] != j:
            self.check(j, now, end)
        assert self.last is not None
        found = self.last[1]
        if found is None:
            raise ValueError(f"job {j} started where its chunks do not fit")
        self.last = None
        self.memo = _Memo()
        self.m.take(j, found[0], found[1])
        bisect.insort(self.ends, (now + d, j))
        self.end_of[j] = now + d

    def _calendar(self) -> List[Tuple[int, int, int, Alloc, Tuple[int, ...]]]:
        """The running jobs' ends and the top jobs' starts and ends, in time order (at one
        instant ends first, then by job): ``(time, kind, job, parts, held)``; a top job
        is ``-1 - k`` at its end, ``k`` at its start (its index in ``tops``)."""
        m = self.m
        parts, held = m.parts, m.held
        events = [(e, _END, k, parts[k], held[k]) for e, k in self.ends]  # sorted already
        if self.tops:
            for k, top in enumerate(self.tops):
                events.append((top.start, _RUN, k, top.parts, top.held))
                events.append((top.end, _END, -1 - k, top.parts, top.held))
            events.sort()
        return events

    def reserve(self, j: int, d: int, window: int, epoch: int, after: int = 0) -> int:
        """``after``: no earlier than then (a run limit holds the job until then,
        :class:`.limits.SiteLimits`; PBS's ``calc_run_time`` checks the limits at each
        event too, simulate.cpp:747-768)."""
        self.last = None
        m = self.m
        events = self._calendar()
        first = max(self.now, after)
        times = [first]  # the events' instants after the first, in order
        for event in events:
            if event[0] > times[-1]:
                times.append(event[0])
        state, done, k, last = self.state.copy(), 0, 0, len(times) - 1
        while True:
            t = times[k]
            while done < len(events) and events[done][0] <= t:
                _, kind, _, parts, held = events[done]
                state.apply(parts, held, -1 if kind == _RUN else 1)
                done += 1
            found = self._place(j, self._view(j, state, t, t + d, True))
            if found is not None or k == last:
                break
            if window <= 0:
                k += 1
            else:  # Profile.earliest's windows (simulate.cpp:198-214)
                e = times[k + 1] + epoch
                boundary = (e + window) // window * window - epoch
                k = bisect.bisect_right(times, boundary) - 1
        if found is not None:
            excl = m.job(j).req.place.excl
            self.tops.append(_Top(t, t + d, found[0], found[1], excl))
            self.memo = _Memo()
        return t

    def full(self) -> bool:
        return self.m.full()
