"""pbs_server's memory over many hook events: the softwalltime hook against an empty hook.

Run as root with OpenPBS up (``make pbs-up``): ``make bench-soak``. It takes the
machine-wide PBS lock, gives the hook a throwaway PostgreSQL on a unix socket with a history
for ``alice``, turns job history off for the run (a deleted job then leaves nothing behind in
the server), and for each configuration (an empty queuejob hook, then the softwalltime hook
installed with ``softwalltime hooks install``) submits ``--events`` held jobs, one ``qsub``
per job as ``alice``, deleting them every ``--step`` jobs and reading pbs_server's resident
set size (``VmRSS`` of its ``/proc`` entry) after each step. The server's interpreter
restarts stay at their defaults (every 100 hook runs, at most every 30 s) and are counted
from its log. It prints the curve (events, RSS in MB, restarts so far) per configuration and
the growth in the first step and per 1,000 events after it, then leaves the server as it
found it. Prints figures, asserts nothing: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests" / "pbs"), str(REPO / "tests"), str(Path(__file__).parent)]

import pbsctl  # noqa: E402
from bench_pbs import clear_jobs, history_database, submit  # noqa: E402

from softwalltime.db.localpg import LocalCluster  # noqa: E402

SOFTWALLTIME = str(Path(sys.executable).with_name("softwalltime"))
EMPTY_HOOK = "import pbs\npbs.event().accept()\n"
SERVER_LOCK = Path("/var/spool/pbs/server_priv/server.lock")


def server_rss_mb() -> float:
    """pbs_server's resident set size now, in MB (its pid from server_priv/server.lock)."""
    pid = SERVER_LOCK.read_text().split()[0]
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pbs_server (pid {pid})")


def soak(events: int, step: int) -> list[tuple[int, float, int, int]]:
    """(events so far, RSS MB, interpreter restarts so far, jobs the softwalltime hook
    predicted so far) after every ``step`` events."""
    curve = [(0, server_rss_mb(), 0, 0)]
    restarts = predicted = done = 0
    while done < events:
        log = pbsctl.ServerLog()
        n = min(step, events - done)
        submit(n)
        clear_jobs()
        done += n
        lines = log.lines()
        restarts += sum("Restarting Python interpreter" in line for line in lines)
        predicted += sum("set v3 soft_walltime" in line for line in lines)
        curve.append((done, server_rss_mb(), restarts, predicted))
        print(
            f"    {done:6} events  {curve[-1][1]:7.1f} MB  {restarts:3} restarts"
            f"  {predicted:6} predicted",
            flush=True,
        )
    return curve


def _summary(name: str, curve: list[tuple[int, float, int, int]]) -> str:
    first = curve[1][1] - curve[0][1]
    tail = curve[1:]
    per_k = (tail[-1][1] - tail[0][1]) / max(1, (tail[-1][0] - tail[0][0]) / 1000)
    return (
        f"  {name:18} first {curve[1][0]} events: {first:+.2f} MB; then {per_k:+.3f} MB per"
        f" 1,000 events; total {curve[-1][1] - curve[0][1]:+.2f} MB over {curve[-1][0]}"
        f" events ({curve[-1][2]} interpreter restarts, {curve[-1][3]} jobs predicted)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=20000, help="hook events per configuration")
    ap.add_argument("--step", type=int, default=1000, help="events between RSS readings")
    args = ap.parse_args(argv)
    why = pbsctl.available()
    if why:
        print(f"bench-soak: {why}", file=sys.stderr)
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="swt-bench-soak-"))
    cluster = LocalCluster(tempfile.mkdtemp(prefix="swt-bench-pg-"))
    curves = {}
    with pbsctl.exclusive():
        history = pbsctl.server_attribute("job_history_enable")
        pbsctl.qmgr("set server job_history_enable = false")
        cluster.start()
        try:
            dsn = history_database(cluster)
            print(f"OpenPBS 23.06 at pbshost; {args.events} held jobs per configuration")
            script = workdir / "empty.py"
            script.write_text(EMPTY_HOOK)
            pbsctl.qmgr("create hook swt_empty event=queuejob")
            pbsctl.qmgr(f"import hook swt_empty application/x-python default {script}")
            print("  empty hook:")
            curves["empty hook"] = soak(args.events, args.step)
            pbsctl.qmgr("delete hook swt_empty")
            cfg = workdir / "softwalltime.json"
            cfg.write_text(json.dumps({"dsn": dsn}))
            pbsctl.run(SOFTWALLTIME, "--config", str(cfg), "hooks", "install", "--name", "swt_soak")
            print("  softwalltime hook:")
            curves["softwalltime hook"] = soak(args.events, args.step)
        finally:
            pbsctl.run(SOFTWALLTIME, "hooks", "uninstall", "--name", "swt_soak", check=False)
            pbsctl.qmgr("delete hook swt_empty", check=False)
            clear_jobs()
            if history is None:
                pbsctl.qmgr("unset server job_history_enable", check=False)
            else:
                pbsctl.qmgr(f"set server job_history_enable = {history}", check=False)
            cluster.destroy()
            shutil.rmtree(workdir, ignore_errors=True)
    print("pbs_server RSS (VmRSS):")
    for name, curve in curves.items():
        print(_summary(name, curve))
    return 0


if __name__ == "__main__":
    sys.exit(main())
