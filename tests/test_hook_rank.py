"""softwalltime.core.rank: the rank the hook publishes (key-mean), on hand-made
histories; the replay's candidate ``key-mean`` is this very function."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from softwalltime.core import calibrated as cal
from softwalltime.core import rank as hook_rank
from softwalltime.replay import rank

# The user's finished jobs (runtime, walltime, ncpus), newest end first.
HISTORY = [(600, 3600, 4), (300, 3600, 4), (1200, 3600, 4), (100, 7200, 8)]


def test_the_mean_of_the_finest_key_rounded_up():
    assert hook_rank.unpaid_mean(3600, 4, HISTORY) == 700  # (600 + 300 + 1200) / 3
    # ncpus unknown: the walltime key, the same three jobs
    assert hook_rank.unpaid_mean(3600, None, HISTORY) == 700
    # (600 + 301 + 1200) / 3 = 700.33: rounded up
    assert hook_rank.unpaid_mean(3600, 4, [(600, 3600, 4), (301, 3600, 4), (1200, 3600, 4)]) == 701
    # paid: the four jobs cost 9,200 core-seconds, 2,300 s of this job's 4 processors: the
    # floor 3600 - 2300 = 1300 s is above the mean
    assert hook_rank.paid_key_mean(3600, 4, HISTORY) == 1300
    # a well-paid key: the mean itself
    assert hook_rank.paid_key_mean(3600, 4, [(600, 3600, 4)] * 10 + HISTORY) == 600


def test_the_users_jobs_scaled_to_the_walltime_when_no_key_has_three_jobs():
    # walltime 1800: scaled run times 300, 150, 600, 25 -> mean 268.75, rounded up
    assert hook_rank.unpaid_mean(1800, 4, HISTORY) == 269
    # ten times that history: its 10 newest scaled, 2,600 s / 10, paid in full
    assert (
        hook_rank.paid_key_mean(1800, 4, HISTORY * 10)
        == hook_rank.unpaid_mean(1800, 4, HISTORY * 10)
        == 260
    )


def test_no_usable_history_gives_the_walltime():
    for ranker in (hook_rank.paid_key_mean, hook_rank.unpaid_mean):
        assert ranker(3600, 4, []) == 3600
        assert ranker(3600, 4, [(500, None, 4), (500, 0, 4)]) == 3600


def test_clamped_to_the_walltime_and_to_one_second():
    assert hook_rank.paid_key_mean(60, 4, [(5000, 3600, 4)] * 3) == 60  # scaled 84, above 60
    assert hook_rank.unpaid_mean(3600, 4, [(0, 3600, 4)] * 3) == 1
    # run times 0 pay nothing: the walltime
    assert hook_rank.paid_key_mean(3600, 4, [(0, 3600, 4)] * 3) == 3600


# Anti-gaming (issue 31): a 24 h x 128-cpu job, cheap jobs of the same walltime.
DAY = 86400


def test_one_cheap_job_no_longer_gives_a_new_user_rank_one_second():
    # before: the key mean alone took one 1-second job at its word
    assert hook_rank.unpaid_mean(DAY, 128, [(1, DAY, 128)]) == 1
    # after: it paid 128 core-seconds, one second of this job's 128 processors
    assert hook_rank.paid_key_mean(DAY, 128, [(1, DAY, 128)]) == floor(DAY, 128, 128) == 86399


def test_the_jump_costs_the_jobs_own_core_seconds():
    # one 1-second job as wide as half the job's core-seconds: half the walltime
    half = DAY * 128 // 2
    assert hook_rank.paid_key_mean(DAY, 128, [(1, DAY, half)]) == DAY // 2
    # as many core-seconds as the job itself: rank 1 s; 2 s of the job's 128 processors
    # fewer: 2 s; and 1 core-second more than that: still 2 s (rounded up)
    assert hook_rank.paid_key_mean(DAY, 128, [(1, DAY, 2 * half)]) == 1
    assert hook_rank.paid_key_mean(DAY, 128, [(1, DAY, 2 * half - 256)]) == 2
    assert hook_rank.paid_key_mean(DAY, 128, [(1, DAY, 2 * half - 255)]) == 2


def floor(walltime_s, paid_core_s, ncpus):
    return math.ceil(walltime_s - paid_core_s / ncpus)


def test_narrow_cheap_jobs_buy_a_wide_job_little():
    # 1-cpu jobs of 10 min pay 600 core-seconds each: 4.7 s of a 128-cpu job each
    narrow = [(600, DAY, 1)] * 50
    assert hook_rank.unpaid_mean(DAY, 128, narrow) == 600
    assert hook_rank.paid_key_mean(DAY, 128, narrow) == floor(DAY, 50 * 600, 128) == 86166
    # the same jobs pay a 1-cpu job 128 times as much
    assert hook_rank.paid_key_mean(DAY, 1, narrow) == floor(DAY, 50 * 600, 1) == 56400


def test_an_honest_past_of_long_jobs_does_not_pay_for_cheap_ones():
    honest = [(20 * 3600, DAY, 128)] * 90
    cheap = [(1, DAY, 128)] * 10
    # the key mean of the 10 newest: 1 s; the long jobs' cost would pay it 800 times
    assert hook_rank.unpaid_mean(DAY, 128, cheap + honest) == 1
    # only evidence consistent with the claim (run <= 2 x mean + 60 s) pays
    assert hook_rank.paid_key_mean(DAY, 128, cheap + honest) == floor(DAY, 10 * 128, 128) == 86390
    # consistent evidence is the claim's: the honest jobs pay their own rank
    assert hook_rank.paid_key_mean(DAY, 128, honest) == 20 * 3600


def test_free_jobs_that_pull_the_mean_move_the_rank_by_their_own_cost_only():
    # issue 52, as a user would game it (newest first): a 24 h x 128-cpu job, 10 honest
    # jobs that ran 20 h, then three 1-second jobs of 128 cpus in the same key
    honest = [(20 * 3600, DAY, 128)] * 10
    cheap = [(1, DAY, 128)] * 3
    assert hook_rank.paid_key_mean(DAY, 128, honest) == 20 * 3600
    # the key mean falls to 14 h (3 x 1 s + 7 x 20 h) / 10, and the 20 h runs, consistent
    # with it, paid for it: the rank was 14 h
    assert hook_rank.unpaid_mean(DAY, 128, cheap + honest) == 50401
    assert hook_rank.paid_floor(DAY, 128, cheap + honest, 50401) == 50401
    # now the pullers pay for the pull: 384 core-seconds / 128 = 3 s
    got = hook_rank.paid_key_mean(DAY, 128, cheap + honest)
    assert 20 * 3600 - got <= 3 * 128 // 128
    assert got == 20 * 3600 - 3
    # three before every real job, over and over: the key's 10 newest hold 8 of them (and
    # 2 real jobs), which may move the rank by their 8 x 128 core-seconds / 128; the 20 h
    # runs are not consistent with the 4 h mean, so the first floor holds more: the
    # walltime minus the 21 cheap jobs' cost per cpu
    rows = cheap + honest[:1]
    for _ in range(6):
        rows = cheap + [(20 * 3600, DAY, 128)] + rows
    assert hook_rank.unpaid_mean(DAY, 128, rows) == 14401
    # (the key's upper median is a cheap job's: the pull floor holds nothing)
    assert hook_rank.pull_floor(DAY, 128, rows) <= 1
    assert hook_rank.paid_key_mean(DAY, 128, rows) == DAY - 21
    # the setting's default and hooks install --rank's is this paid rank
    assert hook_rank.DEFAULT == hook_rank.PAID_NAME == "key-mean-paid"


@pytest.mark.parametrize("free", range(11))
def test_any_number_of_free_jobs_moves_the_rank_by_their_own_cost_only(free):
    # 0 to 10 free 1-second jobs of 128 cpus among the key's 10 newest, before honest 20 h
    # runs: the median holds while they are at most half the key, the first floor
    # (the honest runs are not consistent with the mean) from there on
    honest = [(20 * 3600, DAY, 128)] * 10
    got = hook_rank.paid_key_mean(DAY, 128, [(1, DAY, 128)] * free + honest)
    assert 20 * 3600 - free * 128 // 128 <= got <= DAY
    if free:
        assert hook_rank.unpaid_mean(DAY, 128, [(1, DAY, 128)] * free + honest) < 20 * 3600


def test_a_key_of_short_runs_with_a_few_long_ones_keeps_its_mean():
    # seven 5-minute runs and three 2 h runs (2 h walltime, 4 cpus), older short runs
    # paying for the claim: the mean 39.5 min stands. The mean of the runs at or above it
    # (2 h) minus the short runs' cost per cpu (35 min), the pull floor until issue 52's
    # second change, raised it to 85 min: an honest spread is no pull
    rows = [(300, 7200, 4)] * 7 + [(7200, 7200, 4)] * 3 + [(300, 7200, 4)] * 20
    assert hook_rank.unpaid_mean(7200, 4, rows) == 2370
    assert hook_rank.pull_floor(7200, 4, rows) == 300 - 7 * 300
    assert hook_rank.paid_key_mean(7200, 4, rows) == 2370


def test_pullers_that_paid_for_the_pull_keep_the_mean():
    # three 2 h runs of 128 cpus pull a key of 20 h runs to 14.6 h, and cost 6 h of the
    # job's 128 cpus, more than the 5.4 h pull: the key mean stands
    rows = [(2 * 3600, DAY, 128)] * 3 + [(20 * 3600, DAY, 128)] * 10
    assert hook_rank.paid_key_mean(DAY, 128, rows) == hook_rank.unpaid_mean(DAY, 128, rows)
    # narrow pullers buy a wide job little: 1-cpu 2 h runs pay 3 x 7200 / 128 = 168 s (and
    # the first floor, all 13 narrow jobs' cost per cpu of the job, holds more)
    rows = [(2 * 3600, DAY, 1)] * 3 + [(20 * 3600, DAY, 1)] * 10
    assert hook_rank.pull_floor(DAY, 128, rows) == 20 * 3600 - 168
    assert hook_rank.paid_key_mean(DAY, 128, rows) == DAY - (3 * 7200 + 10 * 72000) // 128
    # no job below the mean: nothing to pay for
    assert hook_rank.pull_floor(DAY, 128, [(3600, DAY, 128)] * 5) == 1
    assert hook_rank.pull_floor(DAY, 128, []) == 1


def test_only_the_hooks_rows_count():
    # the 101st row and beyond is not read: it pays nothing
    rows = [(0, DAY, 128)] * 100 + [(3600, DAY, 128)] * 100
    assert hook_rank.paid_key_mean(DAY, 128, rows) == DAY


rows = st.lists(
    st.tuples(
        st.integers(0, 10**6),
        st.one_of(st.none(), st.integers(0, 10**6)),
        st.one_of(st.none(), st.integers(1, 512)),
    ),
    max_size=120,
)


@pytest.mark.slow
@given(st.integers(1, 10**6), st.one_of(st.none(), st.integers(1, 512)), rows)
def test_always_within_one_second_and_the_walltime(walltime_s, ncpus, history):
    assert 1 <= hook_rank.paid_key_mean(walltime_s, ncpus, history) <= walltime_s


@given(
    st.integers(1, 10**6),
    st.integers(1, 64),
    st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(1, 10**6), st.integers(1, 64)),
        min_size=1,
        max_size=120,
    ),
)
def test_the_replays_candidate_is_the_hooks_rank(walltime_s, ncpus, history):
    # the benchmark's figures (rank_gap.py) are those of the published rank key-mean
    got = rank.estimates(walltime_s, ncpus, history)[rank.CANDIDATES.index("key-mean")]
    assert got == hook_rank.key_mean(walltime_s, ncpus, history)
    assert got == hook_rank.rank_of("key-mean", walltime_s, ncpus, history)
    # key-mean-paid is never below it
    assert hook_rank.rank_of("key-mean-paid", walltime_s, ncpus, history) >= got
    # the pull floor prices the very jobs features() averages
    key = cal.key_rows(walltime_s, ncpus, history)
    assert cal.scaled_runs(key, walltime_s) == cal.features(walltime_s, ncpus, history)[1]
