"""Live job states from the Q, S, R, D and A records of a chunk: what is queued or running.

Pure, like ingest/parse.py (which calls :func:`fold_chunk` for every chunk). A job's state
is decided by its *last* record in the chunk, so only that record is read in full: a
backfill, where almost every job's Q and S are followed by its E in the same chunk, parses
no more lines than before. What a chunk yields, in log order:

- a state row (``queued`` from a Q or an R record, ``running`` from an S record) for a job
  whose last record in the chunk is one of those;
- a *gone* key (server, job id) for every job whose last record is a D (deleted) or A
  (aborted): the row the database (or the batch) holds for it from an earlier chunk becomes
  a tombstone (state ``deleted``), so that reading that earlier record again (a rotated
  file read from its start) cannot bring the job back. A job queued and deleted within one
  chunk leaves nothing: a file is only ever read again whole, deletion included.

An E record needs nothing here: the loader deletes the row of every job it stores in
``finished_jobs``, and never inserts a state for a job ``finished_jobs`` already has (an E
read before the job's Q, as after log rotation).

A state record that cannot be true (a start before the job's creation, a processor count
below 1, a duration that does not parse) is refused with its line number and reason,
like a malformed E record. A Q record of PBS before v20 (only ``queue=NAME``: no user and
no ctime) holds no state and is skipped.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from softwalltime.accounting import (
    BOUNDS,
    ImpossibleRecord,
    Record,
    duration_s,
    parse_job_id,
    parse_line,
)
from softwalltime.errors import ParseError

# Column order of state rows (and of the loader's staging table), before source columns.
LIVE_COLUMNS = (
    "server",
    "job_id",
    "ctime",
    "job_seq",
    "state",
    "username",
    "queue",
    "ncpus",
    "walltime_s",
    "soft_walltime_s",
    "qtime",
    "started_at",
    "event_at",
)
STATE_POS = LIVE_COLUMNS.index("state")
QUEUED, RUNNING, DELETED = "queued", "running", "deleted"
LIVE_TYPES = b"QSRDAE"
STATE_TYPES = frozenset("QSR")
GONE_TYPES = frozenset("DA")
_QTIME = BOUNDS["ctime"]._replace(key="qtime", column=None)
_NOT_A_JOB = re.compile(rb"license\Z|[RSM]\d|.*\[\]")  # reservations, array parents
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
NULL = "\\N"


class Op(NamedTuple):
    """One effect of a chunk on ``live_jobs``, in log order."""

    key: Tuple[str, str]  # (server, job id)
    row: Optional[str]  # a COPY line (LIVE_COLUMNS + source file, offset); None: gone only
    gone: bool  # the database's row of this job becomes a tombstone first


def tombstone(row: str) -> str:
    """A state row's COPY line with its state set to ``deleted``."""
    values = row.split("\t")
    values[STATE_POS] = DELETED
    return "\t".join(values)


def _epoch(attrs: Dict[str, str], key: str, required: bool, rtype: str) -> Optional[int]:
    value = attrs.get(key)
    if not value or value == "0":
        if required:
            raise ParseError(f"{rtype} record without {key}=")
        return None
    try:
        number = int(value)
    except ValueError:
        raise ParseError(f"{key}={value[:40]!r} is not an integer") from None
    bound = _QTIME if key == "qtime" else BOUNDS[key]
    return bound.check(number, value)


def _duration(attrs: Dict[str, str], key: str) -> Optional[int]:
    value = attrs.get(key)
    if not value:
        return None
    seconds = duration_s(value, BOUNDS[key])
    if seconds is None:
        raise ParseError(f"{key}={value[:40]!r} is not a duration within 10 years")
    return seconds


def _ncpus(attrs: Dict[str, str]) -> Optional[int]:
    value = attrs.get("Resource_List.ncpus")
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        raise ParseError(f"Resource_List.ncpus={value[:40]!r} is not an integer") from None
    return BOUNDS["Resource_List.ncpus"].check(number, value)


def _order(earlier: str, a: Optional[int], later: str, b: Optional[int]) -> None:
    if a is not None and b is not None and b < a:
        raise ImpossibleRecord(
            f"{later}={b} is before {earlier}={a}: impossible", f"{later} before {earlier}"
        )


def state_row(rec: Record, server: Optional[str]) -> Optional[Tuple[Any, ...]]:
    """The ``live_jobs`` values (LIVE_COLUMNS order, epoch seconds) a Q, S or R record sets.

    :returns: None for a record that holds no state: another type, a reservation, an
        array parent, a pre-v20 Q record (no user, no ctime)
    :raises ParseError: a value is missing, does not parse or cannot be true
    """
    a = rec.attrs
    if rec.rtype not in STATE_TYPES or _NOT_A_JOB.match(rec.ident.encode()) is not None:
        return None
    if "user" not in a and "ctime" not in a:
        return None  # PBS before v20 wrote only queue=NAME in a Q record
    if rec.duplicate_keys:
        raise ParseError(
            "key(s) {} appear twice: possibly forged through an unescaped value"
            " (PBS issue #1013); not stored".format(", ".join(rec.duplicate_keys))
        )
    seq, _index, suffix, _parent = parse_job_id(rec.ident)
    host = suffix or server
    if not host:
        raise ParseError(f"job id {rec.ident!r} has no server suffix; name the server (--server)")
    user = a.get("user")
    if not user:
        raise ParseError(f"{rec.rtype} record without user=")
    ctime = _epoch(a, "ctime", True, rec.rtype)
    qtime = _epoch(a, "qtime", False, rec.rtype)
    start = _epoch(a, "start", rec.rtype == "S", rec.rtype)
    end = _epoch(a, "end", rec.rtype == "R", rec.rtype)
    _order("ctime", ctime, "start", start)
    _order("start", start, "end", end)
    _order("ctime", ctime, "end", end)
    ncpus = _ncpus(a)
    wall = _duration(a, "Resource_List.walltime")
    soft = _duration(a, "Resource_List.soft_walltime")
    if rec.rtype == "S":
        state, started, event = RUNNING, start, start
    elif rec.rtype == "R":
        state, started, event = QUEUED, None, end  # requeued when the run ended
    else:
        state, started, event = QUEUED, None, qtime or ctime
    return (
        host,
        rec.ident,
        ctime,
        seq,
        state,
        user,
        a.get("queue"),
        ncpus,
        wall,
        soft,
        qtime,
        started,
        event,
    )


def copy_row(row: Tuple[Any, ...], source: str, offset: int) -> str:
    """The COPY text line of a state row (``source`` already COPY-escaped)."""
    values = [
        NULL if v is None else (v.translate(_ESCAPES) if isinstance(v, str) else str(v))
        for v in row
    ]
    values.append(source)
    values.append(str(offset))
    return "\t".join(values)


# (record type, the line's bytes, byte offset of the line, line number)
Candidate = Tuple[str, bytes, int, int]
# Report a refused line: (line number, record type, reason, rule or None)
Refuse = Callable[[int, str, str, Optional[str]], None]


_E = ord("E")
_IS_STATE = bytes(1 if chr(b) in "QSR" else 0 for b in range(256))
_IS_GONE = bytes(1 if chr(b) in "DA" else 0 for b in range(256))


def fold_chunk(
    idents: Sequence[bytes],
    kinds: bytes,
    line: Callable[[int], Candidate],
    source: str,
    server: Optional[str],
    refuse: Refuse,
) -> List[Op]:
    """The live-state effects of one chunk's job records (see the module docstring).

    The bookkeeping runs in C (dict, zip, compress) over every record; Python code only
    for the jobs whose last record in the chunk is not an E.

    :param idents: the record ids of the chunk's Q, S, R, D, A and E lines with a good
        prefix, in order
    :param kinds: their record types, one byte each
    :param line: the k-th of those lines as (type, bytes, offset, line number)
    :param source: the file's path, COPY-escaped
    :param server: PBS server name; None: each job id's suffix
    :param refuse: called for a Q or S line that is refused (R lines were checked already)
    """
    last = dict(zip(idents, itertools.count()))
    is_state = kinds.translate(_IS_STATE)
    gone_seen = set(itertools.compress(idents, kinds.translate(_IS_GONE)))
    ops: List[Op] = []
    for k in sorted(k for k in last.values() if kinds[k] != _E):
        ident = idents[k]
        if _NOT_A_JOB.match(ident) is not None:
            continue
        if is_state[k]:
            row = _state(line(k), source, server, refuse)
            if row is not None:
                ops.append(Op(row[0], row[1], ident in gone_seen))
            continue
        key = _gone_key(ident, server)
        if key is None:
            continue  # no server to name it by: its E (if any) is refused the same way
        ops.append(Op(key, None, True))
    return ops


def _gone_key(ident: bytes, server: Optional[str]) -> Optional[Tuple[str, str]]:
    text = ident.decode("utf-8", "replace")
    _seq, dot, suffix = text.partition(".")
    host = suffix if dot else server
    return (host, text) if host else None


def _state(
    cand: Candidate, source: str, server: Optional[str], refuse: Refuse
) -> Optional[Tuple[Tuple[str, str], str]]:
    """(key, COPY line) of a state record, or None (no state, or refused)."""
    rtype, raw, offset, lineno = cand
    text = raw.decode("utf-8", "replace").replace("\x00", "")
    try:
        values = state_row(parse_line(text), server)
    except ParseError as err:
        if rtype != "R":  # an R record was checked (and refused) as a rerun already
            refuse(lineno, rtype, str(err), getattr(err, "rule", None))
        return None
    if values is None:
        return None
    return (values[0], values[1]), copy_row(values, source, offset)
