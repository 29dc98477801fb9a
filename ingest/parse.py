"""Chunks of accounting-file bytes into COPY rows, counts and malformed-line reports.

Pure (no database, no logging), so it runs the same in the ingesting process or in a
worker process: the ingester parses chunks in parallel and commits them in file order.
Only E and R records (the ones stored) are decoded and fully tokenized; every other line
gets its ``date;T;ID;`` prefix validated and is counted, so a malformed line of any type
is reported with its line number.
"""

from __future__ import annotations

import collections
import gc
import itertools
import operator
import re
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

from softwalltime.accounting import (
    BOUNDS,
    E_CHECKED_ONLY,
    E_FIELDS,
    RECORD_TYPES,
    EField,
    attribute_keys_ok,
    cput_s,
    duration_s,
    finished_job_row,
    parse_line,
    rerun_row,
    run_impossible,
    size_bytes,
    tokenize,
)
from softwalltime.errors import ParseError

from .live import LIVE_TYPES, Candidate, Op, fold_chunk

# Malformed lines reported one by one per chunk (the run shows the first few overall).
SHOW_MALFORMED = 10
MALFORMED_TYPE = "?"  # malformed lines whose record type cannot be told

_PREFIX_B = re.compile(rb"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;[A-Za-z];[^;]+;")
_TORN_B = re.compile(rb"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;[A-Za-z];")
_TYPES_B = {k.encode("ascii"): k for k in RECORD_TYPES}
_HASH, _SEMI = ord("#"), ord(";")
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
NULL = "\\N"

_E = ord("E")
_AT_TYPE = operator.itemgetter(20)  # the record type's byte in a line with a good prefix
_KNOWN_TYPES_B = frozenset(ord(k) for k in RECORD_TYPES)
_ER_TYPES = re.compile(b"[ER]")
_IS_LIVE = bytes(1 if b in LIVE_TYPES else 0 for b in range(256))


def _id_of(raw: bytes) -> bytes:
    return raw[22 : raw.find(b";", 22)]


_LIVE_TYPES_TEXT = frozenset(LIVE_TYPES.decode("ascii"))
# Record type byte -> 1 for the types whose prefix the bulk check validates (all but E, R).
_NOT_ER = bytes(0 if b in b"ER" else 1 for b in range(256))
# How the fast path matches an E record's message: one regex per layout (the sequence of
# keys, which one writer repeats on every line), with the stored numbers validated in it.
# Each number must be in the canonical form str(int()) gives and well inside its bounds;
# anything else (an 11-digit epoch, a leading zero, a zero time) fails the match and takes
# the checked path.
_EPOCH = "[1-9][0-9]{0,9}"  # the bounds (accounting.FIELD_BOUNDS) and order are checked after
_EPOCH_HIGH = BOUNDS["end"].high
_EPOCH_HIGH_TEXT = str(_EPOCH_HIGH)
assert len(_EPOCH_HIGH_TEXT) == 10
assert BOUNDS["ctime"].high == BOUNDS["start"].high == _EPOCH_HIGH


def _count(key: str) -> str:
    """The regex of ``key``'s canonical numbers within its bound (accounting.FIELD_BOUNDS),
    or nothing: every number with fewer digits than the bound's upper end, none below its
    lower end (0, 1 or the type's minimum)."""
    bound = BOUNDS[key]
    digits = f"[1-9][0-9]{{0,{len(str(bound.high)) - 2}}}"
    if bound.low < 0:
        assert bound.low == -bound.high - 1
        return f"0|-?{digits}|"
    assert bound.low in (0, 1)
    return f"{'0|' if bound.low == 0 else ''}{digits}|"


# Any other value: up to the next space. (Lines with a ';' in the message or a character
# COPY must escape are declined before or after the match: cheaper in C than character
# classes in the regex. Lines with a quote use the regex below.)
_TEXT = "[^ ]*+"
# The same for a line with a quote (one regex per layout for those too, tried only when
# the line has one): a value is "..." or '...' or runs to the next space and does not
# start with a quote. A quoted value must not hold its own quote, so it ends at its first
# closing quote, which the layout's next " key=" or the end of the line must follow:
# exactly where the reference tokenizer ends it (pbs-reference.md 1.5). The alternatives
# are told apart by their first character, so the match is unique; anything else (a
# quote inside a quoted value, an unmatched opening quote) fails it and takes the checked
# path. Stored values are captured with their quotes, removed after the match (cheaper
# than conditional groups in the regex).
_Q_TEXT = "(?:[^ \"'][^ ]*+|\"[^\"]*+\"|'[^']*+'|)"


def _field_pattern(field: EField) -> str:
    """The regex of one stored E field's value (see _EPOCH, _count, _TEXT)."""
    if field.kind == "epoch":
        return _EPOCH if field.required else _EPOCH + "|"
    if field.kind == "int":
        return _count(field.key)
    return "[^ ]++" if field.required else _TEXT  # user= is never empty


# The record's fields the regexes capture: accounting.E_FIELDS read from attributes, and
# the one checked only (cput), grouped as the checks below take them: user, the numbers,
# the durations, cput, the size, then the text (NULL when absent).
_GROUP = {"epoch": 1, "int": 1, "duration": 2, "checked": 3, "size": 4, "text": 5}
_READ = [f for f in E_FIELDS if f.key] + [EField("", key, "checked") for key in E_CHECKED_ONLY]
_READ.sort(key=lambda f: 0 if f.kind == "text" and f.required else _GROUP[f.kind])
_FIELDS: Tuple[Tuple[str, str], ...] = tuple((f.key, _field_pattern(f)) for f in _READ)
_REQUIRED = frozenset(("user", "ctime", "end"))
# The line's prefix: groups 1-4 are the job id, its sequence number, the dot and the suffix.
_E_PREFIX = r"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;E;((0|[1-9][0-9]{0,17})(?:(\.)([^;]*+))?);"
_PREFIX_GROUPS = (1, 2, 3, 4)
# Where each field is among the values of a match (the job id's 4 groups first), by key.
_AT = {f.key: len(_PREFIX_GROUPS) + k for k, f in enumerate(_READ)}
# values from the first text field on (group=) are text: NULL when absent
_FIRST_TEXT = min(_AT[f.key] for f in _READ if f.kind == "text" and not f.required)
# Positions of the values that may be quoted: the durations, the size and the text.
_QUOTABLE = tuple(_AT[f.key] for f in _READ if _GROUP[f.kind] >= 2 and not f.required)
_DURATION_AT = tuple(_AT[f.key] for f in _READ if f.kind == "duration")
# Values that are NULL when empty: all but the text (a required one is never empty).
_NULL_EMPTY = tuple(_AT[f.key] for f in _READ if f.kind in ("epoch", "int", "duration", "size"))
_CTIME, _START, _END = _AT["ctime"], _AT["start"], _AT["end"]
_QUEUE_TIMES = (_AT["qtime"], _AT["etime"])  # bounded, not ordered (accounting.TimeOrder)
assert BOUNDS["qtime"].high == BOUNDS["etime"].high == _EPOCH_HIGH
_WALL = _AT["Resource_List.walltime"]
_USED, _MEM, _CPUT = (
    _AT["resources_used.walltime"],
    _AT["Resource_List.mem"],
    _AT[E_CHECKED_ONLY[0]],
)
# The COPY line: E_FIELDS' order, the values picked from [match values..., server, NULL].
_SERVER_AT = len(_PREFIX_GROUPS) + len(_READ)
_BY_KIND = {"server": _SERVER_AT, "ident": 0, "seq": 1, "index": _SERVER_AT + 1}
_COPY_PICK = operator.itemgetter(*(_BY_KIND.get(f.kind, _AT.get(f.key, -1)) for f in E_FIELDS))
_TEMPLATES_MAX = 64


class _Template(NamedTuple):
    """A compiled layout: its regexes and where each of _FIELDS is in a match."""

    regex: re.Pattern[str]  # for lines without a quote
    quoted: re.Pattern[str]  # for lines with a quote: values may be "..." or '...'
    pick: Callable[[Tuple[Any, ...]], Tuple[Any, ...]]  # m.groups() -> values in _FIELDS order
    absent_text: Tuple[int, ...]  # positions in the values of text fields the layout lacks


# Templates by number of words, most recently built first; layouts already looked at
# (None: not a layout the fast path takes); layouts seen once (a template is built on the
# second sighting, so a log whose every line differs compiles nothing).
_TEMPLATES: Dict[int, List[_Template]] = {}
_LAYOUTS: Dict[Tuple[str, ...], Optional[_Template]] = {}
_SEEN_ONCE: Set[Tuple[str, ...]] = set()
_LAST: List[Optional[_Template]] = [None]  # the template that matched last: tried first


def _regex(keys: Tuple[str, ...], quoted: bool) -> Tuple[re.Pattern[str], Tuple[int, ...]]:
    """The regex for messages with exactly these keys, in this order, and the group
    numbers of the job id parts then of each of _FIELDS (the last, empty group if the
    layout lacks the key).

    :param quoted: values may be quoted (see _Q_TEXT); False: no value holds a quote
    """
    patterns = dict(_FIELDS)
    where: Dict[str, int] = {}
    parts = []
    for key in keys:
        pattern = patterns.get(key)
        if pattern is None:
            parts.append(f"{re.escape(key)}={_Q_TEXT if quoted else _TEXT}")
            continue
        if quoted and pattern == _TEXT:
            pattern = _Q_TEXT
        elif quoted and key == "user":
            pattern = "[^ \"'][^ ]*+"  # a leading quote would be quoting: not taken
        where[key] = len(_PREFIX_GROUPS) + len(where) + 1
        parts.append(f"{re.escape(key)}=({pattern})")
    last = len(_PREFIX_GROUPS) + len(where) + 1
    regex = re.compile(_E_PREFIX + " ".join(parts) + "()")
    return regex, _PREFIX_GROUPS + tuple(where.get(key, last) for key, _ in _FIELDS)


def _template(keys: Tuple[str, ...]) -> Optional[_Template]:
    """The template for messages with exactly these keys, in this order (None: not taken)."""
    if not _REQUIRED.issubset(keys):
        return None
    regex, groups = _regex(keys, False)
    quoted, quoted_groups = _regex(keys, True)
    assert groups == quoted_groups  # one pick for both
    absent = tuple(
        len(_PREFIX_GROUPS) + i
        for i, (key, _) in enumerate(_FIELDS)
        if len(_PREFIX_GROUPS) + i >= _FIRST_TEXT and key not in keys
    )
    return _Template(regex, quoted, operator.itemgetter(*(g - 1 for g in groups)), absent)


def _learn(message: str) -> Optional[_Template]:
    """Look at a message no template matched; build a template for its layout if worth it."""
    if '"' in message or "'" in message:
        # Quoted values may hold spaces: the reference tokenizer finds the keys.
        attrs, dups = tokenize(message)
        if dups:
            return None
        keys = tuple(attrs)
    else:
        words = message.split(" ")
        try:
            keys = tuple(map(operator.itemgetter(0), map(str.split, words, _EQ, _ONE)))
        except ValueError:
            return None
        if len(set(keys)) != len(keys) or not attribute_keys_ok(keys):
            return None
    if keys in _LAYOUTS:
        return None  # the layout has its template: a value did not match it
    if keys not in _SEEN_ONCE:
        if len(_SEEN_ONCE) >= _TEMPLATES_MAX * 16:
            _SEEN_ONCE.clear()
        _SEEN_ONCE.add(keys)
        return None
    if len(_LAYOUTS) >= _TEMPLATES_MAX:
        _LAYOUTS.clear()
        _TEMPLATES.clear()
    tpl = _LAYOUTS[keys] = _template(keys)
    if tpl is not None:
        _TEMPLATES.setdefault(len(keys), []).insert(0, tpl)
    return tpl


_EQ = itertools.repeat("=")
_ONE = itertools.repeat(1)
# COPY text of durations and sizes by their log text: few distinct values repeat.
_DURATIONS: Dict[str, str] = {}
_SIZES: Dict[str, str] = {}
_CPUTS: Dict[str, str] = {}  # only checked: a value in it is a valid CPU time
_CACHE_MAX = 1 << 16


def _number_text(
    cache: Dict[str, str], convert: Callable[[str], Optional[int]], value: str
) -> Optional[str]:
    """COPY text of ``convert(value)`` (duration_s or size_bytes), cached; None: invalid."""
    number = convert(value)
    if number is None:
        return None
    if len(cache) >= _CACHE_MAX:
        cache.clear()
    text = cache[value] = str(number)
    return text


def _times_ok(ctime: str, start: str, end: str) -> bool:
    """ctime <= start <= end <= the bound (the regex made them canonical and positive)."""
    if len(ctime) == len(end) == 10 and len(start) in (0, 10):
        # canonical numbers of one length compare as text: no int() on the common path
        return ctime <= (start or ctime) <= end <= _EPOCH_HIGH_TEXT
    first, last = int(ctime), int(end)
    if last > _EPOCH_HIGH:
        return False
    return first <= int(start) <= last if start else first <= last


def _find_template(line: str, quoted: bool) -> Optional[Tuple[_Template, re.Match[str]]]:
    """The template of an E record's line that is not the last one's, and its match: one
    learnt before, else learnt from this line; ``None`` for another record or a line no
    template matches.

    :param quoted: the line may hold quoted values (match the templates' ``quoted`` regex)
    """
    # A line has one space in its date and one between each two words of its message,
    # plus those inside quoted values.
    spaces = line.count(" ")
    if quoted:
        candidates: Iterable[_Template] = itertools.chain.from_iterable(
            t for n, t in _TEMPLATES.items() if n <= spaces
        )
    else:
        candidates = _TEMPLATES.get(spaces, ())
    for tpl in candidates:
        m = (tpl.quoted if quoted else tpl.regex).fullmatch(line)
        if m is not None:
            return tpl, m
    parts = line.split(";", 3)
    if len(parts) != 4 or parts[1] != "E":
        return None
    learnt = _learn(parts[3])
    if learnt is None:
        return None
    m = (learnt.quoted if quoted else learnt.regex).fullmatch(line)
    return None if m is None else (learnt, m)


def e_copy_line(text: str, source: str, offset: int, server: Optional[str]) -> Optional[str]:
    """The finished_jobs COPY line of a clean E record, straight from its text.

    The fast path of the ingester: equal to ``copy_line(finished_job_row(parse_line(text),
    server), source, offset, ...)`` (a property test checks it), without building the
    Record and the row. Values quoted as PBS quotes them (``account="..."``,
    ``'{}'``; see _Q_TEXT) are unquoted as the reference tokenizer does. It declines
    (returns None) anything unusual: another record type, a quote inside a quoted value
    or an unmatched one, free text, a repeated key, an array or reservation id, a missing
    or non-canonical number, a character COPY must escape. The caller then takes the
    checked path, which gives the precise error for a bad line.

    :param text: one accounting line (a trailing newline allowed), NUL-free
    :param source: the file's path, COPY-escaped
    :param offset: byte offset of the line in its file
    :param server: PBS server name; None: the job id's suffix
    """
    # Trailing whitespace is not part of any value (parse_line() strips it too).
    line = text.rstrip()
    if "\\" in line or "\t" in line or "\r" in line or "\n" in line:
        return None
    quoted = '"' in line or "'" in line  # maybe a quoted value: the regexes that unquote
    tpl: Optional[_Template] = _LAST[0]
    m = None if tpl is None else (tpl.quoted if quoted else tpl.regex).fullmatch(line)
    if m is None:
        found = _find_template(line, quoted)
        if found is None:
            return None
        tpl, m = found
        _LAST[0] = tpl
    assert tpl is not None  # for mypy: m came from tpl
    if line.rfind(";") != m.end(1):
        return None  # a ';' in the message: maybe a torn line
    values = list(tpl.pick(m.groups()))
    if quoted:
        for i in _QUOTABLE:
            v = values[i]
            if v and (v[0] == '"' or v[0] == "'"):
                values[i] = v[1:-1]  # the regex matched the closing quote too
    for i in tpl.absent_text:
        values[i] = NULL
    suffix, dot = values[3], values[2]
    if not (suffix or (server and not dot)):
        return None
    if not _times_ok(values[_CTIME], values[_START], values[_END]):
        return None
    for i in _QUEUE_TIMES:
        if len(values[i]) == 10 and values[i] > _EPOCH_HIGH_TEXT:
            return None  # beyond the bound: the checked path refuses it
    cput = values[_CPUT]
    if cput and cput not in _CPUTS and _number_text(_CPUTS, cput_s, cput) is None:
        return None
    for i in _DURATION_AT:  # walltime, soft_walltime, resources_used.walltime
        v = values[i]
        if v:
            v = values[i] = _DURATIONS.get(v) or _number_text(_DURATIONS, duration_s, v)
            if v is None:
                return None
    used, start = values[_USED], values[_START]
    if used and start and run_impossible(int(used), int(values[_END]) - int(start)):
        return None
    if values[_WALL] == "0" and (used or start):
        return None  # maybe walltime 0 with a run: the checked path decides (WALL_CHECK)
    mem = values[_MEM]
    if mem:
        values[_MEM] = _SIZES.get(mem) or _number_text(_SIZES, size_bytes, mem)
        if values[_MEM] is None:
            return None
    for i in _NULL_EMPTY:
        if not values[i]:
            values[i] = NULL
    values += (suffix or server or "", NULL)
    return "\t".join(_COPY_PICK(values)) + f"\t{source}\t{offset}"


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
    lines: int  # lines in the chunk
    impossible: Dict[str, int]  # of the malformed, records refused as impossible, by rule
    live: Sequence[Op] = ()  # effects on live_jobs of the Q, S, R, D and A records (ingest/live.py)


class _State:
    def __init__(self) -> None:
        self.rows: List[Tuple[bool, str, int, int]] = []
        self.counts: Dict[str, List[int]] = {}
        self.malformed: List[Tuple[int, str]] = []
        self.malformed_total = 0
        self.impossible: Dict[str, int] = {}

    def count(self, rtype: str) -> List[int]:
        c = self.counts.get(rtype)
        if c is None:
            c = [0, 0]
            self.counts[rtype] = c
        return c

    def refuse(self, lineno: int, rtype: str, reason: str, rule: Optional[str]) -> None:
        """A line counted as read already is refused after all (a live-state record)."""
        self.count(rtype)[0] -= 1
        self.bad(lineno, rtype, reason, rule)

    def bad(self, lineno: int, rtype: str, reason: str, rule: Optional[str] = None) -> None:
        """Count a malformed line; ``rule``: it holds impossible values (ImpossibleRecord)."""
        if rule is not None:
            self.impossible[rule] = self.impossible.get(rule, 0) + 1
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
    # GC passes triggered by the many short-lived strings of a chunk find nothing to free
    # (no cycles are made here) and cost ~10 %: off while parsing, restored after.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        if b"\r" not in data:
            lines = data.splitlines(keepends=True)
            # Bulk check, in C: every line has a good prefix with a known record type, and
            # the chunk holds exactly three ';' per line, so no message has one (no line is
            # torn). Then only E and R lines need looking at one by one. Their prefixes are
            # checked there (by the E regex, else _PREFIX_B), so here only the others.
            if lines and data.count(b";") == 3 * len(lines) and min(map(len, lines)) > 21:
                types = bytes(map(_AT_TYPE, lines))
                if _KNOWN_TYPES_B.issuperset(types) and all(
                    map(_PREFIX_B.match, itertools.compress(lines, types.translate(_NOT_ER)))
                ):
                    chunk = _parse_clean(lines, types, start, lineno, source, server)
                    if chunk is not None:
                        return chunk
        return _parse_lines(data, start, lineno, source, server, True)
    finally:
        if gc_was_enabled:
            gc.enable()


def _parse_clean(
    lines: List[bytes],
    types: bytes,
    start: int,
    lineno: int,
    source: str,
    server: Optional[str],
) -> Optional[Chunk]:
    """parse_chunk() for a chunk that passed the bulk checks (``lines`` keep their ``\\n``).

    :returns: None if an E or R line has a bad prefix: the chunk must go line by line
    """
    st = _State()
    rows = st.rows
    counts = st.counts
    for t, n in collections.Counter(types).items():
        counts[chr(t)] = [n, 0]
    # offsets[i]: byte offset of line i; offsets[i + 1]: just after it
    offsets = list(itertools.accumulate(map(len, lines), initial=start))
    for m in _ER_TYPES.finditer(types):
        i = m.start()
        raw = lines[i]
        off, end = offsets[i], offsets[i + 1]
        text = raw.decode("utf-8", "replace")
        if "\x00" in text:
            text = text.replace("\x00", "")  # PostgreSQL text cannot hold NUL
        if raw[20] == _E:
            # Taken: its regex checked the prefix and that the line holds three ';'.
            line = e_copy_line(text, source, off, server)
            if line is not None:
                rows.append((False, line, end, lineno + i + 1))
                continue
        if _PREFIX_B.match(raw) is None:
            return None  # a comment, or a line the bulk check would have refused
        counts[chr(raw[20])][0] -= 1  # counted again by _record()
        _record(st, text, raw, source, server, lineno + i + 1, off, end)
    # The live-state records: their ids and types in C, a line looked at only if needed.
    is_live = types.translate(_IS_LIVE)
    where = list(itertools.compress(range(len(lines)), is_live))

    def record_at(k: int) -> Candidate:
        at = where[k]
        return chr(types[at]), lines[at], offsets[at], lineno + at + 1

    idents = [raw[22 : raw.find(b";", 22)] for raw in itertools.compress(lines, is_live)]
    live = fold_chunk(
        idents, bytes(itertools.compress(types, is_live)), record_at, source, server, st.refuse
    )
    return Chunk(rows, counts, st.malformed, st.malformed_total, 0, len(lines), st.impossible, live)


def _parse_lines(
    data: bytes, start: int, lineno: int, source: str, server: Optional[str], fast: bool
) -> Chunk:
    """parse_chunk() line by line: any chunk, with blank, comment, torn or odd lines.

    :param fast: use e_copy_line() for E records (False: the reference, for the tests)
    """
    st = _State()
    counts = st.counts
    ignored = 0
    candidates: List[Candidate] = []
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
        end = min(pos, start + len(data))
        if t == b"E" or t == b"R":
            if _PREFIX_B.match(raw) is not None:
                candidates.append((t.decode("ascii"), raw, off, lineno))
            text = raw.decode("utf-8", "replace")
            if "\x00" in text:
                text = text.replace("\x00", "")  # PostgreSQL text cannot hold NUL
            if fast and t == b"E":
                line = e_copy_line(text, source, off, server)
                if line is not None:
                    st.count("E")[0] += 1
                    st.rows.append((False, line, end, lineno))
                    continue
            _record(st, text, raw, source, server, lineno, off, end)
        else:
            rtype = _TYPES_B.get(t)
            if (
                rtype is None
                or _PREFIX_B.match(raw) is None
                or (raw.count(b";") > 3 and _TORN_B.search(raw, 20) is not None)
            ):
                _bad_line(st, source, server, lineno, off, end, raw, None)
                continue
            c = counts.get(rtype) or st.count(rtype)
            c[0] += 1
            if rtype in _LIVE_TYPES_TEXT:
                candidates.append((rtype, raw, off, lineno))
    live = fold_chunk(
        [_id_of(c[1]) for c in candidates],
        bytes(ord(c[0]) for c in candidates),
        candidates.__getitem__,
        source,
        server,
        st.refuse,
    )
    return Chunk(
        st.rows, counts, st.malformed, st.malformed_total, ignored, len(lines), st.impossible, live
    )


def _record(
    st: _State,
    text: str,
    raw: bytes,
    source: str,
    server: Optional[str],
    lineno: int,
    off: int,
    end: int,
) -> None:
    """An E or R line through the checked path: parse_line() and the row builders."""
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
        _bad_line(st, source, server, lineno, off, end, raw, err)
        return
    st.count(rec.rtype)[0] += 1
    if row is not None:
        esc = "\\" in text or "\t" in text or "\r" in text
        st.rows.append((rec.rtype == "R", copy_line(row, source, off, esc), end, lineno))


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
    error: Optional[ParseError],
) -> None:
    """Report a malformed line; if it is torn, also process the record after the cut.

    :param error: why the line was refused; None: find out (parse_line's error)
    """
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
    if error is None:
        try:
            parse_line(raw.decode("utf-8", "replace"))
            error = ParseError("bad record prefix")
        except ParseError as err:
            error = err
    st.bad(lineno, _type_of(raw), str(error), getattr(error, "rule", None))


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
        _bad_line(st, source, server, lineno, off, end, raw, err)
        return
    st.count(rec.rtype)[0] += 1
    if row is not None:
        esc = "\\" in text or "\t" in text or "\r" in text
        st.rows.append((rec.rtype == "R", copy_line(row, source, off, esc), end, lineno))
