"""The pure parts of the site-shaped twin (``tests/pbs/twin_site.py``): the scaled site,
the scaled chunks, the queue's pool in the select and the simulated twin, without PBS."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "pbs"))

import twin  # noqa: E402
import twin_site  # noqa: E402

from softwalltime import site_file as sf  # noqa: E402
from softwalltime.replay import pbsched  # noqa: E402
from softwalltime.replay import simulate as sim  # noqa: E402

CERIT = sf.load(str(twin_site.CERIT_SITE))
FCFS = pbsched.parse_policy("fcfs-bf1")


def test_the_scaled_site_keeps_both_node_types_in_ratio_each_its_own_host() -> None:
    site = twin_site.scaled_site(CERIT, 4, 4, 100)
    cpus = [v.ncpus for v in site.vnodes]
    assert cpus == [20] * 5 + [3] * 12
    assert len({v.host for v in site.vnodes}) == len(site.vnodes)
    assert all(twin_site.POOL in v.resources for v in site.vnodes)  # each in some pool
    assert site.vnodes[0].resources["cl_zewura"] is True
    assert site.vnodes[-1].resources["cl_zegox"] is True
    q2h, full = site.queue("q_2h"), CERIT.queue("q_2h")
    assert q2h is not None and full is not None
    assert (q2h.walltime_max, full.walltime_max) == (72, 7200)
    assert q2h.default_chunk == {"Qlist": "q_2h"}
    # the full site's inferred run limits are left out (the server is not given them)
    assert full.max_run is not None and q2h.max_run is None and q2h.max_run_res == {}


def test_too_many_vnodes_for_the_one_mom_are_refused() -> None:
    with pytest.raises(ValueError, match="at most"):
        twin_site.scaled_site(CERIT, 4, 1, 100)


def test_chunks_keep_their_count_and_properties_with_fewer_cpus() -> None:
    assert twin_site.scale_select("1:ncpus=64:x86_64=True:cl_zewura=True", 4) == (
        "1:ncpus=16:x86_64=True:cl_zewura=True",
        16,
    )
    assert twin_site.scale_select("8:ncpus=8:cl_zegox=True+1:ncpus=1", 4) == (
        "8:ncpus=2:cl_zegox=True+1:ncpus=1",
        17,
    )
    assert twin_site.scale_select("1:ncpus=6", 4) == ("1:ncpus=2", 2)  # rounded up
    with pytest.raises(ValueError, match="one ncpus"):
        twin_site.scale_select("1:mem=4gb", 4)
    assert twin_site.properties("2:ncpus=1:brno=True+1:ncpus=2:nfs4=True") == {"brno", "nfs4"}
    assert twin_site.with_pool("1:ncpus=2+2:ncpus=1", "q_1d") == (
        "1:ncpus=2:Qlist=q_1d+2:ncpus=1:Qlist=q_1d"
    )


def _job(
    submit: int, run: int, wall: int, select: str, queue: str, place: str = ""
) -> twin_site.SiteJob:
    cpus = twin_site.scale_select(select, 1)[1]
    return twin_site.SiteJob(twin.TwinJob(submit, run, wall, cpus), select, place, "route", queue)


def test_an_excl_chunk_takes_a_whole_vnode_that_free_chunks_share() -> None:
    # 8-cpu chunks on the q_1d pool's 20-cpu vnodes: exclusive, one per vnode (the last
    # waits for the first end); free, two share a vnode and all start at once
    site = twin_site.scaled_site(CERIT, 4, 4, 1)
    big = sum(1 for v in site.vnodes if v.ncpus == 20 and "q_1d" in str(v.resources["Qlist"]))
    assert big >= 2
    jobs = [_job(0, 10, 20, "1:ncpus=8:cl_zewura=True", "q_1d", "excl") for _ in range(big + 1)]
    none = [None] * len(jobs)
    assert twin_site.simulate(jobs, [0] * len(jobs), none, site, FCFS) == [0] * big + [10]
    free = [j._replace(place="") for j in jobs]
    assert twin_site.simulate(free, [0] * len(jobs), none, site, FCFS) == [0] * len(jobs)


def test_site_jobs_route_by_the_scaled_walltime_and_scale_the_chunks() -> None:
    work = sim.read_workload(str(twin_site.CERIT_TRACE), site_columns=True)
    site = twin_site.scaled_site(CERIT, 4, 4, 100)
    jobs, dropped = twin_site.site_jobs(work, 0, 30, 100, 2, site, 4)
    assert len(jobs) == 30 and dropped >= 0
    first = jobs[0]
    assert first.select == "1:ncpus=16:x86_64=True:cl_zewura=True" and first.job.procs == 16
    assert first.place == "scatter:excl" and first.submit_queue == "route"
    assert first.queue == "q_1d" and first.job.wall == 864  # 86400 s / 100
