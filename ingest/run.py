"""One ingest run: lock, find files, read new complete lines, parse, load in batches, summarise.

Lines are handled as bytes in large chunks; only E and R records (the ones stored) are
decoded and fully tokenized. Every other line gets its ``date;T;ID;`` prefix validated and
is counted, so a malformed line of any type is reported as ``file:line: reason``.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import IO, Any, Dict, List, NamedTuple, Optional, Tuple

from softwalltime.accounting import RECORD_TYPES, finished_job_row, parse_line, rerun_row
from softwalltime.errors import ParseError

from .files import (
    Checkpoint,
    FileError,
    LogFile,
    Plan,
    Reader,
    find_files,
    index_checkpoints,
    inspect,
    looks_like_accounting_name,
    plan,
)
from .load import Committer, Loader, connect, copy_line, copy_text

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 10000
# Malformed lines shown one by one; the rest are only counted.
SHOW_MALFORMED = 10
# A batch is also committed after this many lines per stored row of batch size, so a long
# stretch of Q/S records still moves the checkpoint forward.
_LINES_PER_ROW = 20
_PROGRESS_EVERY_S = 0.5

_PREFIX_B = re.compile(rb"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;[A-Za-z];[^;]+;")
_TORN_B = re.compile(rb"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;[A-Za-z];")
_TYPES_B = {k.encode("ascii"): k for k in RECORD_TYPES}
_HASH, _SEMI = ord("#"), ord(";")
MALFORMED_TYPE = "?"  # malformed lines whose record type cannot be told


class Options(NamedTuple):
    """What to ingest and how."""

    dsn: str
    paths: Tuple[str, ...]  # files named on the command line; empty: the directory
    directory: str
    server: Optional[str]  # PBS server name; None: each job id's suffix
    batch_size: int = DEFAULT_BATCH_SIZE
    progress: bool = False


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
        self.bytes_read = 0
        self.seconds = 0.0
        self.locked_out = False

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
            return (
                "softwalltime ingest: another ingest is running (advisory lock held); nothing done"
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
                f"the first {SHOW_MALFORMED} are shown above"
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
        self.jobs: List[str] = []
        self.reruns: List[str] = []
        self.checkpoints: Dict[str, Checkpoint] = {}
        self.batch_lines = 0

    # -- reporting -------------------------------------------------------------------

    def _malformed(self, path: str, lineno: int, rtype: str, reason: str) -> None:
        s = self.summary
        s.malformed += 1
        c = s.count(rtype)
        c[0] += 1
        c[2] += 1
        if s.malformed <= SHOW_MALFORMED:
            log.warning("%s:%d: %s", path, lineno, reason)

    # -- the work --------------------------------------------------------------------

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
        self.committer = Committer(self.loader)
        try:
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
                    self.summary.notes.append(
                        f"{f.path}: no complete line yet; left for the next run"
                    )
                    self._state("waiting")
                    continue
                if p.state == "unchanged":
                    self._state("unchanged")
                    continue
                try:
                    self._ingest(f, p)
                except FileError as err:
                    self._fail(str(err))
                    continue
                self._state(p.state)
            self._flush()
        finally:
            self.committer.finish()
        self.summary.count("E")[1] += self.committer.inserted_jobs
        self.summary.count("R")[1] += self.committer.inserted_reruns
        for rtype in ("E", "R"):
            if self.summary.counts[rtype] == [0, 0, 0]:
                del self.summary.counts[rtype]
        self.progress.update(self.summary.bytes_read, self.summary.records, force=True)
        self.progress.done()
        self.summary.seconds = time.monotonic() - started
        return self.summary

    def _state(self, state: str) -> None:
        self.summary.file_states[state] = self.summary.file_states.get(state, 0) + 1

    def _fail(self, message: str) -> None:
        log.error("%s", message)
        self.summary.failed.append(message)
        self._state("unusable")

    def _flush(self) -> None:
        """Hand the current batch (rows and checkpoints) to the committer."""
        if not (self.jobs or self.reruns or self.checkpoints):
            return
        assert self.committer is not None
        self.committer.submit(self.jobs, self.reruns, list(self.checkpoints.values()))
        self.jobs, self.reruns, self.checkpoints = [], [], {}
        self.batch_lines = 0

    def _ingest(self, f: LogFile, p: Plan) -> None:
        """Read ``f`` from the plan's offset to its last complete line, batching rows."""
        s = self.summary
        server = self.opts.server
        batch_size = self.opts.batch_size
        max_lines = batch_size * _LINES_PER_ROW
        path = f.path
        source = copy_text(path)
        counts = s.counts
        lineno = p.line_number
        reader = Reader(f, p.offset)
        pos = p.offset
        fingerprint = f.fingerprint or ""
        jobs, reruns = self.jobs, self.reruns
        batch_lines = self.batch_lines

        for start, data in reader.chunks():
            lines = data.split(b"\n")
            if not lines[-1]:
                lines.pop()
            pos = start
            for raw in lines:
                lineno += 1
                off = pos
                pos += len(raw) + 1
                batch_lines += 1
                if not raw or raw[0] == _HASH or raw[0] == _SEMI or raw.isspace():
                    s.ignored_lines += 1
                    continue
                t = raw[20:21]
                if t == b"E" or t == b"R":
                    text = raw.decode("utf-8", "replace")
                    if "\x00" in text:
                        text = text.replace("\x00", "")  # PostgreSQL text cannot hold NUL
                    try:
                        rec = parse_line(text)
                        if rec.duplicate_keys:
                            raise ParseError(
                                "key(s) {} appear twice: possibly forged through an unescaped "
                                "value (PBS issue #1013); not stored".format(
                                    ", ".join(rec.duplicate_keys)
                                )
                            )
                        if rec.rtype == "E":
                            row = finished_job_row(rec, server)
                        else:
                            row = rerun_row(rec, server)
                    except ParseError as err:
                        self._bad_line(path, source, lineno, off, raw, str(err))
                        continue
                    c = counts.get(rec.rtype) or s.count(rec.rtype)
                    c[0] += 1
                    if row is None:
                        continue
                    esc = "\\" in text or "\t" in text or "\r" in text
                    if rec.rtype == "E":
                        jobs.append(copy_line(row, source, off, esc))
                    else:
                        reruns.append(copy_line(row, source, off, esc))
                    if len(jobs) + len(reruns) < batch_size:
                        continue
                else:
                    rtype = _TYPES_B.get(t)
                    if (
                        rtype is None
                        or _PREFIX_B.match(raw) is None
                        or (raw.count(b";") > 3 and _TORN_B.search(raw, 20) is not None)
                    ):
                        self._bad_line(path, source, lineno, off, raw, None)
                        continue
                    c = counts.get(rtype) or s.count(rtype)
                    c[0] += 1
                    if batch_lines < max_lines:
                        continue
                # The batch is full: commit it with this file's position after this line.
                end = min(pos, start + len(data))
                self.checkpoints[path] = Checkpoint(path, f.inode, fingerprint, end, lineno)
                self._flush()
                jobs, reruns = self.jobs, self.reruns
                batch_lines = 0
            pos = start + len(data)
            s.bytes_read += len(data)
            self.progress.update(s.bytes_read, s.records)
        self.batch_lines = batch_lines
        if pos != p.offset or path in self.checkpoints:
            self.checkpoints[path] = Checkpoint(path, f.inode, fingerprint, pos, lineno)
        if reader.pending:
            s.notes.append(
                f"{path}:{lineno + 1}: incomplete last line ({reader.pending} bytes) "
                "left for the next run"
            )

    def _bad_line(
        self, path: str, source: str, lineno: int, off: int, raw: bytes, reason: Optional[str]
    ) -> None:
        """Report a malformed line; if it is torn, also process the record that follows."""
        torn = _TORN_B.search(raw, 1)
        if torn is not None:
            self._malformed(
                path,
                lineno,
                _type_of(raw),
                f"torn record: another record starts at column {torn.start() + 1} "
                "(the first part was cut off)",
            )
            self._tail_record(path, source, lineno, off + torn.start(), raw[torn.start() :])
            return
        if reason is None:
            try:
                parse_line(raw.decode("utf-8", "replace"))
                reason = "bad record prefix"
            except ParseError as err:
                reason = str(err)
        self._malformed(path, lineno, _type_of(raw), reason)

    def _tail_record(self, path: str, source: str, lineno: int, off: int, raw: bytes) -> None:
        """The record after the cut in a torn line: counted and stored like any other."""
        text = raw.decode("utf-8", "replace").replace("\x00", "")
        try:
            rec = parse_line(text)
            if rec.duplicate_keys:
                raise ParseError("duplicate keys {}".format(", ".join(rec.duplicate_keys)))
            row: Optional[Tuple[Any, ...]] = None
            if rec.rtype == "E":
                row = finished_job_row(rec, self.opts.server)
            elif rec.rtype == "R":
                row = rerun_row(rec, self.opts.server)
        except ParseError as err:
            self._bad_line(path, source, lineno, off, raw, str(err))
            return
        self.summary.count(rec.rtype)[0] += 1
        if row is not None:
            esc = "\\" in text or "\t" in text or "\r" in text
            target = self.jobs if rec.rtype == "E" else self.reruns
            target.append(copy_line(row, source, off, esc))


def _type_of(raw: bytes) -> str:
    if _PREFIX_B.match(raw) is not None:
        return _TYPES_B.get(raw[20:21], MALFORMED_TYPE)
    return MALFORMED_TYPE


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
            return summary
        return Ingester(opts, loader, progress_stream or sys.stderr).run()
    finally:
        loader.close()
