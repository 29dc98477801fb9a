"""One ingest run: lock, find files, read new complete lines, parse, load in batches, summarise.

Files are read in chunks of whole lines. Chunks are parsed (ingest/parse.py) in this
process, or in worker processes when asked (``--workers``) and there is much to read; results are
consumed strictly in file order: rows go into batches, and a batch is committed together
with the checkpoint of every file it covers (ingest/load.py), on a worker thread.
"""

from __future__ import annotations

import collections
import concurrent.futures
import concurrent.futures.process
import ctypes
import logging
import multiprocessing
import operator
import os
import signal
import sys
import time
from typing import IO, Deque, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from softwalltime.accounting import RECORD_TYPES
from softwalltime.errors import SoftwalltimeError

from .files import (
    MAX_LINE_BYTES,
    Checkpoint,
    FileError,
    LogFile,
    Plan,
    Reader,
    TrailingJunk,
    archive_read,
    find_files,
    index_checkpoints,
    inspect,
    looks_like_accounting_name,
    plan,
)
from .live import Op, tombstone
from .load import Committer, Loader, LockHolder, connect, psycopg2_prints_muted
from .parse import MALFORMED_TYPE, SHOW_MALFORMED, Chunk, copy_text, parse_chunk

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 10000
# A batch is also committed after this many lines per stored row of batch size, so a long
# stretch of Q/S records still moves the checkpoint forward.
_LINES_PER_ROW = 20
_PROGRESS_EVERY_S = 0.5
# Parse worker processes pay off only when there is a lot to read (a backfill, a first
# run) and spare cores; a cron run reads a few kB and always parses in-process.
PARALLEL_MIN_BYTES = 16 << 20
# live_jobs rows no record ends are dropped by every run: a queued or running state older
# than this (its E or D was never read), and tombstones (deleted jobs) this long after
# the deletion was read (long enough to outlast the re-reading of a rotated file).
LIVE_STALE_S = 30 * 86400
LIVE_TOMBSTONE_S = 7 * 86400
_IS_RERUN = operator.itemgetter(0)  # of a Chunk row
_LINE = operator.itemgetter(1)


class Options(NamedTuple):
    """What to ingest and how."""

    dsn: str
    paths: Tuple[str, ...]  # files named on the command line; empty: the directory
    directory: str
    server: Optional[str]  # PBS server name; None: each job id's suffix
    batch_size: int = DEFAULT_BATCH_SIZE
    progress: bool = False
    workers: int = 0  # parse processes; 0: parse in this process


class Summary:
    """What a run did; printed by the front end."""

    def __init__(self) -> None:
        # record type -> [read, stored, malformed]
        self.counts: Dict[str, List[int]] = {}
        self.file_states: Dict[str, int] = {}
        self.notes: List[str] = []
        self.failed: List[str] = []
        self.ignored_lines = 0
        self.ignored_files = 0
        self.malformed = 0
        self.impossible: Dict[str, int] = {}  # records refused as impossible, by rule
        self.live_written = 0  # live_jobs states and tombstones handed to the database
        self.live_dropped = 0  # stale states and old tombstones dropped
        self.live_now: Dict[str, int] = {}  # live_jobs rows by state after the run
        self.bytes_read = 0
        self.seconds = 0.0
        self.locked_out = False
        self.lock_holder: Optional[LockHolder] = None

    def count(self, rtype: str) -> List[int]:
        c = self.counts.get(rtype)
        if c is None:
            c = [0, 0, 0]
            self.counts[rtype] = c
        return c

    @property
    def records(self) -> int:
        return sum(c[0] for c in self.counts.values())

    @property
    def stored(self) -> int:
        return sum(c[1] for c in self.counts.values())

    def table(self) -> List[str]:
        """The per-record-type table: read, stored, skipped, malformed."""
        lines = [
            "{:<4} {:<28} {:>10} {:>10} {:>10} {:>10}".format(
                "type", "meaning", "read", "stored", "skipped", "malformed"
            )
        ]
        total = [0, 0, 0, 0]
        for rtype in sorted(self.counts, key=lambda t: (t == MALFORMED_TYPE, t.lower(), t)):
            read, stored, bad = self.counts[rtype]
            skipped = read - stored - bad
            meaning = RECORD_TYPES.get(rtype, "unrecognisable line")
            lines.append(
                f"{rtype:<4} {meaning:<28} {read:>10,} {stored:>10,} {skipped:>10,} {bad:>10,}"
            )
            for i, v in enumerate((read, stored, skipped, bad)):
                total[i] += v
        lines.append("{:<4} {:<28} {:>10,} {:>10,} {:>10,} {:>10,}".format("", "total", *total))
        return lines

    def render(self) -> str:
        """The summary printed at the end of every run (also under cron)."""
        if self.locked_out:
            held = f" by {self.lock_holder.describe()}" if self.lock_holder else ""
            return (
                "softwalltime ingest: another ingest is running (advisory lock held"
                f"{held}); nothing done"
            )
        states = ", ".join(f"{n} {state}" for state, n in sorted(self.file_states.items()))
        head = "softwalltime ingest: {} file(s) ({}), {:.1f} MB, {:,} records in {:.2f} s".format(
            sum(self.file_states.values()),
            states or "none",
            self.bytes_read / 1e6,
            self.records,
            self.seconds,
        )
        out = [head] + self.table()
        if self.ignored_lines:
            out.append(f"{self.ignored_lines:,} blank or comment line(s) ignored")
        if self.ignored_files:
            out.append(
                f"{self.ignored_files} file(s) in the directory ignored: not named YYYYMMDD[.gz]"
            )
        if self.malformed > SHOW_MALFORMED:
            out.append(
                f"{self.malformed:,} malformed line(s) in all; "
                f"the first {SHOW_MALFORMED} went to stderr"
            )
        if self.impossible:
            rules = sorted(self.impossible.items(), key=lambda kv: (-kv[1], kv[0]))
            out.append(
                "refused as impossible (counted as malformed, not stored): "
                + "; ".join(f"{n:,} {rule}" for rule, n in rules)
            )
        live = self.live_now.get("queued", 0) + self.live_now.get("running", 0)
        if live or self.live_written or self.live_dropped:
            out.append(
                "live job states: {:,} queued, {:,} running now ({:,} written,"
                " {:,} stale dropped)".format(
                    self.live_now.get("queued", 0),
                    self.live_now.get("running", 0),
                    self.live_written,
                    self.live_dropped,
                )
            )
        out.extend(self.notes)
        return "\n".join(out)


class _Progress:
    """Bytes and records per second on a terminal, rewritten in place; silent otherwise."""

    def __init__(self, enabled: bool, stream: IO[str]) -> None:
        self.enabled = enabled
        self.stream = stream
        self.start = time.monotonic()
        self.last = self.start
        self.shown = False

    def update(self, nbytes: int, records: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self.last < _PROGRESS_EVERY_S:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        self.stream.write(
            f"\r{nbytes / 1e6:,.1f} MB  {nbytes / 1e6 / elapsed:,.1f} MB/s  "
            f"{records:,} records  {records / elapsed:,.0f} records/s "
        )
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


class _FileEnd(NamedTuple):
    """Queued after a file's last chunk: where its checkpoint goes once all is consumed."""

    f: LogFile
    end: int
    lineno: int
    pending: int
    state: str
    error: Optional[str]
    junk: Optional[TrailingJunk]  # what followed an archive's last member, if not gzip data


class _ChunkJob(NamedTuple):
    f: LogFile
    end: int  # byte offset after the chunk
    lineno: int  # line number of the chunk's last line
    nlines: int
    result: Union[Chunk, concurrent.futures.Future[Chunk]]


class Ingester:
    """Runs one ingest over a loader session.

    A batch collects rows (and the checkpoints of the files they came from) across files,
    so a directory of many small daily files costs few transactions.
    """

    def __init__(self, opts: Options, loader: Loader, progress_stream: IO[str]) -> None:
        self.opts = opts
        self.loader = loader
        self.summary = Summary()
        self.progress = _Progress(opts.progress, progress_stream)
        self.committer: Optional[Committer] = None
        self.pool: Optional[concurrent.futures.ProcessPoolExecutor] = None
        self.inflight: Deque[Union[_ChunkJob, _FileEnd]] = collections.deque()
        self.max_inflight = 1
        self.jobs: List[str] = []
        self.reruns: List[str] = []
        self.checkpoints: Dict[str, Checkpoint] = {}
        self.batch_lines = 0
        # files read from their start in this run -> [records, malformed] so far: one with
        # malformed lines and no record is no accounting log (no checkpoint, exit 1)
        self.from_start: Dict[str, List[int]] = {}
        # the batch's live_jobs effects, one per job: [the stored row becomes a tombstone
        # first, the row to write (state or tombstone) or None]
        self.live: Dict[Tuple[str, str], List[object]] = {}

    def files(self) -> List[str]:
        if self.opts.paths:
            return list(self.opts.paths)
        found = find_files(self.opts.directory)
        keep = [p for p in found if looks_like_accounting_name(p)]
        self.summary.ignored_files = len(found) - len(keep)
        return keep

    def run(self) -> Summary:
        started = time.monotonic()
        checkpoints = self.loader.checkpoints()
        by_identity = index_checkpoints(checkpoints)
        todo: List[Tuple[LogFile, Plan]] = []
        for path in self.files():
            try:
                f = inspect(path)
            except FileError as err:
                self._fail(str(err))
                continue
            p = plan(f, checkpoints.get(f.path), by_identity)
            if p.note:
                self.summary.notes.append(f"{f.path}: {p.note}")
                log.info("%s: %s", f.path, p.note)
            if f.fingerprint is None:
                self.summary.notes.append(f"{f.path}: no complete line yet; left for the next run")
                self._state("waiting")
            elif p.state == "unchanged":
                self._state("unchanged")
            else:
                todo.append((f, p))
        # Archives count as big: their uncompressed size is unknown until read.
        work = sum(f.size - p.offset if not f.compressed else PARALLEL_MIN_BYTES for f, p in todo)
        if self.opts.workers > 0 and work >= PARALLEL_MIN_BYTES:
            try:
                self._start_pool(self.opts.workers)
            except concurrent.futures.process.BrokenProcessPool as err:
                self._abandon_pool()
                raise SoftwalltimeError(_WORKER_DIED) from err
        self.committer = Committer(self.loader)
        try:
            for f, p in todo:
                self._read(f, p)
            while self.inflight:
                self._consume()
            self._flush()
        except concurrent.futures.process.BrokenProcessPool as err:
            self._abandon_pool()
            raise SoftwalltimeError(_WORKER_DIED) from err
        finally:
            if self.pool is not None:
                self.pool.shutdown(cancel_futures=True)
            self.committer.finish()
        dropped, now = self.loader.purge_live(LIVE_STALE_S, LIVE_TOMBSTONE_S)
        self.summary.live_dropped, self.summary.live_now = dropped, now
        self.summary.count("E")[1] += self.committer.inserted_jobs
        self.summary.count("R")[1] += self.committer.inserted_reruns
        for rtype in ("E", "R"):
            if self.summary.counts[rtype] == [0, 0, 0]:
                del self.summary.counts[rtype]
        self.progress.update(self.summary.bytes_read, self.summary.records, force=True)
        self.progress.done()
        self.summary.seconds = time.monotonic() - started
        return self.summary

    def _start_pool(self, workers: int) -> None:
        # fork is cheap and needs no re-import; the workers are started here, before the
        # committer thread exists, so no thread's lock is ever copied into a child.
        ctx = multiprocessing.get_context("fork")
        self.pool = concurrent.futures.ProcessPoolExecutor(
            workers,
            mp_context=ctx,
            initializer=_worker_init,
            initargs=(os.getpid(), self.loader.fileno()),
        )
        list(self.pool.map(_warm_up, range(workers)))
        self.max_inflight = 2 * workers  # bounded read-ahead: memory stays flat

    def _result(self, future: concurrent.futures.Future[Chunk]) -> Chunk:
        """A worker's parse, watching the workers: when one is killed while it writes its
        result, the executor can wait forever for the rest of that message."""
        while True:
            try:
                return future.result(timeout=0.5)
            except concurrent.futures.TimeoutError:
                processes = getattr(self.pool, "_processes", None) or {}
                if any(p.exitcode is not None for p in list(processes.values())):
                    raise concurrent.futures.process.BrokenProcessPool("a worker died") from None

    def _abandon_pool(self) -> None:
        """After a worker died: stop the others and let the executor's threads end.

        Its result reader may sit inside a message the dead worker half wrote (it reads
        until the message is complete); with every writing end closed it gets EOF instead.
        Its call queue's feeder may be blocked on a full pipe: the exit does not wait for it.
        """
        pool = self.pool
        if pool is None:
            return
        self.pool = None
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            if process.exitcode is None:
                process.kill()
            process.join(5)
        call_queue = getattr(pool, "_call_queue", None)
        if call_queue is not None:
            call_queue.cancel_join_thread()
        writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
        if writer is not None:
            writer.close()
        pool.shutdown(wait=True, cancel_futures=True)

    def _state(self, state: str) -> None:
        self.summary.file_states[state] = self.summary.file_states.get(state, 0) + 1

    def _fail(self, message: str) -> None:
        log.error("%s", message)
        self.summary.failed.append(message)
        self._state("unusable")

    def _read(self, f: LogFile, p: Plan) -> None:
        """Queue ``f``'s new chunks for parsing, then a marker for its end."""
        source = copy_text(f.path)
        if p.offset == 0:
            self.from_start[f.path] = [0, 0]
        reader = Reader(f, p.offset)
        lineno = p.line_number
        pos = p.offset
        error = None
        try:
            for start, data, end in reader.chunks():
                result: Union[Chunk, concurrent.futures.Future[Chunk]]
                if not data:  # a line too long to be a record, skipped while read
                    result = _overlong(lineno + 1, end - start)
                    nlines = 1
                elif self.pool is not None:
                    nlines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
                    result = self.pool.submit(
                        parse_chunk, data, start, lineno, source, self.opts.server
                    )
                else:
                    result = parse_chunk(data, start, lineno, source, self.opts.server)
                    nlines = result.lines
                lineno += nlines
                pos = end
                self._push(_ChunkJob(f, pos, lineno, nlines, result))
                self.summary.bytes_read += end - start
        except FileError as err:
            error = str(err)
        self._push(_FileEnd(f, pos, lineno, reader.pending, p.state, error, reader.junk))

    def _push(self, item: Union[_ChunkJob, _FileEnd]) -> None:
        self.inflight.append(item)
        while len(self.inflight) > self.max_inflight:
            self._consume()

    def _consume(self) -> None:
        """Take the oldest queued item: its rows into the batch, its checkpoint when done."""
        item = self.inflight.popleft()
        s = self.summary
        if isinstance(item, _FileEnd):
            self._end_file(item)
            return
        chunk = item.result if isinstance(item.result, Chunk) else self._result(item.result)
        f = item.f
        batch_size = self.opts.batch_size
        # The chunk's live effects go into the batch before its rows: a batch committed
        # with a checkpoint inside this chunk then holds them all (applying them again
        # after a crash changes nothing).
        self._add_live(chunk.live)
        rows = chunk.rows
        i = 0
        while i < len(rows):
            part = rows[i : i + max(1, batch_size - len(self.jobs) - len(self.reruns))]
            i += len(part)
            if any(map(_IS_RERUN, part)):
                for is_rerun, line, _end, _lineno in part:
                    (self.reruns if is_rerun else self.jobs).append(line)
            else:
                self.jobs.extend(map(_LINE, part))  # in C: the common case
            if len(self.jobs) + len(self.reruns) >= batch_size:
                _r, _l, end, lineno = part[-1]
                self.checkpoints[f.path] = Checkpoint(
                    f.path, f.inode, f.fingerprint or "", end, lineno
                )
                self._flush()
        for rtype, (read, bad) in chunk.counts.items():
            c = s.count(rtype)
            c[0] += read
            c[2] += bad
        for lineno, reason in chunk.malformed:
            if s.malformed < SHOW_MALFORMED:
                log.warning("%s:%d: %s", f.path, lineno, reason)
            s.malformed += 1
        s.malformed += chunk.malformed_total - len(chunk.malformed)
        for rule, n in chunk.impossible.items():
            s.impossible[rule] = s.impossible.get(rule, 0) + n
        s.ignored_lines += chunk.ignored
        self._tally(f, chunk)
        self.batch_lines += item.nlines
        if self.batch_lines >= batch_size * _LINES_PER_ROW and not self._no_record_yet(f):
            self.checkpoints[f.path] = Checkpoint(
                f.path, f.inode, f.fingerprint or "", item.end, item.lineno
            )
            self._flush()
        self.progress.update(s.bytes_read, s.records)

    def _tally(self, f: LogFile, chunk: Chunk) -> None:
        """Count a chunk's records (impossible ones included) and malformed lines, for a
        file read from its start."""
        tally = self.from_start.get(f.path)
        if tally is not None:
            bad = chunk.malformed_total - sum(chunk.impossible.values())
            tally[0] += sum(read for read, _ in chunk.counts.values()) - bad
            tally[1] += bad

    def _no_record_yet(self, f: LogFile) -> bool:
        """Whether ``f``, read from its start, has shown malformed lines and no record."""
        tally = self.from_start.get(f.path)
        return tally is not None and tally[0] == 0 and tally[1] > 0

    def _end_file(self, item: _FileEnd) -> None:
        """A file read to its end: its checkpoint, its state and what to tell about it."""
        f = item.f
        if item.error is None and self._no_record_yet(f):
            lines = self.from_start[f.path][1]
            self._fail(
                f"{f.path}: not an accounting log ({lines:,} line{'s' * (lines != 1)},"
                " none a record); nothing stored"
            )
            return
        fingerprint = f.fingerprint or ""
        if f.compressed and item.error is None and fingerprint:
            # read to its end: known by its size on disk (its trailer covers the last
            # member only)
            fingerprint = archive_read(fingerprint, f.size)
        if item.end != 0 or f.path in self.checkpoints:
            self.checkpoints[f.path] = Checkpoint(
                f.path, f.inode, fingerprint, item.end, item.lineno
            )
        if item.error is not None:
            self._fail(item.error)
        else:
            self._state(item.state)
        if item.pending:
            self.summary.notes.append(
                f"{f.path}:{item.lineno + 1}: incomplete last line ({item.pending} bytes) "
                "left for the next run"
            )
        if item.junk is not None:
            note = (
                f"{f.path}: {item.junk.size:,} byte(s) at byte {item.junk.offset:,}, after the"
                " last gzip member, are not gzip data: ignored (all before them was read)"
            )
            log.warning("%s", note)
            self.summary.notes.append(note)

    def _add_live(self, ops: Sequence[Op]) -> None:
        """Fold a chunk's live effects into the batch's: the later record of a job wins,
        and a deletion turns the job's state in the batch into a tombstone."""
        for op in ops:
            known = self.live.get(op.key)
            if known is None:
                self.live[op.key] = [op.gone, op.row]
            elif op.row is None:
                known[0] = True
                if isinstance(known[1], str):
                    known[1] = tombstone(known[1])
            else:
                known[0] = known[0] or op.gone
                known[1] = op.row

    def _flush(self) -> None:
        """Hand the current batch (rows, live states and checkpoints) to the committer."""
        if not (self.jobs or self.reruns or self.checkpoints or self.live):
            return
        assert self.committer is not None
        rows = [str(row) for _gone, row in self.live.values() if row is not None]
        gone = [
            f"{copy_text(server)}\t{copy_text(job)}"
            for (server, job), (first, _row) in self.live.items()
            if first
        ]
        self.summary.live_written += len(rows)
        self.committer.submit(self.jobs, self.reruns, list(self.checkpoints.values()), rows, gone)
        self.jobs, self.reruns, self.checkpoints, self.live = [], [], {}, {}
        self.batch_lines = 0


_WORKER_DIED = (
    "a parse worker died (killed?); what was committed before is kept and its checkpoints"
    " are exact: run the ingest again"
)


def _overlong(lineno: int, length: int) -> Chunk:
    """One malformed "line" that was too long to be a record (it was never held whole)."""
    reason = (
        f"a line of {length:,} bytes, newline included (over {MAX_LINE_BYTES >> 20} MiB): skipped"
    )
    return Chunk([], {MALFORMED_TYPE: [1, 1]}, [(lineno, reason)], 1, 0, 1, {})


def _warm_up(_: int) -> int:
    return os.getpid()


# prctl(2) option: the signal a process gets when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1


def _worker_init(parent: int, inherited_db_fd: int) -> None:
    """Bind a parse worker's life to the ingester's, drop its copy of the DB socket, and
    leave Ctrl-C to the ingester.

    A forked worker inherits the parent's database socket. If the parent is killed, that
    copy kept the session, and so the advisory lock, alive while the worker blocked on a
    pipe nobody read: every later run found the lock held. So the worker closes its copy
    (the parent's session is not affected) and asks the kernel for SIGKILL when the
    parent dies.
    """
    try:
        os.close(inherited_db_fd)
    except OSError:
        pass
    # Ctrl-C reaches the whole process group: the parent ends the run (its pool, the batch
    # in flight) and says so in one line; a worker would print a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent check below still holds
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def run(opts: Options, progress_stream: Optional[IO[str]] = None) -> Summary:
    """Ingest new accounting records once; safe to run from cron every few minutes.

    :param opts: what to read and where to store it
    :param progress_stream: where progress goes when ``opts.progress`` (default stderr)
    :returns: the summary; ``summary.locked_out`` if another ingester holds the lock
    :raises DatabaseError: the database cannot be reached or a batch failed (rolled back)
    :raises FileError: the accounting directory cannot be listed
    """
    loader = Loader(connect(opts.dsn))
    try:
        if not loader.try_lock():
            summary = Summary()
            summary.locked_out = True
            summary.lock_holder = loader.lock_holder()
            return summary
        with psycopg2_prints_muted():
            return Ingester(opts, loader, progress_stream or sys.stderr).run()
    finally:
        loader.close()
