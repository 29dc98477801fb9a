"""The fit: the model's starts against the real ones, before any advice (issue 46; pure).

When a workload records when its jobs really started (SWF field 3, the wait; a PBS E
record's ``start``), ``simulate --policies`` and ``--search`` first replay the site's
current policy on the model with the jobs' real run times and the users' walltimes (the
soft walltimes the jobs had, where the records have them: ``Resource_List.soft_walltime``)
and compare, overall and per queue (:func:`measure`):

- mean and p95 wait, model against real;
- **pair order**: the share of *co-queued* job pairs the model starts in the real order.
  A pair is two jobs ``a`` (earlier submit) and ``b`` where ``b`` arrived while ``a`` still
  waited in reality, and whose real starts differ by more than :data:`PAIR_TOLERANCE_S`:
  the pairs a scheduler's sort and backfilling decide. Pairs of jobs days apart are left
  out: every model orders them right, and they would hide a poor fit (on CERIT-SC almost
  every pair of 10^5 jobs is days apart). Model ties count half. At most
  :data:`MAX_PAIRS` pairs, drawn at random with a fixed seed (the figure says so);
- the share of jobs the model starts within 10 min and within 1 h of their real start.

Then a verdict (:func:`verdict`), with the reasons:

- **poor** when the model's mean wait is off the real one by more than a factor of
  :data:`POOR_FACTOR` (2; and by more than :data:`SLACK_H` hours), or pair order is below
  :data:`POOR_PAIRS_PCT` (80 %). Advice from such a model is about another machine: a
  factor of 2 in mean wait is about the gain the search reports (-40 to -67 % mean bsld),
  and below 80 % of pairs in order one decision in five of the modelled scheduler differs
  from the site's, which is the kind of decision a sort changes.
- **good** when the mean wait is within :data:`GOOD_FACTOR` (1.25) and pair order at least
  :data:`GOOD_PAIRS_PCT` (90 %): as close as the twin on the real server comes (issue 29:
  96.6 % of pairs; mean wait within 10 % of the model band's median);
- **fair** otherwise.
"""

from __future__ import annotations

import bisect
import random
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

PAIR_TOLERANCE_S = 60  # real starts closer than this are one scheduler cycle: no order
MAX_PAIRS = 20_000  # pairs drawn when there are more (the CI of a share is then < 1 %)
MAX_QUEUES_SHOWN = 20  # queues reported, most jobs first
POOR_FACTOR = 2.0
GOOD_FACTOR = 1.25
POOR_PAIRS_PCT = 80.0
GOOD_PAIRS_PCT = 90.0
SLACK_H = 0.25  # mean waits closer than this are not "off by a factor"
NEAR_S = (600, 3600)
GOOD, FAIR, POOR = "good", "fair", "poor"
SEED = 1


class Figures(NamedTuple):
    """Model against real for one set of jobs (all, or one queue); hours and percentages."""

    name: str
    jobs: int
    real_mean_h: float
    model_mean_h: float
    real_p95_h: float
    model_p95_h: float
    pairs: int
    """Co-queued pairs compared (after sampling)."""
    pairs_total: int
    """Co-queued pairs there are (``pairs`` < it: a sample, and this an estimate from the
    draws: the windows' pairs less the share of ties among the drawn ones)."""
    pair_order_pct: Optional[float]
    within_10min_pct: float
    within_1h_pct: float


class Fit(NamedTuple):
    """The fit of one replay of the site's current policy."""

    policy: str
    model: str
    """What the model is (e.g. "one pool of 2176 cpus")."""
    unknown: int
    """Jobs left out: the trace does not say when they started."""
    overall: Figures
    queues: List[Figures]
    verdict: str
    reasons: List[str]
    estimates: str = "users"
    """What the replay planned with: ``users`` (the walltimes) or ``recorded`` (the soft
    walltimes the jobs had, where the trace records them, else the walltimes)."""

    def as_json(self) -> Dict[str, Any]:
        out = self._asdict()
        out["overall"] = self.overall._asdict()
        out["queues"] = [q._asdict() for q in self.queues]
        return out

    @property
    def poor(self) -> bool:
        return self.verdict == POOR

    def format(self) -> str:
        return format_fit(self)


def lacks(with_site: bool) -> str:
    """What the model lacks that a site has (for the line that withholds advice)."""
    if with_site:
        return (
            "the site model (its vnodes, chunks, queues, limits and sched_config's fairshare), "
            "without what the trace does not record: other servers' jobs on shared nodes, "
            "outages, holds, the site's fairshare tree and usage before the trace"
        )
    return (
        "one pool of cpus with one queue and no fairshare; the site's nodes and queues are "
        "not modelled: pass --site"
    )


def withheld_line(fits: Sequence[Optional[Fit]], with_site: bool) -> str:
    """The line printed instead of the PBS settings when a fit is poor ("" when none is)."""
    if not any(f is not None and f.poor for f in fits):
        return ""
    return (
        "PBS settings withheld: the model's fit to the real starts is poor (above), so its "
        f"advice is about another machine; the model is {lacks(with_site)}. --force prints them"
    )


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _p95(xs: Sequence[float]) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, -(-95 * len(s) // 100) - 1))]


def coqueued(submit: Sequence[int], real: Sequence[int]) -> List[Tuple[int, int]]:
    """Every co-queued pair (``a`` < ``b`` in submit order, ``b`` submitted before ``a``
    really started, real starts more than :data:`PAIR_TOLERANCE_S` apart), ``submit``
    sorted. Quadratic in the jobs queued at once: :func:`pairs` caps what it keeps."""
    out = []
    for a in range(len(submit)):
        upto = bisect.bisect_left(submit, real[a], a + 1)
        for b in range(a + 1, upto):
            if abs(real[a] - real[b]) > PAIR_TOLERANCE_S:
                out.append((a, b))
    return out


def pairs(
    submit: Sequence[int], real: Sequence[int], cap: int = MAX_PAIRS, seed: int = SEED
) -> Tuple[List[Tuple[int, int]], int]:
    """Co-queued pairs, at most ``cap`` of them (a seeded sample), and how many there are.

    Counted per job first, so that a trace with 10^9 pairs is not listed: the pairs of job
    ``a`` are the ``b`` in its window; ``cap`` draws pick a window weighted by its size."""
    upto = [bisect.bisect_left(submit, real[a], a + 1) for a in range(len(submit))]
    sizes = [max(0, upto[a] - a - 1) for a in range(len(submit))]
    total_windows = sum(sizes)
    if total_windows <= cap:
        found = coqueued(submit, real)
        return found, len(found)
    rng = random.Random(seed)
    cumulative, running = [], 0
    for s in sizes:
        running += s
        cumulative.append(running)
    out: List[Tuple[int, int]] = []
    tries = 0
    while len(out) < cap and tries < 20 * cap:
        tries += 1
        a = bisect.bisect_right(cumulative, rng.randrange(running))
        b = rng.randrange(a + 1, upto[a])
        if abs(real[a] - real[b]) > PAIR_TOLERANCE_S:
            out.append((a, b))
    # the windows' pairs less the ties, estimated from the draws
    share = len(out) / tries if tries else 0.0
    return out, int(round(total_windows * share))


def order_pct(
    model: Sequence[int], real: Sequence[int], chosen: Sequence[Tuple[int, int]]
) -> Optional[float]:
    """Share of ``chosen`` pairs the model starts in the real order (ties half), %."""
    if not chosen:
        return None
    agree = 0.0
    for a, b in chosen:
        d = model[a] - model[b]
        if d == 0:
            agree += 0.5
        elif (d < 0) == (real[a] < real[b]):
            agree += 1.0
    return 100.0 * agree / len(chosen)


def figures(
    name: str,
    submit: Sequence[int],
    real: Sequence[int],
    model: Sequence[int],
    cap: int = MAX_PAIRS,
) -> Figures:
    """Model against real for jobs in submit order (every start known)."""
    real_w = [(r - s) / 3600 for s, r in zip(submit, real)]
    model_w = [(m - s) / 3600 for s, m in zip(submit, model)]
    chosen, total = pairs(submit, real, cap)
    off = [abs(m - r) for m, r in zip(model, real)]
    n = len(submit)
    near = [100.0 * sum(d <= lim for d in off) / n if n else 0.0 for lim in NEAR_S]
    return Figures(
        name, n, _mean(real_w), _mean(model_w), _p95(real_w), _p95(model_w),
        len(chosen), total, order_pct(model, real, chosen), near[0], near[1],
    )  # fmt: skip


def verdict(f: Figures) -> Tuple[str, List[str]]:
    """good, fair or poor (see the module), and the reasons."""
    reasons = []
    real, model = f.real_mean_h, f.model_mean_h
    lo, hi = min(real, model), max(real, model)
    factor = hi / lo if lo > 0 else float("inf")
    if hi - lo > SLACK_H and factor > POOR_FACTOR:
        reasons.append(
            f"mean wait off by {factor:.1f}x ({model:.2f} h modelled, {real:.2f} h real)"
        )
    if f.pair_order_pct is not None and f.pair_order_pct < POOR_PAIRS_PCT:
        reasons.append(f"{f.pair_order_pct:.1f} % of co-queued pairs in the real order")
    if reasons:
        return POOR, reasons
    close = hi - lo <= SLACK_H or factor <= GOOD_FACTOR
    if close and (f.pair_order_pct is None or f.pair_order_pct >= GOOD_PAIRS_PCT):
        return GOOD, []
    return FAIR, [f"mean wait {model:.2f} h modelled, {real:.2f} h real; "
                  f"pair order {_pct(f.pair_order_pct)}"]  # fmt: skip


def _planned(estimates: str) -> str:
    if estimates == "recorded":
        return "the soft walltimes the jobs had (else their walltimes)"
    return "the users' walltimes"


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.1f} %"


def measure(
    policy: str,
    model_name: str,
    submit: Sequence[int],
    real_start: Sequence[int],
    model_start: Sequence[int],
    queue: Optional[Sequence[str]] = None,
    cap: int = MAX_PAIRS,
) -> Fit:
    """The fit of ``model_start`` to ``real_start`` (-1: unknown, left out), jobs in
    submit order; per queue when ``queue`` is given.

    :raises ValueError: the lists differ in length, or no job's real start is known
    """
    n = len(submit)
    if not (len(real_start) == len(model_start) == n) or (queue is not None and len(queue) != n):
        raise ValueError("submit, real_start, model_start (and queue) must be parallel")
    known = [k for k in range(n) if real_start[k] >= 0]
    if not known:
        raise ValueError("no job's real start is known")

    def of(name: str, ks: Sequence[int]) -> Figures:
        return figures(
            name,
            [submit[k] for k in ks],
            [real_start[k] for k in ks],
            [model_start[k] for k in ks],
            cap,
        )

    overall = of("all", known)
    per_queue: List[Figures] = []
    if queue is not None:
        by: Dict[str, List[int]] = {}
        for k in known:
            by.setdefault(queue[k] or "-", []).append(k)
        biggest = sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:MAX_QUEUES_SHOWN]
        per_queue = [of(name, ks) for name, ks in biggest]
    word, reasons = verdict(overall)
    return Fit(policy, model_name, n - len(known), overall, per_queue, word, reasons)


def format_fit(fit: Fit) -> str:
    """The fit as text: a table, then the verdict."""
    o = fit.overall
    sample = (
        f"a sample of {o.pairs:,} of about {o.pairs_total:,}"
        if o.pairs < o.pairs_total
        else f"{o.pairs:,}"
    )
    lines = [
        f"fit to real starts: {fit.policy} with {_planned(fit.estimates)} on {fit.model}"
        + (f" ({fit.unknown:,} jobs without a real start left out)" if fit.unknown else ""),
        f"  pair order: co-queued job pairs ({sample} overall) the model starts in the real order",
        "  {:<14}{:>8}{:>10}{:>10}{:>10}{:>10}{:>8}{:>8}{:>8}".format(
            "queue", "jobs", "mean real", "model", "p95 real", "model", "pairs", "<10min", "<1h"
        ),
    ]
    for f in [o] + fit.queues:
        lines.append(
            f"  {f.name[:13]:<14}{f.jobs:>8}{f.real_mean_h:>10.2f}{f.model_mean_h:>10.2f}"
            f"{f.real_p95_h:>10.2f}{f.model_p95_h:>10.2f}{_pct(f.pair_order_pct):>8}"
            f"{f.within_10min_pct:>7.1f}%{f.within_1h_pct:>7.1f}%"
        )
    why = f": {'; '.join(fit.reasons)}" if fit.reasons else ""
    lines.append(f"fit: {fit.verdict.upper()}{why}")
    return "\n".join(lines) + "\n"


def site_policy(job_sort_formula: Optional[str], backfill_depth: int, strict_ordering: bool) -> str:
    """The policy label (:func:`.pbsched.parse_policy`'s) of a site's scheduler settings:
    its formula (none: fcfs), ``-bfK`` with strict_ordering (``-strict`` at depth 0), else
    ``-greedy`` (PBS backfills around top jobs only with strict_ordering)."""
    sort = job_sort_formula or "fcfs"
    if not strict_ordering:
        return f"{sort}-greedy"
    return f"{sort}-strict" if backfill_depth == 0 else f"{sort}-bf{backfill_depth}"
