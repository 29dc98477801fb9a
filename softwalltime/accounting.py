"""PBS accounting-log records: parse one line, turn E and R records into history rows.

Pure code: no database, no ``pbs``. The ingester and the replay evaluator both use it.
Format and quoting follow pbs-reference.md 1.2-1.5 (OpenPBS ``accounting.c``):

* a line is ``MM/DD/YYYY HH:MM:SS;T;ID;MESSAGE``; MESSAGE may contain ``;``;
* a value that holds a space is wrapped in ``"..."`` (or ``'...'`` when it also holds ``"``)
  and nothing inside is escaped, so the tokenizer ends a quoted value at the matching
  quote that is followed by a space or the end of the line, never at whitespace alone;
* durations are ``[[H:]M:]S`` with unbounded hours, sizes ``<int>[kmgtp][bw]`` (bare = bytes),
  epoch fields (``ctime``, ``start``, ``end``) are UTC seconds.

Total usage of a job across reruns is the sum of its ``job_reruns.runtime_s`` (one row per
R record) plus ``finished_jobs.runtime_s`` (the E record describes only the last run)::

    SELECT f.server, f.job_id, f.ctime,
           f.runtime_s + COALESCE(SUM(r.runtime_s), 0) AS total_runtime_s
    FROM finished_jobs f
    LEFT JOIN job_reruns r USING (server, job_id, ctime)
    GROUP BY f.server, f.job_id, f.ctime, f.runtime_s;
"""

import datetime
import itertools
import re
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

from .errors import ParseError
from .units import parse_duration, parse_size

__all__ = [
    "BOUNDS",
    "FIELD_BOUNDS",
    "RECORD_TYPES",
    "TIME_ORDER",
    "RUN_CHECKS",
    "RUN_SLACK_S",
    "FieldBound",
    "ImpossibleRecord",
    "Record",
    "TimeOrder",
    "attribute_keys_ok",
    "finished_job",
    "finished_job_row",
    "parse_job_id",
    "parse_line",
    "rerun",
    "rerun_row",
    "tokenize",
]

# Every record type OpenPBS defines (src/include/acct.h; pbs-reference.md 1.3), with its meaning.
RECORD_TYPES = {
    "Q": "queued",
    "S": "started",
    "s": "reliable start",
    "R": "rerun",
    "E": "ended",
    "D": "deleted",
    "A": "aborted",
    "C": "checkpointed",
    "T": "restarted from checkpoint",
    "M": "moved",
    "a": "altered",
    "z": "suspended",
    "r": "resumed",
    "u": "node-release usage",
    "c": "node-release next phase",
    "e": "node-release last phase",
    "P": "provisioning start",
    "p": "provisioning end",
    "L": "license",
    "U": "reservation submitted",
    "Y": "reservation confirmed",
    "B": "reservation begins",
    "K": "reservation deleted",
    "k": "reservation deleted by owner",
    "F": "reservation finished",
}

_UTC = datetime.timezone.utc

# Step 1-2 of the tokenizer (pbs-reference.md 1.5). A key starts a token (start of message or
# after a space). A quoted value ends at the matching quote followed by a space or the end;
# a quote with no such partner is not quoting, so the value then runs to the next space.
_TOKEN_RE = re.compile(
    r"(?<![^ ])([A-Za-z_][\w.]*)=(?:\"(.*?)\"(?= |\Z)|'(.*?)'(?= |\Z)|([^ ]*))", re.DOTALL
)
_KEY_RE = re.compile(r"[A-Za-z_][\w.]*\Z")
# Keys already seen to match _KEY_RE (bounded: garbage lines must not grow it forever).
_GOOD_KEYS: Set[str] = set()
_KEY_CACHE_MAX = 4096
_EQ = itertools.repeat("=")
_ONE = itertools.repeat(1)
_DATE_RE = re.compile(r"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d\Z")
# A second "date;T;" inside a message means a torn record (an unterminated fragment
# followed by the next record on the same line, pbs-reference.md 1.8).
_TORN_RE = re.compile(r"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;[A-Za-z];")
# 123.srv, 123[4].srv, 123[].srv; the server part is everything after the first '.'.
_JOB_ID_RE = re.compile(r"(\d+)(?:\[(\d*)\])?(?:\.(.+))?\Z", re.DOTALL)
# Reservations: R (advance), S (standing), M (maintenance) followed by digits (pbs_ifl.h).
_RESV_ID_RE = re.compile(r"[RSM]\d+(?:\..*)?\Z", re.DOTALL)


class Record(NamedTuple):
    """One accounting line, tokenized; values are raw text with surrounding quotes removed."""

    logged_at: str  # 'MM/DD/YYYY HH:MM:SS' as written (server local time)
    rtype: str  # 'E', 'Q', 'S', 'R', ...
    ident: str  # '123.srv', '123[4].srv', '123[].srv', 'R5.srv', 'license'
    attrs: Dict[str, str]  # key -> raw value with surrounding quotes removed
    duplicate_keys: Tuple[str, ...]  # keys seen twice (forgery signature, PBS issue #1013)


def _key_ok(key: str) -> bool:
    """True if ``key`` is a valid attribute name; cached because keys repeat on every line."""
    if key in _GOOD_KEYS:
        return True
    ok = _KEY_RE.match(key) is not None
    # Garbage lines must not grow the cache without bound.
    if ok and len(_GOOD_KEYS) < _KEY_CACHE_MAX:
        _GOOD_KEYS.add(key)
    return ok


def attribute_keys_ok(keys: Iterable[str]) -> bool:
    """True if every key is a valid attribute name ``[A-Za-z_][\\w.]*`` (what tokenize()
    accepts as a key); cached, so the usual keys cost one set test in C.

    :param keys: attribute names (iterated at most twice)
    """
    return _GOOD_KEYS.issuperset(keys) or all(map(_key_ok, keys))


def tokenize(message: str) -> Tuple[Dict[str, str], Tuple[str, ...]]:
    """Split a record's MESSAGE into ``key -> value`` (quotes removed), quote-aware.

    Implements pbs-reference.md 1.5: a key ``[A-Za-z_][\\w.]*`` then ``=``; a value that
    starts with ``"`` or ``'`` runs to the matching quote followed by a space or the end
    of the message, otherwise to the next space. A quote with no such partner is kept as
    part of a raw value. Words that are not ``key=value`` (free text in D, A and L
    records) are ignored.

    :param message: the part of the line after ``date;T;ID;``
    :returns: the attributes (the first occurrence of a key wins) and the keys that
        occurred more than once, in order of their second occurrence
    """
    parts = message.split(" ")
    # Fast path, all in C: no quoted value, every word is key=value with a known-good key
    # and no key repeats. That is every OpenPBS job record without account/project quotes.
    if '="' not in message and "='" not in message:
        try:
            attrs = dict(map(str.split, parts, _EQ, _ONE))
        except ValueError:
            pass  # a word without '=': free text, take the careful path
        else:
            if len(attrs) == len(parts) and _GOOD_KEYS.issuperset(attrs):
                return attrs, ()
    return _tokenize_slow(parts)


def _tokenize_slow(parts: List[str]) -> Tuple[Dict[str, str], Tuple[str, ...]]:
    # Splitting on single spaces and re-joining quoted runs is equivalent to the regex
    # _TOKEN_RE (kept as the reference the property tests compare against).
    n = len(parts)
    attrs: Dict[str, str] = {}
    dups: Optional[List[str]] = None
    i = 0
    while i < n:
        key, eq, value = parts[i].partition("=")
        i += 1
        if not eq or not _key_ok(key):
            continue
        if value and (value[0] == '"' or value[0] == "'"):
            quote = value[0]
            if len(value) >= 2 and value[-1] == quote:
                value = value[1:-1]
            else:
                j = i
                while j < n and not parts[j].endswith(quote):
                    j += 1
                if j < n:
                    value = " ".join(parts[i - 1 : j + 1]).partition("=")[2][1:-1]
                    i = j + 1
        if key in attrs:
            if dups is None:
                dups = []
            if key not in dups:
                dups.append(key)
        else:
            attrs[key] = value
    return attrs, (tuple(dups) if dups else ())


def parse_line(line: str) -> Record:
    """Parse one accounting-log line (trailing whitespace and newline allowed).

    :param line: e.g. ``04/02/2025 14:03:11;E;5012.pbs01;user=alice ... run_count=1``
    :raises ParseError: the line is not ``MM/DD/YYYY HH:MM:SS;T;ID;MESSAGE``, has an
        unknown record type, or carries a second record (a torn line)
    """
    parts = line.rstrip().split(";", 3)
    if len(parts) != 4:
        raise ParseError("not an accounting record (expected 'date;type;id;message')")
    logged_at, rtype, ident, message = parts
    if len(logged_at) != 19 or _DATE_RE.match(logged_at) is None:
        raise ParseError(f"bad timestamp {logged_at[:40]!r} (expected MM/DD/YYYY HH:MM:SS)")
    if rtype not in RECORD_TYPES:
        raise ParseError(f"unknown record type {rtype[:10]!r}")
    if not ident:
        raise ParseError("empty record id")
    if ";" in message:
        torn = _TORN_RE.search(message)
        if torn is not None:
            raise ParseError(
                "torn record: another record starts at column "
                f"{len(logged_at) + len(rtype) + len(ident) + 3 + torn.start() + 1}"
            )
    attrs, dups = tokenize(message)
    return Record(logged_at, rtype, ident, attrs, dups)


def parse_job_id(ident: str) -> Tuple[int, Optional[int], Optional[str], bool]:
    """Split a job id into sequence number, subjob index, server suffix and array-parent flag.

    :param ident: ``123.srv``, ``123[4].srv`` or ``123[].srv`` (suffix optional)
    :returns: ``(job_seq, array_index or None, server or None, is_array_parent)``
    :raises ParseError: not a job id (a reservation, ``license``, garbage)
    """
    seq_text, dot, suffix = ident.partition(".")
    if seq_text.isdigit() and seq_text.isascii() and (suffix or not dot):
        return int(seq_text), None, suffix or None, False
    m = _JOB_ID_RE.match(ident)
    if m is None:
        raise ParseError(f"not a job id: {ident[:60]!r}")
    seq, index, server = m.groups()
    if index is None:
        return int(seq), None, server, False
    if index == "":
        return int(seq), None, server, True
    return int(seq), int(index), server, False


def _is_history_ident(rec: Record) -> bool:
    """False for records that are never job history: license, reservations, array parents."""
    ident = rec.ident
    if ident == "license" or _RESV_ID_RE.match(ident) is not None:
        return False
    return not ident.endswith("[]") and "[]." not in ident


# Bounds of the PostgreSQL column types the values go into: one out-of-range value
# would otherwise fail a whole COPY batch instead of one line.
_INT4_MAX = 2**31 - 1
_INT8_MAX = 2**63 - 1
# Plausible bounds, the numbers the replay uses too (the largest values of the real traces in
# the Parallel Workloads Archive are far below them): epoch times before 2100-01-01, durations
# up to 10 years (2^31 - 1 s, a common "unlimited", is 68 years), counts up to 10^8 (ten
# times the cores of the largest machine built).
YEAR_S = 365 * 86400
_EPOCH_HIGH = 4102444800
_DURATION_HIGH = 10 * YEAR_S
_COUNT_HIGH = 10**8
_TIME = "before 1970 or after 2099"
_LENGTH = "negative or over 10 years"


class ImpossibleRecord(ParseError):
    """A record whose values cannot be true: refused like a malformed line, counted by rule."""

    def __init__(self, message: str, rule: str) -> None:
        ParseError.__init__(self, message)
        self.rule = rule  # what is wrong, without the values: "end before start"


class FieldBound(NamedTuple):
    """What one numeric field of an E or R record may be; a record beyond it is refused."""

    key: str  # the accounting attribute
    column: Optional[str]  # where finished_jobs and job_reruns store it; None: not stored
    low: int
    high: int
    reason: str  # what a value outside the bound is

    @property
    def rule(self) -> str:
        return f"{self.key} {self.reason}"

    def check(self, value: int, text: str) -> int:
        """``value`` if within the bound, else ImpossibleRecord (``text``: as logged)."""
        if self.low <= value <= self.high:
            return value
        raise ImpossibleRecord(f"{self.key}={text[:40]} is out of range: {self.reason}", self.rule)


# Every numeric field of a stored record, declared once: the checked path, both fast paths
# (here and ingest/parse.py) and `softwalltime db check` derive their tests from it.
# Epoch times: 0 or absent means unset (a missing ctime or end is refused as missing; start=0
# is "never started", stored as NULL), so a time starts at 1. PBS never writes a negative
# duration or count (pbs-reference.md 1.5); a run of over 10 years is a sentinel or garbage,
# never a measurement. Resource_List.ncpus is the sum over the select chunks: PBS accepts a
# chunk with ncpus=0, but a job whose every chunk asks for none ran no computation whose
# length could predict another's (none in the real samples), so 0 is refused with the negatives.
FIELD_BOUNDS = (
    FieldBound("ctime", "ctime", 1, _EPOCH_HIGH, _TIME),
    FieldBound("start", "started_at", 1, _EPOCH_HIGH, _TIME),
    FieldBound("end", "ended_at", 1, _EPOCH_HIGH, _TIME),
    # When the job entered its (last) queue and became eligible: stored for the scheduler
    # model's replay (issue 46), not ordered against the others (TimeOrder says why).
    FieldBound("qtime", "qtime", 1, _EPOCH_HIGH, _TIME),
    FieldBound("etime", "etime", 1, _EPOCH_HIGH, _TIME),
    FieldBound("Resource_List.walltime", "walltime_s", 0, _DURATION_HIGH, _LENGTH),
    FieldBound("Resource_List.soft_walltime", "soft_walltime_s", 0, _DURATION_HIGH, _LENGTH),
    FieldBound("resources_used.walltime", "runtime_s", 0, _DURATION_HIGH, _LENGTH),
    # Not stored, and no upper bound (ncpus times the run time): only never negative.
    FieldBound("resources_used.cput", None, 0, _INT8_MAX, "negative"),
    FieldBound("Resource_List.ncpus", "ncpus", 1, _COUNT_HIGH, "below 1 or over 10^8"),
    FieldBound("Resource_List.ngpus", "ngpus", 0, _COUNT_HIGH, "negative or over 10^8"),
    FieldBound("Resource_List.nodect", "nodect", 0, _COUNT_HIGH, "negative or over 10^8"),
    FieldBound("run_count", "run_count", 0, _INT4_MAX, "negative or over 2^31 - 1"),
    # Negative exit statuses are PBS's own codes (pbs-reference.md 1.6): the type's bound.
    FieldBound("Exit_status", "exit_status", -_INT4_MAX - 1, _INT4_MAX, "beyond 32 bits"),
    FieldBound("Resource_List.mem", "mem_bytes", 0, _INT8_MAX, "beyond 2^63 - 1 bytes"),
)
BOUNDS = {b.key: b for b in FIELD_BOUNDS}
# The stored durations share one bound, so the ingester caches their COPY text in one dict.
DURATION = BOUNDS["resources_used.walltime"]
CPUT = BOUNDS["resources_used.cput"]
_MEM = BOUNDS["Resource_List.mem"]
assert all(
    BOUNDS[k][2:4] == DURATION[2:4]
    for k in ("Resource_List.walltime", "Resource_List.soft_walltime")
)


class TimeOrder(NamedTuple):
    """Two epoch times of a record, the later never before the earlier (one clock: the
    server's). qtime and etime are not checked: routing and qmove reset qtime, etime is 0
    until the job is eligible (pbs-reference.md 1.4); both are stored, within their bounds."""

    earlier: str
    later: str
    earlier_column: str
    later_column: str

    @property
    def rule(self) -> str:
        return f"{self.later} before {self.earlier}"


TIME_ORDER = (
    TimeOrder("ctime", "start", "ctime", "started_at"),  # ran before it was created
    TimeOrder("start", "end", "started_at", "ended_at"),
    TimeOrder("ctime", "end", "ctime", "ended_at"),  # also when start is unknown
)


def _check_times(ctime: Optional[int], start: Optional[int], end: Optional[int]) -> None:
    """Raise ImpossibleRecord for the first rule of TIME_ORDER the times break."""
    times = {"ctime": ctime, "start": start, "end": end}
    for rule in TIME_ORDER:
        first, then = times[rule.earlier], times[rule.later]
        if first is not None and then is not None and then < first:
            raise ImpossibleRecord(
                f"{rule.later}={then} is before {rule.earlier}={first}: impossible", rule.rule
            )


# resources_used.walltime is measured by the MoM (sampled, its own clock), end - start by
# the server: a real record may be off by a few seconds either way (the bundled samples: at
# most 25 s below, never above). Beyond this slack the run time contradicts the times.
RUN_SLACK_S = 60


class RunCheck(NamedTuple):
    """resources_used.walltime against the run's own times, end - start (both known, end
    not before start): a record that breaks it is refused, counted under ``rule``."""

    rule: str
    sql: str  # the same condition on the stored columns (``softwalltime db check``)


_RUN_SQL = "started_at <= ended_at AND "
RUN_CHECKS = (
    # 10 h used in a 30-minute run (suspension only makes the run time shorter)
    RunCheck(
        "resources_used.walltime over end - start",
        _RUN_SQL + f"runtime_s > EXTRACT(EPOCH FROM ended_at - started_at) + {RUN_SLACK_S}",
    ),
    # nothing used in a 30-minute run: no measurement, which would predict 0 s
    RunCheck(
        f"resources_used.walltime 0 for a run over {RUN_SLACK_S} s",
        _RUN_SQL + f"runtime_s = 0 AND ended_at - started_at > interval '{RUN_SLACK_S} s'",
    ),
)


# Resource_List.walltime 0 with a run: PBS kills a job at its walltime, so a job of
# walltime 0 cannot have run beyond the slack (issue 52: it was stored as walltime 0, a
# limit the run contradicts). Refused like the other impossible records.
WALL_CHECK = RunCheck(
    f"Resource_List.walltime 0 for a run over {RUN_SLACK_S} s",
    f"walltime_s = 0 AND (runtime_s > {RUN_SLACK_S} OR (started_at <= ended_at AND "
    f"ended_at - started_at > interval '{RUN_SLACK_S} s'))",
)


def wall_impossible(wall: Optional[int], used: Optional[int], run: Optional[int]) -> bool:
    """Whether a walltime ``wall`` cannot hold a run of ``used`` (resources_used.walltime)
    or ``run`` = end - start seconds (each None: unknown)."""
    return wall == 0 and ((used or 0) > RUN_SLACK_S or (run or 0) > RUN_SLACK_S)


def _check_wall(
    wall: Optional[int], used: Optional[int], start: Optional[int], end: Optional[int]
) -> None:
    """Raise ImpossibleRecord for :data:`WALL_CHECK` (after _check_times)."""
    run = end - start if start is not None and end is not None else None
    if wall_impossible(wall, used, run):
        raise ImpossibleRecord(
            f"Resource_List.walltime=0 with resources_used.walltime={used} s and end - start"
            f" = {run} s (a run over {RUN_SLACK_S} s): impossible",
            WALL_CHECK.rule,
        )


def run_impossible(used: int, run: int) -> bool:
    """Whether a run time ``used`` cannot come from a run of ``run`` = end - start >= 0 s."""
    return used > run + RUN_SLACK_S or (used == 0 and run > RUN_SLACK_S)


def _check_run(used: Optional[int], start: Optional[int], end: Optional[int]) -> None:
    """Raise ImpossibleRecord for the first rule of RUN_CHECKS the record breaks (after
    _check_times: end is not before start)."""
    if used is None or start is None or end is None or not run_impossible(used, end - start):
        return
    run = end - start
    rule = RUN_CHECKS[0] if used else RUN_CHECKS[1]
    raise ImpossibleRecord(
        f"resources_used.walltime={used} s in a run of end - start = {run} s"
        f" (more than {RUN_SLACK_S} s apart): impossible",
        rule.rule,
    )


# Parsed durations and sizes by text: the same few values (walltime=01:00:00, mem=4gb)
# repeat on most lines, and the regex parse costs more than a dict lookup. Only values
# that parse are cached (the bound is checked after); cleared when full so memory stays
# bounded.
_DURATION_CACHE: Dict[str, int] = {}
_SIZE_CACHE: Dict[str, int] = {}
_VALUE_CACHE_MAX = 1 << 16


def _check(key: str, value: int, limit: int) -> int:
    if -limit - 1 <= value <= limit:
        return value
    raise ParseError(f"{key}={value} is out of range")


def _number(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ParseError(f"{key}={value[:40]!r} is not an integer") from None


def _int(attrs: Dict[str, str], key: str) -> Optional[int]:
    value = attrs.get(key)
    if not value:
        return None
    number = _number(key, value)
    return BOUNDS[key].check(number, str(number))


def _parsed(cache: Dict[str, int], parse: Callable[[str], int], text: str) -> Optional[int]:
    value = cache.get(text)
    if value is not None:
        return value
    try:
        value = parse(text)
    except ParseError:
        return None
    if len(cache) >= _VALUE_CACHE_MAX:
        cache.clear()
    cache[text] = value
    return value


def duration_s(text: str, bound: FieldBound = DURATION) -> Optional[int]:
    """Seconds of a PBS duration within ``bound`` (memoized); None if not.

    :param bound: default the stored durations' (walltime, soft walltime, run time)
    """
    value = _parsed(_DURATION_CACHE, parse_duration, text)
    if value is None or not bound.low <= value <= bound.high:
        return None
    return value


def cput_s(text: str) -> Optional[int]:
    """Seconds of ``resources_used.cput`` within its bound (memoized); None if not."""
    return duration_s(text, CPUT)


def size_bytes(text: str) -> Optional[int]:
    """Bytes of a PBS size within ``Resource_List.mem``'s bound (memoized); None if not."""
    value = _parsed(_SIZE_CACHE, parse_size, text)
    if value is None or not _MEM.low <= value <= _MEM.high:
        return None
    return value


def _bad_value(key: str, value: str, parse: Callable[[str], int], what: str) -> ParseError:
    """The precise error for a value that duration_s() or size_bytes() refused."""
    try:
        number = parse(value)
    except ParseError:
        return ParseError(f"{key}={value[:40]!r} is not a {what}")
    try:
        BOUNDS[key].check(number, value)
    except ImpossibleRecord as err:
        return err
    raise AssertionError(f"{key}={value!r}: within its bound, yet refused")  # pragma: no cover


def _duration(attrs: Dict[str, str], key: str) -> Optional[int]:
    value = attrs.get(key)
    if not value:
        return None
    seconds = duration_s(value, BOUNDS[key])
    if seconds is None:
        raise _bad_value(key, value, parse_duration, "duration")
    return seconds


def _size(attrs: Dict[str, str], key: str) -> Optional[int]:
    value = attrs.get(key)
    if not value:
        return None
    size = size_bytes(value)
    if size is None:
        raise _bad_value(key, value, parse_size, "size")
    return size


def _epoch(attrs: Dict[str, str], key: str, required: bool) -> Optional[int]:
    value = attrs.get(key)
    number = _number(key, value) if value else 0
    # start=0 means "never started" in some writers; 0 is never a real job time.
    if number == 0:
        if required:
            raise ParseError(f"missing or zero {key}=")
        return None
    return BOUNDS[key].check(number, str(number))


def _server_of(ident: str, suffix: Optional[str], server: Optional[str]) -> str:
    """A job's server: its id's suffix; ``server`` (``--server``) only for ids without one.

    One identity per job whatever the command line says, so a backfill with ``--server``
    of records that cron stored already adds nothing (it used to store them again).
    """
    if suffix:
        return suffix
    if server:
        return server
    raise ParseError(f"job id {ident!r} has no server suffix; name the server (--server)")


class EField(NamedTuple):
    """One stored field of an E record: its ``finished_jobs`` column and how it is read."""

    column: str
    key: str  # the record's attribute (``Resource_List.walltime``); "" for the job id's parts
    # server, ident, seq, index (from the job id); epoch (seconds, stored as a timestamp),
    # int, duration (seconds), size (bytes), text
    kind: str
    required: bool = False


# The one table of the E record: finished_jobs' columns in this order (schema, COPY order,
# finished_job_row()); what each is read from and how. accounting.finished_job_row's fast
# path, ingest/parse.py's regex fields and the staging table's types are derived from it;
# tests/test_accounting_parse.py checks it against the migrated schema.
E_FIELDS = (
    EField("server", "", "server"),
    EField("job_id", "", "ident"),
    EField("ctime", "ctime", "epoch", True),
    EField("job_seq", "", "seq"),
    EField("array_index", "", "index"),
    EField("username", "user", "text", True),
    EField("groupname", "group", "text"),
    EField("project", "project", "text"),
    EField("account", "account", "text"),
    EField("queue", "queue", "text"),
    EField("job_name", "jobname", "text"),
    EField("walltime_s", "Resource_List.walltime", "duration"),
    EField("soft_walltime_s", "Resource_List.soft_walltime", "duration"),
    EField("runtime_s", "resources_used.walltime", "duration"),
    EField("started_at", "start", "epoch"),
    EField("ended_at", "end", "epoch", True),
    EField("exit_status", "Exit_status", "int"),
    EField("ncpus", "Resource_List.ncpus", "int"),
    EField("ngpus", "Resource_List.ngpus", "int"),
    EField("nodect", "Resource_List.nodect", "int"),
    EField("mem_bytes", "Resource_List.mem", "size"),
    EField("select_spec", "Resource_List.select", "text"),
    EField("run_count", "run_count", "int"),
    # What the site model's replay needs (issue 46): the queue times, place and vnodes.
    EField("qtime", "qtime", "epoch"),
    EField("etime", "etime", "epoch"),
    EField("place", "Resource_List.place", "text"),
    EField("exec_vnode", "exec_vnode", "text"),
)
E_CHECKED_ONLY = ("resources_used.cput",)  # a duration checked, not stored
# Column order of finished_job_row(); the keys of finished_job() in the same order.
FINISHED_JOB_COLUMNS = tuple(f.column for f in E_FIELDS)
# Positions of the epoch-second fields in finished_job_row() (datetimes in finished_job()).
_FJ_TIME_POS = tuple(k for k, f in enumerate(E_FIELDS) if f.kind == "epoch")
_FJ_AT = {f.column: k for k, f in enumerate(E_FIELDS)}

RERUN_COLUMNS = (
    "server",
    "job_id",
    "ctime",
    "run_count",
    "username",
    "runtime_s",
    "started_at",
    "ended_at",
    "exit_status",
)
_RR_TIME_POS = (2, 6, 7)


# The fast path reads these in one pass, in E_FIELDS order: ctime, start, end, Exit_status,
# ncpus, ngpus, nodect, run_count, qtime, etime (its unpacking names them so; a test checks
# the order).
_FJ_INT_KEYS = tuple(f.key for f in E_FIELDS if f.kind in ("epoch", "int"))
_FJ_INT_BOUNDS = tuple(BOUNDS[k] for k in _FJ_INT_KEYS)


def _within(value: Optional[int], bound: FieldBound) -> bool:
    return value is None or bound.low <= value <= bound.high


def finished_job_row(rec: Record, server: Optional[str] = None) -> Optional[Tuple[Any, ...]]:
    """Like :func:`finished_job`, as a tuple in ``FINISHED_JOB_COLUMNS`` order with times as
    UTC epoch seconds (the ingester's fast path: no datetime objects).

    :raises ParseError: see :func:`finished_job`
    """
    if rec.rtype != "E" or not _is_history_ident(rec):
        return None
    # Fast path for the clean common case; anything unusual (a missing or unparsable
    # value, a bound exceeded, an array subjob) goes to _finished_job_row_checked, which
    # is the specification and gives the precise error. Tests check the two agree.
    a = rec.attrs
    g = a.get
    ident = rec.ident
    seq_text, _dot, suffix = ident.partition(".")
    user = g("user")
    try:
        ints = [int(v) if v else None for v in map(g, _FJ_INT_KEYS)]
        ctime, start, end, status, ncpus, ngpus, nodect, runs, qtime, etime = ints
    except ValueError:
        return _finished_job_row_checked(rec, server)
    # The same cached helpers as the checked path; on an error, the checked path finds
    # the first bad field in its order, so both paths raise the same error.
    try:
        wall = _duration(a, "Resource_List.walltime")
        soft = _duration(a, "Resource_List.soft_walltime")
        used = _duration(a, "resources_used.walltime")
        mem = _size(a, "Resource_List.mem")
        _duration(a, "resources_used.cput")  # checked, not stored
    except ParseError:
        return _finished_job_row_checked(rec, server)
    if (
        not user
        or not (server or suffix)
        or not seq_text.isdigit()
        or not seq_text.isascii()
        or len(seq_text) > 18
        or (_dot and not suffix)
        or ctime is None
        or end is None
        or not all(map(_within, ints, _FJ_INT_BOUNDS))
        or end < ctime
        or (start is not None and not ctime <= start <= end)
        or (start is not None and used is not None and run_impossible(used, end - start))
        or (wall == 0 and wall_impossible(wall, used, None if start is None else end - start))
    ):
        return _finished_job_row_checked(rec, server)
    return (
        suffix or server,
        ident,
        ctime,
        int(seq_text),
        None,
        user,
        g("group"),
        g("project"),
        g("account"),
        g("queue"),
        g("jobname"),
        wall,
        soft,
        used,
        start,
        end,
        status,
        ncpus,
        ngpus,
        nodect,
        mem,
        g("Resource_List.select"),
        runs,
        qtime,
        etime,
        g("Resource_List.place"),
        g("exec_vnode"),
    )


def _finished_job_row_checked(rec: Record, server: Optional[str]) -> Tuple[Any, ...]:
    """finished_job_row() field by field, with a precise ParseError for a bad field."""
    seq, index, suffix, _parent = parse_job_id(rec.ident)
    a = rec.attrs
    user = a.get("user")
    if not user:
        raise ParseError("E record without user=")
    parts = {
        "server": lambda f: _server_of(rec.ident, suffix, server),
        "ident": lambda f: rec.ident,
        "seq": lambda f: _check("job id", seq, _INT8_MAX),
        "index": lambda f: None if index is None else _check("array index", index, _INT4_MAX),
        "epoch": lambda f: _epoch(a, f.key, f.required),
        "text": lambda f: a.get(f.key),
        "duration": lambda f: _duration(a, f.key),
        "int": lambda f: _int(a, f.key),
        "size": lambda f: _size(a, f.key),
    }  # type: Dict[str, Callable[[EField], Any]]
    row = tuple(parts[f.kind](f) for f in E_FIELDS)  # in column order: the first bad field
    for key in E_CHECKED_ONLY:
        _duration(a, key)
    at = _FJ_AT
    _check_times(row[at["ctime"]], row[at["started_at"]], row[at["ended_at"]])
    _check_run(row[at["runtime_s"]], row[at["started_at"]], row[at["ended_at"]])
    _check_wall(
        row[at["walltime_s"]], row[at["runtime_s"]], row[at["started_at"]], row[at["ended_at"]]
    )
    return row


def rerun_row(rec: Record, server: Optional[str] = None) -> Optional[Tuple[Any, ...]]:
    """Like :func:`rerun`, as a tuple in ``RERUN_COLUMNS`` order with epoch-second times.

    :raises ParseError: see :func:`rerun`
    """
    if rec.rtype != "R" or not _is_history_ident(rec):
        return None
    _seq, _index, suffix, _parent = parse_job_id(rec.ident)
    a = rec.attrs
    user = a.get("user")
    if not user:
        raise ParseError("R record without user=")
    run_count = _int(a, "run_count")
    if run_count is None:
        # run_count is part of the key: without it two reruns of one job would collide.
        raise ParseError("R record without run_count=")
    row = (
        _server_of(rec.ident, suffix, server),
        rec.ident,
        _epoch(a, "ctime", True),
        run_count,
        user,
        _duration(a, "resources_used.walltime"),
        _epoch(a, "start", False),
        _epoch(a, "end", True),
        _int(a, "Exit_status"),
    )
    _duration(a, "resources_used.cput")  # checked, not stored
    _check_times(row[2], row[6], row[7])
    _check_run(row[5], row[6], row[7])
    return row


def _as_dict(
    columns: Tuple[str, ...], row: Tuple[Any, ...], time_pos: Tuple[int, ...]
) -> Dict[str, Any]:
    values = list(row)
    for pos in time_pos:
        if values[pos] is not None:
            values[pos] = datetime.datetime.fromtimestamp(values[pos], _UTC)
    return dict(zip(columns, values))


def finished_job(rec: Record, server: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The ``finished_jobs`` row for an E record of a job or subjob.

    :param rec: a parsed record
    :param server: PBS server name; default the job id's suffix after the first ``.``
    :returns: a dict keyed by the ``finished_jobs`` columns (without ``ingested_at``,
        ``source_file``, ``source_offset``); ``ctime``, ``started_at``, ``ended_at`` are
        aware UTC datetimes, durations are seconds, ``mem_bytes`` is bytes.
        ``None`` for other record types, array parents, reservations and ``license``.
    :raises ParseError: the E record lacks ``user``, ``ctime`` or ``end``, its id has no
        server and none was given, or a stored field has a value that does not parse
    """
    row = finished_job_row(rec, server)
    if row is None:
        return None
    return _as_dict(FINISHED_JOB_COLUMNS, row, _FJ_TIME_POS)


def rerun(rec: Record, server: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The ``job_reruns`` row for an R (rerun/requeue) record.

    :param rec: a parsed record
    :param server: PBS server name; default the job id's suffix
    :returns: a dict keyed by the ``job_reruns`` columns (without ``ingested_at``,
        ``source_file``, ``source_offset``); ``None`` for other records
    :raises ParseError: the R record lacks ``user``, ``ctime``, ``end`` or ``run_count``,
        or a stored field does not parse
    """
    row = rerun_row(rec, server)
    if row is None:
        return None
    return _as_dict(RERUN_COLUMNS, row, _RR_TIME_POS)
