"""A live queue on a site file's model (issue 46; pure): ``wait --site``'s snapshot.

The queued and running jobs (qstat's ``Resource_List.select``, ``Resource_List.place``,
``queue`` and ``exec_vnode``; the database's live jobs carry none of these, so there each
job is its processors as chunks of one cpu, as a trace without a select is,
:mod:`..replay.site_model`) are put on the site as a trace is (:func:`..replay.site_model.site_run`:
routed, the queue's defaults, the jobs no pool holds left out, counted), and each running job
is held on the vnodes of its ``exec_vnode`` (:func:`parse_exec_vnode`); one that names a vnode
the site file does not know is placed first fit, counted.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..replay.machine import Where
from ..replay.nodes.spec import parse_place, parse_size_kb
from ..replay.sim_workload import SimWorkload, SiteColumns
from ..replay.site_model import SiteModel, site_run
from ..site_file import Site
from .live import LiveJob
from .starttime import QueuedJob, QueueSnapshot, RunningJob, SiteMachine

MAX_EXEC_VNODE_CHARS = 1_000_000
"""A longer ``exec_vnode`` is refused: PBS writes ~30 characters a part, so this is over
30,000 parts, more vnodes than any site file here holds (CERIT-SC's has 68)."""
UNKNOWN_VNODE = "running on a vnode the site file does not know (placed first fit)"
BAD_EXEC_VNODE = "running with an exec_vnode not read (placed first fit)"
_PART = re.compile(r"[^\s()+:=]+(?::[^\s()+:=]+=[^\s()+:=]+)*\Z")

Part = Tuple[str, int, int, int]  # (vnode, ncpus, mem kB, ngpus)


def parse_exec_vnode(text: str) -> List[Part]:
    """The parts of an ``exec_vnode``: ``(vnA:ncpus=2:mem=1048576kb)+(vnB:ncpus=4)``, a
    chunk's parts on one host joined by ``+`` inside its parentheses (``(vnA:ncpus=1+vnB:
    ncpus=1)``); resources other than ncpus, mem and ngpus are ignored.

    :raises ValueError: not an exec_vnode (naming what is wrong), or longer than
        :data:`MAX_EXEC_VNODE_CHARS`
    """
    if len(text) > MAX_EXEC_VNODE_CHARS:
        raise ValueError(f"exec_vnode: longer than {MAX_EXEC_VNODE_CHARS:,} characters")
    body = text.strip()
    if not body.startswith("(") or not body.endswith(")"):
        raise ValueError(f"exec_vnode {_short(text)!r}: expected (vnode:ncpus=N...)+(...)")
    chunks = body[1:-1].split(")+(")
    return [_part(p, text) for chunk in chunks for p in chunk.split("+")]


def _part(spec: str, text: str) -> Part:
    if not _PART.match(spec):
        raise ValueError(f"exec_vnode {_short(text)!r}: {_short(spec)!r} is not vnode:res=value")
    name, *pairs = spec.split(":")
    got = {"ncpus": 0, "mem": 0, "ngpus": 0}
    for pair in pairs:
        key, value = pair.split("=", 1)
        if key in ("ncpus", "ngpus"):
            if not value.isdigit() or len(value) > 9:
                raise ValueError(f"exec_vnode {_short(text)!r}: {key}={value} is not a count")
            got[key] = int(value)
        elif key == "mem":
            got[key] = parse_size_kb(value)
    return name, got["ncpus"], got["mem"], got["ngpus"]


def _short(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


def placed(site: Site, parts: Sequence[Part], place: str) -> Optional[Where]:
    """Where ``parts`` run on ``site`` (:data:`..replay.nodes.model.Placed`), the vnodes
    held exclusively as ``place`` says (``excl``: its own; ``exclhost``: its hosts'); None
    when a part names a vnode the site file does not know."""
    index = {v.name: k for k, v in enumerate(site.vnodes)}
    if any(name not in index for name, *_ in parts):
        return None
    alloc = tuple((index[name], c, m, g) for name, c, m, g in parts)
    how = parse_place(place)
    used = sorted({v for v, *_ in alloc})
    if how.exclhost:
        hosts = {site.vnodes[v].host for v in used}
        held = tuple(k for k, v in enumerate(site.vnodes) if v.host in hosts)
    else:
        held = tuple(used) if how.excl else ()
    return alloc, held


class LiveSiteSnapshot(NamedTuple):
    """The snapshot on the site model, the live jobs it kept (queued in its order, then
    running), and the jobs left out or placed first fit, by reason."""

    snap: QueueSnapshot
    waiting: List[LiveJob]
    running: List[LiveJob]
    left: Dict[str, int]


def site_snapshot(
    site: Site, waiting: Sequence[LiveJob], running: Sequence[LiveJob], now: int,
    target: Optional[int], wall: Callable[[LiveJob], int],
) -> LiveSiteSnapshot:  # fmt: skip
    """``waiting`` (``target`` indexes it; None: no target, the snapshot's is the first
    queued job kept, or 0) and ``running`` on ``site``'s model; ``wall``: a job's walltime
    for the scheduler.

    :raises ValueError: a job's select or place is not one PBS reads, or the target is left
        out (no queue of the site takes it, or its chunks fit no pool)
    """
    jobs = [*waiting, *running]
    cols = SiteColumns([j.select for j in jobs], [j.place for j in jobs],
                       [j.queue for j in jobs], [""] * len(jobs), [""] * len(jobs))  # fmt: skip
    work = SimWorkload("live", [j.user for j in jobs], [j.submit_s for j in jobs],
                       list(range(len(jobs))),  # each job's index, carried through site_run
                       [wall(j) for j in jobs], [max(1, j.ncpus) for j in jobs],
                       None, {}, cols)  # fmt: skip
    fitted, model, left = site_run(site, work)
    kept = fitted.run  # the jobs site_run kept, by index
    if target is not None and target not in kept:
        raise ValueError(
            f"the job cannot run on {site.name}'s model: no started queue takes it, or no"
            " vnode pool holds its chunks"
        )
    nq = len(waiting)
    queued = [waiting[k] for k in kept if k < nq]
    ran = [running[k - nq] for k in kept if k >= nq]
    where = _where(site, ran, fitted.site.place[len(queued) :] if fitted.site else [], left)
    snap = QueueSnapshot(
        now,
        site.ncpus,
        [RunningJob(j.start_s or now, j.soft_s or 0, wall(j), max(1, j.ncpus)) for j in ran],
        [QueuedJob(j.submit_s, j.soft_s or 0, wall(j), max(1, j.ncpus)) for j in queued],
        kept.index(target) if target is not None else 0,
        SiteMachine(_builder(model, fitted), where),
    )
    return LiveSiteSnapshot(snap, queued, ran, left)


def _builder(model: SiteModel, work: SimWorkload) -> Callable[[], Tuple[Any, Any]]:
    return lambda: model.build(work)


def _where(
    site: Site, ran: Sequence[LiveJob], places: Sequence[str], left: Dict[str, int]
) -> List[Optional[Where]]:
    # each running job's place from its exec_vnode; first fit (None) without one, counted
    # where it names an unknown vnode or is not an exec_vnode
    out: List[Optional[Where]] = []
    for job, place in zip(ran, places):
        where, why = None, ""
        if job.exec_vnode:
            try:
                where = placed(site, parse_exec_vnode(job.exec_vnode), place)
                why = UNKNOWN_VNODE if where is None else ""
            except ValueError:
                why = BAD_EXEC_VNODE
        if why:
            left[why] = left.get(why, 0) + 1
        out.append(where)
    return out
