"""What ``learned``'s shipped prior is worth on a trace it was not built from.

    python tests/benchmarks/learned_prior.py [--start-from-submit] [TRACE ...]

The shipped prior (``softwalltime/data/learned_prior.json``) is the table of the three
training traces, so ``evaluate --prior`` on one of them is in-sample. Here each trace is
replayed as ``softwalltime evaluate --predictors v3,learned --target-under-pct v3 [--prior]``
replays it (``read_sources``, ``evaluate.columns`` at submit, ``evaluate.replay_learned``):

- without a prior;
- from the prior of the training traces *other than it* (leave one out: a training trace
  is scored on a prior that never saw it), built as ``python -m softwalltime.replay.prior
  --learned`` builds the shipped one, and equal to it for a trace that is not one of them.

Per trace and start: under-estimate %, bad under %, mean accuracy (gain over v3) and MAE,
against v3's on the same jobs. Default: the five bundled traces. ``--start-from-submit``
reads jobs without a wait as starting at submit (the LLNL traces, as ``evaluate`` does).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from softwalltime.core import learned
from softwalltime.replay.evaluate import Metrics, ReplayColumns, columns, metrics, replay_learned
from softwalltime.replay.learned_native import new_learner
from softwalltime.replay.prior import build_learned_prior, learned_prior_table
from softwalltime.replay.trace_readers import read_sources

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
TRAINING = [
    TRACES / "CERIT-SC-wagap-2013.alea.swf.gz",
    TRACES / "HPC2N-2002-2.2-cln.swf.gz",
    TRACES / "CTC-SP2-1996-3.1-cln.swf.gz",
]
VALIDATION = [
    TRACES / "KTH-SP2-1996-2.1-cln.swf.gz",
    TRACES / "SDSC-SP2-1998-4.2-cln.DERIVED-predictsim-strongfilter-easysim.swf.gz",
]


def read(path: str, start_from_submit: bool = False) -> ReplayColumns:
    """The trace's evaluated jobs, as ``evaluate`` reads them."""
    return columns(read_sources([path], start_from_submit=start_from_submit).jobs)[0]


def prior_without(
    trace: str, training: Dict[str, ReplayColumns], built: Optional[Dict[Any, Any]] = None
) -> learned.Learner:
    """A table from the prior of the training traces other than ``trace`` (by path);
    ``built`` keeps each prior built, by its traces (every outside trace has the same)."""
    names = tuple(name for name in training if name != trace)
    built = {} if built is None else built
    if names not in built:
        built[names] = build_learned_prior(
            [training[n] for n in names], [Path(n).name for n in names]
        )
    return learned_prior_table(built[names])


def line(name: str, softs: Sequence[int], cols: ReplayColumns, v3: Optional[Metrics]) -> str:
    m = metrics(softs, cols.runs)
    gain = "" if v3 is None else f" ({m.mean_accuracy - v3.mean_accuracy:+.3f})"
    ratio = "" if v3 is None else f" ({m.mae_hours / v3.mae_hours:.2f} x)"
    return (
        f"  {name:<24} under {m.under_pct:5.2f} %  bad {m.bad_under_pct:5.2f} %  "
        f"acc {m.mean_accuracy:.3f}{gain}  MAE {m.mae_hours:6.2f} h{ratio}"
    )


class _AlwaysV3(type(new_learner())):  # type: ignore[misc]
    """A table that chooses v3 for every job: ``evaluate``'s v3 (the rule ``v3`` of every
    outcome; the walltime without history)."""

    __slots__ = ()

    def choose(self, out: learned.Outcome) -> int:
        return learned.R_V3


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", default=[str(p) for p in TRAINING + VALIDATION])
    parser.add_argument("--start-from-submit", action="store_true")
    args = parser.parse_args(argv)
    training = {str(p.resolve()): read(str(p)) for p in TRAINING}
    built: Dict[Any, Any] = {}
    for given in args.traces:
        path = str(Path(given).resolve())  # a training trace by any path is left out
        cols = training.get(path) or read(path, args.start_from_submit)
        v3, _table = replay_learned(cols, None, _AlwaysV3())
        base = metrics(v3, cols.runs)
        kind = "training, prior left out" if path in training else "not in the prior"
        print(f"{Path(path).name}: {len(cols.runs)} jobs ({kind})")
        print(line("v3", v3, cols, None))
        print(line("learned, no prior", replay_learned(cols, None)[0], cols, base))
        start = prior_without(path, training, built)
        print(line("learned, prior", replay_learned(cols, None, start)[0], cols, base))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
