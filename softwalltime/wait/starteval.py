"""Start-time predictions measured on a trace (issue 35; pure: no database, no PBS).

The ground truth is the PBS scheduler model (:func:`..replay.pbsched.simulate_pbs`) run on
the whole trace with the real run times and the site's soft walltimes (an estimate source
such as v3). At the submit of each target job, the queue and the running jobs of that run
(:class:`.starttime.QueueSnapshot`) and the histories of the jobs ended by then are handed to
the predictors, which know nothing later:

* ``PBS``: PBS's method (:func:`.starttime.pbs_estimate`), every job runs its soft walltime;
* ``median``: every job runs the median of what its kind ran (one forward run);
* ``P50``: the median start of :data:`.starttime.DEFAULT_SAMPLES` forward runs with sampled
  run times (:func:`.starttime.start_quantiles`), with an upper bound ``P90``: their P90
  widened by a learned correction (:class:`.starttime.Widening`, from the predictions
  whose job has started by now, per wait class: the forward runs know no later arrival,
  so their spread alone covers too few starts).

Figures per method: the share of targets whose real start lies within 1 min, 10 min and
1 h of the prediction, for all targets and for those that waited >= 10 min, and the P90's
coverage (the share of starts at or before it).
"""

from __future__ import annotations

import heapq
import random
import statistics
from collections import deque
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..replay import pbsched
from ..replay.machine import CycleResources, MachineModel, Where
from ..replay.rank import UserHistory
from ..replay.sim_workload import SimWorkload, take
from ..replay.site_model import SiteModel
from ..replay.sources import EstimateSource
from .pqstar import WaitParams, replay_waits
from .starttime import (
    DEFAULT_SAMPLES,
    SITE_RATIOS,
    Lazy,
    QueuedJob,
    QueueSnapshot,
    RunningJob,
    RunSampler,
    SiteMachine,
    Widening,
    forward_start,
    start_quantiles,
)
from .workload import WaitJob

METHODS = ("PBS", "median", "P50", "PQStar", "IBL")
_FIELDS = {"PBS": "pbs", "median": "median", "P50": "p50", "PQStar": "pqstar", "IBL": "ibl"}
WITHIN_S = (60, 600, 3600)
LONG_WAIT_S = 600  # "jobs that waited >= 10 min": immediate starts are easy
MAX_PREDICTIONS = 100_000


class RecordingSource(EstimateSource):
    """Another source's estimates, recorded: each job's soft walltime at submit and at start
    (what PBS's calendar and the forward runs plan with)."""

    def __init__(self, inner: EstimateSource) -> None:
        self.inner = inner
        self.name = inner.name
        self.refreshable = inner.refreshable

    def bind(self, work: SimWorkload) -> None:
        self.work = work
        self.inner.bind(work)
        self.at_submit = [0] * len(work.submit)
        self.at_start = [0] * len(work.submit)

    def on_submit(self, j: int, now: int) -> int:
        self.at_submit[j] = value = self.inner.on_submit(j, now)
        return value

    def on_start(self, j: int, now: int) -> int:
        self.at_start[j] = value = self.inner.on_start(j, now)
        return value

    def on_end(self, j: int, now: int) -> None:
        self.inner.on_end(j, now)

    def on_refresh(self, j: int, now: int) -> int:
        return self.inner.on_refresh(j, now)


class Truth(NamedTuple):
    """The ground-truth run: starts and the soft walltimes the scheduler had; on a site
    model (``site``, where the predictions run too), where each job ran
    (:meth:`..replay.machine.MachineModel.where`)."""

    start: List[int]
    est_submit: List[int]
    est_start: List[int]
    site: Optional[SiteModel] = None
    where: Optional[Dict[int, Where]] = None


class RecordingModel:
    """Another machine model, recording where each job ran (read as it ends: every job
    the ground truth starts ends in it, and its place does not change while it runs)."""

    def __init__(self, inner: MachineModel) -> None:
        self.inner = inner
        self.class_part = inner.class_part
        self.ran: Dict[int, Where] = {}

    def can_ever_run(self, j: int) -> bool:
        return self.inner.can_ever_run(j)

    def cycle(self, now: int, ends: Sequence[Tuple[int, int]]) -> CycleResources:
        return self.inner.cycle(now, ends)

    def hold(self, j: int, where: Optional[Where] = None) -> bool:
        return self.inner.hold(j, where)

    def where(self, j: int) -> Optional[Where]:
        return self.inner.where(j)

    def release(self, j: int) -> None:
        where = self.inner.where(j)
        if where is not None:
            self.ran[j] = where
        self.inner.release(j)

    def full(self) -> bool:
        return self.inner.full()


def ground_truth(
    work: SimWorkload,
    source: EstimateSource,
    procs_total: int,
    policy: pbsched.Policy,
    site: Optional[SiteModel] = None,
) -> Truth:
    """Run PBS's scheduler model on the whole workload with the real run times: on one
    pool of ``procs_total``, or on ``site``'s model (the workload put on it,
    :func:`..replay.site_model.site_run`), where each job ran recorded.

    :raises ValueError: a sort that reads ``softwalltime_rank`` (not evaluated here)
    """
    if pbsched.sort_formula(policy.job_sort_formula).reads_rank:
        raise ValueError("start-time evaluation does not simulate the rank: use a sort without it")
    rec = RecordingSource(source)
    if site is None:
        result = pbsched.simulate_pbs(work, rec, procs_total, policy)
        return Truth(result.start, rec.at_submit, rec.at_start)
    inner, order = site.build(work)
    model = RecordingModel(inner)
    result = pbsched.simulate_pbs(work, rec, procs_total, policy, model=model, site=order)
    return Truth(result.start, rec.at_submit, rec.at_start, site, model.ran)


def describe(site: SiteModel) -> str:
    """The site model the start times run on (:meth:`..replay.site_model.SiteModel.describe`),
    saying that a site file's ``fair_share`` is left out: the forward runs do not model
    fairshare, and the ground truth runs as they do."""
    fair = "; its fair_share not modelled here" if site.site.scheduler.fair_share else ""
    return site.describe() + fair


def target_jobs(n: int, first: int, count: int, predictions: int) -> List[int]:
    """Job indices first-1 .. first-1+count-1 (1-based ``first``, as eval-wait), every k-th so
    that at most ``predictions`` remain."""
    lo = max(0, first - 1)
    hi = min(n, lo + count)
    if hi <= lo:
        return []
    stride = max(1, -(-(hi - lo) // max(1, min(predictions, MAX_PREDICTIONS))))
    return list(range(lo, hi, stride))


class _Sweep:
    """The queue, running jobs and ended-job histories of the ground truth, advanced in
    submit order (targets must come in increasing index order)."""

    def __init__(self, work: SimWorkload, truth: Truth) -> None:
        self.work = work
        self.truth = truth
        self.end = [s + r for s, r in zip(truth.start, work.run)]
        self.added = 0
        self.pending: Dict[int, None] = {}  # queued, in submit order
        self.starting: List[Any] = []  # heap (start, j) of pending jobs
        self.running: Dict[int, None] = {}
        self.ending: List[Any] = []  # heap (end, j) of running jobs
        self.by_end = sorted(range(len(work.submit)), key=self.end.__getitem__)
        self.ended = 0
        self.history = UserHistory()
        self.site: deque[float] = deque(maxlen=SITE_RATIOS)

    def advance(self, k: int) -> int:
        w, now = self.work, self.work.submit[k]
        while self.added <= k:
            j = self.added
            self.pending[j] = None
            heapq.heappush(self.starting, (self.truth.start[j], j))
            self.added += 1
        while self.starting and self.starting[0][0] < now:
            _, j = heapq.heappop(self.starting)
            del self.pending[j]
            self.running[j] = None
            heapq.heappush(self.ending, (self.end[j], j))
        while self.ending and self.ending[0][0] <= now:
            del self.running[heapq.heappop(self.ending)[1]]
        while self.ended < len(self.by_end) and self.end[self.by_end[self.ended]] <= now:
            j = self.by_end[self.ended]
            self.ended += 1
            if self.truth.start[j] >= 0:
                self.history.add(w.user[j], (w.run[j], w.wall[j], w.procs[j]))
                self.site.append(w.run[j] / w.wall[j])
        return now

    def snapshot(self, k: int, procs_total: int, site: Optional[SiteModel] = None) -> QueueSnapshot:
        """The queue and running jobs at job ``k``'s submit; on ``site``'s model, the running
        jobs held where the ground truth ran them."""
        w, t = self.work, self.truth
        queued, ran = list(self.pending), list(self.running)
        running = [RunningJob(t.start[j], t.est_start[j], w.wall[j], w.procs[j]) for j in ran]
        waiting = [QueuedJob(w.submit[j], t.est_submit[j], w.wall[j], w.procs[j]) for j in queued]
        machine = None
        if site is not None:
            jobs = take(w, queued + ran)  # the snapshot's model's jobs: queued, then running
            where = t.where or {}
            machine = SiteMachine(lambda: site.build(jobs), [where.get(j) for j in ran])
        return QueueSnapshot(w.submit[k], procs_total, running, waiting, queued.index(k), machine)

    def kind(self, j: int, sampler: RunSampler) -> List[int]:
        """The run times job ``j``'s kind took (:meth:`.starttime.RunSampler.runs_of`)."""
        w = self.work
        return sampler.runs_of(w.wall[j], w.procs[j], self.history.of(w.user[j]))


class Prediction(NamedTuple):
    job: int
    submit: int
    start: int
    """The ground truth."""
    pbs: int
    median: int
    p50: int
    p90: int
    pqstar: int = -1
    """PQStar's answer as a start: submit + its predicted wait (the bound, 1 h, for a job
    it marks a quick starter; else IBL's wait); -1: not predicted."""
    ibl: int = -1


def predict_targets(
    work: SimWorkload,
    truth: Truth,
    procs_total: int,
    policy: pbsched.Policy,
    targets: Sequence[int],
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    progress: Optional[Callable[[int, int], None]] = None,
) -> List[Prediction]:
    """Every method's prediction for each target (increasing job indices), on the machine
    the ground truth ran on (its site model, else one pool of ``procs_total``)."""
    sweep = _Sweep(work, truth)
    rng = random.Random(seed)
    widening = Widening()
    unresolved: List[Any] = []  # heap (real start, raw P90 wait, real wait) of past targets
    out = []
    for done, k in enumerate(targets):
        now = sweep.advance(k)
        while unresolved and unresolved[0][0] <= now:
            _, predicted, actual = heapq.heappop(unresolved)
            widening.learn(predicted, actual)
        sampler = RunSampler(rng, sweep.site)
        snap = sweep.snapshot(k, procs_total, truth.site)
        raw = _predict(sweep, k, snap, policy, sampler, samples)
        heapq.heappush(unresolved, (truth.start[k], raw.p90 - now, truth.start[k] - now))
        out.append(raw._replace(p90=max(raw.p50, now + widening.widen(raw.p90 - now))))
        if progress is not None:
            progress(done + 1, len(targets))
    return out


def _predict(
    sweep: _Sweep,
    k: int,
    snap: QueueSnapshot,
    policy: pbsched.Policy,
    sampler: RunSampler,
    samples: int,
) -> Prediction:
    # every method's prediction for target k (the snapshot's), the P90 not widened
    pending = list(sweep.pending)
    kinds = Lazy(len(pending), lambda i: sweep.kind(pending[i], sampler))
    running_runs = [sweep.kind(j, sampler) for j in sweep.running]
    answer = start_quantiles(snap, policy, sampler, kinds.__getitem__, running_runs, samples)
    medians = Lazy(len(pending), lambda i: int(statistics.median_low(kinds[i])))
    ends = [sampler_median_end(job, snap.now, r) for job, r in zip(snap.running, running_runs)]
    median = forward_start(snap, policy, medians, ends)
    start = sweep.truth.start[k]
    return Prediction(k, snap.now, start, answer.pbs, median, answer.p50, answer.p90)


def with_pqstar(
    preds: Sequence[Prediction], work: SimWorkload, truth: Truth, procs_total: int
) -> List[Prediction]:
    """``preds`` with PQStar's and IBL's answers (:func:`.pqstar.replay_waits` on the ground
    truth's starts, estimated run times the soft walltimes at submit), for the same jobs."""
    if not preds:
        return []
    jobs = [
        WaitJob(w_submit, start, start + run, procs, est, user)
        for w_submit, start, run, procs, est, user in zip(
            work.submit, truth.start, work.run, work.procs, truth.est_submit, work.user
        )
    ]
    first, last = preds[0].job, preds[-1].job + 1
    res = replay_waits(jobs, procs_total, WaitParams(first_target=first, last_target=last))
    at = {k: i for i, k in enumerate(res.targets)}
    out = []
    for p in preds:
        i = at[p.job]
        pq, ibl = res.predicted_s["pqstar"][i], res.predicted_s["ibl"][i]
        out.append(p._replace(pqstar=p.submit + pq, ibl=p.submit + ibl))
    return out


def sampler_median_end(job: RunningJob, now: int, runs: Sequence[int]) -> int:
    """The median of the run times of its kind longer than it has run, else halfway to its
    walltime."""
    longer = sorted(r for r in runs if r > now - job.start)
    if longer:
        return job.start + longer[(len(longer) - 1) // 2]
    return now + max(1, (job.start + job.wall - now) // 2)


def _share(hits: int, n: int) -> Optional[float]:
    return round(100.0 * hits / n, 1) if n else None


def figures(
    preds: Sequence[Prediction],
    within: Sequence[int] = WITHIN_S,
    long_wait_s: int = LONG_WAIT_S,
) -> Dict[str, Any]:
    """Per method, the shares ``within_<s>s`` of :data:`WITHIN_S` (or ``within``) for all
    targets and for those that waited >= ``long_wait_s`` (of the targets it predicted:
    None if none); the P90's coverage. A compressed replay (the twin) passes its scaled
    thresholds."""
    groups = {
        "all": list(preds),
        "waited_10min": [p for p in preds if p.start - p.submit >= long_wait_s],
    }
    out: Dict[str, Any] = {}
    for name, rows in groups.items():
        n = len(rows)
        per: Dict[str, Any] = {"jobs": n}
        for method in METHODS:
            made = [(getattr(p, _FIELDS[method]), p.start) for p in rows]
            made = [(guess, start) for guess, start in made if guess >= 0]  # -1: none
            per[method] = {
                f"within_{s}s": _share(
                    sum(abs(guess - start) <= s for guess, start in made), len(made)
                )
                for s in within
            }
        per["P90_coverage"] = _share(sum(p.start <= p.p90 for p in rows), n)
        out[name] = per
    return out


def _cell(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1f}"


def format_figures(report: Dict[str, Any]) -> str:
    """The text table of ``eval-start`` for one source."""
    lines = [
        f"source: {report['source']}",
        f"jobs: {report['jobs']:,}   machine: {report['procs']:,} processors   policy: "
        f"{report['policy']}   soft walltimes: {report['estimates']}",
        f"predictions: {report['predictions']:,} ({report['samples']} forward runs each,"
        f" {report['seconds']:.1f} s)",
    ]
    if "model" in report:  # --site: the ground truth and the predictions ran on it
        why = ", ".join(f"{k} {v:,}" for k, v in sorted(report["skipped_by_reason"].items()))
        skipped = sum(report["skipped_by_reason"].values())
        lines.insert(2, f"{report['model']}   skipped: {skipped:,}{f' ({why})' if why else ''}")
    for group, title in (("all", "all targets"), ("waited_10min", "targets that waited >= 10 min")):
        fig = report["figures"][group]
        lines.append("")
        lines.append(f"{title}: {fig['jobs']:,}   P90 covers {_cell(fig['P90_coverage'])} %")
        lines.append("  method  within 1 min %  within 10 min %  within 1 h %")
        for method in METHODS:
            row = fig[method]
            lines.append(
                f"  {method:<6} {_cell(row['within_60s']):>14} {_cell(row['within_600s']):>16}"
                f" {_cell(row['within_3600s']):>13}"
            )
    return "\n".join(lines)
