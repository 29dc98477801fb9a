"""History lookup for the hook: one indexed query, a cached connection, wall-clock bounds.

pbs_server runs hooks synchronously inside request processing, so a slow database blocks
every ``qsub``. This module therefore never waits longer than
``connect_timeout_s + statement_timeout_ms + STATEMENT_GRACE_S`` in total, by wall clock:
the connection is made by :mod:`.pgwire`, whose every wait is a ``poll()`` against one
deadline, so a server that accepts TCP and then never answers cannot stall the hook
either (``statement_timeout`` alone is enforced by that very server). Resolving a host
name is bounded by the same deadline: pgwire runs ``getaddrinfo`` in a daemon thread and
falls back on the name's last good addresses (see ``pgwire._resolve``); an IP address,
``hostaddr`` or a socket directory needs no resolver at all. ``statement_timeout`` and read-only
transactions are set in the startup packet (``options=-c ...``): no extra round trip.

The connection is cached at module level: pbs_server keeps imported modules until its
interpreter restarts, so consecutive events reuse it. A cached connection that has died
(server restart, idle timeout) is replaced once, within the same deadline. After an
interpreter restart the modules are imported afresh (pure Python: see :mod:`.pgwire`)
and the first event connects again.

The rows of recent lookups are kept too (``history_cache_entries``, least recently used
first out), and only while they are known to be current: migration 0006 keeps a change
counter, ``history_version``, that a statement trigger on ``finished_jobs`` increments in
the same transaction as any insert, update, delete or truncate. Each event reads the
counter (one small prepared query on the cached connection) and uses what was kept only
while it still reads the same value: a user's burst of jobs costs one indexed lookup, and
no job is predicted from rows older than the last commit to the history. The counter is a
row only the history's writer may update: a role that can merely connect cannot make the
hook do more work or wait longer (``NOTIFY`` needs no privilege at all, so 0.3 listened
to a channel that anyone could flood). Entries also expire after
``HISTORY_CACHE_MAX_AGE_S``, a bound for a writer that bypasses triggers
(``session_replication_role = replica``). Where the counter is missing (schema not
upgraded) nothing is kept.

The hook runs each event inside :func:`event`, which sets the event's one deadline: every
read of the event, whatever it looks up, ends by then, and the counter is read once. A read
of the counter is also trusted for ``history_recheck_ms`` after it was made (1 s by
default): a burst of ``qsub`` then costs no round trip at all after its first event, and a
job is predicted from history at most that much older than the last commit to it (the
history changes when the ingester stores finished jobs, every few minutes). Outside the
hook's events (``softwalltime predict``, tests) the counter is read at every lookup.

Hook path: Python 3.6+ syntax, standard library only.
"""

import contextlib
import json
import logging
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar

from ..core.calibrated import HISTORY_ROWS, Choices, ClassRow, OtherRuleSet, SiteFetch
from ..core.config import STATEMENT_GRACE_S, redact_dsn, require_dsn
from ..core.learned_site import LearnedChoices, LearnedFetch, SiteRow
from ..core.learned_site import OtherRuleSet as OtherLearnedRules
from ..core.registry import TARGETED
from ..errors import UNDEFINED_TABLE, ConfigError, DatabaseError, SchemaMissingError
from . import pgwire
from .state import STATE

log = logging.getLogger(__name__)
T = TypeVar("T")

# Served by ix_finished_jobs_user_recent (username, ended_at DESC, job_seq DESC) INCLUDE
# (runtime_s, walltime_s) as an Index Only Scan: every column referenced is in the index,
# and the ORDER BY matches its order, so PostgreSQL reads at most LIMIT matching entries.
# Rows that cannot be true (negative durations) are filtered here, not after the LIMIT:
# v1 must average v1_jobs usable jobs, not fewer.
RECENT_JOBS_SQL = (
    "SELECT runtime_s, walltime_s FROM finished_jobs"
    " WHERE username = $1 AND runtime_s >= 0 AND (walltime_s IS NULL OR walltime_s >= 0)"
    " ORDER BY ended_at DESC, job_seq DESC LIMIT $2"
)
# v3 only looks at jobs that requested a walltime; filtering in SQL keeps LIMIT exact.
RECENT_JOBS_WITH_WALLTIME_SQL = (
    "SELECT runtime_s, walltime_s FROM finished_jobs"
    " WHERE username = $1 AND runtime_s >= 0 AND walltime_s > 0"
    " ORDER BY ended_at DESC, job_seq DESC LIMIT $2"
)

# Predictor "calibrated": the user's last rows with the keys it compares (walltime, ncpus);
# also an Index Only Scan of ix_finished_jobs_user_recent (ncpus is in its INCLUDE list).
CLASS_JOBS_SQL = (
    "SELECT runtime_s, walltime_s, ncpus FROM finished_jobs"
    " WHERE username = $1 AND runtime_s >= 0 AND walltime_s > 0"
    " AND (ncpus IS NULL OR ncpus > 0)"
    " ORDER BY ended_at DESC, job_seq DESC LIMIT $2"
)
# Rank on (``rank``, core/rank.py) with predictor v1, v2 or v3: the predictor's rows
# and the rank's (calibrated's class rows) in one statement, so an event still costs one
# round trip. Two index-only scans of ix_finished_jobs_user_recent, each with its own filter
# and LIMIT, exactly the rows RECENT_JOBS_SQL (or ..._WITH_WALLTIME_SQL) and CLASS_JOBS_SQL
# return; the outer ORDER BY keeps each part newest first (UNION ALL alone promises no
# order). {scope}: " AND server = $4" or nothing.
_BOTH_SQL = (
    "SELECT part, runtime_s, walltime_s, ncpus FROM ("
    "(SELECT 0 AS part, runtime_s, walltime_s, ncpus, ended_at, job_seq FROM finished_jobs"
    " WHERE username = $1 AND {first}{scope} ORDER BY ended_at DESC, job_seq DESC LIMIT $2)"
    " UNION ALL "
    "(SELECT 1, runtime_s, walltime_s, ncpus, ended_at, job_seq FROM finished_jobs"
    " WHERE username = $1 AND runtime_s >= 0 AND walltime_s > 0"
    " AND (ncpus IS NULL OR ncpus > 0){scope} ORDER BY ended_at DESC, job_seq DESC LIMIT $3)"
    ") AS rows ORDER BY part, ended_at DESC, job_seq DESC"
)
# v3 with the rank: v3's rows are the rank's without the ncpus test, so one scan with v3's
# filter and the larger LIMIT holds both (100 rows of 3 columns to decode instead of 115 of
# 4: about 0.15 ms less per event). The rank's rows are those with ncpus NULL or > 0; rows
# with ncpus <= 0 (no ingester stores them) could push some past the LIMIT: then they are
# read exactly, with CLASS_JOBS_SQL (a second round trip, never with ingested data).
V3_WITH_CLASSES_SQL = (
    "SELECT runtime_s, walltime_s, ncpus FROM finished_jobs"
    " WHERE username = $1 AND runtime_s >= 0 AND walltime_s > 0"
    " ORDER BY ended_at DESC, job_seq DESC LIMIT $2"
)
# Predictor "learned": the user's last rows with a walltime, each with its end in whole
# epoch seconds (the time since the last end is one of its bins; int(timestamp()) as the
# replay reads ended_at) and ncpus (the rank key-mean's rows are those with ncpus NULL or
# > 0, as V3_WITH_CLASSES_SQL). ended_at is a key column of ix_finished_jobs_user_recent:
# still an index-only scan.
LEARNED_JOBS_SQL = (
    "SELECT runtime_s, walltime_s, ncpus, floor(extract(epoch FROM ended_at))::bigint"
    " FROM finished_jobs WHERE username = $1 AND runtime_s >= 0 AND walltime_s > 0"
    " ORDER BY ended_at DESC, job_seq DESC LIMIT $2"
)
_ANY_WALLTIME = "runtime_s >= 0 AND (walltime_s IS NULL OR walltime_s >= 0)"
_WITH_WALLTIME = "runtime_s >= 0 AND walltime_s > 0"


def both_sql(with_walltime_only: bool, server: bool) -> str:
    """The statement of :func:`both_jobs` for v1 and v2 (and, by hand, v3: the benchmark's
    ``EXPLAIN`` compares them)."""
    first = _WITH_WALLTIME if with_walltime_only else _ANY_WALLTIME
    return _BOTH_SQL.format(first=first, scope=" AND server = $4" if server else "")


# The site calibration table's decisions, read at most every CALIBRATION_TTL_S seconds:
# one row, the rule per bin as a JSON list (the cells themselves are for calibrate/psql).
CALIBRATION_SQL = "SELECT lam, jobs, under_jobs, choices FROM calibration_state"
CALIBRATION_TTL_S = 60.0

# Predictor "learned": its decisions per fine bin, one row (migration 0008), read at most
# every LEARNED_TTL_S seconds
LEARNED_SQL = "SELECT lam, jobs, under_jobs, site_jobs, choices FROM learned_state"
LEARNED_TTL_S = 60.0

# Migration 0006: a one-row counter the history's writer increments with every change.
VERSION_SQL = "SELECT version FROM history_version"
# The longest a cached lookup is used, even when the counter did not move.
HISTORY_CACHE_MAX_AGE_S = 300.0


def _close(conn: Any) -> None:
    conn.close()  # pgwire's close never raises


@contextlib.contextmanager
def event(deadline: float, recheck_s: float = 0.0) -> Iterator[None]:
    """Run one hook event: every database read inside ends by ``deadline`` (a
    ``time.monotonic()`` value), and the history's change counter is read at most once, or
    not at all if it was read less than ``recheck_s`` seconds ago (on the same connection).
    """
    STATE.event = object()
    STATE.deadline = deadline
    STATE.recheck_s = recheck_s
    try:
        yield
    finally:
        STATE.event = None
        STATE.deadline = None
        STATE.recheck_s = 0.0


def connect(
    dsn: str, connect_timeout_s: float, statement_timeout_ms: int, deadline: Optional[float] = None
) -> pgwire.Connection:
    """Open a read-only connection within a wall-clock bound.

    :param dsn: libpq URI or keyword string (a SQLAlchemy URL is accepted too)
    :param connect_timeout_s: seconds allowed for the whole connection setup
    :param statement_timeout_ms: per-statement limit set for the session, in milliseconds
    :param deadline: optional ``time.monotonic()`` value that ends the attempt earlier
    :raises DatabaseError: unreachable, refused, authentication failed or timed out; the
        message names the server without its password
    """
    start = time.monotonic()
    limit = start + connect_timeout_s
    if deadline is not None:
        limit = min(limit, deadline)
    try:
        conn = pgwire.connect(
            dsn,
            limit,
            startup={
                "options": f"-c statement_timeout={int(statement_timeout_ms):d}"
                " -c default_transaction_read_only=on",
                "application_name": "softwalltime-hook",
            },
            environ={},
        )
    except (DatabaseError, OSError, ValueError) as err:
        raise DatabaseError(f"cannot connect to {redact_dsn(dsn)}: {_one_line(err)}") from err
    log.debug("connected to %s in %.1f ms", redact_dsn(dsn), (time.monotonic() - start) * 1e3)
    return conn


def _one_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return " ".join(text.split())


def _query(
    conn: pgwire.Connection, sql: str, params: Sequence[Any], deadline: float
) -> List[Tuple[Any, ...]]:
    return conn.query(sql, params, deadline, prepare=True)


def close_cached() -> None:
    """Close and forget the cached connection and the lookups kept (tests, ``refresh``)."""
    STATE.forget_connection()
    STATE.forget_lookups()


def _conn_key(dsn: str, connect_timeout_s: float, statement_timeout_ms: int) -> Tuple[Any, ...]:
    """What the cached connection was opened with (another value: another connection)."""
    return (dsn, connect_timeout_s, statement_timeout_ms)


def _cached(key: Tuple[Any, ...]) -> Optional[pgwire.Connection]:
    """The cached connection for ``key`` if it is open and the server sent nothing since
    its last reply; else None (an idle connection that received anything, a FATAL or a
    stream of notices, is dropped unread: reading it would cost what the server chooses).
    Another ``key`` (another database or timeouts) forgets what was kept too."""
    if STATE.conn_key != key:
        close_cached()
        return None
    conn: Optional[pgwire.Connection] = STATE.conn
    if conn is None:
        return None
    if conn.closed or not conn.quiet():
        log.debug("cached connection closed or not quiet while idle; reconnecting")
        STATE.forget_connection()
        return None
    return conn


def _deadline(connect_timeout_s: float, statement_timeout_ms: int) -> float:
    """The event's deadline inside :func:`event`, else one from now."""
    if STATE.deadline is not None:
        return STATE.deadline
    return time.monotonic() + connect_timeout_s + statement_timeout_ms / 1000.0 + STATEMENT_GRACE_S


def _version(conn: pgwire.Connection, deadline: float) -> Optional[int]:
    """The history's change counter (once per :func:`event` and connection, or once per
    ``recheck_s`` of the events); None when the database has none (nothing is kept then). A
    new value forgets what was kept."""
    read = STATE.version_read
    if read is not None and STATE.event is not None and read[2] is conn:
        if read[0] is STATE.event or time.monotonic() - read[1] < STATE.recheck_s:
            return read[3]
    if STATE.counter is False:
        return None
    try:
        rows = conn.query(VERSION_SQL, (), deadline, prepare=True)
    except pgwire.PgError as err:
        if err.sqlstate != UNDEFINED_TABLE:
            raise
        log.debug("lookups not kept: no history_version table (softwalltime db upgrade)")
        STATE.counter = False
        return None
    value = rows[0][0] if len(rows) == 1 and len(rows[0]) == 1 else None
    version = value if type(value) is int else None
    STATE.counter = version is not None
    if version != STATE.version:
        STATE.forget_lookups()
        STATE.version = version
    STATE.version_read = (STATE.event, time.monotonic(), conn, version)
    return version


def _kept(wanted: Tuple[str, Tuple[Any, ...]]) -> Optional[List[Any]]:
    """The rows kept for ``wanted`` (after :func:`_version` said they are current), or None."""
    kept = STATE.lookups.get(wanted)
    if kept is None:
        return None
    if time.monotonic() - kept[0] > HISTORY_CACHE_MAX_AGE_S:
        del STATE.lookups[wanted]
        return None
    STATE.lookups.move_to_end(wanted)
    return list(kept[1])


def _keep(wanted: Tuple[str, Tuple[Any, ...]], rows: List[Any], entries: int) -> None:
    STATE.lookups[wanted] = (time.monotonic(), tuple(rows))
    while len(STATE.lookups) > entries:
        STATE.lookups.popitem(last=False)


def decided(settings: Any, key: Optional[Tuple[Any, ...]], decide: Callable[[], T]) -> T:
    """``decide()``, or what it returned for the same ``key`` and ``settings`` while the
    history's change counter did not move (a user's burst of identical jobs: one round
    trip, no call chain).

    Only while lookups are kept (``history_cache_entries``, a database with the counter)
    and for the predictors whose answer depends on the history alone (not ``calibrated``
    nor ``learned``, whose site tables change on their own; ``learned`` reads the clock
    too); ``key`` must hold every other input of the
    decision (None: decide now, keep nothing).
    """
    entries = settings.history_cache_entries
    if key is None or entries <= 0 or settings.predictor in TARGETED:
        return decide()
    conn = _cached(
        _conn_key(settings.dsn, settings.connect_timeout_s, settings.statement_timeout_ms)
    )
    if conn is None:
        return decide()  # the lookup connects, within the event's deadline
    try:
        version = _version(
            conn, _deadline(settings.connect_timeout_s, settings.statement_timeout_ms)
        )
    except DatabaseError as err:
        log.debug("cached connection failed (%s); reconnecting", _one_line(err))
        STATE.forget_connection()
        return decide()
    if version is None:
        return decide()
    full = (id(settings), key)  # hashing the settings' 30-odd fields would cost more
    kept = STATE.decisions.get(full)
    if (
        kept is not None
        and kept[2] is settings
        and time.monotonic() - kept[0] <= HISTORY_CACHE_MAX_AGE_S
    ):
        STATE.decisions.move_to_end(full)
        answer: T = kept[1]
        return answer
    answer = decide()
    if STATE.version == version:  # what it was decided from is still what was kept
        STATE.decisions[full] = (time.monotonic(), answer, settings)
        while len(STATE.decisions) > entries:
            STATE.decisions.popitem(last=False)
    return answer


def recent_jobs(
    dsn: str,
    username: str,
    limit: int,
    with_walltime_only: bool = False,
    connect_timeout_s: float = 1.0,
    statement_timeout_ms: int = 250,
    reuse: bool = True,
    server: Optional[str] = None,
    cache_entries: int = 0,
) -> List[Tuple[int, Optional[int]]]:
    """The user's last ``limit`` finished jobs by end time (ties: higher job_seq first).

    :param dsn: database to read ``finished_jobs`` from
    :param username: PBS user name, passed as a bound parameter (any characters are safe)
    :param limit: number of rows, at most
    :param with_walltime_only: only jobs that requested a walltime > 0 (predictor v3)
    :param connect_timeout_s: wall-clock bound for opening a connection, in seconds
    :param statement_timeout_ms: server-side statement limit, in milliseconds; the client
        also stops waiting ``STATEMENT_GRACE_S`` after it
    :param reuse: keep the connection in the module cache for the next call
    :param server: only jobs of this PBS server (None: every server's)
    :param cache_entries: lookups kept while the history's change counter does not move
        (0: none; see the module's description)
    :returns: ``[(runtime_s, walltime_s or None), ...]`` most recent first
    :raises DatabaseError: connection or query failed or timed out; the hook fails open

    Long because (parameters) the connection options come one by one: they are the
    settings' values that key the cached connection (:func:`_conn_key`), and callers
    without a settings object (tests, benchmarks) pass only those they change, by keyword.
    """
    sql = scoped(RECENT_JOBS_WITH_WALLTIME_SQL if with_walltime_only else RECENT_JOBS_SQL, server)
    params = (username, int(limit)) if server is None else (username, int(limit), server)
    return _fetch(
        dsn, sql, params, connect_timeout_s, statement_timeout_ms, reuse, cache_entries, _clean
    )


def _run(
    conn: pgwire.Connection,
    wanted: Tuple[str, Tuple[Any, ...]],
    deadline: float,
    cache_entries: int,
    clean: Callable[[List[Tuple[Any, ...]]], List[T]],
) -> List[T]:
    """``clean(rows)`` of one lookup on ``conn``: kept rows while the counter did not move
    (``cache_entries`` > 0), else the query's (then kept)."""
    version = _version(conn, deadline) if cache_entries > 0 else None
    if version is not None:
        kept = _kept(wanted)
        if kept is not None:
            return kept
    rows = clean(_query(conn, wanted[0], wanted[1], deadline))
    if version is not None and STATE.version == version:
        _keep(wanted, rows, cache_entries)
    return rows


def _fetch(
    dsn: str,
    sql: str,
    params: Sequence[Any],
    connect_timeout_s: float,
    statement_timeout_ms: int,
    reuse: bool = True,
    cache_entries: int = 0,
    clean: Callable[[List[Tuple[Any, ...]]], List[T]] = list,  # type: ignore[assignment]
) -> List[T]:
    """Run one query on the cached connection (replaced once if it died), within the bound,
    and return ``clean(rows)``; with ``cache_entries``, kept while the history is unchanged.

    :raises SchemaMissingError: a table is missing (schema not migrated)
    :raises DatabaseError: connection or query failed or timed out
    """
    deadline = _deadline(connect_timeout_s, statement_timeout_ms)
    key = _conn_key(dsn, connect_timeout_s, statement_timeout_ms)
    wanted = (sql, tuple(params))
    entries = cache_entries if reuse else 0
    conn = _cached(key) if reuse else None
    if conn is not None:
        try:
            return _run(conn, wanted, deadline, entries, clean)
        except pgwire.PgError as err:
            if err.sqlstate == UNDEFINED_TABLE:
                raise SchemaMissingError() from err
            if err.sqlstate != pgwire.QUERY_CANCELED:
                STATE.forget_connection()
            # statement_timeout (QUERY_CANCELED): the connection is still usable
            raise DatabaseError(f"history query failed: {_one_line(err)}") from err
        except DatabaseError as err:
            # The cached connection died since the last event (server restart, idle
            # timeout) or hangs: drop it and try once with a fresh one in the time left.
            log.debug("cached connection failed (%s); reconnecting", _one_line(err))
            STATE.forget_connection()

    conn = connect(dsn, connect_timeout_s, statement_timeout_ms, deadline=deadline)
    if reuse:
        STATE.conn, STATE.conn_key = conn, key
    try:
        return _run(conn, wanted, deadline, entries, clean)
    except DatabaseError as err:
        if reuse:
            STATE.forget_connection()
        else:
            _close(conn)
        if isinstance(err, pgwire.PgError) and err.sqlstate == UNDEFINED_TABLE:
            raise SchemaMissingError() from err
        raise DatabaseError(f"history query failed: {_one_line(err)}") from err
    finally:
        if not reuse:
            _close(conn)


def both_jobs(
    dsn: str,
    username: str,
    limit: int,
    with_walltime_only: bool,
    class_limit: int,
    connect_timeout_s: float = 1.0,
    statement_timeout_ms: int = 250,
    reuse: bool = True,
    server: Optional[str] = None,
    cache_entries: int = 0,
) -> Tuple[List[Tuple[int, Optional[int]]], List[Tuple[int, Optional[int], Optional[int]]]]:
    """:func:`recent_jobs` and :func:`class_jobs` of one user in one statement (the
    predictor's rows and the rank's): ``(history, class rows)``, each most recent first and
    each exactly what that function returns for the same arguments.

    Long because (parameters) it takes :func:`recent_jobs`' arguments, connection options
    one by one, and ``class_limit`` (see there).

    :raises DatabaseError: connection or query failed or timed out
    """
    if with_walltime_only:
        wide = max(int(limit), int(class_limit))
        args: Tuple[Any, ...] = (username, wide) if server is None else (username, wide, server)
        rows = _fetch(
            dsn, scoped(V3_WITH_CLASSES_SQL, server), args, connect_timeout_s,
            statement_timeout_ms, reuse, cache_entries, _clean_class,
        )  # fmt: skip
        classes = [row for row in rows if row[2] is None or row[2] > 0][: int(class_limit)]
        if len(classes) < min(len(rows), int(class_limit)) and len(rows) == wide:
            classes = class_jobs(
                dsn, username, class_limit, connect_timeout_s, statement_timeout_ms, reuse,
                server, cache_entries,
            )  # fmt: skip
        return [(r, w) for r, w, _n in rows[: int(limit)]], classes
    sql = both_sql(with_walltime_only, server is not None)
    params: Tuple[Any, ...] = (username, int(limit), int(class_limit))
    if server is not None:
        params += (server,)
    parts = _fetch(
        dsn, sql, params, connect_timeout_s, statement_timeout_ms, reuse, cache_entries,
        _clean_both,
    )  # fmt: skip
    history, classes = parts
    return history, classes


def _clean_both(rows: List[Tuple[Any, ...]]) -> List[List[Any]]:
    """``[history rows, class rows]`` of :func:`both_jobs`' statement, each cleaned as its
    own query's rows are."""
    first = [row[1:3] for row in rows if row and row[0] == 0]
    second = [row[1:] for row in rows if row and row[0] == 1]
    if len(first) + len(second) != len(rows):
        log.warning("ignoring %d malformed history rows", len(rows) - len(first) - len(second))
    return [_clean(first), _clean_class(second)]


def _clean(rows: List[Tuple[Any, ...]]) -> List[Tuple[int, Optional[int]]]:
    """Keep rows that are ``(runtime_s >= 0, walltime_s >= 0 or None)``.

    A database returning garbage (a hand-edited table, a wrong schema) must not break or
    skew the prediction: such rows are dropped with a warning.
    """
    out: List[Tuple[int, Optional[int]]] = []
    for row in rows:
        if len(row) == 2:
            runtime_s, walltime_s = row
            if (
                type(runtime_s) is int
                and runtime_s >= 0
                and (walltime_s is None or (type(walltime_s) is int and walltime_s >= 0))
            ):
                out.append((runtime_s, walltime_s))
                continue
        log.warning("ignoring malformed history row %r", row)
    return out


def scoped(sql: str, server: Optional[str]) -> str:
    """``sql`` limited to one server's jobs (``$3``), or unchanged for ``server=None``.

    ``server`` is in the INCLUDE list of the index, so the scan stays index-only.
    """
    if server is None:
        return sql
    head, order, tail = sql.partition(" ORDER BY ")
    return head + " AND server = $3" + order + tail


def history_server(settings: Any, server: Optional[str]) -> Optional[str]:
    """The server to limit the history to (``history_scope = server``), or None for all.

    :raises ConfigError: scope ``server`` but no server known
    """
    if settings.history_scope != "server":
        return None
    if not server:
        raise ConfigError(
            "history_scope is 'server' but the job's server is not known"
            " (set the 'server' setting, or --server)"
        )
    return str(server)


def fetcher(
    settings: Any, server: Optional[str] = None
) -> Callable[[str, int, bool], List[Tuple[int, Optional[int]]]]:
    """A ``fetch(user, limit, with_walltime_only)`` for :func:`softwalltime.core.decide.decide`.

    It also carries ``fetch.site``, the :class:`~softwalltime.core.calibrated.SiteFetch`
    of the same database and scope, which ``decide`` uses for predictor ``calibrated``, and
    ``fetch.learned``, the :class:`~softwalltime.core.learned_site.LearnedFetch` of
    predictor ``learned``.

    :param settings: :class:`softwalltime.core.config.Settings` (dsn, timeouts, scope)
    :param server: the job's PBS server; used when ``history_scope`` is ``server``
    :raises ConfigError: no DSN configured; scope ``server`` without a server
    """
    last = STATE.fetch
    if last is None or last.settings is not settings or last.server != server:
        last = STATE.fetch = _Fetch(settings, server)
    return last  # type: ignore[no-any-return]


class _Fetch:
    """The history reader of :func:`fetcher` (a callable with a ``site`` attribute); the
    hook asks for one at every event, with the same (immutable) settings object while its
    config file is unchanged, so it is made once."""

    def __init__(self, settings: Any, server: Optional[str]) -> None:
        self.dsn = require_dsn(settings)
        self.only = history_server(settings, server or settings.server)
        self.settings = settings
        self.server = server
        self._site = None  # type: Optional[SiteFetch]
        self._learned = None  # type: Optional[LearnedFetch]

    @property
    def site(self) -> SiteFetch:
        """The readers of predictor ``calibrated`` (made when first asked for)."""
        if self._site is None:
            self._site = site_fetcher(self.settings, self.server)
        return self._site

    @property
    def learned(self) -> LearnedFetch:
        """The readers of predictor ``learned`` (made when first asked for)."""
        if self._learned is None:
            self._learned = learned_fetcher(self.settings, self.server)
        return self._learned

    def both(
        self, username: str, limit: int, with_walltime_only: bool
    ) -> Tuple[List[Tuple[int, Optional[int]]], List[ClassRow]]:
        """``(self(username, limit, with_walltime_only), site.history(username,
        HISTORY_ROWS))`` in one round trip: the predictor's rows and the rank's."""
        return both_jobs(
            self.dsn,
            username,
            limit,
            with_walltime_only,
            HISTORY_ROWS,
            self.settings.connect_timeout_s,
            self.settings.statement_timeout_ms,
            server=self.only,
            cache_entries=self.settings.history_cache_entries,
        )

    def __call__(
        self, username: str, limit: int, with_walltime_only: bool
    ) -> List[Tuple[int, Optional[int]]]:
        return recent_jobs(
            self.dsn,
            username,
            limit,
            with_walltime_only,
            self.settings.connect_timeout_s,
            self.settings.statement_timeout_ms,
            server=self.only,
            cache_entries=self.settings.history_cache_entries,
        )


def class_jobs(
    dsn: str,
    username: str,
    limit: int,
    connect_timeout_s: float = 1.0,
    statement_timeout_ms: int = 250,
    reuse: bool = True,
    server: Optional[str] = None,
    cache_entries: int = 0,
) -> List[Tuple[int, Optional[int], Optional[int]]]:
    """The user's last ``limit`` finished jobs with a walltime, as ``(runtime_s, walltime_s,
    ncpus or None)``, most recent first (predictor ``calibrated``); ``server``: only that
    PBS server's jobs (None: every server's); ``cache_entries`` as for :func:`recent_jobs`.

    :raises DatabaseError: connection or query failed or timed out
    """
    sql = scoped(CLASS_JOBS_SQL, server)
    params = (username, int(limit)) if server is None else (username, int(limit), server)
    return _fetch(
        dsn, sql, params, connect_timeout_s, statement_timeout_ms, reuse, cache_entries,
        _clean_class,
    )  # fmt: skip


def _clean_class(rows: List[Tuple[Any, ...]]) -> List[Tuple[int, Optional[int], Optional[int]]]:
    out: List[Tuple[int, Optional[int], Optional[int]]] = []
    for row in rows:
        if len(row) == 3:
            runtime_s, walltime_s, ncpus = row
            if (
                type(runtime_s) is int
                and runtime_s >= 0
                and type(walltime_s) is int
                and walltime_s > 0
                and (ncpus is None or type(ncpus) is int)
            ):
                out.append((runtime_s, walltime_s, ncpus))
                continue
        log.warning("ignoring malformed history row %r", row)
    return out


def calibration(
    dsn: str,
    connect_timeout_s: float = 1.0,
    statement_timeout_ms: int = 250,
    max_age_s: float = CALIBRATION_TTL_S,
) -> Choices:
    """The site table's rule per bin, re-read at most every ``max_age_s`` seconds (cache).

    Never calibrated (no row) gives v3 everywhere.

    :raises DatabaseError: the read failed (e.g. the schema lacks revision 0004)
    """

    def build(rows: List[Tuple[Any, ...]]) -> Choices:
        table = Choices.empty()
        for lam, jobs, under, packed in rows:
            try:
                table = Choices.from_stored(float(lam), int(jobs), int(under), json.loads(packed))
            except OtherRuleSet as err:
                log.warning("calibrated: %s; v3 until 'softwalltime calibrate' runs", err)
            except (TypeError, ValueError) as err:
                raise DatabaseError(
                    f"calibration_state.choices: {err}; run 'softwalltime calibrate'"
                ) from err
        return table

    table: Choices = _cached_table(
        STATE.calibration, dsn, CALIBRATION_SQL, build, connect_timeout_s,
        statement_timeout_ms, max_age_s,
    )  # fmt: skip
    return table


def _cached_table(
    kept: Dict[str, Any],
    dsn: str,
    sql: str,
    build: Callable[[List[Tuple[Any, ...]]], Any],
    connect_timeout_s: float,
    statement_timeout_ms: int,
    max_age_s: float,
) -> Any:
    """A site table (``calibrated``'s or ``learned``'s) built from ``sql``'s rows, kept in
    ``kept`` (its hook state) and re-read at most every ``max_age_s`` seconds."""
    now = time.monotonic()
    cached = kept["table"]
    if cached is not None and kept["dsn"] == dsn and now - kept["at"] < max_age_s:
        return cached
    rows: List[Tuple[Any, ...]] = _fetch(dsn, sql, (), connect_timeout_s, statement_timeout_ms)
    table = build(rows)
    kept.update(table=table, at=now, dsn=dsn)
    return table


def forget_calibration() -> None:
    """Drop the cached calibration table (tests; ``softwalltime calibrate`` in-process)."""
    STATE.calibration.update(table=None, at=0.0, dsn=None)


def site_fetcher(settings: Any, server: Optional[str] = None) -> SiteFetch:
    """A :class:`SiteFetch` on the configured database (``decide(..., site=...)``).

    :param server: the job's PBS server; used when ``history_scope`` is ``server``
    :raises ConfigError: no DSN configured; scope ``server`` without a server
    """
    dsn = require_dsn(settings)
    only = history_server(settings, server or settings.server)

    def history(username: str, limit: int) -> Sequence[ClassRow]:
        return class_jobs(
            dsn,
            username,
            limit,
            settings.connect_timeout_s,
            settings.statement_timeout_ms,
            server=only,
            cache_entries=settings.history_cache_entries,
        )

    def table() -> Choices:
        return calibration(dsn, settings.connect_timeout_s, settings.statement_timeout_ms)

    return SiteFetch(history, table)


def learned_jobs(
    dsn: str,
    username: str,
    limit: int,
    connect_timeout_s: float = 1.0,
    statement_timeout_ms: int = 250,
    reuse: bool = True,
    server: Optional[str] = None,
    cache_entries: int = 0,
) -> Tuple[List[SiteRow], List[ClassRow]]:
    """The user's last ``limit`` finished jobs with a walltime as ``(runtime_s, walltime_s,
    ncpus or None, end_s)``, most recent first (predictor ``learned``), and the rank's rows
    among them (:func:`class_jobs` of the same arguments), in one statement; ``server`` and
    ``cache_entries`` as for :func:`recent_jobs`.

    :raises DatabaseError: connection or query failed or timed out
    """
    sql = scoped(LEARNED_JOBS_SQL, server)
    params = (username, int(limit)) if server is None else (username, int(limit), server)
    rows = _fetch(
        dsn, sql, params, connect_timeout_s, statement_timeout_ms, reuse, cache_entries,
        _clean_learned,
    )  # fmt: skip
    classes: List[ClassRow] = [(r, w, n) for r, w, n, _end in rows if n is None or n > 0]
    if len(classes) < len(rows) and len(rows) == int(limit):  # ncpus <= 0 pushed some out
        classes = class_jobs(
            dsn, username, limit, connect_timeout_s, statement_timeout_ms, reuse, server,
            cache_entries,
        )  # fmt: skip
    return rows, classes


def _clean_learned(rows: List[Tuple[Any, ...]]) -> List[SiteRow]:
    out: List[SiteRow] = []
    for row in rows:
        if len(row) == 4:
            runtime_s, walltime_s, ncpus, end_s = row
            if (
                type(runtime_s) is int
                and runtime_s >= 0
                and type(walltime_s) is int
                and walltime_s > 0
                and (ncpus is None or type(ncpus) is int)
                and type(end_s) is int
            ):
                out.append((runtime_s, walltime_s, ncpus, end_s))
                continue
        log.warning("ignoring malformed history row %r", row)
    return out


def learned_table(
    dsn: str,
    connect_timeout_s: float = 1.0,
    statement_timeout_ms: int = 250,
    max_age_s: float = LEARNED_TTL_S,
) -> LearnedChoices:
    """Predictor ``learned``'s decisions per fine bin, re-read at most every ``max_age_s``
    seconds (cache). Never calibrated (no row) gives v3 everywhere, as an empty table.

    :raises DatabaseError: the read failed (e.g. the schema lacks revision 0008)
    """

    def build(rows: List[Tuple[Any, ...]]) -> LearnedChoices:
        table = LearnedChoices.empty()
        for lam, jobs, under, site_jobs, packed in rows:
            try:
                table = LearnedChoices.from_stored(
                    float(lam), int(jobs), int(under), float(site_jobs), json.loads(packed)
                )
            except OtherLearnedRules as err:
                log.warning("learned: %s; v3 until 'softwalltime calibrate' runs", err)
            except (TypeError, ValueError) as err:
                raise DatabaseError(
                    f"learned_state.choices: {err}; run 'softwalltime calibrate'"
                ) from err
        return table

    table: LearnedChoices = _cached_table(
        STATE.learned, dsn, LEARNED_SQL, build, connect_timeout_s, statement_timeout_ms,
        max_age_s,
    )  # fmt: skip
    return table


def forget_learned() -> None:
    """Drop the cached ``learned`` table (tests; ``softwalltime calibrate`` in-process)."""
    STATE.learned.update(table=None, at=0.0, dsn=None)


def learned_fetcher(settings: Any, server: Optional[str] = None) -> LearnedFetch:
    """A :class:`LearnedFetch` on the configured database (``decide(..., learned=...)``).

    :param server: the job's PBS server; used when ``history_scope`` is ``server``
    :raises ConfigError: no DSN configured; scope ``server`` without a server
    """
    dsn = require_dsn(settings)
    only = history_server(settings, server or settings.server)

    def history(username: str, limit: int) -> Tuple[List[SiteRow], List[ClassRow]]:
        return learned_jobs(
            dsn,
            username,
            limit,
            settings.connect_timeout_s,
            settings.statement_timeout_ms,
            server=only,
            cache_entries=settings.history_cache_entries,
        )

    def table() -> LearnedChoices:
        return learned_table(dsn, settings.connect_timeout_s, settings.statement_timeout_ms)

    return LearnedFetch(history, table, time.time)
