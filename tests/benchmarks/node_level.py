"""What the node level costs the policy simulator (issue 46): jobs/s of the pool against the
node model on the same jobs.

The first ``--jobs`` jobs of CERIT-SC 2013 (``tests/data/traces``) that fit one node of
80 cpus, each ``select=1:ncpus=P`` (P its processors), FCFS with ``backfill_depth`` 1 and the
users' walltimes: once on the pool of the site's 2,176 cpus
(:class:`softwalltime.replay.pool.PoolModel`), once on its vnodes, 20 of 80 cpus and 48 of
12 cpus, one host each (:class:`softwalltime.replay.nodes.NodeModel`). Prints the wall time,
jobs/s and mean wait of each and the ratio; starts nothing, asserts nothing. Several
policies (``--policy fcfs-bf1,fairshare-bf1``) are run in turn, in one run, and compared
with the first: what fairshare's upkeep and order cost.

    python tests/benchmarks/node_level.py [--jobs 5000] [--policy fcfs-bf1[,fairshare-bf1]]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from softwalltime.replay import pbsched  # noqa: E402
from softwalltime.replay.nodes import NodeModel  # noqa: E402
from softwalltime.replay.sim_workload import SimWorkload, read_workload, take  # noqa: E402
from softwalltime.replay.sources import WalltimeSource  # noqa: E402
from softwalltime.site_file import Queue, Site, Vnode  # noqa: E402

TRACE = REPO / "tests" / "data" / "traces" / "CERIT-SC-wagap-2013.alea.swf.gz"
NODES = [(20, 80), (48, 12)]  # (count, cpus): the trace's .machines file
MAX_JOBS = 200_000


def cerit_site() -> Site:
    vnodes = [
        Vnode(f"n{kind}_{k}", f"n{kind}_{k}", cpus)
        for kind, (count, cpus) in enumerate(NODES)
        for k in range(count)
    ]
    return Site("cerit-sc", tuple(vnodes), (Queue("workq"),), "workq")


def _run(work: SimWorkload, site: Site, policy: pbsched.Policy, what: str) -> dict[str, float]:
    print(f"{what}, {policy.name}, users' walltimes")
    times = {}
    for name in ("pool", "nodes"):
        model = NodeModel(site, work) if name == "nodes" else None
        t0 = time.perf_counter()
        result = pbsched.simulate_pbs(work, WalltimeSource(), site.ncpus, policy, model=model)
        times[name] = time.perf_counter() - t0
        waits = [s - a for s, a in zip(result.start, work.submit)]
        print(
            f"{name:6s} {times[name]:8.2f} s  {len(work.submit) / times[name]:10.0f} jobs/s"
            f"  mean wait {sum(waits) / len(waits) / 3600:8.2f} h  cycles {result.passes}"
        )
    print(f"node level / pool: {times['nodes'] / times['pool']:.1f}x the time")
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=5000, help="jobs replayed (default 5000)")
    ap.add_argument(
        "--policy", default="fcfs-bf1", help="the policies, comma-separated (default fcfs-bf1)"
    )
    args = ap.parse_args(argv)
    if not 1 <= args.jobs <= MAX_JOBS:
        ap.error(f"--jobs must be 1..{MAX_JOBS}")
    work = read_workload(str(TRACE))
    widest = max(cpus for _, cpus in NODES)
    keep = [j for j, p in enumerate(work.procs) if p <= widest][: args.jobs]
    work = take(work, keep)
    site = cerit_site()
    first: dict[str, float] = {}
    for text in args.policy.split(","):
        times = _run(work, site, pbsched.parse_policy(text), f"{len(keep)} jobs of {TRACE.name}")
        first = first or times
        if times is not first:
            print(f"{text} / {args.policy.split(',')[0]}: pool {times['pool'] / first['pool']:.1f}x"
                  f", nodes {times['nodes'] / first['nodes']:.1f}x the time")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
