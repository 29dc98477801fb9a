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
from .argtypes import positive_duration, whole_number
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


_positive = whole_number(1)


WAIT_DESCRIPTION = """\
Predict when a job submitted now would start: PQStar's answer (quick starter, with the
bound, and which history decided), IBL's predicted wait, the QBETS-style bound and the
log-uniform model, as 'softwalltime eval-wait' replays them.

The queued and running jobs are read from the PBS server now (qstat -f -F json: ctime,
stime, Resource_List.ncpus, walltime, soft_walltime; held jobs are not queued), the
finished ones from the database (the most recent --history jobs); the database's lag
(the newest end it knows) is printed. The machine size is --machine-procs, else the
most processors the history had in use at once.
"""


def register(sub: Any) -> None:
    """Add the ``eval-wait`` and ``wait`` commands."""
    _register_wait(sub)
    _register_eval_wait(sub)


def _register_wait(sub: Any) -> None:
    p = sub.add_parser(
        "wait",
        help="predict when a job submitted now would start (PQStar, IBL, QBETS-style)",
        description=WAIT_DESCRIPTION,
        epilog="example:\n  softwalltime wait --ncpus 8 --walltime 04:00:00 --user alice\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--ncpus", type=_positive, required=True, metavar="N", help="processors")
    p.add_argument(
        "--walltime",
        type=positive_duration,
        required=True,
        metavar="DURATION",
        help="e.g. 04:00:00",
    )
    p.add_argument("--user", default="", help="the submitting user (IBL, soft walltime)")
    p.add_argument(
        "--ert",
        choices=("walltime", "soft"),
        default="walltime",
        help="estimated run time of every job: walltime, or soft walltime (v3 for the new"
        " job) (default: %(default)s)",
    )
    p.add_argument(
        "--quick",
        type=positive_duration,
        default=3600,
        metavar="DURATION",
        help="threshold (3600 s)",
    )
    p.add_argument("--machine-procs", type=_positive, metavar="N", help="the machine's processors")
    p.add_argument(
        "--history",
        type=_positive,
        default=10_000,
        metavar="N",
        help="finished jobs used, most recently submitted (default: %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_wait)


def _register_eval_wait(sub: Any) -> None:
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
        type=positive_duration,
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


def _hms(seconds: int) -> str:
    from ..units import format_duration

    return format_duration(max(0, int(seconds)))


def run_wait(args: argparse.Namespace, settings: Settings) -> int:
    """Handle ``softwalltime wait``; see WAIT_DESCRIPTION.

    :raises ConfigError: no database configured
    :raises DatabaseError: the history cannot be read
    :raises PbsError: qstat cannot run or printed no JSON
    """
    import time

    from ..db import engine as db
    from ..hookpath.config import require_dsn
    from ..hookpath.predict import PredictorParams, predict
    from ..pbsserver.commands import Pbs
    from ..replay.history import read_finished_jobs
    from ..wait.live import jobs_from_qstat, live_history
    from ..wait.pqstar import IBL, WaitParams, predict_one
    from ..wait.workload import WaitJob, build

    dsn = require_dsn(settings)
    engine = db.make_engine(dsn)
    try:
        with db.connect(engine, dsn) as conn:
            source = "database " + db.dsn_target(dsn)
            trace = read_finished_jobs(conn, source=source, latest=args.history)
    finally:
        engine.dispose()
    qstat = Pbs.from_settings(settings).jobs()
    now = int(time.time())
    params = PredictorParams.from_settings(settings)
    work = build(trace, args.ert, args.machine_procs, params)
    current, left = jobs_from_qstat(qstat, args.ert)
    history = live_history(work.jobs, current, now, args.history)
    ert_s = args.walltime
    if args.ert == "soft":
        mine = sorted(
            (j for j in trace.jobs if j.user == args.user and j.end_s is not None),
            key=lambda j: -(j.end_s or 0),
        )
        rows = [(int(j.runtime_s or 0), j.walltime_s) for j in mine]
        ert_s = predict("v3", args.walltime, rows, params).soft_walltime_s or args.walltime
    machine = args.machine_procs or work.machine_procs
    answer = predict_one(
        history,
        WaitJob(now, 0, 0, args.ncpus, ert_s, args.user),
        machine,
        WaitParams(quick_s=args.quick),
    )
    newest = max((j.end_s for j in trace.jobs if j.end_s is not None), default=None)
    queued = sum(1 for j in current if j.start_s > now)
    out = {
        "quick_starter": answer.rule != IBL,
        "decided_by": answer.rule,
        "predicted_wait_s": answer.predicted_s["pqstar"],
        "predicted_s": answer.predicted_s,
        "near_history_jobs": answer.near_jobs,
        "estimated_run_time_s": ert_s,
        "machine_procs": machine,
        "queued": queued,
        "running": len(current) - queued,
        "not_counted": left,
        "finished_jobs": len(work.jobs),
        "database_newest_end_s_ago": None if newest is None else now - newest,
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    p = answer.predicted_s
    if out["quick_starter"]:
        print(f"quick starter: yes, starts within {_hms(args.quick)} ({answer.rule}-term history)")
    else:
        print(f"quick starter: no; predicted wait {_hms(p['pqstar'])} (IBL)")
    print(
        f"other methods: IBL {_hms(p['ibl'])}, QBETS-style bound {_hms(p['qbets'])},"
        f" log-uniform {_hms(p['loguniform'])}"
    )
    print(
        f"state: {queued} queued, {out['running']} running (qstat now); machine {machine}"
        f" processors; estimated run time {_hms(ert_s)} ({args.ert})"
    )
    lag = out["database_newest_end_s_ago"]
    print(
        f"history: {len(work.jobs):,} finished jobs"
        + ("" if lag is None else f", the newest ended {_hms(lag)} ago (the database's lag)")
    )
    return 0
