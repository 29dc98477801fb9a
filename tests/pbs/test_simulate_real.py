"""The policy simulator against the real PBS scheduler (``make test-pbs``).

A dozen seconds of ``sleep`` jobs on the 2-core node, all queued before the scheduler may
run (``scheduling = False``), their soft walltimes set by the manager (``qalter``, as the
hook would), a ``job_sort_formula`` set with ``qmgr``: the real scheduler must start them
in the order :func:`softwalltime.replay.pbsched.simulate_pbs` predicts for the same workload
and settings. Real jobs take a little longer than their ``sleep`` (start and exit), so
only the order is compared: a job the simulator starts earlier than another must not start
later on the server (equal simulated starts may come in either order).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pbsctl
import pytest
import twin

from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim
from softwalltime.units import qstat_time

NODE_CPUS = 2
# (ncpus, sleep s, soft_walltime s); walltime 10 min. Sorted shortest soft_walltime first:
# J3, J1, J2, J4, J5, J0. Greedy (strict_ordering false, PBS's default): J3 (2 cpus) runs
# first; at its end J1 and J2; J4 at J2's end; J5 at J4's end while J1 still runs; the
# wide J0, first in FCFS order, is passed over until the node is empty.
JOBS = [
    (2, 3, 60),
    (1, 8, 20),
    (1, 3, 30),
    (2, 3, 10),
    (1, 3, 40),
    (1, 3, 50),
]
WALLTIME_S = 600


def simulated_starts(policy: pbsched.Policy) -> list[int]:
    return _simulated([(cpus, run, soft, WALLTIME_S) for cpus, run, soft in JOBS], policy)


def _stime(info: dict[str, Any]) -> int:
    stime = qstat_time(info["stime"])
    assert stime is not None
    return stime


def _submit(cpus: int, run: int, soft: int, walltime: int = WALLTIME_S) -> str:
    # A sleep job as alice, its soft walltime set by the manager (as the hook would).
    jobid = pbsctl.qsub(f"-l select=1:ncpus={cpus} -l walltime={walltime}", f"sleep {run}")
    pbsctl.run("qalter", "-l", f"soft_walltime={soft}", jobid)
    return jobid


def _real_starts(jobs: list[str]) -> list[int]:
    for jobid in jobs:
        pbsctl.wait_state(jobid, "F", timeout=120)
    real = [_stime(pbsctl.job(jobid)) for jobid in jobs]
    return [r - min(real) for r in real]


def _wrong_order(expected: list[int], real: list[int]) -> list[tuple[int, int]]:
    """The pairs a simulated earlier than b that started after b on the server."""
    n = len(expected)
    return [
        (a, b)
        for a in range(n)
        for b in range(n)
        if expected[a] < expected[b] and real[a] > real[b]
    ]


def _assert_real_order(
    specs: list[tuple[int, int, int]], expected: list[int], jobs: list[str]
) -> None:
    """Submit ``specs`` (ncpus, sleep s, soft_walltime s) while scheduling is off, then let
    the real scheduler run them: a job simulated to start before another must not start
    after it on the server."""
    for cpus, run, soft in specs:
        jobs.append(_submit(cpus, run, soft))
    pbsctl.qmgr("set server scheduling = True")
    real = _real_starts(jobs)
    assert not _wrong_order(expected, real), f"simulated starts {expected}, real {real}"


@pytest.fixture()
def sort_formula(pbs_server: None) -> Iterator[None]:
    """The scheduler's job_sort_formula and the server's scheduling, restored afterwards."""
    out = pbsctl.qmgr("list sched").stdout
    before = [ln.split("=", 1)[1].strip() for ln in out.splitlines() if "job_sort_formula" in ln]
    try:
        yield
    finally:
        pbsctl.qmgr("set server scheduling = True", check=False)
        if before:
            pbsctl.qmgr(f"set sched job_sort_formula = '{before[0]}'", check=False)
        else:
            pbsctl.qmgr("unset sched job_sort_formula", check=False)


def test_real_scheduler_starts_jobs_in_the_simulated_order(
    sort_formula: None, jobs: list[str]
) -> None:
    policy = pbsched.parse_policy("sjf-greedy")
    expected = simulated_starts(policy)
    assert expected == [12, 3, 3, 0, 6, 9]  # the order worked out above

    setting = next(s for s in pbsched.pbs_settings(policy) if "job_sort_formula" in s)
    formula = setting.split("=", 1)[1].strip().strip("'\"")
    pbsctl.qmgr("set server scheduling = False")
    pbsctl.qmgr(f"set sched job_sort_formula = '{formula}'")
    _assert_real_order(JOBS, expected, jobs)


# strict_ordering with backfill_depth 1, FCFS (no formula), the issue-29 pair: jobs as
# (ncpus, sleep s, soft_walltime s, walltime s). J0 starts; J1 (2 cpus) is the top job,
# reserved at J0's soft end (6 s). J2 (soft 8 s) would end after it and cannot pass, so
# its equivalence class, (1 cpu, walltime 600 s), is marked can't-run for the cycle
# (fifo.cpp:990-996). With W3 = 600, J3 is of that class and waits for J1's end without a
# check of its own (check.cpp:710-714); with W3 = 601 it is a class of its own and, its
# soft walltime (3 s) ending before the reservation, starts at once: PBS backfills by the
# soft walltime (check.cpp:921-924), not the walltime. The real server showed [0, 7, 12,
# 12] and [0, 7, 11, 0] (issue 29).


def pair(w3: int) -> list[tuple[int, int, int, int]]:
    return [(1, 6, 6, 600), (2, 3, 3, 600), (1, 8, 8, 600), (1, 3, 3, w3)]


@pytest.fixture()
def strict_ordering(sort_formula: None) -> Iterator[None]:
    """sched_config's strict_ordering True and backfill_depth 1, both restored afterwards."""
    depth = pbsctl.server_attribute("backfill_depth")
    with pbsctl.sched_config({"strict_ordering": "strict_ordering: True\tALL"}):
        try:
            pbsctl.qmgr("set server backfill_depth = 1")
            yield
        finally:
            if depth is None:
                pbsctl.qmgr("unset server backfill_depth", check=False)
            else:
                pbsctl.qmgr(f"set server backfill_depth = {depth}", check=False)


def _simulated(
    jobs: list[tuple[int, int, int, int]],
    policy: pbsched.Policy,
    submit: list[int] | None = None,
    ranker: pbsched.Ranker | None = None,
    procs: int = NODE_CPUS,
    epoch: int = 0,
) -> list[int]:
    class Soft(sim.EstimateSource):
        name = "soft_walltime"

        def on_submit(self, j: int, now: int) -> int:
            return jobs[j][2]

    at = submit or [0] * len(jobs)
    rows = [(pbsctl.USER, at[i], wall, run, cpus) for i, (cpus, run, _s, wall) in enumerate(jobs)]
    work = sim.make_workload("real", rows, procs)
    return pbsched.simulate_pbs(work, Soft(), procs, policy, ranker=ranker, epoch=epoch).start


PBS_MODEL = pbsched.parse_policy("fcfs-bf1")  # soft walltime, PBS's classes: the default
BY_WALLTIME = pbsched.parse_policy("fcfs-bf1", backfill_by=pbsched.WALLTIME)
NO_CLASSES = pbsched.parse_policy("fcfs-bf1", classes=pbsched.CLASSES_NONE)


def test_the_model_tells_the_pair_apart_from_the_alternatives() -> None:
    # Not on the server: what each rule predicts for the two variants. Only the model
    # (soft walltime, classes) predicts both real orders; each alternative misses one.
    assert _simulated(pair(600), PBS_MODEL) == [0, 6, 9, 9]
    assert _simulated(pair(601), PBS_MODEL) == [0, 6, 9, 0]
    assert _simulated(pair(601), BY_WALLTIME) == [0, 6, 9, 9]  # J3 waits: wrong at 601
    assert _simulated(pair(600), NO_CLASSES) == [0, 6, 9, 0]  # J3 passes: wrong at 600
    greedy = pbsched.parse_policy("fcfs-greedy")
    assert _simulated(pair(600), greedy) == [0, 9, 0, 6]


@pytest.mark.parametrize("w3", [600, 601])
def test_real_strict_ordering_backfills_by_soft_walltime_within_classes(
    strict_ordering: None, jobs: list[str], w3: int
) -> None:
    assert PBS_MODEL.strict_ordering and PBS_MODEL.backfill_depth == 1
    expected = _simulated(pair(w3), PBS_MODEL)
    pbsctl.qmgr("set server scheduling = False")
    pbsctl.qmgr("unset sched job_sort_formula", check=False)
    for cpus, run, soft, walltime in pair(w3):
        jobs.append(_submit(cpus, run, soft, walltime))
    pbsctl.qmgr("set server scheduling = True")
    real = _real_starts(jobs)
    assert not _wrong_order(expected, real), f"w3 {w3}: simulated {expected}, real {real}"
    # and the real order is one the alternative of each variant gets wrong
    other = _simulated(pair(w3), BY_WALLTIME if w3 == 601 else NO_CLASSES)
    assert _wrong_order(other, real), f"w3 {w3}: {other} fits the real {real} as well"


# A class under a job_sort_formula: X runs (qrun) before the others are considered; the
# formula ncpus + soft_walltime / 1000 puts T (2 cpus) first, then Y (soft 8 s) before Z
# (soft 3 s), whatever their submit order (Z is submitted before Y). T is the top job at
# X's soft end; Y cannot pass it and marks the class (1 cpu, 600 s), so Z, submitted first
# and short enough to pass, waits for T's end. FCFS (no formula) takes Z before Y: Z
# passes at once.
FORMULA = "ncpus + soft_walltime / 1000"
X, T, Z, Y = (1, 6, 6, 600), (2, 3, 3, 600), (1, 3, 3, 600), (1, 8, 8, 600)
CLASS_JOBS = [X, T, Z, Y]
CLASS_SUBMIT = [0, 1, 1, 1]  # X started alone, the others queued a second later


def test_real_class_under_a_sort_formula(strict_ordering: None, jobs: list[str]) -> None:
    policy = pbsched.parse_policy(f"{FORMULA}-bf1")
    expected = _simulated(CLASS_JOBS, policy, CLASS_SUBMIT)
    assert expected == [0, 6, 9, 9]  # X, T at X's soft end, then Z and Y at T's end
    fcfs = _simulated(CLASS_JOBS, PBS_MODEL, CLASS_SUBMIT)
    assert fcfs == [0, 6, 1, 9]  # without the formula Z passes at once
    no_classes = _simulated(CLASS_JOBS, policy._replace(classes=pbsched.CLASSES_NONE), CLASS_SUBMIT)
    assert no_classes == [0, 6, 1, 9]  # without classes Z passes after Y's failure

    pbsctl.qmgr("set server scheduling = False")
    pbsctl.qmgr(f"set sched job_sort_formula = '{FORMULA}'")
    jobs.append(_submit(*X))
    pbsctl.run("qrun", jobs[0])
    pbsctl.wait_state(jobs[0], "R", timeout=60)
    for spec in (T, Z, Y):
        jobs.append(_submit(*spec))
    pbsctl.qmgr("set server scheduling = True")
    real = _real_starts(jobs)
    assert not _wrong_order(expected, real), f"simulated {expected}, real {real}"
    assert _wrong_order(fcfs, real), f"FCFS's {fcfs} fits the real {real} as well"
    assert _wrong_order(no_classes, real), f"no classes' {no_classes} fits {real} as well"


# The rank in the class key (issue 29, "Beyond"): with softwalltime_rank on sched_config's
# resources: line, J2 and J3 of the pair (same walltime 600 s; ranks 8 and 3) fall into
# different classes, and J3 backfills at once, as with walltime 601 (the issue saw [0, 7,
# 11, 0] against [0, 7, 11, 11] without the line). The simulator's classes="rank".
RANK = pbsched.RANK
RANKS = [6, 3, 8, 3]


@pytest.fixture()
def rank_in_classes(strict_ordering: None) -> Iterator[None]:
    """The rank's resource and sched_config's resources: line with it, both removed after."""
    assert pbsctl.qmgr(f"list resource {RANK}", check=False).returncode != 0, (
        f"{RANK} left over: delete it first"
    )
    pbsctl.qmgr(f"create resource {RANK} type=long, flag=r")
    with pbsctl.sched_config({"resources": pbsched.SCHED_RESOURCES_RANK}):
        yield


def _simulated_ranked(classes: str) -> list[int]:
    class Ranks(pbsched.Ranker):
        def value(self, j: int) -> int:
            return RANKS[j]

    policy = pbsched.parse_policy("fcfs-bf1", classes=classes)
    return _simulated(pair(600), policy, ranker=Ranks())


def test_real_rank_on_the_resources_line_splits_the_class(
    rank_in_classes: None, jobs: list[str]
) -> None:
    expected = _simulated_ranked(pbsched.CLASSES_RANK)
    assert expected == [0, 6, 9, 0]
    without = _simulated_ranked(pbsched.CLASSES_PBS)
    assert without == [0, 6, 9, 9]
    pbsctl.qmgr("set server scheduling = False")
    pbsctl.qmgr("unset sched job_sort_formula", check=False)
    try:
        for (cpus, run, soft, walltime), rank in zip(pair(600), RANKS):
            jobid = _submit(cpus, run, soft, walltime)
            jobs.append(jobid)
            pbsctl.run("qalter", "-l", f"{RANK}={rank}", jobid)  # as the hook would
        pbsctl.qmgr("set server scheduling = True")
        real = _real_starts(jobs)
        assert not _wrong_order(expected, real), f"simulated {expected}, real {real}"
        assert _wrong_order(without, real), f"without the line {without} fits {real} as well"
    finally:
        pbsctl.purge(jobs)  # a job holding the resource keeps it from being deleted
        jobs.clear()
        pbsctl.qmgr(f"delete resource {RANK}", check=False)


# Next to an advance reservation PBS checks a job with its walltime (check.cpp:921-922:
# exists_resv_event within now + the hard duration), and the simulator does not model
# reservations: this pins what --backfill-by walltime stands for. The pair at walltime 601
# backfills J3 at once by its soft walltime (above); with a 1-cpu reservation starting two
# minutes on, inside J3's walltime, J3 must end by the top job's reservation by its
# walltime and waits for J1's end, as the walltime rule predicts. J1's walltime is 60 s
# here: a 2-cpu job whose walltime reached the reservation could not start before it ends.
RESV_IN_S, RESV_FOR_S = 120, 60
RESV_PAIR = [(1, 6, 6, 600), (2, 3, 3, 60), (1, 8, 8, 600), (1, 3, 3, 601)]


def _confirmed(resv: str) -> bool:
    out = pbsctl.run("pbs_rstat", "-f", resv).stdout
    return "reserve_state = RESV_CONFIRMED" in out


@pytest.fixture()
def advance_reservation(strict_ordering: None) -> Iterator[str]:
    """A confirmed 1-cpu advance reservation by alice, RESV_IN_S from now; deleted after."""
    now = int(time.time())

    def stamp(t: int) -> str:
        return time.strftime("%Y%m%d%H%M.%S", time.localtime(t))

    start, end = stamp(now + RESV_IN_S), stamp(now + RESV_IN_S + RESV_FOR_S)
    out = pbsctl.as_user(f"pbs_rsub -R {start} -E {end} -l select=1:ncpus=1").stdout
    resv = out.split()[0]
    try:
        deadline = time.monotonic() + 30
        while not _confirmed(resv):
            assert time.monotonic() < deadline, f"reservation {resv} not confirmed in 30 s"
            time.sleep(0.3)
        yield resv
    finally:
        pbsctl.run("pbs_rdel", resv, check=False)


def test_real_advance_reservation_makes_pbs_use_the_walltime(
    advance_reservation: str, jobs: list[str]
) -> None:
    expected = _simulated(RESV_PAIR, BY_WALLTIME)
    assert expected == [0, 6, 9, 9]
    assert _simulated(RESV_PAIR, PBS_MODEL) == [0, 6, 9, 0]  # what it is without it
    pbsctl.qmgr("set server scheduling = False")
    pbsctl.qmgr("unset sched job_sort_formula", check=False)
    for cpus, run, soft, walltime in RESV_PAIR:
        jobs.append(_submit(cpus, run, soft, walltime))
    pbsctl.qmgr("set server scheduling = True")
    real = _real_starts(jobs)
    assert not _wrong_order(expected, real), f"simulated {expected}, real {real}"
    assert _wrong_order(_simulated(RESV_PAIR, PBS_MODEL), real), f"soft rule fits {real}"


# opt_backfill_fuzzy (a sched attribute; PBS's default "low", 60 s): PBS searches a top
# job's start in windows (simulate.cpp:747-768): checked now, then, while it does not fit,
# every event up to the window's boundary after the next event is taken at once, and it is
# checked at the last of them (simulate.cpp:190-214). On 4 cpus, R1, R2 and R3 run; T
# (3 cpus) waits for R1 and R2. When R1 ends, B (1 cpu, soft 14 s) could take its cpu
# only if it ended by T's reservation. Off (a 1-second window) reserves T at R2's end
# (12 s), so B waits for T's end; a window of 10^9 s (its boundary in 2033) reserves T at
# the last event, R3's end (24 s), so B passes at once. A search at every event (the
# model without the window) also says 12. The compressed twin replay of CTC-SP2 showed
# what the default does to a compressed workload (docs/simulate.md).
FUZZY_CPUS = 4
R1, R2, R3 = (1, 4, 4, 600), (2, 12, 12, 600), (1, 24, 24, 600)
FUZZY_JOBS = [R1, R2, R3, (3, 3, 3, 600), (1, 3, 14, 600)]
HUGE_WINDOW_S = 10**9


@contextlib.contextmanager
def _node_cpus(cpus: int) -> Iterator[None]:
    """The node with ``cpus`` cpus, and opt_backfill_fuzzy, both restored afterwards."""
    out = pbsctl.qmgr(f"list node {twin.NODE} resources_available.ncpus").stdout
    ncpus = pbsctl._attribute(out, "resources_available.ncpus")
    fuzzy = pbsctl.sched_attribute("opt_backfill_fuzzy")
    try:
        pbsctl.qmgr(f"set node {twin.NODE} resources_available.ncpus = {cpus}")
        yield
    finally:
        if ncpus is None:
            pbsctl.qmgr(f"unset node {twin.NODE} resources_available.ncpus", check=False)
        else:
            pbsctl.qmgr(f"set node {twin.NODE} resources_available.ncpus = {ncpus}", check=False)
        if fuzzy is None:
            pbsctl.qmgr("unset sched opt_backfill_fuzzy", check=False)
        else:
            pbsctl.qmgr(f"set sched opt_backfill_fuzzy = {fuzzy}", check=False)


@pytest.fixture()
def four_cpus(strict_ordering: None) -> Iterator[None]:
    """The node with FUZZY_CPUS cpus, and opt_backfill_fuzzy, both restored afterwards."""
    with _node_cpus(FUZZY_CPUS):
        yield


def _fuzzy_model(fuzzy: int | None, epoch: int = 0) -> list[int]:
    policy = pbsched.parse_policy("fcfs-bf1", backfill_fuzzy=fuzzy)
    return _simulated(FUZZY_JOBS, policy, procs=FUZZY_CPUS, epoch=epoch)


def test_the_fuzzy_window_tells_off_from_a_wide_window() -> None:
    # Not on the server: what each setting predicts.
    assert _fuzzy_model(0) == [0, 0, 0, 12, 15]  # off: B waits for T's end
    assert _fuzzy_model(None) == [0, 0, 0, 12, 15]  # every event: the same here
    assert _fuzzy_model(HUGE_WINDOW_S, epoch=1_800_000_000) == [0, 0, 0, 12, 4]


@pytest.mark.parametrize("fuzzy", [0, HUGE_WINDOW_S])
def test_real_top_job_start_is_searched_in_opt_backfill_fuzzy_windows(
    four_cpus: None, jobs: list[str], fuzzy: int
) -> None:
    pbsctl.qmgr("set server scheduling = False")
    pbsctl.qmgr("unset sched job_sort_formula", check=False)
    pbsctl.qmgr(f"set sched opt_backfill_fuzzy = {fuzzy}")
    for cpus, run, soft, walltime in FUZZY_JOBS:
        jobs.append(_submit(cpus, run, soft, walltime))
    epoch = int(time.time())
    expected = _fuzzy_model(fuzzy, epoch)
    pbsctl.qmgr("set server scheduling = True")
    real = _real_starts(jobs)
    assert not _wrong_order(expected, real), f"fuzzy {fuzzy}: simulated {expected}, real {real}"
    other = _fuzzy_model(HUGE_WINDOW_S if fuzzy == 0 else 0, epoch)
    assert _wrong_order(other, real), f"fuzzy {fuzzy}: {other} fits the real {real} as well"


# backfill_depth (issue 30's search runs some formulas at 2 or 3): the first that many jobs
# that cannot start get a reservation (fifo.cpp:1622-1639, :909-939). On 4 cpus R runs (2
# cpus, 6 s); T1 (3 cpus) is reserved at R's end, 6 s; T2 (4 cpus) at T1's end, 9 s, only
# with a depth of 2 or more. B (1 cpu, 11 s) fits beside R and beside T1, so at depth 1 it
# starts at once and T2 waits for it (11 s); at depth 2 it would delay T2's reservation and
# waits for T2's end (12 s). opt_backfill_fuzzy off: one-second windows.
DEPTH_JOBS = [(2, 6, 6, 600), (3, 3, 3, 600), (4, 3, 3, 600), (1, 11, 11, 600)]


def _depth_model(depth: int) -> list[int]:
    policy = pbsched.parse_policy(f"fcfs-bf{depth}", backfill_fuzzy=0)
    return _simulated(DEPTH_JOBS, policy, procs=FUZZY_CPUS)


def test_backfill_depth_tells_one_top_job_from_two() -> None:
    # Not on the server: what each depth predicts.
    assert _depth_model(1) == [0, 6, 11, 0]  # B passes; T2 waits for B
    assert _depth_model(2) == [0, 6, 9, 12]  # T2 reserved too: B waits for its end
    assert _depth_model(3) == _depth_model(2)  # no third job to reserve


@pytest.mark.parametrize("depth", [1, 2])
def test_real_backfill_depth_reserves_that_many_top_jobs(
    four_cpus: None, jobs: list[str], depth: int
) -> None:
    pbsctl.qmgr("set server scheduling = False")
    pbsctl.qmgr("unset sched job_sort_formula", check=False)
    pbsctl.qmgr("set sched opt_backfill_fuzzy = 0")
    pbsctl.qmgr(f"set server backfill_depth = {depth}")  # strict_ordering restores it
    for cpus, run, soft, walltime in DEPTH_JOBS:
        jobs.append(_submit(cpus, run, soft, walltime))
    expected = _depth_model(depth)
    pbsctl.qmgr("set server scheduling = True")
    real = _real_starts(jobs)
    assert not _wrong_order(expected, real), f"depth {depth}: simulated {expected}, real {real}"
    other = _depth_model(2 if depth == 1 else 1)
    assert _wrong_order(other, real), f"depth {depth}: {other} fits the real {real} as well"


# Two top jobs, the later-reserved one first (issue 46): a job may start if the free cpus
# over its own run never fall below its own (simulate_resmin over the calendar's events
# before its end, simulate.cpp:1800-1802; check.cpp:921-1000). On 5 cpus A (2 cpus, 6 s)
# and B (1 cpu, 20 s) run, 2 free. T1 (5 cpus) is reserved at B's end, 20 s; T2 (3 cpus)
# at A's end, 6 s, 1 cpu beside it until 9 s. C (1 cpu, 12 s) takes that cpu and is gone
# before T1: it starts at once, and E (2 cpus, 5 s) waits for T2's end (9 s). The pool
# before issue 46 kept T2's extra as the least free from 6 s on, T1's 0 at 20 s included,
# refused C, started E at once (it ends by 6 s) and C with T2 at 6 s: OLD_POOL.
PAIR_CPUS = 5
PAIR_JOBS = [(2, 6, 6, 600), (1, 20, 20, 600), (5, 3, 3, 600), (3, 3, 3, 600),
             (1, 12, 12, 600), (2, 5, 5, 600)]  # fmt: skip
OLD_POOL = [0, 0, 20, 6, 6, 0]


@pytest.fixture()
def five_cpus(strict_ordering: None) -> Iterator[None]:
    with _node_cpus(PAIR_CPUS):
        yield


def _pair_model(depth: int) -> list[int]:
    policy = pbsched.parse_policy(f"fcfs-bf{depth}", backfill_fuzzy=0)
    return _simulated(PAIR_JOBS, policy, procs=PAIR_CPUS)


def test_a_job_ending_before_the_later_top_job_passes_at_depth_two() -> None:
    # Not on the server: C starts at once, E after T2, at depth 1 and 2 alike.
    assert _pair_model(2) == [0, 0, 20, 6, 0, 9]
    assert _pair_model(1) == _pair_model(2)
    assert _wrong_order(OLD_POOL, _pair_model(2))  # the two orders differ


def test_real_a_job_ending_before_the_later_top_job_starts_at_depth_two(
    five_cpus: None, jobs: list[str]
) -> None:
    pbsctl.qmgr("set server scheduling = False")
    pbsctl.qmgr("unset sched job_sort_formula", check=False)
    pbsctl.qmgr("set sched opt_backfill_fuzzy = 0")
    pbsctl.qmgr("set server backfill_depth = 2")  # strict_ordering restores it
    for cpus, run, soft, walltime in PAIR_JOBS:
        jobs.append(_submit(cpus, run, soft, walltime))
    expected = _pair_model(2)
    pbsctl.qmgr("set server scheduling = True")
    real = _real_starts(jobs)
    assert not _wrong_order(expected, real), f"simulated {expected}, real {real}"
    assert _wrong_order(OLD_POOL, real), f"the old pool's {OLD_POOL} fits the real {real}"
