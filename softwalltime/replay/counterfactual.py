"""What the policy did: the same jobs replayed under the current and the previous policy
(issue 48; pure).

Two periods of a site hold different workloads, which the seed paper (§4) names as the
weakness of a before/after comparison. Here the jobs that really ran under the current
policy are replayed twice through the scheduler model, with their real run times, the
walltimes and soft walltimes they had, and their queue:

- under the current policy: the model's waits beside the real ones (the *fit*: how far the
  model can be trusted on this site);
- under the previous policy: the *counterfactual*, on the same jobs.

The jobs submitted in a warm-up before the period are replayed too (under the same policy
in each run) so that the period does not start on an empty machine; only the period's jobs
are scored. :func:`judge` holds the comparison to the site's tolerances (the guard).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ..core import rank as hook_rank
from . import fit as fitlib
from . import pbsched
from .evaluate import CLASSES, runtime_class
from .sim_workload import SimWorkload
from .simulate import BSLD_BOUND_S, _pct
from .sources import RecordedSource

MIN_JOBS = 50  # fewer scored jobs: figures too noisy to compare (the section says so)
P95_TOLERANCE_PCT = 10.0  # a class's p95 wait may rise this much over the counterfactual's
LONGEST_FACTOR = 2.0  # the longest wait may be at most this multiple of the counterfactual's
NOISE_S = 600  # differences of waits up to ten minutes never break a tolerance
ALL = "all jobs"


def policy_of(settings: Mapping[str, Optional[str]]) -> pbsched.Policy:
    """The model's policy for PBS's live settings (as ``softwalltime policy`` records them:
    ``job_sort_formula``, ``backfill_depth``, ``strict_ordering``, ``opt_backfill_fuzzy``;
    PBS's defaults where unset: no formula, depth 1, strict ordering off, fuzzy low).

    :raises ValueError: a formula the model cannot evaluate
    """
    formula = (settings.get("job_sort_formula") or "").strip().strip("'\"")
    depth = settings.get("backfill_depth")
    strict = (settings.get("strict_ordering") or "false").split()[0].lower() in ("true", "1")
    fuzzy = settings.get("opt_backfill_fuzzy")
    pbsched.sort_formula(formula or pbsched.FCFS)  # raises for a name the model lacks
    return pbsched.Policy(
        job_sort_formula=formula or pbsched.FCFS,
        backfill_depth=int(depth) if depth else 1,
        strict_ordering=strict,
        backfill_fuzzy=pbsched.parse_fuzzy(fuzzy) if fuzzy else pbsched.DEFAULT_FUZZY_S,
    )


class Period(NamedTuple):
    """The jobs of a period and what really happened to them: the workload holds their
    real starts (``real_start``), the soft walltimes they had (``recorded_soft``) and the
    machine (``machine_procs``)."""

    work: SimWorkload  # warm-up jobs first, then the period's (submit order)
    queue: List[str]  # "" when unknown
    first: int  # index of the first job of the period (the ones scored)

    @property
    def real_start(self) -> List[int]:
        assert self.work.real_start is not None  # period_of sets it
        return self.work.real_start

    @property
    def procs_total(self) -> int:
        assert self.work.machine_procs is not None  # period_of sets it
        return self.work.machine_procs


class Jobs(NamedTuple):
    """Finished jobs of a period as the history gives them, in arrival order: parallel
    lists (times epoch s); the jobs before ``first`` are the warm-up."""

    user: List[str]
    arrival: List[int]  # etime (eligible), else ctime
    start: List[int]
    run: List[int]
    wall: List[int]
    soft: List[int]  # 0: none
    ncpus: List[int]
    queue: List[str]
    first: int  # index of the first job that arrived at or after the period's start


def period_of(jobs: Jobs, procs_total: int) -> Tuple[Period, int]:
    """The :class:`Period` of ``jobs`` on ``procs_total`` processors, without the jobs wider
    than the machine; and how many those were."""
    keep = [k for k in range(len(jobs.arrival)) if jobs.ncpus[k] <= procs_total]

    def pick(col: Sequence[Any]) -> List[Any]:
        return [col[k] for k in keep]

    work = SimWorkload(
        source="history", user=pick(jobs.user), submit=pick(jobs.arrival), run=pick(jobs.run),
        wall=pick(jobs.wall), procs=pick(jobs.ncpus), machine_procs=procs_total, skipped={},
        real_start=pick(jobs.start), recorded_soft=pick(jobs.soft),
    )  # fmt: skip
    first = sum(1 for k in keep if k < jobs.first)
    period = Period(work, pick(jobs.queue), first)
    return period, len(jobs.arrival) - len(keep)


def replay(period: Period, policy: pbsched.Policy) -> List[int]:
    """Each job's start in the model under ``policy``."""
    formula = pbsched.sort_formula(policy.job_sort_formula)
    ranker = pbsched.make_ranker(hook_rank.DEFAULT) if formula.reads_rank else None
    result = pbsched.simulate_pbs(
        period.work, RecordedSource(), period.procs_total, policy, ranker=ranker
    )
    return result.start


def figures(waits: Sequence[int], runs: Sequence[int]) -> Dict[str, Optional[float]]:
    """Mean, p95 and longest wait (hours) and mean bounded slowdown of a group of jobs."""
    n = len(waits)
    if n == 0:
        return {"mean_wait_h": None, "p95_wait_h": None, "max_wait_h": None, "mean_bsld": None}
    w = sorted(waits)
    bsld = sum(max(1.0, (x + r) / max(r, BSLD_BOUND_S)) for x, r in zip(waits, runs)) / n
    return {
        "mean_wait_h": sum(w) / n / 3600.0,
        "p95_wait_h": _pct(w, 0.95) / 3600.0,
        "max_wait_h": w[-1] / 3600.0,
        "mean_bsld": bsld,
    }


def _groups(period: Period) -> List[Tuple[str, List[int]]]:
    """The scored jobs, all, by queue (when known) and by run-time class."""
    scored = list(range(period.first, len(period.work.submit)))
    groups = [(ALL, scored)]
    queues = sorted({period.queue[k] for k in scored if period.queue[k]})
    if len(queues) > 1:
        for q in queues:
            groups.append((f"queue {q}", [k for k in scored if period.queue[k] == q]))
    run = period.work.run
    for cls, _limit in CLASSES:
        groups.append((f"class {cls}", [k for k in scored if runtime_class(run[k]) == cls]))
    return [(name, ks) for name, ks in groups if ks]


def fit(period: Period, model_start: Sequence[int]) -> Dict[str, Any]:
    """Model against real on the scored jobs (:func:`.fit.figures`: the mean waits, the
    co-queued pairs in the real order, the starts within 10 min and 1 h) and the verdict."""
    ks = range(period.first, len(period.work.submit))
    if not ks:
        return {"jobs": 0}
    f = fitlib.figures(
        ALL,
        [period.work.submit[k] for k in ks],
        [period.real_start[k] for k in ks],
        [model_start[k] for k in ks],
    )
    verdict, reasons = fitlib.verdict(f)
    return {
        "jobs": f.jobs,
        "within_10min_pct": f.within_10min_pct,
        "within_1h_pct": f.within_1h_pct,
        "real_mean_wait_h": f.real_mean_h,
        "model_mean_wait_h": f.model_mean_h,
        "pair_order_pct": f.pair_order_pct,
        "pairs": f.pairs,
        "verdict": verdict,
        "reasons": reasons,
    }


def compare(
    period: Period, current: pbsched.Policy, previous: Optional[pbsched.Policy]
) -> Dict[str, Any]:
    """The section's numbers: per group, the real figures and the model's under the current
    and (if any) the previous policy, with the fit beside them."""
    scored = len(period.work.submit) - period.first
    out: Dict[str, Any] = {
        "jobs": scored,
        "procs": period.procs_total,
        "current_policy": current.name,
        "previous_policy": previous.name if previous is not None else None,
    }
    if previous is None:
        out["note"] = "no previous policy recorded: nothing to compare with"
    elif scored < MIN_JOBS:
        out["note"] = f"too few jobs under the current policy ({scored} < {MIN_JOBS})"
    if scored == 0:
        out["rows"] = []
        return out
    cur = replay(period, current)
    prev = replay(period, previous) if previous is not None else None
    out["fit"] = fit(period, cur)
    sub, run = period.work.submit, period.work.run
    rows = []
    for name, ks in _groups(period):
        row = {"group": name, "jobs": len(ks)}
        for label, start in (("real", period.real_start), ("current", cur), ("previous", prev)):
            if start is not None:
                row[label] = figures([start[k] - sub[k] for k in ks], [run[k] for k in ks])
        rows.append(row)
    out["rows"] = rows
    return out


class Tolerances(NamedTuple):
    p95_pct: float = P95_TOLERANCE_PCT
    longest_factor: float = LONGEST_FACTOR
    noise_s: int = NOISE_S


DEFAULT_TOLERANCES = Tolerances()


def judge(comparison: Mapping[str, Any], tol: Tolerances = DEFAULT_TOLERANCES) -> List[str]:
    """The tolerances the current policy breaks against the counterfactual, one line each
    (empty: it holds, or there is nothing to compare)."""
    if comparison.get("note") or comparison.get("previous_policy") is None:
        return []
    broken = []
    for row in comparison.get("rows", []):
        cur, prev = row.get("current"), row.get("previous")
        if not cur or not prev or cur["p95_wait_h"] is None:
            continue
        name = row["group"]
        p95, p95_prev = cur["p95_wait_h"] * 3600, prev["p95_wait_h"] * 3600
        if p95 - p95_prev > tol.noise_s and p95 > p95_prev * (1 + tol.p95_pct / 100.0):
            broken.append(
                f"{name}: p95 wait {p95 / 3600:.2f} h against {p95_prev / 3600:.2f} h under "
                f"the previous policy (tolerance +{tol.p95_pct:g} %)"
            )
        top, top_prev = cur["max_wait_h"] * 3600, prev["max_wait_h"] * 3600
        if name == ALL and top - top_prev > tol.noise_s and top > top_prev * tol.longest_factor:
            broken.append(
                f"longest wait {top / 3600:.2f} h against {top_prev / 3600:.2f} h under the "
                f"previous policy (tolerance {tol.longest_factor:g}x)"
            )
    return broken
