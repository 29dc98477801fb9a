"""Scheduler simulation speed per configuration: ``make bench-simulate``.

For each trace (default: HPC2N, 202,871 jobs on 240 processors) and each estimate source,
one simulation with the ``pbs`` correction (or ``--correction``) on one core, trace already
in memory: wall and CPU seconds, CPU time relative to ``users`` in the same run (the machine
is shared: compare ratios), jobs/s, scheduling passes and corrections. The first line says
whether the simulator's hot modules run compiled (``make compile``; ``make bench-simulate``
builds them) or as plain Python, as in the packages. ``--policies`` times the PBS
policy simulator (:mod:`softwalltime.replay.pbsched`, cycles every 600 s) instead.

    python tests/benchmarks/bench_simulate.py [TRACE ...] [--estimates LIST] [--correction C]
        [--policies fcfs-bf1,sjf-bf1,...]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from softwalltime.replay import native, pbsched
from softwalltime.replay import simulate as sim

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
DEFAULT = [TRACES / "HPC2N-2002-2.2-cln.swf.gz"]
CERIT_PROCS = 2176  # 20 x 80 + 48 x 12 cores (CERIT-SC-wagap-2013.alea.swf.machines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", default=[str(p) for p in DEFAULT])
    parser.add_argument("--estimates", default=",".join(sim.SOURCE_NAMES))
    parser.add_argument("--correction", default="pbs", choices=sim.CORRECTIONS)
    parser.add_argument("--policies", help="time pbsched.simulate_pbs with these policies")
    args = parser.parse_args()
    compiled = native.compiled()
    print(
        "simulator: "
        + (f"compiled (mypyc): {', '.join(compiled)}" if compiled else "plain Python")
        + " (make compile builds it; packaging/compile_simulator.py --clean removes it)"
    )
    for path in args.traces:
        started = time.perf_counter()
        work = sim.read_workload(path)
        procs = work.machine_procs or (CERIT_PROCS if "CERIT" in path else None)
        if procs is None:
            raise SystemExit(f"{path}: no MaxProcs header")
        work = sim.fit_machine(work, procs)
        print(
            f"{Path(path).name}: {len(work.submit)} jobs, {procs} processors, "
            f"read in {time.perf_counter() - started:.2f} s"
        )
        for policy in args.policies.split(",") if args.policies else [None]:
            base_cpu = None
            for name in args.estimates.split(","):
                started = time.perf_counter()
                cpu = time.process_time()
                source = sim.make_source(name)
                if policy is None:
                    result = sim.simulate(work, source, procs, args.correction)
                else:
                    p = pbsched.parse_policy(policy)
                    result = pbsched.simulate_pbs(work, source, procs, p, args.correction)
                elapsed = time.perf_counter() - started
                cpu = time.process_time() - cpu
                if name == sim.BASELINE:
                    base_cpu = cpu
                ratio = f"{cpu / base_cpu:5.1f}x" if base_cpu else "     -"
                rate = len(work.submit) / elapsed
                print(
                    f"  {policy or 'easy':<12} {name:<10} {args.correction:<8} {elapsed:7.2f} s"
                    f"  cpu {cpu:6.2f} s {ratio} users {rate:9.0f} jobs/s"
                    f"   passes {result.passes:>8}   corrections {sum(result.corrections):>10}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
