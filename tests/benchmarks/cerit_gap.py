"""What CERIT-SC's real waits were for (issue 46): the measurements behind docs/simulate.md's
"The site model against the pool".

    python tests/benchmarks/cerit_gap.py [--down-hours H] [TRACE]

Read from the trace's real starts and ends (fields 2-4), users (12), memory asked (10, bytes
for the whole job) and Alea columns (19: the node ids each job ran on, one per cpu; 20: its
queue; 21: its node spec), with each node's cpus and memory from ``.machines`` (a node on
which a job used more than the smallest cluster's cpus is of the larger cluster, as
:func:`softwalltime.replay.alea.cerit_site` says). For each queue of at least 1,000 jobs:

- *Caps*: the queue's pool (the cpus of the nodes its jobs ran on), the most jobs and cpus it
  ran at once, and, while at least one of its jobs waited (sampled every 10 min), the median
  of its running cpus and the share of that time it ran within 10 % of its most; the same
  share for each user's waiting time in the queue against that user's most (all users
  pooled). A configured cap shows as a flat top: much of the waiting time at the most.
- *Fits*: the share of its jobs' waiting hours (each wait sampled every 30 min) during which
  the job's chunks (``N:ppn=M``, each on its own node of the pool, of its ``cl_`` cluster
  if it names one; its memory spread over its cpus) fitted on the cpus and memory the
  recorded jobs left free in its queue's pool. ``--down-hours H``: a node that ran nothing
  for H hours or more counts as full then (an outage the trace shows).
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, NamedTuple, Sequence, Tuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from softwalltime.replay import alea  # noqa: E402

TRACE = REPO / "tests" / "data" / "traces" / "CERIT-SC-wagap-2013.alea.swf.gz"
MAX_JOBS = 200_000
MIN_JOBS = 1000
SAMPLE_S, WAIT_STEP_S = 600, 1800


class Job(NamedTuple):
    submit: int
    start: int
    end: int
    user: str
    queue: str
    spec: str
    mem: int  # bytes, the whole job
    nodes: Dict[str, int]  # cpus per node id


def read(path: str) -> List[Job]:
    jobs = []
    with gzip.open(path, "rt") as fh:
        for line in fh:
            w = line.split()
            if not w or w[0].startswith(";") or len(w) < 21:
                continue
            submit, wait, run = int(w[1]), int(w[2]), int(w[3])
            if wait >= 0 and run >= 0:
                nodes = dict(alea.node_ids(w[18]))
                start = submit + wait
                jobs.append(
                    Job(submit, start, start + run, w[11], w[19], w[20], max(0, int(w[9])), nodes)
                )
            if len(jobs) > MAX_JOBS:
                raise SystemExit(f"{path}: more than {MAX_JOBS} jobs")
    return jobs


class Profile:
    """A step function of time from (time, change) events; changes at one time apply
    ends first."""

    def __init__(self, events: List[Tuple[int, int]]) -> None:
        events.sort()
        self.times: List[int] = []
        self.levels: List[int] = []
        level = 0
        for t, d in events:
            level += d
            self.times.append(t)
            self.levels.append(level)

    def at(self, t: int) -> int:
        i = bisect.bisect_right(self.times, t) - 1
        return self.levels[i] if i >= 0 else 0


def running(jobs: Sequence[Job], cpus: bool = True) -> Profile:
    ev: List[Tuple[int, int]] = []
    for j in jobs:
        n = sum(j.nodes.values()) if cpus else 1
        if j.end > j.start:
            ev += [(j.start, n), (j.end, -n)]
    return Profile(ev)


def waiting(jobs: Sequence[Job]) -> Profile:
    ev: List[Tuple[int, int]] = []
    for j in jobs:
        if j.start > j.submit:
            ev += [(j.submit, 1), (j.start, -1)]
    return Profile(ev)


def near_top_share(jobs: Sequence[Job], span: range) -> Tuple[float, List[int]]:
    """The share of ``jobs``' waiting samples at >= 90 % of their most running cpus, and
    the running cpus at each waiting sample."""
    run, wait = running(jobs), waiting(jobs)
    most = max(run.levels, default=0)
    levels = [run.at(t) for t in span if wait.at(t) > 0]
    near = sum(1 for x in levels if most and x >= 0.9 * most)
    return near / max(1, len(levels)), levels


def caps(jobs: Sequence[Job], pool_cpus: Dict[str, int]) -> None:
    span = range(min(j.submit for j in jobs), max(j.end for j in jobs), SAMPLE_S)
    print("caps: queue, pool cpus, most jobs/cpus at once; while its jobs waited: median")
    print("running cpus, share within 10 % of its most; the same share per user")
    for q, js in by_queue(jobs):
        spans = [alea.Span(j.start, j.end, sum(j.nodes.values()), j.user) for j in js]
        most_jobs, most_cpus = alea.most_at_once(spans)
        share, levels = near_top_share(js, span)
        users: Dict[str, List[Job]] = defaultdict(list)
        for j in js:
            users[j.user].append(j)
        near = total = 0.0
        for mine in users.values():
            s, lv = near_top_share(mine, span)
            near, total = near + s * len(lv), total + len(lv)
        print(f"  {q:<6} pool {pool_cpus[q]:>5}  most {most_jobs:>4} jobs {most_cpus:>5} cpus"
              f"  waiting: median {statistics.median(levels or [0]):>6.0f} cpus,"
              f" near most {100 * share:4.1f} %, users near theirs"
              f" {100 * near / max(1, total):4.1f} %")  # fmt: skip


def by_queue(jobs: Sequence[Job]) -> List[Tuple[str, List[Job]]]:
    out: Dict[str, List[Job]] = defaultdict(list)
    for j in jobs:
        out[j.queue].append(j)
    return sorted(((q, v) for q, v in out.items() if len(v) >= MIN_JOBS), key=lambda x: -len(x[1]))


def chunks(spec: str) -> List[Tuple[int, int, str]]:
    """(count, ppn, cluster or "") of each ``+`` part of a node spec."""
    out = []
    for part in spec.partition("#")[0].split("+"):
        words = part.split(":")
        count = int(words[0]) if words[0].isdigit() else 1
        ppn = next((int(w[4:]) for w in words if w.startswith("ppn=") and w[4:].isdigit()), 1)
        cl = next((w[3:] for w in words if w.startswith("cl_")), "")
        out.append((count, ppn, cl))
    return out


class Nodes:
    """Each node's cluster, cpus, memory, and the cpus and memory the recorded jobs used."""

    def __init__(self, jobs: Sequence[Job], machines: Sequence[alea.Machine], down_s: int):
        by_size = sorted(machines, key=lambda m: m.cpus)
        most: Dict[str, int] = defaultdict(int)
        cpu_ev: Dict[str, List[Tuple[int, int]]] = defaultdict(list)
        mem_ev: Dict[str, List[Tuple[int, int]]] = defaultdict(list)
        for j in jobs:
            for n, c in j.nodes.items():
                most[n] = max(most[n], c)
                if j.end > j.start:
                    m = j.mem * c // max(1, sum(j.nodes.values()))
                    cpu_ev[n] += [(j.start, c), (j.end, -c)]
                    mem_ev[n] += [(j.start, m), (j.end, -m)]
        self.kind = {
            n: next((m for m in by_size if m.cpus >= c), by_size[-1]) for n, c in most.items()
        }
        self.cpus = {n: Profile(cpu_ev[n]) for n in most}
        self.mem = {n: Profile(mem_ev[n]) for n in most}
        first, last = min(j.submit for j in jobs), max(j.end for j in jobs)
        self.down = {n: idle(self.cpus[n], first, last, down_s) for n in most} if down_s else {}

    def free(self, n: str, t: int) -> Tuple[int, int]:
        m = self.kind[n]
        if any(a <= t < b for a, b in self.down.get(n, ())):
            return 0, 0
        return m.cpus - self.cpus[n].at(t), m.mem_kb * 1024 - self.mem[n].at(t)


def idle(p: Profile, first: int, last: int, least_s: int) -> List[Tuple[int, int]]:
    """The stretches of at least ``least_s`` in which the profile is 0."""
    points = [(first, 0)] + list(zip(p.times, p.levels)) + [(last, 0)]
    return [(a, b) for (a, la), (b, _) in zip(points, points[1:]) if la == 0 and b - a >= least_s]


def fits(job: Job, pool: Sequence[str], nodes: Nodes, t: int) -> bool:
    per_cpu = job.mem / max(1, sum(job.nodes.values()))
    free = [(n, *nodes.free(n, t)) for n in pool]
    for count, ppn, cl in sorted(chunks(job.spec), key=lambda c: -c[1]):
        for _ in range(count):
            k = next((i for i, (n, c, m) in enumerate(free)
                      if c >= ppn and m >= per_cpu * ppn and cl in ("", nodes.kind[n].name)),
                     None)  # fmt: skip
            if k is None:
                return False
            free.pop(k)
    return True


def fitted(jobs: Sequence[Job], pools: Dict[str, List[str]], nodes: Nodes) -> None:
    print("fits: queue, mean real wait (h, sampled), of it the hours the job fitted, share")
    total = fit = 0
    for q, js in by_queue(jobs):
        waited = got = 0
        for j in js:
            for t in range(j.submit + WAIT_STEP_S, j.start, WAIT_STEP_S):
                waited += 1
                got += fits(j, pools[q], nodes, t)
        total, fit = total + waited, fit + got
        hours = WAIT_STEP_S / 3600 / len(js)
        print(f"  {q:<6} {waited * hours:6.2f} h {got * hours:6.2f} h"
              f" {100 * got / max(1, waited):4.0f} %")  # fmt: skip
    print(f"  these queues: {100 * fit / max(1, total):.0f} % of the waiting hours fitted")


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", nargs="?", default=str(TRACE))
    ap.add_argument("--down-hours", type=int, default=0, help="idle this long = down (0: never)")
    args = ap.parse_args(argv)
    if not 0 <= args.down_hours <= 24 * 365:
        ap.error("--down-hours must be 0..8760")
    jobs = read(args.trace)
    machines = alea.parse_machines(Path(args.trace.replace(".swf.gz", ".swf.machines")).read_text())
    nodes = Nodes(jobs, machines, args.down_hours * 3600)
    if nodes.down:
        days = sum(b - a for v in nodes.down.values() for a, b in v) / 86400
        first, last = min(j.submit for j in jobs), max(j.end for j in jobs)
        print(f"down: {sum(1 for v in nodes.down.values() if v)} nodes idle >= "
              f"{args.down_hours} h at a time, {days:.0f} of "
              f"{len(nodes.kind) * (last - first) / 86400:.0f} node-days")  # fmt: skip
    pools: Dict[str, List[str]] = defaultdict(list)
    for n in sorted({n for j in jobs for n in j.nodes}):
        for q in sorted({j.queue for j in jobs if n in j.nodes}):
            pools[q].append(n)
    pool_cpus = {q: sum(nodes.kind[n].cpus for n in v) for q, v in pools.items()}
    print(f"{len(jobs)} jobs of {Path(args.trace).name}")
    caps(jobs, pool_cpus)
    fitted(jobs, pools, nodes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
