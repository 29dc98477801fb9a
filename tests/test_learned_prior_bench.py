"""The parts of tests/benchmarks/learned_prior.py: the leave-one-out prior and v3's replay
(issue 31)."""

import sys
from pathlib import Path

import pytest

from softwalltime.core.predict import DEFAULT_PARAMS, predict
from softwalltime.replay.evaluate import columns, replay_learned
from softwalltime.replay.prior import LEARNED_SCALE
from softwalltime.replay.trace import TraceJob

sys.path.insert(0, str(Path(__file__).parent / "benchmarks"))
import learned_prior as bench  # noqa: E402

H = 3600


def _trace(user: str, n: int, share: float):
    """``n`` jobs of one user, 2 h requested, each running ``share`` of it, one per 10 min
    (each ends before the next is submitted)."""
    run = int(2 * H * share)
    return columns([TraceJob(user, 600 * k, 600 * k, 600 * k + run, 2 * H, run)
                    for k in range(n)])[0]  # fmt: skip


def test_the_prior_of_a_trace_leaves_it_out():
    training = {
        "a": _trace("a", 300, 0.05),
        "b": _trace("b", 200, 0.05),
        "c": _trace("c", 50, 0.05),
    }
    # every job but each trace's first has history: it counts in the site's cells
    assert bench.prior_without("a", training).n_site == pytest.approx((199 + 49) * LEARNED_SCALE)
    assert bench.prior_without("b", training).n_site == pytest.approx((299 + 49) * LEARNED_SCALE)
    # a trace that is not one of them gets the prior of all three
    assert bench.prior_without("x", training).n_site == pytest.approx(547 * LEARNED_SCALE)


def test_the_v3_replay_gives_v3s_soft_walltimes():
    # runs of 5 % and then 40 % of 2 h: v3 follows the largest ratio of the user's last 15
    jobs = [TraceJob("u", 600 * k, 600 * k, 600 * k + (360 if k < 20 else 2880), 2 * H,
                     360 if k < 20 else 2880) for k in range(40)]  # fmt: skip
    cols, _ = columns(jobs)
    softs, table = replay_learned(cols, None, bench._AlwaysV3())
    assert table.total == 40
    params = DEFAULT_PARAMS
    ends = [job[3] for job in jobs]
    for k, soft in enumerate(softs):
        ended = [j for j in range(k - 1, -1, -1) if ends[j] < jobs[k][1]]  # newest first
        history = [(jobs[j][5], 2 * H) for j in ended]
        assert soft == predict("v3", 2 * H, history, params).soft_walltime_s, k
    assert softs[0] == 2 * H and softs[1] == 360 + 900 and softs[30] == 2880 + 900
