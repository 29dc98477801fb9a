"""Benchmark the accounting-log ingester on a realistic generated log.

One command (``make bench-ingest``) that prints figures; nothing is asserted.

The log is generated from the real HPC2N trace (tests/data/traces, 202,871 jobs):
each job becomes the Q, S and E records OpenPBS 23.06 writes (same fields, order and
trailing spaces as tests/data/traces/pbs_accounting/openpbs-23.06-local.log), with the
trace's user, group, processor count, requested and actual run time. The trace is repeated
with ids and times shifted until there are enough E records; ~3 % of jobs get an R record
(a rerun) before their E. Files are daily, named YYYYMMDD as PBS names them.
``--account-fraction F`` gives that fraction of the jobs ``account="a<group>"`` on their
Q, S, R and E records, as sites that charge allocations write it on every record (NCAR:
tests/data/traces/pbs_accounting/ncar_qhist_casper-pbs_testdata.log; OpenPBS always
quotes it). The default, 0, keeps the log of the OpenPBS 23.06 sample (no account), so
figures stay comparable with earlier runs.

Reported:
* parse-only records/s (softwalltime.accounting on every line, rows built for E and R: the
  checked reference path);
* parse-only E records/s of the ingester's own parser (ingest/parse.py: bulk checks, the E
  fast path straight to COPY lines), file by file as the ingester reads them;
* end to end E records/s: ``softwalltime-ingest --dir`` into an empty, migrated database;
* the second (no-op) run over the unchanged files;
* peak RSS of the ingester for two log sizes (memory must not grow with the log).

Database: a scratch database created on the server of ``SOFTWALLTIME_DSN`` (role needs
CREATEDB), else on a private throwaway cluster in ``.bench/pg`` (initdb, fsync off).

Usage: python tests/benchmarks/bench_ingest.py [--jobs 1000000] [--small 100000] [--keep]
       [--workers 2] [--account-fraction 0]
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import make_dsn, parse_dsn

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "tests" / "data" / "traces" / "HPC2N-2002-2.2-cln.swf.gz"
BENCH = REPO / ".bench"
BIN = Path(sys.executable).parent


def _hms(seconds: int) -> str:
    h, rest = divmod(max(int(seconds), 0), 3600)
    return f"{h:02d}:{rest // 60:02d}:{rest % 60:02d}"


def _read_trace() -> tuple[int, list[tuple[int, ...]]]:
    start = 0
    jobs = []
    with gzip.open(TRACE, "rt") as fh:
        for line in fh:
            if line.startswith(";"):
                if "UnixStartTime:" in line:
                    start = int(line.split(":", 1)[1])
                continue
            f = line.split()
            if len(f) < 18:
                continue
            submit, wait, run, procs = int(f[1]), int(float(f[2])), int(float(f[3])), int(f[4])
            req, user, group = int(f[8]), int(f[11]), int(f[12])
            if run < 0 or procs <= 0 or user <= 0:
                continue
            jobs.append((submit, max(wait, 0), run, procs, req if req > 0 else 0, user, group))
    return start, jobs


def generate(
    directory: Path, n_jobs: int, seed: int = 42, account_fraction: float = 0.0
) -> dict[str, int]:
    """Write daily accounting files with ``n_jobs`` E records (plus Q, S, some R).

    :param account_fraction: share of jobs with ``account="..."`` on their records
    """
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    rng = random.Random(seed)
    # Its own generator: the rest of the log is the same whatever the fraction.
    accounts = random.Random(seed + 1)
    epoch0, trace = _read_trace()
    span = trace[-1][0] + 86400
    counts = {"Q": 0, "S": 0, "E": 0, "R": 0}
    out = None
    day_name = ""
    seq = 1000
    done = 0
    rep = 0
    t0 = time.monotonic()
    while done < n_jobs:
        for submit, wait, run, procs, req, user, group in trace:
            if done >= n_jobs:
                break
            seq += 1
            ctime = epoch0 + rep * span + submit
            start = ctime + wait
            end = start + run
            walltime = req or max(run, 3600)
            name = time.strftime("%Y%m%d", time.gmtime(ctime))
            if name != day_name:
                if out is not None:
                    out.close()
                out = open(directory / name, "a", encoding="utf-8")  # noqa: SIM115
                day_name = name
            assert out is not None
            ident = f"{seq}.pbs01"
            nodes = (procs + 1) // 2
            ncpus = procs
            account = f'account="a{group}" ' if accounts.random() < account_fraction else ""
            info = (
                f"user=u{user} group=g{group} {account}project=_pbs_project_default "
                f"jobname=job{seq % 97} queue=workq ctime={ctime} qtime={ctime} etime={ctime}"
            )
            rl = (
                f"Resource_List.mem={ncpus * 2}gb Resource_List.ncpus={ncpus} "
                f"Resource_List.nodect={nodes} Resource_List.place=scatter "
                f"Resource_List.select={nodes}:ncpus={min(ncpus, 2)}:mem=4gb "
                f"Resource_List.walltime={_hms(walltime)}"
            )
            node, per = f"n{seq % 120:03d}", min(ncpus, 2)
            host = f"exec_host={node}/0*{per} exec_vnode=({node}:ncpus={per})"
            ts = time.strftime("%m/%d/%Y %H:%M:%S", time.gmtime(ctime))
            out.write(f"{ts};Q;{ident};{info} {rl} \n")
            runs = 1
            if rng.random() < 0.03 and run > 60:
                # A rerun: first run requeued after a while, then the final run.
                first_end = start + run // 3
                out.write(
                    f"{ts};S;{ident};{info} start={start} {host} {rl} "
                    f"resource_assigned.ncpus={ncpus} \n"
                    f"{ts};R;{ident};{info} start={start} {host} {rl} session={seq % 65536} "
                    f"end={first_end} Exit_status=-11 resources_used.cpupercent=90 "
                    f"resources_used.cput={_hms(run // 3)} resources_used.mem=1048576kb "
                    f"resources_used.ncpus={ncpus} resources_used.vmem=2097152kb "
                    f"resources_used.walltime={_hms(run // 3)} run_count=1\n"
                )
                counts["S"] += 1
                counts["R"] += 1
                start = first_end
                end = start + run
                runs = 2
            out.write(
                f"{ts};S;{ident};{info} start={start} {host} {rl} "
                f"resource_assigned.ncpus={ncpus} \n"
                f"{ts};E;{ident};{info} start={start} {host} {rl} session={seq % 65536} "
                f"end={end} Exit_status=0 resources_used.cpupercent=95 "
                f"resources_used.cput={_hms(run * ncpus)} "
                f"resources_used.mem={rng.randint(1, 9999999)}kb "
                f"resources_used.ncpus={ncpus} resources_used.vmem=2097152kb "
                f"resources_used.walltime={_hms(run)} run_count={runs}\n"
            )
            counts["Q"] += 1
            counts["S"] += 1
            counts["E"] += 1
            done += 1
        rep += 1
    if out is not None:
        out.close()
    size = sum(p.stat().st_size for p in directory.iterdir())
    files = len(list(directory.iterdir()))
    print(
        f"generated {directory.name}: {counts['E']:,} E + {counts['Q']:,} Q + {counts['S']:,} S + "
        f"{counts['R']:,} R records, {files:,} daily files, {size / 1e6:,.0f} MB "
        f"in {time.monotonic() - t0:.0f} s",
        flush=True,
    )
    return counts


def parse_only(directory: Path) -> None:
    """Parse every line with softwalltime.accounting; build rows for E and R records."""
    from softwalltime.accounting import finished_job_row, parse_line, rerun_row

    n = e = 0
    t0 = time.perf_counter()
    for path in sorted(p for p in directory.iterdir() if not p.name.startswith(".")):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                rec = parse_line(line)
                n += 1
                if rec.rtype == "E":
                    finished_job_row(rec)
                    e += 1
                elif rec.rtype == "R":
                    rerun_row(rec)
    dt = time.perf_counter() - t0
    print(
        f"parse only: {n:,} records in {dt:.1f} s = {n / dt:,.0f} records/s "
        f"({e / dt:,.0f} E records/s)",
        flush=True,
    )


def parse_chunks(directory: Path) -> None:
    """The ingester's parser (no database): whole files through parse_chunk()."""
    from softwalltime_ingest.parse import parse_chunk

    n = e = 0
    t0 = time.perf_counter()
    for path in sorted(p for p in directory.iterdir() if not p.name.startswith(".")):
        chunk = parse_chunk(path.read_bytes(), 0, 0, str(path), None)
        n += sum(c[0] for c in chunk.counts.values())
        e += chunk.counts.get("E", [0])[0]
    dt = time.perf_counter() - t0
    print(
        f"parse only, ingester's parser: {n:,} records in {dt:.1f} s = {n / dt:,.0f} records/s "
        f"({e / dt:,.0f} E records/s)",
        flush=True,
    )


def _ingest(dsn: str, directory: Path, extra: list[str]) -> tuple[float, int, str]:
    """Run the console script; return (seconds, peak RSS kB of that process, stdout)."""
    cmd = [str(BIN / "softwalltime-ingest"), "--dsn", dsn, "--no-progress", "--dir", str(directory)]
    cmd += extra
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"ingest failed ({proc.returncode}):\n{out}\n{err}")
    return dt, int(usage.ru_maxrss), out


class _Server:
    """Scratch databases on SOFTWALLTIME_DSN's server, or a private cluster that
    :meth:`close` stops and removes (the benchmark stops what it starts)."""

    def __init__(self) -> None:
        self.cluster = None
        base = os.environ.get("SOFTWALLTIME_DSN")
        if base:
            self.admin = base
            print("database server: SOFTWALLTIME_DSN (scratch databases created there)")
        else:
            sys.path.insert(0, str(REPO))
            from softwalltime.db.localpg import LocalCluster

            cluster = LocalCluster(BENCH / "pg")
            if not cluster.is_running():
                cluster.start()
            self.cluster = cluster
            self.admin = cluster.dsn("postgres")
            print(f"database server: private throwaway cluster in {BENCH / 'pg'} (fsync off)")

    def _exec(self, stmt: sql.Composable) -> None:
        conn = psycopg2.connect(self.admin)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(stmt)
        conn.close()

    def fresh(self, name: str) -> str:
        self._exec(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        self._exec(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        kw = parse_dsn(self.admin)
        kw["dbname"] = name
        dsn = make_dsn(**kw)
        subprocess.run(
            [str(BIN / "softwalltime"), "--dsn", dsn, "db", "upgrade"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return dsn

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.destroy()

    def drop(self, name: str) -> None:
        self._exec(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _rows(dsn: str) -> int:
    conn = psycopg2.connect(dsn)
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM finished_jobs")
        n = int(cur.fetchone()[0])
    conn.close()
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1_000_000, help="E records in the big log")
    ap.add_argument("--small", type=int, default=100_000, help="E records in the small log")
    ap.add_argument("--keep", action="store_true", help="keep the generated logs in .bench/")
    ap.add_argument(
        "--workers", type=int, default=2, help="also run the big log with --workers N (0: skip)"
    )
    ap.add_argument(
        "--account-fraction",
        type=float,
        default=0.0,
        help='share of jobs with account="..." on their records (0 to 1; default 0)',
    )
    args = ap.parse_args()
    if not TRACE.exists():
        sys.exit(f"missing trace {TRACE}")
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}", flush=True)
    if not 0.0 <= args.account_fraction <= 1.0:
        sys.exit("--account-fraction must be between 0 and 1")
    tag = f"-account{args.account_fraction:g}" if args.account_fraction else ""
    big, small = BENCH / f"log-{args.jobs}{tag}", BENCH / f"log-{args.small}{tag}"
    print(f'jobs with account="...": {args.account_fraction:.0%}', flush=True)
    for d, n in ((small, args.small), (big, args.jobs)):
        if not (d / ".complete").exists():
            generate(d, n, account_fraction=args.account_fraction)
            (d / ".complete").write_text("ok\n")
        else:
            print(f"reusing generated {d}", flush=True)

    parse_only(big)
    parse_chunks(big)

    server = None
    try:
        server = _Server()
        results = {}
        runs: list[tuple[str, Path, int, list[str]]] = [
            ("small", small, args.small, []),
            ("big", big, args.jobs, []),
        ]
        if args.workers:
            runs.append(("big-workers", big, args.jobs, ["--workers", str(args.workers)]))
        for label, d, n, extra in runs:
            dsn = server.fresh(f"swt_bench_{label.replace('-', '_')}")
            dt, rss, out = _ingest(dsn, d, extra)
            rows = _rows(dsn)
            dt2, rss2, out2 = _ingest(dsn, d, extra)
            rows2 = _rows(dsn)
            results[label] = (n, dt, rss, dt2, rows, rows2)
            print(
                f"end to end ({label}{' ' + ' '.join(extra) if extra else ''}, {n:,} E): "
                f"{dt:.1f} s = {n / dt:,.0f} E records/s; "
                f"rows {rows:,}; no-op re-run {dt2:.2f} s adding {rows2 - rows} rows; "
                f"peak RSS {rss / 1024:.0f} MB (ingesting process)",
                flush=True,
            )
            if label == "big":
                print(out.rstrip())
            server.drop(f"swt_bench_{label.replace('-', '_')}")
        s, b = results["small"], results["big"]
        print(
            f"memory: peak RSS {s[2] / 1024:.0f} MB for {s[0]:,} E records, "
            f"{b[2] / 1024:.0f} MB for {b[0]:,} E records"
        )
    finally:
        if server is not None:
            server.close()
        if not args.keep:
            for d in (small, big):
                shutil.rmtree(d, ignore_errors=True)
            if BENCH.exists() and not any(BENCH.iterdir()):
                BENCH.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
