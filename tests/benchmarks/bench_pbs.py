"""qsub throughput on the real OpenPBS server: no hook, an empty hook, the softwalltime hook.

Run as root with OpenPBS up (``make pbs-up``): ``make bench-pbs``. It takes
the machine-wide PBS lock, gives the hook a throwaway PostgreSQL on a unix socket with a
history for ``alice``, and in each round submits ``--jobs`` held jobs per configuration,
one ``qsub`` process per job, as ``alice`` (the loop runs in her shell and is timed there,
so ``su`` is not counted). Both hooks are installed once (the softwalltime hook with
``softwalltime hooks install``); a configuration is one ``qmgr set hook ... enabled`` per
hook away, so rounds can be short and many. After each switch ``--warmup`` jobs go untimed
(the first event after an import compiles the script; the softwalltime hook also imports and
connects there, as it does once per interpreter restart), then the timed jobs.
Configurations alternate within each round, and their order is reversed every other round,
so that drift of this machine, and what one configuration leaves to the next (a deletion's
aftermath, an interpreter restart falling due), hit them alike. It prints qsubs/s per
configuration (median of the rounds); the softwalltime hook's ratio to the empty hook as the
median of the rounds' ratios (the two run back to back in every round, so the machine's
drift between rounds, often 20 % and more here, cancels) and as the ratio of the medians;
the hook's own time per event (p50/p99) from its log lines; and the interpreter restarts
that fell in each configuration's timed jobs. It deletes its jobs and hooks and stops its
database: the server is left as it was found. Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests" / "pbs"), str(REPO / "tests")]

import pbsctl  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from softwalltime.db import engine as db  # noqa: E402
from softwalltime.db.localpg import LocalCluster  # noqa: E402

SOFTWALLTIME = str(Path(sys.executable).with_name("softwalltime"))
EMPTY_HOOK = "import pbs\npbs.event().accept()\n"
# --floor: in place of the empty hook, one that does what softwalltime's does to a job (a soft
# walltime, its mark, one debug line) without reading or deciding anything: what remains
# between it and softwalltime is the lookup and the decision; between it and the empty hook,
# pbs_server's own cost of altering the job.
FLOOR_HOOK = (
    "import pbs\n"
    "e = pbs.event()\n"
    "r = e.job.Resource_List\n"
    "if r['walltime'] is not None:\n"
    "    r['soft_walltime'] = pbs.duration(9900)\n"
    "    r['softwalltime_set'] = 9900\n"
    "pbs.logmsg(pbs.EVENT_DEBUG, 'floor: queuejob decided')\n"
    "e.accept()\n"
)
_TIME_RE = re.compile(r"softwalltime(?:\[[^]]*\])?: queuejob user='alice'.*\[([0-9.]+) ms\]$")
_RESTART = "Restarting Python interpreter"


def submit(n: int) -> float:
    """qsubs per second for ``n`` held jobs, one qsub process each, timed in alice's shell."""
    out = pbsctl.as_user(
        "s=$(date +%s.%N); for i in $(seq " + str(n) + "); do"
        " echo 'sleep 1' | /opt/pbs/bin/qsub -h -l walltime=10:00:00 >/dev/null || exit 1;"
        ' done; e=$(date +%s.%N); echo "$s $e"',
        timeout=600,
    ).stdout.split()
    return n / (float(out[1]) - float(out[0]))


def clear_jobs() -> None:
    ids = pbsctl.run("qselect", "-u", pbsctl.USER).stdout.split()
    for i in range(0, len(ids), 200):
        pbsctl.qdel(*ids[i : i + 200])


# the hook each configuration enables (both are installed once, disabled in between)
HOOKS = {"no hook": None, "empty hook": "swt_empty", "softwalltime hook": "swt_bench"}


def _install(workdir: Path, dsn: str, floor: bool = False) -> None:
    script = workdir / "empty.py"
    script.write_text(FLOOR_HOOK if floor else EMPTY_HOOK)
    pbsctl.qmgr("create hook swt_empty event=queuejob")
    pbsctl.qmgr(f"import hook swt_empty application/x-python default {script}")
    cfg = workdir / "softwalltime.json"
    cfg.write_text(json.dumps({"dsn": dsn}))
    pbsctl.run(SOFTWALLTIME, "--config", str(cfg), "hooks", "install", "--name", "swt_bench")


def _enable(kind: str) -> None:
    for name in ("swt_empty", "swt_bench"):
        pbsctl.qmgr(f"set hook {name} enabled = {str(HOOKS[kind] == name).lower()}")


def _remove() -> None:
    pbsctl.run(SOFTWALLTIME, "hooks", "uninstall", "--name", "swt_bench", check=False)
    pbsctl.qmgr("delete hook swt_empty", check=False)


def history_database(cluster: LocalCluster) -> str:
    """The DSN of ``cluster``'s postgres database, migrated, with alice's history."""
    from conftest import ALICE_HISTORY, seed

    dsn = cluster.dsn("postgres")
    engine = db.make_engine(dsn, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        db.upgrade(conn, "head")
        conn.commit()
    engine.dispose()
    seed(dsn, pbsctl.USER, ALICE_HISTORY)
    return dsn


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=50, help="qsubs per configuration and round")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5, help="untimed qsubs after each switch")
    ap.add_argument(
        "--floor",
        action="store_true",
        help="the 'empty hook' sets a constant soft walltime and mark instead (the cost of "
        "altering a job, without the lookup)",
    )
    args = ap.parse_args(argv)
    why = pbsctl.available()
    if why:
        print(f"bench-pbs: {why}", file=sys.stderr)
        return 1

    kinds = ["no hook", "empty hook", "softwalltime hook"]
    rates: dict[str, list[float]] = {k: [] for k in kinds}
    restarts = dict.fromkeys(kinds, 0)
    hook_ms: list[float] = []  # warm events
    cold_ms: list[float] = []
    workdir = Path(tempfile.mkdtemp(prefix="swt-bench-pbs-"))
    cluster = LocalCluster(tempfile.mkdtemp(prefix="swt-bench-pg-"))
    with pbsctl.exclusive():
        cluster.start()
        try:
            dsn = history_database(cluster)
            print(f"OpenPBS 23.06 at pbshost; {args.jobs} held jobs per configuration and round")
            _install(workdir, dsn, args.floor)
            if args.floor:
                print("--floor: 'empty hook' below = a hook setting a constant soft walltime")
            for rnd in range(args.rounds):
                for kind in kinds if rnd % 2 == 0 else kinds[::-1]:
                    _enable(kind)
                    if args.warmup:
                        submit(args.warmup)
                    log = pbsctl.ServerLog()
                    rate = submit(args.jobs)
                    rates[kind].append(rate)
                    restarts[kind] += sum(_RESTART in line for line in log.lines())
                    if kind == "softwalltime hook":
                        # an event that (re)connected is cold: after an interpreter restart
                        # (every 100 hook runs at most every 30 s by default) or the first
                        cold = False
                        for line in log.hook_lines():
                            if "softwalltime: connected to" in line:
                                cold = True
                            elif m := _TIME_RE.search(line):
                                (cold_ms if cold else hook_ms).append(float(m.group(1)))
                                cold = False
                    clear_jobs()
                print(
                    f"  round {rnd + 1:2}: "
                    + ", ".join(f"{kind} {rates[kind][-1]:5.1f}" for kind in kinds)
                    + " qsubs/s"
                )
        finally:
            _remove()
            clear_jobs()
            cluster.destroy()
            shutil.rmtree(workdir, ignore_errors=True)
    print("qsub throughput (median of rounds, one qsub process per job):")
    for kind in kinds:
        print(
            f"  {kind:18} {statistics.median(rates[kind]):6.1f} qsubs/s"
            f"  ({restarts[kind]} interpreter restarts in its timed jobs)"
        )
    paired = [s / e for s, e in zip(rates["softwalltime hook"], rates["empty hook"])]
    medians = statistics.median(rates["softwalltime hook"]) / statistics.median(rates["empty hook"])
    print(
        f"softwalltime hook / empty hook: {statistics.median(paired):.3f} (median of the"
        f" rounds' ratios: {' '.join(f'{r:.3f}' for r in paired)}; ratio of the medians"
        f" {medians:.3f})"
    )
    if hook_ms:
        print(
            f"softwalltime hook time per event, warm (its own log, n={len(hook_ms)}): "
            f"p50 {_percentile(hook_ms, 0.50):.2f} ms, p99 {_percentile(hook_ms, 0.99):.2f} ms, "
            f"max {max(hook_ms):.2f} ms"
        )
    if cold_ms:
        print(
            f"  cold events (new interpreter: imports + connect), n={len(cold_ms)}: "
            f"median {statistics.median(cold_ms):.1f} ms, max {max(cold_ms):.1f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
