"""The share of perfect's bsld gain each sort rank keeps (issue 31), under the recommended sorts.

    python tests/benchmarks/rank_share.py [TRACE ...] [--ranks key-mean,learned,learned-paid]
        [--estimates v3] [--sorts SORT,...]

Per trace (default: KTH-SP2, SDSC-SP2, CTC-SP2, HPC2N), on PBS's model as ``softwalltime
simulate --policies`` runs it (its defaults: the pbs correction, PBS's backfill rule and
classes, scheduler_iteration 600, opt_backfill_fuzzy 60 s, the rank refreshed every
15 min): base = the users' walltimes under ``fcfs-bf1``; per sort (``--sorts``, default
``sjf.rank-bf1,xfactor.rank-bf1``; also a label of ``simulate --search``'s family, e.g.
``xf2.rank+len1-bf3``, run as the search runs it: its formula on the trace's machine,
strict ordering, that backfill depth) perfect = perfect estimates with the perfect
rank, and each rank of ``--ranks`` with v3's soft walltimes (``--estimates``: another
source's; calibrated and learned aim at v3's under-estimate rate, ``--target-under-pct
v3``). Share = (base - x) / (base - perfect), of the mean bsld. The rank ``perfect``
(the run time) with v3's soft walltimes is what no rank can beat with them: the share the
soft walltimes leave to the rank. The same figures as::

    softwalltime simulate --policies fcfs-bf1,sjf.rank-bf1,xfactor.rank-bf1 \\
        --estimates users,v3,perfect --rank-by RANK --json TRACE

Also printed per rank, from the first sort's run, the rank each job was last given (at
submit or at a refresh): of the jobs that ran <= 10 min, the share ranked above 1 h (short
jobs sorted behind long ones: the tail that decides the share in ``rank_gap.py``'s
findings), and of the jobs that ran > 1 h, the share ranked <= 10 min (long jobs sorted
ahead of short ones).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from softwalltime.replay import formula as fm
from softwalltime.replay import pbsched, policies
from softwalltime.replay import simulate as sim

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
DEFAULT = [
    TRACES / "KTH-SP2-1996-2.1-cln.swf.gz",
    TRACES / "SDSC-SP2-1998-4.2-cln.DERIVED-predictsim-strongfilter-easysim.swf.gz",
    TRACES / "CTC-SP2-1996-3.1-cln.swf.gz",
    TRACES / "HPC2N-2002-2.2-cln.swf.gz",
]
SORTS = ("sjf.rank-bf1", "xfactor.rank-bf1")
SHORT_S = 600
LONG_RANK_S = 3600


def run(
    work: sim.SimWorkload, procs: int, policy: str, source: str, ranker: Optional[pbsched.Ranker]
) -> float:
    """The mean bsld of one simulation as ``simulate --policies`` runs it."""
    parsed = pbsched.parse_policy(fm.policy_text(policy, procs))
    # calibrated and learned aim at v3's under-estimate rate, as evaluate's acceptance runs
    source_ = sim.make_source(source, target_under_pct=None)
    result = pbsched.simulate_pbs(work, source_, procs, parsed, ranker=ranker)
    return policies.figures(policy, work, result).bsld_mean


def tails(work: sim.SimWorkload, ranks: Sequence[int]) -> Tuple[float, float]:
    """Of the jobs of <= 10 min, the share ranked > 1 h; of those of > 1 h, ranked <= 10 min."""
    short = [k for k, r in enumerate(work.run) if r <= SHORT_S]
    long = [k for k, r in enumerate(work.run) if r > LONG_RANK_S]
    nan = float("nan")
    return (
        sum(ranks[k] > LONG_RANK_S for k in short) / len(short) if short else nan,
        sum(ranks[k] <= SHORT_S for k in long) / len(long) if long else nan,
    )


def make_ranker(name: str) -> pbsched.Ranker:
    return pbsched.PerfectRanker() if name == "perfect" else pbsched.make_ranker(name)


def table(path: str, ranks: Sequence[str], soft: str = "v3", sorts: Sequence[str] = SORTS) -> None:
    work = sim.read_workload(path)
    procs = work.machine_procs
    if procs is None:
        sys.exit(f"rank_share: {path}: no MaxProcs header")
    work = sim.fit_machine(work, procs)
    base = run(work, procs, "fcfs-bf1", "users", None)
    print(
        f"{Path(path).name}: {len(work.submit)} jobs; base users fcfs-bf1 bsld {base:.3f};"
        f" soft walltimes {soft}"
    )
    rows: Dict[Tuple[str, str], Tuple[float, float]] = {}
    tail: Dict[str, Tuple[float, float]] = {}
    for sort in sorts:
        perfect = run(work, procs, sort, "perfect", pbsched.PerfectRanker())
        for name in ranks:
            ranker = make_ranker(name)
            bsld = run(work, procs, sort, soft, ranker)
            gain = base - perfect
            rows[sort, name] = (bsld, (base - bsld) / gain if gain > 0 else float("nan"))
            if sort == sorts[0]:
                tail[name] = tails(work, ranker.rank)
        print(f"  {sort}: perfect bsld {perfect:.3f}", flush=True)
    head = "".join(f"{s + ' bsld/share':>28}" for s in sorts)
    print(f"  {'rank':<14}{head}  <=10m ranked >1h  >1h ranked <=10m")
    for name in ranks:
        cells = "".join(f"{rows[s, name][0]:>20.3f} {rows[s, name][1]:>6.1%}" for s in sorts)
        short, long = tail[name]
        print(f"  {name:<14}{cells}{short:>18.1%}{long:>18.1%}", flush=True)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("traces", nargs="*", default=[str(p) for p in DEFAULT])
    parser.add_argument("--ranks", default=",".join(pbsched.RANK_BY))
    parser.add_argument("--estimates", default="v3", help="the soft walltimes' source")
    parser.add_argument("--sorts", default=",".join(SORTS), help="policies or search labels")
    args = parser.parse_args(argv)
    ranks = args.ranks.split(",")
    known = (*pbsched.RANK_BY, "perfect")
    for name in ranks:
        if name not in known:
            sys.exit(f"rank_share: unknown rank {name!r} (known: {', '.join(known)})")
    for path in args.traces:
        table(path, ranks, args.estimates, args.sorts.split(","))


if __name__ == "__main__":
    main()
