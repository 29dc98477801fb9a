"""History retention: delete finished jobs that ended more than ``history_keep_days`` ago.

``finished_jobs`` otherwise grows forever (a busy site stores millions of rows a year),
while the predictors read each user's last few jobs and the reports a recent window. What
is deleted: the rows of ``finished_jobs`` that ended before the cutoff (``now -
history_keep_days``), and the rows of ``job_reruns`` (earlier runs) that ended before it,
unless their job's final row is kept. Never deleted, whatever their age: each user's newest
:data:`KEEP_JOBS_PER_USER` usable jobs on each server (more when ``v1_jobs`` or ``v3_jobs``
ask for more), so a user who has not run anything for ``history_keep_days`` keeps the
predictions and the rank the hook gives them. Nothing else: ``ingest_checkpoints`` stays, so the
ingester never reads those jobs again from the accounting files still on disk, and what
``calibrate`` learned stays learned.

Deleting is done in batches of at most ``batch_rows`` rows, each its own short
transaction with a ``lock_timeout``: the hook's reads never wait on it (readers do not
block on row deletes), the ingester's inserts touch other rows, and no lock is held longer
than one batch. The rows of a batch are found without scanning the table: usernames by a
loose index scan of ``ix_finished_jobs_user_recent`` (username, ended_at DESC, ...), and
each user's old rows by a range of that same index; then deleted by their ``ctid`` (a TID
scan), with the cutoff checked again in the ``DELETE``.

The hook's kept lookups: every ``DELETE`` of ``finished_jobs`` fires the statement trigger
of migration 0006, which increments ``history_version`` in the same transaction, so the
hook drops what it kept once a batch commits. A batch is only run when there are rows to
delete: a run with nothing to delete does not move the counter (the trigger fires on
every ``DELETE`` statement, even one that deletes nothing).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, Callable, NamedTuple, Optional

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..errors import UNDEFINED_TABLE, DatabaseError, SchemaMissingError

DEFAULT_BATCH_ROWS = 5000
# The newest jobs of each user (on each server) a prune always keeps, whatever their age:
# at least every row the hook's lookups read (hook/lookup.py's LIMITs: v1/v2 read
# v1_jobs (2), v3 v3_jobs (15), calibrated and the rank calibrated.HISTORY_ROWS (100));
# tests/test_db_prune.py ties it to those. Settings above it (v1_jobs, v3_jobs up to 1000)
# raise it for the run: see keep_jobs_for().
KEEP_JOBS_PER_USER = 100
# The jobs counted are those every lookup of the hook would read, were they among the
# newest: "runtime_s >= 0 AND walltime_s > 0 AND (ncpus IS NULL OR ncpus > 0)", the
# conjunction of the filters of RECENT_JOBS_SQL, RECENT_JOBS_WITH_WALLTIME_SQL and
# CLASS_JOBS_SQL (so at least KEEP_JOBS_PER_USER rows of each of them stay).
USABLE = "runtime_s >= 0 AND walltime_s > 0 AND (ncpus IS NULL OR ncpus > 0)"
MAX_BATCH_ROWS = 100_000
# Each batch waits at most this long for a lock (a migration, VACUUM FULL) and runs at
# most STATEMENT_TIMEOUT per statement; either ends the run with one line, batches done
# so far stay done.
LOCK_TIMEOUT = "5s"
STATEMENT_TIMEOUT = "120s"

# Usernames in order from :after on, one index probe each (a loose index scan; PostgreSQL
# has no skip scan before 18), and each one's rows older than the cutoff, a range of the
# same index. Every user before the last one a batch returns had all its old rows in the
# batch (a user's rows are cut only by the batch's LIMIT): the next batch starts at that
# last user, so a whole prune probes each user about once, not once per batch.
_OLD_JOBS = sa.text(
    "WITH RECURSIVE users(name) AS ("
    " (SELECT username FROM finished_jobs WHERE username >= :after"
    " ORDER BY username LIMIT 1)"
    " UNION ALL"
    " SELECT (SELECT f.username FROM finished_jobs f WHERE f.username > users.name"
    " ORDER BY f.username LIMIT 1) FROM users WHERE users.name IS NOT NULL)"
    " SELECT users.name, old.ctid::text FROM users"
    " CROSS JOIN LATERAL (SELECT DISTINCT server FROM finished_jobs f"
    " WHERE f.username = users.name) AS s"
    # the user's keep-th newest usable job on this server: older jobs may go
    " CROSS JOIN LATERAL (SELECT ended_at, job_seq FROM finished_jobs f"
    " WHERE f.username = users.name AND f.server = s.server AND runtime_s >= 0"
    " AND walltime_s > 0 AND (ncpus IS NULL OR ncpus > 0)"
    " ORDER BY ended_at DESC, job_seq DESC OFFSET :keep - 1 LIMIT 1) AS kept"
    " CROSS JOIN LATERAL ("
    " SELECT f.ctid FROM finished_jobs f WHERE f.username = users.name"
    " AND f.server = s.server AND f.ended_at < :cutoff AND f.ended_at <= kept.ended_at"
    " AND (f.ended_at, f.job_seq) < (kept.ended_at, kept.job_seq) LIMIT :n) AS old"
    " WHERE users.name IS NOT NULL LIMIT :n"
)
_DELETE_JOBS = sa.text(
    "DELETE FROM finished_jobs WHERE ctid = ANY(CAST(:ctids AS tid[])) AND ended_at < :cutoff"
)
# A rerun (an earlier run of a job) goes when it ended before the cutoff and its job's
# final row is not stored (any more: the reruns are pruned after the finished jobs).
_DELETE_RERUNS = sa.text(
    "DELETE FROM job_reruns WHERE ctid = ANY(ARRAY(SELECT r.ctid FROM job_reruns r"
    " WHERE r.ended_at < :cutoff AND NOT EXISTS (SELECT FROM finished_jobs f"
    " WHERE f.server = r.server AND f.job_id = r.job_id AND f.ctime = r.ctime) LIMIT :n))"
)
# --dry-run: the same choice in one read (a scan of the table, deleting nothing).
_COUNT_OLD = sa.text(
    "WITH kept AS (SELECT username, server, ended_at, job_seq FROM ("
    " SELECT username, server, ended_at, job_seq, row_number() OVER (PARTITION BY"
    " username, server ORDER BY ended_at DESC, job_seq DESC) AS n"
    " FROM finished_jobs WHERE runtime_s >= 0 AND walltime_s > 0"
    " AND (ncpus IS NULL OR ncpus > 0)) AS ranked WHERE n = :keep),"
    " old AS (SELECT f.server, f.job_id, f.ctime FROM finished_jobs f"
    " JOIN kept k ON k.username = f.username AND k.server = f.server"
    " WHERE f.ended_at < :cutoff AND (f.ended_at, f.job_seq) < (k.ended_at, k.job_seq))"
    " SELECT (SELECT count(*) FROM old), (SELECT count(*) FROM job_reruns r"
    " WHERE r.ended_at < :cutoff AND NOT EXISTS (SELECT FROM finished_jobs f"
    " WHERE f.server = r.server AND f.job_id = r.job_id AND f.ctime = r.ctime"
    " AND NOT EXISTS (SELECT FROM old o WHERE o.server = f.server"
    " AND o.job_id = f.job_id AND o.ctime = f.ctime)))"
)


class Pruned(NamedTuple):
    """What a prune deleted (or, with ``dry_run``, would delete)."""

    cutoff: dt.datetime
    keep_days: int
    keep_jobs: int
    finished_jobs: int
    job_reruns: int
    batches: int
    seconds: float
    dry_run: bool


def cutoff_for(keep_days: int, now: Optional[dt.datetime] = None) -> dt.datetime:
    """The instant before which jobs are deleted: ``now - keep_days`` days (UTC)."""
    if keep_days < 1:
        raise ValueError(f"keep_days must be at least 1, got {keep_days}")
    return (now or dt.datetime.now(dt.timezone.utc)) - dt.timedelta(days=keep_days)


def keep_jobs_for(settings: Any) -> int:
    """The newest jobs per user and server a prune keeps with these settings: at least
    :data:`KEEP_JOBS_PER_USER`, more when ``v1_jobs`` or ``v3_jobs`` read more."""
    return max(KEEP_JOBS_PER_USER, int(settings.v1_jobs), int(settings.v3_jobs))


def _limits(conn: Connection) -> None:
    conn.execute(sa.text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
    conn.execute(sa.text(f"SET LOCAL statement_timeout = '{STATEMENT_TIMEOUT}'"))


def _failed(err: sa.exc.SQLAlchemyError) -> DatabaseError:
    if getattr(getattr(err, "orig", None), "pgcode", None) == UNDEFINED_TABLE:
        return SchemaMissingError()
    lines = str(getattr(err, "orig", None) or err).strip().splitlines()
    return DatabaseError(f"db prune failed: {lines[0] if lines else type(err).__name__}")


def count_old(
    engine: Engine, cutoff: dt.datetime, keep_jobs: int = KEEP_JOBS_PER_USER
) -> tuple[int, int]:
    """(finished jobs, reruns) a prune at ``cutoff`` would delete; changes nothing."""
    try:
        with engine.connect() as conn:
            _limits(conn)
            row = conn.execute(_COUNT_OLD, {"cutoff": cutoff, "keep": keep_jobs}).one()
            jobs, reruns = int(row[0]), int(row[1])
            conn.rollback()
    except sa.exc.SQLAlchemyError as err:
        raise _failed(err) from err
    return jobs, reruns


class _Jobs:
    """Batches of old finished jobs, users in order: ``after`` is where the next starts."""

    def __init__(self, keep_jobs: int) -> None:
        self.after = ""
        self.keep = keep_jobs

    def __call__(self, conn: Connection, cutoff: dt.datetime, n: int) -> int:
        """Delete up to ``n`` old finished jobs in this transaction; how many went."""
        where = {"cutoff": cutoff, "n": n, "after": self.after, "keep": self.keep}
        found = conn.execute(_OLD_JOBS, where).all()
        if not found:
            return 0  # no DELETE: the change counter stays where it is
        self.after = found[-1][0]
        ctids = [ctid for _, ctid in found]
        return int(conn.execute(_DELETE_JOBS, {"ctids": ctids, "cutoff": cutoff}).rowcount)


def _reruns_batch(conn: Connection, cutoff: dt.datetime, n: int) -> int:
    return int(conn.execute(_DELETE_RERUNS, {"cutoff": cutoff, "n": n}).rowcount)


def prune(
    engine: Engine,
    keep_days: int,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    now: Optional[dt.datetime] = None,
    on_batch: Optional[Callable[[int, int], None]] = None,
    keep_jobs: int = KEEP_JOBS_PER_USER,
) -> Pruned:
    """Delete the history older than ``keep_days``, one committed batch at a time.

    :param batch_rows: rows per transaction, 1 to :data:`MAX_BATCH_ROWS`
    :param on_batch: called after each committed batch with (jobs so far, reruns so far)
    :param keep_jobs: each user's newest usable jobs on each server that stay whatever
        their age (at least 1; :func:`keep_jobs_for` gives the command's)
    :raises SchemaMissingError: no history tables
    :raises DatabaseError: a batch failed (lock wait, timeout, server gone); the batches
        committed before it stay deleted
    """
    if not 1 <= batch_rows <= MAX_BATCH_ROWS:
        raise ValueError(f"batch_rows must be 1 to {MAX_BATCH_ROWS}, got {batch_rows}")
    if keep_jobs < 1:
        raise ValueError(f"keep_jobs must be at least 1, got {keep_jobs}")
    cutoff = cutoff_for(keep_days, now)
    start = time.monotonic()
    done = {"finished_jobs": 0, "job_reruns": 0}
    batches = 0
    batchers: tuple[tuple[str, Callable[[Connection, dt.datetime, int], int]], ...] = (
        ("finished_jobs", _Jobs(keep_jobs)),
        ("job_reruns", _reruns_batch),
    )
    for table, batch in batchers:
        while True:
            try:
                with engine.begin() as conn:
                    _limits(conn)
                    deleted = batch(conn, cutoff, batch_rows)
            except sa.exc.SQLAlchemyError as err:
                raise _failed(err) from err
            if not deleted:
                break
            batches += 1
            done[table] += deleted
            if on_batch:
                on_batch(done["finished_jobs"], done["job_reruns"])
    seconds = time.monotonic() - start
    jobs, reruns = done["finished_jobs"], done["job_reruns"]
    return Pruned(cutoff, keep_days, keep_jobs, jobs, reruns, batches, seconds, False)


def dry_run(
    engine: Engine,
    keep_days: int,
    now: Optional[dt.datetime] = None,
    keep_jobs: int = KEEP_JOBS_PER_USER,
) -> Pruned:
    """What :func:`prune` would delete now, deleting nothing."""
    if keep_jobs < 1:
        raise ValueError(f"keep_jobs must be at least 1, got {keep_jobs}")
    cutoff = cutoff_for(keep_days, now)
    start = time.monotonic()
    jobs, reruns = count_old(engine, cutoff, keep_jobs)
    seconds = time.monotonic() - start
    return Pruned(cutoff, keep_days, keep_jobs, jobs, reruns, 0, seconds, True)
