"""The start-time predictor (issue 35): forward simulation from a snapshot of the queue."""

from __future__ import annotations

import random

import pytest

from softwalltime.replay import pbsched
from softwalltime.replay.pool import PoolModel
from softwalltime.replay.sim_workload import make_workload
from softwalltime.replay.sources import PerfectSource
from softwalltime.wait import starteval as se
from softwalltime.wait import starttime as st

FCFS = pbsched.parse_policy("fcfs-bf1")


def snap(running, queued, target, procs=4, now=100):
    return st.QueueSnapshot(now, procs, running, queued, target)


def test_pbs_estimate_waits_for_the_running_jobs_soft_walltime():
    # 4 processors, one running job of 4 (soft walltime 300 s, started at 0): the target
    # starts when PBS thinks the running job ends, unless it really ends earlier.
    running = [st.RunningJob(start=0, est=300, wall=3600, procs=4)]
    queued = [st.QueuedJob(submit=90, est=60, wall=600, procs=2)]
    s = snap(running, queued, 0)
    assert st.pbs_estimate(s, FCFS) == 300
    assert st.forward_start(s, FCFS, [60], [150]) == 150
    # past its soft walltime a running job "ends now" for PBS's method: the next second
    late = snap(running, queued, 0, now=400)
    assert st.pbs_estimate(late, FCFS) == 401


def test_backfilling_and_the_top_job_reservation():
    # 4 processors; running: 2 processors until 100 s from now. Queue: J0 needs 4 (top job,
    # reserved at 200), J1 needs 2 for 50 s (backfills now: ends before the reservation),
    # J2 needs 2 for 500 s (would delay J0: waits for J0 to end).
    running = [st.RunningJob(start=0, est=200, wall=1000, procs=2)]
    queued = [
        st.QueuedJob(10, 300, 1000, 4),
        st.QueuedJob(20, 50, 1000, 2),
        st.QueuedJob(30, 500, 1000, 2),
    ]
    assert [st.pbs_estimate(snap(running, queued, t), FCFS) for t in range(3)] == [200, 100, 500]
    # the running job really ends at 150: J0 starts then; J1 still at once
    assert st.forward_start(snap(running, queued, 0), FCFS, [300, 50, 500], [150]) == 150
    assert st.forward_start(snap(running, queued, 1), FCFS, [300, 50, 500], [150]) == 100
    # J2 then starts when J0 really ends (150 + 300 s), not at J0's soft walltime
    assert st.forward_start(snap(running, queued, 2), FCFS, [250, 50, 500], [150]) == 400


def test_the_sort_formula_orders_the_queue():
    running = [st.RunningJob(0, 200, 1000, 4)]
    queued = [st.QueuedJob(10, 900, 1000, 4), st.QueuedJob(20, 100, 1000, 4)]
    sjf = pbsched.parse_policy("sjf-bf1")
    assert st.pbs_estimate(snap(running, queued, 1), FCFS) == 1100  # after J0
    assert st.pbs_estimate(snap(running, queued, 1), sjf) == 200  # shortest first


def test_a_time_dependent_sort_gets_periodic_cycles():
    # strict order, no backfilling, xfactor: T (4 processors, waited 1000 s, soft walltime
    # 100 s) heads the queue and cannot start before the running job ends at 10,000 s; S
    # (2 processors, 50 s) overtakes it once 1 + t/50 > 11 + t/100 (t > 1000 s), which the
    # periodic cycle (every 600 s after the last one) sees at 1,200 s; free processors wait.
    running = [st.RunningJob(start=0, est=10_000, wall=20_000, procs=2)]
    queued = [st.QueuedJob(-1000, 100, 1000, 4), st.QueuedJob(0, 50, 1000, 2)]
    policy = pbsched.parse_policy("xfactor-strict")
    assert st.pbs_estimate(snap(running, queued, 1, now=0), policy) == 1200
    no_ticks = policy._replace(scheduler_iteration=0)
    assert st.pbs_estimate(snap(running, queued, 1, now=0), no_ticks) == 10_000


def test_a_job_wider_than_the_machine_is_refused():
    with pytest.raises(ValueError, match="more processors than the machine"):
        st.pbs_estimate(snap([], [st.QueuedJob(0, 10, 10, 8)], 0), FCFS)


def test_quantiles_are_nearest_rank():
    assert st.quantile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.5) == 5
    assert st.quantile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9) == 9
    assert st.quantile([7], 0.9) == 7


def test_running_end_is_after_now_and_within_the_walltime():
    sampler = st.RunSampler(random.Random(1), [0.5])
    job = st.RunningJob(start=0, est=100, wall=1000, procs=1)
    # kinds shorter than it has run: uniform from the next second to its walltime
    ends = {sampler.running_end(job, 500, [60, 120]) for _ in range(200)}
    assert min(ends) >= 501 and max(ends) <= 1000 and len(ends) > 50
    # longer kinds are drawn from
    assert {sampler.running_end(job, 500, [60, 700, 900]) for _ in range(50)} == {700, 900}


def test_a_user_without_history_draws_from_the_site():
    sampler = st.RunSampler(random.Random(1), [0.25, 0.5])
    assert sorted(sampler.runs_of(1000, 1, [])) == [250, 500]
    assert sampler.runs_of(1000, 1, [(30, 1000, 1)] * 3) == [30, 30, 30]


def _random_workload(seed, n=60, procs=16, burst=False):
    rng = random.Random(seed)
    rows = []
    t = 0
    for _ in range(n):
        t += 0 if burst else rng.randint(0, 400)
        wall = rng.choice([600, 1800, 3600, 7200])
        rows.append((f"u{rng.randint(1, 4)}", t, wall, rng.randint(1, wall), rng.randint(1, procs)))
    return make_workload("random", rows, procs)


@pytest.mark.parametrize(
    "sort", ["fcfs-bf1", "sjf-bf1", "sjfage-bf1", "fcfs-bf4", "xfactor-greedy", "xfactor-strict"]
)
@pytest.mark.parametrize("seed", range(6))
def test_with_perfect_estimates_pbs_method_is_the_simulated_start(sort, seed):
    # The last job submitted sees no later arrival: with perfect soft walltimes, PBS's
    # method from the snapshot at its submit must give the start the whole-trace simulation
    # gave it (the same scheduler model run forward), whatever the sort and backfilling.
    work = _random_workload(seed, burst=seed % 2 == 0)
    policy = pbsched.parse_policy(sort)
    truth = se.ground_truth(work, PerfectSource(), 16, policy)
    k = len(work.submit) - 1
    sweep = se._Sweep(work, truth)
    sweep.advance(k)
    assert st.pbs_estimate(sweep.snapshot(k, 16), policy) == truth.start[k]


def test_snapshots_match_a_naive_recount():
    work = _random_workload(3, n=120)
    truth = se.ground_truth(work, PerfectSource(), 16, FCFS)
    sweep = se._Sweep(work, truth)
    end = [s + r for s, r in zip(truth.start, work.run)]
    for k in range(0, 120, 7):
        now = sweep.advance(k)
        s = sweep.snapshot(k, 16)
        queued = [j for j in range(k + 1) if truth.start[j] >= now]
        running = [j for j in range(len(end)) if truth.start[j] < now < end[j]]
        assert [q.submit for q in s.queued] == [work.submit[j] for j in queued]
        assert sorted(r.start for r in s.running) == sorted(truth.start[j] for j in running)
        assert s.queued[s.target].submit == now


def test_figures_count_hits_per_method():
    preds = [
        se.Prediction(job=0, submit=0, start=0, pbs=0, median=30, p50=700, p90=900),
        se.Prediction(job=1, submit=0, start=1000, pbs=5000, median=1500, p50=1010, p90=999),
    ]
    f = se.figures(preds)
    assert f["all"]["jobs"] == 2
    assert f["all"]["PBS"] == {"within_60s": 50.0, "within_600s": 50.0, "within_3600s": 50.0}
    assert f["all"]["median"] == {"within_60s": 50.0, "within_600s": 100.0, "within_3600s": 100.0}
    assert f["all"]["P50"]["within_60s"] == 50.0
    assert f["all"]["P90_coverage"] == 50.0
    assert f["all"]["PQStar"]["within_3600s"] is None  # -1: not predicted
    assert f["waited_10min"]["jobs"] == 1 and f["waited_10min"]["P90_coverage"] == 0.0


def test_targets_are_thinned_to_the_cap():
    assert se.target_jobs(100, 11, 40, 1000) == list(range(10, 50))
    assert se.target_jobs(100, 11, 40, 10) == list(range(10, 50, 4))
    assert se.target_jobs(5, 11, 40, 10) == []


def _random_snapshot(rng, n_queued, procs=32):
    now = 10_000
    running, used = [], 0
    while used < procs - 4 and rng.random() < 0.9:
        p = rng.randint(1, 8)
        if used + p > procs:
            break
        used += p
        wall = rng.choice([600, 3600, 7200])
        running.append(st.RunningJob(now - rng.randint(0, 3000), rng.randint(0, wall), wall, p))
    queued = []
    for k in range(n_queued):
        wall = rng.choice([600, 1800, 3600, 7200])
        p = rng.choice([1, 1, 2, 4, 8, 16, 32])
        queued.append(
            st.QueuedJob(now - 5000 + k, rng.randint(0, wall), wall, p, rng.randint(0, 3))
        )
    return st.QueueSnapshot(now, procs, running, queued, rng.randrange(n_queued))


def test_a_job_that_can_never_run_is_no_top_job():
    # PBS marks a job wider than every node can_never_run (check.cpp:795-799,
    # fifo.cpp:861-862) and never adds it to the calendar (fifo.cpp:1647-1649): with
    # backfill_depth 1 the 2-processor job behind it starts at once. A reservation for it
    # would hold more processors than the machine has, and nothing would pass it.
    s = snap([], [st.QueuedJob(0, 10, 10, 8), st.QueuedJob(1, 10, 10, 2)], 1)
    assert st.forward_starts(s, FCFS, [10, 10], []) == [-1, 100]
    # strict ordering without backfilling: nothing passes it (fifo.cpp:1008-1017)
    strict = pbsched.parse_policy("fcfs-strict")
    assert st.forward_starts(s, strict, [10, 10], []) == [-1, -1]
    # the pool's class FIFOs (_PoolClassCycles) agree
    assert st.forward_starts(s, FCFS, [10, 10], [], fast=False) == [-1, 100]
    assert st.forward_starts(s, strict, [10, 10], [], fast=False) == [-1, -1]


@pytest.mark.parametrize(
    "sort, classes, backfill_by",
    [
        ("fcfs-bf1", "pbs", "estimate"),
        ("fcfs-bf1", "none", "estimate"),
        ("sjf-bf1", "pbs", "estimate"),
        ("sjf.rank-bf1", "rank", "estimate"),
        ("fcfs-strict", "pbs", "estimate"),
        ("sjf-greedy", "pbs", "estimate"),
        ("fcfs-bf1", "pbs", "walltime"),
        ("small-bf1", "none", "walltime"),
    ],
)
def test_the_pool_class_fifos_ask_what_the_core_asks(sort, classes, backfill_by):
    # _PoolClassCycles (the pool's class FIFOs, asking the pool only for the classes that
    # fit) against the core's cycle (schedule_cycle over the whole queue): the same start
    # for every target, run times and queue, jobs that can never run among them.
    policy = pbsched.parse_policy(sort, classes=classes, backfill_by=backfill_by)
    rng = random.Random(f"{sort}{classes}{backfill_by}")
    checked = wide = 0
    for _ in range(60):
        s = _random_snapshot(rng, rng.randint(1, 80))
        if rng.random() < 0.3:  # a job wider than the machine, somewhere in the queue
            k = rng.randrange(len(s.queued))
            s.queued[k] = s.queued[k]._replace(procs=s.procs_total + 1)
            wide += 1
        est = [q.est or q.wall for q in s.queued]
        assert isinstance(st._cycles(s, policy, est, None, True), st._PoolClassCycles)
        runs = [rng.randint(1, q.wall) for q in s.queued]
        ends = [r.start + rng.randint(1, r.wall) for r in s.running]
        fast = st.forward_starts(s, policy, runs, ends)
        assert fast == st.forward_starts(s, policy, runs, ends, fast=False)
        checked += sum(start > s.now for start in fast)
    assert checked > 200 and wide > 10  # most jobs wait: the cycles were exercised


def test_time_dependent_sorts_deeper_backfilling_and_other_models_run_the_core():
    s = _random_snapshot(random.Random(1), 5)
    for sort in ("xfactor-bf1", "fcfs-bf4"):
        cycles = st._cycles(s, pbsched.parse_policy(sort), [1] * 5, None, True)
        assert type(cycles) is st._Cycles
    model = PoolModel(s.procs_total, [q.procs for q in s.queued] + [r.procs for r in s.running])
    assert type(st._cycles(s, FCFS, [1] * 5, model, True)) is st._Cycles
    runs = [q.wall for q in s.queued]
    ends = [r.start + r.wall for r in s.running]
    given = st.forward_starts(s, FCFS, runs, ends, model=model)
    assert given == st.forward_starts(s, FCFS, runs, ends) and max(given) > s.now


CERIT = "softwalltime/data/CERIT-SC-wagap-2013.alea.swf.gz"


def test_eval_start_on_a_bundled_trace(capsys):
    import json

    from softwalltime.cli import main

    args = ["eval-start", "--predictions", "40", "--procs", "2176", "--first", "12001"]
    assert main([*args, "--json", CERIT]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["predictions"], report["policy"], report["estimates"]) == (40, "fcfs-bf1", "v3")
    fig = report["figures"]
    assert fig["all"]["jobs"] == 40 and 0 < fig["waited_10min"]["jobs"] < 40
    for method in se.METHODS:
        shares = list(fig["all"][method].values())
        assert shares == sorted(shares) and 0 <= shares[0] <= shares[-1] <= 100
    assert main([*args, CERIT]) == 0  # the same figures as text
    text = capsys.readouterr().out
    rows = [line.split() for line in text.splitlines() if line.startswith("  P50 ")]
    assert "within 10 min %" in text and len(rows) == 2
    assert [float(x) for x in rows[0][1:]] == list(fig["all"]["P50"].values())


@pytest.mark.parametrize(
    "args, message",
    [
        (["--policy", "sjf.rank-bf1"], "a sort reading softwalltime_rank is not evaluated"),
        (["--policy", "fairshare-bf1"], "fairshare is modelled by simulate only"),
        (["--policy", "fairshare_perc-bf1"], "fairshare is modelled by simulate only"),
        (["--policy", "nosuch-bf1"], "--policy: "),
        (["--predictions", "100001"], "at most 100,000 predictions"),
        (["--first", "20000"], "none from job 20,000 on"),
    ],
)
def test_eval_start_refuses_in_one_line(capsys, args, message):
    from softwalltime.cli import main

    code = None
    try:
        code = main(["eval-start", "--procs", "2176", *args, CERIT])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code in (1, 2)
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1]


def test_one_run_to_the_last_start_gives_each_jobs_start():
    # --publish runs the queue once to its last start: each job's start there is the
    # start a run for that job alone gives (the run does not depend on the target).
    rng = random.Random(7)
    policy = FCFS
    for _ in range(20):
        s = _random_snapshot(rng, rng.randint(1, 40))
        runs = [rng.randint(1, q.wall) for q in s.queued]
        ends = [r.start + rng.randint(1, r.wall) for r in s.running]
        every = st.forward_starts(s, policy, runs, ends)
        alone = [
            st.forward_start(s._replace(target=j), policy, runs, ends) for j in range(len(runs))
        ]
        assert every == alone


def test_all_quantiles_match_one_jobs_answer():
    # one run time per kind: every draw is that one, so the answers for all jobs at once must
    # equal each job's own (a drawn P50 and P90 are tested above)
    s = _random_snapshot(random.Random(3), 30)
    kinds = [[q.wall // 3] for q in s.queued]
    running = [[r.wall] for r in s.running]
    sampler = st.RunSampler(random.Random(5), [0.5])
    every = st.all_quantiles(s, FCFS, sampler, kinds.__getitem__, running)
    alone = [
        st.start_quantiles(s._replace(target=j), FCFS, sampler, kinds.__getitem__, running)
        for j in range(30)
    ]
    assert every == alone and len({a.p50 for a in alone}) > 5
    assert any(a.p50 != a.pbs for a in alone)  # the drawn run times are not the estimates


def test_a_job_wider_than_the_machine_never_starts_in_a_run_of_all():
    s = snap([], [st.QueuedJob(0, 10, 10, 8), st.QueuedJob(1, 10, 10, 2)], 0)
    assert st.forward_starts(s, pbsched.parse_policy("fcfs-greedy"), [10, 10], []) == [-1, 100]


def test_the_widening_per_wait_class_covers_the_jobs_that_wait():
    # 180 jobs predicted to start at once that did, and 20 predicted to wait 1 h that waited
    # 1 h to 4 h 10 min: one correction learns from all 200 (its P90 is a zero: the P90
    # of the jobs that wait is left as it was), the split learns the waiters' apart
    waits = [3600 + 600 * i for i in range(20)]
    one, split = st.Widening(split_s=0), st.Widening()
    for widening in (one, split):
        for _ in range(180):
            widening.learn(0, 0)
        for real in waits:
            widening.learn(3600, real)
    assert one.widen(3600) == 3600
    assert sum(real <= one.widen(3600) for real in waits) == 1  # 5 % of the waiters covered
    assert sum(real <= split.widen(3600) for real in waits) == 18  # 90 %
    assert split.widen(0) == one.widen(0) == 0  # the immediate starts: as they were
    assert split.wait_class(599) == 0 and split.wait_class(st.WIDEN_SPLIT_S) == 1


def test_a_wait_class_with_few_scores_borrows_every_class():
    widening = st.Widening()
    for _ in range(st.WIDEN_MIN):
        widening.learn(0, 60)  # 60 s late: 0.1 of (0 + 600 s)
    assert widening.widen(0) == 60
    # no waiter learned yet: the class borrows the others' 0.1
    assert widening.widen(3000) == 3000 + 360
    assert st.Widening().widen(3000) == 3000  # nothing learned: no correction
