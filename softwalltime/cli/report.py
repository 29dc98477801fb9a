"""``softwalltime report``: what soft walltimes did on this system, as one HTML page."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import sys
import time
from typing import TYPE_CHECKING, Any

from .. import outfile
from ..core.config import Settings, require_dsn
from ..errors import DatabaseError
from .argtypes import whole_number

if TYPE_CHECKING:
    import sqlalchemy as sa

log = logging.getLogger(__name__)


def instant(text: str) -> dt.datetime:
    """An argparse type: ``YYYY-MM-DD`` or an ISO 8601 time; without a zone, UTC."""
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a date (2026-01-31) or an ISO 8601 time, got {text!r}"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


DEFAULT_OUT = "softwalltime-report.html"
MAX_PROCS = 10**8


def register(sub: Any) -> None:
    """Add the ``report`` command."""
    parser = sub.add_parser(
        "report",
        help="one HTML page: what the deployed soft walltimes did (the paper's figures)",
        description=(
            "Errors of soft walltimes vs walltimes by month, runtime class, queue and user;"
            " under-estimates; workload, wait and bounded slowdown before/after deployment;"
            " where soft walltimes are worst. Aggregated in PostgreSQL from finished_jobs."
            " Example: softwalltime report --since 2026-01-01 --out report.html"
        ),
    )
    parser.add_argument("--since", type=instant, help="jobs that ended at or after this")
    parser.add_argument("--until", type=instant, help="jobs that ended before this")
    parser.add_argument(
        "--deployed-at",
        type=instant,
        help="when soft walltimes were deployed (default: the first job with one)",
    )
    parser.add_argument("--server", help="only this PBS server's jobs")
    parser.add_argument("--queue", help="only this queue's jobs")
    parser.add_argument(
        "--out",
        metavar="FILE",
        help=f"file to write (default: {DEFAULT_OUT}; with --json, standard output),"
        " atomically; only a regular file is replaced (keeping its mode), a new one gets the"
        " umask's mode; '-' writes to standard output",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="every figure's numbers as JSON instead of the page (to --out if given)",
    )
    parser.add_argument(
        "--procs",
        type=whole_number(1, MAX_PROCS),
        metavar="N",
        help="the machine's processors: adds 'what the policy did', the jobs since the last"
        " policy change replayed under it and under the previous one",
    )
    parser.set_defaults(func=run)


def require_temporary(conn: sa.Connection) -> None:
    """The report reads the jobs once into temporary tables: a role without TEMPORARY on the
    database (the hook's, the pruner's after ``db grant``) is told which role to use instead
    of PostgreSQL's traceback (issue 50).

    :raises DatabaseError: the connection's role may not create temporary tables
    """
    import sqlalchemy as sa

    from .dbgrant import INGEST_ROLE

    user, may = conn.execute(
        sa.text("SELECT current_user, has_database_privilege(current_database(), 'TEMPORARY')")
    ).one()
    if not may:
        raise DatabaseError(
            f"role {user} may not create temporary tables, which the report needs: run it with"
            f" the ingester's role ({INGEST_ROLE} by default) or the database owner's"
            " (--dsn or SOFTWALLTIME_DSN)"
        )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Collect in one snapshot, then write the page (or print JSON)."""
    from .. import api

    dsn = require_dsn(settings)
    start = time.perf_counter()
    found = api.report(
        dsn,
        deployed_at=args.deployed_at,
        since=args.since,
        until=args.until,
        server=args.server,
        queue=args.queue,
        check=require_temporary,
        procs=args.procs,
    )
    data = found.data
    if args.json:
        out = args.out or outfile.STDOUT
        outfile.write_text(out, found.to_json() + "\n")
    else:
        out = args.out or DEFAULT_OUT
        outfile.write_text(out, found.html())
    done = f"{out}: {data['totals']['jobs']} jobs, {time.perf_counter() - start:.1f} s"
    if out != outfile.STDOUT:
        print(done)
    elif not args.json:
        print(done, file=sys.stderr)
    return 0
