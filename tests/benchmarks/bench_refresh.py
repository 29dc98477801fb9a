"""Benchmark: ``softwalltime refresh`` over N queued jobs on the real OpenPBS server.

Usage (root, OpenPBS up: ``make pbs-up``)::

    python tests/benchmarks/bench_refresh.py [--jobs 1000]

Holds the machine-wide PBS lock; starts a throwaway PostgreSQL on a unix socket, installs
the hook (``softwalltime hooks install --name softwalltime_test``), submits N held jobs as
alice (10 h walltime; the hook predicts 02:45:00 from her history), then times the whole
``softwalltime refresh`` command:

* a dry run, then a run where nothing moved (every job planned, no ``qalter``);
* after newer history (v3 now predicts 05:15:00): a run that changes every job (the hook
  predicts again at modifyjob), then a run where nothing moved again.

Deletes its jobs, the hook and the database afterwards. Prints figures to stdout.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "pbs"))

import pbsctl  # noqa: E402
from conftest import HOOK, SOFTWALLTIME, Installer, _new_database, seed  # noqa: E402

from softwalltime.db.localpg import LocalCluster  # noqa: E402

H = 3600


def refresh(workdir: Path, *args: str) -> tuple[float, str]:
    cfg = workdir / "refresh.json"
    cfg.write_text(json.dumps({"pbs_command_prefix": [str(pbsctl.PBSX)]}))
    start = time.monotonic()
    proc = subprocess.run(
        [SOFTWALLTIME, "--config", str(cfg), "refresh", "--hook", HOOK]
        + ["--lock-file", str(workdir / "refresh.lock"), "--max-changes", "100000", *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"refresh failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return elapsed, proc.stdout.strip().splitlines()[-1]


def fresh_interpreter() -> None:
    """pbs_server's Python keeps imported modules between hook runs (another checkout's
    softwalltime may be loaded): force one interpreter restart, restore the attributes."""
    before = {n: pbsctl.server_attribute(n) for n in ("python_restart_max_hooks",)}
    before["python_restart_min_interval"] = pbsctl.server_attribute("python_restart_min_interval")
    pbsctl.qmgr("set server python_restart_max_hooks = 1")
    pbsctl.qmgr("set server python_restart_min_interval = 1")
    try:
        time.sleep(1.1)
        pbsctl.qdel(pbsctl.qsub("-h -l walltime=00:01:00"))
    finally:
        for name, value in before.items():
            pbsctl.qmgr(
                f"unset server {name}" if value is None else f"set server {name} = {value}",
                check=False,
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    args = parser.parse_args()
    why = pbsctl.available()
    if why:
        raise SystemExit(f"bench-refresh: {why}")
    work = Path(tempfile.mkdtemp(prefix="swt-bench-refresh-"))
    ids: list[str] = []
    with pbsctl.exclusive():
        pgdir = tempfile.mkdtemp(prefix="swt-bench-refresh-pg-")
        cluster = LocalCluster(pgdir)
        cluster.start()
        installer = Installer(work)
        try:
            dsn = _new_database(cluster, "bench")
            seed(dsn, pbsctl.USER, [(H, 4 * H), (2 * H, 10 * H)])
            installer(dsn=dsn)
            fresh_interpreter()
            start = time.monotonic()
            out = pbsctl.as_user(
                f"for i in $(seq {args.jobs}); do echo 'sleep 1' |"
                " /opt/pbs/bin/qsub -h -l walltime=10:00:00 || exit 1; done",
                timeout=1800,
            ).stdout
            ids = [line.strip() for line in out.splitlines() if line.strip()]
            submit_s = time.monotonic() - start
            print(f"submitted {len(ids)} held jobs as alice in {submit_s:.1f} s")
            for label, extra in (("dry run", ["--dry-run"]), ("nothing moved", [])):
                elapsed, line = refresh(work, *extra)
                print(f"refresh, {label:<30} {elapsed:6.2f} s  {line}")
            seed(dsn, pbsctl.USER, [(5 * H, 10 * H)], start=100)
            for label in ("every job changes", "nothing moved again"):
                elapsed, line = refresh(work)
                print(f"refresh, {label:<30} {elapsed:6.2f} s  {line}")
            sample = pbsctl.resource(ids[0], "soft_walltime")
            print(f"soft_walltime of {ids[0]} now {sample} (expected 05:15:00)")
        finally:
            for start_i in range(0, len(ids), 200):
                pbsctl.qdel(*ids[start_i : start_i + 200])
            installer.uninstall()
            cluster.destroy()
            shutil.rmtree(pgdir, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
