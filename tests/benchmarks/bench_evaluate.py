"""Replay speed per predictor on real traces: ``make bench-evaluate``.

For each trace: read time, then replay time and jobs/s for each predictor alone (best of
``--repeat`` runs, trace already in memory), for all predictors together, and the metrics
time. Also prints how many ``predict()`` calls the replay made (predictions are reused
within a user's batch when neither the walltime nor the history changed).

    python benchmarks/bench_evaluate.py [TRACE ...] [--repeat N]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from softwalltime.replay import evaluate
from softwalltime.replay.evaluate import PREDICTORS, replay, summarize
from softwalltime.replay.traces import read_sources

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "traces"
DEFAULT = [
    TRACES / "HPC2N-2002-2.2-cln.swf.gz",
    TRACES / "CERIT-SC-wagap-2013.alea.swf.gz",
]


def best_of(repeat, fn):
    best = float("inf")
    result = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def count_predict_calls(jobs, predictors):
    real = evaluate.predict
    calls = 0

    def counting(*args, **kwargs):
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    evaluate.predict = counting
    try:
        replay(jobs, predictors)
    finally:
        evaluate.predict = real
    return calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", default=[str(p) for p in DEFAULT])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for path in args.traces:
        read_s, trace = best_of(1, lambda p=path: read_sources([p]))
        n = len(trace.jobs)
        print(f"{Path(path).name}: {n} jobs, read in {read_s:.2f} s ({n / read_s:,.0f} lines/s)")
        for name in PREDICTORS:
            secs, result = best_of(args.repeat, lambda t=trace, p=name: replay(t.jobs, (p,)))
            calls = count_predict_calls(trace.jobs, (name,))
            print(
                f"  replay {name:<10} {secs:6.3f} s  {len(result.runtime_s) / secs:>10,.0f} jobs/s"
                f"  ({calls} predict() calls for {len(result.runtime_s)} jobs)"
            )
        secs, result = best_of(args.repeat, lambda t=trace: replay(t.jobs, PREDICTORS))
        print(
            f"  replay v1,v2,v3   {secs:6.3f} s  {len(result.runtime_s) / secs:>10,.0f} jobs/s"
            f"  ({3 * len(result.runtime_s) / secs:,.0f} predictions/s)"
        )
        secs, _ = best_of(args.repeat, lambda r=result: summarize(r))
        print(f"  metrics (4 x all + by class) {secs:.3f} s")


if __name__ == "__main__":
    main()
