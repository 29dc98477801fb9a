"""softwalltime as a library: what the commands do, without argparse.

Each function takes plain values and returns result objects; a result's ``as_json()`` is
what the command's ``--json`` prints and its ``format()`` the command's table. The CLI
(:mod:`softwalltime.cli`) only parses its options, calls these and prints.

- :func:`predict`: a history predictor's soft walltime for a job (the hook's code);
- :func:`evaluate`: the predictors' accuracy on finished jobs (``softwalltime evaluate``);
- :func:`load`: traces read and fitted to their machine, for the simulations;
- :func:`simulate`: FCFS + EASY backfilling per estimate source (``simulate``);
- :func:`policies`: PBS's scheduler per policy and source (``simulate --policies``);
- :func:`search`: the job_sort_formula search (``simulate --search``);
- :func:`start_times`: start-time predictions measured on a trace (``eval-start``);
- :func:`report`: what soft walltimes did, from the database (``softwalltime report``).

The simulations run in ``jobs`` forked processes, which get their inputs as arguments
(:func:`softwalltime.replay.parallel.fork_map`).

Example::

    from softwalltime import api

    [result] = api.search(["trace.swf"], jobs=2)
    print(result.format())
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from .core import predict as core_predict
from .core import registry
from .core.calibrated import DEFAULT_TARGET_UNDER_PCT
from .core.predict import HistoryRow, Prediction, PredictorParams
from .errors import ConfigError
from .replay import evaluate as ev
from .replay import fairshare, formula_search, runs
from .replay import formula as fm
from .replay import simulate as sim
from .replay.fit import Fit, site_policy
from .replay.runs import (
    EasyOutcome,
    FoldResult,
    Loaded,
    PolicyResult,
    Progress,
    SearchResult,
    SimOptions,
)
from .replay.site_model import SiteModel, site_run
from .replay.trace import Trace
from .replay.trace_readers import InputLimits, read_sources
from .site_file import Site
from .wait import starteval as se
from .wait.starttime import DEFAULT_SAMPLES

__all__ = [
    "DEFAULT_ESTIMATES",
    "SEARCH_ESTIMATES",
    "Evaluation",
    "Loaded",
    "Prediction",
    "PolicyResult",
    "FoldResult",
    "SearchResult",
    "SimOptions",
    "Simulation",
    "evaluate",
    "Fit",
    "fit",
    "load",
    "pool_of",
    "policies",
    "predict",
    "search",
    "search_folds",
    "simulate",
    "start_times",
    "StartOptions",
    "StartTimes",
    "Report",
    "report",
]

DEFAULT_ESTIMATES = (registry.USERS, *registry.HISTORY_PREDICTORS, registry.PERFECT)
SEARCH_ESTIMATES = (registry.USERS, "v3")  # the baseline's and the hook's default predictor

Traces = Sequence[Union[str, Loaded]]
"""Paths (an SWF trace with its MaxProcs header) or traces :func:`load` read."""


# ---------------------------------------------------------------------------------------
# Predictions and the accuracy replay


def predict(
    walltime_s: Optional[int],
    history: Sequence[HistoryRow],
    predictor: str = "v3",
    params: Optional[PredictorParams] = None,
) -> Prediction:
    """The soft walltime predictor v1, v2 or v3 gives a job, as the hook computes it.

    :param history: the user's finished jobs, ``(runtime_s, walltime_s or None)``, most
        recent end first
    :raises ValueError: an unknown predictor
    """
    return core_predict.predict(
        predictor, walltime_s, history, params or core_predict.DEFAULT_PARAMS
    )


class Evaluation(NamedTuple):
    """The predictors replayed on a trace (``softwalltime evaluate``)."""

    report: Dict[str, Any]
    replay: ev.Replay
    columns: ev.ReplayColumns

    def as_json(self) -> Dict[str, Any]:
        return self.report

    def format(self) -> str:
        return ev.format_table(self.report)


def evaluate(
    trace: Union[Trace, Sequence[str]],
    predictors: Sequence[str] = ev.DEFAULT_PREDICTORS,
    *,
    params: Optional[PredictorParams] = None,
    target_under_pct: Optional[float] = DEFAULT_TARGET_UNDER_PCT,
    moment: str = "submit",
    start_from_submit: bool = False,
    priors: Tuple[Any, Any] = (None, None),
    consume: bool = False,
) -> Evaluation:
    """Replay finished jobs through ``predictors`` (of :data:`.replay.evaluate.PREDICTORS`).

    :param trace: a :class:`~.replay.trace.Trace` (e.g. of
        :func:`~.replay.trace_readers.read_sources` or :func:`~.replay.history.read_finished_jobs`),
        or the paths of SWF traces and PBS accounting logs to read
    :param target_under_pct: calibrated's and learned's target (None: v3's share)
    :param start_from_submit: paths read: a job without a start time starts at its submit
    :param priors: the starting tables of calibrated and learned (None: empty)
    :param consume: drop the trace's jobs as they are turned into columns (peak memory)
    :raises ValueError: an unknown predictor or moment
    """
    unknown = sorted(set(predictors) - set(ev.PREDICTORS))
    if unknown:
        raise ValueError(f"unknown predictors: {', '.join(unknown)}")
    if not isinstance(trace, Trace):
        trace = read_sources(list(trace), start_from_submit=start_from_submit)
        consume = True
    cols, skipped = ev.columns(trace.jobs, moment, release=consume)
    result = ev.replay_columns(
        cols, skipped, predictors, params, moment, target_under_pct, priors[0], priors[1]
    )
    targeted = any(name in ev.TARGETED for name in predictors)
    report = ev.report_dict(
        trace.source,
        result,
        ev.summarize(result),
        trace.skipped,
        target_under_pct if targeted else None,
        target_v3=targeted and target_under_pct is None,
    )
    return Evaluation(report, result, cols)


# ---------------------------------------------------------------------------------------
# The scheduler simulations


def pool_of(site: Optional[Site], procs: Optional[int] = None) -> Optional[int]:
    """The processors of the machine: the site's cpus (all its vnodes'), else ``procs``
    (the figures' machine size; with a site the policy simulations run on its vnodes,
    :mod:`.replay.site_model`).

    :raises ConfigError: both a site and ``procs`` that differ
    """
    if site is None:
        return procs
    if procs is not None and procs != site.ncpus:
        raise ConfigError(f"--procs {procs} and the site's {site.ncpus} cpus: give one")
    return site.ncpus


def load(
    paths: Sequence[str],
    procs: Optional[int] = None,
    max_input_bytes: Optional[int] = None,
    *,
    site: Optional[Site] = None,
) -> List[Loaded]:
    """Read traces for the simulations, each fitted to its machine: ``site``'s cpus, else
    ``procs`` processors, else its SWF MaxProcs header (PBS accounting logs need one). With
    a site, each job's queue and request too, where the trace has them (CERIT-SC's Alea
    columns); a job whose request no PBS select can say is then skipped, counted by reason,
    and the jobs are put on the site's model (:func:`.replay.site_model.site_run`: routed to
    its queues, the jobs no queue takes or no node pool holds skipped, counted), which
    :func:`policies`, :func:`search` and :func:`fit` then run on.

    :param max_input_bytes: at most this much of them all, decompressed (None: 1 GiB)
    :raises ConfigError: no machine size, or no job left to simulate
    :raises ParseError: a trace cannot be read
    """
    limits = InputLimits() if max_input_bytes is None else InputLimits(max_input_bytes)
    return runs.load(paths, pool_of(site, procs), limits, site is not None, site)


def _loaded(traces: Traces, site: Optional[Site] = None) -> List[Loaded]:
    paths = [t for t in traces if isinstance(t, str)]
    read = iter(runs.load(paths, pool_of(site), None, site is not None, site) if paths else [])
    return [next(read) if isinstance(t, str) else t for t in traces]


def fit(
    traces: Traces,
    policy: Optional[str] = None,
    *,
    options: Optional[SimOptions] = None,
    site: Optional[Site] = None,
) -> List[Optional[Fit]]:
    """Each trace's fit to its real starts (:mod:`.replay.fit`): ``policy`` (None: the
    site's settings, else fcfs-bf1) replayed with the users' walltimes (the soft walltimes
    the jobs had, where PBS accounting records them); None for a trace that records no
    start.

    :raises ValueError: a bad policy (the site's formula one the model cannot read)
    """
    if policy is None:
        s = site.scheduler if site is not None else None
        policy = (
            site_policy(s.job_sort_formula, s.backfill_depth, s.strict_ordering)
            if s
            else "fcfs-bf1"
        )
    opts = _options(options, site)
    return [runs.run_fit(t, policy, opts) for t in _loaded(traces, site)]


def _options(options: Optional[SimOptions], site: Optional[Site]) -> SimOptions:
    """``options`` (None: the defaults), with the site's fairshare (:attr:`SimOptions.
    fairshare`) when the site file turns ``fair_share`` on and the options name none.

    :raises ValueError: the site's fairshare would run no job
    """
    opts = options or SimOptions()
    if site is not None and opts.fairshare is None:
        opts = opts._replace(fairshare=fairshare.of_site(site.scheduler))
    return opts


def _baseline_first(names: Sequence[str]) -> List[str]:
    """The estimate sources, the users' walltimes first (the baseline).

    :raises ValueError: an unknown source
    """
    unknown = [n for n in names if n not in sim.SOURCE_NAMES]
    if unknown:
        raise ValueError(f"unknown estimate sources: {', '.join(unknown)}")
    return sorted(dict.fromkeys(names), key=lambda n: n != registry.USERS)


class Simulation(NamedTuple):
    """One trace's EASY simulation, once per estimate source (``softwalltime simulate``)."""

    trace: Loaded
    outcomes: List[EasyOutcome]
    options: SimOptions

    @property
    def path(self) -> str:
        return self.trace.path

    def as_json(self) -> Dict[str, Any]:
        return runs.easy_report(self.trace, self.outcomes, self.options)

    def format(self) -> str:
        return sim.format_table(self.as_json())

    def write_plots(self, directory: str) -> List[str]:
        """The wait and slowdown box plots in ``directory`` (matplotlib); the files."""
        return runs.write_easy_plots(self.trace, self.outcomes, directory, self.options.correction)


def simulate(
    traces: Traces,
    estimates: Sequence[str] = DEFAULT_ESTIMATES,
    *,
    options: Optional[SimOptions] = None,
    jobs: int = 1,
    site: Optional[Site] = None,
) -> List[Simulation]:
    """Simulate FCFS + EASY backfilling on each trace once per estimate source.

    :param site: the site (:mod:`.site_file`): its cpus as one pool (EASY backfilling is
        the literature's, on one pool; :func:`policies` and :func:`search` run the site)
    :raises ValueError: an unknown estimate source or a bad option
    """
    names, opts = _baseline_first(estimates), options or SimOptions()
    loaded = _loaded(traces, site)
    outcomes = runs.run_easy(loaded, names, opts, jobs)
    return [Simulation(t, o, opts) for t, o in zip(loaded, outcomes)]


def policies(
    traces: Traces,
    policies: Sequence[str],
    estimates: Sequence[str] = SEARCH_ESTIMATES,
    *,
    options: Optional[SimOptions] = None,
    bounds_h: Tuple[Optional[float], Optional[float]] = (None, None),
    jobs: int = 1,
    site: Optional[Site] = None,
) -> List[PolicyResult]:
    """Simulate PBS's scheduler on each trace once per policy (``SORT[-bfK|-strict|-greedy]``)
    and estimate source; recommend one.

    :param bounds_h: the bounds of the long jobs' p95 wait and the wide jobs' longest wait,
        hours (None: the users' walltimes' under the first policy, 3 x theirs)
    :param site: the site (:mod:`.site_file`): its vnodes, queues and limits
        (:mod:`.replay.site_model`)
    :raises ValueError: an unknown estimate source or a bad policy
    """
    names = _baseline_first(estimates)
    opts = _options(options, site)
    return runs.run_policies(_loaded(traces, site), policies, names, opts, bounds_h, jobs)


def search(
    traces: Traces,
    estimates: Sequence[str] = SEARCH_ESTIMATES,
    *,
    options: Optional[SimOptions] = None,
    p95_tolerance_pct: float = runs.TOLERANCES.p95_pct,
    max_factor: float = runs.TOLERANCES.max_factor,
    goal_pct: float = formula_search.GOAL_PCT,
    jobs: int = 1,
    progress: Optional[Progress] = None,
    site: Optional[Site] = None,
) -> List[SearchResult]:
    """Search job_sort_formulas for each trace: tuned on its first half, checked on its
    second, against fcfs-bf1 with the users' walltimes, or with ``options.fairshare`` the site's
    fairshare-bf1 (:mod:`.replay.formula_search`).

    Long because it is a front door: each tolerance, and the site, is a keyword of its own.

    :param progress: called with (done, total, phase) as the simulations end
    :param site: the site (:mod:`.site_file`): its vnodes, queues and limits
        (:mod:`.replay.site_model`)
    :raises ValueError: an unknown estimate source
    """
    names = _baseline_first(estimates)
    tol = fm.Tolerances(p95_tolerance_pct, max_factor)
    opts = _options(options, site)
    return runs.run_search(_loaded(traces, site), names, opts, tol, goal_pct, jobs, progress)


def search_folds(
    traces: Traces,
    folds: int,
    estimates: Sequence[str] = SEARCH_ESTIMATES,
    *,
    options: Optional[SimOptions] = None,
    p95_tolerance_pct: float = runs.TOLERANCES.p95_pct,
    max_factor: float = runs.TOLERANCES.max_factor,
    goal_pct: float = formula_search.GOAL_PCT,
    jobs: int = 1,
    progress: Optional[Progress] = None,
    site: Optional[Site] = None,
    narrow: bool = False,
) -> List[FoldResult]:
    """:func:`search` across ``folds`` folds in time: tuned on folds 1..k, checked on fold
    k+1, and the pick that held on the most next folds (:mod:`.replay.folds`).

    Long because it is a front door: :func:`search`'s keywords and the folds'.

    :param narrow: each step after the first tunes only what the previous step ran on its
        next fold (cheaper)
    :raises ValueError: an unknown estimate source, a bad fold count or folds too small
    """
    names = _baseline_first(estimates)
    tol = fm.Tolerances(p95_tolerance_pct, max_factor)
    opts = _options(options, site)
    plan = runs.FoldPlan(folds, tol, goal_pct, narrow)
    return runs.run_folds(_loaded(traces, site), names, opts, plan, jobs, progress)


# ---------------------------------------------------------------------------------------
# Start-time predictions


class StartOptions(NamedTuple):
    """What ``eval-start`` measures (the defaults are the command's)."""

    policy: str = "fcfs-bf1"
    """The site's sort and backfilling, as :func:`policies` names them (no rank sort)."""
    estimates: str = "v3"
    """The soft walltimes the site runs with (an estimate source, not perfect)."""
    first: int = 10_001
    """The first target job (1-based)."""
    targets: int = 40_000
    """Target jobs from ``first`` on ..."""
    predictions: int = 2000
    """... at most this many of them, evenly spread."""
    samples: int = DEFAULT_SAMPLES
    """Forward runs per prediction."""
    seed: int = 1


class StartTimes(NamedTuple):
    """Start-time predictions (P50/P90, PBS's estimate) against a trace's simulated truth."""

    report: Dict[str, Any]

    def as_json(self) -> Dict[str, Any]:
        return self.report

    def format(self) -> str:
        return se.format_figures(self.report)


def start_times(
    path: str,
    options: StartOptions = StartOptions(),  # noqa: B008 - an immutable NamedTuple
    *,
    procs: Optional[int] = None,
    max_input_bytes: Optional[int] = None,
    progress: Optional[Any] = None,
    site: Optional[Site] = None,
) -> StartTimes:
    """Predict the start of a trace's target jobs on PBS's scheduler model and measure the
    predictions against the simulated start times (``softwalltime eval-start``).

    :param procs: the machine's processors (None: the SWF MaxProcs header)
    :param progress: called with (predictions done, predictions)
    :raises ValueError: a bad policy, or one that sorts by the rank
    :raises ConfigError: no machine size, or no target job
    """
    from .replay import pbsched
    from .replay import sim_workload as wl
    from .replay.sources import make_source

    policy = pbsched.parse_policy(options.policy)
    if pbsched.sort_formula(policy.job_sort_formula).reads_rank:
        raise ValueError("a sort reading softwalltime_rank is not evaluated here")
    if pbsched.reads_fairshare(policy):
        raise ValueError("fairshare is modelled by simulate only, not by eval-start")
    limits = InputLimits() if max_input_bytes is None else InputLimits(max_input_bytes)
    work = wl.read_workload(path, limits, site_columns=site is not None)
    procs = pool_of(site, procs) or work.machine_procs
    if not procs:
        raise ConfigError(f"{path}: no machine size in the trace: give --procs")
    work = wl.fit_machine(work, procs)
    model: Optional[SiteModel] = None
    extra: Dict[str, Any] = {}
    if site is not None:  # the site model, end to end (issue 46)
        try:
            work, model, dropped = site_run(site, work)
        except ValueError as err:
            raise ConfigError(f"{path}: {err}") from err
        extra = {"model": se.describe(model), "skipped_by_reason": dropped}
    o = options
    targets = se.target_jobs(len(work.submit), o.first, o.targets, o.predictions)
    if not targets:
        raise ConfigError(f"{path}: {len(work.submit):,} usable jobs, none from job {o.first:,} on")
    began = time.perf_counter()
    truth = se.ground_truth(work, make_source(o.estimates), procs, policy, model)
    preds = se.predict_targets(work, truth, procs, policy, targets, o.samples, o.seed, progress)
    preds = se.with_pqstar(preds, work, truth, procs)
    seconds = time.perf_counter() - began
    return StartTimes(
        {
            "source": path,
            "policy": policy.name,
            "estimates": o.estimates,
            "procs": procs,
            **extra,
            "jobs": len(work.submit),
            "predictions": len(preds),
            "samples": o.samples,
            "seconds": round(seconds, 1),
            "figures": se.figures(preds),
        }
    )


# ---------------------------------------------------------------------------------------
# The report


class Report(NamedTuple):
    """What soft walltimes did (``softwalltime report``): the figures and their scope."""

    data: Dict[str, Any]
    meta: Dict[str, Any]

    def as_json(self) -> Dict[str, Any]:
        return {"meta": self.meta, **self.data}

    def to_json(self) -> str:
        """``report --json``'s text (times as ISO 8601)."""
        from .report import build

        return build.to_json(self.data, self.meta)

    def html(self) -> str:
        """The page ``report`` writes."""
        from .report import html

        return html.render(self.data, self.meta)


def report(
    dsn: str,
    *,
    deployed_at: Optional[dt.datetime] = None,
    since: Optional[dt.datetime] = None,
    until: Optional[dt.datetime] = None,
    server: Optional[str] = None,
    queue: Optional[str] = None,
    check: Optional[Callable[[Any], None]] = None,
    procs: Optional[int] = None,
) -> Report:
    """Collect the report's figures from the database at ``dsn`` in one snapshot
    (REPEATABLE READ: the figures agree with each other).

    :param check: called with the connection first (e.g. that the role may create
        temporary tables, which the report needs)
    :param procs: the machine's processors: the report then has the section "what the
        policy did" (:func:`policy_effect`)
    :raises DatabaseError: the database cannot be read
    """
    from .db import engine as db
    from .report import build

    with db.connect(db.make_engine(dsn), dsn) as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
        if check is not None:
            check(conn)
        data, meta = build.make_report(conn, deployed_at, since, until, server, queue)
        if procs is not None:
            data["policy_effect"] = policy_effect(conn, procs, until=until, server=server)
    return Report(data, meta)


# ---------------------------------------------------------------------------------------
# What the policy did, and the guard (issue 48)

WARMUP_S = 2 * 86400  # jobs replayed before the period, so that it does not start empty


def policy_effect(
    conn: Any,
    procs: int,
    *,
    until: Optional[dt.datetime] = None,
    server: Optional[str] = None,
    days: Optional[float] = None,
) -> Dict[str, Any]:
    """The jobs that ran under the current policy (the last ``days`` of it, if given),
    replayed under it and under the previous one on a pool of ``procs`` processors
    (:mod:`.replay.counterfactual`): per group, real against model figures, and the fit.

    :param conn: a SQLAlchemy connection to the history
    :raises DatabaseError: the history cannot be read
    """
    from .replay import counterfactual as cf
    from .replay import history

    records = history.read_policy_changes(conn)
    if not records:
        return {
            "note": "no policy recorded yet ('softwalltime policy apply' or 'status' records it)"
        }
    now = until or dt.datetime.now(dt.timezone.utc)
    last = records[-1]
    since = last.changed_at
    if days is not None:
        since = max(since, now - dt.timedelta(days=days))
    before = last.before if last.before is not None else (
        records[-2].after if len(records) > 1 else None
    )  # fmt: skip
    rows = history.read_period(conn, since, now, WARMUP_S, server)
    period, wide = cf.period_of(rows, procs)
    try:
        current = cf.policy_of(last.after)
        previous = cf.policy_of(before) if before is not None else None
    except ValueError as err:
        return {"note": f"the policy cannot be modelled: {err}"}
    out = cf.compare(period, current, previous)
    out.update(since=since.isoformat(), until=now.isoformat(), wider_than_machine=wide)
    return out


class Guard(NamedTuple):
    """The guard's verdict: the tolerances broken (empty: it holds) and the comparison."""

    broken: List[str]
    comparison: Dict[str, Any]


def policy_guard(dsn: str, procs: int, days: float, tolerances: Optional[Any] = None) -> Guard:
    """The last ``days`` of the current policy against the counterfactual, judged against
    ``tolerances`` (:class:`.replay.counterfactual.Tolerances`; default the module's)."""
    from .db import engine as db
    from .replay import counterfactual as cf

    with db.connect(db.make_engine(dsn), dsn) as conn:
        comparison = policy_effect(conn, procs, days=days)
    return Guard(cf.judge(comparison, tolerances or cf.Tolerances()), comparison)
