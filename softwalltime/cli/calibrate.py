"""``softwalltime calibrate``: rebuild the ``calibrated`` predictor's site table."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ConfigError
from ..hookpath.config import Settings, require_dsn

DESCRIPTION = """\
Rebuild the site calibration table of the predictor 'calibrated' from the finished_jobs
table: every finished job is replayed (in event order, each job learning only from jobs
ended before it) with the target under-estimate rate target_under_pct, and the final table
replaces the stored one. The hook re-reads it within 60 s. Run it from cron (e.g. every
10 minutes) or after each ingest; it is idempotent.
"""


def register(sub: Any) -> None:
    """Add the ``calibrate`` command."""
    p = sub.add_parser(
        "calibrate",
        help="rebuild the site calibration table of the predictor 'calibrated'",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--target-under-pct",
        type=float,
        metavar="PCT",
        help="target under-estimate rate in percent (default: the setting target_under_pct)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Rebuild the table and print one summary line; 0 on success.

    :raises ConfigError: no database configured, or a bad target
    :raises DatabaseError: the database cannot be read or written
    """
    from ..db import engine as db
    from ..replay.calibrate import calibrate

    target = settings.target_under_pct
    if args.target_under_pct is not None:
        target = args.target_under_pct
        if not 0 < target < 100:
            raise ConfigError(f"--target-under-pct: must be above 0 and below 100, got {target:g}")
    dsn = require_dsn(settings)
    engine = db.make_engine(dsn)
    try:
        with db.connect(engine, dsn) as conn:
            summary = calibrate(conn, target)
            conn.commit()
    finally:
        engine.dispose()
    under = "-" if summary.under_pct is None else f"{summary.under_pct:.1f} %"
    print(
        f"calibrated on {summary.jobs} finished jobs: under-estimated {under}"
        f" (target {target:g} %), {summary.cells} table cells"
    )
    return 0
