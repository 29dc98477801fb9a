"""PBS's fairshare against :mod:`softwalltime.replay.fairshare` on the real server.

The server has one real user (alice), so the fairshare entities are accounts
(``fairshare_entity: Account_Name``, jobs submitted with ``qsub -A``), listed flat under the
root in ``resource_group``. Each entity's usage is set with ``pbsfs -s`` (it writes the usage
file and ``usage.touch``; the scheduler reads the file again at its next cycle,
fifo.cpp:323-331, so it need not be stopped). Three 2-cpu ``sleep`` jobs, one per entity,
queue while ``scheduling`` is off in the order A, B, C on the 2-cpu node: each cycle starts
one. The order they start in is the model's, and one FCFS gets wrong. sched_config,
``resource_group`` and the usage file are put back as found (the scheduler re-reads them on
the HUP that restores sched_config).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pbsctl
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers_wait import wait_until  # noqa: E402

from softwalltime.replay import fairshare as fs  # noqa: E402
from softwalltime.replay import pbsched  # noqa: E402
from softwalltime.replay import simulate as sim  # noqa: E402
from softwalltime.replay.sim_workload import SiteColumns  # noqa: E402

SCHED_PRIV = pbsctl.PBS_HOME / "sched_priv"
RESOURCE_GROUP = SCHED_PRIV / "resource_group"
USAGE_FILES = [SCHED_PRIV / name for name in ("usage", "usage.bak", "usage.touch")]
SCHED_LOGS = pbsctl.PBS_HOME / "sched_logs"
ACCOUNTS = ("acctA", "acctB", "acctC")  # submitted in this order
RUN_S, WALLTIME_S, NODE_CPUS = 2, 600, 2
ENTITY_LINE = {"fairshare_entity": "fairshare_entity: Account_Name"}
FAIRSHARE_LINES = {"fair_share": "fair_share: true\tALL", **ENTITY_LINE}


def _groups(shares: dict[str, int]) -> tuple[fs.Group, ...]:
    return tuple((name, 10 + k, "root", n) for k, (name, n) in enumerate(shares.items()))


def _log_count(needle: str) -> int:
    return sum(p.read_text(errors="replace").count(needle) for p in SCHED_LOGS.glob("*"))


@contextmanager
def _sched_config(lines: dict[str, str]) -> Iterator[None]:
    """sched_config with ``key: ...`` lines replaced (appended when only commented out), the
    scheduler told and waited for (its log says it reconfigured); as found afterwards."""
    before = pbsctl.SCHED_CONFIG.read_text()

    def write_and_reload(text: str) -> None:
        seen = _log_count("Scheduler is reconfiguring")
        pbsctl.SCHED_CONFIG.write_text(text)
        pbsctl.reload_scheduler()
        assert wait_until(lambda: _log_count("Scheduler is reconfiguring") > seen, 20)

    text = before
    for key, line in lines.items():
        has = any(ln.startswith(f"{key}:") for ln in text.splitlines())
        text = pbsctl.sched_config_line(text, key, line) if has else text + line + "\n"
    write_and_reload(text)
    try:
        yield
    finally:
        write_and_reload(before)


@pytest.fixture()
def fairshare_files(pbs_server: None) -> Iterator[None]:
    """resource_group and the usage files as found afterwards, the scheduler's formula
    unset and scheduling on; scheduling off meanwhile."""
    group = RESOURCE_GROUP.read_bytes()
    usage = {p: p.read_bytes() if p.exists() else None for p in USAGE_FILES}
    formula = pbsctl.sched_attribute("job_sort_formula")
    pbsctl.qmgr("set server scheduling = False")
    try:
        yield
    finally:
        RESOURCE_GROUP.write_bytes(group)
        for path, data in usage.items():
            if data is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(data)
        pbsctl.set_attribute("sched", "job_sort_formula", formula)
        pbsctl.qmgr("set server scheduling = True", check=False)


def _setup(shares: dict[str, int], usage: dict[str, float]) -> None:
    RESOURCE_GROUP.write_text("".join(f"{n} {i} {p} {s}\n" for n, i, p, s in _groups(shares)))
    for name, value in usage.items():
        pbsctl.run("pbsfs", "-s", name, str(value))


def _run_jobs(jobs: list[str]) -> list[int]:
    """Submit one job per account (scheduling off), let the scheduler run them; their
    starts, the first at 0."""
    for account in ACCOUNTS:
        options = f"-A {account} -l select=1:ncpus=2 -l walltime={WALLTIME_S}"
        jobs.append(pbsctl.qsub(options, f"sleep {RUN_S}"))
    pbsctl.qmgr("set server scheduling = True")
    return pbsctl.finished_starts(jobs, timeout=60)


def _model(
    settings: fs.Settings | None, formula: str = pbsched.FCFS, site: Any = None
) -> list[int]:
    class Walltime(sim.EstimateSource):
        name = "walltime"

        def on_submit(self, j: int, now: int) -> int:
            return WALLTIME_S

    n = len(ACCOUNTS)
    rows = [(pbsctl.USER, 0, WALLTIME_S, RUN_S, NODE_CPUS)] * n
    work = sim.make_workload("real", rows, NODE_CPUS)
    blank = [""] * n
    work = work._replace(site=SiteColumns(blank, blank, blank, [pbsctl.USER] * n, list(ACCOUNTS)))
    policy = pbsched.parse_policy(f"{formula}-greedy")._replace(fairshare=settings)
    return pbsched.simulate_pbs(work, Walltime(), NODE_CPUS, policy, site=site).start


def _order(starts: list[int]) -> list[str]:
    return [a for _, a in sorted(zip(starts, ACCOUNTS))]


EQUAL = {a: 10 for a in ACCOUNTS}


def test_real_fairshare_starts_the_least_used_entity_first(
    fairshare_files: None, jobs: list[str]
) -> None:
    usage = {"acctA": 100000.0, "acctB": 1000.0, "acctC": 10.0}
    settings = fs.Settings(entity="Account_Name", groups=_groups(EQUAL), usage=tuple(usage.items()))
    expected = _model(settings)
    assert _order(expected) == ["acctC", "acctB", "acctA"]
    assert _order(_model(None)) == list(ACCOUNTS)  # FCFS: submit order
    _setup(EQUAL, usage)
    with _sched_config(FAIRSHARE_LINES):
        real = _run_jobs(jobs)
    assert _order(real) == _order(expected), f"model {expected}, real {real}"


def test_real_decay_changes_the_order_as_the_model_decays(
    fairshare_files: None, jobs: list[str]
) -> None:
    # Two decays by 0.5: acctA 4 -> 1, acctC 2 -> 1 (usage is kept at least 1,
    # fairshare.cpp:460-461), acctB 1000 -> 250: A and C tie, and ties go in submit order.
    usage = {"acctA": 4.0, "acctB": 1000.0, "acctC": 2.0}
    day = fs.Settings().decay_time
    settings = fs.Settings(entity="Account_Name", groups=_groups(EQUAL), usage=tuple(usage.items()))
    undecayed = _model(settings)
    decayed = _model(settings._replace(last_decay=-2 * day - 1))  # two decay times passed
    assert _order(undecayed) == ["acctC", "acctA", "acctB"]
    assert _order(decayed) == ["acctA", "acctC", "acctB"]
    _setup(EQUAL, usage)
    pbsctl.run("pbsfs", "-d")
    pbsctl.run("pbsfs", "-d")
    with _sched_config(FAIRSHARE_LINES):
        real = _run_jobs(jobs)
    assert _order(real) == _order(decayed), f"model {decayed}, real {real}"
    assert _order(real) != list(ACCOUNTS)  # not FCFS either


def test_real_formula_reads_fairshare_perc_with_the_unknown_group(
    fairshare_files: None, jobs: list[str]
) -> None:
    # fair_share off: the formula alone. acctC is not in resource_group: it joins the
    # unknown group (unknown_shares 20) alone, so fairshare_perc is A 10/60, B 30/60, C 20/60.
    shares = {"acctA": 10, "acctB": 30}
    settings = fs.Settings(
        fair_share=False, entity="Account_Name", groups=_groups(shares), unknown_shares=20
    )
    expected = _model(settings, "fairshare_perc")
    assert _order(expected) == ["acctB", "acctC", "acctA"]
    assert _order(_model(None, "fairshare_perc")) == list(ACCOUNTS)  # no tree: all 0
    _setup(shares, {})
    pbsctl.qmgr("set sched job_sort_formula = 'fairshare_perc'")
    with _sched_config({**ENTITY_LINE, "unknown_shares": "unknown_shares: 20"}):
        real = _run_jobs(jobs)
    assert _order(real) == _order(expected), f"model {expected}, real {real}"


QUEUES = {"swt_fshigh": 20, "swt_fslow": 10}  # by_queue: the higher priority first
JOB_QUEUES = ("swt_fshigh", "swt_fslow", "swt_fslow")  # acctA's job, then B's and C's


@pytest.fixture()
def two_queues(fairshare_files: None, jobs: list[str]) -> Iterator[None]:
    """Two execution queues of different priorities, deleted afterwards (jobs first)."""
    made = []
    try:
        for name, priority in QUEUES.items():
            pbsctl.qmgr(f"create queue {name} queue_type = Execution, priority = {priority}")
            made.append(name)
            pbsctl.qmgr(f"set queue {name} enabled = True, started = True")
        yield
    finally:
        pbsctl.purge(jobs)
        for name in made:
            pbsctl.qmgr(f"delete queue {name}", check=False)


def test_real_by_queue_sorts_each_queue_by_fairshare(two_queues: None, jobs: list[str]) -> None:
    # sort.cpp:1142-1160: with fair_share and by_queue (sched_config's default) each queue
    # is sorted by fairshare on its own and the queues go in priority order
    # (fifo.cpp:2112-2130). acctA, the heaviest user, is alone in the high queue: first;
    # then the low queue by fairshare, C before B. Fairshare over one list: C, B, A; FCFS
    # by queue: A, B, C.
    from softwalltime.replay.queues import SiteOrder

    usage = {"acctA": 100000.0, "acctB": 1000.0, "acctC": 10.0}
    settings = fs.Settings(entity="Account_Name", groups=_groups(EQUAL), usage=tuple(usage.items()))
    order = SiteOrder(list(JOB_QUEUES), {"workq": 0, **QUEUES})
    expected = _model(settings, site=order)
    assert _order(expected) == ["acctA", "acctC", "acctB"]
    assert _order(_model(settings)) == ["acctC", "acctB", "acctA"]
    assert _order(_model(None, site=order)) == list(ACCOUNTS)
    _setup(EQUAL, usage)
    with _sched_config(FAIRSHARE_LINES):
        for account, queue in zip(ACCOUNTS, JOB_QUEUES):
            options = f"-q {queue} -A {account} -l select=1:ncpus=2 -l walltime={WALLTIME_S}"
            jobs.append(pbsctl.qsub(options, f"sleep {RUN_S}"))
        pbsctl.qmgr("set server scheduling = True")
        real = pbsctl.finished_starts(jobs, timeout=60)
    assert _order(real) == _order(expected), f"model {expected}, real {real}"
