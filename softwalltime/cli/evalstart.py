"""``softwalltime eval-start``: start-time predictions measured on traces (issue 35)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List

from ..core import registry
from ..core.config import Settings
from ..errors import ConfigError
from .argtypes import whole_number
from .evaluate import add_input_size
from .site import SITE_MODEL, add_site_option, load_site

DESCRIPTION = """\
Measure start-time predictions on SWF traces or PBS accounting logs. The ground truth is
PBS's scheduler model (as 'softwalltime simulate --policies' runs it: the --policy sort
and backfilling, equivalence classes, backfilling by the soft walltime) run on the whole
trace with the real run times and the --estimates soft walltimes. At the submit of each
target job (the --first-th job in submit order and the --targets after it, thinned to at
most --predictions), the queue and running jobs of that run and the jobs ended by then are
all a predictor knows:

  PBS     PBS's own method (its calendar, estimated.start_time): every job runs exactly
          its soft walltime
  median  one forward run of the same scheduler in which every job runs the median of
          what its user's similar jobs ran
  P50     the median start of --samples forward runs with run times drawn from what the
          user's similar jobs ran; P90 the upper bound, widened by a correction learned
          from the predictions whose job has started, per wait class (predicted P90
          wait under 10 min, or not)
  PQStar  'softwalltime eval-wait''s PQStar on the same jobs (the ground truth's starts):
          its bound (1 h) for a quick starter, else IBL's wait
  IBL     IBL's predicted wait (instance-based learning)

Reported: the share of targets whose start lies within 1 min, 10 min and 1 h of each
method's prediction, for all targets and for those that waited at least 10 minutes
(immediate starts are easy), and the share of starts at or before the P90.
"""

EPILOG = """\
examples:
  softwalltime eval-start KTH-SP2-1996-2.1-cln.swf.gz
  softwalltime eval-start --policy sjf-bf1 --estimates users --json CTC-SP2-1996-3.1-cln.swf.gz
"""

_positive = whole_number(1)


def _capped(limit: int, what: str) -> Any:
    def check(text: str) -> int:
        value = int(_positive(text))
        if value > limit:
            raise argparse.ArgumentTypeError(f"at most {limit:,} {what}, got {value:,}")
        return value

    return check


def register(sub: Any) -> None:
    """Add the ``eval-start`` command."""
    from ..wait.starteval import MAX_PREDICTIONS
    from ..wait.starttime import DEFAULT_SAMPLES

    p = sub.add_parser(
        "eval-start",
        help="measure start-time predictions (P50/P90, PBS's estimate) on traces",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("sources", nargs="+", metavar="SOURCE", help="SWF trace or PBS accounting")
    p.add_argument(
        "--policy",
        default="fcfs-bf1",
        metavar="POLICY",
        help="the site's sort and backfilling, as simulate --policies names them"
        " (default: %(default)s; a sort reading the rank is not evaluated)",
    )
    p.add_argument(
        "--estimates",
        default="v3",
        choices=[s for s in registry.SIMULATED if s != registry.PERFECT],
        help="the soft walltimes the site runs with (default: %(default)s)",
    )
    p.add_argument("--first", type=_capped(10**9, "jobs"), default=10_001, metavar="N")
    p.add_argument("--targets", type=_capped(10**9, "jobs"), default=40_000, metavar="N")
    p.add_argument(
        "--predictions",
        type=_capped(MAX_PREDICTIONS, "predictions"),
        default=2000,
        metavar="N",
        help="at most N targets, evenly spread (default: %(default)s)",
    )
    p.add_argument(
        "--samples",
        type=_capped(1000, "samples"),
        default=DEFAULT_SAMPLES,
        metavar="N",
        help="forward runs per prediction (default: %(default)s)",
    )
    p.add_argument("--seed", type=_capped(2**31, "as the seed"), default=1, metavar="N")
    p.add_argument(
        "--procs", type=_capped(10**8, "processors"), metavar="N", help="the machine's size"
    )
    add_input_size(p)
    add_site_option(p, "the ground truth and the forward runs run on its vnodes, queues, limits")
    p.add_argument("--json", action="store_true", help="print JSON (one object per SOURCE)")
    p.set_defaults(func=run_eval_start)


def run_eval_start(args: argparse.Namespace, settings: Settings) -> int:
    """Handle ``softwalltime eval-start``; see DESCRIPTION.

    :raises ConfigError: a bad policy, no machine size, or no target job
    """
    from .. import api
    from ..replay import pbsched

    try:
        policy = pbsched.parse_policy(args.policy)
    except ValueError as err:
        raise ConfigError(f"--policy: {err}") from None
    if pbsched.sort_formula(policy.job_sort_formula).reads_rank:
        raise ConfigError("--policy: a sort reading softwalltime_rank is not evaluated here")
    if pbsched.reads_fairshare(policy):
        raise ConfigError("--policy: fairshare is modelled by simulate only, not eval-start")
    options = api.StartOptions(
        args.policy,
        args.estimates,
        args.first,
        args.targets,
        args.predictions,
        args.samples,
        args.seed,
    )
    site = load_site(args, SITE_MODEL)
    reports: List[Dict[str, Any]] = []
    for path in args.sources:
        found = api.start_times(
            path,
            options,
            procs=args.procs,
            max_input_bytes=args.max_input_size,
            progress=_progress(),
            site=site,
        )
        reports.append(found.as_json())
        if not args.json:
            print(found.format())
            print()
            sys.stdout.flush()
    if args.json:
        print(json.dumps(reports if len(reports) > 1 else reports[0], indent=2))
    return 0


def _progress() -> Any:
    """A progress line on stderr when it is a terminal (nothing under cron)."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        if done == total or done % 50 == 0:
            end = "\n" if done == total else ""
            print(f"\rpredicted {done:,} of {total:,}", end=end, file=sys.stderr, flush=True)

    return show
