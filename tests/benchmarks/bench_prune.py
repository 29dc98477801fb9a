"""Benchmark: ``softwalltime db prune`` over 1M history rows / 10k users.

Usage::

    python tests/benchmarks/bench_prune.py [--rows N] [--users N] [--batch-rows N]

A private cluster started with initdb/pg_ctl in a temporary folder (removed afterwards), or
the server of ``$SOFTWALLTIME_DSN`` (a role allowed to CREATE DATABASE; its databases are
dropped afterwards). The history is bench_hook's (one job every 30 s from 2026-01-01,
Zipf-like users). Prints, in one run on two copies of the same history:

* the first prune, of half the rows, in batches: total time, the longest batch (the
  longest any lock is held), rows per second;
* a daily prune afterwards (one more day: ~2,900 rows; after a VACUUM, as autovacuum
  would have run in between), and one that finds nothing;
* for comparison, every row before the same cutoff deleted by one ``DELETE ... WHERE
  ended_at < cutoff`` (one transaction holding every deleted row's lock until it ends; it
  also deletes the newest 100 jobs per user the prune keeps).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

import psycopg2
import sqlalchemy as sa
from psycopg2 import sql
from psycopg2.extensions import make_dsn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_hook import EPOCH, load  # noqa: E402

from softwalltime.db import engine as db  # noqa: E402
from softwalltime.db import retention  # noqa: E402
from softwalltime.db.localpg import LocalCluster  # noqa: E402


def _admin(dsn: str, statement: sql.Composable) -> None:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--batch-rows", type=int, default=retention.DEFAULT_BATCH_ROWS)
    args = ap.parse_args(argv)
    cluster = None
    admin_dsn = os.environ.get("SOFTWALLTIME_DSN")
    tmp = tempfile.mkdtemp(prefix="swt-bench-prune-")
    if not admin_dsn:
        cluster = LocalCluster(tmp)
        cluster.start()
        admin_dsn = cluster.dsn("postgres")
    names = [f"swt_prune_{os.getpid()}", f"swt_prune_{os.getpid()}_copy"]
    print(f"{os.cpu_count()} CPUs; load average at start: {os.getloadavg()[0]:.2f}")
    try:
        _admin(admin_dsn, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(names[0])))
        dsn = make_dsn(admin_dsn, dbname=names[0])
        load(dsn, args.rows, args.users)
        _admin(
            admin_dsn,
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(*map(sql.Identifier, names[::-1])),
        )
        # "now" such that half the rows ended before now - 30 days
        last = EPOCH + args.rows * 30
        now = dt.datetime.fromtimestamp((EPOCH + last) / 2, dt.timezone.utc)
        now += dt.timedelta(days=30)
        engine = db.make_engine(dsn, poolclass=sa.pool.NullPool)
        marks = [time.monotonic()]
        done = retention.prune(
            engine, 30, args.batch_rows, now=now, on_batch=lambda *_: marks.append(time.monotonic())
        )
        longest = max(b - a for a, b in zip(marks, marks[1:]))
        print(
            f"first prune: {done.finished_jobs:,} of {args.rows:,} rows in {done.batches}"
            f" batches of <= {args.batch_rows:,}, {done.seconds:.1f} s"
            f" ({done.finished_jobs / done.seconds:,.0f} rows/s); longest batch {longest:.3f} s;"
            f" each user's newest {done.keep_jobs} kept"
        )
        # a day later autovacuum has cleared the deleted rows' index entries
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("VACUUM finished_jobs")
        conn.close()
        daily = retention.prune(engine, 29, args.batch_rows, now=now)
        print(f"daily prune: {daily.finished_jobs:,} rows, {daily.seconds:.3f} s")
        nothing = retention.prune(engine, 29, args.batch_rows, now=now)
        print(f"nothing to prune: {nothing.seconds:.3f} s")
        engine.dispose()
        copy = psycopg2.connect(make_dsn(admin_dsn, dbname=names[1]))
        try:
            with copy, copy.cursor() as cur:
                start = time.monotonic()
                cur.execute("DELETE FROM finished_jobs WHERE ended_at < %s", (done.cutoff,))
                one = time.monotonic() - start
                print(
                    f"one DELETE of all {cur.rowcount:,} rows before the cutoff: {one:.1f} s in one"
                    f" transaction (batched/one = {done.seconds / one:.2f})"
                )
        finally:
            copy.close()
    finally:
        for name in names:
            _admin(admin_dsn, sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        if cluster:
            cluster.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
