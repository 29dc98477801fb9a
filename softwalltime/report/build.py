"""Put the report together: find the deployment, check there is something to show, collect."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Dict, List, Optional, Sequence, Tuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import UNDEFINED_TABLE, SchemaMissingError
from . import NothingToReportError, queries

# Sorts, hash tables and percentiles of a million rows stay in memory with this (per sort or
# hash of each of the report's connections: a few hundred MB at most on 10^6 rows; beyond,
# the sorts spill to temporary files).
WORK_MEM = "128MB"


def make_report(
    conn: Connection,
    deployed_at: Optional[dt.datetime] = None,
    since: Optional[dt.datetime] = None,
    until: Optional[dt.datetime] = None,
    server: Optional[str] = None,
    queue: Optional[str] = None,
    timings: Optional[Dict[str, float]] = None,
    parallel: bool = True,
) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The report's numbers and what they cover.

    The caller owns the transaction: make it REPEATABLE READ for one consistent snapshot
    (the command does), and not READ ONLY (the jobs of the scope are read once into
    temporary tables, dropped at its end).

    :param deployed_at: when soft walltimes were deployed; default: the creation time of
        the first job with a soft walltime (on ``server`` if given)
    :param timings: if given, filled with the seconds each step took (``materialise``,
        ``totals``, then each of :data:`.queries.FIGURES`; ``NAME (2)``: a step on the second
        connection, and so on)
    :param parallel: compute the figures on as many connections of ``conn``'s engine as
        :data:`.queries.GROUPS` has groups, all reading the same snapshot, when ``conn``'s
        transaction is REPEATABLE READ and has written nothing (see :func:`_start_others`)
    :raises NothingToReportError: no finished job in the scope, or none with a soft walltime
        after the deployment
    :raises SchemaMissingError: the database has no history table ('db upgrade' not run)
    """
    try:
        return _make_report(conn, deployed_at, since, until, server, queue, timings, parallel)
    except sa.exc.ProgrammingError as err:
        if getattr(err.orig, "pgcode", None) == UNDEFINED_TABLE:
            raise SchemaMissingError("no finished_jobs table") from err
        raise


def _make_report(
    conn: Connection,
    deployed_at: Optional[dt.datetime],
    since: Optional[dt.datetime],
    until: Optional[dt.datetime],
    server: Optional[str],
    queue: Optional[str],
    timings: Optional[Dict[str, float]],
    parallel: bool,
) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    conn.execute(sa.text("SELECT set_config('work_mem', :v, true)"), {"v": WORK_MEM})
    how = "given with --deployed-at"
    if deployed_at is None:
        deployed_at = queries.find_deployment(conn, server)
        how = "the first job with a soft walltime"
    scope = queries.Scope(deployed_at or _FAR_FUTURE, since, until, server, queue)
    with ThreadPoolExecutor(max_workers=len(queries.GROUPS) - 1) as pool:
        others = _start_others(conn, scope, pool) if parallel else []
        try:
            totals, data = _first(conn, scope, deployed_at, others, timings)
        finally:
            for other in others:
                other.cancel()
            # Wait for them (their connections close) even when there is nothing to report.
            wait(others)
    assert deployed_at is not None  # else _first raised NothingToReportError
    meta = {
        "deployed_at": deployed_at.isoformat(),
        "deployed_how": how,
        "scope": {
            "since": since.isoformat() if since else None,
            "until": until.isoformat() if until else None,
            "server": server,
            "queue": queue,
        },
        "generated_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
    }
    return data, meta


_Half = Tuple[Dict[str, Any], Dict[str, float]]


def _first(
    conn: Connection,
    scope: queries.Scope,
    deployed_at: Optional[dt.datetime],
    others: List[Future[_Half]],
    timings: Optional[Dict[str, float]],
) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Totals and the figures on ``conn``: all of them, or when ``others`` run (the other
    groups of :data:`.queries.GROUPS`), those of the first group."""
    names = queries.GROUPS[0] if others else ("totals", *queries.FIGURES)
    start = time.perf_counter()
    queries.materialise(conn, scope, names)
    mid = time.perf_counter()
    totals = queries.totals(conn)
    if timings is not None:
        timings["materialise"] = mid - start
        timings["totals"] = time.perf_counter() - mid
    where = _describe(scope)
    if not totals["jobs"]:
        raise NothingToReportError(f"no finished jobs with a walltime and a run time {where}")
    if deployed_at is None:
        raise NothingToReportError(
            f"no job has a soft walltime {where}: soft walltimes were not deployed yet"
            f" ({totals['jobs']} finished jobs); give --deployed-at if they were"
        )
    if not totals["after_soft"]:
        raise NothingToReportError(
            f"no job created after the deployment ({deployed_at.isoformat()}) has a soft"
            f" walltime {where}: nothing to compare yet ({totals['before']} jobs before)"
        )
    mine = [n for n in names if n != "totals"]
    data = {"totals": totals, **queries.collect(conn, timings, mine)}
    left: List[str] = []
    for number, (group, other) in enumerate(zip(queries.GROUPS[1:], others), 2):
        try:
            more, more_timings = other.result()
        except sa.exc.OperationalError:
            # No other connection (connection limit, server gone for it): this one does it.
            left += group
            continue
        data.update(more)
        if timings is not None:
            timings.update({f"{k} ({number})": v for k, v in more_timings.items()})
    if left:
        queries.materialise(conn, scope, left)
        data.update(queries.collect(conn, timings, left))
    queries.merge_waits(data)
    return totals, {k: data[k] for k in ("totals", *queries.FIGURES) if k in data}


# pg_export_snapshot()'s identifiers: hexadecimal words and dashes (quoted into SQL below).
_SNAPSHOT_RE = re.compile(r"^[0-9A-F]+(-[0-9A-F]+)+$")


def _start_others(
    conn: Connection, scope: queries.Scope, pool: ThreadPoolExecutor
) -> List[Future[_Half]]:
    """Compute the groups of :data:`.queries.GROUPS` after the first on connections of their
    own that read the same snapshot (``pg_export_snapshot``), so the report runs on several
    cores.

    Only when the snapshot is the transaction's (REPEATABLE READ) and the transaction has
    written nothing (another session cannot see its writes); otherwise none: the caller
    computes everything on ``conn``.
    """
    isolation, xid = conn.execute(
        sa.text("SELECT current_setting('transaction_isolation'), txid_current_if_assigned()")
    ).one()
    if isolation != "repeatable read" or xid is not None:
        return []
    snapshot = conn.execute(sa.text("SELECT pg_export_snapshot()")).scalar()
    if not isinstance(snapshot, str) or not _SNAPSHOT_RE.match(snapshot):
        return []
    engine = conn.engine

    def run(names: Sequence[str]) -> _Half:
        timings: Dict[str, float] = {}
        with engine.connect() as other:
            other = other.execution_options(isolation_level="REPEATABLE READ")
            other.execute(sa.text(f"SET TRANSACTION SNAPSHOT '{snapshot}'"))
            other.execute(sa.text("SELECT set_config('work_mem', :v, true)"), {"v": WORK_MEM})
            start = time.perf_counter()
            queries.materialise(other, scope, names)
            timings["materialise"] = time.perf_counter() - start
            data = queries.collect(other, timings, names)
            other.rollback()
        return data, timings

    return [pool.submit(run, names) for names in queries.GROUPS[1:]]


_FAR_FUTURE = dt.datetime(9999, 1, 1, tzinfo=dt.timezone.utc)


def _describe(scope: queries.Scope) -> str:
    parts = [
        f"{name} {value}"
        for name, value in (
            ("since", scope.since),
            ("until", scope.until),
            ("on server", scope.server),
            ("in queue", scope.queue),
        )
        if value is not None
    ]
    return "(" + ", ".join(parts) + ")" if parts else "in the history"


def to_json(data: Dict[str, Any], meta: Dict[str, Any]) -> str:
    """Every figure's numbers as JSON (times as ISO 8601)."""
    return json.dumps({"meta": meta, **data}, indent=1, default=_iso)


def _iso(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    return float(value)
