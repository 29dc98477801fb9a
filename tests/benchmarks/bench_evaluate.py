"""Replay speed per predictor on real traces: ``make bench-evaluate``.

For each trace: read time, then replay time and jobs/s for each predictor alone (best of
``--repeat`` runs, trace already in memory), for all predictors together, and the metrics
time. Also prints how many ``predict()`` calls the replay made (predictions are reused
within a user's batch when neither the walltime nor the history changed).

``--whole``: instead, ``softwalltime evaluate`` as a user runs it, on every usable shared
trace as one workload (454,090 jobs with ``--start-from-submit``), once per predictor set
(v3 alone, calibrated alone, both): wall time and peak memory of each process, and the
time relative to v3 alone (issue 18: calibrated within 2 x, at most 300 MB).

``--learned``: issue 31's speed target, in this one process (the ratios of one run: the
machine is shared and its load drifts): ``softwalltime evaluate --target-under-pct v3
--json HPC2N`` (reading included, output discarded) with ``--predictors v3``, ``learned``
and ``learned --prior``, ``--repeat`` rounds interleaved; the best CPU time of each and its
ratio to v3 alone (goal: learned <= 2 x), and each round's ratios.

``--learned-parts``: where ``learned``'s replay spends its time, on HPC2N already read: CPU
seconds of ``replay_learned`` (target v3) as it is (the table's loops in C where ``make
compile`` built them: :mod:`~softwalltime.replay.learned_native`), with the choice fixed to
v3, also without learning (no table update), also without the rules (a constant outcome);
the differences
are the choice, the update and the rules, the last the loop itself. ``--part P`` runs only
that variant once, printing nothing (for ``valgrind --tool=cachegrind``, which counts
instructions steadily; subtract ``--part read``).

    python tests/benchmarks/bench_evaluate.py [TRACE ...] [--repeat N] [--whole | --learned]
    python tests/benchmarks/bench_evaluate.py --learned-parts [TRACE] [--part P]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys
import time
from pathlib import Path

from softwalltime.core import learned
from softwalltime.replay import evaluate
from softwalltime.replay.evaluate import PREDICTORS, columns, replay, replay_learned, summarize
from softwalltime.replay.learned_native import NativeLearner, kernel, new_learner
from softwalltime.replay.trace_readers import read_sources

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
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


# Every shared SWF trace with requested times (METACENTRUM has none).
WHOLE = sorted(p for p in TRACES.glob("*.swf.gz") if not p.name.startswith("METACENTRUM"))
WHOLE_SETS = ("v3", "calibrated", "v3,calibrated")


def run_measured(argv):
    """Run a command: its wall time and CPU time (s), peak resident memory (MB), its own."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    secs = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(argv)}")
    return secs, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def whole(repeat):
    """Each set ``repeat`` times, the sets interleaved (a loaded machine's load drifts):
    best wall and CPU time of each, and the ratios to v3 alone."""
    exe = str(Path(sys.executable).with_name("softwalltime"))
    print(f"softwalltime evaluate --start-from-submit on {len(WHOLE)} traces as one workload")
    runs = {predictors: [] for predictors in WHOLE_SETS}
    for _ in range(repeat):
        for predictors in WHOLE_SETS:
            argv = [exe, "evaluate", "--start-from-submit", "--predictors", predictors]
            runs[predictors].append(run_measured(argv + [str(p) for p in WHOLE]))
    base_wall = min(r[0] for r in runs[WHOLE_SETS[0]])
    base_cpu = min(r[1] for r in runs[WHOLE_SETS[0]])
    for predictors in WHOLE_SETS:
        wall = min(r[0] for r in runs[predictors])
        cpu = min(r[1] for r in runs[predictors])
        mb = max(r[2] for r in runs[predictors])
        print(
            f"  {predictors:<15} wall {wall:6.2f} s ({wall / base_wall:4.2f} x v3)"
            f"  cpu {cpu:6.2f} s ({cpu / base_cpu:4.2f} x v3)  peak {mb:5.0f} MB"
        )


LEARNED_SETS = (("v3",), ("learned",), ("learned", "--prior"))


def learned_vs_v3(trace, repeat):
    """CPU seconds of ``softwalltime evaluate`` run in this process, per set of
    :data:`LEARNED_SETS`, ``repeat`` rounds interleaved; prints best and per-round ratios."""
    from softwalltime.cli import main as cli_main

    print(f"softwalltime evaluate --target-under-pct v3 --json {Path(trace).name}: CPU s")
    runs = {s: [] for s in LEARNED_SETS}
    for _ in range(repeat):
        for s in LEARNED_SETS:
            argv = ["evaluate", "--target-under-pct", "v3", "--json", "--predictors", *s, trace]
            started = time.process_time()
            with contextlib.redirect_stdout(io.StringIO()):
                if cli_main(argv) != 0:
                    raise SystemExit(f"failed: softwalltime {' '.join(argv)}")
            runs[s].append(time.process_time() - started)
    base = min(runs[LEARNED_SETS[0]])
    for s in LEARNED_SETS:
        each = " ".join(f"{x:.2f}" for x in runs[s])
        ratios = " ".join(f"{x / v:.2f}" for x, v in zip(runs[s], runs[LEARNED_SETS[0]]))
        print(
            f"  {' '.join(s):<16} best {min(runs[s]):6.2f} s ({min(runs[s]) / base:4.2f} x v3)"
            f"   rounds {each}   round ratios {ratios}"
        )


class _FixedChoice(NativeLearner if kernel is not None else learned.Learner):  # type: ignore[misc]
    """The choice always v3 (no scores computed); the table's loops in C where built."""

    __slots__ = ()

    def choose(self, out):
        return learned.R_V3


class _NoUpdate(_FixedChoice):
    """Nor any job learnt."""

    __slots__ = ()

    def update(self, out, runtime_s, soft_s, target):
        return None


PARTS = ("read", "full", "fixed choice", "no update", "no outcome")


def learned_part(cols, part):
    """Replay ``learned`` on ``cols`` as :data:`PARTS` says (``read``: nothing)."""
    if part == "read":
        return
    learner = {"fixed choice": _FixedChoice, "no update": _NoUpdate, "no outcome": _NoUpdate}
    real = learned.outcome
    if part == "no outcome":
        constant = learned.Outcome(0, 0, (1,) * learned.N_RULES, 1, 2)
        learned.outcome = lambda *args: constant
    try:
        replay_learned(cols, None, learner.get(part, new_learner)())
    finally:
        learned.outcome = real


def learned_parts(trace, repeat, only):
    """CPU seconds of each of :data:`PARTS` (best of ``repeat``) and the differences."""
    cols, _skipped = columns(read_sources([trace]).jobs, "submit")
    if only:
        learned_part(cols, only)
        return
    secs = {}
    for part in PARTS[1:]:
        secs[part] = float("inf")
        for _ in range(repeat):
            started = time.process_time()
            learned_part(cols, part)
            secs[part] = min(secs[part], time.process_time() - started)
    print(f"replay_learned on {Path(trace).name} ({len(cols.users)} jobs), CPU s, best of {repeat}")
    print(
        f"  whole {secs['full']:.2f}: choice {secs['full'] - secs['fixed choice']:.2f},"
        f" update {secs['fixed choice'] - secs['no update']:.2f},"
        f" rules (outcome) {secs['no update'] - secs['no outcome']:.2f},"
        f" the loop {secs['no outcome']:.2f}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", default=[str(p) for p in DEFAULT])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--whole", action="store_true", help="see the module docstring")
    parser.add_argument("--learned", action="store_true", help="see the module docstring")
    parser.add_argument("--learned-parts", action="store_true", help="see the module docstring")
    parser.add_argument("--part", choices=PARTS, help="with --learned-parts: only this, once")
    args = parser.parse_args()
    if args.learned_parts:
        path = args.traces[0] if args.traces != parser.get_default("traces") else str(DEFAULT[0])
        learned_parts(path, args.repeat, args.part)
        return
    if args.whole:
        whole(args.repeat)
        return
    if args.learned:
        traces = args.traces if args.traces != parser.get_default("traces") else [str(DEFAULT[0])]
        for path in traces:
            learned_vs_v3(path, args.repeat)
        return
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
