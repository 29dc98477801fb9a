"""Chunks of accounting-file bytes into COPY rows, counts and malformed-line reports.

Pure (no database, no logging), so it runs the same in the ingesting process or in a
worker process: the ingester parses chunks in parallel and commits them in file order.
Only E and R records (the ones stored) are decoded and fully tokenized; every other line
gets its ``date;T;ID;`` prefix validated and is counted, so a malformed line of any type
is reported with its line number.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from softwalltime.accounting import RECORD_TYPES, finished_job_row, parse_line, rerun_row
from softwalltime.errors import ParseError

# Malformed lines reported one by one per chunk (the run shows the first few overall).
SHOW_MALFORMED = 10
MALFORMED_TYPE = "?"  # malformed lines whose record type cannot be told

_PREFIX_B = re.compile(rb"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;[A-Za-z];[^;]+;")
_TORN_B = re.compile(rb"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;[A-Za-z];")
_TYPES_B = {k.encode("ascii"): k for k in RECORD_TYPES}
_HASH, _SEMI = ord("#"), ord(";")
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
NULL = "\\N"


def copy_line(row: Tuple[Any, ...], source: str, offset: int, escape: bool) -> str:
    """One COPY text-format line for ``row`` plus its source file and offset.

    :param row: values from finished_job_row() or rerun_row()
    :param source: the file's path, already COPY-escaped (see copy_text())
    :param offset: byte offset of the record in its file
    :param escape: the source line contained a backslash, tab or CR, so text values must
        be escaped (checked once per line by the caller: the common case needs nothing)
    """
    if escape:
        values = [
            NULL if v is None else (v.translate(_ESCAPES) if isinstance(v, str) else str(v))
            for v in row
        ]
    else:
        values = [NULL if v is None else str(v) for v in row]
    values.append(source)
    values.append(str(offset))
    return "\t".join(values)


def copy_text(text: str) -> str:
    """Escape one text value for COPY's text format."""
    return text.translate(_ESCAPES)


class Chunk(NamedTuple):
    """What parse_chunk() found in one chunk of whole lines."""

    # (is_rerun, COPY line, byte offset after the record's line, its line number)
    rows: List[Tuple[bool, str, int, int]]
    counts: Dict[str, List[int]]  # record type -> [read, malformed]
    malformed: List[Tuple[int, str]]  # (line number, reason), the first SHOW_MALFORMED
    malformed_total: int
    ignored: int  # blank and comment lines


class _State:
    def __init__(self) -> None:
        self.rows: List[Tuple[bool, str, int, int]] = []
        self.counts: Dict[str, List[int]] = {}
        self.malformed: List[Tuple[int, str]] = []
        self.malformed_total = 0

    def count(self, rtype: str) -> List[int]:
        c = self.counts.get(rtype)
        if c is None:
            c = [0, 0]
            self.counts[rtype] = c
        return c

    def bad(self, lineno: int, rtype: str, reason: str) -> None:
        c = self.count(rtype)
        c[0] += 1
        c[1] += 1
        self.malformed_total += 1
        if len(self.malformed) < SHOW_MALFORMED:
            self.malformed.append((lineno, reason))


def parse_chunk(data: bytes, start: int, lineno: int, source: str, server: Optional[str]) -> Chunk:
    """Parse whole lines of an accounting file.

    :param data: whole lines (each ends in ``\\n``, except maybe the last of an archive)
    :param start: byte offset of ``data`` in its file
    :param lineno: number of lines before ``data`` in its file
    :param source: the file's path, COPY-escaped
    :param server: PBS server name for the rows; None: each job id's suffix
    """
    st = _State()
    rows = st.rows
    counts = st.counts
    ignored = 0
    lines = data.split(b"\n")
    if not lines[-1]:
        lines.pop()
    pos = start
    for raw in lines:
        lineno += 1
        off = pos
        pos += len(raw) + 1
        if not raw or raw[0] == _HASH or raw[0] == _SEMI or raw.isspace():
            ignored += 1
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
                        "value (PBS issue #1013); not stored".format(", ".join(rec.duplicate_keys))
                    )
                if rec.rtype == "E":
                    row = finished_job_row(rec, server)
                else:
                    row = rerun_row(rec, server)
            except ParseError as err:
                _bad_line(
                    st, source, server, lineno, off, min(pos, start + len(data)), raw, str(err)
                )
                continue
            c = counts.get(rec.rtype) or st.count(rec.rtype)
            c[0] += 1
            if row is not None:
                esc = "\\" in text or "\t" in text or "\r" in text
                rows.append(
                    (
                        rec.rtype == "R",
                        copy_line(row, source, off, esc),
                        min(pos, start + len(data)),
                        lineno,
                    )
                )
        else:
            rtype = _TYPES_B.get(t)
            if (
                rtype is None
                or _PREFIX_B.match(raw) is None
                or (raw.count(b";") > 3 and _TORN_B.search(raw, 20) is not None)
            ):
                _bad_line(st, source, server, lineno, off, min(pos, start + len(data)), raw, None)
                continue
            c = counts.get(rtype) or st.count(rtype)
            c[0] += 1
    return Chunk(rows, counts, st.malformed, st.malformed_total, ignored)


def _type_of(raw: bytes) -> str:
    if _PREFIX_B.match(raw) is not None:
        return _TYPES_B.get(raw[20:21], MALFORMED_TYPE)
    return MALFORMED_TYPE


def _bad_line(
    st: _State,
    source: str,
    server: Optional[str],
    lineno: int,
    off: int,
    end: int,
    raw: bytes,
    reason: Optional[str],
) -> None:
    """Report a malformed line; if it is torn, also process the record after the cut."""
    torn = _TORN_B.search(raw, 1)
    if torn is not None:
        cut = torn.start()
        st.bad(
            lineno,
            _type_of(raw),
            f"torn record: another record starts at column {cut + 1} (the first part was cut off)",
        )
        _tail_record(st, source, server, lineno, off + cut, end, raw[cut:])
        return
    if reason is None:
        try:
            parse_line(raw.decode("utf-8", "replace"))
            reason = "bad record prefix"
        except ParseError as err:
            reason = str(err)
    st.bad(lineno, _type_of(raw), reason)


def _tail_record(
    st: _State, source: str, server: Optional[str], lineno: int, off: int, end: int, raw: bytes
) -> None:
    """The record after the cut in a torn line: counted and stored like any other."""
    text = raw.decode("utf-8", "replace").replace("\x00", "")
    try:
        rec = parse_line(text)
        if rec.duplicate_keys:
            raise ParseError("duplicate keys {}".format(", ".join(rec.duplicate_keys)))
        row: Optional[Tuple[Any, ...]] = None
        if rec.rtype == "E":
            row = finished_job_row(rec, server)
        elif rec.rtype == "R":
            row = rerun_row(rec, server)
    except ParseError as err:
        _bad_line(st, source, server, lineno, off, end, raw, str(err))
        return
    st.count(rec.rtype)[0] += 1
    if row is not None:
        esc = "\\" in text or "\t" in text or "\r" in text
        st.rows.append((rec.rtype == "R", copy_line(row, source, off, esc), end, lineno))
