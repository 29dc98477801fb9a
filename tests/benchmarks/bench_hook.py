"""Benchmark: the hook's decision time (history lookup + decide) over 1M rows / 10k users.

Usage::

    python tests/benchmarks/bench_hook.py [--rows N] [--users N] [--warm N] [--cold N]

The database is a throwaway one: on the server of ``$SOFTWALLTIME_DSN`` (a role allowed to
CREATE DATABASE; the benchmark database is dropped afterwards), else a private cluster
started with initdb/pg_ctl in ``.bench/pg`` (removed afterwards). Prints figures to stdout.

Timed path = what the hook runs per event after its imports: ``decide.decide(...)`` with
``lookup.fetcher(settings)`` inside ``lookup.event(deadline)``, with
``history_cache_entries=0``: one indexed query per decision (random users: the hook's kept
lookups help bursts, not this).
* warm: the module-level cached connection is reused (pbs_server keeps modules alive);
* kept: one user's burst with the default ``history_cache_entries`` (one query, then the
  lookup kept while the history's change counter does not move; the counter read once per
  ``history_recheck_ms``, as the hook does, and, on a second line, at every event);
* cold: the cache is dropped before every decision (a new connection each time);
* hook script: the whole hook file run with runpy and the fake pbs module, warm (an upper
  bound: runpy recompiles the file each time, pbs_server caches the compiled script).
Targets on a 2-core machine: warm p99 < 1 ms, cold p99 < 10 ms.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import make_dsn

from softwalltime.core import calibrated, decide, rank
from softwalltime.core.config import hook_bound_s, load_settings, redact_dsn
from softwalltime.core.predict import PREDICTORS, predict
from softwalltime.db import engine as db
from softwalltime.db.localpg import LocalCluster
from softwalltime.hook import lookup, pgwire
from softwalltime.replay.calibrate import store_table
from softwalltime.replay.calibrate_learned import store_learned
from softwalltime.replay.prior import load_learned_prior

REPO = Path(__file__).resolve().parents[2]
EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z


def _rows(n_rows: int, n_users: int, seed: int) -> Iterator[str]:
    """COPY text lines: a year of finished jobs, users of very different activity."""
    rng = random.Random(seed)
    walltimes = [3600, 2 * 3600, 4 * 3600, 12 * 3600, 24 * 3600, 48 * 3600, 168 * 3600]
    # Zipf-like activity: a few users submit most jobs, as on real clusters.
    weights = [1.0 / (i + 1) ** 0.8 for i in range(n_users)]
    users = rng.choices(range(n_users), weights=weights, k=n_rows)
    for seq in range(1, n_rows + 1):
        user = users[seq - 1]
        wall = rng.choice(walltimes)
        runtime = int(wall * rng.betavariate(0.7, 2.0))
        ended = EPOCH + seq * 30
        ctime = ended - runtime - rng.randint(0, 7200)
        ncpus = rng.choice((1, 1, 2, 4, 8, 16))
        yield (
            f"pbs01\t{seq}.pbs01\t{ctime}\t{seq}\tuser{user:05d}\t{wall}\t{runtime}\t{ended}"
            f"\t{ncpus}\n"
        )


def chunks(lines: Iterator[str]) -> Iterator[str]:
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) == 5000:
            yield "".join(batch)
            batch = []
    if batch:
        yield "".join(batch)


class ChunkStream(io.TextIOBase):
    """A file-like view of a chunk generator, for COPY FROM STDIN (bench_report too)."""

    def __init__(self, chunks: Iterator[str]) -> None:
        self._chunks = chunks
        self._buf = ""

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> str:
        want = 1 << 16 if size is None or size < 0 else size
        while len(self._buf) < want:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buf += chunk
        out, self._buf = self._buf[:want], self._buf[want:]
        return out


def load(dsn: str, n_rows: int, n_users: int) -> None:
    """Create the schema and COPY the history in, then VACUUM ANALYZE."""
    engine = db.make_engine(dsn)
    with engine.connect() as conn:
        db.upgrade(conn, "head")
        conn.commit()
    engine.dispose()
    conn = psycopg2.connect(dsn)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            # Synchronous commit, so VACUUM can mark the pages all-visible right away
            # (index-only scans then skip the heap), as on a production server.
            cur.execute("SET synchronous_commit TO on")
            cur.execute("SET maintenance_work_mem TO '256MB'")
            start = time.perf_counter()
            cur.execute("CREATE TEMP TABLE raw (server text, job_id text, ctime bigint,"
                        " job_seq bigint, username text, walltime_s int, runtime_s int,"
                        " ended bigint, ncpus int)")  # fmt: skip
            cur.copy_expert("COPY raw FROM STDIN", ChunkStream(chunks(_rows(n_rows, n_users, 42))))
            cur.execute(
                "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username,"
                " walltime_s, runtime_s, started_at, ended_at, source_file, ncpus)"
                " SELECT server, job_id, to_timestamp(ctime), job_seq, username, walltime_s,"
                " runtime_s, to_timestamp(ended - runtime_s), to_timestamp(ended), 'bench',"
                " ncpus FROM raw"
            )
            cur.execute("DROP TABLE raw")
            loaded = time.perf_counter() - start
            cur.execute("VACUUM ANALYZE finished_jobs")
            cur.execute("SELECT count(*), count(DISTINCT username) FROM finished_jobs")
            rows, users = cur.fetchone()
            cur.execute("SELECT pg_size_pretty(pg_total_relation_size('finished_jobs'))")
            size = cur.fetchone()[0]
    finally:
        conn.close()
    print(f"history: {rows} rows, {users} users, {size} on disk; COPY+INSERT {loaded:.1f} s")
    _fill_calibration(dsn)


def _fill_calibration(dsn: str) -> None:
    """A full calibration table (every bin and rule: the largest the hook can read)."""
    rng = random.Random(11)
    table = calibrated.Calibration()
    for bin_ in range(calibrated.BINS):
        base = bin_ * len(calibrated.RULES)
        table.jobs[bin_] = 1000
        for rule in range(len(calibrated.RULES)):
            table.under[base + rule] = rng.randint(0, 300)
            table.acc[base + rule] = rng.uniform(100.0, 900.0)
    engine = db.make_engine(dsn)
    with engine.begin() as conn:
        cells = store_table(conn, table, 12.0)
    engine.dispose()
    print(f"calibration table: {cells} cells (every bin and rule)")


def _fill_learned(dsn: str) -> None:
    """Predictor learned's table: the shipped prior (every bin it has; what the hook reads
    is one row of the same size whatever the table)."""
    engine = db.make_engine(dsn)
    with engine.begin() as conn:
        cells = store_learned(conn, load_learned_prior(), "fixed", 12.0, True)
    engine.dispose()
    print(f"learned table: {cells} cells (the shipped prior)")


def _stats(name: str, samples_s: list[float]) -> None:
    ms = sorted(s * 1000 for s in samples_s)
    n = len(ms)
    p50 = ms[n // 2]
    p99 = ms[min(n - 1, int(n * 0.99))]
    print(
        f"{name:<34} n={n:<6} p50={p50:7.3f} ms  p99={p99:7.3f} ms  max={ms[-1]:8.3f} ms"
        f"  mean={statistics.fmean(ms):7.3f} ms"
    )


def _decisions(
    settings, users: list[str], n: int, cold: bool, seed: int, reread: bool = False
) -> list[float]:
    rng = random.Random(seed)
    fetch = lookup.fetcher(settings)
    site = lookup.site_fetcher(settings)
    walltimes = [3600, 4 * 3600, 24 * 3600, 48 * 3600]
    samples = []
    sets = ranks = 0
    for _ in range(n):
        user = rng.choice(users)
        wall = rng.choice(walltimes)
        ncpus = rng.choice((1, 2, 4, 8, 16))
        if cold:
            lookup.close_cached()
        if reread:
            lookup.forget_calibration()
            lookup.forget_learned()
        start = time.perf_counter()
        recheck_s = settings.history_recheck_ms / 1000.0
        with lookup.event(time.monotonic() + hook_bound_s(settings), recheck_s):
            job = decide.JobEvent("queuejob", user, "workq", wall, None, ncpus=ncpus)
            d = decide.decide(job, settings, fetch, site=site)
        samples.append(time.perf_counter() - start)
        sets += d.soft_walltime_s is not None
        ranks += d.rank_to_set_s is not None
    if sets != n:
        raise SystemExit(f"bench: only {sets} of {n} decisions set a soft walltime")
    if settings.rank != "off" and ranks != n:
        raise SystemExit(f"bench: only {ranks} of {n} decisions set a rank")
    return samples


def _bare_connects(dsn: str, n: int, driver: str) -> list[float]:
    """The machine's floor for a cold decision: connect, one trivial query, close.

    ``psycopg2`` is libpq's blocking connect; ``pgwire`` the hook's own client.
    """
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        if driver == "psycopg2":
            conn = psycopg2.connect(dsn)
            with conn.cursor() as cur:
                cur.execute("SELECT 1")
                cur.fetchall()
        else:
            conn = pgwire.connect(dsn, time.monotonic() + 5)
            conn.query("SELECT 1", (), time.monotonic() + 5)
        samples.append(time.perf_counter() - start)
        conn.close()
    return samples


def _warm_queries(dsn: str, users: list[str], n: int, driver: str) -> list[float]:
    """The lookup query alone on one open connection: the driver's own cost per event.

    pgwire keeps it prepared, as the hook does; psycopg2 sends it as the old hook did.
    """
    rng = random.Random(4)
    samples = []
    if driver == "psycopg2":
        pconn = psycopg2.connect(dsn)
        pconn.autocommit = True
        cur = pconn.cursor()
        pg_sql = lookup.RECENT_JOBS_WITH_WALLTIME_SQL.replace("$1", "%s").replace("$2", "%s")
        for _ in range(n):
            user = rng.choice(users)
            start = time.perf_counter()
            cur.execute(pg_sql, (user, 15))
            cur.fetchall()
            samples.append(time.perf_counter() - start)
        pconn.close()
        return samples
    conn = pgwire.connect(dsn, time.monotonic() + 5)
    for _ in range(n):
        user = rng.choice(users)
        start = time.perf_counter()
        conn.query(
            lookup.RECENT_JOBS_WITH_WALLTIME_SQL, (user, 15), time.monotonic() + 5, prepare=True
        )
        samples.append(time.perf_counter() - start)
    conn.close()
    return samples


def _hook_runs(settings_path: str, users: list[str], n: int, ranked: bool = False) -> list[float]:
    spec = importlib.util.spec_from_file_location("pbs", REPO / "tests" / "fakes" / "pbs.py")
    assert spec and spec.loader
    pbs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pbs)
    sys.modules["pbs"] = pbs
    pbs.hook_config_filename = settings_path
    if ranked:  # hooks install --rank created the resource
        pbs.define_resource(rank.RANK_RESOURCE, int)
    hook = str(REPO / "hooks" / "softwalltime_hook.py")
    rng = random.Random(7)
    samples = []
    for _ in range(n):
        job = pbs.job(resources={"walltime": "24:00:00"})
        pbs.new_event(pbs.QUEUEJOB, rng.choice(users), job)
        start = time.perf_counter()
        out = pbs.run_hook(hook)
        samples.append(time.perf_counter() - start)
        if out["soft_walltime"] is None:
            raise SystemExit(f"bench: hook set nothing: {pbs.logged}")
        if ranked and job.Resource_List[rank.RANK_RESOURCE] is None:
            raise SystemExit(f"bench: hook set no rank: {pbs.logged}")
    return samples


def _predict_throughput() -> None:
    """predict() alone, as the replay evaluator calls it: 15-row histories, default params."""
    rng = random.Random(5)
    histories = [
        [(rng.randint(0, 86400), rng.choice([None, 3600, 86400])) for _ in range(15)]
        for _ in range(1000)
    ]
    figures = []
    for predictor in PREDICTORS:
        start = time.perf_counter()
        for _ in range(100):
            for history in histories:
                predict(predictor, 86400, history)
        figures.append(f"{predictor} {100_000 / (time.perf_counter() - start):,.0f}/s")
    print("predict() calls per second (15-job history): " + ", ".join(figures))


def _explain(dsn: str, user: str) -> None:
    """The plan of the statement exactly as the hook sends it (extended protocol, $1 $2)."""
    conn = lookup.connect(dsn, 5.0, 10000)
    try:
        rows = conn.query(
            "EXPLAIN (ANALYZE, BUFFERS) " + lookup.RECENT_JOBS_WITH_WALLTIME_SQL,
            (user, 15),
            time.monotonic() + 10,
        )
        print(f"EXPLAIN (ANALYZE, BUFFERS) of the v3 lookup for {user}:")
        for (line,) in rows:
            print("    " + line)
        rows = conn.query(
            "EXPLAIN (ANALYZE, BUFFERS) " + lookup.CLASS_JOBS_SQL,
            (user, calibrated.HISTORY_ROWS),
            time.monotonic() + 10,
        )
        print(f"EXPLAIN (ANALYZE, BUFFERS) of the calibrated lookup for {user}:")
        for (line,) in rows:
            print("    " + line)
        for what, statement, params in (
            ("v3", lookup.V3_WITH_CLASSES_SQL, (user, calibrated.HISTORY_ROWS)),
            ("v1", lookup.both_sql(False, False), (user, 2, calibrated.HISTORY_ROWS)),
        ):
            rows = conn.query(
                "EXPLAIN (ANALYZE, BUFFERS) " + statement, params, time.monotonic() + 10
            )
            print(f"EXPLAIN (ANALYZE, BUFFERS) of the {what} lookup with the rank's rows:")
            for (line,) in rows:
                print("    " + line)
    finally:
        conn.close()


def _connect_timeout_check() -> None:
    """Show libpq's connect_timeout floor and the wall-clock bound used instead."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    port = sock.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    dsn = f"postgresql://x@127.0.0.1:{port}/x"
    try:
        start = time.perf_counter()
        try:
            psycopg2.connect(dsn, connect_timeout=1).close()
        except psycopg2.OperationalError:
            pass
        libpq_s = time.perf_counter() - start
        start = time.perf_counter()
        try:
            lookup.connect(dsn, 1.0, 250)
        except Exception:  # noqa: BLE001 - only the time matters here
            pass
        ours_s = time.perf_counter() - start
    finally:
        stop.set()
        thread.join()
        for s in held:
            s.close()
        sock.close()
    print(
        f"hanging server (accepts, never answers): libpq {psycopg2.__libpq_version__}"
        f" connect_timeout=1 gave up after "
        f"{libpq_s:.2f} s; lookup.connect(connect_timeout_s=1.0) after {ours_s:.2f} s"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--warm", type=int, default=20_000, help="warm decisions to time")
    ap.add_argument("--cold", type=int, default=2_000, help="cold decisions to time")
    ap.add_argument("--hook-runs", type=int, default=2_000, help="whole-hook runs to time")
    args = ap.parse_args(argv)

    cluster = None
    admin_dsn = os.environ.get("SOFTWALLTIME_DSN")
    if admin_dsn:
        admin_dsn = make_dsn(admin_dsn)
    else:
        cluster = LocalCluster(REPO / ".bench" / "pg")
        cluster.start()
        admin_dsn = cluster.dsn("postgres")
    name = f"swt_bench_{os.getpid()}"
    admin = psycopg2.connect(admin_dsn)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = make_dsn(admin_dsn, dbname=name)
    where = "a private cluster in .bench/pg" if cluster else "the SOFTWALLTIME_DSN server"
    print(f"database: {redact_dsn(dsn)} ({where}); {os.cpu_count()} CPUs")
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    try:
        load(dsn, args.rows, args.users)
        conn = psycopg2.connect(dsn)
        with conn.cursor() as cur:
            cur.execute("SELECT username FROM finished_jobs GROUP BY username")
            users = [u for (u,) in cur.fetchall()]
            cur.execute(
                "SELECT username FROM finished_jobs GROUP BY username"
                " ORDER BY count(*) DESC LIMIT 1"
            )
            busiest = cur.fetchone()[0]
        conn.close()
        settings = load_settings(environ={}, overrides={"dsn": dsn, "history_cache_entries": 0})
        print(
            f"settings: predictor {settings.predictor}, connect_timeout_s "
            f"{settings.connect_timeout_s}, statement_timeout_ms {settings.statement_timeout_ms}"
        )
        _decisions(settings, users, 500, cold=False, seed=1)  # warm up the buffer cache
        _stats("warm (cached connection)", _decisions(settings, users, args.warm, False, 2))
        ranked = settings._replace(rank=rank.NAME)  # the same jobs, with the sort rank
        _decisions(ranked, users, 500, cold=False, seed=1)
        _stats("warm, rank key-mean", _decisions(ranked, users, args.warm, False, 2))
        _stats("cold (new connection each)", _decisions(settings, users, args.cold, True, 3))
        kept = settings._replace(history_cache_entries=1000)
        _stats("kept (one user's burst)", _decisions(kept, [busiest], args.warm, False, 7))
        every = kept._replace(history_recheck_ms=0)
        _stats("kept, counter read every event", _decisions(every, [busiest], args.warm, False, 8))
        for driver in ("pgwire", "psycopg2"):
            _stats(f"connect+SELECT 1+close, {driver}", _bare_connects(dsn, args.cold, driver))
        for driver in ("pgwire", "psycopg2"):
            _stats(f"lookup query alone, {driver}", _warm_queries(dsn, users, args.warm, driver))
        cal_settings = settings._replace(predictor="calibrated")
        _decisions(cal_settings, users, 500, cold=False, seed=4)
        _stats(
            "calibrated, warm (table cached)", _decisions(cal_settings, users, args.warm, False, 5)
        )
        _stats(
            "calibrated, warm, table re-read",
            _decisions(cal_settings, users, max(200, args.cold // 4), False, 6, reread=True),
        )
        _fill_learned(dsn)
        learned = settings._replace(predictor="learned", rank="learned")
        _decisions(learned, users, 500, cold=False, seed=4)
        _stats("learned+rank, warm (table cached)", _decisions(learned, users, args.warm, False, 5))
        _stats(
            "learned+rank, warm, table re-read",
            _decisions(learned, users, max(200, args.cold // 4), False, 6, reread=True),
        )
        lookup.close_cached()
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump({"dsn": dsn, "history_cache_entries": 0}, fh)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fr:
            json.dump({"dsn": dsn, "history_cache_entries": 0, "rank": rank.NAME}, fr)
        try:
            _stats("hook script via runpy, warm", _hook_runs(fh.name, users, args.hook_runs))
            lookup.close_cached()
            _stats(
                "hook script, rank key-mean",
                _hook_runs(fr.name, users, args.hook_runs, ranked=True),
            )
        finally:
            os.unlink(fh.name)
            os.unlink(fr.name)
            lookup.close_cached()
        _explain(dsn, busiest)
        _predict_throughput()
        _connect_timeout_check()
        print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    finally:
        lookup.close_cached()
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
