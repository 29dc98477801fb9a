"""Cost of the queue-wait replay: ``python tests/benchmarks/bench_wait.py``.

Reads HPC2N (202,871 jobs), then replays the paper's 40,000 targets (jobs 10,001-50,000)
through every method (log-uniform, QBETS-style, IBL, PQStar) once per estimated run time
(users' walltimes, v3 soft walltimes), and prints the time of each step. Target (issue 20):
40,000 targets in at most 60 s.

Then one live prediction (``softwalltime wait JOBID``'s: :func:`.live.predict_live`) with
--live-jobs (5,000) queued and running jobs and the 10,000 most recent finished jobs, at
the submit time of the trace's 60,001st job: the running ones fill the machine (sizes
and walltimes of the jobs submitted next), the rest queued over the day before. Target:
at most 200 ms of CPU (the median of 5 predictions, each of a different queued job;
the wall time is printed too). Then the start time of 5 queued jobs, from the head of
that queue to its tail (``wait JOBID``'s P50/P90 and PBS's method: 10 forward runs of the
fcfs-bf1 scheduler). Target (issue 35): at most 1 s of CPU (the median).

    python tests/benchmarks/bench_wait.py [TRACE] [--targets N] [--budget SECONDS]
        [--live-jobs N] [--live-budget-ms MS]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import List, Sequence

from softwalltime.replay import pbsched
from softwalltime.replay.trace import Trace
from softwalltime.replay.trace_readers import read_sources
from softwalltime.wait.evaluate import machine_size
from softwalltime.wait.live import DEFAULT_FINISHED_KEPT, LiveJob, predict_live
from softwalltime.wait.livestart import predict_start
from softwalltime.wait.pqstar import WaitParams, replay_waits
from softwalltime.wait.workload import WaitJob, build

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
DEFAULT = TRACES / "HPC2N-2002-2.2-cln.swf.gz"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(DEFAULT))
    ap.add_argument("--targets", type=int, default=40_000)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds allowed (default 60)")
    ap.add_argument("--live-jobs", type=int, default=5_000, help="queued and running (5000)")
    ap.add_argument("--live-budget-ms", type=float, default=200.0, help="(default 200)")
    ap.add_argument("--start-budget-ms", type=float, default=1000.0, help="(default 1000)")
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
    live_ms = live_prediction(work.jobs, work.machine_procs, args.live_jobs)
    live_verdict = "within" if live_ms <= args.live_budget_ms else "OVER"
    print(f"live prediction: {live_verdict} the {args.live_budget_ms:g} ms budget")
    start_ms = start_prediction(trace, work.jobs, work.machine_procs, args.live_jobs)
    start_verdict = "within" if start_ms <= args.start_budget_ms else "OVER"
    print(f"start time: {start_verdict} the {args.start_budget_ms:g} ms budget")
    within = live_ms <= args.live_budget_ms and start_ms <= args.start_budget_ms
    return 0 if total <= args.budget and within else 1


def live_jobs_at(jobs: Sequence[WaitJob], cut: int, machine: int, n: int) -> List[LiveJob]:
    """``n`` live jobs at the submit time of ``jobs[cut]``: running ones filling the
    machine, then queued ones submitted over the day before (sizes from the jobs after)."""
    rng = random.Random(20)
    now = jobs[cut].submit_s
    used = 0
    live = []
    for k, j in enumerate(jobs[cut : cut + n]):
        running = used + j.procs <= machine
        used += j.procs if running else 0
        submit = now - rng.randrange(1, 86_400)
        start = min(now, submit + rng.randrange(0, 3_600)) if running else None
        live.append(
            LiveJob(f"{k}.bench", not running, j.user, "", submit, start, j.procs, j.ert_s, None)
        )
    return live


def live_prediction(jobs: Sequence[WaitJob], machine: int, n: int) -> float:
    """Median ms of one live prediction (see the module docstring); prints the figures."""
    cut = min(60_000, len(jobs) - n - 1)
    now = jobs[cut].submit_s
    finished = [j for j in jobs[:cut] if j.end_s <= now][-DEFAULT_FINISHED_KEPT:]
    live = live_jobs_at(jobs, cut, machine, n)
    queued = [j for j in live if j.queued]
    times = []
    cpu = []
    rules = []
    for target in queued[:5]:
        job = WaitJob(now, 0, 0, target.ncpus, target.walltime_s, target.user)
        started, cpu_started = time.perf_counter(), time.process_time()
        answer = predict_live(finished, live, job, machine, WaitParams(), leave_out=target.job_id)
        cpu.append(1e3 * (time.process_time() - cpu_started))
        times.append(1e3 * (time.perf_counter() - started))
        rules.append(answer.rule)
    median = statistics.median(cpu)
    print(
        f"live prediction: {len(live) - len(queued):,} running, {len(queued):,} queued,"
        f" {len(finished):,} finished jobs: median {median:.0f} ms of CPU"
        f" (min {min(cpu):.0f}, max {max(cpu):.0f}), {statistics.median(times):.0f} ms wall"
        f" (on a shared machine the wall time also counts other processes); rules"
        f" {', '.join(rules)}"
    )
    return median


def start_prediction(trace: Trace, jobs: Sequence[WaitJob], machine: int, n: int) -> float:
    """Median ms of CPU of one start-time prediction (``wait JOBID``'s
    :func:`.livestart.predict_start`: PBS's method and 9 forward runs) with the live jobs
    of :func:`live_prediction`, for 5 queued jobs spread over the queue; prints figures."""
    cut = min(60_000, len(jobs) - n - 1)
    now = jobs[cut].submit_s
    finished = [j for j in trace.jobs if j.end_s is not None and j.end_s <= now]
    finished = finished[-DEFAULT_FINISHED_KEPT:]
    live = live_jobs_at(jobs, cut, machine, n)
    queued = sorted((j for j in live if j.queued), key=lambda j: (j.submit_s, j.job_id))
    picks = [queued[k * (len(queued) - 1) // 4] for k in range(5)]
    cpu, waits = [], []
    policy = pbsched.parse_policy("fcfs-bf1")
    for target in picks:
        cpu_started = time.process_time()
        answer = predict_start(live, finished, target, now, machine, policy)
        cpu.append(1e3 * (time.process_time() - cpu_started))
        waits.append(f"{(answer.p50 - now) / 3600:.1f} h")
    median = statistics.median(cpu)
    print(
        f"start time: {len(live) - len(queued):,} running, {len(queued):,} queued,"
        f" {len(finished):,} finished jobs; 5 targets from the head to the tail of the queue:"
        f" median {median:.0f} ms of CPU (min {min(cpu):.0f}, max {max(cpu):.0f}; P50 waits"
        f" {', '.join(waits)})"
    )
    return median


if __name__ == "__main__":
    sys.exit(main())
