"""Why a predictor captures only part of what perfect estimates gain under a policy that
sorts by the estimate (issue 17): how well each source orders jobs by their run time, what
it says of the jobs that dominate mean bounded slowdown (run <= 10 min: their bsld is their
wait / 10 min), and the mean bsld per run-time band (where the gap comes from).

    python tests/benchmarks/policy_gap.py [TRACE ...] [--policy xfactor-bf1]
        [--estimates users,v3,perfect] [--backfill-by estimate|walltime] [--classes pbs|rank|none]

One simulate_pbs run per source (the policy's cycle every 600 s; PBS's rules: backfilling
by the soft walltime and equivalence classes, unless --backfill-by walltime or --classes
none); the estimates are the sources' answers at submit in that run.
"""

from __future__ import annotations

import argparse
import random
import statistics
from pathlib import Path
from typing import List, Optional

from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
DEFAULT = [
    TRACES / "KTH-SP2-1996-2.1-cln.swf.gz",
    TRACES / "SDSC-SP2-1998-4.2-cln.DERIVED-predictsim-strongfilter-easysim.swf.gz",
    TRACES / "CTC-SP2-1996-3.1-cln.swf.gz",
    TRACES / "HPC2N-2002-2.2-cln.swf.gz",
]
SHORT_S = 600  # the bsld bound: below it, bsld = (wait + run) / 600 s
BANDS = ((0, 601), (601, 3600), (3600, 6 * 3600), (6 * 3600, None))  # [lo, hi) seconds
PAIRS = 300_000


class Recording(sim.EstimateSource):
    """Another source, with its first answer (at submit) for every job kept."""

    def __init__(self, inner: sim.EstimateSource) -> None:
        self.inner = inner
        self.name = inner.name
        self.refreshable = inner.refreshable

    def bind(self, work: sim.SimWorkload) -> None:
        self.inner.bind(work)
        self.work = work
        self.at_submit: List[Optional[int]] = [None] * len(work.submit)

    def on_submit(self, j: int, now: int) -> int:
        value = self.inner.on_submit(j, now)
        if self.at_submit[j] is None:
            self.at_submit[j] = value
        return value

    def on_start(self, j: int, now: int) -> int:
        return self.inner.on_start(j, now)

    def on_end(self, j: int, now: int) -> None:
        self.inner.on_end(j, now)


def order_agreement(est: List[int], run: List[int], rng: random.Random) -> float:
    """Share of random job pairs (different run times) that the estimates put in the order
    of their run times (equal estimates count half): 0.5 is a coin, 1 is perfect."""
    n = len(run)
    agree = 0.0
    seen = 0
    while seen < PAIRS:
        a, b = rng.randrange(n), rng.randrange(n)
        if run[a] == run[b]:
            continue
        seen += 1
        if est[a] == est[b]:
            agree += 0.5
        elif (est[a] < est[b]) == (run[a] < run[b]):
            agree += 1.0
    return agree / seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", default=[str(p) for p in DEFAULT])
    parser.add_argument("--policy", default="xfactor-bf1")
    parser.add_argument("--estimates", default="users,v3,perfect")
    parser.add_argument("--backfill-by", choices=pbsched.BACKFILL_BY, default=pbsched.ESTIMATE)
    parser.add_argument("--classes", choices=pbsched.CLASSES, default=pbsched.CLASSES_PBS)
    args = parser.parse_args()
    policy = pbsched.parse_policy(args.policy, backfill_by=args.backfill_by, classes=args.classes)
    for path in args.traces:
        work = sim.read_workload(path)
        procs = work.machine_procs
        assert procs is not None, f"{path}: no MaxProcs"
        work = sim.fit_machine(work, procs)
        n = len(work.run)
        short = [k for k in range(n) if work.run[k] <= SHORT_S]
        print(
            f"{Path(path).name}: {n} jobs, {len(short) / n:.0%} run <= 10 min; {args.policy}, "
            f"backfilling by {args.backfill_by}"
        )
        print(
            "  source     order  short: median est  est<=1h   mean bsld   by run: "
            + "".join(f"{_band(lo, hi):>10}" for lo, hi in BANDS)
        )
        for name in args.estimates.split(","):
            source = Recording(sim.make_source(name))
            result = pbsched.simulate_pbs(work, source, procs, policy)
            est = [int(e) for e in source.at_submit]  # type: ignore[arg-type]
            _waits, bslds = sim.job_outcomes(work, result)
            agree = order_agreement(est, work.run, random.Random(17))
            med = statistics.median(est[k] for k in short) / 60.0
            le1h = sum(1 for k in short if est[k] <= 3600) / len(short)
            cells = []
            for lo, hi in BANDS:
                part = [b for b, r in zip(bslds, work.run) if lo <= r and (hi is None or r < hi)]
                cells.append(f"{sum(part) / len(part):>10.2f}" if part else f"{'-':>10}")
            print(
                f"  {name:<10}{agree:>6.3f}{med:>18.1f}{le1h:>10.0%}{sum(bslds) / n:>12.2f}"
                + " " * 9
                + "".join(cells),
                flush=True,
            )


def _band(lo: int, hi: Optional[int]) -> str:
    return f"{lo // 60}-{hi // 60}m" if hi else f">{lo // 3600}h"


if __name__ == "__main__":
    main()
