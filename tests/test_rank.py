"""softwalltime.replay.rank: rank candidates on hand-made histories, the causal replay,
and the pair agreement."""

import random

import pytest

from softwalltime.core import rank as hook_rank
from softwalltime.replay import rank

C = rank.CANDIDATES.index

# The user's finished jobs (runtime, walltime, ncpus), newest end first.
HISTORY = [(600, 3600, 4), (300, 3600, 4), (1200, 3600, 4), (100, 7200, 8)]


def test_percentile_is_nearest_rank():
    assert rank.percentile([1, 2, 3, 4], 1, 2) == 2
    assert rank.percentile([1, 2, 3, 4], 1, 4) == 1
    assert rank.percentile([1, 2, 3, 4], 3, 4) == 3
    assert rank.percentile([7], 1, 4) == 7


def test_no_history_gives_the_walltime_for_every_candidate():
    assert rank.estimates(3600, 4, []) == (3600,) * len(rank.CANDIDATES)


def test_each_candidate_on_a_hand_made_history():
    est = rank.estimates(3600, 4, HISTORY)
    assert len(est) == len(rank.CANDIDATES)
    assert est[C("walltime")] == 3600
    assert est[C("v1")] == 450  # (600 + 300) / 2
    assert est[C("v3")] == 2100  # 1200/3600 x 3600 + 900
    # the key walltime+ncpus has 3 jobs: 600, 300, 1200
    assert est[C("key-median")] == 600
    assert est[C("key-p25")] == 300
    assert est[C("key-min")] == 300
    assert est[C("key-last")] == 600
    assert est[C("key-mean")] == 700
    # ratios of the 4 jobs: 100/7200 < 300/3600 < 600/3600 < 1200/3600
    assert est[C("ratio-median")] == 300
    assert est[C("ratio-p25")] == 50  # 100/7200 x 3600
    assert est[C("min-v3-ratio-p75")] == 600
    assert est[C("geo-wall-key-median")] == 1469  # isqrt(3600 x 600)
    assert est[C("geo-v3-key-median")] == 1122  # isqrt(2100 x 600)
    assert est[C("key-p75")] == 1200
    assert est[C("tight-key-median")] == 2100  # 1200 >= 2 x 300: the key disagrees, v3


def test_tight_key_median_trusts_a_consistent_key_only():
    consistent = [(600, 3600, 4), (500, 3600, 4), (700, 3600, 4)]
    assert rank.estimates(3600, 4, consistent)[C("tight-key-median")] == 600
    # the same run times at the user level (another walltime, scaled) are not trusted
    assert rank.estimates(7200, 4, consistent)[C("tight-key-median")] == 7200 * 700 // 3600 + 900


def test_the_key_falls_back_to_the_users_jobs_scaled_to_the_walltime():
    # walltime 1800 has no jobs of its own: every job of the user, run times scaled
    est = rank.estimates(1800, 4, HISTORY)
    # scaled: 300, 150, 600, 25 -> median (nearest rank) 150, last 300, min 25
    assert est[C("key-median")] == 150
    assert est[C("key-last")] == 300
    assert est[C("key-min")] == 25


def test_every_candidate_is_within_one_second_and_the_walltime():
    for wall in (1, 59, 600, 100_000):
        for value in rank.estimates(wall, 1, [(90_000, 100_000, 1), (5, 10, 1)]):
            assert 1 <= value <= wall


def test_replay_learns_only_jobs_ended_by_the_submit():
    # job 0 ends at 100: job 1 (submitted at 50) does not see it, job 2 (at 100) does;
    # job 1 ends at 5000, after every submit
    users = ["u", "u", "u"]
    submit = [0, 50, 100]
    end = [100, 5000, 200]
    run = [60, 4000, 50]
    wall = [3600, 3600, 3600]
    procs = [1, 1, 1]
    out = rank.replay(users, submit, end, run, wall, procs)
    assert out[0][C("key-last")] == 3600  # no history
    assert out[1][C("key-last")] == 3600  # job 0 ends at 100 > 50
    assert out[2][C("key-last")] == 60  # job 0 ended at 100 <= 100; job 1 not yet
    assert out[2][C("v1")] == 60


def test_replay_keeps_users_apart():
    out = rank.replay(["a", "b"], [0, 10], [5, 20], [5, 10], [100, 100], [1, 1])
    assert out[1][C("v1")] == 100  # b has no history: a's job is not b's


def test_history_keeps_the_newest_rows():
    hist = rank.UserHistory()
    for k in range(rank.HISTORY_ROWS + 5):
        hist.add("u", (k, 100, 1))
    rows = hist.of("u")
    assert len(rows) == rank.HISTORY_ROWS
    assert rows[0][0] == rank.HISTORY_ROWS + 4 and rows[-1][0] == 5


def test_agreement_counts_pairs_in_run_time_order_and_ties_half():
    run = [10, 20, 5]
    assert rank.agreement([1, 2, 3], run, [(0, 1), (0, 2), (1, 2)]) == pytest.approx(1 / 3)
    assert rank.agreement([1, 1, 3], run, [(0, 1)]) == 0.5
    assert rank.agreement(run, run, [(0, 1), (0, 2), (1, 2)]) == 1.0


def test_sample_pairs_respects_the_filter():
    run = [1, 2, 3, 4, 4, 100]
    accept = [True, True, False, False, False, False]
    rng = random.Random(1)
    both = rank.sample_pairs(run, 50, rng, accept)
    assert both and all(accept[a] and accept[b] and run[a] != run[b] for a, b in both)
    either = rank.sample_pairs(run, 200, rng, accept, either=True)
    assert all((accept[a] or accept[b]) and run[a] != run[b] for a, b in either)
    assert any(not (accept[a] and accept[b]) for a, b in either)
    assert rank.sample_pairs([5, 5, 5], 10, rng) == []
    # no pair can pass the filter: an empty list, not an endless loop
    assert rank.sample_pairs([1, 2, 3], 10, rng, [True, False, False]) == []
    assert rank.sample_pairs([1, 2, 3], 10, rng, [False, False, False], either=True) == []


def test_coqueued_pairs_are_jobs_submitted_while_the_other_waited():
    submit = [0, 0, 10, 20, 30]
    start = [15, 0, 10, 40, 30]  # jobs 0 and 3 waited; 1, 2 and 4 started at once
    run = [1, 2, 3, 4, 5]
    pairs = rank.coqueued_pairs(submit, start, run, 300, random.Random(3))
    assert len(pairs) == 300
    assert set(pairs) == {(0, 1), (0, 2), (3, 4)}
    # nobody waited: no pair, and no endless loop
    assert rank.coqueued_pairs(submit, submit, run, 10, random.Random(3)) == []
    # the only job submitted while job 0 waited has its run time: no pair either
    assert rank.coqueued_pairs([0, 5], [9, 5], [7, 7], 10, random.Random(3)) == []


def test_gaming_a_24_h_128_cpu_job_costs_at_least_the_job_itself():
    # issue 31: cheap jobs of the same walltime, then a 24 h x 128-cpu job (3,072 core-h)
    day, cpus = 86400, 128
    honest = [(20 * 3600, day, cpus)] * 10
    for history in ([], honest):
        # before: the key mean alone, a fraction of a core-hour
        before = rank.gaming_cost(hook_rank.unpaid_mean, day, cpus, history, 1, (1, cpus))
        assert before is not None and before[0] < 0.5
        # after: rank 1 s is out of reach within the hook's 100 rows (it would cost the
        # job's own 3,072 core-hours), and rank 1 h costs 23/24 of them, 2,944 core-hours
        # (23 jobs of 1 h x 128), where the floor walltime ** (1 - paid) sold it for 875
        after = rank.gaming_cost(hook_rank.paid_key_mean, day, cpus, history, 1, (1, cpus))
        assert after is None
        hour = rank.gaming_cost(hook_rank.paid_key_mean, day, cpus, history, 3600, (1, cpus))
        assert hour == (2944, 23, 3600, cpus)


def test_the_learned_rank_of_the_shipped_prior_costs_one_cheap_job():
    # issue 31, before any defence: with the shipped prior's table, one 1-second 1-cpu job of
    # the same walltime, ended just before the submit, ranks a 24 h x 128-cpu job at 1 s,
    # with or without an honest past of 20 h jobs
    from softwalltime.core import learned_site as ls
    from softwalltime.replay.prior import load_learned_prior

    ranker = rank.learned_ranker(ls.LearnedChoices.from_learner(load_learned_prior()))
    day, cpus = 86400, 128
    assert ranker(day, cpus, []) == day  # no history: the walltime
    paid = rank.learned_ranker(ls.LearnedChoices.from_learner(load_learned_prior()), paid=True)
    for history in ([], [(20 * 3600, day, cpus)] * 10):
        assert rank.gaming_cost(ranker, day, cpus, history, 1, (1, cpus)) == (1 / 3600, 1, 1, 1)
        # learned-paid: rank 1 s out of reach within the hook's 100 rows, rank 1 h costs
        # 2,944 core-h (23 jobs of 1 h x 128), as key-mean-paid
        assert rank.gaming_cost(paid, day, cpus, history, 1, (1, cpus)) is None
        hour = rank.gaming_cost(paid, day, cpus, history, 3600, (1, cpus))
        assert hour == (2944, 23, 3600, cpus)
