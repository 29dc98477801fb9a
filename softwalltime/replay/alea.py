"""The Alea columns of an SWF trace, and the CERIT-SC site they describe (issue 46; pure).

Alea's 21-column SWF (the CERIT-SC 2013 data set) adds to the 18 standard fields:

- 19, the nodes each job ran on, one id per cpu: ``{1241,1241,...}``;
- 20, the queue it ran in: ``q_1d``;
- 21, its PBS/Torque node spec: ``1:ppn=64:x86_64:cl_zewura#excl``.

:func:`to_select` turns a node spec into PBS's ``select`` and ``place`` as OpenPBS's server
does (svr_jobfunc.c:1803-1816: the select from ``cvt_nodespec_to_select``, place ``scatter``,
``scatter:excl`` with ``#excl``, ``scatter:share`` with ``#shared``; node_manager.c:5675-5738:
each ``N[:ppn=M][:prop...]`` part is ``N:ncpus=M`` and ``prop=True``, ``mem`` in kB). What a
select cannot say raises :class:`Unreadable` with the reason the workload counts it under:
an excluded node (``^zewura5``: Torque's, PBS has no such select), a host by name (the trace
names nodes by id, not host name), a fractional ``ppn``.

:func:`cerit_site` derives the site from the trace and its ``.machines`` file (see there).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

from .. import site_file as sf
from ..units import parse_size
from .fairshare import EQUAL_SHARES

MAX_CHUNKS = 64  # parts of one node spec ("+"): far above CERIT-SC's 2
_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOSTLIKE = re.compile(r"^(zewura|zegox)\d+$")
REASON_EXCLUDES = "request excludes a node (^NAME: no PBS select)"
REASON_HOST = "request names a host (the trace names nodes by id)"
REASON_PPN = "request has a fractional or bad ppn"
REASON_OTHER = "request unreadable"


class Unreadable(ValueError):
    """A node spec a PBS select cannot express; ``str()`` is the skip reason."""


class Request(NamedTuple):
    select: str
    place: str
    procs: int


def _chunk(part: str) -> Tuple[str, int]:
    """``N[:ppn=M][:mem=X][:prop...]`` -> ``N:ncpus=M[:mem=XKB][:prop=True...]``, cpus."""
    words = part.split(":")
    count = 1
    if words and words[0].isdigit():
        count = int(words.pop(0))
    ppn, mem, props = 1, "", []  # type: int, str, List[str]
    for w in words:
        key, eq, value = w.partition("=")
        if w.startswith("^"):
            raise Unreadable(REASON_EXCLUDES)
        if key == "ppn" and eq:
            if not value.isdigit() or int(value) < 1:
                raise Unreadable(REASON_PPN)
            ppn = int(value)
        elif key == "mem" and eq:
            try:
                mem = f":mem={parse_size(value) // 1024}kb"
            except ValueError:
                raise Unreadable(REASON_OTHER) from None
        elif key == "host" or "." in w or _HOSTLIKE.match(w):
            raise Unreadable(REASON_HOST)
        elif not eq and _WORD.match(w):
            if w not in props:
                props.append(w)
        else:
            raise Unreadable(REASON_OTHER)
    if count < 1:
        raise Unreadable(REASON_OTHER)
    select = f"{count}:ncpus={ppn}{mem}" + "".join(f":{p}=True" for p in props)
    return select, count * ppn


def to_select(spec: str) -> Request:
    """PBS's ``select`` and ``place`` of a node spec, and its cpus.

    :raises Unreadable: a spec no select can say (the reason)
    """
    body, _, flag = spec.strip().partition("#")
    place = {"": "scatter", "excl": "scatter:excl", "shared": "scatter:share"}.get(flag)
    parts = body.split("+")
    if place is None or not body or len(parts) > MAX_CHUNKS:
        raise Unreadable(REASON_OTHER)
    chunks = [_chunk(p) for p in parts]
    return Request("+".join(c[0] for c in chunks), place, sum(c[1] for c in chunks))


def props_of(select: str) -> List[str]:
    """The boolean properties a select asks for."""
    return [w[: -len("=True")] for w in re.split(r"[:+]", select) if w.endswith("=True")]


def node_ids(column: str) -> Counter[str]:
    """``{1241,1241,1240}`` -> cpus per node id.

    :raises ValueError: not a braced list of ids
    """
    if not (column.startswith("{") and column.endswith("}")):
        raise ValueError(f"not a node list: {column[:40]!r}")
    ids = [x for x in column[1:-1].split(",") if x]
    if not all(x.isdigit() for x in ids):
        raise ValueError(f"not a node list: {column[:40]!r}")
    return Counter(ids)


# ---------------------------------------------------------------------------------------
# The CERIT-SC site


class AleaJob(NamedTuple):
    """What :func:`cerit_site` reads of one job: its requested walltime (s), its Alea
    columns (cpus per node id, queue, node spec), its user and its real start and end
    (s; None: unknown)."""

    walltime_s: Optional[int]
    nodes: Counter[str]
    queue: str
    spec: str
    user: Optional[str] = None
    start: Optional[int] = None
    end: Optional[int] = None


class Machine(NamedTuple):
    """One line of Alea's ``.machines``: ``id name nodes cpus_per_node ? mem_kb``. The
    memory is in kB: CERIT-SC's zewura line says 529426432 (505 GiB; the cluster's nodes
    have 512 GB), and the trace's own jobs asked up to 85 GiB (field 10, bytes) on one
    node, which 529426432 bytes could not hold."""

    name: str
    nodes: int
    cpus: int
    mem_kb: int


def parse_machines(text: str, where: str = ".machines") -> List[Machine]:
    """The clusters of a ``.machines`` file.

    :raises ValueError: a line of another shape (file:line)
    """
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words:
            continue
        if len(words) != 6 or not all(w.isdigit() for w in words[2:]):
            raise ValueError(f"{where}:{number}: not 'id name nodes cpus speed mem'")
        out.append(Machine(words[1], int(words[2]), int(words[3]), int(words[5])))
    return out


ROUTED = re.compile(r"^q_\d+[hdw](_plus)?$")  # the queues a walltime routes to
POOL = "Qlist"


def _cluster_of(used: Dict[str, int], by_size: Sequence[Machine]) -> Dict[str, Machine]:
    """Each node id's cluster: the smallest whose nodes hold the most cpus a job used there."""
    out = {}
    for node, most in used.items():
        fits = [m for m in by_size if m.cpus >= most]
        out[node] = fits[0] if fits else by_size[-1]
    return out


def cerit_site(jobs: Iterable[AleaJob], machines: Sequence[Machine], name: str) -> sf.Site:
    """The site a trace's Alea columns describe.

    - Vnodes: each node id the jobs ran on, of the smallest cluster whose nodes hold the
      most cpus one job used on it (CERIT-SC: 18 ids of 80 cpus, zewura; 26 of 12, zegox),
      then the clusters' remaining nodes (``.machines`` counts: 20 and 48) as
      ``NAME-unused-K``, on which no job of the trace ran. Boolean resources: ``cl_NAME``,
      and every property a job asked for that ran on the node (a job runs only where its
      properties are, so each is a property of every node it used: a lower bound).
    - Queues: a routing queue ``route`` in front of the walltime queues (``q_2h`` ...
      ``q_2w_plus``), by their longest walltime, each with ``resources_max.walltime`` the
      longest a job of it asked for; the other queues (backfill, ops, ...) are execution
      queues outside the route.
    - Pools: a node is in a queue's pool when a job of the queue ran on it. PBS gives a node
      one queue (its ``queue`` attribute), and CERIT-SC's pools overlap, so the pools are a
      string-array node resource ``Qlist`` (the queues whose jobs ran on the node) that
      each queue's chunks request through its ``default_chunk.Qlist``.
    - Run limits, INFERRED (the trace does not record the site's): each queue's
      ``max_run`` and ``max_run_res.ncpus`` are the most jobs and cpus the queue ever ran at
      once (``[o:PBS_ALL=N]``), and the most one user ever ran at once in it
      (``[u:PBS_GENERIC=N]``), from the real starts and ends (:func:`run_limits`).
    """
    by_size = sorted(machines, key=lambda m: m.cpus)
    used: Dict[str, int] = defaultdict(int)
    props: Dict[str, Set[str]] = defaultdict(set)
    pools: Dict[str, Set[str]] = defaultdict(set)
    wall: Dict[str, int] = defaultdict(int)
    spans: Dict[str, List[Span]] = defaultdict(list)
    for job in jobs:
        try:
            asked = [p for p in props_of(to_select(job.spec).select) if not p.startswith("cl_")]
        except Unreadable:
            asked = []
        for node, cpus in job.nodes.items():
            used[node] = max(used[node], cpus)
            props[node].update(asked)
            pools[node].add(job.queue)
        wall[job.queue] = max(wall[job.queue], job.walltime_s or 0)
        if job.start is not None and job.end is not None:
            spans[job.queue].append(Span(job.start, job.end, sum(job.nodes.values()), job.user))
    cluster = _cluster_of(used, by_size)
    vnodes = [_vnode(n, cluster[n], props[n], pools[n]) for n in sorted(used, key=int)]
    for m in by_size:
        spare = m.nodes - sum(1 for c in cluster.values() if c is m)
        vnodes += [_vnode(f"{m.name}-unused-{k}", m, set(), set()) for k in range(1, spare + 1)]
    return sf.Site(
        name=name,
        vnodes=tuple(vnodes),
        queues=_queues(wall, {q: run_limits(s, _pool_cpus(vnodes, q)) for q, s in spans.items()}),
        default_queue="route",
        # Qlist on sched_config's resources line: the scheduler matches chunks on it
        # (tests/pbs/test_site_real.py shows a pool keeping another queue's job out)
        # fair_share with no resource_group: every user in PBS's unknown group, with
        # unknown_shares shares, so each has an equal share (with PBS's default 0 none
        # would, and under fairshare_enforce_no_shares no job would run)
        scheduler=sf.Scheduler(
            strict_ordering=True,
            fair_share=True,
            unknown_shares=EQUAL_SHARES,
            resources=sf.Scheduler().resources + (POOL,),
        ),
        source=(
            "derived from the trace's Alea columns and .machines by "
            "packaging/make_sites.py: node properties and queue pools from where jobs ran, "
            "walltime limits the longest asked per queue; run limits INFERRED: each queue's "
            "max_run and max_run_res.ncpus the most jobs and cpus it ever ran at once, "
            "overall and for one user (the real limits are not in the trace; "
            "docs/simulate.md); the scheduler's settings are not "
            "in the trace: fcfs with strict_ordering and backfill_depth 1 (the model's "
            "baseline), fair_share as the site's paper says, a flat tree of the users with "
            "equal shares (no resource_group; unknown_shares 10)"
        ),
    )


def _vnode(node: str, m: Machine, props: Set[str], pool: Set[str]) -> sf.Vnode:
    res: Dict[str, sf.Value] = {f"cl_{m.name}": True}
    res.update({p: True for p in sorted(props)})
    if pool:
        res[POOL] = ",".join(sorted(pool))
    name = node if not node.isdigit() else f"{m.name}-{node}"
    return sf.Vnode(name, name, m.cpus, mem_kb=m.mem_kb, resources=res)


def _queues(wall: Dict[str, int], limits: Dict[str, Limits]) -> Tuple[sf.Queue, ...]:
    routed = sorted((q for q in wall if ROUTED.match(q)), key=lambda q: (wall[q], q))
    other = sorted(q for q in wall if not ROUTED.match(q))
    queues = [sf.Queue("route", kind="route", destinations=tuple(routed))]
    for q in routed + other:
        run, res = limits.get(q, (None, {}))
        queues.append(
            sf.Queue(
                q,
                walltime_max=wall[q] or None,
                max_run=run,
                max_run_res=res,
                default_chunk={POOL: q},
            )
        )
    return tuple(queues)


# ---------------------------------------------------------------------------------------
# Run limits read from the real schedule


class Span(NamedTuple):
    """One job as it really ran: start and end (s), cpus, user."""

    start: int
    end: int
    cpus: int
    user: Optional[str]


Limits = Tuple[Optional[str], Dict[str, str]]  # a queue's max_run, max_run_res


def most_at_once(spans: Iterable[Span]) -> Tuple[int, int]:
    """The most jobs and the most cpus running at once; a job ending at t has freed its
    cpus before one starting at t takes them, and a job of no length never runs."""
    events = []
    for s in spans:
        if s.end > s.start:
            events += [(s.start, 1, s.cpus), (s.end, -1, -s.cpus)]
    events.sort(key=lambda e: (e[0], e[1]))
    jobs = cpus = most_jobs = most_cpus = 0
    for _, dj, dc in events:
        jobs, cpus = jobs + dj, cpus + dc
        most_jobs, most_cpus = max(most_jobs, jobs), max(most_cpus, cpus)
    return most_jobs, most_cpus


def run_limits(spans: Sequence[Span], pool_cpus: int) -> Limits:
    """A queue's run limits inferred from how its jobs really ran: ``[o:PBS_ALL=N]`` the
    most jobs (``max_run``) and cpus (``max_run_res.ncpus``) it ran at once, when below its
    pool's cpus (a queue that filled its pool shows no limit); ``[u:PBS_GENERIC=N]`` the
    most one user ran at once, when below the queue's. Not the site's configured limits
    (the trace has none): bounds the real schedule kept, which a model should keep too."""
    jobs, cpus = most_at_once(spans)
    by_user: Dict[Optional[str], List[Span]] = defaultdict(list)
    for s in spans:
        by_user[s.user].append(s)
    mine = [most_at_once(v) for u, v in by_user.items() if u is not None]
    user_jobs = max((m[0] for m in mine), default=jobs)
    user_cpus = max((m[1] for m in mine), default=cpus)
    run = _limit(jobs, user_jobs, pool_cpus)
    ncpus = _limit(cpus, user_cpus, pool_cpus)
    return run, ({"ncpus": ncpus} if ncpus else {})


def _limit(overall: int, user: int, pool_cpus: int) -> Optional[str]:
    parts = []
    if 0 < overall < pool_cpus:
        parts.append(f"[o:PBS_ALL={overall}]")
    if 0 < user < min(overall, pool_cpus):
        parts.append(f"[u:PBS_GENERIC={user}]")
    return ",".join(parts) or None


def _pool_cpus(vnodes: Sequence[sf.Vnode], queue: str) -> int:
    return sum(v.ncpus for v in vnodes if queue in str(v.resources.get(POOL, "")).split(","))


def swf_site(name: str, nodes: int, cpus_per_node: int, excl: bool, source: str) -> sf.Site:
    """A machine of ``nodes`` identical nodes and one queue (the SWF traces); with
    ``excl`` the queue allocates whole nodes (``resources_default.place = excl``)."""
    width = len(str(nodes))
    vnodes = tuple(
        sf.Vnode(f"n{k:0{width}d}", f"n{k:0{width}d}", cpus_per_node) for k in range(1, nodes + 1)
    )
    queue = sf.Queue("workq", default_place="excl" if excl else None)
    # The traces' schedulers backfilled (KTH's header: EASY; CTC: EASY-LoadLeveler; HPC2N:
    # Maui): fcfs with strict_ordering and backfill_depth 1, the model's baseline.
    sched = sf.Scheduler(strict_ordering=True, backfill_depth=1)
    return sf.Site(name, vnodes, (queue,), "workq", scheduler=sched, source=source)
