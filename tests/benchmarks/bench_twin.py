"""Twin replay on the real OpenPBS server: a segment of a real trace as ``sleep`` jobs,
against ``simulate_pbs`` of the same jobs (issue 29).

Run as root with OpenPBS up (``../shared/openpbs/up.sh``): ``make bench-twin`` (KTH-SP2),
or ``python tests/benchmarks/bench_twin.py --trace CTC``. It takes the machine-wide PBS
lock, picks ``--jobs`` consecutive jobs where they wait (of ``--candidates`` windows spread
over the trace, the largest simulated mean wait under fcfs-bf1 with the users' walltimes),
sets the node's ``resources_available.ncpus`` to the trace's MaxProcs and compresses time
by ``--factor`` (default: the segment's simulated makespan over ``--minutes``), so that
each configuration takes about that long. For each estimate source (``users``: no soft
walltime; ``perfect``: the scaled run time, set by the manager while the job is held) and
each policy, it replays the segment (:mod:`twin`), simulates it with the real release
times and prints mean wait and bounded slowdown real against simulated, the share of job
pairs started in the simulated order (pairs more than ``--tolerance`` apart), the
median and p95 of |real - simulated start| and the first divergent jobs, then the band of
``--draws`` simulations under the run times' whole-second uncertainty (:mod:`twin_band`).
``--from-dump JSON...`` compares replays saved with ``--dump`` again, without a server. The node,
sched_config, the formula, backfill_depth, scheduling, eligible_time_enable,
scheduler_iteration and job history are restored and the jobs purged, whatever happens.
Exits non-zero if PBS fails.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests" / "pbs"), str(REPO / "tests")]

import pbsctl  # noqa: E402
import twin  # noqa: E402
import twin_band  # noqa: E402

from softwalltime.replay import pbsched  # noqa: E402
from softwalltime.replay import simulate as sim  # noqa: E402

TRACES = REPO.parent / "shared" / "data" / "traces"
TRACE_FILES = {
    "KTH": "KTH-SP2-1996-2.1-cln.swf.gz",
    "CTC": "CTC-SP2-1996-3.1-cln.swf.gz",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace", default="KTH", help="KTH, CTC or an SWF path (default KTH)")
    p.add_argument("--jobs", type=int, default=300, help="jobs in the segment (300)")
    p.add_argument("--candidates", type=int, default=16, help="windows to choose from (16)")
    p.add_argument("--minutes", type=float, default=4.0, help="target per configuration (4)")
    p.add_argument("--factor", type=float, help="time compression (default: from --minutes)")
    p.add_argument("--margin", type=int, default=2, help="walltime over the run, s (2)")
    p.add_argument("--tolerance", type=int, default=2, help="order tolerance, s (2)")
    p.add_argument("--sources", default="users,perfect", help="users,perfect")
    p.add_argument(
        "--policies",
        default="fcfs-bf1,sjf-bf1",
        help="policies of simulate --policies or formula labels of --search, e.g."
        " fcfs-bf1,xf2+age72h+len1 (default fcfs-bf1,sjf-bf1)",
    )
    p.add_argument(
        "--fuzzy",
        type=pbsched.parse_fuzzy,
        help="the server's opt_backfill_fuzzy, as simulated: off, low, medium, high or seconds"
        " (default: PBS's low, 60 s, compressed by the factor: off at factors over 60)",
    )
    p.add_argument(
        "--draws",
        type=int,
        default=twin_band.DRAWS,
        help="simulations of the band under the run times' whole-second uncertainty (100; 0: none)",
    )
    p.add_argument(
        "--show-jobs",
        type=lambda text: [int(k) for k in text.split(",")],
        default=[],
        metavar="K,...",
        help="print these jobs' (#k) starts in the band's draws",
    )
    p.add_argument("--dump", type=Path, help="write each replay (jobs, times) as JSON here")
    p.add_argument(
        "--from-dump",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="no server: compare again the replays --dump wrote (needs --trace of the replay)",
    )
    return p.parse_args(argv)


def load(args: argparse.Namespace) -> tuple[list[twin.TwinJob], int, float, str]:
    path = str(TRACES / TRACE_FILES[args.trace]) if args.trace in TRACE_FILES else args.trace
    work = sim.read_workload(path)
    procs = work.machine_procs
    if procs is None:
        raise SystemExit(f"{path}: no MaxProcs header")
    work = sim.fit_machine(work, procs)
    fcfs = pbsched.parse_policy("fcfs-bf1")
    first, wait, span = twin.choose_segment(work, procs, args.jobs, args.candidates, fcfs)
    factor = args.factor or math.ceil(span / (60 * args.minutes))
    jobs = twin.scale(work, first, args.jobs, factor, args.margin)
    about = (
        f"{Path(path).name}: jobs {first}..{first + len(jobs) - 1} of {len(work.submit)}, "
        f"MaxProcs {procs}, simulated mean wait {wait / 3600:.2f} h, makespan {span / 3600:.1f} h;"
        f" factor {factor:g} (scheduler_iteration {twin.iteration_for(factor)} s, bsld bound"
        f" {600 / factor:.2f} s); runs of 1 s: {sum(j.run == 1 for j in jobs)}"
    )
    return jobs, procs, factor, about


def one(
    jobs: list[twin.TwinJob],
    procs: int,
    factor: float,
    source: str,
    name: str,
    args: argparse.Namespace,
) -> None:
    policy = twin.policy(name, procs, factor, args.fuzzy)
    started = time.monotonic()
    run = twin.replay(jobs, source, procs, policy)
    try:
        took = time.monotonic() - started
        over = sum(r - j.run for r, j in zip(run.runs, jobs)) / len(jobs)
        print(f"\n## {name}, {source} ({took:.0f} s on the server; jobs ran {over:.2f} s longer"
              " than their sleep on average, obittime - stime; opt_backfill_fuzzy"
              f" {policy.backfill_fuzzy} s)")  # fmt: skip
        soft = twin.soft_walltimes(jobs, source)
        compare(jobs, run, soft, procs, policy, factor, args)
        fig = twin.start_times(
            jobs, run.submit, run.real, run.runs, soft, procs, policy, factor, run.epoch
        )
        print(
            "### start times predicted at each release from the server's state then, against"
            " the real starts (1 min, 10 min, 1 h and the 10-min wait, compressed)"
        )
        print(twin.start_report(fig), flush=True)
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            data = {
                "factor": factor,
                "fuzzy": policy.backfill_fuzzy,
                "jobs": [j._asdict() for j in jobs],
                **run._asdict(),
            }
            (args.dump / f"{name}.{source}.json").write_text(json.dumps(data))
    finally:
        twin.purge_all(run.ids)


def compare(
    jobs: list[twin.TwinJob],
    run: twin.Replay,
    soft: list[int | None],
    procs: int,
    policy: pbsched.Policy,
    factor: float,
    args: argparse.Namespace,
) -> None:
    """The replay against one simulation with the planned run times, one with the measured
    ones, and the band of ``args.draws`` simulations (:mod:`twin_band`)."""
    for title, simulated in (("planned", run.simulated), ("measured", run.measured)):
        c = twin.compare(jobs, run.submit, run.real, simulated, args.tolerance, 600 / factor)
        print(f"### against simulate_pbs with the {title} run times")
        print(twin.report(c, jobs, run.submit, run.real, simulated, run.ids), flush=True)
    if args.draws > 0:
        b = twin_band.band(
            jobs, run.submit, run.real, run.runs, soft, procs, policy, run.epoch, 600 / factor,
            args.draws,
        )  # fmt: skip
        print("### against the band of simulations under the run times' whole-second uncertainty")
        print(twin_band.report(b, jobs, run.submit, run.ids), flush=True)
        for k in args.show_jobs:
            if 0 <= k < len(jobs):
                print(twin_band.job_line(b, k, run.real))


def from_dump(path: Path, procs: int, args: argparse.Namespace) -> None:
    """Compare again a replay that --dump wrote (policy and source from its name)."""
    data = json.loads(path.read_text())
    name, source = path.name.removesuffix(".json").rsplit(".", 1)
    jobs = [twin.TwinJob(**j) for j in data["jobs"]]
    fields = {f: data[f] for f in twin.Replay._fields}
    run = twin.Replay(**fields)
    factor = data["factor"]
    policy = twin.policy(name, procs, factor, data["fuzzy"])
    print(f"\n## {name}, {source} (from {path}; factor {factor:g})")
    compare(jobs, run, twin.soft_walltimes(jobs, source), procs, policy, factor, args)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    print("command: " + " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]))
    if args.from_dump:
        _, procs, _, _ = load(args)
        for path in args.from_dump:
            from_dump(path, procs, args)
        return 0
    why = pbsctl.available()
    if why:
        print(f"bench-twin: {why}", file=sys.stderr)
        return 2
    jobs, procs, factor, about = load(args)
    print(about, flush=True)
    try:
        with pbsctl.exclusive(), twin.server(procs):
            for name in args.policies.split(","):
                for source in args.sources.split(","):
                    one(jobs, procs, factor, source, name, args)
    except (pbsctl.PbsError, subprocess.TimeoutExpired) as err:
        print(f"bench-twin: PBS failed: {err}", file=sys.stderr)
        return 1
    print(f"\ntook {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
