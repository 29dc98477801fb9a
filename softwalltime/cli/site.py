"""``softwalltime site export``: the site file of this PBS site (issue 46; the library:
pbsserver/site.py)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import outfile, site_file
from ..core.config import Settings
from ..pbsserver import site as lib
from .status import pbs_location


def register(sub: Any) -> None:
    """Add the ``site`` command group."""
    parser = sub.add_parser(
        "site",
        help="write this PBS site's site file (vnodes, queues, limits, scheduler settings)",
        description=(
            "The site file the simulations take with --site: the vnodes (pbsnodes -a -F "
            "json), the queues and the server's limits (qmgr -c 'print server'), the "
            "scheduler's sort, backfill_depth and sched_config settings (qmgr -c 'print "
            "sched', sched_config) and the fairshare tree (resource_group). Run on the PBS "
            "server host, as a user who may read sched_priv."
        ),
    )
    ssub = parser.add_subparsers(title="site commands", metavar="COMMAND")
    parser.set_defaults(func=lambda args, settings: _usage(parser))
    export = ssub.add_parser(
        "export",
        help="read the site from PBS and write its site file (JSON)",
        description=(
            "Read the site from PBS and write one JSON site file. Example: "
            "softwalltime site export -o site.json; then softwalltime simulate --site "
            "site.json ..."
        ),
    )
    export.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    export.set_defaults(func=run_export)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def run_export(args: argparse.Namespace, settings: Settings) -> int:
    """Write the site file; notes (prime-time settings) go to stderr."""
    found = lib.gather(pbs_location(settings))
    for note in found.notes:
        print(f"note: {note}", file=sys.stderr)
    text = site_file.dump(found.site)
    if args.output:
        outfile.write_text(args.output, text)
        site = found.site
        print(
            f"wrote {args.output}: {len(site.vnodes)} vnodes ({site.ncpus} cpus),"
            f" {len(site.queues)} queues",
            file=sys.stderr,
        )
    else:
        sys.stdout.write(text)
    return 0


def add_site_option(p: Any, what: str = "one pool of its cpus") -> None:
    """``--site FILE`` (simulate, wait, eval-start); ``what``: what runs on it here."""
    p.add_argument("--site", metavar="FILE", help=f"site export's file: {what}")


SITE_MODEL = "site model"  # the policy simulations and the fit run on the vnodes
POOL_ONLY = "pool"  # one pool of the site's cpus (EASY, wait, eval-start)


def load_site(args: argparse.Namespace, how: str = POOL_ONLY, why: str = "") -> Any:
    """The ``--site`` file (None without it), and the line that says how it is modelled
    (stdout, or stderr with --json): :data:`SITE_MODEL`, or :data:`POOL_ONLY` with ``why``.

    :raises ParseError: not a site file
    """
    if not getattr(args, "site", None):
        return None
    site = site_file.load(args.site)
    head = f"site {site.name}: {len(site.vnodes)} vnodes, {len(site.queues)} queues, "
    if how == SITE_MODEL:
        line = head + "modelled as a site model: its vnodes, chunks, queues and limits"
    else:
        line = head + f"modelled as one pool of {site.ncpus} cpus ({why})"
    print(line, file=sys.stderr if getattr(args, "json", False) else sys.stdout)
    return site
