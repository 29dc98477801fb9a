"""Workload sources for the replay evaluation: SWF traces and PBS accounting logs.

Both readers return a :class:`softwalltime.replay.trace.Trace` (jobs in trace order). They
skip only what they cannot parse and jobs with values beyond the plausible bounds of
:mod:`.bounds`, counted by reason; the replay's own skip rules are
:func:`.trace.skip_reason`.

Whatever a file holds, reading it costs bounded time and memory (:class:`InputLimits`): all
sources of one command together give at most ``DEFAULT_MAX_INPUT_BYTES`` (1 GiB,
decompressed; ``--max-input-size``) in at most one line per 32 of those bytes, a line is at
most ``MAX_LINE_BYTES`` (16 MiB), a directory at most ``MAX_DIR_FILES`` entries. Beyond,
reading stops with one ``ParseError`` naming the file and line: a gzip bomb of 5 GiB of
zeros ends after its first 16 MiB.

SWF (Standard Workload Format, Parallel Workloads Archive, version 2.2): one job per line,
whitespace-separated; ``;`` starts a comment or header line. Fields used (1-based): 2 submit
time, 3 wait time, 4 run time, 9 requested time, 12 user id; ``-1`` means unknown. Submit
times are relative to the ``; UnixStartTime:`` header when there is one. The Alea variant
(e.g. ``CERIT-SC-wagap-2013.alea.swf.gz``) has 21 columns and absolute epoch submit times
and no header; its first 18 columns are standard SWF, so it is read the same way.

PBS accounting logs: the ``E`` records of jobs, through :mod:`softwalltime.accounting`.
Submit = ``ctime``, start = ``start``, end = ``end``, runtime = ``resources_used.walltime``.
All files given (or found in a directory) form one workload, ordered by (ctime, job number).
"""

from __future__ import annotations

import gzip
import io
import logging
import operator
import os
import re
import zlib
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from ..errors import ParseError
from .bounds import implausible
from .trace import Trace, TraceJob

log = logging.getLogger(__name__)

SWF = "swf"
PBS = "pbs"
# Reader-level skip reasons (the replay adds its own; .bounds declares the implausible ones).
SKIP_MALFORMED = "malformed line"
SKIP_DUPLICATE = "duplicate job"
# Warn about this many bad lines individually; the rest only count.
_MAX_WARNINGS = 5
# Lines starting with these are comments: ';' in SWF headers (and the CESNET simulator's
# accounting file), '#' in annotated sample logs.
_COMMENT_CHARS = ";#"
_SWF_MIN_FIELDS = 18
_PBS_LINE_RE = re.compile(r"^\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;")
_SWF_LINE_RE = re.compile(r"^\s*-?\d+(\.\d+)?(\s+\S+){17,}\s*$")
_UNIX_START_RE = re.compile(r"^;\s*UnixStartTime:\s*(-?\d+)")

# What all the sources of one command may give together, decompressed: 1 GiB, 53 times the
# largest trace the tests read (HPC2N-2002, 19 MB, 202,871 jobs). That is some 11 million
# SWF jobs, all held in memory (evaluate's RSS grows by 0.4 KB a job with one predictor,
# 1.1 KB with all four: 4-12 GB at the limit), so a larger default would bound nothing a
# machine has. A gzip bomb stops here (or at its first overlong line, much sooner).
DEFAULT_MAX_INPUT_BYTES = 1 << 30
# A line longer than this is no job: SWF lines are about 100 bytes, PBS accounting records a
# few kilobytes (``softwalltime ingest`` skips lines beyond the same 16 MiB).
MAX_LINE_BYTES = 16 << 20
# A directory with more files than this is no PBS accounting directory (one file a day).
MAX_DIR_FILES = 100_000
# Read size: large enough that per-chunk costs vanish, small enough to keep memory flat.
_CHUNK_BYTES = 1 << 20


def format_bytes(n: int) -> str:
    """``1 GiB``, ``16 MiB``, ``1.5 KiB``, ``100 bytes``: a size for people."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} bytes"


class InputLimits:
    """What the sources of one command may give, and what they have given so far.

    One object is shared by every file a command reads, so that the limits bound them all
    together: the replay holds all of them in memory at once.

    Lines are capped too, at one per ``BYTES_PER_LINE`` bytes of ``max_bytes`` (33.5 million
    at 1 GiB): a valid SWF line has at least 36 bytes and a PBS record more, so only blank or
    comment lines reach that cap. It keeps a file of bare newlines, one Python step a line,
    from costing more than real data: 1 GiB of them took 95 s without it, 3.6 s with it.

    :param max_bytes: decompressed bytes all files may give together
    :param max_line_bytes: the longest line, newline excluded
    :raises ValueError: a limit below 1
    """

    BYTES_PER_LINE = 32

    def __init__(
        self, max_bytes: int = DEFAULT_MAX_INPUT_BYTES, max_line_bytes: int = MAX_LINE_BYTES
    ) -> None:
        if max_bytes < 1 or max_line_bytes < 1:
            raise ValueError(f"limits must be at least 1 byte: {max_bytes}, {max_line_bytes}")
        self.max_bytes = max_bytes
        self.max_line_bytes = max_line_bytes
        self.max_lines = max(1, max_bytes // self.BYTES_PER_LINE)
        self.used = 0
        self.lines = 0

    def charge(self, path: str, lineno: int, nbytes: int) -> None:
        """Count ``nbytes`` more read from ``path`` at line ``lineno``.

        :raises ParseError: beyond ``max_bytes``
        """
        self.used += nbytes
        if self.used > self.max_bytes:
            raise ParseError(
                f"{path}:{lineno}: more than {format_bytes(self.max_bytes)} of input"
                " (decompressed, all sources together); stopped reading. If the input is"
                " real, raise the limit with --max-input-size"
            )

    def count_lines(self, path: str, lineno: int, nlines: int) -> None:
        """Count ``nlines`` more lines read from ``path``, the first numbered ``lineno``.

        :raises ParseError: beyond ``max_lines``
        """
        self.lines += nlines
        if self.lines > self.max_lines:
            first_over = lineno + self.max_lines - (self.lines - nlines)
            raise ParseError(
                f"{path}:{first_over}: more than {self.max_lines:,} lines in all sources together"
                f" (one per {self.BYTES_PER_LINE} bytes of the input limit; SWF lines have 36"
                " or more); stopped reading. If the input is real, raise the limit with"
                " --max-input-size"
            )


def _open_binary(path: str) -> Union[gzip.GzipFile, io.BufferedReader]:
    """Open a plain or gzip-compressed file (by magic number, not by name) for reading bytes."""
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _too_long(path: str, lineno: int, limit: int) -> ParseError:
    return ParseError(
        f"{path}:{lineno}: a line longer than {format_bytes(limit)}; neither an SWF trace nor"
        " a PBS accounting log (their lines are at most a few kilobytes)"
    )


def _read_blocks(
    path: str, limits: Optional[InputLimits] = None
) -> Iterator[Tuple[int, List[str]]]:
    """Yield ``(number of the first line, lines)``: the file's lines, in blocks, without newline.

    Reads at most 1 MiB at a time, so memory stays bounded whatever the file holds (a gzip
    bomb, a line that never ends); lines are UTF-8, undecodable bytes replaced. Only ``\\n``
    ends a line: a ``\\r`` before it stays (every reader strips whitespace).

    :param limits: the caps and what was read so far (default: a fresh ``InputLimits()``)
    :raises ParseError: the file cannot be read, a line is longer than
        ``limits.max_line_bytes``, or the sources give more than ``limits.max_bytes`` or
        ``limits.max_lines``
    """
    if limits is None:
        limits = InputLimits()
    max_line = limits.max_line_bytes
    # Reading at most max_line at a time: a line that ends in the chunk it began in is short
    # enough, so only a line carried over from earlier chunks needs measuring.
    step = min(_CHUNK_BYTES, max_line)
    lineno = 0  # lines yielded so far
    carry = b""  # the start of a line that has not ended yet
    try:
        with _open_binary(path) as fh:
            while True:
                chunk = fh.read(step)
                if not chunk:
                    break
                limits.charge(path, lineno + 1, len(chunk))
                cut = chunk.rfind(b"\n") + 1
                if not cut:
                    if len(carry) + len(chunk) > max_line:
                        raise _too_long(path, lineno + 1, max_line)
                    carry += chunk  # at most max_line / step copies of at most max_line
                    continue
                if carry:
                    if len(carry) + chunk.find(b"\n") > max_line:
                        raise _too_long(path, lineno + 1, max_line)
                    data = carry + chunk[:cut]
                else:
                    data = chunk[:cut]
                carry = chunk[cut:]
                lines = data.decode("utf-8", "replace").split("\n")
                lines.pop()  # the empty text after the last newline
                limits.count_lines(path, lineno + 1, len(lines))
                yield lineno + 1, lines
                lineno += len(lines)
            if carry:  # the last line has no newline
                limits.count_lines(path, lineno + 1, 1)
                yield lineno + 1, [carry.decode("utf-8", "replace")]
    except (OSError, EOFError, zlib.error) as err:
        raise ParseError(f"{path}: cannot read: {err}") from err


def read_lines(path: str, limits: Optional[InputLimits] = None) -> Iterator[Tuple[int, str]]:
    """Yield ``(line number, line)``; see :func:`_read_blocks`."""
    for first, lines in _read_blocks(path, limits):
        yield from enumerate(lines, first)


def sniff_format(path: str, limits: Optional[InputLimits] = None) -> str:
    """Tell an SWF trace from a PBS accounting log by its first data line.

    :param path: a file, plain or gzip-compressed
    :param limits: see :func:`_read_blocks`; what the sniffing reads is not counted (the
        file is read again), but it stops where the limits would stop that read
    :returns: ``"swf"`` or ``"pbs"``
    :raises ParseError: the file is unreadable, empty, neither format, or beyond the limits
    """
    if limits is None:
        limits = InputLimits()
    mine = InputLimits(max(1, limits.max_bytes - limits.used), limits.max_line_bytes)
    mine.max_lines = max(1, limits.max_lines - limits.lines)
    for lineno, line in read_lines(path, mine):
        text = line.strip()
        if not text or text[0] in _COMMENT_CHARS:
            continue
        if _PBS_LINE_RE.match(text):
            return PBS
        if _SWF_LINE_RE.match(text):
            return SWF
        raise ParseError(
            f"{path}:{lineno}: neither an SWF line (18+ numeric fields) nor a PBS accounting "
            f"record (MM/DD/YYYY HH:MM:SS;T;ID;...): {text[:80]!r}"
        )
    raise ParseError(f"{path}: no data lines (empty, or comments only)")


def _swf_int(token: str) -> int:
    """Parse an SWF number; fractions (some traces have them) round half up."""
    try:
        return int(token)
    except ValueError:
        value = float(token)
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"not a finite number: {token!r}") from None
        return int(value + 0.5) if value >= 0 else -int(-value + 0.5)


def _warn_bad(path: str, lineno: int, why: str, count: int) -> None:
    if count <= _MAX_WARNINGS:
        log.warning("%s:%s: skipped: %s", path, lineno, why)


def _count_implausible(skipped: Dict[str, int], reason: str, path: str, lineno: int) -> None:
    count = skipped[reason] = skipped.get(reason, 0) + 1
    if count <= _MAX_WARNINGS:  # the command's summary prints the counts
        log.debug("%s:%s: skipped: %s", path, lineno, reason)


class SwfHeader:
    """What an SWF trace's header comments say; filled in while the trace is read."""

    def __init__(self) -> None:
        self.unix_start: int = 0
        """``; UnixStartTime:``, added to submit times (0 when absent: Alea's are absolute)."""
        self.max_procs: Optional[int] = None
        """``; MaxProcs:``, the machine's processors, if the header says."""


# One SWF job as both replays read it: (user, submit_s, wait_s, run_s, allocated processors,
# requested processors, requested time). None = unknown (-1); submit_s is absolute.
SwfRow = Tuple[
    Optional[str],
    Optional[int],
    Optional[int],
    Optional[int],
    Optional[int],
    Optional[int],
    Optional[int],
]


# Fields 2, 3, 4, 5, 8, 9, 12 (1-based): submit, wait, run time, allocated processors,
# requested processors, requested time, user.
_swf_fields = operator.itemgetter(1, 2, 3, 4, 7, 8, 11)


def swf_rows(
    path: str,
    skipped: Dict[str, int],
    header: Optional[SwfHeader] = None,
    limits: Optional[InputLimits] = None,
    extra: Optional[List[List[str]]] = None,
) -> Iterator[SwfRow]:
    """Yield the jobs of an SWF trace (standard 18-column or Alea 21-column, plain or ``.gz``).

    Fields used (1-based): 2 submit, 3 wait, 4 run time, 5 allocated processors, 8 requested
    processors, 9 requested time, 12 user. ``-1`` means unknown (None). A line with fewer than
    18 fields or a non-numeric field is skipped, counted under ``"malformed line"`` and (the
    first few) logged as a warning with ``path:lineno``; a job with a value beyond
    :mod:`.bounds` (other negative numbers included) is skipped and counted under the bound's
    reason.

    :param skipped: skip counts by reason, added to while the trace is read
    :param header: filled in with the header's values as they are read
    :param limits: see :func:`_read_blocks`
    :param extra: if given, fields 19 on (Alea's node list, queue and node spec) of each
        yielded row are appended to it, parallel to the rows
    :raises ParseError: the file cannot be read or is beyond the limits, or no line in it is SWF
    """
    if header is None:
        header = SwfHeader()
    bad = good = 0
    for first, lines in _read_blocks(path, limits):
        for lineno, line in enumerate(lines, first):
            if not line or line[0] == ";" or line.isspace():
                if line.startswith(";"):
                    m = _UNIX_START_RE.match(line)
                    if m:
                        header.unix_start = int(m.group(1))
                    low = line.lower()
                    if "maxprocs:" in low:
                        try:
                            header.max_procs = int(low.split("maxprocs:", 1)[1].split()[0])
                        except (ValueError, IndexError):
                            pass
                continue
            fields = line.split()
            if len(fields) < _SWF_MIN_FIELDS:
                bad += 1
                _warn_bad(path, lineno, f"{len(fields)} fields, SWF has 18", bad)
                continue
            try:
                try:  # the common case, in C: whole numbers
                    submit, wait, run, alloc, req_procs, req, user = map(int, _swf_fields(fields))
                except ValueError:
                    submit, wait, run, alloc, req_procs, req, user = map(
                        _swf_int, _swf_fields(fields)
                    )
            except ValueError as err:
                bad += 1
                _warn_bad(path, lineno, f"not a number ({err})", bad)
                continue
            good += 1
            # -1 is unknown. A negative submit time other than -1 stays negative, to fail
            # its bound (the others are checked as they are).
            submit_s = (
                None if submit == -1 else submit + header.unix_start if submit >= 0 else submit
            )
            wait_s = None if wait == -1 else wait
            run_s = None if run == -1 else run
            alloc_p = None if alloc == -1 else alloc
            req_p = None if req_procs == -1 else req_procs
            req_s = None if req == -1 else req
            reason = implausible(submit_s, wait_s, run_s, req_s, alloc_p, req_p)
            if reason is not None:
                _count_implausible(skipped, reason, path, lineno)
                continue
            if extra is not None:
                extra.append(fields[_SWF_MIN_FIELDS:])
            yield fields[11] if user >= 0 else None, submit_s, wait_s, run_s, alloc_p, req_p, req_s
    if bad:
        skipped[SKIP_MALFORMED] = skipped.get(SKIP_MALFORMED, 0) + bad
        if bad > _MAX_WARNINGS:
            log.warning("%s: %s malformed lines skipped in all", path, bad)
        if not good:
            raise ParseError(f"{path}: no valid SWF line ({bad} malformed)")


def read_swf(
    path: str,
    user_prefix: str = "",
    start_from_submit: bool = False,
    limits: Optional[InputLimits] = None,
) -> Trace:
    """Read an SWF trace (standard 18-column or Alea 21-column, plain or ``.gz``).

    Unknown values (``-1``) become ``None``; malformed lines and jobs with values beyond
    :mod:`.bounds` are skipped and counted by reason (see :func:`swf_rows`). Processors: the
    requested ones, else the allocated ones.

    :param path: the trace file
    :param user_prefix: prepended to user ids, to keep users of different traces apart
    :param start_from_submit: a job whose wait is unknown starts at its submit time (only
        when asked: traces such as LLNL's record no wait at all)
    :param limits: see :func:`_read_blocks`
    :param extra: if given, fields 19 on (Alea's node list, queue and node spec) of each
        yielded row are appended to it, parallel to the rows
    :raises ParseError: the file cannot be read or is beyond the limits, or no line in it is SWF
    """
    jobs: List[TraceJob] = []
    skipped: Dict[str, int] = {}
    assumed = 0
    append = jobs.append
    for user, submit_s, wait_s, run_s, alloc, req_procs, req_s in swf_rows(
        path, skipped, limits=limits
    ):
        start_s = submit_s + wait_s if submit_s is not None and wait_s is not None else None
        if start_s is None and start_from_submit and submit_s is not None:
            start_s = submit_s  # asked for: a trace that records no wait (-1), e.g. LLNL
            assumed += 1
        # Positional: this runs once per line of traces with 10^5-10^6 lines.
        append(
            TraceJob(
                None if user is None else user_prefix + user,
                submit_s,
                start_s,
                start_s + run_s if start_s is not None and run_s is not None else None,
                req_s,
                run_s,
                req_procs if req_procs is not None else alloc,
            )
        )
    if assumed:
        log.warning(
            "%s: %s jobs without a wait time replayed with their submit time as start"
            " (--start-from-submit)",
            path,
            assumed,
        )
    return Trace(source=path, jobs=jobs, skipped=skipped)


def pbs_files(path: str, max_files: int = MAX_DIR_FILES) -> List[str]:
    """List the accounting files of a path: the file itself, or a directory's files by name.

    PBS names its daily files YYYYMMDD, so name order is time order.

    :param path: a file or a directory
    :param max_files: the most entries a directory may have
    :raises ParseError: the path does not exist, or the directory has no files or more than
        ``max_files`` entries
    """
    if os.path.isdir(path):
        names = []
        try:
            with os.scandir(path) as entries:
                for k, entry in enumerate(entries):
                    if k >= max_files:
                        raise ParseError(
                            f"{path}: more than {max_files:,} entries: not a directory of"
                            " PBS accounting files (one a day)"
                        )
                    if not entry.name.startswith(".") and entry.is_file():
                        names.append(entry.name)
        except OSError as err:
            raise ParseError(f"{path}: cannot read: {err}") from err
        if not names:
            raise ParseError(f"{path}: directory has no files")
        return [os.path.join(path, n) for n in sorted(names)]
    if not os.path.exists(path):
        raise ParseError(f"{path}: no such file or directory")
    return [path]


def _finished_row(line: str, server: Optional[str] = None) -> Optional[Tuple[Any, ...]]:
    """One accounting log line as :func:`softwalltime.accounting.finished_job_row` (a
    tuple in ``FINISHED_JOB_COLUMNS`` order, epoch-second times), or None when the line
    describes no finished job: blank, a comment, another record type, an array parent, a
    reservation.

    :param server: PBS server name for a job id without a ``.server`` suffix
    :raises ParseError: not an accounting record, or a record the parser refuses; with a
        ``rule`` attribute (:class:`softwalltime.accounting.ImpossibleRecord`) when the
        record holds an impossible value
    """
    text = line.rstrip("\r\n")
    if not text.strip() or text[0] in _COMMENT_CHARS:
        return None
    if not _PBS_LINE_RE.match(text):
        raise ParseError(f"not an accounting record: {text[:60]!r}")
    # Cheap pre-filter (the date prefix is fixed-width): only E records describe a finished
    # job, so the others are not worth tokenizing.
    if text[20:22] != "E;":
        return None
    # Imported here so that SWF-only use does not need the PBS parser.
    from ..accounting import finished_job_row, parse_line

    return finished_job_row(parse_line(text), server)


# What a site-shaped replay reads of an E record (SiteColumns' order): the job's select,
# place, execution queue, group and account ("": none)
SITE_FIELDS = ("select_spec", "place", "queue", "groupname", "account")


def read_pbs(
    paths: Sequence[str],
    server: Optional[str] = None,
    limits: Optional[InputLimits] = None,
    site_rows: Optional[List[Tuple[str, ...]]] = None,
) -> Trace:
    """Read finished jobs from PBS accounting logs (``E`` records of jobs).

    Records the parser rejects are skipped, counted and logged with ``path:lineno``; an ``E``
    record seen twice (same server, job id and ctime, e.g. overlapping copies) counts once; a
    job with a value beyond :mod:`.bounds` (wait = start - ctime) is skipped and counted
    under the bound's reason.

    :param paths: accounting files or directories of them; all form one workload
    :param server: PBS server name for job ids without a ``.server`` suffix (Torque logs)
    :param limits: see :func:`_read_blocks`
    :param site_rows: when given, filled with each returned job's :data:`SITE_FIELDS`, in
        the jobs' order (a site-shaped replay's columns)
    :raises ParseError: a path cannot be read or is beyond the limits
    """
    from ..accounting import FINISHED_JOB_COLUMNS

    if limits is None:
        limits = InputLimits()
    col = {name: k for k, name in enumerate(FINISHED_JOB_COLUMNS)}
    key_of = operator.itemgetter(col["server"], col["job_id"], col["ctime"])
    job_of = operator.itemgetter(
        *(col[name] for name in ("username", "ctime", "started_at", "ended_at")),
        *(col[name] for name in ("walltime_s", "runtime_s", "ncpus", "soft_walltime_s")),
    )
    i_seq = col["job_seq"]
    site_of = operator.itemgetter(*(col[name] for name in SITE_FIELDS))
    files: List[str] = []
    for p in paths:
        files.extend(pbs_files(p))
    # None: a job skipped as implausible (kept, so that its duplicates count as duplicates).
    seen: Dict[Tuple[str, str, int], Optional[Tuple[int, TraceJob, Tuple[Any, ...]]]] = {}
    skipped: Dict[str, int] = {}
    bad = dup = 0
    for path in files:
        for lineno, line in read_lines(path, limits):
            try:
                row = _finished_row(line, server)
            except ParseError as err:
                # The parser refuses impossible values itself (accounting.ImpossibleRecord,
                # with the rule broken): counted by that rule, as the bounds below count.
                rule = getattr(err, "rule", None)
                if rule is not None:
                    _count_implausible(skipped, rule, path, lineno)
                else:
                    bad += 1
                    _warn_bad(path, lineno, str(err), bad)
                continue
            if row is None:
                continue
            key = key_of(row)
            if key in seen:
                dup += 1
                continue
            user, ctime, start, end, wall, run, ncpus, soft = job_of(row)
            wait = start - ctime if start is not None and ctime is not None else None
            reason = implausible(ctime, wait, run, wall, ncpus)
            if reason is not None:
                _count_implausible(skipped, reason, path, lineno)
                seen[key] = None
                continue
            job = TraceJob(user or None, ctime, start, end, wall, run, ncpus, soft)
            seen[key] = (row[i_seq], job, site_of(row) if site_rows is not None else ())
    if bad > _MAX_WARNINGS:
        log.warning("%s malformed accounting records skipped in all", bad)
    if bad:
        skipped[SKIP_MALFORMED] = bad
    if dup:
        skipped[SKIP_DUPLICATE] = dup
    jobs = _in_trace_order(seen.values(), site_rows)
    return Trace(source=", ".join(paths), jobs=jobs, skipped=skipped)


def _in_trace_order(
    seen: Iterable[Optional[Tuple[int, TraceJob, Tuple[Any, ...]]]],
    site_rows: Optional[List[Tuple[str, ...]]],
) -> List[TraceJob]:
    """The jobs kept (None: skipped) in trace order, submission order (ctime, then job
    number) as SWF lines are; their site columns appended to ``site_rows`` in that order."""
    ordered = sorted((v for v in seen if v is not None), key=lambda v: ((v[1].submit_s or 0), v[0]))
    if site_rows is not None:
        site_rows.extend(tuple(v or "" for v in site) for _, _, site in ordered)
    return [j for _, j, _ in ordered]


def read_sources(
    paths: Sequence[str],
    server: Optional[str] = None,
    start_from_submit: bool = False,
    limits: Optional[InputLimits] = None,
) -> Trace:
    """Read SWF traces and PBS accounting logs into one workload.

    Directories and PBS files together form one PBS workload (one server's log files). Each
    SWF trace keeps its own users: with several SWF files, user ids are prefixed with the
    file's position (``"2:17"``), since SWF user numbers mean nothing across traces.

    :param paths: files (plain or ``.gz``) or directories of PBS accounting files
    :param server: see :func:`read_pbs`
    :param start_from_submit: see :func:`read_swf`
    :param limits: shared by all paths (default: a fresh ``InputLimits()``); see
        :func:`_read_blocks`
    :raises ParseError: a path is missing, unreadable, beyond the limits, or in neither format
    """
    if not paths:
        raise ParseError("no source given")
    if limits is None:
        limits = InputLimits()
    swf: List[str] = []
    pbs: List[str] = []
    for p in paths:
        if os.path.isdir(p):
            pbs.append(p)
        elif not os.path.exists(p):
            raise ParseError(f"{p}: no such file or directory")
        elif sniff_format(p, limits) == SWF:
            swf.append(p)
        else:
            pbs.append(p)
    jobs: List[TraceJob] = []
    skipped: Dict[str, int] = {}
    parts: List[Trace] = []
    for k, p in enumerate(swf, 1):
        prefix = f"{k}:" if len(swf) > 1 else ""
        parts.append(
            read_swf(p, user_prefix=prefix, start_from_submit=start_from_submit, limits=limits)
        )
    if pbs:
        parts.append(read_pbs(pbs, server, limits))
    for part in parts:
        jobs.extend(part.jobs)
        for reason, count in part.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + count
    return Trace(source=", ".join(paths), jobs=jobs, skipped=skipped)
