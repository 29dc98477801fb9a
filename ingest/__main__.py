"""``softwalltime-ingest`` (and ``python -m softwalltime_ingest``): the cron entry point.

Same options as ``softwalltime ingest``, plus the global ``--dsn``, ``--config``,
``--quiet`` (errors only: what cron runs), ``--verbose`` and ``--debug``. Exit status: 0
done (or another run holds the lock), 1 database or files unusable, 2 usage error, 130
interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

PROG = "softwalltime-ingest"


def build_parser() -> argparse.ArgumentParser:
    from softwalltime import cli

    from .cli import DESCRIPTION, add_arguments, handle

    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
    cli.add_global_options(parser)
    add_arguments(parser)
    parser.set_defaults(func=handle)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``softwalltime-ingest`` console script.

    The ingester's modules (psycopg2, the parser, the settings: a fifth of a second) are
    imported in here, not when this module is: a Ctrl-C while they load is then the one
    line and exit 130 of a Ctrl-C later, not a traceback.
    """
    try:
        from softwalltime import cli

        return cli.run(build_parser, argv, PROG)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
