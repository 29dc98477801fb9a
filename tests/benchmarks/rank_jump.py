"""What gaming the rank buys in queue time, and what it costs per hour jumped (issue 31).

    python tests/benchmarks/rank_jump.py [TRACE ...] [--sorts LABEL,...] [--instants N]

``rank_gaming.py`` prints the core-hours of cheap jobs that bring a big job's rank down to
1 s or 1 h. This turns a rank into hours of queue: on each trace, under the formula
``simulate --search`` recommends there (``--sorts``, one label per trace, in order; default
the four recommendations of docs/simulate.md), a gamer's job is added to the trace at
``--instants`` submit instants spread over the trace (its 20th to 90th percentiles of
submit time), each in a simulation of the trace's jobs submitted up to 30 days after it (a
job's start depends only on what was submitted before it starts; the whole past, since a
queue's state at an instant depends on it: with only the 30 days before, one of SDSC-SP2's
instants waited 1.5 h where the whole trace makes it 290 h). The gamer is a new user; the job asks
``WALL`` = 24 h and half the machine's processors (at most 128) and runs 20 h. Its soft
walltime is what v3 gives a new user (the walltime), so only the rank moves it: each rank
of ``RANKS`` (the honest one, the walltime, first) in its own simulation, as
``softwalltime simulate --policies LABEL --estimates v3`` runs it (PBS's model, the rank
refreshed every 15 min; the other jobs' ranks are ``key-mean``'s).

Printed per trace: the gamer's mean wait at each rank over the instants, the hours it
jumps (the honest rank's wait minus it; "the front" is rank 1 s), and per rank of the hook
(``key-mean``, ``key-mean-paid``, ``learned``, ``learned-paid`` with the shipped prior's
table) the fewest core-hours of cheap jobs with the job's walltime that bring the job's
rank there (``replay.rank.gaming_cost``, jobs of 1 s to 1 h, 1 processor or the job's
width, at most the 100 rows the hook reads), per hour jumped, and as a share of the job's
own core-hours (run time x width). The cheap jobs themselves are not simulated: they are
seconds to an hour each, on the gamer's own processors.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from softwalltime.core import rank as hook_rank
from softwalltime.replay import formula as fm
from softwalltime.replay import pbsched, rank
from softwalltime.replay import simulate as sim
from softwalltime.replay.sim_workload import SimWorkload

sys.path.insert(0, str(Path(__file__).parent))
from rank_gaming import learned_table  # noqa: E402  (the benchmark beside this one)

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
DEFAULT = (
    (TRACES / "KTH-SP2-1996-2.1-cln.swf.gz", "xf2.rank+len1-bf3"),
    (
        TRACES / "SDSC-SP2-1998-4.2-cln.DERIVED-predictsim-strongfilter-easysim.swf.gz",
        "xf2.rank+len1",
    ),
    (TRACES / "CTC-SP2-1996-3.1-cln.swf.gz", "xf2.rank+age72h+w8"),
    (TRACES / "HPC2N-2002-2.2-cln.swf.gz", "xf2.rank+age72h"),
)
H = 3600
DAY = 24 * H
WALL = 24 * H
RUN = 20 * H
MAX_WIDTH = 128
RANKS = (WALL, 4 * H, H, 294, 60, 1)  # 294 s: key-mean-paid's floor at half the job's cost
AFTER_S = 30 * DAY
GAMER = "rank-jump-gamer"
Ranker = Callable[..., int]


class FixedRanker(pbsched.Ranker):
    """``key-mean`` for every job, except job ``fixed`` ranked ``rank_s``."""

    def __init__(self, fixed: int, rank_s: int) -> None:
        super().__init__()
        self.fixed, self.rank_s = fixed, rank_s

    def value(self, j: int) -> int:
        return self.rank_s if j == self.fixed else super().value(j)


def window(work: SimWorkload, at: int, width: int) -> Tuple[SimWorkload, int]:
    """The jobs submitted by ``at + AFTER_S``, with the gamer's job submitted at ``at`` (after
    the others of that second); its index."""
    keep = [k for k, s in enumerate(work.submit) if s <= at + AFTER_S]
    g = sum(1 for k in keep if work.submit[k] <= at)
    cols = {
        name: [getattr(work, name)[k] for k in keep]
        for name in ("user", "submit", "run", "wall", "procs")
    }
    for name, value in (("user", GAMER), ("submit", at), ("run", RUN), ("wall", WALL)):
        cols[name].insert(g, value)
    cols["procs"].insert(g, width)
    return work._replace(**cols), g


def wait_at(work: SimWorkload, procs: int, policy: pbsched.Policy, at: int, rank_s: int) -> int:
    """The gamer's wait, in seconds, submitted at ``at`` with rank ``rank_s``."""
    win, g = window(work, at, min(MAX_WIDTH, procs // 2))
    source = sim.make_source("v3", target_under_pct=None)
    result = pbsched.simulate_pbs(win, source, procs, policy, ranker=FixedRanker(g, rank_s))
    start = result.start[g]
    if start > at + AFTER_S:  # later jobs were left out: the wait may be too short
        raise SystemExit(f"rank_jump: the gamer's job waited past the window at {at}")
    return start - at


def hook_ranks() -> List[Tuple[str, Ranker]]:
    choices = learned_table(None)
    return [
        ("key-mean", hook_rank.unpaid_mean),
        ("key-mean-paid", hook_rank.paid_key_mean),
        ("learned", rank.learned_ranker(choices)),
        ("learned-paid", rank.learned_ranker(choices, paid=True)),
    ]


def instants(work: SimWorkload, count: int) -> List[int]:
    s = work.submit
    return [s[int(len(s) * (0.2 + 0.7 * i / max(1, count - 1)))] for i in range(count)]


def table(path: str, label: str, count: int, rankers: Sequence[Tuple[str, Ranker]]) -> None:
    work = sim.read_workload(path)
    procs = work.machine_procs
    if procs is None:
        sys.exit(f"rank_jump: {path}: no MaxProcs header")
    work = sim.fit_machine(work, procs)
    policy = pbsched.parse_policy(fm.policy_text(label, procs))
    width = min(MAX_WIDTH, procs // 2)
    job_core_h = RUN * width / H
    ats = instants(work, count)
    waits: Dict[int, float] = {}
    for r in RANKS:
        waits[r] = sum(wait_at(work, procs, policy, at, r) for at in ats) / len(ats) / H
    print(
        f"{Path(path).name}, {label}: gamer's job 24 h x {width} of {procs} cpus, runs 20 h"
        f" ({job_core_h:.0f} core-h); {len(ats)} instants"
    )
    honest = waits[WALL]
    print(
        f"  {'rank':>8} {'wait h':>8} {'jumped h':>9}  " + "".join(f"{n:>26}" for n, _ in rankers)
    )
    for r in RANKS:
        jumped = honest - waits[r]
        cells = []
        for _name, ranker in rankers:
            if r == WALL:  # the honest rank: nothing to buy
                cells.append("-")
                continue
            got = rank.gaming_cost(ranker, WALL, width, [], r, widths=(1, width))
            if got is None:
                cells.append("out of reach")
            else:
                per = f"{got[0] / jumped:.3g}/h" if jumped > 0 else "no jump"
                cells.append(f"{got[0]:.4g} ({got[0] / job_core_h:.0%}) {per}")
        print(f"  {r:>8} {waits[r]:>8.2f} {jumped:>9.2f}  " + "".join(f"{c:>26}" for c in cells))


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("traces", nargs="*", default=[str(p) for p, _ in DEFAULT])
    parser.add_argument("--sorts", default=",".join(label for _, label in DEFAULT))
    parser.add_argument("--instants", type=int, default=8)
    args = parser.parse_args(argv)
    labels = args.sorts.split(",")
    if len(labels) != len(args.traces):
        sys.exit("rank_jump: give one --sorts label per trace")
    rankers = hook_ranks()
    for path, label in zip(args.traces, labels):
        table(path, label, args.instants, rankers)


if __name__ == "__main__":
    main()
