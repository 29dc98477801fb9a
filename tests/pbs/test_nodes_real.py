"""Nodes and chunks on the real scheduler (issue 46, ``make test-pbs``).

Two virtual vnodes of 4 cpus on the one MoM, each its own host (:mod:`vnodes`): the node
model (:class:`softwalltime.replay.nodes.NodeModel`) must predict what the real scheduler
does, and the pool of 8 cpus must not. Jobs are ``sleep`` jobs as alice, all queued while
``scheduling`` is off, FCFS without strict ordering (the test server's sched_config).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pbsctl
import pytest
import vnodes

from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim
from softwalltime.replay.nodes import NodeModel, fit_site
from softwalltime.replay.nodes.spec import parse_select
from softwalltime.replay.sim_workload import SiteColumns
from softwalltime.replay.sources import EstimateSource, PerfectSource, WalltimeSource
from softwalltime.site_file import Queue, Site, Vnode
from softwalltime.units import qstat_time

VNODE_CPUS = [4, 4]
WALLTIME_S = 600
GREEDY = pbsched.parse_policy("fcfs-greedy")  # the test server's strict_ordering: false


def _site(names: list[str]) -> Site:
    nodes = [Vnode(pbsctl.NODE, pbsctl.NODE, 0)]
    nodes += [Vnode(n, f"vhost{k}", c) for k, (n, c) in enumerate(zip(names, VNODE_CPUS))]
    return Site("real", tuple(nodes), (Queue("workq"),), "workq")


def _work(jobs: list[tuple[str, str, int]]) -> sim.SimWorkload:
    """``jobs`` (select, place, sleep s), all submitted at 0, with their site columns; a
    job's processors are its chunks' cpus (what the pool asks)."""
    cpus = [sum(c.n * c.ncpus for c in parse_select(s)) for s, _, _ in jobs]
    rows = [(pbsctl.USER, 0, WALLTIME_S, run, p) for (_, _, run), p in zip(jobs, cpus)]
    n = len(jobs)
    cols = SiteColumns([s for s, _, _ in jobs], [p for _, p, _ in jobs], ["workq"] * n,
                       [""] * n, [""] * n)  # fmt: skip
    return sim.make_workload("real", rows)._replace(site=cols)


def _predicted(
    jobs: list[tuple[str, str, int]], names: list[str], nodes: bool,
    policy: pbsched.Policy = GREEDY, source: type[EstimateSource] = WalltimeSource,
) -> list[int]:  # fmt: skip
    """The simulated starts of ``jobs`` on the vnodes (``nodes``) or on the pool of their
    cpus, -1 for a job that can never start (simulated without it)."""
    work = _work(jobs)
    procs = sum(VNODE_CPUS)
    if not nodes:
        return pbsched.simulate_pbs(work, source(), procs, policy).start
    kept = fit_site(work, _site(names))  # a job no host holds never starts
    model = NodeModel(_site(names), kept)
    start = iter(pbsched.simulate_pbs(kept, source(), procs, policy, model=model).start)
    assert kept.site is not None
    fits = set(kept.site.select)
    return [next(start) if s in fits else -1 for s, _, _ in jobs]


@pytest.fixture(scope="module")
def two_vnodes(pbs_server: None) -> Iterator[list[str]]:
    """Two vnodes of 4 cpus, two hosts; the server's scheduling as it was afterwards."""
    scheduling = pbsctl.server_attribute("scheduling")
    with vnodes.virtual_vnodes(VNODE_CPUS) as names:
        try:
            yield names
        finally:
            pbsctl.set_attribute("server", "scheduling", scheduling)


def _run(
    jobs: list[tuple[str, str, int]], ids: list[str], finished: list[int], soft: bool = False
) -> list[dict[str, Any]]:
    """Submit ``jobs`` while scheduling is off (with ``soft``, each with its sleep as its
    soft walltime, set by the manager as the hook would), let the scheduler run them, wait
    until the jobs ``finished`` (indices) have ended; each job's qstat."""
    pbsctl.qmgr("set server scheduling = False")
    for select, place, run in jobs:
        extra = f" -l place={place}" if place else ""
        ids.append(
            pbsctl.qsub(f"-l select={select}{extra} -l walltime={WALLTIME_S}", f"sleep {run}")
        )
        if soft:
            pbsctl.run("qalter", "-l", f"soft_walltime={run}", ids[-1])
    pbsctl.qmgr("set server scheduling = True")
    for k in finished:
        pbsctl.wait_state(ids[k], "F", timeout=60)
    return [pbsctl.job(j) for j in ids]


def _stime(info: dict[str, Any]) -> int:
    stime = qstat_time(info["stime"])
    assert stime is not None
    return stime


# A 6-cpu chunk fits on no host of 4 cpus, though the pool has 8; two chunks of 3 fit.
WIDE = [("1:ncpus=6", "", 3), ("2:ncpus=3", "", 3)]


def test_the_models_tell_a_chunk_per_host_from_the_pool() -> None:
    names = [vnodes.vnode_name(k) for k in range(2)]
    assert _predicted(WIDE, names, nodes=True) == [-1, 0]
    assert _predicted(WIDE, names, nodes=False) == [0, 3]


def test_real_a_chunk_lies_on_one_host(two_vnodes: list[str], jobs: list[str]) -> None:
    wide, split = _run(WIDE, jobs, finished=[1])
    assert wide["job_state"] == "Q", wide
    assert "Insufficient amount of resource: ncpus" in wide.get("comment", ""), wide
    assert split["exec_vnode"] == f"({two_vnodes[0]}:ncpus=3)+({two_vnodes[1]}:ncpus=3)"
    assert _predicted(WIDE, two_vnodes, nodes=True) == [-1, 0]  # the model: the same
    assert _predicted(WIDE, two_vnodes, nodes=False)[0] == 0  # the pool: the wide one runs


# X (1 cpu, excl) takes vnode 0 whole; Y (1 cpu) goes to vnode 1; Z (4 cpus) finds no host
# with 4 free cpus (3 idle on vnode 0 under X) and waits for Y's end. The pool runs all 3.
EXCL = [("1:ncpus=1", "excl", 8), ("1:ncpus=1", "", 3), ("1:ncpus=4", "", 1)]


def test_the_models_tell_excl_from_the_pool() -> None:
    names = [vnodes.vnode_name(k) for k in range(2)]
    assert _predicted(EXCL, names, nodes=True) == [0, 0, 3]
    assert _predicted(EXCL, names, nodes=False) == [0, 0, 0]


def test_real_excl_leaves_cpus_idle(two_vnodes: list[str], jobs: list[str]) -> None:
    x, y, z = _run(EXCL, jobs, finished=[1, 2])
    v0, v1 = two_vnodes
    assert (x["exec_vnode"], y["exec_vnode"], z["exec_vnode"]) == (
        f"({v0}:ncpus=1)", f"({v1}:ncpus=1)", f"({v1}:ncpus=4)")  # fmt: skip
    real = [_stime(i) for i in (x, y, z)]
    node = _predicted(EXCL, two_vnodes, nodes=True)
    # Z waited for Y's 3 s as the node model says; the pool starts it with the others
    assert real[2] - real[1] >= node[2] - node[1] == 3, real
    assert real[2] - real[0] >= 3 and _predicted(EXCL, two_vnodes, nodes=False)[2] == 0


# The calendar at node level (strict_ordering, backfill_depth 1, opt_backfill_fuzzy off;
# soft walltimes = the sleeps). R1 and R2 take 2 cpus of each vnode (pinned by vnode=). T (4
# cpus) fits no host now and is the top job, reserved on vnode 0 at R1's end (4 s). B (2
# cpus, 10 s) fits vnode 0 now, the first in order, but would still run there at T's start:
# PBS checks each vnode against the calendar until B's end (node_info.cpp:3440-3520) and
# puts B on vnode 1, where nothing is reserved. The pool sees 4 free cpus and starts T at
# once, B at its end; a node model without the calendar per vnode would put B on vnode 0
# and T would wait for B's end.
def _calendar_jobs(names: list[str]) -> list[tuple[str, str, int]]:
    v0, v1 = names
    return [(f"1:ncpus=2:vnode={v0}", "", 4), (f"1:ncpus=2:vnode={v1}", "", 8),
            ("1:ncpus=4", "", 2), ("1:ncpus=2", "", 10)]  # fmt: skip


STRICT = pbsched.parse_policy("fcfs-bf1", backfill_fuzzy=0)


def test_the_models_tell_the_node_calendar_from_the_pool() -> None:
    names = [vnodes.vnode_name(k) for k in range(2)]
    jobs = _calendar_jobs(names)
    assert _predicted(jobs, names, True, STRICT, PerfectSource) == [0, 0, 4, 0]
    assert _predicted(jobs, names, False, STRICT, PerfectSource) == [0, 0, 0, 2]


@pytest.fixture()
def strict_ordering(two_vnodes: list[str]) -> Iterator[list[str]]:
    """sched_config's strict_ordering, backfill_depth 1 and opt_backfill_fuzzy off, each
    as it was afterwards."""
    depth = pbsctl.server_attribute("backfill_depth")
    fuzzy = pbsctl.sched_attribute("opt_backfill_fuzzy")
    with pbsctl.sched_config({"strict_ordering": "strict_ordering: True\tALL"}):
        try:
            pbsctl.qmgr("set server backfill_depth = 1")
            pbsctl.qmgr("set sched opt_backfill_fuzzy = 0")
            yield two_vnodes
        finally:
            pbsctl.set_attribute("server", "backfill_depth", depth)
            pbsctl.set_attribute("sched", "opt_backfill_fuzzy", fuzzy)


def test_real_backfill_avoids_the_top_jobs_vnode(
    strict_ordering: list[str], jobs: list[str]
) -> None:
    v0, v1 = strict_ordering
    r1, r2, t, b = _run(_calendar_jobs(strict_ordering), jobs, finished=[2, 3], soft=True)
    assert (t["exec_vnode"], b["exec_vnode"]) == (f"({v0}:ncpus=4)", f"({v1}:ncpus=2)")
    real = [_stime(i) for i in (r1, r2, t, b)]
    assert real[3] - real[0] <= 1 and real[2] - real[0] >= 4, real  # B at once, T at R1's end
    node = _predicted(_calendar_jobs(strict_ordering), strict_ordering, True, STRICT, PerfectSource)
    pool = _predicted(
        _calendar_jobs(strict_ordering), strict_ordering, False, STRICT, PerfectSource
    )
    assert node[3] < node[2] and real[3] < real[2] and not pool[3] < pool[2]
