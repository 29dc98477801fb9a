"""``softwalltime-ingest`` (and ``python -m softwalltime_ingest``): the cron entry point.

Same options as ``softwalltime ingest``, plus the global ``--dsn``, ``--config`` and
``--debug``. Exit status: 0 done (or another run holds the lock), 1 database or files
unusable, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from softwalltime import cli

from .cli import DESCRIPTION, add_arguments, handle


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="softwalltime-ingest", description=DESCRIPTION)
    cli.add_global_options(parser)
    add_arguments(parser)
    parser.set_defaults(func=handle)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``softwalltime-ingest`` console script."""
    return cli.run(build_parser, argv, "softwalltime-ingest")


if __name__ == "__main__":
    sys.exit(main())
