"""``softwalltime report``: what soft walltimes did on this system, as one HTML page."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import sys
import time
from typing import Any

from .. import outfile
from ..core.config import Settings, require_dsn

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
        default="softwalltime-report.html",
        help="HTML file to write, atomically; only a regular file is replaced (keeping its"
        " mode), a new one gets the umask's mode; '-' writes to standard output",
    )
    parser.add_argument(
        "--json", action="store_true", help="print every figure's numbers as JSON instead"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Collect in one snapshot, then write the page (or print JSON)."""
    from ..db import engine as db
    from ..report import build, html

    dsn = require_dsn(settings)
    start = time.perf_counter()
    with db.connect(db.make_engine(dsn), dsn) as conn:
        # Several statements, one snapshot: the figures agree with each other.
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
        data, meta = build.make_report(
            conn, args.deployed_at, args.since, args.until, args.server, args.queue
        )
    if args.json:
        print(build.to_json(data, meta))
        return 0
    outfile.write_text(args.out, html.render(data, meta))
    done = f"{args.out}: {data['totals']['jobs']} jobs, {time.perf_counter() - start:.1f} s"
    print(done, file=sys.stderr if args.out == outfile.STDOUT else sys.stdout)
    return 0
