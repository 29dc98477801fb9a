"""Benchmark: ``softwalltime report`` over N finished jobs (default 1,000,000).

Usage::

    python tests/benchmarks/bench_report.py [--rows N] [--users N] [--queues N] [--runs N]

The database is a throwaway one: on the server of ``$SOFTWALLTIME_DSN`` (a role allowed to
CREATE DATABASE; dropped afterwards), else a private cluster started with initdb/pg_ctl in
a temporary directory (removed afterwards). A year of jobs is COPYed in; soft walltimes are set from
mid-year on (a noisy prediction of the run time, capped at the walltime), then VACUUM ANALYZE.
Timed: the whole command in-process (``softwalltime report --out``: connect, every query,
the HTML page), and its parts: each step of each connection (``name (2)``: on the second
of the connections that share the snapshot, see ``softwalltime.report.build``; the
connections run at the same time, so the steps add up to more than the total). Prints
figures; asserts nothing. Target: 1 M rows <= 5 s, 10 M rows (``--rows 10000000``) <= 30 s.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg2
import sqlalchemy as sa
from bench_hook import ChunkStream, chunks
from psycopg2 import sql
from psycopg2.extensions import make_dsn

from softwalltime.cli import main as cli_main
from softwalltime.core.config import redact_dsn
from softwalltime.db import engine as db
from softwalltime.db.localpg import LocalCluster
from softwalltime.report import build, html

REPO = Path(__file__).resolve().parents[2]
EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z
YEAR_S = 365 * 86400
DEPLOYED = EPOCH + YEAR_S // 2
# Queue limits (s), as at CERIT-SC: 2 h, 4 h, 1 d, 2 d, 4 d, 1 w, 2 w.
LIMITS = (7200, 14400, 86400, 172800, 345600, 604800, 1209600)


def _rows(n_rows: int, n_users: int, n_queues: int, seed: int) -> Iterator[str]:
    """COPY text lines: jobs ending evenly over a year, users of very different activity."""
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) ** 0.8 for i in range(n_users)]
    users = rng.choices(range(n_users), weights=weights, k=n_rows)
    limits = LIMITS[:n_queues]
    step = YEAR_S / n_rows
    for seq in range(1, n_rows + 1):
        q = rng.randrange(len(limits))
        wall = limits[q] if rng.random() < 0.7 else rng.randint(600, limits[q])
        run = int(wall * rng.betavariate(0.7, 2.0))
        ended = EPOCH + int(seq * step)
        start = ended - run
        ctime = start - int(rng.expovariate(1 / 3600.0))
        soft = r"\N"
        if ctime >= DEPLOYED and rng.random() < 0.95:
            soft = str(max(1, min(wall, int(run * rng.lognormvariate(0.2, 0.6)) + 900)))
        ncpus = rng.choice((1, 1, 1, 2, 4, 8, 16, 32, 64, 128))
        yield (
            f"bench\t{seq}.bench\t{ctime}\t{seq}\tuser{users[seq - 1]:05d}\tq{limits[q]}"
            f"\t{wall}\t{soft}\t{run}\t{start}\t{ended}\t{ncpus}\n"
        )


def load(dsn: str, n_rows: int, n_users: int, n_queues: int) -> None:
    """Create the schema, COPY the jobs in, VACUUM ANALYZE."""
    engine = db.make_engine(dsn)
    with engine.connect() as conn:
        db.upgrade(conn, "head")
        conn.commit()
    engine.dispose()
    conn = psycopg2.connect(dsn)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            start = time.perf_counter()
            cur.execute("CREATE TEMP TABLE raw (server text, job_id text, ctime bigint,"
                        " job_seq bigint, username text, queue text, walltime_s int,"
                        " soft_walltime_s int, runtime_s int, started bigint, ended bigint,"
                        " ncpus int)")  # fmt: skip
            cur.copy_expert(
                "COPY raw FROM STDIN", ChunkStream(chunks(_rows(n_rows, n_users, n_queues, 42)))
            )
            cur.execute(
                "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username, queue,"
                " walltime_s, soft_walltime_s, runtime_s, started_at, ended_at, ncpus,"
                " source_file) SELECT server, job_id, to_timestamp(ctime), job_seq, username,"
                " queue, walltime_s, soft_walltime_s, runtime_s, to_timestamp(started),"
                " to_timestamp(ended), ncpus, 'bench' FROM raw"
            )
            cur.execute("DROP TABLE raw")
            loaded = time.perf_counter() - start
            cur.execute("VACUUM ANALYZE finished_jobs")
            cur.execute("SELECT pg_size_pretty(pg_total_relation_size('finished_jobs'))")
            size = cur.fetchone()[0]
    finally:
        conn.close()
    print(f"history: {n_rows} rows, {n_users} users, {size} on disk; COPY+INSERT {loaded:.1f} s")


def _time_parts(dsn: str) -> None:
    engine = db.make_engine(dsn, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
        timings: dict[str, float] = {}
        start = time.perf_counter()
        data, meta = build.make_report(conn, timings=timings)
        queried = time.perf_counter() - start
    engine.dispose()
    start = time.perf_counter()
    page = html.render(data, meta)
    rendered = time.perf_counter() - start
    print(
        f"  parts: queries {queried:.2f} s, HTML {rendered:.2f} s ({len(page) // 1024} KiB,"
        f" {len(data['users']['per_user'])} users drawn)"
    )
    print("  queries: " + ", ".join(f"{name} {took:.2f}" for name, took in timings.items()))


def _time_command(dsn: str, out: str) -> float:
    saved = sys.stdout
    sys.stdout = io.StringIO()  # the command's one line; we print our own
    try:
        start = time.perf_counter()
        code = cli_main(["--dsn", dsn, "report", "--out", out])
        took = time.perf_counter() - start
    finally:
        sys.stdout = saved
    if code != 0:
        raise SystemExit(f"bench: softwalltime report exited {code}")
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--queues", type=int, default=len(LIMITS))
    ap.add_argument("--runs", type=int, default=3, help="timed runs of the command")
    args = ap.parse_args(argv)

    cluster = None
    admin_dsn = os.environ.get("SOFTWALLTIME_DSN")
    if admin_dsn:
        admin_dsn = make_dsn(admin_dsn)
    else:
        # Its own directory: other benchmarks' clusters (.bench/pg) may be running.
        cluster = LocalCluster(tempfile.mkdtemp(prefix="swt-bench-report-"))
        cluster.start()
        admin_dsn = cluster.dsn("postgres")
    name = f"swt_bench_report_{os.getpid()}"
    admin = psycopg2.connect(admin_dsn)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = make_dsn(admin_dsn, dbname=name)
    where = (
        f"a private cluster in {cluster.directory}" if cluster else "the SOFTWALLTIME_DSN server"
    )
    print(f"database: {redact_dsn(dsn)} ({where}); {os.cpu_count()} CPUs")
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    try:
        load(dsn, args.rows, args.users, args.queues)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "report.html")
            times = [_time_command(dsn, out) for _ in range(args.runs)]
            print(
                f"softwalltime report --out, {args.rows} rows: "
                + ", ".join(f"{t:.2f} s" for t in times)
                + f" (best {min(times):.2f} s; target <= 5 s per 1 M rows)"
            )
        _time_parts(dsn)
        print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    finally:
        with admin.cursor() as cur:
            cur.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        admin.close()
        if cluster is not None:
            cluster.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
