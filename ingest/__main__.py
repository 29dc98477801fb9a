"""``softwalltime-ingest`` (and ``python -m softwalltime_ingest``): the cron entry point.

Same options as ``softwalltime ingest``, plus the global ``--dsn``, ``--config`` and
``--debug``. Exit status: 0 done (or another run holds the lock), 1 database or files
unusable, 2 usage error.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import List, Optional

from softwalltime import __version__
from softwalltime.config import load_settings
from softwalltime.errors import SoftwalltimeError

from .cli import DESCRIPTION, add_arguments, handle


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="softwalltime-ingest", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version="softwalltime " + __version__)
    parser.add_argument("--dsn", help="PostgreSQL libpq DSN or SQLAlchemy URL (SOFTWALLTIME_DSN)")
    parser.add_argument("--config", metavar="FILE", help="JSON config file (SOFTWALLTIME_CONFIG)")
    parser.add_argument("--debug", action="store_true", help="debug logging; tracebacks on errors")
    add_arguments(parser)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``softwalltime-ingest`` console script."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        settings = load_settings(args.config, overrides={"dsn": args.dsn})
        return handle(args, settings)
    except SoftwalltimeError as err:
        if args.debug:
            raise
        print(f"softwalltime-ingest: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("softwalltime-ingest: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
