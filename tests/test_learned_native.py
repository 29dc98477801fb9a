"""``learned``'s table loops in C (:mod:`softwalltime.replay.learned_native`, ``make
compile``): built where the simulator is, and the same floats as the Python methods, so
the same table and the same choices (the hook and a pure install run the Python ones)."""

from __future__ import annotations

import random

import pytest
from helpers_runtime import skip_or_fail
from test_simulate_reference import CTC, KTH

from softwalltime.core import learned
from softwalltime.replay import learned_native, native
from softwalltime.replay.evaluate import columns, replay_learned
from softwalltime.replay.prior import load_learned_prior
from softwalltime.replay.trace_readers import read_sources

N = learned.N_RULES


def _need_kernel() -> None:
    if learned_native.kernel is None:
        skip_or_fail("learned's C kernel is not built", "make compile: gcc and python3-dev")


def _state(table: learned.Learner) -> tuple:
    return (
        table.n_site,
        table.n_coarse,
        table.n_fine,
        table.a_site,
        table.a_coarse,
        table.a_fine,
        table.u_site,
        table.u_coarse,
        table.u_fine,
        table.lam,
        table.level,
        table.total_under,
    )


def test_the_replay_uses_the_kernel_where_it_is_built() -> None:
    _need_kernel()
    assert native.KERNEL in learned_native.kernel.__name__
    assert type(learned_native.new_learner()) is learned_native.NativeLearner


def _copy(table: learned.Learner, into: learned.Learner) -> learned.Learner:
    for name in learned.Learner.__slots__:
        value = getattr(table, name)
        if isinstance(value, list):
            value = [list(v) if isinstance(v, list) else v for v in value]
        setattr(into, name, value)
    return into


@pytest.mark.parametrize(
    ("trace", "jobs", "target", "prior"),
    [(KTH, 40000, None, False), (CTC, 30000, 12.0, False), (KTH, 20000, None, True)],
    ids=["KTH-v3", "CTC-12pct", "KTH-prior"],
)
def test_the_kernel_gives_the_python_table_and_choices(trace, jobs, target, prior) -> None:
    _need_kernel()
    cols, _ = columns(read_sources([str(trace)]).jobs[:jobs])
    start = load_learned_prior() if prior else learned.Learner()
    plain = _copy(start, learned.Learner())
    fast = _copy(start, learned_native.NativeLearner())
    want, want_table = replay_learned(cols, target, plain)
    got, got_table = replay_learned(cols, target, fast)
    assert got == want
    assert _state(got_table) == _state(want_table)  # every sum to the last bit
    assert sum(a != b for a, b in zip(want, cols.walls)) > jobs // 10  # the table chose


def test_the_kernel_reads_int_sums_as_python_does() -> None:
    # a table rebuilt from stored or prior rows may hold ints; Python's int + float and
    # int x float convert the int first, and so does the kernel
    _need_kernel()
    rng = random.Random(7)
    lists = [[rng.choice([0, 3, 7.25, 1e-9, 12345.5]) for _ in range(N)] for _ in range(6)]
    plain, fast = learned.Learner(), learned_native.NativeLearner()
    for table in (plain, fast):
        table.a_site, table.a_coarse[4], table.a_fine[9] = (list(x) for x in lists[:3])
        table.u_site, table.u_coarse[4], table.u_fine[9] = (list(x) for x in lists[3:])
    weights = (0.01, 0.003, 0.7, 1.3, 2.5)
    assert fast._best(9, 4, *weights) == plain._best(9, 4, *weights)
    softs = tuple(rng.randrange(1, 5000) for _ in range(N))
    for r in (1, 2500, 6000):
        plain._add(4, 9, softs, r, min(softs), max(softs))
        fast._add(4, 9, softs, r, min(softs), max(softs))
        assert _state(fast) == _state(plain)


def test_equal_scores_give_the_first_rule() -> None:
    _need_kernel()
    table = learned_native.NativeLearner()
    table.a_site = [0.5] * N
    table.a_site[3] = table.a_site[7] = 0.75  # rules 3 and 7 tie at the top
    assert table._best(0, 0, 1.0, 1.0, 1.0, 1.0, 1.0) == 3
    assert learned.Learner._best(table, 0, 0, 1.0, 1.0, 1.0, 1.0, 1.0) == 3


def test_the_kernel_refuses_what_the_table_never_holds() -> None:
    _need_kernel()
    kernel = learned_native.kernel
    sums = [[0.0] * N for _ in range(6)]
    softs = (60,) * N
    with pytest.raises(TypeError, match="list of the rules' sums"):
        kernel.add(*sums[:5], [0.0] * (N - 1), softs, 30, 60)  # a short list
    with pytest.raises(ValueError, match="below 1 s"):
        kernel.add(*sums, (0,) * N, 30, 0)
    with pytest.raises(ValueError, match="run time > 0"):
        kernel.add(*sums, softs, 0, 60)
    with pytest.raises(ValueError, match="1 to 64 rules"):
        kernel.add(*[[0.0] * 65 for _ in range(6)], (60,) * 65, 30, 60)
    with pytest.raises(TypeError):
        kernel.best(*sums[:5], ["x"] * N, 1.0, 1.0, 1.0, 1.0, 1.0)
    assert sums == [[0.0] * N for _ in range(6)]  # nothing written before the refusal
