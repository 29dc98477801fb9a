"""tests/benchmarks/rank_jump.py: the gamer's job is added where the trace puts it, and only
its rank moves it (issue 31's queue time per rank)."""

import sys
from pathlib import Path

from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim

sys.path.insert(0, str(Path(__file__).parent / "benchmarks"))
import rank_jump  # noqa: E402

DAY = 86400


def _work():
    # 2 processors: alice's job holds both until 1000; bob asks both for 500 s at 10
    rows = [("alice", 0, 1000, 1000, 2), ("bob", 10, 500, 500, 2)]
    rows += [("carol", 40 * DAY, 100, 50, 1)]  # beyond the 30 days after: left out
    return sim.make_workload("t", rows, 2)


def test_the_window_adds_the_gamers_job_at_its_submit():
    win, g = rank_jump.window(_work(), 20, 1)
    assert g == 2 and win.user == ["alice", "bob", rank_jump.GAMER]
    assert win.submit == [0, 10, 20] and win.procs == [2, 2, 1]
    assert (win.wall[g], win.run[g]) == (rank_jump.WALL, rank_jump.RUN)
    # submitted in the same second as bob: after him
    assert rank_jump.window(_work(), 10, 1)[1] == 2


def test_only_the_gamers_rank_moves_it():
    # sjf.rank at 1000, when alice's job ends: ranked 1 s, the gamer's job (1 processor)
    # goes before bob's (ranked his walltime, 500 s: no history) and bob waits for it to
    # end; ranked its walltime, it goes after bob's, at 1500
    policy = pbsched.parse_policy("sjf.rank-bf1")
    assert rank_jump.wait_at(_work(), 2, policy, 20, 1) == 1000 - 20
    assert rank_jump.wait_at(_work(), 2, policy, 20, rank_jump.WALL) == 1500 - 20
    ranker = rank_jump.FixedRanker(2, 7)
    win, _ = rank_jump.window(_work(), 20, 1)
    pbsched.simulate_pbs(win, sim.make_source("v3"), 2, policy, ranker=ranker)
    assert ranker.rank == [1000, 500, 7]  # the others: key-mean without history, the walltime
