"""The runs of ``softwalltime simulate``, for the CLI and :mod:`softwalltime.api`.

The traces are read and fitted to their machine (:func:`load`); then one of:

- :func:`run_easy`: FCFS + EASY backfilling (:mod:`.simulate`) once per estimate source;
- :func:`run_policies`: PBS's scheduler (:mod:`.pbsched`) once per policy x source, the
  recommendation of :mod:`.search`;
- :func:`run_search`: the formula search of :mod:`.tune` in three phases (every candidate
  on the first half; the best again with more top jobs; those worth it on the second half).

Every simulation is a task of :func:`.parallel.fork_map`: its workers get the traces and
the one :class:`SimOptions` as arguments.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..core import registry
from ..core.calibrated import DEFAULT_TARGET_UNDER_PCT
from ..core.predict import PredictorParams
from ..errors import ConfigError
from ..site_file import Site
from . import fairshare as fs
from . import fit as fit_mod
from . import folds as folds_mod
from . import formula as fm
from . import formula_search, pbsched
from . import policies as srch
from . import simulate as sim
from .easy import Refresh, SimResult
from .parallel import fork_map
from .sim_workload import SimWorkload, take
from .site_model import SiteModel, put_on_site
from .sources import RecordedSource
from .trace_readers import InputLimits

log = logging.getLogger(__name__)

TOLERANCES = fm.Tolerances()  # the formula search's default tolerances

Progress = Callable[[int, int, str], None]
"""Called with (simulations done, simulations of the phase, the phase: "1/3" ...)."""


class SimOptions(NamedTuple):
    """What the simulations of one run share (the defaults are the CLI's)."""

    params: Optional[PredictorParams] = None
    """The predictors' parameters (None: their defaults)."""
    target_under_pct: Optional[float] = DEFAULT_TARGET_UNDER_PCT
    """calibrated's and learned's target (None: as many under-estimates as v3)."""
    correction: str = "pbs"
    # the EASY simulation (run_easy)
    backfill_depth: int = 1
    sjbf: bool = False
    lazy_corrections: bool = False
    refresh: Optional[Refresh] = None
    # PBS's scheduler (run_policies, run_search)
    scheduler_iteration: int = pbsched.DEFAULT_ITERATION_S
    backfill_by: str = pbsched.ESTIMATE
    classes: str = pbsched.CLASSES_PBS
    backfill_fuzzy: int = pbsched.DEFAULT_FUZZY_S
    rank_refresh_s: int = pbsched.DEFAULT_RANK_REFRESH_S
    rank_by: str = pbsched.RANK_BY[0]
    fairshare: Optional[fs.Settings] = None
    """The site's fairshare (sched_config's ``fair_share`` and its tree): on under every
    policy simulated, as PBS keeps it on whatever ``job_sort_formula`` the admin sets
    (the formula first, fairshare within equal values, sort.cpp:735-770). None: none, but
    for the sort ``fairshare`` (a flat tree of the users with equal shares)."""

    def rules(self, policy: str) -> pbsched.Policy:
        """The PBS policy ``policy`` under these options' scheduler rules (with
        :attr:`fairshare`, its fairshare).

        :raises ValueError: not a policy
        """
        rules = pbsched.parse_policy(
            policy, self.scheduler_iteration, self.backfill_by, self.classes, self.backfill_fuzzy
        )
        if self.fairshare is not None:
            rules = rules._replace(fairshare=self.fairshare)
        return rules

    def source(self, name: str) -> Any:
        """A new estimate source ``name`` (each simulation has its own)."""
        return sim.make_source(name, self.params, self.target_under_pct)


class Loaded(NamedTuple):
    """A trace read and fitted to its machine."""

    path: str
    work: SimWorkload
    procs: int
    model: Optional[SiteModel] = None
    """The site model the policy simulations run on (None: one pool of ``procs``); then
    ``work`` is on the site (:func:`.site_model.site_run`)."""

    def machine(self, work: SimWorkload) -> Tuple[Any, Any]:
        """``simulate_pbs``'s ``model`` and ``site`` for ``work`` (this trace's, or part of
        it): a fresh site model, or (None, None): the pool."""
        return self.model.build(work) if self.model is not None else (None, None)

    def describe(self) -> str:
        """What the model is (the fit's line)."""
        if self.model is not None:
            return self.model.describe()
        return f"one pool of {self.procs} cpus"


def load(
    paths: Sequence[str],
    procs: Optional[int] = None,
    limits: Any = None,
    site_columns: bool = False,
    site: Optional[Site] = None,
) -> List[Loaded]:
    """Read each trace, fitted to its machine (``procs``, else its MaxProcs header); with
    ``site_columns``, each job's queue and request where the trace has them
    (:func:`.sim_workload.read_workload`); with ``site``, put on the site's model
    (:func:`.site_model.site_run`: routed, its chunks, the jobs no pool holds dropped).

    :param limits: an :class:`~.trace_readers.InputLimits` for all of them together (they are all
        kept in memory); None: its defaults
    :raises ConfigError: no machine size, or no job left to simulate
    :raises ParseError: a trace cannot be read
    """
    limits = InputLimits() if limits is None else limits
    out = []
    for path in paths:
        work = sim.read_workload(path, limits, site_columns)
        machine: Optional[int] = procs or work.machine_procs
        if machine is None:
            raise ConfigError(f"{path}: no MaxProcs header: give the machine size with --procs N")
        work = sim.fit_machine(work, machine)
        try:
            work, model = put_on_site(site, work)
        except ValueError as err:
            raise ConfigError(f"{path}: {err}") from err
        if not work.submit:
            raise ConfigError(f"{path}: no job to simulate")
        out.append(Loaded(path, work, machine, model))
    return out


def _name(trace: Loaded) -> str:
    return os.path.basename(trace.path.rstrip("/"))


# ---------------------------------------------------------------------------------------
# EASY backfilling, once per estimate source


class EasyOutcome(NamedTuple):
    """One estimate source simulated on one trace."""

    source: str
    result: SimResult
    summary: Dict[str, Any]
    elapsed_s: float


def _easy_one(shared: Tuple[Sequence[Loaded], SimOptions], task: Tuple[int, str]) -> EasyOutcome:
    traces, opts = shared
    i, name = task
    work = traces[i].work
    source = opts.source(name)
    started = time.perf_counter()
    result = sim.simulate(
        work,
        source,
        traces[i].procs,
        opts.correction,
        opts.backfill_depth,
        opts.sjbf,
        opts.refresh,
        opts.lazy_corrections,
    )
    elapsed = time.perf_counter() - started
    return EasyOutcome(name, result, sim.summarize(work, result, source), elapsed)


def run_easy(
    traces: Sequence[Loaded], names: Sequence[str], opts: SimOptions, jobs: int = 1
) -> List[List[EasyOutcome]]:
    """Each trace's outcomes, one per estimate source of ``names`` in that order."""
    tasks = [(i, name) for i in range(len(traces)) for name in names]
    flat = fork_map(_easy_one, (traces, opts), tasks, jobs)
    out = [flat[i * len(names) : (i + 1) * len(names)] for i in range(len(traces))]
    for trace, mine in zip(traces, out):
        for o in mine:
            log.info(
                "%s: %s: %.2f s, %.0f jobs/s",
                _name(trace),
                o.source,
                o.elapsed_s,
                len(trace.work.submit) / o.elapsed_s if o.elapsed_s > 0 else 0.0,
            )
    return out


def easy_report(trace: Loaded, outcomes: Sequence[EasyOutcome], opts: SimOptions) -> Dict[str, Any]:
    """One trace's report: ``simulate --json``'s object, :func:`.simulate.format_table`'s
    input."""
    work = trace.work
    return {
        "source": trace.path,
        "procs": trace.procs,
        "jobs": len(work.submit),
        "skipped": sum(work.skipped.values()),
        "skipped_by_reason": work.skipped,
        "correction": opts.correction,
        "backfill_depth": opts.backfill_depth,
        "sjbf": opts.sjbf,
        "lazy_corrections": opts.lazy_corrections,
        "refresh_every_min": opts.refresh.every_s // 60 if opts.refresh else None,
        "sources": {o.source: o.summary for o in outcomes},
    }


def write_easy_plots(
    trace: Loaded, outcomes: Sequence[EasyOutcome], directory: str, correction: str
) -> List[str]:
    """The box plots of one trace's outcomes in ``directory`` (matplotlib); the files."""
    from .plots import write_simulation_plots

    results = {o.source: o.result for o in outcomes}
    title = _name(trace) + f" ({correction} correction)"
    return write_simulation_plots(trace.work, results, directory, title=title)


# ---------------------------------------------------------------------------------------
# PBS's policies


class PolicyResult(NamedTuple):
    """One trace's policy search (``simulate --policies``)."""

    path: str
    procs: int
    rows: List[srch.Figures]
    """One per policy x estimate source, in that order."""
    best: Optional[srch.Figures]
    rules: pbsched.Policy
    """fcfs under the run's scheduler rules (what the report names)."""
    rank_refresh_s: int
    long_p95_bound_h: Optional[float]
    wide_max_bound_h: Optional[float]
    fit: Optional[fit_mod.Fit] = None
    """The fit of the site's current policy to the real starts, if the trace has them."""
    withheld: str = ""
    """Why the recommendation's PBS settings are not printed ("": they are)."""

    def as_json(self) -> Dict[str, Any]:
        limits = srch.bounds(self.rows, self.long_p95_bound_h, self.wide_max_bound_h)
        obj = srch.as_json(
            self.rows, self.best, self.rules, self.rank_refresh_s, limits, self.withheld
        )
        obj["source"] = self.path
        obj["fit"] = None if self.fit is None else self.fit.as_json()
        return obj

    def format(self) -> str:
        title = f"source: {self.path}   machine: {self.procs} processors"
        return srch.format_search(
            title,
            self.rows,
            self.best,
            self.long_p95_bound_h,
            self.rules,
            self.rank_refresh_s,
            self.wide_max_bound_h,
            self.withheld,
        )


def _policy_one(
    shared: Tuple[Sequence[Loaded], SimOptions], task: Tuple[int, str, str]
) -> Tuple[srch.Figures, float]:
    traces, opts = shared
    i, policy, name = task
    work = traces[i].work
    parsed = opts.rules(policy)
    ranker = None
    if pbsched.sort_formula(parsed.job_sort_formula).reads_rank:
        # the rank is the same for every source; perfect estimates come with a perfect rank
        perfect = name == sim.PERFECT
        refresh = opts.rank_refresh_s
        ranker = pbsched.PerfectRanker() if perfect else pbsched.make_ranker(opts.rank_by, refresh)
    started = time.perf_counter()
    model, order = traces[i].machine(work)
    result = pbsched.simulate_pbs(
        work, opts.source(name), traces[i].procs, parsed, opts.correction, ranker=ranker,
        model=model, site=order,
    )  # fmt: skip
    figures = srch.figures(
        srch.fair_name(policy, parsed), work, result, ranker.name if ranker else ""
    )
    return figures, time.perf_counter() - started


def run_policies(
    traces: Sequence[Loaded],
    policies: Sequence[str],
    names: Sequence[str],
    opts: SimOptions,
    bounds_h: Tuple[Optional[float], Optional[float]] = (None, None),
    jobs: int = 1,
) -> List[PolicyResult]:
    """Each trace's policy search: every policy x estimate source on PBS's scheduler.

    :param bounds_h: the long jobs' p95 wait and the wide jobs' longest wait bounds, hours
        (None: :func:`.search.bounds`' defaults)
    :raises ValueError: not a policy
    """
    for policy in policies:
        pbsched.parse_policy(policy)
    tasks = [(i, pol, name) for i in range(len(traces)) for pol in policies for name in names]
    outcomes = fork_map(_policy_one, (traces, opts), tasks, jobs)
    out = []
    for i, trace in enumerate(traces):
        mine = [o for t, o in zip(tasks, outcomes) if t[0] == i]
        for f, elapsed in mine:
            log.info("%s: %s %s: %.2f s", _name(trace), f.policy, f.source, elapsed)
        rows = [f for f, _e in mine]
        best = srch.recommend(rows, *bounds_h)
        rules = opts.rules("fcfs")
        out.append(
            PolicyResult(trace.path, trace.procs, rows, best, rules, opts.rank_refresh_s, *bounds_h)
        )
    return out


# ---------------------------------------------------------------------------------------
# The fit to real starts


def run_fit(trace: Loaded, policy: str, opts: SimOptions) -> Optional[fit_mod.Fit]:
    """The site's current ``policy`` replayed with the users' walltimes (the soft walltimes
    the jobs had, where the trace records them) against the trace's real starts
    (:mod:`.fit`); None when the trace records no start.

    :raises ValueError: not a policy
    """
    work = trace.work
    if work.real_start is None or all(s < 0 for s in work.real_start):
        return None
    rules = opts.rules(policy)
    source = RecordedSource() if work.recorded_soft is not None else opts.source(registry.USERS)
    model, order = trace.machine(work)
    result = pbsched.simulate_pbs(
        work, source, trace.procs, rules, opts.correction, model=model, site=order
    )
    queue = work.site.queue if work.site is not None else None
    name = trace.describe()
    fit = fit_mod.measure(rules.name, name, work.submit, work.real_start, result.start, queue)
    return fit._replace(estimates=source.name)


# ---------------------------------------------------------------------------------------
# The formula search


class SearchResult(NamedTuple):
    """One trace's formula search (``simulate --search``)."""

    path: str
    procs: int
    half_jobs: Tuple[int, int]
    report: formula_search.Report
    rules: pbsched.Policy
    rank_refresh_s: int
    fit: Optional[fit_mod.Fit] = None
    """The fit of the site's current policy to the real starts, if the trace has them."""
    withheld: str = ""
    """Why the recommendation's PBS settings are not printed ("": they are)."""

    def as_json(self) -> Dict[str, Any]:
        rep = formula_search.as_json(
            self.report, self.procs, self.rules, self.rank_refresh_s, self.withheld
        )
        return dict(rep, source=self.path, fit=None if self.fit is None else self.fit.as_json())

    def format(self) -> str:
        title = (
            f"source: {self.path}   machine: {self.procs} processors   jobs: first half "
            f"{self.half_jobs[0]}, second half {self.half_jobs[1]}"
        )
        return formula_search.format_report(
            title, self.report, self.procs, self.rules, self.rank_refresh_s, self.withheld
        )

    def write_plot(self, directory: str) -> str:
        """The front's plot (:data:`.tune.FRONT_PNG`) in ``directory``; its path."""
        return formula_search.write_plot(self.report, directory, os.path.basename(self.path))


class _Tune(NamedTuple):
    # what a formula search's workers share: each phase's candidates as they are then
    halves: List[Tuple[SimWorkload, SimWorkload]]
    procs: List[int]
    models: List[Optional[SiteModel]]
    candidates: Tuple[fm.Candidate, ...]
    rules: pbsched.Policy
    opts: SimOptions


Key = Tuple[int, int, int]
"""(trace, half, candidate; -1: the baseline)."""


def _tune_one(shared: _Tune, task: Key) -> Tuple[Key, fm.Waits]:
    i, half, k = task
    cand = None if k < 0 else shared.candidates[k]
    opts = shared.opts
    waits = formula_search.simulate(
        shared.halves[i][half],
        shared.procs[i],
        cand,
        shared.rules,
        opts.source,
        opts.rank_refresh_s,
        opts.correction,
        shared.models[i],
    )
    return task, waits


def _phase(
    shared: _Tune, tasks: List[Key], jobs: int, phase: str, progress: Optional[Progress]
) -> Dict[Key, fm.Waits]:
    if progress is None:
        return dict(fork_map(_tune_one, shared, tasks, jobs))
    show = progress
    show(0, len(tasks), phase)
    return dict(fork_map(_tune_one, shared, tasks, jobs, lambda n: show(n, len(tasks), phase)))


def _tune_phases(
    shared: _Tune, tol: fm.Tolerances, jobs: int, progress: Optional[Progress]
) -> Tuple[Dict[Key, fm.Waits], List[fm.Candidate]]:
    # Every candidate on the first half (and the baseline on both); the first half's best
    # again with more top jobs (formula_search.deeper: after the grid's, run on their trace only);
    # then those worth it (formula_search.checked) on the second half. The figures by key, a
    # candidate not run on a trace has no key there; and the candidates, the grid's then
    # the deeper ones.
    cands = list(shared.candidates)
    grid, traces = len(cands), range(len(shared.procs))
    # the slowest first (a predictor, the rank), so that the pool ends together
    order = sorted(range(grid), key=lambda k: cands[k].source == "users")
    tasks = [(p, h, -1) for p in traces for h in (0, 1)] + [
        (p, 0, k) for p in traces for k in order
    ]
    got = _phase(shared, tasks, jobs, "1/3", progress)
    index: Dict[fm.Candidate, int] = {}
    deep = []
    for p in traces:
        for k in formula_search.deeper([got[(p, 0, k)] for k in range(grid)]):
            cand = cands[k]._replace(depth=fm.DEEPER_DEPTH)
            if cand not in index:
                index[cand] = len(cands)
                cands.append(cand)
            deep.append((p, 0, index[cand]))
    got.update(_phase(shared._replace(candidates=tuple(cands)), deep, jobs, "2/3", progress))
    second = []
    for p in traces:
        run = [k for k in range(len(cands)) if (p, 0, k) in got]
        firsts = [got[(p, 0, k)] for k in run]
        # with fairshare, the best with and without the rank key too (what the rank adds)
        keys = None
        if formula_search.fairshare(shared.rules):
            keys = [cands[k].params.key for k in run]
        picks = formula_search.checked(got[(p, 0, -1)], firsts, tol, keys)
        second += [(p, 1, run[i]) for i in picks]
    got.update(_phase(shared._replace(candidates=tuple(cands)), second, jobs, "3/3", progress))
    return got, cands


def run_search(
    traces: Sequence[Loaded],
    names: Sequence[str],
    opts: SimOptions,
    tol: fm.Tolerances = TOLERANCES,
    goal_pct: float = formula_search.GOAL_PCT,
    jobs: int = 1,
    progress: Optional[Progress] = None,
) -> List[SearchResult]:
    """Each trace's formula search over the candidates of ``names`` (perfect left out),
    against fcfs-bf1 with the users' walltimes (with ``opts.fairshare``, fairshare-bf1, the
    site's ordering); see :mod:`.formula_search`."""
    rules = opts.rules(formula_search.BASELINE_POLICY)
    halves = [formula_search.halves(t.work) for t in traces]
    fair = formula_search.fairshare(rules)
    candidates = tuple(fm.candidates([n for n in names if n != sim.PERFECT], fair))
    models = [t.model for t in traces]
    shared = _Tune(halves, [t.procs for t in traces], models, candidates, rules, opts)
    started = time.monotonic()
    got, cands = _tune_phases(shared, tol, jobs, progress)
    log.info("search: %d simulations in %.0f s", len(got), time.monotonic() - started)
    out = []
    for i, trace in enumerate(traces):
        rows = [
            formula_search.Row(
                c, fm.expression(c.params, trace.procs), got[(i, 0, k)], got.get((i, 1, k))
            )
            for k, c in enumerate(cands)
            if (i, 0, k) in got
        ]
        rep = formula_search.assess((got[(i, 0, -1)], got[(i, 1, -1)]), rows, tol, goal_pct)
        sizes = (len(halves[i][0].submit), len(halves[i][1].submit))
        out.append(SearchResult(trace.path, trace.procs, sizes, rep, rules, opts.rank_refresh_s))
    return out


# ---------------------------------------------------------------------------------------
# The formula search across folds in time


class FoldResult(NamedTuple):
    """One trace's formula search across folds (``simulate --search --folds K``)."""

    path: str
    procs: int
    report: folds_mod.FoldReport
    rules: pbsched.Policy
    """The baseline's rules: fcfs-bf1, or fairshare-bf1 with the site's fair_share."""

    def as_json(self) -> Dict[str, Any]:
        return dict(
            folds_mod.as_json(self.report),
            source=self.path,
            baseline_policy=formula_search.baseline_name(self.rules),
        )

    def format(self) -> str:
        title = (
            f"source: {self.path}   machine: {self.procs} processors\n"
            f"baseline: {formula_search.baseline_text(self.rules)}"
        )
        return folds_mod.format_report(title, self.report)


def _step(
    shared: _Tune,
    k: int,
    tol: fm.Tolerances,
    goal_pct: float,
    jobs: int,
    progress: Optional[Progress],
) -> folds_mod.Step:
    # one step's search: shared holds its one (tuning folds, next fold) pair
    got, cands = _tune_phases(shared, tol, jobs, progress)
    procs = shared.procs[0]
    rows = [
        formula_search.Row(c, fm.expression(c.params, procs), got[(0, 0, j)], got.get((0, 1, j)))
        for j, c in enumerate(cands)
        if (0, 0, j) in got
    ]
    rep = formula_search.assess((got[(0, 0, -1)], got[(0, 1, -1)]), rows, tol, goal_pct)
    pair = shared.halves[0]
    return folds_mod.Step(k, (len(pair[0].submit), len(pair[1].submit)), rep)


def _narrowed(step: folds_mod.Step) -> Tuple[fm.Candidate, ...]:
    # --fold-narrow: the candidates the step ran on its next fold, at the grid's depth
    out: List[fm.Candidate] = []
    for r in step.report.rows:
        c = r.candidate._replace(depth=1)
        if r.second is not None and c not in out:
            out.append(c)
    return tuple(out)


class FoldPlan(NamedTuple):
    """How a search across folds runs (``simulate --search --folds K``)."""

    folds: int
    tolerances: fm.Tolerances = TOLERANCES
    goal_pct: float = formula_search.GOAL_PCT
    narrow: bool = False
    """Each step after the first tunes only what the previous step ran on its next fold."""


def _fold_pairs(trace: Loaded, folds: int) -> List[Tuple[SimWorkload, SimWorkload]]:
    # per step k = 1..folds-1: (folds 1..k, fold k+1)
    at = folds_mod.bounds(len(trace.work.submit), folds)
    work = trace.work
    return [
        (take(work, range(0, at[k])), take(work, range(at[k], at[k + 1]))) for k in range(1, folds)
    ]


def _fold_trace(
    trace: Loaded,
    grid: Tuple[fm.Candidate, ...],
    opts: SimOptions,
    plan: FoldPlan,
    jobs: int,
    progress: Optional[Progress],
) -> FoldResult:
    rules = opts.rules(formula_search.BASELINE_POLICY)
    tol = plan.tolerances
    pairs = _fold_pairs(trace, plan.folds)
    steps: List[folds_mod.Step] = []
    cands = grid
    for k, pair in enumerate(pairs, start=1):
        shared = _Tune([pair], [trace.procs], [trace.model], cands, rules, opts)
        steps.append(_step(shared, k, tol, plan.goal_pct, jobs, progress))
        if plan.narrow:
            cands = _narrowed(steps[-1])
    # the steps' picks on the next folds their own step did not run them on
    conts = tuple(folds_mod.contenders(steps))
    shared = _Tune(
        pairs, [trace.procs] * len(pairs), [trace.model] * len(pairs), conts, rules, opts
    )
    tasks = [(k - 1, 1, conts.index(c)) for k, c in folds_mod.missing(steps)]
    got = _phase(shared, tasks, jobs, "next folds", progress)
    on_next = {(i + 1, conts[j]): w for (i, _h, j), w in got.items()}
    rep = folds_mod.assess(plan.folds, steps, on_next, tol, plan.narrow)
    return FoldResult(trace.path, trace.procs, rep, rules)


def run_folds(
    traces: Sequence[Loaded],
    names: Sequence[str],
    opts: SimOptions,
    plan: FoldPlan,
    jobs: int = 1,
    progress: Optional[Progress] = None,
) -> List[FoldResult]:
    """Each trace's formula search across ``plan.folds`` folds in time (:mod:`.folds`).

    :raises ValueError: a bad fold count, or folds too small (:func:`.folds.bounds`)
    """
    for t in traces:
        folds_mod.bounds(len(t.work.submit), plan.folds)
    fair = formula_search.fairshare(opts.rules(formula_search.BASELINE_POLICY))
    grid = tuple(fm.candidates([n for n in names if n != sim.PERFECT], fair))
    return [_fold_trace(t, grid, opts, plan, jobs, progress) for t in traces]
