"""The parts of tests/benchmarks/learned_ceiling.py: lambda bisection, the held and
recording tables, the hindsight choice (issue 31)."""

import importlib.util
import math
from pathlib import Path

import pytest

from softwalltime.core import learned
from softwalltime.replay.evaluate import columns, replay_learned
from softwalltime.replay.trace import TraceJob

_PATH = Path(__file__).resolve().parent / "benchmarks" / "learned_ceiling.py"
_SPEC = importlib.util.spec_from_file_location("learned_ceiling", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
ceiling = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ceiling)
H = 3600


def test_bisect_lambda_finds_the_smallest_feasible_log_lambda():
    def under_at(log_lam):
        return 10 if log_lam < 1.0 else (3 if log_lam < 4.0 else 0)

    assert ceiling.bisect_lambda(under_at, 5, 40) == pytest.approx(1.0, abs=1e-6)
    assert ceiling.bisect_lambda(under_at, 5, 40) >= 1.0
    assert ceiling.bisect_lambda(under_at, 0, 40) == pytest.approx(4.0, abs=1e-6)
    assert ceiling.bisect_lambda(lambda lg: 7, 3, 40) == ceiling.LOG_HIGH


def _jobs():
    # two users: one steady (runs 20 % of 2 h), one erratic (runs 5 % to 90 % of 4 h)
    jobs = []
    for k in range(600):
        user = k % 2
        wall = 2 * H if user == 0 else 4 * H
        share = 0.2 if user == 0 else (0.05, 0.9, 0.3, 0.6)[k // 2 % 4]
        submit = 600 * k
        run = int(wall * share)
        jobs.append(TraceJob(f"u{user}", submit, submit, submit + run, wall, run))
    return jobs


def test_the_held_table_keeps_lambda_and_the_recorder_sees_every_job():
    cols, _ = columns(_jobs())
    lams = []
    for kind in (ceiling.Held, learned.Learner):
        table = kind()
        table.log_lam = math.log(0.5)
        table.lam = 0.5
        replay_learned(cols, 10.0, table)  # a fixed 10 %: every end has an error
        assert table.total == len(cols.runs)
        lams.append(table.lam)
    assert lams[0] == 0.5 != lams[1]
    table = ceiling.Recording()
    replay_learned(cols, None, table)
    assert sorted(run for _out, run in table.seen) == sorted(cols.runs)
    # the hindsight choice with the whole table: one rule per fine bin, no job without one
    softs = ceiling.hindsight(table, table.seen, math.log(1.0))
    assert len(softs) == len(cols.runs) and all(s >= 1 for s in softs)
    rules = {}
    for (out, _run), soft in zip(table.seen, softs):
        if out.coarse >= 0:
            rules.setdefault(out.fine, set()).add(
                table.choose(out) if out.softs[table.choose(out)] == soft else -1
            )
    assert all(-1 not in got for got in rules.values())
