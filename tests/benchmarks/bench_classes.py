"""The rank on sched_config's ``resources:`` line: PBS's cycle time, ``make bench-classes``.

Issue 29 ("Beyond"): with ``softwalltime_rank`` on the ``resources:`` line
(:data:`softwalltime.replay.pbsched.SCHED_RESOURCES_RANK`, the simulator's ``--classes
rank``), jobs of different ranks fall into different equivalence classes. PBS builds the
classes to keep cycles short: once a job of a class cannot run, the rest of the class gets
its error without a check of their own (fifo.cpp:990-996, check.cpp:710-714). Splitting the
classes by rank therefore costs scheduler time in every cycle; this measures how much.

Run as root with OpenPBS up (``make pbs-up``). Under the machine-wide PBS lock,
on the 2-cpu node: a 2-cpu blocker runs, so nothing else can; ``--jobs`` 1-cpu jobs of
alice are queued while scheduling is off (``--walltimes`` distinct walltimes and
``--ranks`` distinct ranks, dealt round-robin, so without the line there are
``--walltimes`` classes and with it up to ``walltimes x ranks``), with strict_ordering,
backfill_depth 1 and the ``--sort`` formula (the recommended ``.rank`` sorts read the rank).
Each round then times one scheduling cycle per variant (the line off and on, their order
swapped every other round so drift hits both alike), after an untimed one that follows the
switch (the scheduler reconfigures on the SIGHUP): scheduling on, until the scheduler logs
"Leaving Scheduling Cycle", scheduling off. Per cycle it takes pbs_sched's CPU time
(``/proc/PID/stat``, all threads) and the cycle's wall time (first poll after the trigger to
the first poll that sees the cycle's end: up to ``POLL_S`` late). It prints the median of
each per variant and the median of the rounds' ratios (line on / off): the ratio within a
round cancels the machine's drift. Then it deletes its jobs and the resource and restores
sched_config and the server's settings. Prints figures, asserts nothing.

    python tests/benchmarks/bench_classes.py [--jobs 3000] [--ranks N] [--walltimes 4]
        [--rounds 5] [--sort xfactor.rank]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests" / "pbs"), str(REPO / "tests")]

import pbsctl  # noqa: E402
import twin  # noqa: E402

from softwalltime.replay import pbsched  # noqa: E402

RANK = pbsched.RANK
SCHED_LOG = pbsctl.PBS_HOME / "sched_logs"
CYCLE_END = "Leaving Scheduling Cycle"
POLL_S = 0.02
CYCLE_TIMEOUT_S = 1200.0  # sched_cycle_length's default is 20 min
BATCH = 200  # commands per shell batch
MAX_JOBS = 20000


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=3000, help="queued jobs (default 3000)")
    ap.add_argument("--ranks", type=int, default=0, help="distinct ranks (default: one per job)")
    ap.add_argument("--walltimes", type=int, default=4, help="distinct walltimes (default 4)")
    ap.add_argument("--rounds", type=int, default=5, help="cycles per variant (default 5)")
    ap.add_argument("--sort", default="xfactor.rank", help="the job_sort_formula's sort")
    args = ap.parse_args(argv)
    if not 1 <= args.jobs <= MAX_JOBS:
        ap.error(f"--jobs must be 1..{MAX_JOBS}")
    if not (0 <= args.ranks <= MAX_JOBS and 1 <= args.walltimes <= 100 and 1 <= args.rounds <= 100):
        ap.error(f"--ranks 0..{MAX_JOBS}, --walltimes 1..100 and --rounds 1..100")
    args.ranks = args.ranks or args.jobs
    try:
        args.formula = pbsched.sort_formula(args.sort).expression
    except ValueError as err:
        ap.error(str(err))
    return args


def _sched_cpu_s() -> float:
    """pbs_sched's CPU time so far (user + system, all its threads), seconds."""
    pid = pbsctl.SCHED_LOCK.read_text().split()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cycle_ends() -> int:
    """How many cycles the scheduler's logs say have ended so far."""
    return sum(p.read_bytes().count(CYCLE_END.encode()) for p in SCHED_LOG.glob("*"))


def one_cycle() -> tuple[float, float]:
    """One scheduling cycle, triggered by turning scheduling on; (CPU s, wall s)."""
    before, cpu = _cycle_ends(), _sched_cpu_s()
    t0 = time.monotonic()
    pbsctl.qmgr("set server scheduling = True")
    while _cycle_ends() == before:
        if time.monotonic() - t0 > CYCLE_TIMEOUT_S:
            raise pbsctl.PbsError(f"no cycle ended within {CYCLE_TIMEOUT_S:.0f} s")
        time.sleep(POLL_S)  # polls the log; the cycle's end is what is waited for
    wall = time.monotonic() - t0
    pbsctl.qmgr("set server scheduling = False")
    return _sched_cpu_s() - cpu, wall


def _queue(args: argparse.Namespace, ids: list[str]) -> None:
    """The blocker (running on both cpus) and ``args.jobs`` queued jobs with their ranks."""
    blocker = pbsctl.qsub(
        "-l select=1:ncpus=2 -l walltime=10:00:00 -o /dev/null -e /dev/null", "sleep 36000"
    )
    ids.append(blocker)
    pbsctl.run("qrun", blocker)
    pbsctl.wait_state(blocker, "R")
    alice, root = twin.Shell(pbsctl.USER), twin.Shell()
    try:
        for first in range(0, args.jobs, BATCH):
            n = min(BATCH, args.jobs - first)
            lines = [
                "echo 'sleep 60' | /opt/pbs/bin/qsub -o /dev/null -e /dev/null"
                f" -l select=1:ncpus=1 -l walltime={3600 * (1 + (first + i) % args.walltimes)}"
                " || echo FAIL"
                for i in range(n)
            ]
            got = alice.lines("\n".join(lines), n, timeout=600)
            if any("." not in g for g in got):
                raise pbsctl.PbsError(f"qsub failed: {[g for g in got if '.' not in g][:3]}")
            ids += got
            alters = [
                f"qalter -l {RANK}={60 * (1 + (first + i) % args.ranks)} {jobid}"
                for i, jobid in enumerate(got)
            ]
            if root.lines("; ".join([*alters, "echo OK"]), 1, timeout=600) != ["OK"]:
                raise pbsctl.PbsError("qalter failed")
            print(f"  queued {first + n}/{args.jobs}", flush=True)
    finally:
        alice.close()
        root.close()


def _setup(args: argparse.Namespace) -> str:
    """strict_ordering, backfill_depth 1, the formula, scheduling off; the sched_config."""
    pbsctl.qmgr("set server scheduling = False")
    pbsctl.qmgr(f"create resource {RANK} type=long, flag=r")
    text = twin.sched_config_with(twin.SCHED_CONFIG.read_text(), strict_ordering=True)
    twin.SCHED_CONFIG.write_text(text)
    pbsctl.reload_scheduler()
    pbsctl.qmgr("set server backfill_depth = 1")
    pbsctl.qmgr("set server eligible_time_enable = True")
    if args.formula is None:
        pbsctl.qmgr("unset sched job_sort_formula", check=False)
    else:
        pbsctl.qmgr(f"set sched job_sort_formula = '{args.formula}'")
    return text


def _variant(base: str, rank_line: bool) -> None:
    text = pbsctl.sched_config_line(base, "resources", pbsched.SCHED_RESOURCES_RANK)
    twin.SCHED_CONFIG.write_text(text if rank_line else base)
    pbsctl.reload_scheduler()


def measure(args: argparse.Namespace, base: str) -> dict[bool, list[tuple[float, float]]]:
    got: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for r in range(args.rounds):
        for rank_line in (False, True) if r % 2 == 0 else (True, False):
            _variant(base, rank_line)
            one_cycle()  # untimed: the scheduler re-reads its configuration after a SIGHUP
            got[rank_line].append(one_cycle())
        off, on = got[False][-1], got[True][-1]
        print(
            f"  round {r + 1}: CPU {off[0]:.2f} s -> {on[0]:.2f} s,"
            f" wall {off[1]:.2f} s -> {on[1]:.2f} s",
            flush=True,
        )
    return got


def report(args: argparse.Namespace, got: dict[bool, list[tuple[float, float]]]) -> None:
    classes_off = min(args.walltimes, args.jobs)
    classes_on = min(args.jobs, args.walltimes * args.ranks // _gcd(args.walltimes, args.ranks))
    print(
        f"\n{args.jobs} queued jobs, sort {args.sort}, strict_ordering, backfill_depth 1;"
        f" classes without the line {classes_off}, with it {classes_on}"
    )
    for rank_line in (False, True):
        cpu = statistics.median(c for c, _ in got[rank_line])
        wall = statistics.median(w for _, w in got[rank_line])
        name = "with the rank on resources:" if rank_line else "without (PBS's default)"
        print(f"  {name:<30} cycle CPU {cpu:.3f} s, wall {wall:.3f} s (median of {args.rounds})")
    for k, what in ((0, "CPU"), (1, "wall")):
        ratios = [on[k] / max(off[k], 1e-3) for off, on in zip(got[False], got[True])]
        print(
            f"  {what} ratio with/without: median {statistics.median(ratios):.2f}"
            f" (rounds: {', '.join(f'{x:.2f}' for x in ratios)})"
        )


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def run(args: argparse.Namespace) -> int:
    """The benchmark on the server; the caller holds :func:`pbsctl.exclusive`."""
    with twin.server(2):
        if pbsctl.qmgr(f"list resource {RANK}", check=False).returncode == 0:
            print(f"bench-classes: {RANK} exists on the server: delete it first", file=sys.stderr)
            return 2
        ids: list[str] = []
        try:
            base = _setup(args)
            _queue(args, ids)
            report(args, measure(args, base))
        finally:
            pbsctl.qmgr("set server scheduling = False", check=False)
            twin.purge_all(ids)
            pbsctl.qmgr(f"delete resource {RANK}", check=False)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    why = pbsctl.available()
    if why:
        print(f"bench-classes: {why}", file=sys.stderr)
        return 2
    with pbsctl.exclusive():
        return run(args)


if __name__ == "__main__":
    sys.exit(main())
