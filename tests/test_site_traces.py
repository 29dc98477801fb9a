"""The bundled traces' site files (softwalltime/data/sites/) and the Alea columns of
CERIT-SC 2013 (softwalltime/replay/alea.py, site_traces.py; issue 46)."""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path

import pytest
from helpers_data import TRACES

from softwalltime import site_file as sf
from softwalltime.errors import ParseError
from softwalltime.replay import alea, site_traces
from softwalltime.replay import sim_workload as wl

SITES = Path(__file__).resolve().parents[1] / "softwalltime" / "data" / "sites"


def test_the_committed_site_files_are_what_the_traces_give() -> None:
    derived = site_traces.derive(str(TRACES))
    committed = {p.stem: sf.load(str(p)) for p in SITES.glob("*.json")}
    assert set(committed) == set(derived)
    for name, site in derived.items():
        assert committed[name] == site, f"{name}: run python packaging/make_sites.py"
        assert (SITES / f"{name}.json").read_text() == sf.dump(site)
    # the SWF traces' schedulers backfilled: their current policy is fcfs-bf1, not greedy
    kth = committed["kth-sp2"].scheduler
    assert (kth.strict_ordering, kth.backfill_depth, kth.job_sort_formula) == (True, 1, None)
    blue = committed["sdsc-blue"]
    assert blue.ncpus == 1152 and blue.queues[0].default_place == "excl"


def test_cerit_has_both_node_types_the_route_and_overlapping_pools() -> None:
    site = sf.load(str(SITES / "cerit-sc-2013.json"))
    assert Counter(v.ncpus for v in site.vnodes) == {80: 20, 12: 48} and site.ncpus == 2176
    route = site.queue("route")
    assert site.default_queue == "route" and route is not None
    assert route.destinations == (
        "q_2h", "q_4h", "q_1d", "q_2d", "q_4d", "q_1w", "q_2w", "q_2w_plus"
    )  # fmt: skip
    q2h, q1d = site.queue("q_2h"), site.queue("q_1d")
    assert q2h is not None and q2h.walltime_max == 7200 and q2h.default_chunk == {"Qlist": "q_2h"}
    assert q1d is not None and q1d.walltime_max == 86400
    assert site.queue("backfill") is not None and "backfill" not in route.destinations
    pools = [set(str(v.resources.get("Qlist", "")).split(",")) for v in site.vnodes]
    assert sum("q_2h" in p and "q_1d" in p for p in pools) >= 10  # pools overlap
    assert "Qlist" in site.scheduler.resources  # else the scheduler ignores the pools
    zewura = [v for v in site.vnodes if v.resources.get("cl_zewura")]
    assert len(zewura) == 20 and all(v.ncpus == 80 for v in zewura)


def test_a_node_spec_becomes_pbs_select_and_place() -> None:
    r = alea.to_select("1:ppn=64:x86_64:cl_zewura#excl")
    assert r == alea.Request("1:ncpus=64:x86_64=True:cl_zewura=True", "scatter:excl", 64)
    assert alea.to_select("2:ppn=4+1:ppn=2:brno") == alea.Request(
        "2:ncpus=4+1:ncpus=2:brno=True", "scatter", 10
    )
    assert alea.to_select("3").select == "3:ncpus=1"
    assert alea.to_select("1:ppn=2:mem=4gb").select == "1:ncpus=2:mem=4194304kb"
    assert alea.to_select("1:ppn=1:cl_zewura:cl_zewura").select == "1:ncpus=1:cl_zewura=True"
    assert alea.props_of("1:ncpus=2:brno=True+1:ncpus=1:nfs4=True") == ["brno", "nfs4"]


@pytest.mark.parametrize(
    "spec, reason",
    [
        ("1:ppn=4:^zewura5.cerit-sc.cz", alea.REASON_EXCLUDES),
        ("1:ppn=4:zegox3.cerit-sc.cz", alea.REASON_HOST),
        ("1:ppn=4:host=zewura7", alea.REASON_HOST),
        ("1:ppn=0.5:brno", alea.REASON_PPN),
        ("1:ppn=4#bogus", alea.REASON_OTHER),
        ("1:ppn=4:a-b", alea.REASON_OTHER),
        ("", alea.REASON_OTHER),
    ],
)
def test_a_spec_no_select_can_say_is_refused_with_its_reason(spec, reason) -> None:
    with pytest.raises(alea.Unreadable, match=re.escape(reason)):
        alea.to_select(spec)


def test_the_cerit_workload_has_site_columns_and_counts_what_it_skips() -> None:
    pool = wl.read_workload(str(TRACES / site_traces.CERIT))
    assert pool.site is None and len(pool.submit) == 17898  # the pool model's, as before
    work = wl.read_workload(str(TRACES / site_traces.CERIT), site_columns=True)
    assert work.site is not None and len(work.site.select) == len(work.submit) == 17778
    assert work.skipped[alea.REASON_EXCLUDES] == 84
    assert work.skipped[alea.REASON_HOST] == 16
    assert work.skipped[alea.REASON_PPN] == 20
    assert work.site.select[0] == "1:ncpus=64:x86_64=True:cl_zewura=True"
    assert (work.site.place[0], work.site.queue[0]) == ("scatter:excl", "q_1d")
    assert Counter(work.site.queue)["q_1d"] > 5000
    assert work.real_start is not None and all(s >= 0 for s in work.real_start)
    # take() keeps the columns together
    sub = wl.take(work, [1, 0])
    assert sub.site is not None and sub.site.select[1] == work.site.select[0]
    assert sub.real_start == [work.real_start[1], work.real_start[0]]


def test_cerit_site_from_a_few_jobs() -> None:
    machines = [alea.Machine("big", 2, 8, 1024), alea.Machine("small", 3, 2, 2048)]
    jobs = [
        alea.AleaJob(3600, alea.node_ids("{7,7,7,7}"), "q_2h", "1:ppn=4:brno"),
        alea.AleaJob(7200, alea.node_ids("{9,9}"), "q_1d", "1:ppn=2"),
        alea.AleaJob(600, alea.node_ids("{9}"), "q_2h", "1:ppn=1:^big1"),  # unreadable: no props
        alea.AleaJob(60, alea.node_ids("{9}"), "backfill", "1:ppn=1"),
    ]
    site = alea.cerit_site(jobs, machines, "t")
    names = [v.name for v in site.vnodes]
    assert names == ["big-7", "small-9", "small-unused-1", "small-unused-2", "big-unused-1"]
    big7, small9 = site.vnodes[0], site.vnodes[1]
    assert big7.ncpus == 8 and big7.resources == {"cl_big": True, "brno": True, "Qlist": "q_2h"}
    assert small9.resources == {"cl_small": True, "Qlist": "backfill,q_1d,q_2h"}
    assert site.vnodes[2].resources == {"cl_small": True}  # unused: in no pool
    route = site.queue("route")
    assert route is not None and route.destinations == ("q_2h", "q_1d")
    assert [(q.name, q.walltime_max) for q in site.queues[1:]] == [
        ("q_2h", 3600), ("q_1d", 7200), ("backfill", 60)
    ]  # fmt: skip


def test_the_most_a_queue_ran_at_once_is_its_inferred_run_limit() -> None:
    # 2 nodes of 8 cpus; q_1d never ran more than 6 cpus (2 jobs) at once, 4 for one user;
    # q_2h filled its pool (16 cpus) with one user's jobs, so it shows no limit
    machines = [alea.Machine("m", 2, 8, 1024)]

    def job(nodes: str, queue: str, user: str, start: int, end: int) -> alea.AleaJob:
        return alea.AleaJob(3600, alea.node_ids(nodes), queue, "1:ppn=1", user, start, end)

    jobs = [
        job("{1,1,1,1}", "q_1d", "a", 0, 100),
        job("{2,2}", "q_1d", "b", 50, 200),
        job("{1,1,1,1}", "q_1d", "a", 100, 300),  # starts as a's first ends: 4 for a, not 8
        job("{1,1,1,1,1,1,1,1}", "q_2h", "c", 400, 500),
        job("{2,2,2,2,2,2,2,2}", "q_2h", "c", 400, 500),
        job("{2}", "q_2h", "c", 600, 600),  # ran no time: never at once with anything
    ]
    site = alea.cerit_site(jobs, machines, "t")
    q_1d, q_2h = site.queue("q_1d"), site.queue("q_2h")
    assert q_1d is not None and q_2h is not None
    assert q_1d.max_run == "[o:PBS_ALL=2],[u:PBS_GENERIC=1]"
    assert q_1d.max_run_res == {"ncpus": "[o:PBS_ALL=6],[u:PBS_GENERIC=4]"}
    assert q_2h.max_run == "[o:PBS_ALL=2]"  # 2 jobs of its pool's 16 cpus
    assert q_2h.max_run_res == {}  # it filled its pool: no cpu limit
    # a job without a real start or end counts in no limit
    alone = alea.cerit_site(jobs[:1] + [job("{2,2}", "q_1d", "b", 0, 0)._replace(end=None)],
                            machines, "t").queue("q_1d")  # fmt: skip
    assert alone is not None and alone.max_run == "[o:PBS_ALL=1]"
    assert alone.max_run_res == {"ncpus": "[o:PBS_ALL=4]"}


def test_most_at_once_frees_before_it_takes_at_one_instant() -> None:
    spans = [alea.Span(0, 10, 3, "a"), alea.Span(10, 20, 5, "a"), alea.Span(5, 15, 1, "b")]
    assert alea.most_at_once(spans) == (2, 6)  # 3+1 until 10, then 5+1
    assert alea.most_at_once([]) == (0, 0)


def test_malformed_alea_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="not a node list"):
        alea.node_ids("1241,1241")
    with pytest.raises(ValueError, match="not a node list"):
        alea.node_ids("{12a}")
    with pytest.raises(ValueError, match=r"m:2: not 'id name nodes cpus speed mem'"):
        alea.parse_machines("0 a 1 2 1 3\n1 b x 2 1 3\n", "m")


def test_a_trace_whose_header_says_another_machine_is_refused(tmp_path) -> None:
    for m in site_traces.SWF_MACHINES:
        with gzip.open(tmp_path / m.trace, "wt") as fh:
            fh.write("; MaxProcs: 7\n1 0 0 1 1 -1 -1 1 1 -1 1 1 1 -1 1 1 -1 -1\n")
    src = TRACES / site_traces.CERIT
    (tmp_path / site_traces.CERIT).write_bytes(src.read_bytes())
    machines = str(src).replace(".swf.gz", ".swf.machines")
    (tmp_path / Path(machines).name).write_text(Path(machines).read_text())
    with pytest.raises(ParseError, match="MaxProcs 7, not 100 x 1"):
        site_traces.derive(str(tmp_path))
