"""Rows into PostgreSQL: batched COPY into temporary staging tables, then one
``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` per table, and the file's checkpoint, all
in ONE transaction. A crash at any point leaves either the whole batch with its
checkpoint or neither, and the upsert on the natural key makes any re-read harmless.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import queue
import sys
import threading
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import psycopg2
import psycopg2.errors

from softwalltime.accounting import E_FIELDS, FINISHED_JOB_COLUMNS, RERUN_COLUMNS
from softwalltime.core.config import libpq_dsn
from softwalltime.core.locks import INGEST_LOCK_KEY
from softwalltime.errors import DatabaseError, SchemaMissingError

from .files import Checkpoint
from .live import DELETED, LIVE_COLUMNS

log = logging.getLogger(__name__)

LOCK_KEY = INGEST_LOCK_KEY  # taken by every ingester on a database (softwalltime.core.locks)
CONNECT_TIMEOUT_S = 5
# Waits of the ingester's session: on a table lock another session holds (an ALTER, a
# VACUUM FULL) it gives up after LOCK_TIMEOUT_S with one line instead of waiting forever
# with the ingest lock held; no statement runs longer than STATEMENT_TIMEOUT_S (a batch
# takes seconds). 60 s rides out the short locks of routine work (a migration's ALTER takes
# milliseconds) and ends a blocked run well before cron starts the next (every 5 minutes),
# which then finds the ingest lock free and reads the same lines again.
LOCK_TIMEOUT_S = 60
_LOCK_NOT_AVAILABLE = "55P03"  # SQLSTATE of a lock_timeout
STATEMENT_TIMEOUT_S = 600
# The holder of the ingest lock, from pg_locks (a bigint advisory key is classid:objid,
# objsubid 1) and pg_stat_activity; backend_start: the holder locks right after connecting.
_LOCK_HOLDER_SQL = (
    "SELECT a.pid, a.application_name, coalesce(host(a.client_addr), 'local socket'),"
    " a.backend_start, extract(epoch FROM now() - a.backend_start)"
    " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
    " AND l.classid = %s::bigint::oid AND l.objid = %s::bigint::oid"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


class LockHolder(NamedTuple):
    """Who holds the ingest lock: PostgreSQL backend, its application name (our pid), since."""

    backend_pid: int
    application_name: str
    client: str
    since: Any
    held_s: float

    def describe(self) -> str:
        return (
            f"PostgreSQL backend {self.backend_pid} ({self.application_name or 'no name'},"
            f" {self.client}) since {self.since:%Y-%m-%d %H:%M:%S %Z}, {self.held_s:.0f} s ago"
        )


# Appended by copy_line() to every staged row: where the record came from.
_SOURCE_COLUMNS = ("source_file", "source_offset")
# The staging tables' types: the E record's from accounting.E_FIELDS (job_reruns and
# live_jobs use the same names), plus live_jobs' own; any other column is an integer.
_TIME_COLUMNS = {f.column for f in E_FIELDS if f.kind == "epoch"} | {"qtime", "event_at"}
_BIGINT_COLUMNS = {f.column for f in E_FIELDS if f.kind in ("seq", "size")}
_TEXT_COLUMNS = {f.column for f in E_FIELDS if f.kind in ("server", "ident", "text")} | {"state"}


def _stage_ddl(name: str, columns: Tuple[str, ...]) -> str:
    cols = []
    for col in columns + _SOURCE_COLUMNS:
        if col in _TEXT_COLUMNS or col == "source_file":
            kind = "text"
        elif col in _TIME_COLUMNS or col in _BIGINT_COLUMNS or col == "source_offset":
            kind = "bigint"  # epoch seconds: converted by to_timestamp() in the INSERT
        else:
            kind = "integer"
        cols.append(f"{col} {kind}")
    # ON COMMIT DELETE ROWS: every batch starts from an empty staging table.
    return "CREATE TEMPORARY TABLE {} ({}) ON COMMIT DELETE ROWS".format(name, ", ".join(cols))


def _insert_sql(table: str, stage: str, columns: Tuple[str, ...], on_conflict: str) -> str:
    exprs = [f"to_timestamp({c})" if c in _TIME_COLUMNS else c for c in columns + _SOURCE_COLUMNS]
    # Identifiers are constants of this module; only values are data, and they travel by COPY.
    return "INSERT INTO {t} ({cols}) SELECT {exprs} FROM {s}{c}".format(  # noqa: S608
        t=table,
        cols=", ".join(columns + _SOURCE_COLUMNS),
        exprs=", ".join(exprs),
        s=stage,
        c=on_conflict,
    )


_STAGE_JOBS = "swt_stage_jobs"
_STAGE_RERUNS = "swt_stage_reruns"
_STAGE_LIVE = "swt_stage_live"
_STAGE_GONE = "swt_stage_gone"
_GONE_DDL = f"CREATE TEMPORARY TABLE {_STAGE_GONE} (server text, job_id text) ON COMMIT DELETE ROWS"
# live_jobs (ingest/live.py). Statements in this order, in the batch's transaction, after
# its finished jobs are stored: the jobs that ended (E) leave; the jobs deleted (D, A)
# become tombstones; then the batch's states (one per job: run.py folds the batch) are
# written, except for jobs finished_jobs has (an E read before a Q) and over tombstones,
# and only if the state began no earlier than the stored one (a file read again).
_LIVE_ENDED = (
    f"DELETE FROM live_jobs l USING {_STAGE_JOBS} s WHERE l.server = s.server"  # noqa: S608
    " AND l.job_id = s.job_id AND l.ctime = to_timestamp(s.ctime)"
)
_LIVE_GONE = (
    f"UPDATE live_jobs l SET state = '{DELETED}', updated_at = now() FROM {_STAGE_GONE} g"  # noqa: S608
    f" WHERE l.server = g.server AND l.job_id = g.job_id AND l.state <> '{DELETED}'"
)
_LIVE_SOURCE = _insert_sql("live_jobs", _STAGE_LIVE, LIVE_COLUMNS, "").replace(
    f"FROM {_STAGE_LIVE}", f"FROM {_STAGE_LIVE} s"
)
_NOT_FINISHED = (
    " AND NOT EXISTS (SELECT 1 FROM finished_jobs f WHERE f.server = s.server"
    " AND f.job_id = s.job_id AND f.ctime = to_timestamp(s.ctime))"
)
_UPDATED = ", ".join(f"{c} = EXCLUDED.{c}" for c in LIVE_COLUMNS[3:] + _SOURCE_COLUMNS)
_LIVE_STATES = (
    _LIVE_SOURCE
    + f" WHERE s.state <> '{DELETED}'"
    + _NOT_FINISHED
    + " ON CONFLICT (server, job_id, ctime) DO UPDATE SET "
    + _UPDATED
    + ", updated_at = now()"
    + f" WHERE live_jobs.state <> '{DELETED}' AND EXCLUDED.event_at >= live_jobs.event_at"
)
_LIVE_TOMBSTONES = (
    _LIVE_SOURCE
    + f" WHERE s.state = '{DELETED}'"
    + _NOT_FINISHED
    + f" ON CONFLICT (server, job_id, ctime) DO UPDATE SET state = '{DELETED}',"
    " updated_at = now()"
    f" WHERE live_jobs.state <> '{DELETED}'"
)
# Rows no record will end: a state older than stale_s (its E or D was never read: a
# file missed, a server that died), and tombstones kept tombstone_s after the deletion.
_LIVE_PURGE = (
    "DELETE FROM live_jobs WHERE (state = 'deleted' AND updated_at < now() - %s * interval"
    " '1 second') OR (state <> 'deleted' AND event_at < now() - %s * interval '1 second')"
)
assert DELETED == "deleted"
_LIVE_COUNTS = "SELECT state, count(*) FROM live_jobs GROUP BY state"
# A plain INSERT costs about half of INSERT ... ON CONFLICT DO NOTHING (no speculative
# insertion), and new rows are the rule: it is tried first, under a savepoint; a batch
# holding a row already stored (a re-read) raises unique_violation, and that batch is
# inserted again with ON CONFLICT DO NOTHING.
_INSERTS = {
    table: (
        _insert_sql(table, stage, columns, ""),
        _insert_sql(table, stage, columns, " ON CONFLICT DO NOTHING"),
    )
    for table, stage, columns in (
        ("finished_jobs", _STAGE_JOBS, FINISHED_JOB_COLUMNS),
        ("job_reruns", _STAGE_RERUNS, RERUN_COLUMNS),
    )
}
# Every checkpoint of a batch in one statement (a batch of small daily files covers many).
_UPSERT_CHECKPOINTS = (
    "INSERT INTO ingest_checkpoints (path, inode, fingerprint, byte_offset, line_number, "
    "updated_at) SELECT path, inode, fingerprint, byte_offset, line_number, now() "
    "FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::bigint[], %s::bigint[]) "
    "AS c(path, inode, fingerprint, byte_offset, line_number) "
    "ON CONFLICT (path) DO UPDATE SET inode = EXCLUDED.inode, "
    "fingerprint = EXCLUDED.fingerprint, byte_offset = EXCLUDED.byte_offset, "
    "line_number = EXCLUDED.line_number, updated_at = EXCLUDED.updated_at"
)


def connect(dsn: str) -> Any:
    """Open a psycopg2 connection for the ingester (no statement timeout: batches are big).

    :param dsn: libpq DSN or SQLAlchemy URL
    :raises DatabaseError: cannot connect; the message never contains a password
    """
    try:
        return psycopg2.connect(
            libpq_dsn(dsn),
            connect_timeout=CONNECT_TIMEOUT_S,
            application_name=f"softwalltime-ingest pid={os.getpid()}",
            options=f"-c lock_timeout={LOCK_TIMEOUT_S}s"
            f" -c statement_timeout={STATEMENT_TIMEOUT_S}s",
        )
    except psycopg2.Error as err:
        # Imported here: softwalltime.db.engine loads SQLAlchemy, ~0.2 s of every run's start.
        from softwalltime.db.engine import describe_connect_error

        raise DatabaseError(describe_connect_error(dsn, err)) from err


@contextlib.contextmanager
def psycopg2_prints_muted() -> Iterator[None]:
    """While in the block, drop the exception chain psycopg2 prints when the server ends
    the session during a COPY (a stopped server, pg_terminate_backend).

    psycopg2 (2.9, ``_pq_copy_in_v3``) raises the server's error, then reads the next result
    of the dead connection and decodes its message while that error is still set: the
    decoder's SystemError ("returned a result with an exception set") chained to it goes to
    ``PyErr_Print``, that is to ``sys.excepthook``, on stderr. copy_expert() then raises an
    OperationalError as usual, which the batch reports in one line: the printed chain says
    nothing more. Any other exception still reaches the previous hook.
    """
    previous = sys.excepthook

    def hook(kind: Any, value: Any, tb: Any) -> None:
        if isinstance(value, SystemError) and isinstance(value.__cause__, psycopg2.Error):
            log.debug("psycopg2 printed %s: %s", type(value.__cause__).__name__, value)
            return
        previous(kind, value, tb)

    sys.excepthook = hook
    try:
        yield
    finally:
        sys.excepthook = previous


def _db_error(what: str, err: BaseException) -> DatabaseError:
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    if getattr(err, "pgcode", None) == _LOCK_NOT_AVAILABLE:
        first += (
            f" after {LOCK_TIMEOUT_S} s: another session holds a lock on the history tables;"
            " nothing of this run's uncommitted work is kept, the next run reads it again"
        )
    return DatabaseError(f"{what}: {first}")


class Loader:
    """One database session of an ingest run: the lock, the checkpoints and the batches."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._staged = False

    def rollback_quietly(self) -> None:
        """Roll back after an unexpected failure; a broken connection is reported later."""
        try:
            self.conn.rollback()
        except psycopg2.Error:
            pass

    def fileno(self) -> int:
        """The session's socket (forked workers close their inherited copy)."""
        return int(self.conn.fileno())

    def try_lock(self) -> bool:
        """Take the session-level advisory lock; False if another ingester holds it.

        :raises DatabaseError: the query failed
        """
        try:
            with self.conn.cursor() as cur:
                cur.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,))
                got = bool(cur.fetchone()[0])
            self.conn.commit()  # the lock is session-level: it outlives this transaction
        except psycopg2.Error as err:
            self.rollback_quietly()
            raise _db_error("cannot take the ingest lock", err) from err
        return got

    def lock_holder(self) -> Optional[LockHolder]:
        """Who holds the ingest lock now, or None (released meanwhile)."""
        try:
            with self.conn.cursor() as cur:
                cur.execute(_LOCK_HOLDER_SQL, (LOCK_KEY >> 32, LOCK_KEY & 0xFFFFFFFF))
                row = cur.fetchone()
            self.conn.commit()
        except psycopg2.Error as err:
            self.rollback_quietly()
            raise _db_error("cannot find who holds the ingest lock", err) from err
        if row is None:
            return None
        return LockHolder(int(row[0]), str(row[1]), str(row[2]), row[3], float(row[4]))

    def checkpoints(self) -> Dict[str, Checkpoint]:
        """All stored checkpoints by path.

        :raises DatabaseError: the table is missing (schema not migrated) or unreadable
        """
        try:
            with self.conn.cursor() as cur:
                cur.execute(
                    "SELECT path, inode, fingerprint, byte_offset, line_number "
                    "FROM ingest_checkpoints"
                )
                rows = cur.fetchall()
            self.conn.commit()
        except psycopg2.errors.UndefinedTable as err:
            self.rollback_quietly()
            raise SchemaMissingError() from err
        except psycopg2.Error as err:
            self.rollback_quietly()
            raise _db_error("cannot read ingest checkpoints", err) from err
        return {r[0]: Checkpoint(r[0], r[1], r[2], int(r[3]), int(r[4])) for r in rows}

    def _ensure_staging(self, cur: Any) -> None:
        if not self._staged:
            cur.execute(_stage_ddl(_STAGE_JOBS, FINISHED_JOB_COLUMNS))
            cur.execute(_stage_ddl(_STAGE_RERUNS, RERUN_COLUMNS))
            cur.execute(_stage_ddl(_STAGE_LIVE, LIVE_COLUMNS))
            cur.execute(_GONE_DDL)
            self._staged = True

    def purge_live(self, stale_s: int, tombstone_s: int) -> Tuple[int, Dict[str, int]]:
        """Drop stale live states and old tombstones; (rows dropped, rows left by state).

        :raises DatabaseError: the statement failed (nothing dropped)
        """
        try:
            with self.conn.cursor() as cur:
                cur.execute(_LIVE_PURGE, (tombstone_s, stale_s))
                dropped = int(cur.rowcount)
                cur.execute(_LIVE_COUNTS)
                left = {str(state): int(n) for state, n in cur.fetchall()}
            self.conn.commit()
        except psycopg2.Error as err:
            self.rollback_quietly()
            raise _db_error("cannot drop stale live job states", err) from err
        return dropped, left

    def commit_batch(
        self,
        jobs: List[str],
        reruns: List[str],
        checkpoints: Sequence[Checkpoint],
        live: Sequence[str] = (),
        gone: Sequence[str] = (),
    ) -> Tuple[int, int]:
        """Store one batch and move the checkpoints of the files it covers, atomically.

        :param jobs: COPY lines from copy_line() for finished_jobs
        :param reruns: COPY lines from copy_line() for job_reruns
        :param checkpoints: for each file the batch covers, the position just after its
            last line in the batch
        :param live: COPY lines of live_jobs states and tombstones, one per job
        :param gone: COPY lines ``server<TAB>job_id`` of jobs deleted (D, A records)
        :returns: (finished_jobs rows inserted, job_reruns rows inserted); rows already
            present are not counted
        :raises DatabaseError: the batch was rolled back (nothing of it is stored)
        """
        try:
            with self.conn.cursor() as cur:
                self._ensure_staging(cur)
                # The checkpoint commits with the rows: a commit lost in a server crash
                # loses both, and the next run reads the lines again. No need to wait
                # for the WAL flush.
                cur.execute("SET LOCAL synchronous_commit = off")
                inserted_jobs = inserted_reruns = 0
                if jobs:
                    _copy(cur, _STAGE_JOBS, jobs)
                    inserted_jobs = _insert(cur, "finished_jobs")
                if reruns:
                    _copy(cur, _STAGE_RERUNS, reruns)
                    inserted_reruns = _insert(cur, "job_reruns")
                if jobs:
                    cur.execute(_LIVE_ENDED)
                if gone:
                    _copy(cur, _STAGE_GONE, list(gone))
                    cur.execute(_LIVE_GONE)
                if live:
                    _copy(cur, _STAGE_LIVE, list(live))
                    cur.execute(_LIVE_STATES)
                    cur.execute(_LIVE_TOMBSTONES)
                if checkpoints:
                    # One row per path: the caller keeps them in a dict by path.
                    cur.execute(_UPSERT_CHECKPOINTS, [list(c) for c in zip(*checkpoints)])
            self.conn.commit()
        except psycopg2.Error as err:
            try:
                self.conn.rollback()
            except psycopg2.Error:
                pass  # the connection is gone; the error below says why
            where = ", ".join(cp.path for cp in checkpoints[:3])
            raise _db_error(f"batch rolled back ({where})", err) from err
        return inserted_jobs, inserted_reruns

    def release_lock(self) -> None:
        """Release the ingest lock now, keeping the session (rolls back what is open).

        PostgreSQL would release it when the session's backend exits, but that happens
        after the client has closed its end: an ingest started right after this one (cron,
        a test) could still find the lock held and do nothing. If the release fails (the
        connection is gone), the session's end releases it.
        """
        try:
            if not self.conn.closed:
                self.conn.rollback()
                with self.conn.cursor() as cur:
                    cur.execute("SELECT pg_advisory_unlock_all()")
                self.conn.commit()
        except psycopg2.Error:
            pass  # the session is gone or going: its end releases the lock

    def close(self) -> None:
        """Release the ingest lock, then close the session."""
        self.release_lock()
        try:
            self.conn.close()
        except psycopg2.Error:
            pass


def _insert(cur: Any, table: str) -> int:
    """Move the staged rows into ``table``; returns how many were new."""
    plain, upsert = _INSERTS[table]
    cur.execute("SAVEPOINT swt_insert")
    try:
        cur.execute(plain)
    except psycopg2.errors.UniqueViolation:
        cur.execute("ROLLBACK TO SAVEPOINT swt_insert")
        cur.execute(upsert)
        return int(cur.rowcount)
    inserted = int(cur.rowcount)
    cur.execute("RELEASE SAVEPOINT swt_insert")
    return inserted


def _copy(cur: Any, table: str, lines: List[str]) -> None:
    data = ("\n".join(lines) + "\n").encode("utf-8")
    # One read of the whole buffer: each read needs the GIL, which the parser holds.
    cur.copy_expert(f"COPY {table} FROM STDIN", io.BytesIO(data), size=len(data))


# What the committer thread stores in one transaction: see Loader.commit_batch().
Batch = Tuple[List[str], List[str], List[Checkpoint], Sequence[str], Sequence[str]]


class Committer:
    """Commits batches on a worker thread, so parsing goes on while PostgreSQL works.

    psycopg2 releases the GIL while it waits for the server, so the parser (one core) and
    the server (the other) overlap. At most one batch waits in the queue: memory stays
    bounded. Batches are committed in order, each with its checkpoints, so a crash
    loses at most uncommitted batches, which the next run reads again.
    """

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self.inserted_jobs = 0
        self.inserted_reruns = 0
        self.error: Optional[DatabaseError] = None
        self._queue: queue.Queue[Optional[Batch]] = queue.Queue(maxsize=1)
        self._thread = threading.Thread(target=self._work, name="ingest-commit", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self.error is not None:
                continue  # drain: after a failure nothing more is committed
            try:
                jobs, reruns = self.loader.commit_batch(*item)
            except DatabaseError as err:
                self.error = err
                continue
            except Exception as err:  # noqa: BLE001 - a dead thread would hang the producer
                self.loader.rollback_quietly()
                self.error = DatabaseError(
                    f"a batch could not be stored ({type(err).__name__}: {err}); it and every"
                    " later batch were rolled back"
                )
                continue
            self.inserted_jobs += jobs
            self.inserted_reruns += reruns

    def submit(
        self,
        jobs: List[str],
        reruns: List[str],
        checkpoints: List[Checkpoint],
        live: Sequence[str] = (),
        gone: Sequence[str] = (),
    ) -> None:
        """Queue a batch (blocks while the previous one is still waiting).

        :raises DatabaseError: an earlier batch failed
        """
        if self.error is not None:
            raise self.error
        self._queue.put((jobs, reruns, checkpoints, live, gone))

    def finish(self) -> None:
        """Wait for every queued batch.

        :raises DatabaseError: a batch failed (it and every later one were rolled back)
        """
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if self.error is not None:
            raise self.error
