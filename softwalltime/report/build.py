"""Put the report together: find the deployment, check there is something to show, collect."""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any, Dict, Optional, Tuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import NothingToReportError, queries

# Sorts hash tables and percentiles of a million rows stay in memory with this.
WORK_MEM = "128MB"


def make_report(
    conn: Connection,
    deployed_at: Optional[dt.datetime] = None,
    since: Optional[dt.datetime] = None,
    until: Optional[dt.datetime] = None,
    server: Optional[str] = None,
    queue: Optional[str] = None,
    timings: Optional[Dict[str, float]] = None,
) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The report's numbers and what they cover.

    The caller owns the transaction: make it REPEATABLE READ for one consistent snapshot
    (the command does), and not READ ONLY (the jobs of the scope are read once into
    temporary tables, dropped at its end).

    :param deployed_at: when soft walltimes were deployed; default: the creation time of
        the first job with a soft walltime (on ``server`` if given)
    :param timings: if given, filled with the seconds each step took (``materialise``,
        ``totals``, then each of :data:`.queries.FIGURES`)
    :raises NothingToReportError: no finished job in the scope, or none with a soft walltime
        after the deployment
    """
    conn.execute(sa.text("SELECT set_config('work_mem', :v, true)"), {"v": WORK_MEM})
    how = "given with --deployed-at"
    if deployed_at is None:
        deployed_at = queries.find_deployment(conn, server)
        how = "the first job with a soft walltime"
    scope = queries.Scope(deployed_at or _FAR_FUTURE, since, until, server, queue)
    start = time.perf_counter()
    queries.materialise(conn, scope)
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
    data = {"totals": totals, **queries.collect(conn, timings)}
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
