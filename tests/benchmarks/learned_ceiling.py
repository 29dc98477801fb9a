"""Where ``learned`` loses at v3's under-estimate rate: its steering, or its learning?

    python tests/benchmarks/learned_ceiling.py [TRACE ...]

Each trace (default: the three training traces) is read and replayed as ``softwalltime
evaluate --predictors v3,learned --target-under-pct v3`` does (``read_sources``,
``evaluate.columns`` at submit, ``evaluate.replay_learned`` from an empty table), with a
table that also records every job's :class:`~softwalltime.core.learned.Outcome` and run
time when it learns them. Then, with the same definitions (``evaluate.metrics``), mean
accuracy and under-estimates of:

- (a) v3 (the rule ``v3`` of every outcome: ``evaluate``'s v3);
- (b) ``learned`` as it runs (``evaluate``'s figure);
- (c) *lambda held*: the same online replay with lambda fixed (no steering), bisected over
  ``STEPS`` replays so that it makes at most v3's under-estimates: what the table, learning
  online, gives without the controller's swings;
- (d) *hindsight per fine bin*: the whole trace's table, one rule per fine bin chosen by
  the same shrunk score with one lambda, bisected alike: what these bins and rules give
  when every job is known (in-sample).

(b) to (c) is the price of steering, (c) to (d) that of learning online.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Callable, List, Tuple

from softwalltime.core import learned
from softwalltime.replay.evaluate import columns, metrics, replay_learned
from softwalltime.replay.trace_readers import read_sources

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
DEFAULT = [
    TRACES / "CERIT-SC-wagap-2013.alea.swf.gz",
    TRACES / "HPC2N-2002-2.2-cln.swf.gz",
    TRACES / "CTC-SP2-1996-3.1-cln.swf.gz",
]
STEPS = 10  # replays of the bisection of (c); (d) costs no replay, it takes HINDSIGHT_STEPS
HINDSIGHT_STEPS = 30
LOG_LOW, LOG_HIGH = math.log(1e-3), math.log(1e3)


class Recording(learned.Learner):
    """A Learner that keeps every learnt ``(outcome, runtime_s)``, in end order."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        super().__init__()
        self.seen: List[Tuple[learned.Outcome, int]] = []

    def update(self, out, runtime_s, soft_s, target):
        self.seen.append((out, runtime_s))
        super().update(out, runtime_s, soft_s, target)


class Held(learned.Learner):
    """A Learner whose lambda stays where it is set (no steering)."""

    __slots__ = ()

    def _steer(self, error, deficit):
        return None


def bisect_lambda(under_at: Callable[[float], int], allowed: int, steps: int) -> float:
    """The smallest log lambda (to ``steps`` halvings of LOG_LOW..LOG_HIGH) whose
    under-estimates ``under_at(log lambda)`` are at most ``allowed`` (LOG_HIGH if none)."""
    low, high = LOG_LOW, LOG_HIGH
    for _ in range(steps):
        mid = (low + high) / 2
        if under_at(mid) > allowed:
            low = mid
        else:
            high = mid
    return high


def hindsight(table: learned.Learner, seen, log_lam: float) -> List[int]:
    """Each seen job's soft walltime with the rule ``table`` chooses in its fine bin at
    ``exp(log_lam)`` (a job without history: its walltime, as the replay)."""
    table.lam = math.exp(log_lam)
    table._kept = (-1, -1.0, 0.0, 0)
    rule_of = {}
    softs = []
    for out, _run in seen:
        if out.coarse < 0:
            softs.append(out.softs[learned.R_WALLTIME])
            continue
        rule = rule_of.get(out.fine)
        if rule is None:
            rule = rule_of[out.fine] = table.choose(out)
        softs.append(out.softs[rule])
    return softs


def held_online(cols, log_lam: float) -> List[int]:
    """``learned``'s online replay with lambda fixed at ``exp(log_lam)``."""
    table = Held()
    table.log_lam = log_lam
    table.lam = math.exp(log_lam)
    return replay_learned(cols, None, table)[0]


def under_count(softs, runs) -> int:
    return sum(1 for s, r in zip(softs, runs) if s < r)


def line(name, m, base) -> str:
    gain = m.mean_accuracy - base.mean_accuracy
    return (
        f"  {name:<28} under {m.under_pct:5.2f} %  bad {m.bad_under_pct:5.2f} %  "
        f"acc {m.mean_accuracy:.3f} ({gain:+.3f})  MAE {m.mae_hours:6.2f} h"
    )


def ceiling(path: str) -> None:
    cols, _skipped = columns(read_sources([path]).jobs)
    table = Recording()
    online, _ = replay_learned(cols, None, table)
    runs = cols.runs
    seen_runs = [run for _out, run in table.seen]
    v3_seen = [out.softs[learned.R_V3] for out, _run in table.seen]
    allowed = under_count(v3_seen, seen_runs)
    base = metrics(v3_seen, seen_runs)
    print(f"{Path(path).name}: {len(runs)} jobs")
    print(line("(a) v3", base, base))
    print(line("(b) learned, online", metrics(online, runs), base))
    held_log = bisect_lambda(lambda lg: under_count(held_online(cols, lg), runs), allowed, STEPS)
    held = metrics(held_online(cols, held_log), runs)
    print(line(f"(c) lambda held at {math.exp(held_log):.3g}", held, base))
    hind_log = bisect_lambda(
        lambda lg: under_count(hindsight(table, table.seen, lg), seen_runs),
        allowed,
        HINDSIGHT_STEPS,
    )
    hind = metrics(hindsight(table, table.seen, hind_log), seen_runs)
    print(line(f"(d) hindsight, lambda {math.exp(hind_log):.3g}", hind, base))
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", default=[str(p) for p in DEFAULT])
    args = parser.parse_args()
    for path in args.traces:
        ceiling(path)


if __name__ == "__main__":
    main()
