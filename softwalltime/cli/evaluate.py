"""``softwalltime evaluate``: replay a workload through the predictors and report accuracy."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import TYPE_CHECKING, Any, List, Tuple

from ..core import registry
from ..core.config import Settings, require_dsn
from ..errors import ConfigError, ParseError, SoftwalltimeError
from ..units import parse_size
from .argtypes import name_list
from .calibrate import TARGET_HELP, target_option
from .helptext import man_only, more

if TYPE_CHECKING:
    from ..replay.trace import Trace

log = logging.getLogger(__name__)

# The same values as softwalltime.replay.evaluate.MOMENTS; the replay code is imported only when
# the command runs, so that building the parser (every softwalltime invocation) stays cheap.
MOMENTS = ("submit", "start")
# softwalltime.replay.trace_readers.DEFAULT_MAX_INPUT_BYTES, as the option's help says it.
MAX_INPUT_DEFAULT = "1gb"


def input_size(text: str) -> int:
    """An argparse type: a size such as ``4gb`` or ``512mb`` (binary units), at least 1 byte."""
    try:
        value = parse_size(text)
    except ParseError as err:
        raise argparse.ArgumentTypeError(f"{err} (e.g. 4gb, 512mb)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte, got {text!r}")
    return value


def add_input_size(p: argparse.ArgumentParser) -> None:
    """Add ``--max-input-size`` (``evaluate`` and ``simulate``)."""
    p.add_argument(
        "--max-input-size",
        type=input_size,
        default=input_size(MAX_INPUT_DEFAULT),
        metavar="SIZE",
        help=f"read at most SIZE of all SOURCEs, decompressed (default: {MAX_INPUT_DEFAULT});"
        " a line at most 16mb",
    )


DESCRIPTION = """\
Replay finished jobs through the soft-walltime predictors and report, for each predictor
and for the users' own walltimes: jobs evaluated, % underestimated (soft < runtime),
% badly underestimated (soft < runtime - 30 min), mean and median accuracy
(min(runtime/soft, soft/runtime); 1 when both are 0) and mean absolute error in hours,
over all jobs and per runtime class: short (<= 2 h), medium (<= 24 h), long (> 24 h).
""" + more("softwalltime-evaluate", "evaluate.md")

# The man page's (helptext.man_only): the sources, the replay's semantics, calibrated.
METHOD = """\
SOURCE is an SWF trace (plain or .gz; standard 18 columns, or Alea's 21 columns with
absolute submit times), a PBS accounting file, or a directory of them. All SOURCEs are
replayed as one workload (users of different SWF files are kept apart). --db reads the
finished_jobs table instead.

Replay semantics: a job's prediction is made at its submit time (--moment submit) or its
start time (--moment start) from the same user's jobs that had ended at or before that
instant; at equal times ends come first, and among equal end times the job later in the
trace (for PBS logs and --db: submitted later) counts as more recent. A job is never in its
own history. Only jobs with a requested walltime > 0 and a known run time
>= 0 (and a known user and times) are evaluated or used as history; the others are skipped
and counted. So are jobs with a value beyond the plausible bounds: submit time before 1970
or after 2099, wait, run or requested time < 0 or > 10 years, processors < 0 or > 10^8.
A user without history gets soft = walltime. Predictor parameters (v1_jobs,
v3_jobs, reserve_s, target_under_pct ...) come from the configuration, as in the hook.

The predictor 'calibrated' runs the hook's code with its site calibration table updated at
every job end, in event order, from finished jobs only; the report gives its achieved
under-estimate rate beside the target; --target-under-pct v3 (or the setting
target_under_pct = v3) sets the target to v3's under-estimates on the same jobs, computed
alongside. --plot adds tradeoff.png:
% under-estimated vs mean accuracy of every predictor, with 'calibrated' swept over
targets of 2-25 %.
"""

EPILOG = """\
examples:
  softwalltime evaluate CERIT-SC-wagap-2013.alea.swf.gz   (an SWF trace; this one is bundled
      in softwalltime/data/ of the source tree)
  softwalltime evaluate --predictors v3 --moment start --json /var/spool/pbs/server_priv/accounting
  softwalltime --dsn postgresql://pbs@db/pbs evaluate --db --plot /tmp/softwalltime-plots
"""


def register(sub: Any) -> None:
    """Add the ``evaluate`` command."""
    p = sub.add_parser(
        "evaluate",
        help="replay SWF traces, PBS accounting logs or the history table through the predictors",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    man_only(p, METHOD, EPILOG)
    p.add_argument(
        "sources", nargs="*", metavar="SOURCE", help="SWF trace, PBS accounting file or directory"
    )
    p.add_argument(
        "--db", action="store_true", help="replay the finished_jobs table (needs --dsn or config)"
    )
    p.add_argument(
        "--predictors",
        default=",".join(registry.DEFAULT_EVALUATED),
        metavar="LIST",
        help="comma-separated predictors to replay (default: %(default)s; also {})".format(
            ",".join(p for p in registry.PREDICTORS if p not in registry.DEFAULT_EVALUATED)
        ),
    )
    p.add_argument(
        "--moment",
        choices=MOMENTS,
        default="submit",
        help="when each prediction is made (default: %(default)s)",
    )
    p.add_argument(
        "--target-under-pct",
        metavar="PCT|v3",
        help="predictors calibrated and learned: " + TARGET_HELP,
    )
    p.add_argument(
        "--start-from-submit",
        action="store_true",
        help="SWF jobs whose wait time is unknown (-1) start at their submit time instead of"
        " being skipped (LLNL traces record no wait at all)",
    )
    p.add_argument(
        "--prior",
        action="store_true",
        help="predictors calibrated and learned: start from the shipped prior table, as"
        " 'softwalltime calibrate' does (learned on CERIT-SC, HPC2N and CTC-SP2: in-sample"
        " there)",
    )
    add_input_size(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument(
        "--plot", metavar="DIR", help="also write PNG figures into DIR (needs matplotlib)"
    )
    p.set_defaults(func=run_evaluate)


def _read_db(settings: Settings) -> Trace:
    from ..db import engine as db
    from ..replay.history import read_finished_jobs

    dsn = require_dsn(settings)
    engine = db.make_engine(dsn)
    try:
        with db.connect(engine, dsn) as conn:
            return read_finished_jobs(conn, source="database " + db.dsn_target(dsn))
    finally:
        engine.dispose()


class ReplayError(SoftwalltimeError):
    """The replay has nothing to report."""


def _nothing_evaluated(source: str, report: dict[str, Any], start_from_submit: bool) -> str:
    """Why no job could be evaluated, and what might help."""
    from ..replay.trace import SKIP_TIMES

    reasons = report["skipped_by_reason"]
    why = ", ".join(f"{reason}: {n:,}" for reason, n in sorted(reasons.items())) or "no jobs"
    text = f"no job of {source} can be evaluated ({why}); nothing written"
    if reasons.get(SKIP_TIMES) and not start_from_submit:
        text += (
            "; if the trace records no wait time (-1, as LLNL's do), --start-from-submit"
            " replays such jobs with their submit time as start"
        )
    return text


def check_plot_dir(directory: str) -> None:
    """Before a long run: matplotlib is there, and ``directory`` exists and is writable or
    can be created (its nearest existing parent is a writable directory).

    :raises SoftwalltimeError: either is not so (one line saying what to do)
    """
    from ..replay.plots import matplotlib_classes

    matplotlib_classes()
    path = os.path.abspath(directory)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        raise SoftwalltimeError(f"--plot {directory}: {path} is not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        raise SoftwalltimeError(f"--plot {directory}: {path} is not writable")


def _priors(prior: bool, predictors: List[str]) -> Tuple[Any, Any]:
    """The starting tables of calibrated and learned: the shipped priors with ``--prior``."""
    if not prior:
        return None, None
    from ..replay.prior import PriorError, load_learned_prior, load_prior

    try:
        start = load_prior() if "calibrated" in predictors else None
        learned_start = load_learned_prior() if "learned" in predictors else None
    except PriorError as err:
        raise ConfigError(f"--prior: {err}") from err
    return start, learned_start


def run_evaluate(args: argparse.Namespace, settings: Settings) -> int:
    """Handle ``softwalltime evaluate``; see DESCRIPTION for what it does.

    :raises ConfigError: bad arguments (no source, unknown predictor)
    :raises ParseError: a source cannot be read
    :raises DatabaseError: ``--db`` and the database cannot be read
    """
    from .. import api
    from ..core.predict import PredictorParams
    from ..replay.evaluate import PREDICTORS as REPLAYED

    predictors = name_list("--predictors", args.predictors, REPLAYED)
    target = target_option(args.target_under_pct, settings.target_under_pct)
    if args.db and args.sources:
        raise ConfigError("give SOURCE files or --db, not both")
    if not args.db and not args.sources:
        raise ConfigError("nothing to evaluate: give SOURCE files/directories, or --db")
    if args.plot:
        check_plot_dir(args.plot)  # before the work, not after it
    priors = _priors(args.prior, predictors)
    started = time.perf_counter()
    if args.db:
        trace = _read_db(settings)
    else:
        from ..replay.trace_readers import InputLimits, read_sources

        trace = read_sources(
            args.sources,
            server=settings.server,
            start_from_submit=args.start_from_submit,
            limits=InputLimits(args.max_input_size),
        )
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    # the jobs go as they are turned into columns (peak memory)
    result = api.evaluate(
        trace,
        predictors,
        params=PredictorParams.from_settings(settings),
        target_under_pct=target,
        moment=args.moment,
        priors=priors,
        consume=True,
    )
    report = result.as_json()
    log.debug(
        "read %.2f s, replay %.2f s (%s jobs)",
        read_s,
        time.perf_counter() - started,
        report["jobs"],
    )
    if not report["jobs"]:
        raise ReplayError(_nothing_evaluated(trace.source, report, args.start_from_submit))
    if args.plot:
        from ..replay.evaluate import sweep_calibrated
        from ..replay.plots import write_plots

        # File names, not paths: the title must fit above the plots.
        title = trace.source
        if args.sources:
            title = ", ".join(os.path.basename(p.rstrip("/")) or p for p in args.sources)
        if len(title) > 100:
            title = title[:97] + "..."
        cols, start = result.columns, priors[0]
        sweep = sweep_calibrated(cols, start=start) if "calibrated" in predictors else None
        for path in write_plots(result.replay, args.plot, title=title, sweep=sweep):
            log.info("wrote %s", path)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(result.format())
    return 0
