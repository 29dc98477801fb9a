"""``softwalltime calibrate``: rebuild the site table of predictor ``calibrated`` or
``learned``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable, Optional, Union

from ..core import registry
from ..core.config import Settings, parse_target, require_dsn, under_target

DESCRIPTION = """\
Rebuild the site calibration table of the predictor 'calibrated' from the finished_jobs
table: every finished job is replayed (in event order, each job learning only from jobs
ended before it) with the target under-estimate rate target_under_pct, and the final table
replaces the stored one. The hook re-reads it within 60 s. Run it from cron (e.g. every
10 minutes) or after each ingest; it is idempotent.

--target-under-pct v3 (or the setting target_under_pct = v3) asks for as many
under-estimates as v3 would have made on the same jobs (v3's running under-estimates are
computed alongside and tracked).

The table starts from a prior shipped with the package (learned from public traces), as
30 pseudo-jobs per job class, so that a new site's classes do not all fall back to v3
until each has 30 finished jobs; the site's own jobs outweigh it as they accumulate.
--no-prior starts from an empty table.

--predictor learned rebuilds the table of the predictor 'learned' instead (by default,
the predictor of the settings when it is learned): the history is replayed exactly as
'softwalltime evaluate --predictors learned --prior' replays it, and the table's cells go
to learned_cells, the rule it chooses in each bin (soft walltime and rank) to the one row
of learned_state, which the hook reads. Like calibrated's, it recomputes the whole
history at each run (not incremental). Its prior helps a site with few finished jobs; on
traces it was not built from, a history of tens of thousands of jobs gained nothing from
it, and one lost accuracy and doubled its mean error (docs/evaluate.md): give --no-prior
where the history is that long.
"""
CALIBRATED = registry.CALIBRATED
LEARNED = registry.LEARNED

TARGET_HELP = (
    "target under-estimate rate in percent, or 'v3': as many under-estimates as v3 on the"
    " same jobs (default: the setting target_under_pct)"
)


def target_option(text: Optional[str], default: Union[float, str]) -> Optional[float]:
    """The target of ``--target-under-pct``: percent, or ``None`` for ``v3``.

    :param text: the option's value (``None``: not given, the setting ``default``)
    :param default: the setting ``target_under_pct`` (a percentage or ``v3``)
    :raises ConfigError: neither ``v3`` nor a percentage in the setting's range
    """
    if text is None:
        return under_target(default)
    return under_target(parse_target("--target-under-pct", text))


def register(sub: Any) -> None:
    """Add the ``calibrate`` command."""
    p = sub.add_parser(
        "calibrate",
        help="rebuild the site table of the predictor 'calibrated' (or 'learned')",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--target-under-pct", metavar="PCT|v3", help=TARGET_HELP)
    p.add_argument(
        "--predictor",
        choices=(CALIBRATED, LEARNED),
        help="whose table to rebuild (default: learned when the setting predictor is"
        " learned, else calibrated)",
    )
    p.add_argument(
        "--no-prior",
        action="store_true",
        help="start from an empty table, not from the prior shipped with the package",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Rebuild the table and print one summary line (or ``--json``); 0 on success.

    :raises ConfigError: no database configured, or a bad target
    :raises DatabaseError: the database cannot be read or written
    """
    from ..db import engine as db

    target = target_option(args.target_under_pct, settings.target_under_pct)
    dsn = require_dsn(settings)
    which = args.predictor or (LEARNED if settings.predictor == LEARNED else CALIBRATED)
    build: Callable[..., Any]
    if which == LEARNED:
        from ..replay.calibrate_learned import calibrate_learned as build
    else:
        from ..replay.calibrate import calibrate as build
    engine = db.make_engine(dsn)
    try:
        with db.connect(engine, dsn) as conn:
            summary = build(conn, target, prior=not args.no_prior)
            conn.commit()
    finally:
        engine.dispose()
    if args.json:
        json.dump(summary._asdict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    under = "-" if summary.under_pct is None else f"{summary.under_pct:.1f} %"
    if target is None:
        v3 = "-" if summary.target_under_pct is None else f"{summary.target_under_pct:.1f} %"
        goal = f"target v3's rate, {v3}"
    else:
        goal = f"target {target:g} %"
    print(
        f"{which} on {summary.jobs} finished jobs: under-estimated {under}"
        f" ({goal}), {summary.cells} table cells"
    )
    return 0
