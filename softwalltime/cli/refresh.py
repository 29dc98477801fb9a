"""``softwalltime refresh``: predict queued jobs' soft walltimes again (cron, as root)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..core.config import Settings
from ..errors import SoftwalltimeError
from ..pbsserver import refresh as lib
from ..pbsserver.commands import Pbs
from .argtypes import positive_number, whole_number


def register(sub: Any) -> None:
    """Add the ``refresh`` command."""
    parser = sub.add_parser(
        "refresh",
        help="predict queued jobs' soft walltimes again from the current history (cron)",
        description=(
            "For each queued or held job whose soft walltime the hook set, predict again "
            "with the hook's code and config; when the value moved by more than "
            "refresh_min_change_pct %% and refresh_min_change_s seconds, have the hook set "
            "it (qalter -l walltime=<unchanged> as manager fires its modifyjob event). "
            "With the hook's setting rank on, a sort rank (softwalltime_rank) that moved as "
            "much, or is missing, is applied the same way. "
            "Exit 0: done; 1: some jobs failed (one line each on stderr); 2: could not run."
        ),
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list what would change; alter nothing"
    )
    parser.add_argument(
        "--time-budget",
        type=positive_number,
        metavar="S",
        help="stop after S seconds (default: refresh_time_budget_s, 240)",
    )
    parser.add_argument(
        "--max-changes",
        type=whole_number(0),
        metavar="N",
        help="alter at most N jobs per run (default: refresh_max_changes, 2000)",
    )
    parser.add_argument(
        "--hook", default="softwalltime", help="the hook's name (default: softwalltime)"
    )
    parser.add_argument(
        "--cli-settings",
        action="store_true",
        help="predict with this command's settings instead of the installed hook's config",
    )
    parser.add_argument(
        "--lock-file",
        default=lib.DEFAULT_LOCK,
        metavar="FILE",
        help=f"flock taken for the run (default: {lib.DEFAULT_LOCK}); its folder must be"
        " writable by root or this user only",
    )
    parser.add_argument("--verbose", action="store_true", help="one line per job altered")
    parser.set_defaults(func=run)


def _err(line: str) -> None:
    print(line, file=sys.stderr)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """0: done; 1: errors on some jobs; 2: could not run (lock held, PBS or DB unreachable)."""
    pbs = Pbs.from_settings(settings)
    try:
        with lib.RunLock(args.lock_file):
            hook = lib.parse_qmgr_hook(pbs.run("qmgr", "-c", f"list hook {args.hook}").stdout)
            if not hook:
                raise lib.RefreshError(f"hook {args.hook!r} is not installed")
            if not args.dry_run and (
                hook.get("enabled") != "true" or "modifyjob" not in hook.get("event", "")
            ):
                raise lib.RefreshError(
                    f"hook {args.hook!r} is disabled or lacks the modifyjob event "
                    f"(enabled={hook.get('enabled')}, event={hook.get('event')}); "
                    "refresh applies values through it"
                )
            used = settings if args.cli_settings else lib.hook_settings(pbs, args.hook, settings)
            if used.dry_run and not args.dry_run:
                raise lib.RefreshError("the hook is in dry_run mode; it would set nothing")
            summary = lib.refresh(
                pbs,
                used,
                dry_run=args.dry_run,
                time_budget_s=args.time_budget,
                max_changes=args.max_changes,
                err=_err,
                verbose=args.verbose,
            )
    except SoftwalltimeError as error:
        if args.debug:
            raise
        _err(f"softwalltime refresh: error: {error}")
        return 2
    print(summary.line())
    return 1 if summary.errors else 0
