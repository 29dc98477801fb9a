"""``softwalltime eval-wait``: queue-wait predictors replayed over traces, as the
PQStar paper evaluates them.

Named ``eval-wait``, not ``evaluate-wait`` (issue 20's name): argparse measures subcommand
names two columns short, so a name longer than 11 characters pushes its help line under
it in ``softwalltime --help`` (tests/test_cli.py expects one line per command).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from ..core.config import Settings
from ..errors import ConfigError, DatabaseError
from .argtypes import backfill_fuzzy, positive_duration, whole_number
from .evaluate import add_input_size, check_plot_dir
from .helptext import man_only, more
from .site import SITE_MODEL, add_site_option, load_site

DESCRIPTION = """\
Replay SWF traces or PBS accounting logs through the queue-wait predictors of Kumar and
Vadhiyar, "Identifying Quick Starters" (PQStar), and the baselines they compare with:
IBL (instance-based learning, k nearest neighbours), a QBETS-style quantile bound and a
log-uniform model; and PQStar+IBL (PQStar checked by IBL where they disagree strongly; not in
the paper).

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


def _at_most(parse: Any, limit: int, what: str) -> Any:
    """An argparse type: ``parse``'s value, at most ``limit``."""

    def check(text: str) -> int:
        value = int(parse(text))
        if value > limit:
            raise argparse.ArgumentTypeError(f"at most {limit:,} {what}, got {value:,}")
        return value

    return check


# Caps of what a user chooses: PBS's own count bound, a history read in about a second per
# prediction x 100, and a publish run shorter than an hour (cron starts one every 5 min).
_procs = _at_most(_positive, 10**8, "processors")
_history = _at_most(_positive, 1_000_000, "jobs")
_budget = _at_most(positive_duration, 3600, "seconds")
# A job's walltime: at most 10 years, as predict's --walltime. A quick-starter threshold
# and a lag: at most a year. eval-wait's job numbers: at most 10^9 (no trace is longer).
_walltime = _at_most(positive_duration, 10 * 366 * 86400, "seconds")
_year = _at_most(positive_duration, 366 * 86400, "seconds")
_jobs = _at_most(_positive, 10**9, "jobs")
# The database's lag (the age of the newest record it holds) past which wait warns, and
# past which it refuses to answer (--warn-lag, --max-lag).
WARN_LAG_S = 3600
MAX_LAG_S = 24 * 3600


WAIT_DESCRIPTION = """\
Predict when a job starts: a queued job (JOBID), or one submitted now (--ncpus and
--walltime). PQStar's answer (quick starter, with the bound, and which history decided),
IBL's predicted wait, the QBETS-style bound and the log-uniform model, as 'softwalltime
eval-wait' replays them. A queued job is predicted as if submitted now (the wait from
now), with every other job as history.
""" + more("softwalltime-wait", "wait.md")

# The man page's (helptext.man_only): where the jobs come from, --publish, no database.
WAIT_MODEL = """\
The queued and running jobs come from the database (--source db, the default: live_jobs,
which the ingester keeps from the Q, S, R and D records, read in one snapshot with the
finished jobs, so no job is missing or counted twice), or from the PBS server now
(--source qstat: qstat -f -F json; held jobs are not queued). The finished ones come from
the database (the most recent --history jobs). The database's lag behind the server (the
age of the newest record it holds) is printed. The machine size is --machine-procs, else
the most processors the history had in use at once.

--publish (cron, as a PBS manager on the server host) predicts every queued job and sets
its Resource_List.softwalltime_wait (created if missing: a string users can read, not
set), e.g. quick_starter:by_2026-11-25T12:52+0000 (PQStar marked it) or
predicted:about_2026-11-25T15:10+0000 (the start time's P50, else IBL's wait):
its owner sees it with qstat -f, without database credentials. A job's value is altered
only when the answer changed.

With no database (an ordinary user, who may not read the config file that holds its
password and so runs without it, or a login node without one), 'wait JOBID' answers from
the job itself, with the user's own qstat: the start --publish put on it and the
scheduler's estimated.start_time.
"""

WAIT_EPILOG = """\
examples:
  softwalltime wait 1234.pbs01
  softwalltime wait --ncpus 8 --walltime 04:00:00 --user alice
  softwalltime wait --publish        # cron, every 5 minutes, as root on the PBS server
"""


def register(sub: Any) -> None:
    """Add the ``eval-wait``, ``eval-start`` and ``wait`` commands."""
    from . import evalstart

    _register_wait(sub)
    _register_eval_wait(sub)
    evalstart.register(sub)


def _register_wait(sub: Any) -> None:
    """Add ``wait``. Long because it is a table: one ``add_argument`` per option."""
    p = sub.add_parser(
        "wait",
        help="predict when a queued job (or one submitted now) starts (PQStar, IBL, QBETS)",
        description=WAIT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    man_only(p, WAIT_MODEL, WAIT_EPILOG)
    p.add_argument("job_id", nargs="?", metavar="JOBID", help="a queued job, e.g. 1234.pbs01")
    p.add_argument("--ncpus", type=_procs, metavar="N", help="processors of a job not submitted")
    p.add_argument(
        "--walltime",
        type=_walltime,
        metavar="DURATION",
        help="its walltime, e.g. 04:00:00",
    )
    p.add_argument("--user", default="", help="the submitting user (IBL, soft walltime)")
    p.add_argument(
        "--source",
        choices=("db", "qstat"),
        default="db",
        help="where the queued and running jobs come from (default: %(default)s)",
    )
    p.add_argument(
        "--ert",
        choices=("walltime", "soft"),
        default="walltime",
        help="estimated run time of every job: walltime, or soft walltime (v3 for the new"
        " job) (default: %(default)s)",
    )
    p.add_argument(
        "--quick",
        type=_year,
        default=3600,
        metavar="DURATION",
        help="threshold (3600 s)",
    )
    p.add_argument(
        "--warn-lag",
        type=_year,
        default=WARN_LAG_S,
        metavar="DURATION",
        help="warn when the database's newest record is older than this (default: 1:00:00)",
    )
    p.add_argument(
        "--max-lag",
        type=_year,
        default=MAX_LAG_S,
        metavar="DURATION",
        help="refuse to answer (exit 1) when the database's newest record is older than"
        " this: is the ingester running? (default: 24:00:00)",
    )
    p.add_argument("--machine-procs", type=_procs, metavar="N", help="the machine's processors")
    add_site_option(p)
    p.add_argument(
        "--policy",
        default="fcfs-bf1",
        metavar="POLICY",
        help="the site's sort and backfilling for the start time, as simulate --policies"
        " names them (default: %(default)s)",
    )
    p.add_argument(
        "--backfill-fuzzy",
        type=backfill_fuzzy,
        metavar="F",
        help="the site's opt_backfill_fuzzy for the start time (off, low, medium, high or"
        " seconds; default: the scheduler's, from qmgr, with --source qstat and --publish;"
        " else low, PBS's default of 60 s)",
    )
    p.add_argument(
        "--samples",
        type=_at_most(_positive, 1000, "samples"),
        default=9,
        metavar="N",
        help="forward runs of the scheduler for the start time's P50 and P90 (default: 9)",
    )
    p.add_argument(
        "--history",
        type=_history,
        default=10_000,
        metavar="N",
        help="finished jobs used, most recently submitted (default: %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--publish",
        action="store_true",
        help="set every queued job's Resource_List.softwalltime_wait (PBS manager)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="with --publish: print the changes, alter nothing"
    )
    p.add_argument(
        "--time-budget",
        type=_budget,
        default=120,
        metavar="DURATION",
        help="with --publish: stop predicting after this long (default: 120 s)",
    )
    p.set_defaults(func=run_wait, config_optional=True)


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
        type=_year,
        default=3600,
        metavar="DURATION",
        help="quick-starter threshold and the bound PQStar gives (default: 3600 s)",
    )
    p.add_argument(
        "--first", type=_jobs, default=10_001, metavar="N", help="first target job (10001)"
    )
    p.add_argument("--targets", type=_jobs, default=40_000, metavar="N", help="target jobs (40000)")
    p.add_argument(
        "--machine-procs",
        type=_procs,
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
    from ..core.predict import PredictorParams
    from ..replay.trace_readers import InputLimits, read_sources
    from ..wait.evaluate import evaluate_trace, format_report, machine_size
    from ..wait.pqstar import WaitParams
    from .tty import Progress

    if args.plot:
        check_plot_dir(args.plot)  # before the work, not after it
    erts = ("walltime", "soft") if args.ert == "both" else (args.ert,)
    params = WaitParams(
        quick_s=args.quick,
        first_target=args.first - 1,
        last_target=args.first - 1 + args.targets,
    )
    reports = []
    limits = InputLimits(args.max_input_size)
    for number, source in enumerate(args.sources, 1):
        # minutes of work per source: progress on a terminal (stderr), nothing under cron
        with Progress() as progress:
            name = f"eval-wait: {os.path.basename(source.rstrip('/')) or source}"
            if len(args.sources) > 1:
                name += f" ({number}/{len(args.sources)})"
            progress.stage(f"{name}: reading")
            trace = read_sources([source], server=settings.server, limits=limits)
            report = evaluate_trace(
                trace,
                args.machine_procs or machine_size([source], limits),
                params,
                erts,
                PredictorParams.from_settings(settings),
                args.plot,
                on_stage=functools.partial(_stage, progress, name),
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


def _stage(progress: Any, name: str, text: str) -> None:
    progress.stage(f"{name}: {text}")


def _hms(seconds: int) -> str:
    from ..units import format_duration

    return format_duration(max(0, int(seconds)))


class _Snapshot(NamedTuple):
    """What one prediction reads: finished jobs, live jobs, and how old the data is."""

    work: Any  # wait.workload.WaitWorkload of the finished jobs
    trace: Any  # replay.trace.Trace they came from
    live: List[Any]  # wait.live.LiveJob: queued and running
    left: Dict[str, int]  # live jobs not counted, by reason (qstat)
    newest_s: Optional[int]  # the newest record the database holds (epoch)
    now_s: int
    qstat: Optional[Dict[str, Any]]  # qstat's Jobs object, if read
    fuzzy: Tuple[int, str]  # opt_backfill_fuzzy (s) for the start time, and whose it is


def _check_wait_args(args: argparse.Namespace) -> None:
    new_job = args.ncpus is not None or args.walltime is not None
    if args.publish:
        if args.job_id or new_job or args.json:
            raise ConfigError(
                "--publish predicts every queued job: no JOBID, --ncpus,"
                " --walltime or --json with it"
            )
        return
    if args.dry_run:
        raise ConfigError("--dry-run goes with --publish")
    if args.job_id and new_job:
        raise ConfigError("give a JOBID or --ncpus and --walltime (a job not submitted), not both")
    if not args.job_id and (args.ncpus is None or args.walltime is None):
        raise ConfigError("give a queued JOBID, or --ncpus and --walltime of a job not submitted")


def _snapshot(args: argparse.Namespace, settings: Settings) -> _Snapshot:
    import time

    import sqlalchemy as sa

    from ..core.config import require_dsn
    from ..core.predict import PredictorParams
    from ..db import engine as db
    from ..pbsserver.commands import Pbs
    from ..replay.history import read_finished_jobs
    from ..wait.live import live_from_qstat
    from ..wait.livedb import read_live_jobs
    from ..wait.workload import build

    dsn = require_dsn(settings)
    engine = db.make_engine(dsn)
    live_newest = None
    live: List[Any] = []
    left: Dict[str, int] = {}
    try:
        with db.connect(engine, dsn) as conn:
            # one snapshot of both tables: the ingester commits them together
            conn.execute(sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
            source = "database " + db.dsn_target(dsn)
            trace = read_finished_jobs(conn, source=source, latest=args.history)
            if args.source == "db":
                state = read_live_jobs(conn)
                live, live_newest = list(state.jobs), state.newest_s
            conn.rollback()
    finally:
        engine.dispose()
    qstat = None
    if args.source == "qstat" or args.publish:
        qstat = Pbs.from_settings(settings).jobs()
    if args.source == "qstat":
        live, left = live_from_qstat(qstat or {})
    fuzzy = _fuzzy(args, Pbs.from_settings(settings) if qstat is not None else None)
    work = build(trace, args.ert, args.machine_procs, PredictorParams.from_settings(settings))
    ends = [j.end_s for j in trace.jobs if j.end_s is not None]
    newest = max(ends + ([live_newest] if live_newest is not None else []), default=None)
    return _Snapshot(work, trace, live, left, newest, int(time.time()), qstat, fuzzy)


def _find(live: List[Any], job_id: str) -> Optional[Any]:
    """The live job ``job_id`` names: its full id, or its number before the server's name;
    of jobs with the same id (PBS reuses ids after a wrap or a new datastore; an old one
    whose end was never logged stays live), the newest."""
    exact = [j for j in live if j.job_id == job_id]
    if exact:
        return max(exact, key=lambda j: j.submit_s)
    short = [j for j in live if j.job_id.split(".", 1)[0] == job_id.split(".", 1)[0]]
    return short[0] if len(short) == 1 and "." not in job_id else None


def _soft_ert(snap: _Snapshot, user: str, walltime_s: int, settings: Settings) -> int:
    """v3's soft walltime for a job of ``user`` from the finished jobs (else walltime)."""
    from ..core.predict import PredictorParams, predict

    mine = sorted(
        (j for j in snap.trace.jobs if j.user == user and j.end_s is not None),
        key=lambda j: -(j.end_s or 0),
    )
    rows = [(int(j.runtime_s or 0), j.walltime_s) for j in mine]
    params = PredictorParams.from_settings(settings)
    return predict("v3", walltime_s, rows, params).soft_walltime_s or walltime_s


def _the_job(
    args: argparse.Namespace, snap: _Snapshot, settings: Settings
) -> Tuple[Optional[Any], Any, Any]:
    """The job ``wait`` answers for: the queued job ``JOBID`` names (``target``), else one
    submitted now (``--ncpus``, ``--walltime``, ``--user``; ``target`` ``None``); as the wait
    predictor's job and as the scheduler's (``planned``).

    :raises ConfigError: ``JOBID`` is not a queued job
    """
    from ..wait.live import LiveJob
    from ..wait.workload import WaitJob

    now = snap.now_s
    if args.job_id:
        target = _find(snap.live, args.job_id)
        if target is None or not target.queued:
            raise ConfigError(_not_queued(args, snap, target))
        return target, WaitJob(now, 0, 0, target.ncpus, target.ert_s(args.ert), target.user), target
    soft_s = _soft_ert(snap, args.user, args.walltime, settings)
    ert_s = soft_s if args.ert == "soft" else args.walltime
    job = WaitJob(now, 0, 0, args.ncpus, ert_s, args.user)
    planned = LiveJob("", True, args.user, "", now, None, args.ncpus, args.walltime, soft_s,
                      f"1:ncpus={args.ncpus}")  # fmt: skip  # what the server makes of -l ncpus
    return None, job, planned


def run_wait(args: argparse.Namespace, settings: Settings) -> int:
    """Handle ``softwalltime wait``; see WAIT_DESCRIPTION.

    :raises ConfigError: bad arguments, no database configured, the job is not queued
    :raises DatabaseError: the history cannot be read
    :raises PbsError: qstat cannot run or printed no JSON
    """
    from ..wait.live import predict_live
    from ..wait.pqstar import IBL, WaitParams

    _check_wait_args(args)
    if args.job_id and not args.publish and not settings.dsn:
        return _answer_from_the_job(args, settings)
    site = None
    if args.site:
        from .. import api

        site = load_site(args, SITE_MODEL)
        args.machine_procs = api.pool_of(site, args.machine_procs)
    _policy(args)  # a bad --policy fails before the database is read
    snap = _snapshot(args, settings)
    policy = _policy(args, snap.fuzzy[0])
    stale = _check_lag(args, snap)
    params = WaitParams(quick_s=args.quick)
    machine = args.machine_procs or snap.work.machine_procs
    if args.publish:
        return _publish(args, settings, snap, machine, params, site)
    now = snap.now_s
    target, job, planned = _the_job(args, snap, settings)
    ert_s = job.ert_s
    answer = predict_live(
        snap.work.jobs,
        snap.live,
        job,
        machine,
        params,
        args.ert,
        args.history,
        target.job_id if target else "",
    )
    start = _start_time(args, snap, planned, machine, policy, site)
    newest_end = max((j.end_s for j in snap.trace.jobs if j.end_s is not None), default=None)
    queued = sum(1 for j in snap.live if j.queued)
    quick = answer.rule != IBL
    out: Dict[str, Any] = {}
    if target is not None:
        out.update(
            job_id=target.job_id,
            user=target.user,
            ncpus=target.ncpus,
            queued_for_s=max(0, now - target.submit_s),
            pbs_estimated_start_s=_pbs_estimate(snap.qstat, target.job_id),
        )
    out.update(
        quick_starter=quick,
        decided_by=answer.rule,
        predicted_wait_s=answer.predicted_s["pqstar"],
        starts_by_s=now + answer.predicted_s["pqstar"],
        predicted_s=answer.predicted_s,
        start=start,
        near_history_jobs=answer.near_jobs,
        estimated_run_time_s=ert_s,
        machine_procs=machine,
        source="database" if args.source == "db" else "qstat",
        queued=queued,
        running=len(snap.live) - queued,
        not_counted=snap.left,
        finished_jobs=len(snap.work.jobs),
        database_lag_s=None if snap.newest_s is None else max(0, now - snap.newest_s),
        database_stale=stale,
        database_newest_end_s_ago=None if newest_end is None else now - newest_end,
    )
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    _print_wait(args, out, target, ert_s)
    return 0


def _answer_from_the_job(args: argparse.Namespace, settings: Settings) -> int:
    """``wait JOBID`` with no database (an ordinary user, who may not read the config file
    that holds its password, or a login node without one): what the job itself carries,
    read with the user's own qstat: the start ``wait --publish`` put on it and the
    scheduler's ``estimated.start_time``. 1 when the job is not queued or carries neither.

    :raises PbsError: qstat cannot run or printed no JSON
    """
    import time

    from ..pbsserver.commands import Pbs
    from ..pbsserver.publish import RESOURCE, find_published

    now = int(time.time())
    job = find_published(Pbs.from_settings(settings).jobs(), args.job_id)
    if job is None:
        raise ConfigError(f"job {args.job_id} is not shown by qstat (finished, or not yours)")
    if job.state != "Q":
        raise ConfigError(f"job {job.job_id} is not queued (state {job.state}): nothing to predict")
    out: Dict[str, Any] = {
        "job_id": job.job_id,
        "user": job.user,
        "queued_for_s": None if job.queued_since_s is None else max(0, now - job.queued_since_s),
        "quick_starter": None if job.answer is None else job.answer[0],
        "starts_by_s": None if job.answer is None else job.answer[1],
        "published": job.raw,
        "pbs_estimated_start_s": job.pbs_estimate_s,
        "source": "job",
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        _print_from_the_job(out, now)
    if job.answer is None and job.pbs_estimate_s is None:
        print(
            f"softwalltime: no start time on job {job.job_id} yet: the server's"
            f" 'softwalltime wait --publish' has not set its Resource_List.{RESOURCE}"
            " (it runs from cron as root; ask your admin if it never does)",
            file=sys.stderr,
        )
        return 1
    return 0


def _print_from_the_job(out: Dict[str, Any], now: int) -> None:
    queued = out["queued_for_s"]
    print(
        f"job {out['job_id']} ({out['user']}): queued"
        + ("" if queued is None else f" for {_hms(queued)}")
        + "; no database here, so the answer the job carries (qstat -f)"
    )
    if out["starts_by_s"] is not None:
        kind = "quick starter, starts by" if out["quick_starter"] else "predicted start about"
        print(f"softwalltime: {kind} {_when(out['starts_by_s'], now)}")
    elif out["published"] is not None:
        print(f"softwalltime: the job carries {out['published']!r}, not a value of ours")
    else:
        print("softwalltime: nothing published on the job yet")
    estimate = out["pbs_estimated_start_s"]
    print(
        "PBS's own estimate (estimated.start_time): "
        + (
            "none (the scheduler plans only the jobs it must)"
            if estimate is None
            else _when(estimate, now)
        )
    )


def _when(epoch: int, now: int) -> str:
    """A start time as a user reads it: the local date and how far it is."""
    import time

    date = time.strftime("%Y-%m-%d %H:%M %Z", time.localtime(epoch))
    return f"{date} (in {_hms(epoch - now)})" if epoch >= now else f"{date} (passed)"


def _policy(args: argparse.Namespace, fuzzy_s: Optional[int] = None) -> Any:
    """--policy, with ``fuzzy_s`` as its opt_backfill_fuzzy (None: PBS's default)."""
    from ..replay import pbsched

    try:
        policy = pbsched.parse_policy(args.policy)
    except ValueError as err:
        raise ConfigError(f"--policy: {err}") from None
    if pbsched.reads_fairshare(policy):
        raise ConfigError("--policy: fairshare is modelled by simulate only, not by wait")
    return policy if fuzzy_s is None else policy._replace(backfill_fuzzy=fuzzy_s)


FUZZY_OPTION, FUZZY_SITE, FUZZY_DEFAULT = "--backfill-fuzzy", "the scheduler's", "PBS's default"


def _fuzzy(args: argparse.Namespace, pbs: Any) -> Tuple[int, str]:
    """The opt_backfill_fuzzy the start time assumes, and whose it is: --backfill-fuzzy;
    else the default scheduler's when PBS's commands are read anyway (``pbs``); else
    PBS's default.

    :raises PbsError: qmgr failed, or printed a value PBS does not take
    """
    from ..pbsserver.commands import PbsError
    from ..replay import pbsched

    if args.backfill_fuzzy is not None:
        return int(args.backfill_fuzzy), FUZZY_OPTION
    if pbs is None:
        return pbsched.DEFAULT_FUZZY_S, FUZZY_DEFAULT
    value = pbs.sched().get("opt_backfill_fuzzy")
    if value is None:
        return pbsched.DEFAULT_FUZZY_S, FUZZY_SITE
    try:
        return pbsched.parse_fuzzy(value), FUZZY_SITE
    except ValueError as err:
        raise PbsError(f"qmgr list sched default: {err}; give --backfill-fuzzy") from None


def _start_time(
    args: argparse.Namespace, snap: _Snapshot, job: Any, machine: int, policy: Any, site: Any
) -> Dict[str, Any]:
    """The start-time predictor's answer for ``job`` (issue 35): P50, P90 and PBS's method,
    as epoch seconds, and what they assumed; on the ``site`` file's model (issue 46), which
    it was and the jobs it left out or placed first fit."""
    from ..replay.site_model import SiteModel
    from ..wait.livestart import on_machine, predict_snapshot
    from ..wait.starteval import describe

    try:
        found = on_machine(snap.live, snap.now_s, machine, job, site)
        answer = predict_snapshot(found, snap.trace.jobs, policy, args.samples)
    except ValueError as err:
        raise ConfigError(f"start time: {err}") from None
    on_site = {}
    if site is not None:
        on_site = {"model": describe(SiteModel(site)), "site_left": found.left}
    return {
        **on_site,
        "p50_s": answer.p50,
        "p90_s": answer.p90,
        "pbs_method_s": answer.pbs,
        "policy": policy.name,
        "backfill_fuzzy_s": snap.fuzzy[0],
        "backfill_fuzzy_from": snap.fuzzy[1],
        "samples": args.samples,
    }


def _check_lag(args: argparse.Namespace, snap: _Snapshot) -> bool:
    """Refuse past --max-lag, warn on stderr past --warn-lag; True when warned.

    The lag is the age of the newest record the database holds (a finished job's end, a
    live job's state change): the ingester's delay, or a quiet server's last event.

    :raises DatabaseError: the lag is more than --max-lag
    """
    if snap.newest_s is None:
        return False
    lag = max(0, snap.now_s - snap.newest_s)
    what = f"the database's newest record is {_hms(lag)} old"
    if lag > args.max_lag:
        raise DatabaseError(
            f"{what}, more than --max-lag {_hms(args.max_lag)}: its answer would be stale"
            " (is the ingester running? 'softwalltime status' says)"
        )
    if lag > args.warn_lag:
        print(
            f"softwalltime wait: warning: {what} (more than --warn-lag"
            f" {_hms(args.warn_lag)}): the answer may be stale",
            file=sys.stderr,
        )
        return True
    return False


def _pbs_estimate(qstat: Optional[Dict[str, Any]], job_id: str) -> Optional[int]:
    """The scheduler's ``estimated.start_time`` of a job (set for the jobs it plans, e.g.
    with strict_ordering), from qstat's JSON; None when absent or not read."""
    from ..units import qstat_time

    attrs = (qstat or {}).get(job_id)
    estimated = attrs.get("estimated") if isinstance(attrs, dict) else None
    if not isinstance(estimated, dict):
        return None
    return qstat_time(estimated.get("start_time"))


def _not_queued(args: argparse.Namespace, snap: _Snapshot, found: Optional[Any]) -> str:
    where = "the database's live jobs" if args.source == "db" else "qstat"
    if found is not None:
        ran = _hms(snap.now_s - (found.start_s or snap.now_s))
        return f"job {found.job_id} is running (started {ran} ago): nothing to predict"
    lag = (
        ""
        if snap.newest_s is None
        else f"; the database is {_hms(snap.now_s - snap.newest_s)} behind"
    )
    hint = (
        " (finished, deleted, held, or newer than the last ingest" + lag + "; --source qstat"
        " asks the server)"
        if args.source == "db"
        else " (finished, deleted or held)"
    )
    return f"job {args.job_id} is not queued in {where}{hint}"


def _print_wait(args: argparse.Namespace, out: Dict[str, Any], target: Any, ert_s: int) -> None:
    p = out["predicted_s"]
    if target is not None:
        print(
            f"job {target.job_id} ({target.user}, {target.ncpus} processors): queued for"
            f" {_hms(out['queued_for_s'])}; predicted as if submitted now"
        )
    if out["quick_starter"]:
        print(
            f"quick starter: yes, starts within {_hms(args.quick)} ({out['decided_by']}-term"
            " history)"
        )
    else:
        print(f"quick starter: no; predicted wait {_hms(p['pqstar'])} (IBL)")
    start, now = out["start"], out["starts_by_s"] - out["predicted_wait_s"]
    print(
        f"start time: in {_hms(start['p50_s'] - now)} (P50), by {_hms(start['p90_s'] - now)}"
        f" (P90): {start['samples']} runs of the {start['policy']} scheduler with run times"
        " drawn from the users' similar jobs; opt_backfill_fuzzy"
        f" {start['backfill_fuzzy_s']} s ({start['backfill_fuzzy_from']})"
    )
    print(
        f"PBS's method (every job runs its soft walltime): in {_hms(start['pbs_method_s'] - now)}"
    )
    if "model" in start:
        why = "".join(f"; {n} {reason}" for reason, n in sorted(start["site_left"].items()))
        print(f"start time on the {start['model']}{why}")
    print(
        f"other methods: IBL {_hms(p['ibl'])}, QBETS-style bound {_hms(p['qbets'])},"
        f" log-uniform {_hms(p['loguniform'])}"
    )
    estimate = out.get("pbs_estimated_start_s")
    if estimate is not None:
        print(
            f"PBS's own estimate (estimated.start_time, qstat -T): in"
            f" {_hms(estimate - out['starts_by_s'] + out['predicted_wait_s'])}"
        )
    seen = "database" if args.source == "db" else "qstat now"
    print(
        f"state: {out['queued']} queued, {out['running']} running ({seen}); machine"
        f" {out['machine_procs']} processors; estimated run time {_hms(ert_s)} ({args.ert})"
    )
    lag = out["database_lag_s"]
    print(
        f"history: {out['finished_jobs']:,} finished jobs"
        + ("" if lag is None else f"; the database's newest record is {_hms(lag)} old (its lag)")
    )


def _publish(
    args: argparse.Namespace,
    settings: Settings,
    snap: _Snapshot,
    machine: int,
    params: Any,
    site: Any = None,
) -> int:
    """``wait --publish``: every queued job's Resource_List.softwalltime_wait."""
    from ..pbsserver import publish
    from ..pbsserver.commands import Pbs
    from ..wait.live import live_from_qstat, predict_live
    from ..wait.livestart import predict_all
    from ..wait.pqstar import IBL
    from ..wait.workload import WaitJob

    pbs = Pbs.from_settings(settings)
    now = snap.now_s
    on_server, _left = live_from_qstat(snap.qstat or {})

    def current(job_id: str) -> Optional[str]:
        attrs = (snap.qstat or {}).get(job_id) or {}
        res = attrs.get("Resource_List") if isinstance(attrs, dict) else None
        value = res.get(publish.RESOURCE) if isinstance(res, dict) else None
        return None if value is None else str(value)

    def order(job: Any) -> Tuple[int, int, str]:
        """Jobs without an answer first (new ones get one within the time budget), then
        the longest queued."""
        parsed = publish.parse_value(current(job.job_id))
        return (0 if parsed is None else 1, job.submit_s, job.job_id)

    queued = sorted((j for j in on_server if j.queued), key=order)
    by_id = {j.job_id: j for j in queued}
    if queued and not args.dry_run and publish.ensure_resource(pbs):
        print(f"publish: created resource {publish.RESOURCE} (type=string, flag=r)")

    # the start time of every queued job at once (issue 35): one set of forward runs
    policy = _policy(args, snap.fuzzy[0])
    try:
        starts = predict_all(on_server, snap.trace.jobs, now, machine, policy, args.samples,
                             on=site)  # fmt: skip
    except ValueError as err:  # a job's select the site model cannot read
        raise ConfigError(f"start time: {err}") from None

    def predict(job_id: str) -> Tuple[bool, int]:
        j = by_id[job_id]
        job = WaitJob(now, 0, 0, j.ncpus, j.ert_s(args.ert), j.user)
        answer = predict_live(
            snap.work.jobs, snap.live, job, machine, params, args.ert, args.history, job_id
        )
        if answer.rule != IBL:
            return True, now + answer.predicted_s["pqstar"]
        start = starts.get(job_id)
        return False, start.p50 if start is not None else now + answer.predicted_s["pqstar"]

    summary = publish.publish(
        pbs,
        [(j.job_id, current(j.job_id)) for j in queued],
        predict,
        now,
        dry_run=args.dry_run,
        time_budget_s=args.time_budget,
        err=lambda line: print(line, file=sys.stderr),
    )
    if args.dry_run:
        for line in summary.lines:
            print(line)
    print(summary.line())
    return 1 if summary.errors else 0
