"""Queue-wait prediction (softwalltime.wait): each PQStar rule on hand-made workloads whose
answer is known, the baselines against plain reference code, the paper's measures."""

from __future__ import annotations

import math
import random

import pytest

from softwalltime.wait import baselines, metrics, pqstar
from softwalltime.wait.pqstar import FAR, IBL, MID, NEAR, WaitParams, replay_waits
from softwalltime.wait.workload import WaitJob, large_job_procs

# A 16-processor machine: "large" jobs request 4 or more.
M = 16


def job(submit, start, end, procs=2, ert=1000, user="u"):
    return WaitJob(submit, start, end, procs, ert, user)


def rule_of_last(jobs, machine=M, **kw):
    """The rule PQStar applies to the last job of ``jobs`` (the only target)."""
    params = WaitParams(first_target=len(jobs) - 1, last_target=len(jobs), **kw)
    res = replay_waits(jobs, machine, params)
    assert res.targets == [len(jobs) - 1]
    return res.rule[0], res


@pytest.mark.parametrize(
    ("machine", "large"), [(1, 1), (16, 4), (64, 8), (100, 16), (128, 16), (240, 16), (338, 32)]
)
def test_large_job_is_the_next_power_of_two_of_the_square_root(machine, large):
    assert large_job_procs(machine) == large


def test_near_term_similar_job_started_marks_a_quick_starter():
    jobs = [job(0, 10, 500), job(100, 20_000, 30_000, ert=1200)]
    rule, res = rule_of_last(jobs)
    assert rule == NEAR
    assert res.predicted_s["pqstar"] == [3600]
    assert res.near_jobs == [1]


def test_a_setting_changes_the_bound():
    jobs = [job(0, 10, 500), job(100, 200, 300)]
    _rule, res = rule_of_last(jobs, quick_s=600)
    assert res.predicted_s["pqstar"] == [600]


@pytest.mark.parametrize(
    ("procs", "ert"), [(1, 1000), (4, 1000), (2, 4601 + 1000)], ids=["size", "size", "ert"]
)
def test_near_term_needs_a_similar_job(procs, ert):
    """Same request size and ERT within 1 h: otherwise the near rule does not apply."""
    jobs = [job(0, 10, 500, procs=procs, ert=ert), job(100, 200, 300)]
    assert rule_of_last(jobs)[0] == IBL


def test_near_term_needs_the_similar_job_to_have_started():
    jobs = [job(0, 5000, 6000), job(100, 200, 300)]
    assert rule_of_last(jobs)[0] == IBL


def test_a_similar_job_queued_for_more_than_an_hour_blocks_the_mark():
    started = job(0, 10, 500)
    queued = job(100, 9000, 9100)  # at t = 5000 it has waited 4900 s so far
    target = job(5000, 5100, 5200)
    assert rule_of_last([started, queued, target])[0] == IBL
    # ... but not when it has waited less than the threshold so far
    assert rule_of_last([started, job(2000, 9000, 9100), target])[0] == NEAR


def test_a_similar_job_that_started_after_more_than_an_hour_blocks_the_mark():
    """ "None of the similar jobs since the boundary has waited more than an hour": one that
    started before the target's submit after waiting 2 h blocks too (unless told not to);
    one that starts after the submit is judged by its wait so far only."""
    quick = job(0, 10, 500)
    slow = job(100, 7300, 7400)  # waited 7200 s, started before the target
    target = job(8000, 8100, 8200)
    assert rule_of_last([quick, slow, target])[0] == IBL
    assert rule_of_last([quick, slow, target], block_started_slow=False)[0] == NEAR
    # the same job starting after the target's submit: 7900 s > 1 h so far, blocks too
    assert rule_of_last([quick, job(100, 9000, 9100), target])[0] == IBL
    # a slow similar job submitted before the near-term boundary does not block
    big = job(150, 150, 100_000, procs=4, ert=90_000)
    assert rule_of_last([slow, big, quick._replace(submit_s=200, start_s=210), target])[0] == NEAR


def test_a_change_in_running_large_jobs_ends_the_near_term_history():
    similar = job(0, 10, 500)
    big = job(50, 60, 100_000, procs=4, ert=90_000)  # large: starts before the target
    target = job(1000, 1100, 1200)
    rule, res = rule_of_last([similar, big, target])
    assert res.near_jobs == [0]  # big was submitted with no large job running
    # `similar` and `big` were submitted before big, the only running job, started: no
    # running job in common, so both are far-term history, and `similar` waited 10 s
    assert rule == FAR


def _mid_workload(filler_procs):
    # R runs from 0 on (small), A is a similar quick job submitted while R runs, X is a
    # large job that starts before the target: the near-term history is empty (L went
    # 0 -> 1), the mid-term history (R still running) holds R, A and X.
    r = job(0, 0, 100_000, procs=filler_procs, ert=100_000)
    a = job(10, 20, 500)
    x = job(30, 40, 100_000, procs=4, ert=100_000)
    target = job(1000, 1100, 1200)
    return [r, a, x, target]


def test_mid_term_free_node_criterion():
    rule, res = rule_of_last(_mid_workload(1))  # free: 16 - 1 - 4 = 11 > 2
    assert res.near_jobs == [0]
    assert rule == MID
    # the queue is empty and the near-term history too: no rank threshold, free nodes only
    assert res.mid_criteria == ["F"]


def test_mid_term_without_free_nodes_falls_to_ibl():
    assert rule_of_last(_mid_workload(11))[0] == IBL  # free: 16 - 11 - 4 = 1 < 2


def test_far_term_all_similar_jobs_quick():
    far = job(0, 10, 50)
    r = job(1000, 1000, 1_000_000, procs=1, ert=10**6)
    x = job(1500, 1500, 1_000_000, procs=4, ert=10**6)
    target = job(2000, 2100, 2200)
    assert rule_of_last([far, r, x, target])[0] == FAR
    slow = job(0, 4000, 4050)
    assert rule_of_last([slow, r, x, target])[0] == IBL


def test_rank_criterion():
    """The paper: threshold = min(greatest rank of a quick job, least rank of a slow one),
    and the target's rank must be less than it."""
    ranks = [(0.2, True), (0.5, True), (0.7, False)]
    assert pqstar.rank_threshold_met(0.4, ranks)
    assert not pqstar.rank_threshold_met(0.5, ranks)  # not less than the threshold 0.5
    assert not pqstar.rank_threshold_met(0.6, ranks)  # above every quick job's rank
    assert pqstar.rank_threshold_met(0.3, [(0.5, True), (0.4, False)])
    assert not pqstar.rank_threshold_met(0.4, [(0.5, True), (0.4, False)])  # slow one's rank
    assert pqstar.rank_threshold_met(0.9, [(0.95, True)])
    assert not pqstar.rank_threshold_met(0.0, [(0.0, True)])  # rank 0 is not less than 0
    assert not pqstar.rank_threshold_met(0.0, [(0.1, False)])  # no quick job: no threshold


def test_free_node_criterion():
    queued = [(1, 5000), (8, 100), (8, 9000), (2, 9000)]
    # ahead of a (4 procs, ERT 1000) job: 1 (smaller), 8 (shorter), not the (8, 9000) one,
    # 2 (smaller): 11 processors
    assert pqstar.free_node_criterion(16, 4, 1000, queued)  # 16 - 11 = 5 > 4
    assert not pqstar.free_node_criterion(15, 4, 1000, queued)  # 4 is not > 4


def test_only_started_jobs_teach_the_baselines():
    """A wait is learned when the job starts: a job still queued at the target's submit
    contributes nothing, however its wait ends."""
    early = [job(0, 10, 20, ert=50) for _ in range(3)]
    pending = job(30, 100_000, 100_010)
    target = job(40, 50, 60)
    res = replay_waits(early + [pending, target], M, WaitParams(first_target=4, last_target=5))
    assert res.predicted_s["ibl"] == [10]
    assert res.predicted_s["qbets"] == [10]


@pytest.mark.parametrize("user_window", [0, 7])
def test_ibl_matches_the_plain_reference(user_window):
    """The candidates: the last 50 started jobs and the user's ``user_window`` most recent
    jobs older than those."""
    rng = random.Random(7)
    ibl = baselines.Ibl(k=5, window=50, user_window=user_window)
    history = []
    for n in range(160):
        feats = baselines.features(
            rng.choice("abcd"), rng.randint(1, 64), rng.randint(0, 10**5),
            rng.randint(0, 300), rng.randint(0, 2000), rng.randint(-5, 128), 128,
        )  # fmt: skip
        if n > 10:
            mine = [h for h in history[:-50] if h[0][0] == feats[0]]
            older = mine[-user_window:] if user_window else []
            expected = baselines.ibl_predict_reference(older + history[-50:], feats, k=5)
            assert ibl.predict(feats) == expected
        wait = rng.randint(0, 50_000)
        ibl.observe(feats, wait)
        history.append((feats, wait))


def test_order_statistic_of_the_quantile_bound():
    # 0.95 ** 59 = 0.0485: 59 observations are the fewest whose maximum bounds the 95th
    # percentile with 95 % confidence
    assert baselines.order_statistic(58, 0.95, 0.95) is None
    assert baselines.order_statistic(59, 0.95, 0.95) == 59
    exact = baselines.order_statistic(200, 0.95, 0.95)
    approx = baselines.order_statistic(201, 0.95, 0.95)
    assert exact is not None and approx is not None and abs(approx - exact) <= 2


def test_quantile_bound_and_loguniform():
    qb = baselines.QuantileBound(window=100)
    for w in range(100):
        qb.observe(1, 900, w * 10)
    k = baselines.order_statistic(100, 0.95, 0.95)
    assert qb.bound(1, 1000) == (k - 1) * 10  # 900 s and 1000 s: both in [10, 20) min
    assert qb.bound(64, 900) == (k - 1) * 10  # no jobs of that class: all jobs
    assert qb.loguniform(1, 900, 0.5) == round(math.expm1(math.log1p(990) / 2))
    for w in range(100):
        qb.observe(1, 3 * 3600, 50_000 + w)  # another ERT class: another bound
    assert qb.bound(1, 3 * 3600) == 50_000 + k - 1
    assert qb.bound(1, 900) == (k - 1) * 10


@pytest.mark.parametrize(
    ("procs", "ert", "cls"),
    [(1, 0, (0, 0)), (2, 599, (1, 0)), (3, 600, (2, 1)), (4, 1199, (2, 1)), (5, 1200, (3, 2))],
)
def test_job_class(procs, ert, cls):
    assert baselines.job_class(procs, ert) == cls
    assert baselines.loguniform_bound(0, 0, 0.95) == 0


@pytest.mark.parametrize(
    ("wait", "slab"),
    [(0, 0), (3600, 0), (3601, 1), (3 * 3600, 1), (6 * 3600, 2), (12 * 3600, 3),
     (24 * 3600, 4), (48 * 3600, 5), (48 * 3600 + 1, 6)],
)  # fmt: skip
def test_slabs(wait, slab):
    assert metrics.slab(wait) == slab


def test_measures_on_known_numbers():
    # quick starters: jobs 0, 1 (marked: 0); misguided: job 2 (waited 2 h < 4 h)
    predicted = [3600, 7200, 3600, 36_000]
    waits = [600, 1800, 7200, 36_000]
    runs = [3000, 1800, 800, 0]
    m = metrics.measure(predicted, waits, runs, 3600)
    assert m.targets == 4 and m.quick_starters == 2
    assert m.marked_pct == 50.0
    assert m.misguiding_pct == 25.0 and m.misguiding_under_4h_pct == 100.0
    errors = [3000, 5400, -3600, 0]
    assert m.rms_hours == pytest.approx(math.sqrt(sum(e * e for e in errors) / 4) / 3600)
    assert m.nrms == pytest.approx(math.sqrt(sum((e / w) ** 2 for e, w in zip(errors, waits)) / 4))
    ppe = [3000 / 3600, 5400 / 3600, 3600 / 8000, 0.0]
    assert m.mean_ppe_rt == pytest.approx(sum(ppe) / 4)
    # good: job 0 (same slab), job 3 (exact); job 1: 2 h vs 30 min; job 2: 1 h vs 2 h
    assert m.good_pct == 50.0


def test_no_targets():
    m = metrics.measure([], [], [], 3600)
    assert m.targets == 0 and m.marked_pct is None and m.good_pct is None


def test_quick_similar_counts_only_similar_jobs_that_started_within_the_threshold():
    """Not in the paper (off by default): a similar job that started after waiting 2 h
    proves nothing about backfilling."""
    jobs = [job(0, 7200, 7300), job(8000, 8100, 8200)]
    assert rule_of_last(jobs, block_started_slow=False)[0] == NEAR
    assert rule_of_last(jobs, block_started_slow=False, quick_similar=True)[0] == IBL


def test_pqstar_ibl_believes_ibl_where_they_disagree_strongly():
    p = WaitParams(veto_s=6 * 3600, accept_s=5400)
    # a rule marked: the bound, unless IBL predicts more than veto_s (then IBL's wait)
    assert pqstar.arbitrate(NEAR, 6 * 3600, p) == 3600
    assert pqstar.arbitrate(MID, 6 * 3600 + 1, p) == 6 * 3600 + 1
    # no rule marked: marked when IBL predicts at most accept_s, else IBL's wait
    assert pqstar.arbitrate(IBL, 5400, p) == 3600
    assert pqstar.arbitrate(IBL, 600, p) == 600  # IBL's own wait below the bound
    assert pqstar.arbitrate(IBL, 5401, p) == 5401


def test_pqstar_ibl_in_the_replay():
    """The replay predicts PQStar+IBL from PQStar's rule and IBL's wait of each target."""
    slow = [job(100 * k, 100 * k + 40_000, 100 * k + 40_100) for k in range(5)]
    quick = job(600, 610, 700)  # a similar job that started quickly: near-term mark
    target = job(50_000, 50_100, 50_200)
    rule, res = rule_of_last([*slow, quick, target], block_started_slow=False)
    assert rule == NEAR and res.predicted_s["pqstar"] == [3600]
    ibl_s = res.predicted_s["ibl"][0]
    assert ibl_s > WaitParams().veto_s  # IBL learned the 40,000 s waits of the user's jobs
    assert res.predicted_s["pqstar_ibl"] == [ibl_s]


def test_the_replay_state_is_driven_one_event_at_a_time():
    """WaitReplay's steps, called by hand: a similar job's start is what makes the near
    rule mark the target; before that start PQStar leaves it to IBL."""
    jobs = [job(0, 50, 500), job(100, 20_000, 30_000, ert=1200)]
    replay = pqstar.WaitReplay(jobs, M, WaitParams(first_target=1, last_target=2))
    replay.arrive(0)
    replay.enqueue(0)
    replay.arrive(1)
    assert replay.decide(1, 10) == (IBL, "")  # job 0 still queued: nothing started yet
    replay.advance(49)
    assert 0 in replay.queue and replay.used == 0
    assert replay.events == [(50, 1, 0)]  # job 0's start, still to come
    replay.events.clear()
    replay.observe_start(0)  # by hand: job 0 starts
    assert 0 not in replay.queue and replay.used == 2
    assert replay.decide(1, 100) == (NEAR, "")
    replay.observe_end(0)
    assert replay.used == 0 and replay.ended[0]
    assert replay.decide(1, 600) == (NEAR, "")  # a started job stays in the history


def test_wait_finds_the_newest_of_two_live_jobs_with_one_id():
    """PBS reuses job ids (a wrap, a new datastore); an old job whose end was never logged
    stays live beside the new one: ``wait 9.pbshost`` means the new one."""
    from softwalltime.cli.wait import _find
    from softwalltime.wait.live import LiveJob

    old = LiveJob("9.pbshost", True, "alice", "workq", 1_000, None, 1, 600, None)
    new = old._replace(submit_s=2_000, walltime_s=36_000)
    other = old._replace(job_id="10.pbshost", submit_s=3_000)
    for live in ([old, new, other], [new, old, other]):
        assert _find(live, "9.pbshost") == new
        assert _find(live, "9") is None  # two live jobs numbered 9: the short form is ambiguous
    assert _find([other], "10") == other
