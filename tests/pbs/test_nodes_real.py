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
from softwalltime.replay.nodes import NodeModel
from softwalltime.replay.nodes.spec import parse_select
from softwalltime.replay.sim_workload import SiteColumns, take
from softwalltime.replay.sources import WalltimeSource
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


def _predicted(jobs: list[tuple[str, str, int]], names: list[str], nodes: bool) -> list[int]:
    """The simulated starts of ``jobs`` on the vnodes (``nodes``) or on the pool of their
    cpus, -1 for a job that can never start (simulated without it)."""
    work = _work(jobs)
    procs = sum(VNODE_CPUS)
    if not nodes:
        return pbsched.simulate_pbs(work, WalltimeSource(), procs, GREEDY).start
    never = NodeModel(_site(names), work)
    keep = [j for j in range(len(jobs)) if never.can_ever_run(j)]
    kept = take(work, keep)
    model = NodeModel(_site(names), kept)
    start = pbsched.simulate_pbs(kept, WalltimeSource(), procs, GREEDY, model=model).start
    out = [-1] * len(jobs)
    for k, j in enumerate(keep):
        out[j] = start[k]
    return out


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
    jobs: list[tuple[str, str, int]], ids: list[str], finished: list[int]
) -> list[dict[str, Any]]:
    """Submit ``jobs`` while scheduling is off, let the scheduler run them, wait until the
    jobs ``finished`` (indices) have ended; each job's qstat."""
    pbsctl.qmgr("set server scheduling = False")
    for select, place, run in jobs:
        extra = f" -l place={place}" if place else ""
        ids.append(
            pbsctl.qsub(f"-l select={select}{extra} -l walltime={WALLTIME_S}", f"sleep {run}")
        )
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
