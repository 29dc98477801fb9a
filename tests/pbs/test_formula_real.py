"""The formula search's job_sort_formulas on the real PBS server (``make test-pbs``).

``qmgr`` must accept every form :func:`softwalltime.replay.formula.expression` emits (the
server checks a formula in Python at ``qmgr`` time: ``sched_func.c``, ``validate_job_formula``),
and the real scheduler must start queued jobs in the order the formula gives them, as the
simulator (:mod:`softwalltime.replay.pbsched`) predicts from the same jobs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pbsctl
import pytest
from test_simulate_real import _real_starts, _submit, _wrong_order

from softwalltime.replay import formula as fm
from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim

NODE_CPUS = 2
RANK = pbsched.RANK
# Every term of the family, with the rank key: what a recommendation looks like.
FULL = fm.Params(fm.RANK, fm.SMOOTH_S, age_h=72.0, width=8.0, length=4.0, power=2)


@pytest.fixture()
def formula_setup(pbs_server: None) -> Iterator[None]:
    """The rank's resource, strict ordering with backfill_depth 1 and eligible_time_enable,
    as the recommendation's lines set them; the formula, the server's attributes and
    sched_config restored afterwards."""
    assert pbsctl.qmgr(f"list resource {RANK}", check=False).returncode != 0, (
        f"{RANK} left over: delete it first"
    )
    out = pbsctl.qmgr("list sched").stdout
    before = [ln.split("=", 1)[1].strip() for ln in out.splitlines() if "job_sort_formula" in ln]
    depth = pbsctl.server_attribute("backfill_depth")
    eligible = pbsctl.server_attribute("eligible_time_enable")
    pbsctl.qmgr(f"create resource {RANK} type=long, flag=r")
    try:
        with pbsctl.sched_config({"strict_ordering": "strict_ordering: True\tALL"}):
            pbsctl.qmgr("set server backfill_depth = 1")
            pbsctl.qmgr("set server eligible_time_enable = True")
            yield
    finally:
        pbsctl.qmgr("set server scheduling = True", check=False)
        if before:
            pbsctl.qmgr(f"set sched job_sort_formula = '{before[0]}'", check=False)
        else:
            pbsctl.qmgr("unset sched job_sort_formula", check=False)
        for name, value in (("backfill_depth", depth), ("eligible_time_enable", eligible)):
            if value is None:
                pbsctl.qmgr(f"unset server {name}", check=False)
            else:
                pbsctl.qmgr(f"set server {name} = {value}", check=False)
        pbsctl.qmgr(f"delete resource {RANK}", check=False)


def _set_formula(expression: str) -> None:
    line = pbsched.pbs_settings(pbsched.parse_policy(f"{expression}-bf1"))
    qmgr = next(s for s in line if "job_sort_formula" in s)
    # the printed line, run as printed: qmgr -c "set sched job_sort_formula = '...'"
    directive = qmgr.split('"', 1)[1].rsplit('"', 1)[0]
    pbsctl.qmgr(directive)
    listed = pbsctl.sched_attribute("job_sort_formula")
    assert listed is not None and listed.strip("'\"") == expression


def test_real_qmgr_accepts_every_form_the_search_emits(formula_setup: None) -> None:
    forms = {
        fm.expression(fm.Params(key, fm.SMOOTH_S, age, width, length, power), 338)
        for key in fm.KEYS
        for power in fm.POWERS
        for age in (0.0, 24.0)
        for length in (0.0, 1.5)
        for width in (0.0, 8.0)
    }
    assert len(forms) == 32
    for expression in sorted(forms):
        fm.check_pbs_form(expression)
        _set_formula(expression)
    # and the server does check: a name it does not know is refused
    bad = pbsctl.qmgr("set sched job_sort_formula = 'eligible_time / no_such_resource'", False)
    assert bad.returncode != 0


# Four 2-cpu jobs (each runs alone on the 2-cpu node), queued together while scheduling is
# off: (sleep s, soft_walltime s, softwalltime_rank s; 0: none). The formula's key E is the
# rank, else the soft walltime: J3 (no rank, soft 40 s) first, then J1 (rank 100), J2
# (rank 300), J0 (rank 500). FCFS would run J0 first, a sort by soft walltime J2.
RANKED = [(3, 30, 500), (3, 20, 100), (3, 10, 300), (3, 40, 0)]


def _simulated(expression: str) -> list[int]:
    class Soft(sim.EstimateSource):
        name = "soft_walltime"

        def on_submit(self, j: int, now: int) -> int:
            return RANKED[j][1]

    class Ranks(pbsched.Ranker):
        def value(self, j: int) -> int:
            return RANKED[j][2]

    rows = [(pbsctl.USER, 0, 600, run, NODE_CPUS) for run, _s, _r in RANKED]
    work = sim.make_workload("real", rows, NODE_CPUS)
    policy = pbsched.parse_policy(f"{expression}-bf1")
    return pbsched.simulate_pbs(work, Soft(), NODE_CPUS, policy, ranker=Ranks(0)).start


def test_real_scheduler_orders_jobs_as_the_formula_says(
    formula_setup: None, jobs: list[str]
) -> None:
    expression = fm.expression(FULL, NODE_CPUS)
    expected = _simulated(expression)
    assert expected == [9, 3, 6, 0]  # J3, J1, J2, J0
    pbsctl.qmgr("set server scheduling = False")
    _set_formula(expression)
    for run, soft, rank in RANKED:
        jobid = _submit(NODE_CPUS, run, soft)
        jobs.append(jobid)
        if rank:
            pbsctl.run("qalter", "-l", f"{RANK}={rank}", jobid)  # as the hook would
    pbsctl.qmgr("set server scheduling = True")
    try:
        real = _real_starts(jobs)
        assert not _wrong_order(expected, real), f"simulated {expected}, real {real}"
        fcfs = [0, 3, 6, 9]
        assert _wrong_order(fcfs, real), f"FCFS's {fcfs} fits the real {real} as well"
    finally:
        pbsctl.purge(jobs)  # a job holding the resource keeps it from being deleted
        jobs.clear()
