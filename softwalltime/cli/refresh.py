"""``softwalltime refresh``: predict queued jobs' soft walltimes again (timer, as the service
user with PBS operator rights; its root-only step ``--export-hook`` hands it the hook's
configuration)."""

from __future__ import annotations

import argparse
import json
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
    hand = parser.add_mutually_exclusive_group()
    hand.add_argument(
        "--export-hook",
        metavar="FILE",
        help="as root only: write the hook's listing and config (which PBS shows to root"
        " only) to FILE for an unprivileged --hook-file run, and exit; the package's unit"
        f" runs it as its root-only step (FILE {lib.DEFAULT_HOOK_FILE})",
    )
    hand.add_argument(
        "--hook-file",
        metavar="FILE",
        help="read the hook's listing and config from FILE (written by --export-hook)"
        " instead of qmgr: refresh then needs only PBS operator rights",
    )
    parser.add_argument("--verbose", action="store_true", help="one line per job altered")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the summary as one JSON object instead of the line: "
        + ", ".join(f"{k} ({v})" for k, v in JSON_KEYS),
    )
    parser.set_defaults(func=run)


# refresh --json: its keys, for --help and the test that parses them.
JSON_KEYS = (
    ("seen", "queued jobs seen"),
    ("changed", "jobs altered, or that would be with --dry-run"),
    ("unchanged", "jobs whose value moved too little"),
    ("skipped", "jobs left alone, by reason"),
    ("errors", "jobs that failed, one line each on stderr"),
    ("ranks", "jobs whose sort rank changed; null when the rank is off"),
    ("dry_run", "true in a dry run"),
    ("elapsed_s", "seconds the pass took"),
    ("jobs", "the lines of a dry run or verbose run, one per job"),
)


def summary_json(summary: lib.Summary, lines: list[str]) -> dict[str, Any]:
    """``refresh --json``: the keys of :data:`JSON_KEYS`, in that order."""
    found = {
        "seen": summary.seen,
        "changed": summary.changed,
        "unchanged": summary.unchanged,
        "skipped": dict(sorted(summary.skipped.items())),
        "errors": summary.errors,
        "ranks": summary.ranks,
        "dry_run": summary.dry_run,
        "elapsed_s": round(summary.elapsed_s, 3),
        "jobs": lines,
    }
    return {k: found[k] for k, _ in JSON_KEYS}


def _err(line: str) -> None:
    print(line, file=sys.stderr)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """0: done; 1: errors on some jobs; 2: could not run (lock held, PBS or DB unreachable)."""
    pbs = Pbs.from_settings(settings)
    try:
        if args.export_hook:
            lib.export_hook(pbs, args.hook, args.export_hook)
            return 0
        with lib.RunLock(args.lock_file):
            exported = None
            if args.hook_file:
                hook, exported = lib.read_hook_file(args.hook_file, args.hook)
            else:
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
            if args.cli_settings:
                used = settings
            elif exported is not None:
                used = lib.settings_from_export(exported, args.hook, settings)
            else:
                used = lib.hook_settings(pbs, args.hook, settings)
            if used.dry_run and not args.dry_run:
                raise lib.RefreshError("the hook is in dry_run mode; it would set nothing")
            lines: list[str] = []
            summary = lib.refresh(
                pbs,
                used,
                dry_run=args.dry_run,
                time_budget_s=args.time_budget,
                max_changes=args.max_changes,
                out=lines.append if args.json else print,
                err=_err,
                verbose=args.verbose,
            )
    except SoftwalltimeError as error:
        if args.debug:
            raise
        _err(f"softwalltime refresh: error: {error}")
        return 2
    print(json.dumps(summary_json(summary, lines), indent=2) if args.json else summary.line())
    return 1 if summary.errors else 0
