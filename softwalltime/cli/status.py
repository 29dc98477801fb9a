"""``softwalltime status``: is the hook, its database and the ingester working? (Nagios 0/1/2)"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import SoftwalltimeError
from ..hookpath.config import Settings
from ..pbsserver import status as lib
from ..pbsserver.commands import Pbs
from .argtypes import positive_duration


def register(sub: Any) -> None:
    """Add the ``status`` command."""
    parser = sub.add_parser(
        "status",
        help="check the hook, its config, database and imports, its recent work, the ingester",
        description=(
            "One look at everything softwalltime needs on a PBS server host (as root). "
            "Exit 0 OK, 1 warning, 2 critical (Nagios). Any hook failure in the window is a "
            "warning; a failure rate above status_failure_rate_pct (5) is critical."
        ),
    )
    parser.add_argument(
        "--hook", default="softwalltime", help="the hook's name (default: softwalltime)"
    )
    parser.add_argument(
        "--since",
        type=positive_duration,
        default=3600,
        metavar="DURATION",
        help="server log window, [[H:]M:]S (default: 1:00:00)",
    )
    parser.add_argument(
        "--ingest-max-age",
        type=positive_duration,
        default=3600,
        metavar="DURATION",
        help="the ingester is behind when unread records wait and no checkpoint was written "
        "for this long (default: 1:00:00)",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument(
        "--prometheus",
        metavar="FILE",
        help="also write the metrics to FILE (node_exporter textfile collector; atomic rename)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the checks; the exit status is the worst state."""
    pbs = Pbs.from_settings(settings)
    checks = lib.run_checks(
        pbs,
        settings,
        lib.Options(hook=args.hook, since_s=args.since, ingest_max_age_s=args.ingest_max_age),
    )
    code = lib.overall(checks)
    if args.prometheus:
        try:
            lib.write_atomically(args.prometheus, lib.render_prometheus(checks))
        except SoftwalltimeError as err:
            print(f"softwalltime status: error: {err}", file=sys.stderr)
            code = lib.CRITICAL
    if args.json:
        print(lib.render_json(checks))
    else:
        print(lib.render_table(checks, color=sys.stdout.isatty()))
    return code
