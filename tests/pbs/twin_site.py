"""The site-shaped twin (issue 46): a CERIT-SC segment on a scaled-down copy of its site,
on the real OpenPBS server and in the node-level simulator.

- **The site** (:func:`scaled_site`): the CERIT-SC site file's vnodes of each node type
  (80 and 12 cpus), ``1/node_div`` of each type's count (rounded up: 20 -> 5, 48 -> 12),
  taken evenly from the vnodes some job ran on (an unused vnode is in no queue's pool), each
  with ``ncpus / cpu_div`` cpus (80 -> 20, 12 -> 3 with ``cpu_div`` 4), its own host
  (``vhostK``, :mod:`vnodes`), and its properties and ``Qlist`` as in the site file. The
  queues as the site file has them, walltime limits divided by the time factor (rounded
  up), without their run limits (the full site's, not set on the server), the routing
  queue ``route`` in front.
- **The jobs** (:func:`site_jobs`): each chunk's ncpus divided by ``cpu_div`` (rounded up,
  at least 1), its count, properties and the job's ``place`` (``excl``) kept; times
  compressed as :func:`twin.scale` does. A job of a walltime queue is submitted to
  ``route`` (routed by its scaled walltime), the others to their own queue. The server adds
  each queue's ``default_chunk.Qlist`` to the chunks; the simulator's jobs carry it in
  their select (the node model matches ``Qlist`` as a string array on sched_config's
  ``resources:`` line, as PBS does). A job the scaled site can never run (its pool holds
  no vnode with its properties) is left out of the segment, counted.
- **The server** (:func:`configured`): the custom resources, the vnodes (each its own host,
  :func:`vnodes.virtual_vnodes`), their resources, the queues, ``Qlist`` on the
  ``resources:`` line; everything removed afterwards, also on failure.
- **The simulator** (:func:`simulate`): :func:`softwalltime.replay.pbsched.simulate_pbs`
  with a :class:`~softwalltime.replay.nodes.model.NodeModel` of the same scaled site and
  its :class:`~softwalltime.replay.queues.SiteOrder` (by_queue over the queues in the site
  file's order, which is the order they are created on the server).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pbsctl
import twin
import vnodes

from softwalltime import site_file as sf
from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim
from softwalltime.replay.nodes.model import NodeModel
from softwalltime.replay.queues import execution_queues, site_rules

REPO = Path(__file__).resolve().parents[2]
CERIT_SITE = REPO / "softwalltime" / "data" / "sites" / "cerit-sc-2013.json"
CERIT_TRACE = REPO / "tests" / "data" / "traces" / "CERIT-SC-wagap-2013.alea.swf.gz"
POOL = "Qlist"
MAX_VNODES = 40  # one MoM: keep the virtual vnodes few
_NCPUS = re.compile(r"^ncpus=(\d+)$")


class SiteJob(NamedTuple):
    """A scaled job of the site-shaped twin: its times and chunks."""

    job: twin.TwinJob  # procs: the scaled chunks' cpus
    select: str  # scaled, without the queue's Qlist
    place: str
    submit_queue: str  # where qsub puts it: "route" or its own queue
    queue: str  # its execution queue (routed by the scaled walltime)


# ---------------------------------------------------------------------------------------
# The scaled site and jobs (pure)


def scaled_site(site: sf.Site, cpu_div: int, node_div: int, factor: float) -> sf.Site:
    """``site`` scaled down (module docstring).

    :raises ValueError: more vnodes than :data:`MAX_VNODES`, or a type none of whose vnodes
        any queue uses
    """
    kinds = sorted({v.ncpus for v in site.vnodes}, reverse=True)
    picked: list[sf.Vnode] = []
    for ncpus in kinds:
        every = [v for v in site.vnodes if v.ncpus == ncpus]
        used = [v for v in every if POOL in v.resources]
        want = math.ceil(len(every) / node_div)
        if not used:
            raise ValueError(f"no vnode of {ncpus} cpus is in a queue's pool")
        picked += [used[k * len(used) // want] for k in range(min(want, len(used)))]
    if len(picked) > MAX_VNODES:
        raise ValueError(f"{len(picked)} vnodes: at most {MAX_VNODES} on the one MoM")
    nodes = tuple(
        sf.Vnode(vnodes.vnode_name(k), f"vhost{k}", max(1, v.ncpus // cpu_div),
                 resources=dict(v.resources))
        for k, v in enumerate(picked)
    )  # fmt: skip
    # the site file's run limits are the full site's (CERIT-SC's, inferred from the trace):
    # not scaled and not set on the server, so the twin leaves them out on both sides
    queues = tuple(
        q._replace(
            walltime_max=None if q.walltime_max is None else twin.scaled(q.walltime_max, factor),
            max_run=None,
            max_run_res={},
        )
        for q in site.queues
    )
    return site._replace(name=f"{site.name}-scaled", vnodes=nodes, queues=queues)


def scale_select(select: str, cpu_div: int) -> tuple[str, int]:
    """``select`` with each chunk's ncpus divided by ``cpu_div`` (rounded up, at least 1),
    and the cpus it asks for in all.

    :raises ValueError: a chunk without a count or ncpus
    """
    chunks, total = [], 0
    for chunk in select.split("+"):
        count, *parts = chunk.split(":")
        if not count.isdigit():
            raise ValueError(f"{select!r}: a chunk without a count")
        ncpus = [int(m.group(1)) for p in parts if (m := _NCPUS.match(p))]
        if len(ncpus) != 1:
            raise ValueError(f"{select!r}: a chunk without one ncpus")
        cpus = max(1, math.ceil(ncpus[0] / cpu_div))
        parts = [f"ncpus={cpus}" if _NCPUS.match(p) else p for p in parts]
        chunks.append(":".join([count, *parts]))
        total += int(count) * cpus
    return "+".join(chunks), total


def properties(select: str) -> set[str]:
    """The boolean resources a select asks for (``NAME=True``)."""
    return {
        p.split("=")[0] for c in select.split("+") for p in c.split(":")[1:] if p.endswith("=True")
    }


def with_pool(select: str, queue: str) -> str:
    """``select`` with each chunk's ``Qlist=queue`` (the queue's default_chunk)."""
    return "+".join(f"{c}:{POOL}={queue}" for c in select.split("+"))


def site_jobs(
    work: sim.SimWorkload,
    first: int,
    n: int,
    factor: float,
    margin: int,
    site: sf.Site,
    cpu_div: int,
) -> tuple[list[SiteJob], int]:
    """Jobs ``first`` .. of ``work`` (with site columns), scaled, on the scaled ``site``:
    the first ``n`` that the site can ever run, and how many were left out before the
    ``n``-th."""  # fmt: skip
    if work.site is None:
        raise ValueError(f"{work.source}: no site columns (select, place, queue)")
    route = site.queue("route")
    routed = set(route.destinations) if route is not None else set()
    times = twin.scale(work, first, len(work.submit) - first, factor, margin)
    out: list[SiteJob] = []
    dropped = 0
    for k, t in enumerate(times):
        if len(out) == n:
            break
        j = first + k
        select, cpus = scale_select(work.site.select[j], cpu_div)
        own = work.site.queue[j]
        submit_queue = "route" if own in routed or not own else own
        queue = execution_queues(site, [submit_queue], [t.wall])[0]
        job = SiteJob(t._replace(procs=cpus), select, work.site.place[j], submit_queue, queue or "")
        if queue is None or not _can_run(site, job):
            dropped += 1
            continue
        out.append(job)
    return out, dropped


def _can_run(site: sf.Site, job: SiteJob) -> bool:
    rows = [(pbsctl.USER, 0, job.job.wall, job.job.run, job.job.procs)]
    work = sim.make_workload(
        "one", rows, None, site_rows=[(with_pool(job.select, job.queue), job.place, job.queue)]
    )
    return NodeModel(site, work).can_ever_run(0)


def simulate(
    jobs: Sequence[SiteJob],
    submit: Sequence[int],
    soft: Sequence[int | None],
    site: sf.Site,
    policy: pbsched.Policy,
    epoch: int = 0,
) -> list[int]:
    """Simulated starts of ``jobs`` released at ``submit`` on ``site`` (node model, queues),
    in the order of ``jobs``."""  # fmt: skip
    order = sorted(range(len(jobs)), key=lambda k: (submit[k], k))
    rows = [
        (pbsctl.USER, submit[k], jobs[k].job.wall, jobs[k].job.run, jobs[k].job.procs)
        for k in order
    ]
    site_rows = [
        (with_pool(jobs[k].select, jobs[k].queue), jobs[k].place, jobs[k].queue) for k in order
    ]
    procs = sum(v.ncpus for v in site.vnodes)
    work = sim.make_workload("twin-site", rows, procs, site_rows=site_rows)
    assert len(work.submit) == len(jobs)
    model, order_of = site_rules(site, work, [jobs[k].queue for k in order], NodeModel(site, work))
    given = twin._Given("twin", [soft[k] for k in order])
    start = pbsched.simulate_pbs(
        work, given, procs, policy, epoch=epoch, model=model, site=order_of
    ).start
    out = [0] * len(jobs)
    for pos, k in enumerate(order):
        out[k] = start[pos]
    return out


# ---------------------------------------------------------------------------------------
# The real server


def qsub_line(job: SiteJob) -> str:
    """Submit ``job`` held; prints its id, or FAIL."""
    place = f" -l place={job.place}" if job.place else ""
    return (
        f"echo 'sleep {job.job.run}' | /opt/pbs/bin/qsub -h -N twin -o /dev/null -e /dev/null"
        f" -q {job.submit_queue} -l select={job.select}{place} -l walltime={job.job.wall}"
        " || echo FAIL"
    )


def _booleans(site: sf.Site, jobs: Sequence[SiteJob]) -> list[str]:
    names = {n for v in site.vnodes for n, x in v.resources.items() if isinstance(x, bool)}
    return sorted(names | {p for j in jobs for p in properties(j.select)})


def _queue(q: sf.Queue) -> None:
    obj = f"queue {q.name}"
    pbsctl.qmgr(
        f"create queue {q.name} queue_type = {'Route' if q.kind == 'route' else 'Execution'}"
    )
    pbsctl.qmgr(f"set {obj} priority = {q.priority}")
    if q.walltime_max is not None:
        pbsctl.qmgr(f"set {obj} resources_max.walltime = {q.walltime_max}")
    if q.walltime_min is not None:
        pbsctl.qmgr(f"set {obj} resources_min.walltime = {q.walltime_min}")
    for res, value in q.default_chunk.items():
        pbsctl.qmgr(f"set {obj} default_chunk.{res} = {value}")
    if q.destinations:
        pbsctl.qmgr(f'set {obj} route_destinations = "{",".join(q.destinations)}"')
        # held jobs (the manager sets their soft walltime first) are routed at qsub
        pbsctl.qmgr(f"set {obj} route_held_jobs = True")
    pbsctl.qmgr(f"set {obj} enabled = {q.enabled}")
    pbsctl.qmgr(f"set {obj} started = {q.started}")


@contextmanager
def configured(site: sf.Site, jobs: Sequence[SiteJob]) -> Iterator[None]:
    """The server as ``site`` (inside :func:`twin.server` with 0 cpus on ``pbshost``):
    resources, vnodes, queues, ``Qlist`` on the resources line; all removed afterwards
    (sched_config is :func:`twin.server`'s to restore)."""
    booleans = _booleans(site, jobs)
    made: list[str] = []
    queues: list[str] = []
    try:
        for name in booleans:
            pbsctl.qmgr(f"create resource {name} type = boolean, flag = h")
            made.append(name)
        pbsctl.qmgr(f"create resource {POOL} type = string_array, flag = h")
        made.append(POOL)
        with vnodes.virtual_vnodes([v.ncpus for v in site.vnodes]):
            try:
                for v in site.vnodes:
                    for name, value in v.resources.items():
                        pbsctl.qmgr(f'set node {v.name} resources_available.{name} = "{value}"')
                for q in site.queues:
                    if q.name != "workq":
                        _queue(q)
                        queues.append(q.name)
                line = '"' + ", ".join(site.scheduler.resources) + '"'
                text = pbsctl.sched_config_line(
                    pbsctl.SCHED_CONFIG.read_text(), "resources", f"resources: {line}"
                )
                pbsctl.SCHED_CONFIG.write_text(text)
                pbsctl.reload_scheduler()
                yield
            finally:
                for name in reversed(queues):
                    pbsctl.qmgr(f"delete queue {name}", check=False)
    finally:
        for name in reversed(made):
            pbsctl.qmgr(f"delete resource {name}", check=False)


def replay(jobs: Sequence[SiteJob], site: sf.Site, policy: pbsched.Policy) -> twin.Replay:
    """Run ``jobs`` on the server (inside :func:`configured`) under ``policy`` with soft
    walltimes = the scaled run times (``PERFECT``), and simulate them with the real
    release times. The jobs stay (for the caller to purge with :func:`twin.purge_all`)."""
    twin.apply_policy(policy)
    plain = [j.job for j in jobs]
    soft = twin.soft_walltimes(plain, twin.PERFECT)
    ids: list[str] = []
    try:
        twin.submit_all(plain, soft, ids, line=lambda k: qsub_line(jobs[k]))
        planned = sum(j.run for j in plain) + max(j.submit for j in plain)
        eligible, starts, ends = twin.real_times(ids, timeout=planned + 120)
        t0 = min(eligible)
        submit = [e - t0 for e in eligible]
        simulated = simulate(jobs, submit, soft, site, policy, t0)
        measured = [
            j._replace(job=m) for j, m in zip(jobs, twin.measured_runs(plain, starts, ends))
        ]
        again = simulate(measured, submit, soft, site, policy, t0)
    except BaseException:
        twin.purge_all(ids)
        raise
    runs = [e - s for s, e in zip(starts, ends)]
    return twin.Replay(t0, ids, submit, [s - t0 for s in starts], simulated, again, runs)


def queues_of(ids: Sequence[str]) -> list[str]:
    """Each finished job's execution queue on the server (``qstat -x -f``), in order."""
    info = twin.stat_jobs(ids)
    return [str(info.get(i, {}).get("queue")) for i in ids]


def choose_segment(
    work: sim.SimWorkload,
    site: sf.Site,
    n: int,
    candidates: int,
    cpu_div: int,
    node_div: int,
    policy: pbsched.Policy,
) -> tuple[int, float, int]:
    """Among ``candidates`` windows of ``n`` jobs spread evenly over the trace, the one with
    the largest simulated mean wait on the scaled site, uncompressed, with the users'
    walltimes under ``policy`` (first on a tie): (first job, mean wait s, makespan s)."""
    small = scaled_site(site, cpu_div, node_div, 1)
    last = max(0, len(work.submit) - 2 * n)
    best = (-1.0, 0, 0)
    for first in sorted({last * k // max(1, candidates - 1) for k in range(candidates)}):
        jobs, _ = site_jobs(work, first, n, 1, 0, small, cpu_div)
        submit = [j.job.submit for j in jobs]
        start = simulate(jobs, submit, [None] * len(jobs), small, policy)
        mean = sum(s - t for s, t in zip(start, submit)) / len(jobs)
        span = max(s + j.job.run for s, j in zip(start, jobs))
        if mean > best[0]:
            best = (mean, first, span)
    return best[1], best[0], best[2]
