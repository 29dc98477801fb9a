"""The machine at node level (softwalltime/replay/nodes, issue 46): select and place parsed as
PBS reads them, chunks placed as PBS's node search places them, and the calendar at node
level; on a one-vnode site it answers as the pool of processors does."""

from __future__ import annotations

import random

import pytest

from softwalltime.replay import pbsched
from softwalltime.replay.machine import NEVER, NO_RESOURCES, OK
from softwalltime.replay.nodes import (
    SKIP_NEVER_FITS,
    NodeModel,
    View,
    fit_site,
    parse_nodes,
    parse_place,
    parse_request,
    parse_select,
    place,
    placement,
)  # fmt: skip
from softwalltime.replay.nodes.model import NodeCycle
from softwalltime.replay.nodes.spec import Chunk, Place, Request, parse_size_kb
from softwalltime.replay.pool import PoolModel
from softwalltime.replay.profile import Profile
from softwalltime.replay.sim_workload import SimWorkload, SiteColumns, make_workload, take
from softwalltime.replay.sources import PerfectSource, WalltimeSource
from softwalltime.site_file import Queue, Site, Vnode


def site(*vnodes: Vnode) -> Site:
    return Site("t", tuple(vnodes), (Queue("workq"), Queue("big")), "workq")


def work(specs: list[tuple[str, str]], queues: list[str] | None = None) -> SimWorkload:
    n = len(specs)
    cols = SiteColumns([s for s, _ in specs], [p for _, p in specs], queues or [""] * n,
                       [""] * n, [""] * n)  # fmt: skip
    return SimWorkload("t", ["u"] * n, [0] * n, [100] * n, [100] * n, [1] * n, None, {}, cols)


TWO_HOSTS = site(Vnode("a", "ha", 4), Vnode("b", "hb", 4))
ONE_HOST = site(Vnode("a", "h", 4), Vnode("b", "h", 4))


# --- select, place, nodes -------------------------------------------------------------


def test_select_chunks_with_units_and_custom_resources() -> None:
    chunks = parse_select("2:ncpus=8:mem=4gb+1:ncpus=1:ngpus=1:brno=True:cl=zewura:mpiprocs=1")
    assert chunks == (
        Chunk(2, 8, 4 * 1024 * 1024, 0, ()),
        Chunk(1, 1, 0, 1, (("brno", True), ("cl", "zewura"))),
    )
    assert parse_select("mem=10")[0] == Chunk(1, 1, 1, 0, ())  # no count: 1; ncpus 1


@pytest.mark.parametrize(
    "text, kb",
    [("1", 1), ("1024", 1), ("1025", 2), ("1kb", 1), ("1KB", 1), ("3mb", 3072), ("2w", 1),
     ("1gb", 1 << 20), ("1tb", 1 << 30), ("128w", 1)],
)  # fmt: skip
def test_sizes_as_pbs_reads_them(text: str, kb: int) -> None:
    assert parse_size_kb(text) == kb


@pytest.mark.parametrize(
    "spec, message",
    [("", "empty"), ("0:ncpus=1", "at least 1"), ("1:ncpus", "resource=value"),
     ("1:ncpus=x", "whole number"), ("1:ncpus=1:ncpus=2", "twice"), ("1:mem=4qb", "size"),
     ("200000:ncpus=1", "100000 chunks"), ("+".join(["1:ncpus=1"] * 300), "parts")],
)  # fmt: skip
def test_bad_select_is_refused_naming_it(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        parse_select(spec)
    assert "select" in str(err.value) or "size" in str(err.value)


def test_place_words() -> None:
    assert parse_place("") == Place("free")
    assert parse_place("scatter:excl") == Place("scatter", excl=True)
    assert parse_place("pack:exclhost") == Place("pack", excl=True, exclhost=True)
    assert parse_place("shared") == Place("free", share=True)
    for bad, message in [("pack:scatter", "together"), ("group=sw", "group"), ("x", "unknown")]:
        with pytest.raises(ValueError, match=message):
            parse_place(bad)


def test_nodes_spec_converted_as_the_server_converts_it() -> None:
    req = parse_nodes("1:ppn=64:x86_64:cl_zewura#excl")
    assert req.chunks == (Chunk(1, 64, 0, 0, (("cl_zewura", True), ("x86_64", True))),)
    assert req.place == Place("scatter", excl=True)
    req = parse_nodes("nodes=2:ppn=4:cpp=2+zewura5#shared#brno", {"zewura5"})
    assert req.chunks == (
        Chunk(2, 8, 0, 0, (("brno", True),)),
        Chunk(1, 1, 0, 0, (("brno", True), ("host", "zewura5"))),
    )
    assert req.place == Place("scatter", share=True)
    assert parse_nodes("3").place == Place("scatter")
    for bad in ("1:ppn=2:^zewura1", "1:foo=2", "", "0:ppn=1"):
        with pytest.raises(ValueError, match="nodes"):
            parse_nodes(bad)


# --- placement ------------------------------------------------------------------------


def _started(model: NodeModel, j: int, end: int = 100) -> tuple:
    cycle = model.cycle(0, [])
    assert cycle.check(j, 0, end) == OK
    cycle.start(j, 0, end, end)
    return model.parts[j]


def test_a_chunk_lies_on_one_host() -> None:
    w = work([("1:ncpus=6", ""), ("2:ncpus=3", "")])
    two = NodeModel(TWO_HOSTS, w)
    assert not two.can_ever_run(0)  # 6 cpus on no one host of 4
    assert two.cycle(0, []).check(0, 0, 100) == NEVER  # never a top job (fifo.cpp:1647)
    assert _started(two, 1) == ((0, 3, 0, 0), (1, 3, 0, 0))
    one = NodeModel(ONE_HOST, w)  # two vnodes of one host pool their cpus for a chunk
    assert one.can_ever_run(0)
    assert _started(one, 0) == ((0, 4, 0, 0), (1, 2, 0, 0))


def test_pack_scatter_vscatter_free() -> None:
    four = site(*(Vnode(n, "h1" if n in "ab" else "h2", 4) for n in "abcd"))
    w = work([("2:ncpus=2", "pack"), ("2:ncpus=2", "scatter"), ("2:ncpus=2", "vscatter"),
              ("3:ncpus=2", "free"), ("2:ncpus=3+1:ncpus=2", "pack")])  # fmt: skip
    m = NodeModel(four, w)
    assert _started(m, 0) == ((0, 2, 0, 0), (0, 2, 0, 0))  # both on a's host, a first
    m.release(0)
    assert _started(m, 1) == ((0, 2, 0, 0), (2, 2, 0, 0))  # one per host
    m.release(1)
    assert _started(m, 2) == ((0, 2, 0, 0), (1, 2, 0, 0))  # one per vnode
    m.release(2)
    assert _started(m, 3) == ((0, 2, 0, 0), (0, 2, 0, 0), (1, 2, 0, 0))
    m.release(3)
    assert _started(m, 4) == ((0, 3, 0, 0), (1, 3, 0, 0), (0, 1, 0, 0), (1, 1, 0, 0))
    assert not NodeModel(four, work([("3:ncpus=3", "scatter")])).can_ever_run(0)


def test_excl_takes_the_vnode_whole() -> None:
    w = work([("1:ncpus=1", "excl"), ("1:ncpus=1", ""), ("1:ncpus=1", "excl")])
    m = NodeModel(TWO_HOSTS, w)
    assert _started(m, 0) == ((0, 1, 0, 0),) and m.held[0] == (0,)
    assert _started(m, 1) == ((1, 1, 0, 0),)  # not beside the exclusive job on a
    assert m.cycle(0, []).check(2, 0, 100) == NO_RESOURCES  # a job runs on each vnode
    m.release(1)
    assert _started(m, 2) == ((1, 1, 0, 0),)
    exclhost = NodeModel(ONE_HOST, work([("1:ncpus=1", "exclhost"), ("1:ncpus=1", "")]))
    _started(exclhost, 0)
    assert exclhost.held[0] == (0, 1)
    assert exclhost.cycle(0, []).check(1, 0, 100) == NO_RESOURCES


def test_properties_and_the_resources_line() -> None:
    vn = (Vnode("a", "a", 8, resources={"brno": True, "cl": "zewura,zegox"}),
          Vnode("b", "b", 8, mem_kb=1 << 20, ngpus=2, resources={"cl": "zebra"}))  # fmt: skip
    line = ("ncpus", "mem", "host", "vnode", "cl", "ngpus")
    s = site(*vn)._replace(scheduler=site(*vn).scheduler._replace(resources=line))
    selects = ["1:brno=True", "1:brno=False", "1:cl=zegox", "1:cl=zebra", "1:mem=1gb",
               "1:ngpus=1", "1:host=b", "1:cl=none"]  # fmt: skip
    w = work([(x, "") for x in selects])
    m = NodeModel(s, w)
    assert [m.job(j).ok[0] for j in range(8)] == [
        {0}, {1}, {0}, {1}, {0, 1}, {0, 1}, {1}, set()]  # fmt: skip
    assert [m.can_ever_run(j) for j in range(8)] == [True] * 7 + [False]
    assert _started(m, 4) == ((1, 1, 1 << 20, 0),)  # a has no mem: an unset one is zero
    # cl not on the line: not checked (check.cpp:1243); a boolean always is
    plain = NodeModel(site(*vn), w)
    assert [plain.job(j).ok[0] for j in (0, 2, 7)] == [{0}, {0, 1}, {0, 1}]
    assert plain.can_ever_run(5)  # ngpus not on PBS's default line: not checked


def test_queue_pool_is_pbs_rule() -> None:
    s = site(Vnode("a", "a", 4, queue="big"), Vnode("b", "b", 4), Vnode("c", "c", 4))
    m = NodeModel(s, work([("1:ncpus=1", "")] * 3, ["big", "workq", ""]))
    assert [sorted(set().union(*m.job(j).ok)) for j in range(3)] == [[0], [1, 2], [1, 2]]
    own = NodeModel(s, work([("1:ncpus=1", "")]), node_filter=lambda j: [2])
    assert own.job(0).ok == [{2}]


# --- the calendar ---------------------------------------------------------------------


def test_a_backfill_candidate_avoids_the_top_jobs_vnodes() -> None:
    # a and b of 4 cpus on two hosts: R (4 cpus) on a until 50, C (4 cpus) on b until 80;
    # the top job T (4 cpus, excl) is reserved on a at 50, and starts at once once a is free.
    w = work([("1:ncpus=4", ""), ("1:ncpus=4", "excl"), ("1:ncpus=4", ""), ("1:ncpus=1", "")])
    m = NodeModel(TWO_HOSTS, w)
    c = m.cycle(0, [])
    c.check(0, 0, 50)
    c.start(0, 0, 50, 50)
    c.check(2, 0, 80)
    c.start(2, 0, 80, 80)  # b: busy until 80
    assert c.check(1, 0, 10) == NO_RESOURCES
    assert c.reserve(1, 10, 0, 0) == 50 and c.tops[0].parts == ((0, 4, 0, 0),)
    assert c.check(3, 0, 40) == NO_RESOURCES  # no cpu free now
    m.release(0)
    c = m.cycle(20, [(80, 2)])
    assert c.reserve(1, 100, 0, 0) == 20  # a is free now: T starts at once
    c2 = m.cycle(20, [(80, 2)])
    assert c2.check(3, 20, 30) == OK  # fits now on a


def test_excl_top_job_keeps_backfill_off_its_vnode_for_the_whole_run() -> None:
    w = work([("1:ncpus=2", ""), ("1:ncpus=1", "excl"), ("1:ncpus=1", ""), ("1:ncpus=1", "")])
    one = NodeModel(site(Vnode("a", "a", 4)), w)
    c = one.cycle(0, [])
    c.check(0, 0, 30)
    c.start(0, 0, 30, 30)
    assert c.check(1, 0, 10) == NO_RESOURCES  # a job runs on a
    assert c.reserve(1, 10, 0, 0) == 30
    assert c.check(2, 0, 30) == OK  # ends by the exclusive top job's start
    assert c.check(3, 0, 31) == NO_RESOURCES  # would share a with it: excluded (3497)
    c.start(2, 0, 30, 30)


def _pool_reference(free: int, ends: list[tuple[int, int]], tops: list[tuple[int, int]],
                    window: int, epoch: int) -> list[int]:  # fmt: skip
    # Profile.earliest, the pool's search, with its occupy of each top job
    prof = Profile(0, free, ends)
    out = []
    for p, d in tops:
        s = prof.earliest(p, d, window, epoch)
        prof.occupy(s, d, p)
        out.append(s)
    return out


@pytest.mark.parametrize("seed", range(30))
def test_one_vnode_reserves_as_the_pool_does(seed: int) -> None:
    rng = random.Random(seed)
    cpus = rng.randint(4, 32)
    nrun = rng.randint(0, 8)
    running = []  # (cpus, estimated end)
    used = 0
    for _ in range(nrun):
        p = rng.randint(1, max(1, (cpus - used) // 2 or 1))
        if used + p > cpus:
            break
        used += p
        running.append((p, rng.randint(1, 500)))
    tops = [(rng.randint(1, cpus), rng.randint(1, 300)) for _ in range(rng.randint(1, 3))]
    window = rng.choice([0, 1, 60, 600])
    epoch = rng.randint(0, 10**6)
    specs = [(f"1:ncpus={p}", "") for p, _ in running] + [(f"1:ncpus={p}", "") for p, _ in tops]
    m = NodeModel(site(Vnode("pool", "pool", cpus)), work(specs))
    c = m.cycle(0, [])
    for j, (_p, e) in enumerate(running):
        assert c.check(j, 0, e) == OK
        c.start(j, 0, e, e)
    ends = sorted((e, p) for p, e in running)
    got = [c.reserve(len(running) + k, d, window, epoch) for k, (_, d) in enumerate(tops)]
    assert got == _pool_reference(cpus - used, ends, tops, window, epoch)


# --- the simulation: a one-vnode site is the pool ---------------------------------------


def _random_work(seed: int, n: int, cpus: int) -> SimWorkload:
    rng = random.Random(seed)
    rows, t = [], 0
    for _ in range(n):
        t += rng.choice([0, 0, 5, 30, 200, 900])
        wall = rng.choice([60, 600, 3600, 7200])
        procs = rng.choice([1, 1, 2, 4, cpus // 2, cpus])
        rows.append((rng.choice("abc"), t, wall, rng.randint(1, wall), procs))
    return make_workload("random", rows)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("policy", ["fcfs-bf1", "sjf-bf1", "xfactor-greedy", "fcfs-strict"])
def test_one_vnode_site_simulates_as_the_pool(seed: int, policy: str) -> None:
    cpus = 16
    work = _random_work(seed, 150, cpus)
    pol = pbsched.parse_policy(policy, scheduler_iteration=300)
    for source in (WalltimeSource(), PerfectSource()):
        pool = pbsched.simulate_pbs(work, source, cpus, pol)
        model = NodeModel(site(Vnode("pool", "pool", cpus)), work)  # select=1:ncpus=procs
        nodes = pbsched.simulate_pbs(work, source, cpus, pol, model=model)
        assert nodes.start == pool.start, (policy, source.name)
        assert nodes.reservation == pool.reservation


def test_two_top_jobs_a_job_ending_before_the_later_one_passes_as_on_the_pool() -> None:
    # 17 cpus: A (8) runs until 100, B (8) until 300, 1 cpu free. T1 (17 cpus) is reserved
    # at 300, T2 (8 cpus, 10 s) at 100. C (1 cpu) ends at 200: free beside T2 at 100, and
    # gone before T1. PBS checks a job against the calendar's starts before its end only
    # (node_info.cpp:3463-3465 here; simulate_resmin's te->event_time < end,
    # simulate.cpp:1802, for the pool's resources), so C starts on both models; D (1 cpu)
    # ends at 301, past T1's start with no cpu beside it: refused on both.
    specs = [("1:ncpus=8", ""), ("1:ncpus=8", ""), ("1:ncpus=17", ""), ("1:ncpus=8", ""),
             ("1:ncpus=1", "")]  # fmt: skip
    w = work(specs)
    m = NodeModel(site(Vnode("pool", "pool", 17)), w)
    pool = PoolModel(17, [8, 8, 17, 8, 1])
    results = []
    for model in (m, pool):
        c = model.cycle(0, [])
        for j, end in ((0, 100), (1, 300)):
            assert c.check(j, 0, end) == OK
            c.start(j, 0, end, end)
        assert (c.reserve(2, 10, 0, 0), c.reserve(3, 10, 0, 0)) == (300, 100)
        results.append((c.check(4, 0, 200), c.check(4, 0, 301)))
    assert results == [(OK, NO_RESOURCES), (OK, NO_RESOURCES)]


@pytest.mark.parametrize("seed", range(20))
def test_one_chunk_fast_path_is_the_general_search(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 12)
    fc = [rng.randint(0, 16) for _ in range(n)]
    fm = [rng.randint(0, 1 << 20) for _ in range(n)]
    ac = [min(c, rng.randint(0, 16)) for c in fc]  # the calendar's least, at most now
    am = [min(m, rng.randint(0, 1 << 20)) for m in fm]
    g = [0] * n
    ok = {v for v in range(n) if rng.random() < 0.8}
    hosts = [[v] for v in range(n)]
    for _ in range(10):
        select = f"1:ncpus={rng.randint(1, 16)}:mem={rng.randint(0, 1 << 20)}kb"
        req = parse_request(select, rng.choice(["", "pack", "scatter", "excl", "vscatter"]))
        view = View(fc, fm, g, ac, am, g, [ok])
        assert place(req, hosts, view, flat=True) == place(req, hosts, view, flat=False)


def _site_work(seed: int) -> tuple[Site, SimWorkload]:
    rng = random.Random(seed)
    vnodes = []
    for h in range(rng.randint(2, 5)):
        for k in range(rng.randint(1, 3)):
            props = {"fast": True} if h % 2 else {}
            vnodes.append(Vnode(f"h{h}v{k}", f"h{h}", rng.choice([2, 4, 8]), resources=props))
    specs, rows, t = [], [], 0
    for _ in range(80):
        t += rng.choice([0, 10, 100])
        kinds = [f"{rng.randint(1, 2)}:ncpus={rng.choice([1, 2, 3])}"
                 for _ in range(rng.randint(1, 2))]  # fmt: skip
        if rng.random() < 0.2:
            kinds[0] += ":fast=True"
        specs.append(("+".join(kinds), rng.choice(["", "", "pack", "scatter", "excl"])))
        wall = rng.choice([60, 600])
        rows.append(("u", t, wall, rng.randint(1, wall), 1))
    base = make_workload("random", rows)
    n = len(specs)
    cols = SiteColumns([s for s, _ in specs], [p for _, p in specs], [""] * n, [""] * n,
                       [""] * n)  # fmt: skip
    return site(*vnodes), base._replace(site=cols)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("policy", ["fcfs-bf1", "sjf-bf2", "fcfs-greedy"])
def test_no_vnode_is_ever_oversubscribed(seed: int, policy: str) -> None:
    s, work = _site_work(seed)
    probe = NodeModel(s, work)
    keep = [j for j in range(len(work.submit)) if probe.can_ever_run(j)]
    work = take(work, keep)
    model = NodeModel(s, work)
    parts: dict[int, tuple] = {}
    held: dict[int, tuple] = {}
    taken = model.take

    def record(j: int, p: tuple, h: tuple) -> None:
        parts[j], held[j] = p, h
        taken(j, p, h)

    model.take = record  # type: ignore[method-assign]
    pol = pbsched.parse_policy(policy, scheduler_iteration=0)
    res = pbsched.simulate_pbs(work, PerfectSource(), s.ncpus, pol, model=model)
    assert all(x >= work.submit[j] for j, x in enumerate(res.start))
    assert set(parts) == set(range(len(work.submit)))  # every job ran
    instants = sorted(set(res.start))
    for t in instants:
        running = [j for j, x in enumerate(res.start) if x <= t < x + work.run[j]]
        use = [0] * len(s.vnodes)
        for j in running:
            for v, c, *_ in parts[j]:
                use[v] += c
            assert sum(c for _, c, *_ in parts[j]) == model.request(j).ncpus
        assert all(u <= v.ncpus for u, v in zip(use, s.vnodes)), (t, use)
        for j in running:  # nothing beside an exclusive job
            for v in held[j]:
                assert [k for k in running if any(p[0] == v for p in parts[k])] == [j]


def _complex_selspec(req: Request, hosts: list[list[int]], view: View) -> list | None:
    """PBS's path for sites whose hosts have one vnode each (``eval_complex_selspec``,
    node_info.cpp:2575-2700): chunk after chunk in select order, each on the first vnode
    that holds it whole (scattered vnodes skipped, else the chunks' resources taken)."""
    search = placement._Search(view)
    vnodes, parts = [h[0] for h in hosts], []
    for kind, need in enumerate(placement._needs(req, (True, True, False))):
        for _ in range(req.chunks[kind].n):
            got = search.chunk(need, vnodes, view.ok[kind], False)
            if got is None:
                return None
            parts += got
            if req.place.arrangement in ("scatter", "vscatter"):
                search.scattered.update(v for v, *_ in got)
            else:
                search._take(got)
    return sorted(parts)


@pytest.mark.parametrize("seed", range(20))
def test_many_chunks_of_one_kind_fast_path_is_the_general_search(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 12)
    fc = [rng.randint(0, 8) for _ in range(n)]
    fm = [rng.randint(0, 1 << 12) for _ in range(n)]
    ac = [min(c, rng.randint(0, 8)) for c in fc]  # the calendar's least, at most now
    am = [min(m, rng.randint(0, 1 << 12)) for m in fm]
    g = [0] * n
    ok = {v for v in range(n) if rng.random() < 0.8}
    hosts = [[v] for v in range(n)]
    for _ in range(20):
        mem = rng.choice(["", f":mem={rng.randint(0, 1 << 11)}kb"])
        select = f"{rng.randint(2, 20)}:ncpus={rng.randint(0, 3)}{mem}"
        how = rng.choice(["", "pack", "scatter", "vscatter", "free"])
        excl = rng.choice(["", ":excl", ":exclhost"]) if how else rng.choice(["", "excl"])
        req = parse_request(select, how + excl)
        view = View(fc, fm, g, ac, am, g, [ok])
        assert place(req, hosts, view, flat=True) == place(req, hosts, view, flat=False)


@pytest.mark.parametrize("seed", range(5))
def test_one_vnode_hosts_place_as_pbss_other_path(seed: int) -> None:
    # The model searches host by host (eval_placement's host sets); PBS, on a server whose
    # hosts have one vnode each, first-fits chunk after chunk over all vnodes. The same
    # vnodes either way (200,000 random cases found no difference while writing this).
    rng = random.Random(seed)
    for _ in range(400):
        n = rng.randint(2, 5)
        cpus, zero = [rng.randint(1, 6) for _ in range(n)], [0] * n
        kinds = [f"{rng.randint(1, 2)}:ncpus={rng.randint(1, 5)}" for _ in range(rng.randint(2, 3))]
        req = parse_request("+".join(kinds), rng.choice(["free", "scatter", "vscatter"]))
        hosts = [[v] for v in range(n)]
        view = View(cpus, zero, zero, cpus, zero, zero, [set(range(n))] * len(req.chunks))
        found = place(req, hosts, view, flat=False)
        assert (None if found is None else sorted(found[0])) == _complex_selspec(req, hosts, view)


def test_hold_places_a_running_job_and_release_frees_it() -> None:
    m = NodeModel(TWO_HOSTS, work([("1:ncpus=4", ""), ("1:ncpus=3", "excl"), ("1:ncpus=2", "")]))
    m.hold(0)
    m.hold(1)
    assert (m.parts[0], m.parts[1], m.held[1]) == (((0, 4, 0, 0),), ((1, 3, 0, 0),), (1,))
    assert m.full() is False and m.free_cpus == 1
    with pytest.raises(ValueError, match="running job 2"):
        m.hold(2)  # 1 cpu left, on the exclusive job's vnode
    m.release(1)
    m.hold(2)
    assert m.parts[2] == ((1, 2, 0, 0),) and m.fc == [0, 2] and m.xheld == [0, 0]


def test_a_job_without_select_is_one_chunk_of_its_processors() -> None:
    w = work([("", ""), ("1:ncpus=2", "bogus")])._replace(procs=[3, 1])
    m = NodeModel(TWO_HOSTS, w)
    assert m.request(0).chunks == (Chunk(1, 3),)
    with pytest.raises(ValueError, match="place 'bogus'"):
        m.request(1)
    pool_only = NodeModel(TWO_HOSTS, w._replace(site=None))
    assert pool_only.request(1).chunks == (Chunk(1, 1),)


def test_fit_site_drops_what_no_pool_holds_and_counts_it() -> None:
    w = work([("1:ncpus=6", ""), ("2:ncpus=3", ""), ("1:ncpus=1:gpu=True", "")])
    fitted = fit_site(w, TWO_HOSTS)
    assert fitted.site is not None and fitted.site.select == ["2:ncpus=3"]
    assert fitted.skipped == {SKIP_NEVER_FITS: 2}
    assert fit_site(fitted, TWO_HOSTS) is fitted  # nothing to drop


# --- the cycle's memo (issue 46's speed) ----------------------------------------------


def test_the_memo_forgets_what_a_start_or_a_reservation_changed() -> None:
    # one vnode of 4 cpus; two jobs of one kind (3 cpus): the first fits, the second no
    # longer once the first has started; a top job of 4 cpus reserved at its end: a job
    # of one cpu that ends before the top job's start fits, one of the same kind ending
    # after it does not
    w = work([("1:ncpus=3", "")] * 2 + [("1:ncpus=4", "")] + [("1:ncpus=1", "")] * 3)
    m = NodeModel(site(Vnode("a", "a", 4)), w)
    c = m.cycle(0, [])
    assert c.check(0, 0, 50) == OK and c.check(1, 0, 50) == OK
    c.start(0, 0, 50, 50)
    assert c.check(1, 0, 50) == NO_RESOURCES
    assert c.check(3, 0, 100) == OK  # one cpu left
    assert c.reserve(2, 10, 0, 0) == 50
    assert c.check(4, 0, 50) == OK and c.check(5, 0, 51) == NO_RESOURCES


def _few_kinds_queued(seed: int) -> tuple[Site, SimWorkload]:
    # _site_work's jobs with 4 of its requests and 4 walltimes, submitted 10 at a time: a
    # queue where one kind's jobs of several classes meet in a cycle
    s, work = _site_work(seed)
    assert work.site is not None
    few = random.Random(seed).sample(sorted(set(zip(work.site.select, work.site.place))), 4)
    rng = random.Random(seed)
    kinds = [rng.choice(few) for _ in work.submit]
    cols = work.site._replace(select=[k for k, _ in kinds], place=[p for _, p in kinds])
    wall = [rng.choice([60, 120, 300, 600]) for _ in work.submit]
    run = [min(r, w) for r, w in zip(work.run, wall)]
    submit = [10 * (k // 10) for k in range(len(wall))]
    work = work._replace(site=cols, wall=wall, run=run, submit=submit)
    probe = NodeModel(s, work)
    return s, take(work, [j for j in range(len(work.submit)) if probe.can_ever_run(j)])


@pytest.mark.parametrize("policy", ["fcfs-bf1", "sjf-bf2", "fcfs-bf3"])
def test_every_check_the_memo_answers_is_the_placement_itself(policy: str) -> None:
    # on random sites, requests and calendars (several top jobs), each answer check takes
    # from the memo is what the view and the search give at that moment
    asked = {"memo": 0}
    memo_place = NodeCycle._check_place

    def compared(self: NodeCycle, j: int, now: int, end: int) -> object:
        kept = (self.m.job(j), now, self._runs(now, end)) in self.memo.found
        got = memo_place(self, j, now, end)
        fresh = self._place(j, self._view(j, self.state, now, end, False))
        assert got == fresh, (j, now, end)
        asked["memo"] += kept
        return got

    pol = pbsched.parse_policy(policy, scheduler_iteration=0)
    try:
        NodeCycle._check_place = compared  # type: ignore[method-assign]
        for seed in range(12):
            s, work = _few_kinds_queued(seed)
            model = NodeModel(s, work)
            pbsched.simulate_pbs(work, PerfectSource(), s.ncpus, pol, model=model)
    finally:
        NodeCycle._check_place = memo_place  # type: ignore[method-assign]
    assert asked["memo"] > 100


def test_the_calendar_is_in_time_order_with_ends_already_past_and_top_jobs() -> None:
    # reserve applies the calendar's events in time order: the running jobs' ends come
    # sorted (those already past moved to now, out of job order), the top jobs' added
    w = work([("1:ncpus=1", "")] * 4 + [("1:ncpus=4", "")] * 2)
    m = NodeModel(site(Vnode("a", "a", 4)), w)
    for j in range(4):
        _started(m, j)
    c = m.cycle(10, [(3, 3), (5, 1), (40, 0), (40, 2)])
    assert [e[:3] for e in c._calendar()] == [(10, 0, 3), (10, 0, 1), (40, 0, 0), (40, 0, 2)]
    assert c.reserve(4, 20, 0, 0) == 40
    got = [e[:3] for e in c._calendar()]
    assert got == sorted(got) and (40, 1, 0) in got and (60, 0, -1) in got
    assert c.reserve(5, 20, 0, 0) == 60
