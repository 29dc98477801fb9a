"""``softwalltime ingest``: the subcommand (registered through the ``softwalltime.commands``
entry point) and the option set shared with the ``softwalltime-ingest`` console script."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from softwalltime.config import Settings, require_dsn

from .files import default_directory
from .run import DEFAULT_BATCH_SIZE, Options, run

DESCRIPTION = (
    "Store finished PBS jobs from accounting logs in the history tables. Reads only new "
    "complete lines (a checkpoint per file, committed with the rows), so it can run from "
    "cron every few minutes; a second concurrent run exits 0 without doing anything. "
    "Examples: softwalltime ingest    (the accounting directory) | "
    "softwalltime ingest --server pbs01 /archive/2024*.gz    (backfill archives)"
)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ingest options, for both front ends."""
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="accounting files, plain or .gz (default: every YYYYMMDD[.gz] file in --dir)",
    )
    parser.add_argument(
        "--dir",
        metavar="DIR",
        help="accounting directory (default: accounting_dir setting, else "
        "$PBS_HOME/server_priv/accounting with PBS_HOME from the environment or /etc/pbs.conf)",
    )
    parser.add_argument(
        "--server",
        metavar="NAME",
        help="PBS server the logs belong to (default: server setting, else each job id's "
        "suffix after the first '.')",
    )
    parser.add_argument(
        "--batch-size",
        type=_positive,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help="stored records per transaction (default: %(default)s)",
    )
    parser.add_argument(
        "--workers",
        type=_non_negative,
        default=0,
        metavar="N",
        help="parse in N worker processes when there is much to read (backfills on a host "
        "with idle cores; default 0: parse in this process)",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show bytes and records per second on stderr (default: only on a terminal)",
    )


def register(subparsers: Any) -> None:
    """Add ``ingest`` to the ``softwalltime`` command line."""
    parser = subparsers.add_parser(
        "ingest", help="load PBS accounting logs into the job history", description=DESCRIPTION
    )
    add_arguments(parser)
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace, settings: Settings) -> int:
    """Run one ingest and print its summary.

    :returns: 0 when done (also when another ingester holds the lock), 1 when some files
        could not be read (the others were ingested)
    :raises DatabaseError: the database cannot be used
    :raises FileError: the accounting directory cannot be listed
    """
    dsn = require_dsn(settings)
    directory = args.dir or settings.accounting_dir or default_directory(os.environ)
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    opts = Options(
        dsn=dsn,
        paths=tuple(args.files),
        directory=directory,
        server=args.server or settings.server,
        batch_size=args.batch_size,
        progress=progress,
        workers=args.workers,
    )
    summary = run(opts)
    print(summary.render(), flush=True)
    if summary.failed:
        print(
            f"softwalltime ingest: {len(summary.failed)} file(s) could not be read (see above)",
            file=sys.stderr,
        )
        return 1
    return 0
