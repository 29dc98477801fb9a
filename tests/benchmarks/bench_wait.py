"""Cost of the queue-wait replay: ``python tests/benchmarks/bench_wait.py``.

Reads HPC2N (202,871 jobs), then replays the paper's 40,000 targets (jobs 10,001-50,000)
through every method (log-uniform, QBETS-style, IBL, PQStar) once per estimated run time
(users' walltimes, v3 soft walltimes), and prints the time of each step. Target (issue 20):
40,000 targets in at most 60 s.

    python tests/benchmarks/bench_wait.py [TRACE] [--targets N] [--budget SECONDS]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from softwalltime.replay.traces import read_sources
from softwalltime.wait.evaluate import machine_size
from softwalltime.wait.pqstar import WaitParams, replay_waits
from softwalltime.wait.workload import build

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "traces"
DEFAULT = TRACES / "HPC2N-2002-2.2-cln.swf.gz"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(DEFAULT))
    ap.add_argument("--targets", type=int, default=40_000)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds allowed (default 60)")
    args = ap.parse_args()

    total_started = time.perf_counter()
    started = time.perf_counter()
    trace = read_sources([args.trace])
    procs = machine_size([args.trace])
    print(f"read {args.trace}: {len(trace.jobs):,} jobs in {time.perf_counter() - started:.2f} s")
    params = WaitParams(last_target=10_000 + args.targets)
    for ert in ("walltime", "soft"):
        started = time.perf_counter()
        work = build(trace, ert, procs)
        built = time.perf_counter() - started
        started = time.perf_counter()
        res = replay_waits(work.jobs, work.machine_procs, params)
        elapsed = time.perf_counter() - started
        n = len(res.targets)
        print(
            f"ERT {ert:<8}: workload {built:.2f} s; replay of {n:,} targets, 4 methods:"
            f" {elapsed:.2f} s ({n / elapsed:,.0f} targets/s, {1e3 * elapsed / n:.3f} ms each)"
        )
    total = time.perf_counter() - total_started
    verdict = "within" if total <= args.budget else "OVER"
    print(f"total (read, both ERTs): {total:.2f} s, {verdict} the {args.budget:g} s budget")
    return 0 if total <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
