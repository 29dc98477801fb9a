"""softwalltime.core.rank: the rank the hook publishes (key-mean), on hand-made
histories; the replay's candidate ``key-mean`` is this very function."""

from hypothesis import given
from hypothesis import strategies as st

from softwalltime.core import rank as hook_rank
from softwalltime.replay import rank

# The user's finished jobs (runtime, walltime, ncpus), newest end first.
HISTORY = [(600, 3600, 4), (300, 3600, 4), (1200, 3600, 4), (100, 7200, 8)]


def test_the_mean_of_the_finest_key_rounded_up():
    assert hook_rank.key_mean(3600, 4, HISTORY) == 700  # (600 + 300 + 1200) / 3
    # ncpus unknown: the walltime key, the same three jobs
    assert hook_rank.key_mean(3600, None, HISTORY) == 700
    # (600 + 301 + 1200) / 3 = 700.33: rounded up
    assert hook_rank.key_mean(3600, 4, [(600, 3600, 4), (301, 3600, 4), (1200, 3600, 4)]) == 701


def test_the_users_jobs_scaled_to_the_walltime_when_no_key_has_three_jobs():
    # walltime 1800: scaled run times 300, 150, 600, 25 -> mean 268.75, rounded up
    assert hook_rank.key_mean(1800, 4, HISTORY) == 269


def test_no_usable_history_gives_the_walltime():
    assert hook_rank.key_mean(3600, 4, []) == 3600
    assert hook_rank.key_mean(3600, 4, [(500, None, 4), (500, 0, 4)]) == 3600


def test_clamped_to_the_walltime_and_to_one_second():
    assert hook_rank.key_mean(60, 4, [(5000, 3600, 4)] * 3) == 60  # scaled 84, above 60
    assert hook_rank.key_mean(3600, 4, [(0, 3600, 4)] * 3) == 1


rows = st.lists(
    st.tuples(
        st.integers(0, 10**6),
        st.one_of(st.none(), st.integers(0, 10**6)),
        st.one_of(st.none(), st.integers(1, 512)),
    ),
    max_size=120,
)


@given(st.integers(1, 10**6), st.one_of(st.none(), st.integers(1, 512)), rows)
def test_always_within_one_second_and_the_walltime(walltime_s, ncpus, history):
    assert 1 <= hook_rank.key_mean(walltime_s, ncpus, history) <= walltime_s


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
    # the benchmark's figures (rank_gap.py) are those of the published rank
    got = rank.estimates(walltime_s, ncpus, history)[rank.CANDIDATES.index("key-mean")]
    assert got == hook_rank.key_mean(walltime_s, ncpus, history)
