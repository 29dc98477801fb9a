"""Start times on a site's model (issue 46): the forward runs of wait/starttime.py and the
ground truth of wait/starteval.py on the vnodes, chunks and queues of a site file, running
jobs held where they run (MachineModel.hold(j, where)); ``eval-start --site`` end to end."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from softwalltime import cli
from softwalltime import site_file as sf
from softwalltime.replay import pbsched
from softwalltime.replay.nodes import NodeModel
from softwalltime.replay.pool import PoolModel
from softwalltime.replay.sim_workload import SimWorkload, SiteColumns
from softwalltime.replay.site_model import SiteModel, site_run
from softwalltime.replay.sources import PerfectSource
from softwalltime.wait import live, livesite, livestart
from softwalltime.wait import starteval as se
from softwalltime.wait import starttime as st
from softwalltime.wait.live import LiveJob

FCFS = pbsched.parse_policy("fcfs-bf1")


def _site(*cpus: int, fair: bool = False) -> sf.Site:
    vnodes = tuple(sf.Vnode(f"n{k}", f"n{k}", c) for k, c in enumerate(cpus))
    sched = sf.Scheduler(fair_share=fair, unknown_shares=10)
    return sf.Site("s", vnodes, (sf.Queue("workq"),), "workq", scheduler=sched)


def _jobs(specs: list[tuple[str, str, int]]) -> SimWorkload:
    """(select, place, processors) per job, all in workq."""
    n = len(specs)
    cols = SiteColumns([s for s, _, _ in specs], [p for _, p, _ in specs], ["workq"] * n,
                       [""] * n, [""] * n)  # fmt: skip
    procs = [p for _, _, p in specs]
    return SimWorkload("t", ["u"] * n, [0] * n, [100] * n, [5000] * n, procs, None, {}, cols)


def _snapshot(site: sf.Site, queued, running, where=None) -> st.QueueSnapshot:
    """``queued``: (select, place, procs); ``running``: (select, place, procs, end)."""
    jobs = _jobs([*queued, *((s, p, c) for s, p, c, _ in running)])
    model = SiteModel(site)
    machine = st.SiteMachine(lambda: model.build(jobs), where or [None] * len(running))
    q = [st.QueuedJob(0, 5000, 5000, c) for _, _, c in queued]
    r = [st.RunningJob(0, end, end, c) for _, _, c, end in running]
    return st.QueueSnapshot(10, site.ncpus, r, q, 0, machine)


def _starts(snap: st.QueueSnapshot, pool: bool = False) -> list[int]:
    if pool:
        snap = snap._replace(machine=None)
    runs = [job.wall for job in snap.queued]
    ends = [job.start + job.est for job in snap.running]
    return st.forward_starts(snap, FCFS, runs, ends)


def test_a_chunk_wider_than_any_vnode_never_starts_on_the_site_but_does_on_the_pool():
    # 2 vnodes of 4 cpus: 6 cpus in one chunk fit the pool of 8, never a vnode
    snap = _snapshot(_site(4, 4), [("1:ncpus=6", "", 6), ("1:ncpus=2", "", 2)], [])
    assert _starts(snap, pool=True) == [10, 10]
    assert _starts(snap) == [-1, 10]  # the second one passes it (it can never run)
    with pytest.raises(ValueError, match="no start"):
        st.pbs_estimate(snap, FCFS)


def test_an_exclusive_job_waits_for_a_vnode_without_jobs():
    # one 1-cpu job on each vnode: 6 cpus free, but no vnode free whole until 500
    running = [("1:ncpus=1", "", 1, 500), ("1:ncpus=1", "", 1, 900)]
    where = [(((0, 1, 0, 0),), ()), (((1, 1, 0, 0),), ())]
    snap = _snapshot(_site(4, 4), [("1:ncpus=2", "excl", 2)], running, where)
    assert _starts(snap, pool=True) == [10]
    assert _starts(snap) == [500]
    assert st.pbs_estimate(snap, FCFS) == 500
    # first fit puts both on n0: n1 is whole at once
    assert _starts(_snapshot(_site(4, 4), [("1:ncpus=2", "excl", 2)], running)) == [10]


def test_running_jobs_held_on_their_vnodes_not_first_fit():
    # n0 has 4 cpus, n1 8; the running 4-cpu job really runs on n1 (until 1000). First fit
    # would put it on n0 and leave n1 whole for the queued 8-cpu chunk.
    site = _site(4, 8)
    on_n1 = (((1, 4, 0, 0),), ())
    queued, running = [("1:ncpus=8", "", 8)], [("1:ncpus=4", "", 4, 1000)]
    assert _starts(_snapshot(site, queued, running, [on_n1])) == [1000]
    assert _starts(_snapshot(site, queued, running, [None])) == [10]


def test_hold_where_takes_the_named_parts_or_falls_back_to_first_fit():
    site = _site(4, 8)
    m = NodeModel(site, _jobs([("1:ncpus=4", "", 4)] * 3 + [("1:ncpus=2", "excl", 2)]))
    assert m.hold(0, (((1, 4, 0, 0),), ())) is True
    assert m.where(0) == (((1, 4, 0, 0),), ()) and m.fc == [4, 4]
    assert m.hold(1, (((1, 6, 0, 0),), ())) is False  # 4 free there: placed first fit
    assert m.where(1) == (((0, 4, 0, 0),), ()) and m.fc == [0, 4]
    assert m.hold(2, (((7, 1, 0, 0),), ())) is False  # no such vnode
    assert m.where(2) == (((1, 4, 0, 0),), ())
    m.release(0)
    m.release(1)
    assert m.hold(3, (((1, 2, 0, 0),), (1,))) is False  # n1 has a job: not whole
    assert m.where(3) == (((0, 2, 0, 0),), (0,)) and m.xheld == [1, 0]
    pool = PoolModel(8, [3, 1])
    assert pool.hold(0, "anything") is True and pool.where(0) is None and pool.free == 5


def _random_site_work(rng: random.Random, n: int) -> SimWorkload:
    specs = []
    for _ in range(n):
        chunks, cpus = rng.randint(1, 2), rng.randint(1, 4)
        specs.append((f"{chunks}:ncpus={cpus}", rng.choice(["", "", "excl"]), chunks * cpus))
    work = _jobs(specs)
    submit = sorted(rng.randint(0, 20_000) for _ in range(n))
    run = [rng.randint(60, 3000) for _ in range(n)]
    wall = [r + rng.randint(0, 3000) for r in run]
    return work._replace(submit=submit, run=run, wall=wall)


def test_the_ground_truths_places_hold_again_at_every_snapshot():
    site = _site(4, 4, 8)
    work, model, dropped = site_run(site, _random_site_work(random.Random(3), 120))
    assert dropped == {}
    truth = se.ground_truth(work, PerfectSource(), site.ncpus, FCFS, model)
    assert truth.where is not None and set(truth.where) == set(range(len(work.submit)))
    sweep, held = se._Sweep(work, truth), 0
    for k in range(0, len(work.submit), 3):
        sweep.advance(k)
        snap = sweep.snapshot(k, site.ncpus, model)
        assert snap.machine is not None
        fresh, _order = snap.machine.build()
        nq = len(snap.queued)
        for i, where in enumerate(snap.machine.where):
            assert fresh.hold(nq + i, where) is True  # exactly the ground truth's vnodes
            assert fresh.where(nq + i) == where
            held += 1
    assert held > 50  # the machine was busy: jobs ran beside each other


def _trace(path: Path, rows: list[tuple[int, int, int, int]]) -> str:
    """An Alea-format SWF (queue and node spec columns): (submit, wait, run, cpus)."""
    lines = []
    for k, (submit, wait, run, cpus) in enumerate(rows, 1):
        used = ",".join(["1"] * cpus)
        lines.append(f"{k} {submit} {wait} {run} {cpus} -1 -1 {cpus} {run + 600} -1 1 {k % 3}"
                     f" 1 -1 -1 1 -1 -1 {{{used}}} workq 1:ppn={cpus}")  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_eval_start_site_runs_the_site_model_and_says_so(tmp_path, capsys):
    rng = random.Random(5)
    rows = [(60 * k, 0, rng.randint(100, 2000), rng.choice([1, 2, 3, 4, 6])) for k in range(80)]
    trace = _trace(tmp_path / "t.swf", rows)
    site = tmp_path / "two.json"
    site.write_text(sf.dump(_site(4, 4)))
    argv = ["eval-start", "--first", "1", "--predictions", "30", "--json", trace]
    assert cli.main([*argv, "--procs", "8"]) == 0
    pool = json.loads(capsys.readouterr().out)
    assert cli.main([*argv, "--site", str(site)]) == 0
    out, err = capsys.readouterr()
    nodes = json.loads(out)
    assert err.startswith("site s: 2 vnodes, 1 queues, modelled as a site model")
    assert nodes["model"] == "site model: 2 vnodes, 1 queues (s, 8 cpus)"
    wide = sum(1 for row in rows if row[3] == 6)  # one chunk of 6 cpus: no vnode holds it
    assert wide > 5 and nodes["skipped_by_reason"] == {"chunks no vnode pool holds": wide}
    assert "model" not in pool and pool["jobs"] == 80 and nodes["jobs"] == 80 - wide
    assert nodes["predictions"] == nodes["figures"]["all"]["jobs"] > 15
    assert cli.main([*argv[:-2], trace, "--site", str(site)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("site s: 2 vnodes, 1 queues, modelled as a site model")
    assert text[3] == (
        f"site model: 2 vnodes, 1 queues (s, 8 cpus)   skipped: {wide} (chunks no vnode pool"
        f" holds {wide})"
    )
    site.write_text(sf.dump(_site(4, 4, fair=True)))  # said: the forward runs have none
    assert cli.main([*argv, "--site", str(site)]) == 0
    fair = json.loads(capsys.readouterr().out)
    assert fair["model"].endswith("(s, 8 cpus); its fair_share not modelled here")
    assert fair["figures"] == nodes["figures"]


# --- wait --site: a live queue on the site model ------------------------------------------


def test_exec_vnode_parts_and_their_vnodes():
    text = "(n1:ncpus=2:mem=1048576kb)+(n0:ncpus=1:mpiprocs=1+n1:ncpus=1:ngpus=1)"
    parts = livesite.parse_exec_vnode(text)
    assert parts == [("n1", 2, 1048576, 0), ("n0", 1, 0, 0), ("n1", 1, 0, 1)]
    site = _site(4, 4)
    assert livesite.placed(site, parts, "") == (
        ((1, 2, 1048576, 0), (0, 1, 0, 0), (1, 1, 0, 1)),
        (),
    )
    assert livesite.placed(site, parts, "scatter:excl") == (
        ((1, 2, 1048576, 0), (0, 1, 0, 0), (1, 1, 0, 1)),
        (0, 1),
    )
    assert livesite.placed(site, [("zz", 1, 0, 0)], "") is None  # not a vnode of the site
    assert livesite.parse_exec_vnode(" (n0:ncpus=3) ") == [("n0", 3, 0, 0)]


@pytest.mark.parametrize(
    "text, message",
    [
        ("n0:ncpus=1", "expected (vnode:ncpus=N...)+(...)"),
        ("(n0:ncpus=1)+", "expected (vnode:ncpus=N...)+(...)"),
        ("(n0:ncpus)", "'n0:ncpus' is not vnode:res=value"),
        ("(n0:ncpus=1)+()", "'' is not vnode:res=value"),
        ("(n0:ncpus=x)", "ncpus=x is not a count"),
        ("(n0:ncpus=1 n1)", "is not vnode:res=value"),
        ("(n0:mem=lots)", "size 'lots'"),
        ("(" + "n0:ncpus=1+" * 100_000 + "n0:ncpus=1)", "longer than 1,000,000 characters"),
    ],
)
def test_a_malformed_exec_vnode_is_a_clear_error(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        livesite.parse_exec_vnode(text)


def _live(job_id, queued, select, ncpus, exec_vnode="", place="", queue="workq"):
    start = None if queued else NOW - 500
    return LiveJob(job_id, queued, "u", queue, NOW - 900, start, ncpus, 600, None, select, place,
                   exec_vnode)  # fmt: skip


NOW = 1_000_000


def _on_site(jobs, target, site):
    found = livestart.on_machine(jobs, NOW, site.ncpus, target, site)
    return livestart.predict_snapshot(found, [], FCFS, 3), found.left


def test_a_live_queue_on_the_site_holds_running_jobs_on_their_exec_vnode():
    # a 2-cpu job on each vnode (until NOW + 100): 4 cpus free, 2 on each vnode; the queued
    # 3-cpu chunk starts at once on the pool, on the site when the running one ends
    site = _site(4, 4)
    running = [_live("1", False, "2:ncpus=2", 4, "(n0:ncpus=2)+(n1:ncpus=2)")]
    target = _live("2", True, "1:ncpus=3", 3)
    jobs = [*running, target]
    on_site, left = _on_site(jobs, target, site)
    pool = livestart.predict_start(jobs, [], target, NOW, 8, FCFS, 3)
    assert pool.pbs == pool.p50 == NOW
    assert on_site.pbs == NOW + 100 and NOW < on_site.p50 <= on_site.p90 <= NOW + 100
    assert left == {}
    # an exec_vnode on a vnode the site file does not know: first fit (both chunks on n0),
    # counted; n1 is free for the 3-cpu chunk at once
    unknown = [_live("1", False, "2:ncpus=2", 4, "(zz:ncpus=2)+(n1:ncpus=2)"), target]
    answer, left = _on_site(unknown, target, site)
    assert answer.p50 == NOW and left == {livesite.UNKNOWN_VNODE: 1}
    bad = [_live("1", False, "2:ncpus=2", 4, "n0:ncpus=2"), target]
    assert _on_site(bad, target, site)[1] == {livesite.BAD_EXEC_VNODE: 1}


def test_a_live_job_the_site_cannot_run_is_refused_and_left_out_of_publish():
    site = _site(4, 4)
    wide = _live("3", True, "1:ncpus=6", 6)
    fits = _live("4", True, "1:ncpus=2", 2)
    with pytest.raises(ValueError, match="cannot run on s's model"):
        _on_site([wide, fits], wide, site)
    answers = livestart.predict_all([wide, fits], [], NOW, 8, FCFS, 3, 0, site)
    assert set(answers) == {"4"} and answers["4"].p50 == NOW
    assert set(livestart.predict_all([wide, fits], [], NOW, 8, FCFS, 3)) == {"3", "4"}


def test_qstat_gives_select_place_and_exec_vnode():
    jobs = {
        "5.s": {"euser": "u", "job_state": "R", "queue": "workq", "ctime": NOW - 9,
                "stime": NOW - 5, "exec_vnode": "(n0:ncpus=2)",
                "Resource_List": {"ncpus": 2, "select": "1:ncpus=2", "place": "excl"}},
        "6.s": {"euser": "u", "job_state": "Q", "queue": "workq", "ctime": NOW - 3,
                "exec_vnode": "(n0:ncpus=2)",  # a requeued job's old one: not where it runs
                "Resource_List": {"ncpus": 2, "select": "2:ncpus=1"}},
    }  # fmt: skip
    rows, _ = live.live_from_qstat(jobs)
    assert [(r.select, r.place, r.exec_vnode) for r in rows] == [
        ("1:ncpus=2", "excl", "(n0:ncpus=2)"),
        ("2:ncpus=1", "", ""),
    ]
