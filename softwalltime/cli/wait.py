"""``softwalltime eval-wait``: queue-wait predictors replayed over traces, as the
PQStar paper evaluates them.

Named ``eval-wait``, not ``evaluate-wait`` (issue 20's name): argparse measures subcommand
names two columns short, so a name longer than 11 characters pushes its help line under
it in ``softwalltime --help`` (tests/test_cli.py expects one line per command).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import ConfigError
from ..hookpath.config import Settings
from .evaluate import add_input_size, check_plot_dir

DESCRIPTION = """\
Replay SWF traces or PBS accounting logs through the queue-wait predictors of Kumar and
Vadhiyar, "Identifying Quick Starters" (PQStar), and the baselines they compare with:
IBL (instance-based learning, k nearest neighbours), a QBETS-style quantile bound and a
log-uniform model.

Each SOURCE is evaluated on its own (a directory of PBS accounting files is one source).
As in the paper: the targets are the 10,001st to the 50,000th job in submit order (or to the
end), the history of a target is every job submitted before it, and a job's wait is used
only once it has started. The queue and the running jobs at each instant are rebuilt from
submit, start and end times, without simulating a scheduler.

For each method: % of quick starters (wait <= 1 h) marked (predicted <= 1 h), % of all
targets misguided (predicted <= 1 h, waited longer) and the share of those that waited
< 4 h, RMS error in hours, normalized RMS error (errors divided by the actual wait, at
least 60 s), mean PPE_rt (|predicted - actual wait| / response time, a ratio) and % good
predictions (same slab: <= 1 h, 1-3 h, 3-6 h, 6-12 h, 12-24 h, 1-2 d, > 2 d; or PPE_rt <=
10 %). Both estimated run times are reported: the users' walltimes and the soft walltimes
of the v3 predictor (replayed at submit, as 'softwalltime evaluate' does).
"""

EPILOG = """\
examples:
  softwalltime eval-wait CTC-SP2-1996-3.1-cln.swf.gz HPC2N-2002-2.2-cln.swf.gz
  softwalltime eval-wait --ert soft --json /var/spool/pbs/server_priv/accounting
"""


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _duration(text: str) -> int:
    from ..errors import ParseError
    from ..units import parse_duration

    try:
        value = parse_duration(text)
    except ParseError as err:
        raise argparse.ArgumentTypeError(f"{err} (e.g. 3600, 01:00:00)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 s, got {text!r}")
    return value


def register(sub: Any) -> None:
    """Add the ``eval-wait`` command."""
    p = sub.add_parser(
        "eval-wait",
        help="replay traces through the queue-wait predictors (PQStar, IBL, QBETS-style)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("sources", nargs="+", metavar="SOURCE", help="SWF trace or PBS accounting")
    p.add_argument(
        "--ert",
        choices=("walltime", "soft", "both"),
        default="both",
        help="estimated run time: the users' walltimes, v3 soft walltimes, or both"
        " (default: %(default)s)",
    )
    p.add_argument(
        "--quick",
        type=_duration,
        default=3600,
        metavar="DURATION",
        help="quick-starter threshold and the bound PQStar gives (default: 3600 s)",
    )
    p.add_argument(
        "--first", type=_positive, default=10_001, metavar="N", help="first target job (10001)"
    )
    p.add_argument(
        "--targets", type=_positive, default=40_000, metavar="N", help="target jobs (40000)"
    )
    p.add_argument(
        "--machine-procs",
        type=_positive,
        metavar="N",
        help="the machine's processors (default: the SWF header's MaxProcs, else the most"
        " in use at once)",
    )
    add_input_size(p)
    p.add_argument("--json", action="store_true", help="print JSON (one object per SOURCE)")
    p.add_argument(
        "--plot",
        metavar="DIR",
        help="also write the paper's Figures 3 and 4 (PNG, needs matplotlib) into"
        " DIR/<source>-<ert>/",
    )
    p.set_defaults(func=run_evaluate_wait)


def run_evaluate_wait(args: argparse.Namespace, settings: Settings) -> int:
    """Handle ``softwalltime eval-wait``; see DESCRIPTION.

    :raises ParseError: a source cannot be read
    :raises ConfigError: no source has enough jobs for a target
    """
    from ..hookpath.predict import PredictorParams
    from ..replay.traces import InputLimits
    from ..wait.evaluate import evaluate_sources, format_report
    from ..wait.pqstar import WaitParams

    if args.plot:
        check_plot_dir(args.plot)  # before the work, not after it
    erts = ("walltime", "soft") if args.ert == "both" else (args.ert,)
    params = WaitParams(
        quick_s=args.quick,
        first_target=args.first - 1,
        last_target=args.first - 1 + args.targets,
    )
    reports = []
    for source in args.sources:
        report = evaluate_sources(
            [source],
            args.machine_procs,
            params,
            erts,
            PredictorParams.from_settings(settings),
            InputLimits(args.max_input_size),
            settings.server,
            args.plot,
        )
        if not report["targets"]:
            raise ConfigError(
                f"{source}: {report['jobs']:,} usable jobs, none from job {args.first:,} on;"
                " nothing to predict (--first sets the first target)"
            )
        reports.append(report)
        if not args.json:
            print(format_report(report))
            print()
            sys.stdout.flush()
    if args.json:
        print(json.dumps(reports if len(reports) > 1 else reports[0], indent=2))
    return 0
