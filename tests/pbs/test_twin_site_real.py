"""The short site-shaped twin in ``make test-pbs`` (issue 46): 40 consecutive CERIT-SC 2013
jobs where they wait, on the CERIT-SC site file scaled down (5 vnodes of 20 cpus and 12 of
3, each its own host; the routing queue, the walltime queues and their ``Qlist`` pools; the
jobs' chunks, ncpus / 4, and ``excl``), compressed to about a minute, as ``sleep`` jobs on
the real server with perfect soft walltimes, against ``simulate_pbs`` with the node model
of the same scaled site (``tests/pbs/twin_site.py``; ``make bench-twin-site`` is the long
one). As in ``test_twin_real.py``, the order is compared only between jobs whose simulated
starts are more than the tolerance apart.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import twin
import twin_site

from softwalltime import site_file as sf
from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim

JOBS = 40
CANDIDATES = 8
TARGET_S = 60  # the segment's simulated makespan, compressed
DIV = 4  # cpus, ncpus and vnodes per node type divided by
MARGIN_S = 2
TOLERANCE_S = 2
MIN_SAME_ORDER = 0.90
POLICY = "fcfs-bf1"


def segment() -> tuple[sf.Site, list[twin_site.SiteJob], float]:
    work = sim.read_workload(str(twin_site.CERIT_TRACE), site_columns=True)
    full = sf.load(str(twin_site.CERIT_SITE))
    fcfs = pbsched.parse_policy(POLICY)
    first, _wait, span = twin_site.choose_segment(work, full, JOBS, CANDIDATES, DIV, DIV, fcfs)
    factor = math.ceil(span / TARGET_S)
    site = twin_site.scaled_site(full, DIV, DIV, factor)
    jobs, _dropped = twin_site.site_jobs(work, first, JOBS, factor, MARGIN_S, site, DIV)
    return site, jobs, factor


@pytest.fixture()
def site_server(pbs_server: None) -> Iterator[tuple[sf.Site, list[twin_site.SiteJob], float]]:
    site, jobs, factor = segment()
    with twin.server(0), twin_site.configured(site, jobs):
        yield site, jobs, factor


def test_site_shaped_twin_of_cerit_fcfs_bf1_perfect(
    site_server: tuple[sf.Site, list[twin_site.SiteJob], float],
) -> None:
    site, jobs, factor = site_server
    assert len(jobs) == JOBS
    # the segment has what the pool does not: several queues, and exclusive jobs
    assert len({j.queue for j in jobs}) >= 2 and any("excl" in j.place for j in jobs)
    procs = sum(v.ncpus for v in site.vnodes)
    policy = twin.policy(POLICY, procs, factor)
    run = twin_site.replay(jobs, site, policy)
    try:
        plain = [j.job for j in jobs]
        c = twin.compare(plain, run.submit, run.real, run.simulated, TOLERANCE_S, 600 / factor)
        text = twin.report(c, plain, run.submit, run.real, run.simulated, run.ids, first=10)
        print(f"factor {factor}\n{text}")
        # each job ran in the queue the model routed it to by its scaled walltime
        assert twin_site.queues_of(run.ids) == [j.queue for j in jobs], text
        assert c.pairs > 100, text  # the segment makes jobs wait: there is an order to check
        assert twin.agreement(c) >= MIN_SAME_ORDER, text
    finally:
        twin.purge_all(run.ids)
