"""Where a job's chunks fit, searched as PBS's scheduler searches vnodes (pure, issue 46).

OpenPBS 23.06's node search, for the parts modelled (node_info.cpp of the 23.06.06 tree):

- **Hosts.** A chunk lies on one host: the vnodes are grouped by ``host`` into host sets,
  hosts in the order of their first vnode, vnodes in pbsnodes order (``eval_placement``'s
  host sets, node_info.cpp:2271-2290, made by node_partition.cpp:1110-1125, sorted only
  with a ``node_sort_key``, which is not modelled). On each host in turn (node_info.cpp:
  2286):

  - ``pack``: the whole select on this one host, else the next (node_info.cpp:2315-2331);
  - ``scatter``: at most one chunk on this host, the first chunk kind still wanted that fits
    (node_info.cpp:2391-2445);
  - ``vscatter``: as many chunks as fit, at most one per vnode (node_info.cpp:2333-2390);
  - ``free``: as many chunks of each kind, in select order, as the host still holds
    (node_info.cpp:2447-2525), the host's resources decreasing as chunks take them.

  The search is greedy: chunks placed on a host stay there (node_info.cpp:2527-2538); it
  succeeds when every chunk is placed (node_info.cpp:2546). With ``exclhost`` the job holds
  its hosts' other vnodes too (``alloc_rest_nodepart``, node_info.cpp:2527-2535).
- **One chunk** (``eval_simple_selspec``, node_info.cpp:2722-2960): the first vnode, in
  order, that is eligible and holds the whole chunk. On a host a chunk may be split over
  its vnodes (``EVAL_OKBREAK`` from eval_placement) unless it fits whole on one vnode now
  (``can_fit_on_vnode``, node_info.cpp:2765-2769, checked against free resources, not the
  calendar); split, each vnode in turn gives what it has of each resource until the chunk
  is whole (``resources_avail_on_vnode``, node_info.cpp:3236-3320).
- **A vnode's resources** (``check_resources_for_node``, node_info.cpp:3407-3530): what is
  free now, and, when the calendar has a job starting before this job's end, what stays
  free at each such start; :class:`View` holds both (the second from :mod:`.calendar`).
- **Which resources count** (``check_avail_resources``, check.cpp:1243-1244): every
  boolean, and the others only when on sched_config's ``resources:`` line
  (:attr:`.site_file.Scheduler.resources`); an unset one is zero, or False
  (``UNSET_RES_ZERO``). A string matches one of the vnode's comma-separated values; a
  requested integer other than ncpus, mem and ngpus is compared, not consumed (custom
  consumable resources are not modelled).
- **Eligible vnodes** (``is_vnode_eligible``, node_info.cpp:2998-3030): an ``excl`` job
  only on vnodes no job runs on; no job on a vnode an exclusive job holds (its state is
  ``job-exclusive``). The vnodes' ``sharing`` attribute is not modelled (PBS's default,
  ``default_shared``).

On a server whose hosts have one vnode each PBS takes another path (node_info.cpp:
2261-2264): ``eval_complex_selspec`` (node_info.cpp:2575-2700) places chunk after chunk in
select order, each on the first vnode that holds it; ``tests/test_nodes.py`` checks on
random requests that it finds the same vnodes as the host-by-host search. An ``excl`` job
there takes the bucket path (buckets.cpp:881-925), whole free vnodes, which may be other
vnodes than the first free ones, never fewer.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

from .spec import FREE, PACK, SCATTER, VSCATTER, Request

Alloc = Tuple[Tuple[int, int, int, int], ...]  # (vnode, ncpus, mem_kb, ngpus) per part


class View(NamedTuple):
    """The vnodes as a search sees them: free now (``fc``, ``fm``, ``fg``: ncpus, mem kB,
    ngpus) and free throughout the job's run (``ac``, ``am``, ``ag``, the calendar's
    minimum; the same lists when nothing starts before its end), and which vnodes each of
    the job's chunk kinds may use (``ok[kind]``, eligibility and node pool applied)."""

    fc: Sequence[int]
    fm: Sequence[int]
    fg: Sequence[int]
    ac: Sequence[int]
    am: Sequence[int]
    ag: Sequence[int]
    ok: Sequence[Set[int]]


class Need(NamedTuple):
    """The consumables one chunk asks for, each 0 when not requested or not on
    sched_config's ``resources:`` line (then not checked: check.cpp:1243-1244)."""

    ncpus: int
    mem_kb: int
    ngpus: int


class _Search:
    """One placement: the view, and what this job's placed chunks took so far on each
    vnode (PBS adds them to its copy of the vnodes' ``assigned``, node_info.cpp:2473-2483)."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.taken: Dict[int, List[int]] = {}
        self.scattered: Set[int] = set()

    def _left(self, v: int, now: bool) -> Tuple[int, int, int]:
        w = self.view
        c, m, g = (w.fc[v], w.fm[v], w.fg[v]) if now else (w.ac[v], w.am[v], w.ag[v])
        t = self.taken.get(v)
        return (c, m, g) if t is None else (c - t[0], m - t[1], g - t[2])

    def _whole(self, v: int, need: Need, now: bool) -> bool:
        c, m, g = self._left(v, now)
        return need.ncpus <= c and need.mem_kb <= m and need.ngpus <= g

    def _take(self, parts: List[Tuple[int, int, int, int]]) -> None:
        for v, c, m, g in parts:
            t = self.taken.setdefault(v, [0, 0, 0])
            t[0] += c
            t[1] += m
            t[2] += g

    def chunk(self, need: Need, vnodes: Sequence[int], ok: Set[int], split: bool) -> Optional[
            List[Tuple[int, int, int, int]]]:  # fmt: skip
        """One chunk on ``vnodes`` (eval_simple_selspec), or None."""
        usable = [v for v in vnodes if v in ok and v not in self.scattered]
        if split and any(self._whole(v, need, True) for v in usable):
            split = False  # node_info.cpp:2765-2769
        if not split:
            for v in usable:
                if self._whole(v, need, False):
                    return [(v, need.ncpus, need.mem_kb, need.ngpus)]
            return None
        want = [need.ncpus, need.mem_kb, need.ngpus]
        parts = []
        for v in usable:
            left = self._left(v, False)
            got = [min(max(left[r], 0), want[r]) if want[r] else 0 for r in range(3)]
            if any(got):
                parts.append((v, got[0], got[1], got[2]))
                want = [want[r] - got[r] for r in range(3)]
            if not any(want):
                return parts
        return None


def _needs(req: Request, checked: Tuple[bool, bool, bool]) -> List[Need]:
    return [
        Need(c.ncpus if checked[0] else 0, c.mem_kb if checked[1] else 0,
             c.ngpus if checked[2] else 0)
        for c in req.chunks
    ]  # fmt: skip


def _on_host(search: _Search, req: Request, needs: List[Need], left: List[int],
             host: Sequence[int]) -> List[Tuple[int, int, int, int]]:  # fmt: skip
    """The chunks the place puts on one host (node_info.cpp:2286-2540); ``left`` (chunks
    still wanted per kind) is decreased."""
    ok, how, got = search.view.ok, req.place.arrangement, []
    if how == PACK:
        trial = _Search(search.view)
        for kind, need in enumerate(needs):
            for _ in range(left[kind]):
                parts = trial.chunk(need, host, ok[kind], True)
                if parts is None:
                    return []
                trial._take(parts)
                got += parts
        left[:] = [0] * len(left)
        return got
    for kind, need in enumerate(needs):
        while left[kind] > 0:
            parts = search.chunk(need, host, ok[kind], how != VSCATTER)
            if parts is None:
                break
            left[kind] -= 1
            got += parts
            if how == VSCATTER:
                search.scattered.update(v for v, *_ in parts)
            else:
                search._take(parts)
            if how == SCATTER:
                return got  # at most one chunk per host
    return got


def _one_chunk(req: Request, need: Need, hosts: Sequence[Sequence[int]], view: View) -> Optional[
        Tuple[Alloc, Tuple[int, ...]]]:  # fmt: skip
    """:func:`place` of one chunk on hosts of one vnode each: the first vnode, in order,
    that holds it whole all through (what the general search finds there: a split over
    one vnode is the whole chunk or nothing, and every arrangement tries the hosts in
    order; node_info.cpp:2722-2960). The case of most jobs, made fast."""
    ok, ac, am, ag = view.ok[0], view.ac, view.am, view.ag
    c, m, g = need
    for (v,) in hosts:
        if v in ok and c <= ac[v] and m <= am[v] and g <= ag[v]:
            return ((v, c, m, g),), ((v,) if req.place.excl else ())
    return None


def _flat_kind(req: Request, need: Need, hosts: Sequence[Sequence[int]], view: View) -> Optional[
        Tuple[Alloc, Tuple[int, ...]]]:  # fmt: skip
    """:func:`place` of ``n`` chunks of one kind on hosts of one vnode each: on each host in
    order, as many chunks as its vnode holds all through (``free``), at most one
    (``scatter``, ``vscatter``), or all of them or none (``pack``): what the general search
    takes there, a split over one vnode being the whole chunk or nothing
    (node_info.cpp:2286-2540). A job of ``P`` one-cpu chunks on one-cpu nodes (the SWF
    traces on their site files) is placed in one pass over the hosts, not one search per
    chunk; ``tests/test_nodes.py`` checks it against the general search."""
    ok, ac, am, ag = view.ok[0], view.ac, view.am, view.ag
    left = req.chunks[0].n
    pack = req.place.arrangement == PACK
    each = left if req.place.arrangement in (FREE, PACK) else 1  # at most, per host
    c, m, g = need
    if c and sum(ac) < c * left:
        return None  # fewer cpus free all through on all the vnodes: a quick no
    parts: List[Tuple[int, int, int, int]] = []
    for (v,) in hosts:
        if v not in ok:
            continue
        fits = each if each < left else left
        if c and ac[v] < c * fits:
            fits = ac[v] // c
        if m and am[v] < m * fits:
            fits = am[v] // m
        if g and ag[v] < g * fits:
            fits = ag[v] // g
        if fits <= 0 or (pack and fits < left):
            continue
        parts += [(v, c, m, g)] * fits
        left -= fits
        if not left:
            used = list(dict.fromkeys(p[0] for p in parts))  # in host order
            held = (used if req.place.exclhost else sorted(used)) if req.place.excl else []
            return tuple(parts), tuple(held)
    return None


def place(req: Request, hosts: Sequence[Sequence[int]], view: View,
          checked: Tuple[bool, bool, bool] = (True, True, False),
          flat: Optional[bool] = None) -> Optional[
              Tuple[Alloc, Tuple[int, ...]]]:  # fmt: skip
    """Where ``req``'s chunks go on ``hosts`` (each a list of vnodes, in order) as ``view``
    shows them: the parts ``(vnode, ncpus, mem_kb, ngpus)`` and the vnodes the job holds
    exclusively (``excl``: its own; ``exclhost``: its hosts' too; else none), or None.
    ``checked``: whether ncpus, mem and ngpus are on sched_config's ``resources:`` line;
    ``flat``: every host has one vnode (None: found out)."""
    assert req.place.arrangement in (FREE, PACK, SCATTER, VSCATTER)
    needs = _needs(req, checked)
    if flat is None:
        flat = all(len(h) == 1 for h in hosts)
    if flat and len(needs) == 1:
        if req.chunks[0].n == 1:
            return _one_chunk(req, needs[0], hosts, view)
        return _flat_kind(req, needs[0], hosts, view)
    left = [c.n for c in req.chunks]
    search = _Search(view)
    parts: List[Tuple[int, int, int, int]] = []
    held: List[int] = []
    for host in hosts:
        got = _on_host(search, req, needs, left, host)
        if got:
            parts += got
            if req.place.exclhost:
                held += host
        if not any(left):
            if req.place.excl and not req.place.exclhost:
                held = sorted({v for v, *_ in parts})
            return tuple(parts), tuple(held)
    return None
