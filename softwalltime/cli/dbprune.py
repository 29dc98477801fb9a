"""``softwalltime db prune``: delete the history older than ``history_keep_days``.

The work is :mod:`softwalltime.db.retention`'s (bounded batches, one short transaction
each). Run it daily (packaging/systemd/softwalltime-prune.timer, or the cron line) with the
pruner's role of ``softwalltime db grant``: the only role that may ``DELETE`` history.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from ..core.config import Settings, require_dsn
from .argtypes import whole_number

MAX_KEEP_DAYS = 100 * 366

# --json: its keys, for --help and the test that parses them.
JSON_KEYS = (
    ("keep_days", "history_keep_days used"),
    ("keep_jobs", "each user's newest jobs on each server kept whatever their age"),
    ("cutoff", "ISO 8601 instant, jobs that ended before it go; null when keep_days is 0"),
    ("dry_run", "true: nothing was deleted, the counts are what would be"),
    ("finished_jobs", "rows of finished_jobs deleted"),
    ("job_reruns", "rows of job_reruns deleted"),
    ("batches", "transactions that deleted rows"),
    ("seconds", "time taken"),
)


def add_prune_command(dbsub: Any) -> None:
    """Add ``db prune`` to the ``db`` command group."""
    from ..db.retention import DEFAULT_BATCH_ROWS, MAX_BATCH_ROWS

    prune = dbsub.add_parser(
        "prune",
        help="delete finished jobs older than history_keep_days (in small batches)",
        description=(
            "Delete the finished jobs (and their earlier runs) that ended more than "
            "history_keep_days ago, except each user's newest jobs on each server (at "
            "least 100, and at least v1_jobs and v3_jobs: every job the hook's predictors "
            "and rank read, so an idle user keeps their soft walltimes), in batches of at "
            "most --batch-rows rows, each its own short transaction: the hook and the "
            "ingester never wait more than one batch on it. With "
            "history_keep_days 0 (the default) the whole history is kept and nothing is "
            "done. The ingest checkpoints stay, so deleted jobs are never ingested again. "
            "Run it with a role that may DELETE (the pruner's of 'softwalltime db grant'). "
            "--json prints one object: "
            + ", ".join(f"{k} ({v})" for k, v in JSON_KEYS)
            + ". Example: softwalltime db prune --keep-days 730 --dry-run"
        ),
    )
    prune.add_argument(
        "--keep-days",
        type=_bounded(1, MAX_KEEP_DAYS),
        metavar="DAYS",
        help="keep this many days of history, this run (default: history_keep_days)",
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="count what would be deleted; delete nothing"
    )
    prune.add_argument(
        "--batch-rows",
        type=_bounded(1, MAX_BATCH_ROWS),
        default=DEFAULT_BATCH_ROWS,
        metavar="N",
        help=f"rows deleted per transaction (default %(default)s, at most {MAX_BATCH_ROWS})",
    )
    prune.add_argument("--json", action="store_true", help="print JSON instead of text")
    prune.set_defaults(func=run)


def _bounded(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high``."""
    at_least = whole_number(low)

    def parse(text: str) -> int:
        value = at_least(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}, got {value}")
        return value

    return parse


def run(args: argparse.Namespace, settings: Settings) -> int:
    """``softwalltime db prune``: 0 when done (or nothing to do)."""
    keep_days = args.keep_days or settings.history_keep_days
    from ..db import retention

    if not keep_days:
        if args.json:
            nothing: dict[str, Any] = dict.fromkeys((k for k, _ in JSON_KEYS), 0)
            nothing.update(cutoff=None, dry_run=args.dry_run, seconds=0.0)
            nothing.update(keep_jobs=retention.keep_jobs_for(settings))
            print(json.dumps(nothing, indent=2))
        else:
            print("softwalltime db prune: history_keep_days is 0: the whole history is kept")
        return 0
    from ..db import engine as db

    keep_jobs = retention.keep_jobs_for(settings)
    dsn = require_dsn(settings)
    engine = db.make_engine(dsn)
    try:
        db.connect(engine, dsn).close()  # a connection failure in one line
        if args.dry_run:
            done = retention.dry_run(engine, keep_days, keep_jobs=keep_jobs)
        else:
            progress = _progress if sys.stderr.isatty() else None
            done = retention.prune(
                engine, keep_days, args.batch_rows, on_batch=progress, keep_jobs=keep_jobs
            )
            if progress and done.batches:
                print(file=sys.stderr)  # end the progress line
    finally:
        engine.dispose()
    if args.json:
        values = done._asdict()
        values["cutoff"] = done.cutoff.isoformat()
        values["seconds"] = round(done.seconds, 3)
        print(json.dumps({k: values[k] for k, _ in JSON_KEYS}, indent=2))
    else:
        print(render(done))
    return 0


def _progress(jobs: int, reruns: int) -> None:
    print(f"\rdeleted {jobs:,} finished jobs, {reruns:,} reruns", end="", file=sys.stderr)


def render(done: Any) -> str:
    """One line: what went (or would go), before when, how long it took."""
    verb = "would delete" if done.dry_run else "deleted"
    line = (
        f"softwalltime db prune: {verb} {done.finished_jobs:,} finished jobs and"
        f" {done.job_reruns:,} reruns that ended before {done.cutoff:%Y-%m-%d %H:%M:%S %Z}"
        f" (history_keep_days {done.keep_days}; each user's newest {done.keep_jobs} kept)"
    )
    if done.dry_run:
        return line + "; nothing deleted (--dry-run)"
    return line + f" in {done.batches} batch(es), {done.seconds:.1f} s"
