"""``softwalltime simulate``: what soft walltimes do to waiting times and slowdown."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any, Callable, Dict, List

from ..core import registry
from ..core.config import Settings
from ..errors import ConfigError
from .argtypes import backfill_fuzzy, bounded_number, name_list, whole_number
from .calibrate import target_option
from .evaluate import add_input_size
from .helptext import man_only, more
from .site import POOL_ONLY, SITE_MODEL, add_site_option, load_site

log = logging.getLogger(__name__)

# Copies of the library's values, for the options and their help: building the parser (at
# every softwalltime invocation) imports no simulator. tests/test_api.py checks each one.
SOURCES = registry.SIMULATED  # softwalltime.replay.simulate.SOURCE_NAMES
DEFAULT_SOURCES = ",".join((registry.USERS, *registry.HISTORY_PREDICTORS, registry.PERFECT))
SEARCH_SOURCES = "users,v3"  # --search: the baseline's and the hook's default predictor
P95_TOLERANCE_PCT = 10.0  # softwalltime.replay.formula.Tolerances
MAX_FACTOR = 2.0
GOAL_PCT = 40.0  # softwalltime.replay.formula_search.GOAL_PCT
MAX_FOLDS = 12  # softwalltime.replay.folds.MAX_FOLDS
CORRECTIONS = ("pbs", "simple", "power", "walltime")  # softwalltime.replay.corrections
BACKFILL_BY = ("estimate", "walltime")  # softwalltime.replay.pbsched.BACKFILL_BY
CLASSES = ("pbs", "rank", "none")  # softwalltime.replay.pbsched.CLASSES
RANK_REFRESH_S = 900  # softwalltime.replay.pbsched.DEFAULT_RANK_REFRESH_S
RANK_BY = registry.RANKS  # softwalltime.replay.pbsched.RANK_BY
DEFAULT_FUZZY_S = 60  # softwalltime.replay.pbsched.DEFAULT_FUZZY_S
MAX_BOUND_H = 87600.0  # the bounds an admin sets for --policies: at most 10 years of waiting

DESCRIPTION = """\
Simulate a first-come-first-served scheduler with EASY backfilling on a workload, once per
estimate source, and report waiting time (mean, median, p95, hours) and bounded slowdown
(10-minute bound) overall and per runtime class (short <= 2 h, medium <= 24 h, long > 24 h),
utilization, makespan and corrections, against the users' walltimes; or search PBS's
scheduler policies (--policies) or job_sort_formulas (--search) for the site.
""" + more("softwalltime-simulate", "simulate.md")

# The man page's (helptext.man_only): the model and the method.
MODEL = """\
The model:
- Machine: a pool of processors, from the SWF header (MaxProcs) or --procs (required for
  PBS accounting logs, which give ncpus). A job uses its allocated (else requested)
  processors; jobs wider than the machine are skipped and counted, as are jobs with a value
  beyond the plausible bounds (submit time before 1970 or after 2099, wait, run or requested
  time < 0 or > 10 years, processors < 0 or > 10^8).
- Jobs arrive at their submit time and run for their real run time, cut at their requested
  walltime (PBS kills there).
- Estimates the scheduler plans with: users (the walltimes), v1/v2/v3 and calibrated (the
  hook's predictors, same code, parameters from the configuration; calibrated's site table
  learns from the jobs that end in the simulation, towards --target-under-pct: a
  percentage, or v3, as many under-estimates as v3 makes on the same jobs, computed
  alongside), learned (the site-learning predictor: its table learns the same way, from
  empty, towards the same target), perfect (the real run time),
  fixed10 (10 minutes, at most the walltime). Predictions are made at submit and again at
  start, from the history of the user's jobs that have ended in the simulation by then.
- Scheduler: FCFS (submit time, then trace order) with EASY backfilling. Each pass starts
  jobs from the head while the head fits. The blocked head's shadow time is the earliest
  estimated end of a running job (max(now, start + current estimate)) at which enough
  processors are free; extra = processors free then, counting every running job whose
  estimated end is at or before it, minus the head's processors. The rest of the queue is
  scanned in order: a job that fits now starts if now + its estimate <= shadow, or else if
  it needs no more than extra processors (which it then uses up). A queued job's estimate is
  its submit-time prediction. --backfill-depth K > 1 gives the first K jobs that cannot
  start a reservation each, and a job starts if the processors free until its estimated
  end, with those reservations, never fall below its own (as PBS, simulate.cpp:1800-1802);
  --sjbf scans backfill candidates shortest estimate first.
- Event order at equal times: job ends (learnt by the predictors in FCFS order), then
  estimate corrections (and refreshes), then arrivals, then one scheduling pass.
- A running job that outlives its estimate is corrected (--correction): pbs (the estimate
  grows by the one the job started with, each time it is exceeded; PBS's rule), simple
  (+1 h once within 60 s of the estimate), power (the i-th adds 15 x 2^(i-2) minutes) or
  walltime (the user's walltime); never past the walltime. A correction is an event of its
  own (a pass follows it); with --lazy-corrections it is applied, in closed form, at the
  next pass for an end or arrival, as PBS's scheduler extends soft walltimes at its next
  cycle.
- --refresh-every MIN: every MIN minutes, queued jobs are predicted again from the current
  history (as 'softwalltime refresh' does), and the estimate changes when the new value
  differs by more than --refresh-pct % and at least --refresh-min minutes.

Each SOURCE is simulated on its own; --jobs N runs the configurations in N processes.

Policy search (--policies): PBS's own scheduler, in PBS's names, once per policy x estimate
source. A policy is SORT[-bfK|-strict|-greedy]: SORT is the job_sort_formula (fcfs: none;
sjf: shortest estimate first; sjfage: earliest submit + estimate first; xfactor: largest
expansion factor first; small: fewest processors first; sjf.rank, sjfage.rank,
xfactor.rank: the same by the rank the hook publishes in the custom resource
softwalltime_rank; or an expression over soft_walltime, walltime, eligible_time, ncpus
and softwalltime_rank), bfK strict_ordering with backfill_depth
K (top jobs with reservations), strict strict_ordering without backfilling, greedy no
strict_ordering (jobs that do not fit are passed over). The scheduler cycles at every
arrival and end and every --scheduler-iteration seconds; each cycle first extends the soft
walltimes of running jobs found past theirs (--correction). Reported per configuration:
mean and p95 wait, mean bounded slowdown, long jobs' (run > 24 h) mean, p95 and max wait,
wide jobs' (>= 1/8 of the machine) mean and max wait; recommended: the best mean bsld
among sources a site can run (not perfect) whose long jobs' p95 wait is at most
--long-p95-bound hours (default: theirs with the users' walltimes under the first policy)
and whose wide jobs' longest wait is at most --wide-max-bound hours (default: 3 x theirs),
with the qmgr and sched_config lines that set it. The model follows OpenPBS 23.06's
scheduler: a job passes a top job's reservation if its soft walltime ends by it (or it fits
the processors left beside it), as PBS checks it (--backfill-by estimate, the default;
--backfill-by walltime is PBS's rule only next to an advance reservation, which is not
modelled); jobs with the same processors and walltime form an equivalence class, and once
one of them cannot run in a cycle the rest of the class is not tried in that cycle
(--classes pbs, the default; rank: softwalltime_rank on sched_config's resources: line
puts the rank in the class too; none: every job on its own); the periodic cycle runs
--scheduler-iteration seconds after the last cycle; a soft walltime is extended once the
job is strictly past it. --backfill-fuzzy is the site's opt_backfill_fuzzy: PBS searches a
top job's start in windows of it. A sort by length can starve wide jobs: hence
--wide-max-bound.

Formula search (--search): job_sort_formulas of one family, each a sum of the expansion
factor (eligible_time + 600) / (E + 600) (or, with the power 2, 3600 * (eligible_time +
600) / ((E + 600) * (E + 600))), an age term eligible_time / A, a length term L * E /
86400 and a width term W * ncpus / P (P: the machine's processors), E the soft walltime
(else the walltime) or the rank (else the soft walltime, else the walltime), searched on a
grid (powers 1, 2; A none, 72 h, 24 h; L 0, 1; W 0, 8) per estimate source (--estimates,
default users,v3; the rank with every source but users) on the model of PBS's scheduler
above with strict ordering and backfill_depth 1, fcfs-bf1 with the users' walltimes the
baseline (with the site's fairshare, from --site or a --current fairshare policy:
fairshare-bf1, every candidate under fair_share, and the grid gains a term F *
fairshare_factor, F 0 or 4; the report says what the rank adds to fairshare). The trace is
cut in two halves by job count, each simulated on its own; every candidate runs on the
first half, its 12 best by mean bsld again with backfill_depth 3 (labelled -bf3: more top
jobs protect wide and long jobs), and the recommendation is the best mean bsld there among
those within the tolerances: the p95 wait of short (<= 2 h), long (> 24 h) and wide (>=
1/8 of the machine) jobs at most --p95-tolerance % (10) over the baseline's, the longest
wait of any job at most --max-factor (2) times its, each give or take 0.1 h. The first
half's Pareto front (mean bsld, long jobs' p95, wide jobs' longest wait) and its 8 best
within the tolerances also run on the second half, which reports the recommendation's
figures, whether the tolerances still hold, its rank among those on both halves, and the
front with what each point gives up against the baseline; then the qmgr and sched_config
lines. --plot DIR draws the front (formula_front.png); --json carries the same; --jobs N
runs the simulations in N processes, with a progress line on stderr when it is a terminal.
--goal PCT is the gain to check for: mean bsld PCT % under the baseline's on the second
half within the tolerances; the output says whether the recommendation reaches it, and
which points of the front do.

Folds in time (--search --folds K, default 2: the halves above): the trace is cut into K
folds by job count; step k (1..K-1) is the search above tuned on folds 1..k and checked on
fold k+1. The output gives each step's pick, whether it held the tolerances and the goal
on the next fold, each pick's figures on every next fold, and the pick to recommend: the
one that held on the most next folds (ties: the best worst-fold gain), its worst fold's
figures beside its mean. --fold-narrow: each step after the first tunes only what the
previous step ran on its next fold (its front and best; cheaper on large traces).

Fit to real starts (--policies, --search): when the trace records when its jobs really
started (SWF field 3, the wait; PBS accounting's start), the site's current policy
(--current POLICY; default: the --site file's job_sort_formula, backfill_depth and
strict_ordering, else fcfs-bf1) is first replayed with the users' walltimes (the soft
walltimes the jobs had, where PBS accounting records them) and compared with the real
starts, overall and per queue (with --site, where the trace names queues):
mean and p95 wait, the share of co-queued job pairs (the later submitted while the earlier
waited, real starts over 60 s apart; a seeded sample of 20,000 when there are more) started
in the real order, and the share of jobs started within 10 min and 1 h of their real
start. The verdict is poor when the model's mean wait is off by more than 2x (and 0.25 h)
or under 80 % of the pairs are in order, good within 1.25x and from 90 %, else fair. On a
poor fit the recommendation's qmgr and sched_config lines are withheld (--force prints
them), with what the model lacks. --site FILE: the site file (softwalltime site export,
or softwalltime/data/sites/): --policies, --search and the fit then run the site model,
its vnodes, each job's chunks (a trace without them: P processors as P chunks of one cpu),
its queues (jobs routed by walltime, each queue's default_chunk and node pool) and run
limits; jobs no queue takes or no node pool holds are skipped, counted. The plain EASY
simulation stays one pool of the site's cpus; the command says which.

The rank (softwalltime_rank, read by the *.rank sorts; 0 in other formulas): the mean run
time of the user's 10 newest similar jobs (key-mean, the hook's code), computed at submit
from the user's jobs that have ended in the simulation and, for queued jobs whose user had
a job end since, again at the first cycle of every --rank-refresh seconds (900, as the
softwalltime refresh timer; 0: at submit only). It is the same for every estimate source
(the soft walltime varies); with perfect estimates the rank is the run time too, so that
perfect is the ideal for a rank policy as well. --rank-by key-mean-paid ranks by key-mean
no lower than the user's paid evidence allows (the hook's setting rank = key-mean-paid);
--rank-by learned ranks by the predictor
learned's own rank instead (its rule of best accuracy in the job's bin, the site table
learning from empty at every job end in the simulation), learned-paid by that rank floored
by the user's paid evidence (the hook's settings rank = learned, learned-paid).
"""

EPILOG = """\
examples:
  softwalltime simulate HPC2N-2002-2.2-cln.swf.gz
  softwalltime simulate --procs 2176 --estimates users,v3 --correction power trace.swf.gz
  softwalltime simulate --procs 64 --json /var/spool/pbs/server_priv/accounting
  softwalltime simulate --policies fcfs-bf1,sjfage-bf1,xfactor-bf4 --jobs 2 trace.swf.gz
  softwalltime simulate --policies fcfs-bf1,xfactor-bf1,xfactor.rank-bf1 trace.swf.gz
  softwalltime simulate --search --jobs 2 --plot front/ trace.swf.gz
"""


def register(sub: Any) -> None:
    """Add the ``simulate`` command. Long because it is a table: one ``add_argument`` per
    option."""
    p = sub.add_parser(
        "simulate",
        help="simulate EASY backfilling with soft walltimes: waiting time and slowdown",
        description=DESCRIPTION,
        usage="%(prog)s [options] SOURCE [SOURCE ...]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    man_only(p, MODEL, EPILOG)
    p.add_argument("sources", nargs="+", metavar="SOURCE", help="SWF trace or PBS accounting")
    p.add_argument(
        "--estimates",
        metavar="LIST",
        help="comma-separated, of {} (default: {}; --search: {})".format(
            ",".join(SOURCES), DEFAULT_SOURCES, SEARCH_SOURCES
        ),
    )
    p.add_argument(
        "--correction",
        choices=CORRECTIONS,
        default="pbs",
        metavar="HOW",
        help="when a job outlives its estimate: %(choices)s (default: %(default)s)",
    )
    p.add_argument(
        "--target-under-pct",
        metavar="PCT|v3",
        help="calibrated, learned: target under-estimate %% or v3 (default: the setting)",
    )
    p.add_argument("--procs", type=whole_number(1), metavar="N", help="processors of the machine")
    p.add_argument(
        "--policies",
        metavar="LIST",
        help="policy search: PBS's policies, comma-separated, SORT[-bfK|-strict|-greedy]",
    )
    _add_search_options(p)
    p.add_argument(
        "--rank-refresh",
        type=whole_number(0),
        metavar="S",
        help=f"policy search: rank again every S s (default: {RANK_REFRESH_S})",
    )
    p.add_argument(
        "--rank-by",
        choices=RANK_BY,
        metavar="RANK",
        help="policy search: the *.rank sorts' rank: %(choices)s (default: key-mean)",
    )
    p.add_argument(
        "--long-p95-bound",
        type=bounded_number(0, MAX_BOUND_H),
        metavar="H",
        help="policy search: long jobs' p95 wait bound, hours",
    )
    p.add_argument(
        "--wide-max-bound",
        type=bounded_number(0, MAX_BOUND_H),
        metavar="H",
        help="policy search: wide jobs' longest wait bound, hours",
    )
    p.add_argument(
        "--scheduler-iteration",
        type=whole_number(0),
        default=600,
        metavar="S",
        help="policy search: seconds between periodic cycles (default: %(default)s)",
    )
    p.add_argument(
        "--backfill-by",
        choices=BACKFILL_BY,
        metavar="WHAT",
        help="policy search: what must end by a reservation: %(choices)s (default: estimate)",
    )
    p.add_argument(
        "--backfill-fuzzy",
        type=backfill_fuzzy,
        metavar="F",
        help="policy search: opt_backfill_fuzzy (default: low)",
    )
    p.add_argument(
        "--classes",
        choices=CLASSES,
        metavar="KEY",
        help="policy search: classes %(choices)s (default: pbs)",
    )
    p.add_argument(
        "--backfill-depth",
        type=whole_number(1),
        default=1,
        metavar="K",
        help="reservations (backfill_depth; default: 1, EASY)",
    )
    p.add_argument(
        "--sjbf", action="store_true", help="backfill candidates shortest estimate first"
    )
    p.add_argument(
        "--lazy-corrections",
        action="store_true",
        help="corrections wait for the next pass, as PBS's",
    )
    p.add_argument(
        "--refresh-every",
        type=whole_number(1),
        metavar="MIN",
        help="refresh queued jobs' estimates",
    )
    p.add_argument(
        "--refresh-pct",
        type=float,
        default=10.0,
        metavar="P",
        help="refresh threshold, %% of the estimate (default: %(default)s)",
    )
    p.add_argument(
        "--refresh-min",
        type=float,
        default=5.0,
        metavar="M",
        help="refresh threshold, minutes (default: %(default)s)",
    )
    add_input_size(p)
    add_site_option(p, "--policies and --search run on its vnodes, queues, limits")
    p.add_argument(
        "--current",
        metavar="POLICY",
        help="the site's policy, fitted to real starts first",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="print PBS settings even when the fit is poor",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument("--plot", metavar="DIR", help="also write PNG box plots into DIR (matplotlib)")
    p.add_argument(
        "--jobs",
        type=whole_number(1),
        default=1,
        metavar="N",
        help="parallel processes (default: 1)",
    )
    p.set_defaults(func=run_simulate)


def _add_search_options(p: Any) -> None:
    # simulate --search and its tolerances
    p.add_argument(
        "--search",
        action="store_true",
        help="formula search: job_sort_formulas on PBS's model",
    )
    p.add_argument(
        "--p95-tolerance",
        type=bounded_number(0, 1000),
        metavar="PCT",
        help=f"formula search: p95 waits' tolerance, %% (default: {P95_TOLERANCE_PCT:g})",
    )
    p.add_argument(
        "--goal",
        type=bounded_number(0, 100),
        metavar="PCT",
        help=f"formula search: mean bsld gain to check (default: {GOAL_PCT:g})",
    )
    p.add_argument(
        "--max-factor",
        type=bounded_number(1, 100),
        metavar="X",
        help=f"formula search: longest wait tolerance (default: {MAX_FACTOR:g}x)",
    )
    p.add_argument(
        "--folds",
        type=whole_number(2, MAX_FOLDS),
        default=2,
        metavar="K",
        help="formula search: K folds in time (default 2: halves)",
    )
    p.add_argument(
        "--fold-narrow",
        action="store_true",
        help="formula search: a fold tunes what the last checked",
    )


def _options(args: argparse.Namespace, settings: Settings) -> Any:
    """The one :class:`~softwalltime.replay.runs.SimOptions` of the run, from the options."""
    from ..core.predict import PredictorParams
    from ..replay import pbsched
    from ..replay.runs import SimOptions
    from ..replay.simulate import Refresh

    refresh = None
    if args.refresh_every:
        refresh = Refresh(args.refresh_every * 60, args.refresh_pct, int(args.refresh_min * 60))
    return SimOptions(
        params=PredictorParams.from_settings(settings),
        target_under_pct=target_option(args.target_under_pct, settings.target_under_pct),
        correction=args.correction,
        backfill_depth=args.backfill_depth,
        sjbf=args.sjbf,
        lazy_corrections=args.lazy_corrections,
        refresh=refresh,
        scheduler_iteration=args.scheduler_iteration,
        backfill_by=args.backfill_by or pbsched.ESTIMATE,
        classes=args.classes or pbsched.CLASSES_PBS,
        backfill_fuzzy=DEFAULT_FUZZY_S if args.backfill_fuzzy is None else args.backfill_fuzzy,
        rank_refresh_s=RANK_REFRESH_S if args.rank_refresh is None else int(args.rank_refresh),
        rank_by=args.rank_by or RANK_BY[0],
    )


def _fairshare(args: argparse.Namespace, site: Any) -> Any:
    """The fairshare every policy and the search run under, said in one line: the site
    file's (its scheduler's ``fair_share``), else the ``--current`` policy's when it names
    fairshare (a site keeps ``fair_share`` whatever formula it sets), else None.

    :raises ConfigError: the site's fairshare would run no job, or a bad --current
    """
    from ..replay import fairshare as fs
    from ..replay import pbsched

    try:
        settings = fs.of_site(site.scheduler) if site is not None else None
        where = "the site file's sched_config"
        if settings is None and args.current:
            settings = pbsched.parse_policy(args.current).fairshare
            where = f"--current {args.current}"
    except ValueError as err:
        raise ConfigError(f"{'--current' if site is None else '--site'}: {err}") from None
    if settings is not None:
        out = sys.stderr if args.json else sys.stdout
        print(f"fairshare on under every policy ({where}): {fs.describe(settings)}", file=out)
    return settings


def _fits(args: argparse.Namespace, traces: List[Any], opts: Any, site: Any) -> Any:
    """The fit of the site's current policy to each trace's real starts, printed first
    (text), and the line that withholds the PBS settings when one is poor ("" with
    --force)."""
    from .. import api
    from ..replay.fit import withheld_line

    try:
        fits = api.fit(traces, args.current, options=opts, site=site)
    except ValueError as err:
        raise ConfigError(f"--current: {err}") from err
    for f in fits:
        if f is not None and not args.json:
            sys.stdout.write(f.format() + "\n")
    return fits, "" if args.force else withheld_line(fits, site is not None)


def _write_json(out: List[Dict[str, Any]]) -> None:
    json.dump(out[0] if len(out) == 1 else out, sys.stdout, indent=2)
    sys.stdout.write("\n")


def _policies(
    args: argparse.Namespace, names: List[str], traces: List[Any], opts: Any, site: Any = None
) -> int:
    from .. import api
    from ..replay import pbsched

    other = [
        flag
        for flag, used in (
            ("--backfill-depth", args.backfill_depth != 1),
            ("--sjbf", args.sjbf),
            ("--lazy-corrections", args.lazy_corrections),
            ("--refresh-every", args.refresh_every),
            ("--plot", args.plot),
        )
        if used
    ]
    if other:
        raise ConfigError(f"--policies: not with {', '.join(other)} (a policy names its own)")
    policies = [x.strip() for x in args.policies.split(",") if x.strip()]
    if not policies:
        raise ConfigError("--policies: no policy given")
    for policy in policies:
        try:
            pbsched.parse_policy(policy)
        except ValueError as err:
            raise ConfigError(f"--policies: {err}") from err
    bounds_h = (args.long_p95_bound, args.wide_max_bound)
    fits, withheld = _fits(args, traces, opts, site)
    results = api.policies(traces, policies, names, options=opts, bounds_h=bounds_h, jobs=args.jobs)
    results = [r._replace(fit=f, withheld=withheld) for r, f in zip(results, fits)]
    if args.json:
        _write_json([r.as_json() for r in results])
    else:
        sys.stdout.write("".join(r.format() for r in results))
    return 0


def _progress(done: int, total: int, started: float, phase: str = "") -> None:
    # One line on stderr, rewritten, when it is a terminal (nothing under cron).
    if sys.stderr.isatty():
        end = "\n" if done == total else ""
        elapsed = int(time.monotonic() - started)
        sys.stderr.write(
            f"\rsearch {phase}: {done}/{total} simulations, {elapsed // 60}:{elapsed % 60:02d}{end}"
        )
        sys.stderr.flush()


def _progress_line() -> Callable[[int, int, str], None]:
    """:func:`_progress` for each phase of the search, its clock started at the phase's 0."""
    started = [time.monotonic()]

    def show(done: int, total: int, phase: str) -> None:
        if done == 0:
            started[0] = time.monotonic()
        _progress(done, total, started[0], phase)

    return show


def _formula_search(
    args: argparse.Namespace, names: List[str], traces: List[Any], opts: Any, site: Any = None
) -> int:
    from .. import api

    other = [
        flag
        for flag, used in (
            ("--policies", args.policies),
            ("--backfill-depth", args.backfill_depth != 1),
            ("--sjbf", args.sjbf),
            ("--lazy-corrections", args.lazy_corrections),
            ("--refresh-every", args.refresh_every),
            ("--long-p95-bound", args.long_p95_bound is not None),
            ("--wide-max-bound", args.wide_max_bound is not None),
            ("--rank-by", args.rank_by is not None),
        )
        if used
    ]
    if other:
        raise ConfigError(f"--search: not with {', '.join(other)}")
    if args.folds != 2 or args.fold_narrow:
        return _fold_search(args, names, traces, opts, site)
    fits, withheld = _fits(args, traces, opts, site)
    results = api.search(
        traces,
        names,
        options=opts,
        p95_tolerance_pct=P95_TOLERANCE_PCT if args.p95_tolerance is None else args.p95_tolerance,
        max_factor=MAX_FACTOR if args.max_factor is None else args.max_factor,
        goal_pct=GOAL_PCT if args.goal is None else args.goal,
        jobs=args.jobs,
        progress=_progress_line(),
    )
    results = [r._replace(fit=f, withheld=withheld) for r, f in zip(results, fits)]
    for r in results:
        if not args.json:
            sys.stdout.write(r.format())
        if args.plot:
            where = args.plot
            if len(args.sources) > 1:
                where = os.path.join(args.plot, os.path.basename(r.path.rstrip("/")))
            log.info("wrote %s", r.write_plot(where))
    if args.json:
        _write_json([r.as_json() for r in results])
    return 0


def _fold_search(
    args: argparse.Namespace, names: List[str], traces: List[Any], opts: Any, site: Any
) -> int:
    from .. import api

    if args.plot or args.current:
        raise ConfigError("--folds: not with --plot or --current")
    try:
        results = api.search_folds(
            traces,
            args.folds,
            names,
            options=opts,
            p95_tolerance_pct=P95_TOLERANCE_PCT
            if args.p95_tolerance is None
            else args.p95_tolerance,
            max_factor=MAX_FACTOR if args.max_factor is None else args.max_factor,
            goal_pct=GOAL_PCT if args.goal is None else args.goal,
            jobs=args.jobs,
            progress=_progress_line(),
            site=site,
            narrow=args.fold_narrow,
        )
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if args.json:
        _write_json([r.as_json() for r in results])
    else:
        sys.stdout.write("".join(r.format() for r in results))
    return 0


def _sources(text: str) -> List[str]:
    names = name_list("--estimates", text, SOURCES)
    if "users" in names:  # the baseline first
        names.remove("users")
        names.insert(0, "users")
    return names


def _refuse_scheduler_options(args: argparse.Namespace) -> None:
    """The options of PBS's own scheduler, refused by the EASY simulation.

    :raises ConfigError: one was given
    """
    if args.backfill_by:
        raise ConfigError("--backfill-by: only with --policies (PBS's own scheduler)")
    if args.classes:
        raise ConfigError("--classes: only with --policies (PBS's own scheduler)")
    if args.backfill_fuzzy is not None:
        raise ConfigError("--backfill-fuzzy: only with --policies or --search (PBS's scheduler)")
    if args.rank_refresh is not None:
        raise ConfigError("--rank-refresh: only with --policies (the *.rank sorts)")
    if args.rank_by is not None:
        raise ConfigError("--rank-by: only with --policies (the *.rank sorts)")


def run_simulate(args: argparse.Namespace, settings: Settings) -> int:
    """Handle ``softwalltime simulate``; see DESCRIPTION.

    :raises ConfigError: bad arguments (unknown source, no processor count)
    :raises ParseError: a source cannot be read
    """
    from .. import api

    names = _sources(args.estimates or (SEARCH_SOURCES if args.search else DEFAULT_SOURCES))
    opts = _options(args, settings)  # the target checked before reading
    if args.refresh_pct < 0 or args.refresh_min < 0:
        raise ConfigError("--refresh-pct and --refresh-min must not be negative")
    if args.plot:
        from .evaluate import check_plot_dir

        check_plot_dir(args.plot)  # before the simulation, not after it (was: 24 s lost)
    if args.search or args.policies:
        site = load_site(args, SITE_MODEL)
        opts = opts._replace(fairshare=_fairshare(args, site))
    else:
        site = load_site(args, POOL_ONLY, "EASY backfilling is one pool; --policies and "
                         "--search run the site model")  # fmt: skip
    traces = api.load(args.sources, args.procs, args.max_input_size, site=site)
    if args.search:
        return _formula_search(args, names, traces, opts, site)
    if args.p95_tolerance is not None or args.max_factor is not None or args.goal is not None:
        raise ConfigError("--p95-tolerance, --max-factor, --goal: only with --search")
    if args.folds != 2 or args.fold_narrow:
        raise ConfigError("--folds, --fold-narrow: only with --search")
    if args.policies:
        return _policies(args, names, traces, opts, site)
    if args.current or args.force:
        raise ConfigError("--current, --force: only with --policies or --search")
    _refuse_scheduler_options(args)
    runs = api.simulate(traces, names, options=opts, jobs=args.jobs, site=site)
    for run in runs if args.plot else ():
        where = args.plot
        if len(args.sources) > 1:
            where = os.path.join(args.plot, os.path.basename(run.path.rstrip("/")))
        for written in run.write_plots(where):
            log.info("wrote %s", written)
    if args.json:
        _write_json([run.as_json() for run in runs])
    else:
        sys.stdout.write("\n".join(run.format() for run in runs))
    return 0
