"""Workload sources for the replay evaluation: SWF traces and PBS accounting logs.

Both readers return a :class:`softwalltime.replay.evaluate.Trace` (jobs in trace order). They do no
filtering beyond what they cannot parse: the replay's skip rules live in ``evaluate``.

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
import os
import re
from typing import IO, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import ParseError
from .evaluate import Trace, TraceJob

log = logging.getLogger(__name__)

SWF = "swf"
PBS = "pbs"
# Reader-level skip reasons (the replay adds its own).
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


def _open_text(path: str) -> IO[str]:
    """Open a plain or gzip-compressed text file (by magic number, not by name)."""
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def _read_lines(path: str) -> Iterator[Tuple[int, str]]:
    """Yield (line number, line) and turn I/O and gzip errors into ParseError."""
    try:
        with _open_text(path) as fh:
            yield from enumerate(fh, 1)
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        raise ParseError(f"{path}: cannot read: {err}") from err


def sniff_format(path: str) -> str:
    """Tell an SWF trace from a PBS accounting log by its first data line.

    :param path: a file, plain or gzip-compressed
    :returns: ``"swf"`` or ``"pbs"``
    :raises ParseError: the file is unreadable, empty, or neither format
    """
    for lineno, line in _read_lines(path):
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


def read_swf(path: str, user_prefix: str = "", start_from_submit: bool = False) -> Trace:
    """Read an SWF trace (standard 18-column or Alea 21-column, plain or ``.gz``).

    Unknown values (``-1``) become ``None``; a line with fewer than 18 fields or a
    non-numeric field is skipped, counted and logged as a warning with ``path:lineno``.

    :param path: the trace file
    :param user_prefix: prepended to user ids, to keep users of different traces apart
    :param start_from_submit: a job whose wait is unknown starts at its submit time (only
        when asked: traces such as LLNL's record no wait at all)
    :raises ParseError: the file cannot be read, or no line in it is SWF
    """
    offset = 0
    jobs: List[TraceJob] = []
    bad = 0
    assumed = 0
    append = jobs.append
    for lineno, line in _read_lines(path):
        if not line or line[0] == ";" or line.isspace():
            m = _UNIX_START_RE.match(line)
            if m:
                offset = int(m.group(1))
            continue
        fields = line.split()
        if len(fields) < _SWF_MIN_FIELDS:
            bad += 1
            _warn_bad(path, lineno, f"{len(fields)} fields, SWF has 18", bad)
            continue
        try:
            submit = _swf_int(fields[1])
            wait = _swf_int(fields[2])
            run = _swf_int(fields[3])
            req = _swf_int(fields[8])
            user = _swf_int(fields[11])
            procs = _swf_int(fields[7])
            if procs < 0:
                procs = _swf_int(fields[4])
        except ValueError as err:
            bad += 1
            _warn_bad(path, lineno, f"not a number ({err})", bad)
            continue
        submit_s = submit + offset if submit >= 0 else None
        start_s = submit_s + wait if submit_s is not None and wait >= 0 else None
        if start_s is None and start_from_submit and submit_s is not None:
            start_s = submit_s  # asked for: a trace that records no wait (-1), e.g. LLNL
            assumed += 1
        end_s = start_s + run if start_s is not None and run >= 0 else None
        # Positional: this runs once per line of traces with 10^5-10^6 lines.
        append(
            TraceJob(
                user_prefix + fields[11] if user >= 0 else None,
                submit_s,
                start_s,
                end_s,
                req if req >= 0 else None,
                run if run >= 0 else None,
                procs if procs >= 0 else None,
            )
        )
    if bad > _MAX_WARNINGS:
        log.warning("%s: %s malformed lines skipped in all", path, bad)
    if assumed:
        log.warning(
            "%s: %s jobs without a wait time replayed with their submit time as start"
            " (--start-from-submit)",
            path,
            assumed,
        )
    if not jobs and bad:
        raise ParseError(f"{path}: no valid SWF line ({bad} malformed)")
    return Trace(source=path, jobs=jobs, skipped={SKIP_MALFORMED: bad} if bad else {})


def pbs_files(path: str) -> List[str]:
    """List the accounting files of a path: the file itself, or a directory's files by name.

    PBS names its daily files YYYYMMDD, so name order is time order.

    :param path: a file or a directory
    :raises ParseError: the path does not exist or the directory has no files
    """
    if os.path.isdir(path):
        names = sorted(
            n
            for n in os.listdir(path)
            if not n.startswith(".") and os.path.isfile(os.path.join(path, n))
        )
        if not names:
            raise ParseError(f"{path}: directory has no files")
        return [os.path.join(path, n) for n in names]
    if not os.path.exists(path):
        raise ParseError(f"{path}: no such file or directory")
    return [path]


def read_pbs(paths: Sequence[str], server: Optional[str] = None) -> Trace:
    """Read finished jobs from PBS accounting logs (``E`` records of jobs).

    Records the parser rejects are skipped, counted and logged with ``path:lineno``; an ``E``
    record seen twice (same server, job id and ctime, e.g. overlapping copies) counts once.

    :param paths: accounting files or directories of them; all form one workload
    :param server: PBS server name for job ids without a ``.server`` suffix (Torque logs)
    :raises ParseError: a path cannot be read
    """
    # Imported here so that SWF-only use does not need the PBS parser.
    from ..accounting import FINISHED_JOB_COLUMNS, finished_job_row, parse_line

    # finished_job_row() is finished_job() as a tuple with epoch-second times (no datetimes).
    col = {name: k for k, name in enumerate(FINISHED_JOB_COLUMNS)}
    i_server, i_job, i_ctime, i_seq = col["server"], col["job_id"], col["ctime"], col["job_seq"]
    i_user, i_wall, i_run = col["username"], col["walltime_s"], col["runtime_s"]
    i_start, i_end, i_ncpus = col["started_at"], col["ended_at"], col["ncpus"]

    files: List[str] = []
    for p in paths:
        files.extend(pbs_files(p))
    seen: Dict[Tuple[str, str, int], Tuple[int, TraceJob]] = {}
    bad = dup = 0
    for path in files:
        for lineno, line in _read_lines(path):
            text = line.rstrip("\r\n")
            if not text.strip() or text[0] in _COMMENT_CHARS:
                continue
            if not _PBS_LINE_RE.match(text):
                bad += 1
                _warn_bad(path, lineno, f"not an accounting record: {text[:60]!r}", bad)
                continue
            # Cheap pre-filter (the date prefix is fixed-width): only E records describe a
            # finished job, so the others are not worth tokenizing.
            if text[20:22] != "E;":
                continue
            try:
                row = finished_job_row(parse_line(text), server)
            except ParseError as err:
                bad += 1
                _warn_bad(path, lineno, str(err), bad)
                continue
            if row is None:  # array parent, reservation, ...
                continue
            key = (row[i_server], row[i_job], row[i_ctime])
            if key in seen:
                dup += 1
                continue
            seen[key] = (
                row[i_seq],
                TraceJob(
                    row[i_user] or None,
                    row[i_ctime],
                    row[i_start],
                    row[i_end],
                    row[i_wall],
                    row[i_run],
                    row[i_ncpus],
                ),
            )
    if bad > _MAX_WARNINGS:
        log.warning("%s malformed accounting records skipped in all", bad)
    # Trace order = submission order (ctime, then job number), as SWF lines are.
    ordered = sorted(seen.values(), key=lambda v: ((v[1].submit_s or 0), v[0]))
    skipped: Dict[str, int] = {}
    if bad:
        skipped[SKIP_MALFORMED] = bad
    if dup:
        skipped[SKIP_DUPLICATE] = dup
    return Trace(source=", ".join(paths), jobs=[j for _, j in ordered], skipped=skipped)


def read_sources(
    paths: Sequence[str], server: Optional[str] = None, start_from_submit: bool = False
) -> Trace:
    """Read SWF traces and PBS accounting logs into one workload.

    Directories and PBS files together form one PBS workload (one server's log files). Each
    SWF trace keeps its own users: with several SWF files, user ids are prefixed with the
    file's position (``"2:17"``), since SWF user numbers mean nothing across traces.

    :param paths: files (plain or ``.gz``) or directories of PBS accounting files
    :param server: see :func:`read_pbs`
    :param start_from_submit: see :func:`read_swf`
    :raises ParseError: a path is missing, unreadable, or in neither format
    """
    if not paths:
        raise ParseError("no source given")
    swf: List[str] = []
    pbs: List[str] = []
    for p in paths:
        if os.path.isdir(p):
            pbs.append(p)
        elif not os.path.exists(p):
            raise ParseError(f"{p}: no such file or directory")
        elif sniff_format(p) == SWF:
            swf.append(p)
        else:
            pbs.append(p)
    jobs: List[TraceJob] = []
    skipped: Dict[str, int] = {}
    parts: List[Trace] = []
    for k, p in enumerate(swf, 1):
        prefix = f"{k}:" if len(swf) > 1 else ""
        parts.append(read_swf(p, user_prefix=prefix, start_from_submit=start_from_submit))
    if pbs:
        parts.append(read_pbs(pbs, server))
    for part in parts:
        jobs.extend(part.jobs)
        for reason, count in part.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + count
    return Trace(source=", ".join(paths), jobs=jobs, skipped=skipped)
