"""A workload on a site file's model (softwalltime/replay/site_model.py): routing, the queues'
defaults, the vnodes behind the run limits; ``simulate --policies`` and the fit on it through
the CLI, where nodes change the answer; and the pool left as it was without ``--site``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_data import TRACES

from softwalltime import cli
from softwalltime import site_file as sf
from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim
from softwalltime.replay.queues import SKIP_UNROUTED
from softwalltime.replay.sim_workload import make_workload, read_workload, take
from softwalltime.replay.site_model import site_run, with_queue_defaults

SITES = Path(__file__).resolve().parents[1] / "softwalltime" / "data" / "sites"
STRICT = pbsched.parse_policy("fcfs-bf1")


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _two_nodes(tmp_path: Path) -> str:
    site = sf.Site("two", (sf.Vnode("a", "a", 4), sf.Vnode("b", "b", 4)), (sf.Queue("workq"),),
                   "workq", scheduler=sf.Scheduler(strict_ordering=True))  # fmt: skip
    path = tmp_path / "two.json"
    path.write_text(sf.dump(site))
    return str(path)


# (submit, real wait, run, cpus): two 3-cpu jobs on 2 x 4 cpus leave 2 cpus free, one on
# each node; a 2-cpu job fits the pool at once but no node until one ends (the README's
# "Several hosts on one MoM" case on the real server)
NODE_JOBS = [(0, 0, 1000, 3), (0, 0, 1000, 3), (10, 990, 100, 2)]


def _alea(path: Path, jobs) -> str:
    """An Alea-format SWF (21 columns: nodes used, queue, node spec) of ``jobs``."""
    lines = []
    for k, (submit, wait, run, cpus) in enumerate(jobs, 1):
        lines.append(f"{k} {submit} {wait} {run} {cpus} -1 -1 {cpus} 2000 -1 1 1 1 -1 -1 1 -1 -1"
                     f" {{{','.join(['1'] * cpus)}}} workq 1:ppn={cpus}")  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_job_that_fits_the_pool_but_no_node_waits_on_the_site_model(tmp_path, capsys):
    trace = _alea(tmp_path / "t.swf", NODE_JOBS)
    site = _two_nodes(tmp_path)
    argv = ["simulate", "--policies", "fcfs-bf1", "--estimates", "users", "--json", trace]
    code, out, _ = _cli(capsys, *argv, "--procs", "8")
    assert code == 0
    pool = json.loads(out)["fit"]
    assert pool["model"] == "one pool of 8 cpus"
    assert pool["overall"]["model_mean_h"] == 0.0  # the 2-cpu job starts on arrival
    code, out, err = _cli(capsys, *argv, "--site", site)
    assert code == 0
    assert err.startswith("site two: 2 vnodes, 1 queues, modelled as a site model")
    nodes = json.loads(out)
    assert nodes["fit"]["model"] == "site model: 2 vnodes, 1 queues (two, 8 cpus)"
    # it waits for the first end, 990 s, as it did on the real site: the fit is exact
    assert nodes["fit"]["overall"]["model_mean_h"] == nodes["fit"]["overall"]["real_mean_h"]
    assert abs(nodes["fit"]["overall"]["model_mean_h"] - 990 / 3 / 3600) < 1e-9
    assert nodes["fit"]["overall"]["within_10min_pct"] == 100.0


def test_the_fit_line_says_site_model_and_the_site_line_comes_first(tmp_path, capsys):
    trace = _alea(tmp_path / "t.swf", NODE_JOBS)
    code, out, _ = _cli(capsys, "simulate", "--policies", "fcfs-bf1", "--estimates", "users",
                        "--site", _two_nodes(tmp_path), trace)  # fmt: skip
    assert code == 0
    first, second = out.splitlines()[:2]
    assert first == (
        "site two: 2 vnodes, 1 queues, modelled as a site model: its vnodes, chunks, queues "
        "and limits"
    )
    assert second == (
        "fit to real starts: fcfs-bf1 with the users' walltimes on site model: 2 vnodes, 1 "
        "queues (two, 8 cpus)"
    )


def test_plain_simulate_with_a_site_says_it_is_one_pool(tmp_path, capsys):
    trace = _alea(tmp_path / "t.swf", NODE_JOBS)
    code, out, _ = _cli(capsys, "simulate", "--estimates", "users", "--site",
                        _two_nodes(tmp_path), trace)  # fmt: skip
    assert code == 0
    assert out.splitlines()[0] == (
        "site two: 2 vnodes, 1 queues, modelled as one pool of 8 cpus (EASY backfilling is "
        "one pool; --policies and --search run the site model)"
    )


def test_the_site_model_is_the_pool_on_one_cpu_per_node_until_a_top_job_holds_nodes():
    """KTH-SP2's site file (100 nodes of 1 cpu): each job's processors as chunks of one
    cpu. Without reservations (greedy, strict at depth 0) the same starts as the pool of
    100, job for job; with backfill_depth 1 the top job holds named vnodes (the first free
    at its start, node_info.cpp:2722-2960), and a job the pool backfills beside it may find
    its cpus among them (KTH job 165 here): the site model differs there, as PBS's
    node-level calendar does."""
    work = read_workload(str(TRACES / "KTH-SP2-1996-2.1-cln.swf.gz"))
    work = take(work, range(400))
    site = sf.load(str(SITES / "kth-sp2.json"))
    fitted, model, dropped = site_run(site, work)
    assert dropped == {} and len(fitted.submit) == 400
    assert fitted.site is not None and fitted.site.select[0] == f"{work.procs[0]}:ncpus=1"
    assert max(work.procs) > 1  # wide jobs are in the slice
    for name, same in (("fcfs-greedy", True), ("fcfs-strict", True), ("fcfs-bf1", False)):
        policy = pbsched.parse_policy(name)
        pool = pbsched.simulate_pbs(work, sim.WalltimeSource(), 100, policy)
        m, order = model.build(fitted)
        nodes = pbsched.simulate_pbs(fitted, sim.WalltimeSource(), 100, policy, model=m,
                                     site=order)  # fmt: skip
        assert sum(s > a for s, a in zip(pool.start, work.submit)) > 50  # a queue
        assert (nodes.start == pool.start) is same, name


def test_a_queue_default_chunk_is_added_to_each_chunk_that_lacks_it():
    q = sf.Queue("q_1d", default_chunk={"Qlist": "q_1d", "brno": True}, default_place="excl")
    site = sf.Site("s", (sf.Vnode("n", "n", 4),), (q,), "q_1d")
    assert with_queue_defaults(site, "2:ncpus=2+1:ncpus=1:Qlist=other", "", "q_1d") == (
        "2:ncpus=2:Qlist=q_1d:brno=True+1:ncpus=1:Qlist=other:brno=True",
        "excl",
    )
    # the job's own place stays; another queue's defaults do not apply
    assert with_queue_defaults(site, "1:ncpus=1", "scatter", "q_1d")[1] == "scatter"
    assert with_queue_defaults(site, "1:ncpus=1", "", "nope") == ("1:ncpus=1", "")


def test_cerit_queues_keep_their_jobs_on_their_pools():
    """CERIT-SC's site file: a q_2w_plus job (Qlist=q_2w_plus through the queue's
    default_chunk) may use only the vnodes whose Qlist names q_2w_plus."""
    site = sf.load(str(SITES / "cerit-sc-2013.json"))
    rows = [("u", 0, 3600, 60, 1), ("u", 0, 3600, 60, 1)]
    work = make_workload("t", rows, site_rows=[("1:ncpus=1", "", "q_2w_plus"),
                                               ("1:ncpus=1", "", "q_2h")])  # fmt: skip
    fitted, model, _ = site_run(site, work)
    assert fitted.site is not None and fitted.site.select[0] == "1:ncpus=1:Qlist=q_2w_plus"
    limited, _order = model.build(fitted)
    m = limited.inner  # the node model, behind the site file's (inferred) run limits
    own = {k for k, v in enumerate(site.vnodes) if "q_2w_plus" in str(v.resources.get("Qlist"))}
    assert 0 < len(own) < len(site.vnodes)
    assert m.job(0).ok[0] == own
    assert m.job(1).ok[0] != own


def test_jobs_no_queue_takes_are_dropped_and_counted():
    q = sf.Queue("short", walltime_max=3600)
    site = sf.Site("s", (sf.Vnode("n", "n", 4),), (q,), "short")
    rows = [("u", 0, 3600, 60, 1), ("u", 0, 7200, 60, 1), ("u", 5, 60, 60, 8)]
    fitted, _model, dropped = site_run(site, make_workload("t", rows))
    assert len(fitted.submit) == 1
    assert dropped == {SKIP_UNROUTED: 1, "chunks no vnode pool holds": 1}


def test_a_run_limit_holds_a_top_job_on_the_vnodes_as_on_the_pool():
    # test_site_queues_simulate's held top job, on 3 vnodes of 1 cpu: the limit, not the
    # nodes, decides, and the node model takes the limit's time (reserve's after)
    site = sf.Site("s", tuple(sf.Vnode(f"n{k}", f"n{k}", 1) for k in range(3)),
                   (sf.Queue("workq"),), "workq", max_run="[u:PBS_GENERIC=1]")  # fmt: skip
    jobs = [("alice", 0, 10, 5, 1), ("alice", 0, 60, 2, 2), ("root", 0, 600, 2, 2)]
    fitted, model, _ = site_run(site, make_workload("t", jobs))
    m, order = model.build(fitted)
    got = pbsched.simulate_pbs(fitted, sim.WalltimeSource(), 3, STRICT, model=m, site=order)
    assert got.start == [0, 5, 7]


def test_the_search_runs_every_simulation_on_the_site_model(tmp_path):
    """``simulate --search --site``: the baseline of both halves (and every candidate) on
    the vnodes: the 2-cpu job that no node holds waits in each half, where the pool starts
    it at once."""
    from softwalltime import api

    day = 86400
    jobs = [(d * day + s, w, r, c) for d in (0, 1) for s, w, r, c in NODE_JOBS]
    trace = _alea(tmp_path / "t.swf", jobs)
    site = sf.load(_two_nodes(tmp_path))
    [nodes] = api.search([trace], ["users"], site=site)
    [pool] = api.search(api.load([trace], procs=8), ["users"])
    for half in (0, 1):
        assert nodes.report.base[half].wait_mean_h == pytest.approx(990 / 3 / 3600)
        assert pool.report.base[half].wait_mean_h == 0.0
    assert all(row.first.wait_mean_h > 0 for row in nodes.report.rows)  # no sort helps here
