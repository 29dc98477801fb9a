"""How far can ``calibrated``'s bins and rules go at v3's under-estimate rate (issue 18)?

    python tests/benchmarks/calibrated_ceiling.py [TRACE ...]

Each trace is read and replayed exactly as ``softwalltime evaluate`` does (``read_sources``,
``evaluate.columns`` at submit, ``evaluate.replay_columns`` for v3,
``evaluate.replay_calibrated`` for calibrated): the calibrated replay is run with a table
that records every job's :class:`~softwalltime.core.calibrated.Outcome` (its bin and the
17 rules' soft walltimes) as the table learns it, so the outcomes are the replay's own. Then,
at v3's under-estimate rate on the trace (same definitions and ``evaluate.metrics``):

- (a) v3; (b) calibrated tracking v3 (``evaluate --predictors v3,calibrated
  --target-under-pct v3``) and calibrated at v3's rate as a fixed target;
- (c) *hindsight per bin*: one rule per bin, chosen knowing all the trace's outcomes, by
  the same score as today (mean accuracy - lambda x under-rate) with one lambda, bisected
  so that the trace's under-estimates are at most v3's; bins with < 30 outcomes keep v3
  (as today), or every bin chooses: the best any learner of today's kind could do;
- (d) *hindsight per job*: per job the rule with the best accuracy - lambda x under, one
  lambda bisected alike: the ceiling of the 17 rules themselves.

Then where the gaps lie: per half of the trace (submit order), the online learner against
(c) and against (c) learnt on the first half alone (lambda set in hindsight on the second);
and the share of the gain over v3 by key level and by spread of the class's run times.

``--merge-size``: the same for a variant of calibrated whose bins ignore the class size
(:func:`merge_size` applied to every outcome's bin; the replays use it too).

Also printed: calibrated with lambda held fixed (no steering; lambda bisected on a 1 % grid
so that it makes at most v3's under-estimates) and the share of its predictions made in bins
with fewer than 30 outcomes; (c) *cross-fit*: each half of the jobs (alternate jobs in submit
order, or users by parity) gets the per-bin choice learnt on the other half.

Findings (2026-11-26, ``python tests/benchmarks/calibrated_ceiling.py``, the five default
traces, 2-3 min on the shared 2-core machine, HPC2N's peak RSS 278 MB; the figures are
deterministic). Mean accuracy at v3's under-estimate rate, gain over v3:

    trace      v3     (b) track (b') fixed  (c)    (c')   (d)    fixed lam  xfit jobs  xfit users
    CERIT-SC   0.294  +0.018    +0.026    +0.088 +0.094 +0.252  +0.032     +0.085     +0.014
    HPC2N      0.490  +0.029    +0.024    +0.048 +0.048 +0.166  +0.035     +0.047     +0.029
    CTC-SP2    0.421  +0.034    +0.034    +0.054 +0.055 +0.283  +0.035     +0.048     +0.036
    KTH-SP2    0.471  +0.008    +0.009    +0.026 +0.029 +0.176  +0.007     +0.016     +0.009
    SDSC-SP2   0.365  +0.027    +0.032    +0.062 +0.065 +0.299  +0.030     +0.057     +0.020

(b), (b') are exactly ``evaluate``'s figures (docs/evaluate.md's table). Bad under-estimates
of (c): CERIT-SC 12.14 % (v3 16.00), HPC2N 3.36 (4.86), CTC-SP2 1.89 (3.19), KTH-SP2 0.48
(1.03), SDSC-SP2 1.03 (1.75): 0.47-0.76 x v3's; MAE 0.99-1.10 x v3's.

- Even in hindsight, one rule per bin gains < 0.04 on KTH-SP2 (+0.026, +0.029 with every
  bin choosing) and only +0.048 on HPC2N: there the goal is out of reach of any learner of
  today's kind; the limit is the bins and rules.
- (c)'s lead over (b) does not generalise: the per-bin choice learnt on the other half of
  the *users* gains what (b) gains (-0.007 to +0.002 against it); learnt on the trace's
  first half and used on its second (lambda in hindsight), 0.311 / 0.513 / 0.455 / 0.499 /
  0.375 against (b)'s 0.308 / 0.523 / 0.461 / 0.508 / 0.376 on that half; per user instead
  of per bin, worse (0.281 / 0.507 / 0.444 / 0.493 / 0.359). Cross-fit on alternate jobs
  keeps most of (c) (+0.016 to +0.085) because a user's batch falls in both halves. So
  (c) - (b) is the bins fitted to their few users, not something online learning loses.
- Steering costs little: lambda held at its hindsight value gains +0.014 (CERIT-SC) and
  +0.006 (HPC2N) over tracking, <= 0.003 elsewhere. Not reachable by a controller: the
  decisions on a moving average of log lambda (weight 0.001 per job end) gave CERIT-SC
  +0.008, CTC-SP2 +0.001, HPC2N -0.004; starting lambda 0.25-1 instead of 2: CERIT-SC
  +0.003 to +0.009, CTC-SP2 and HPC2N -0.001 to 0 (one-off runs, not in this script).
  Cold start: 25.5 % of CERIT-SC's predictions come from bins with < 30 outcomes (HPC2N
  2.6 %, CTC 6.6 %, KTH 15.4 %, SDSC 9.3 %): that is what the prior addresses.
- (d), the rules' own ceiling, is 0.17-0.30 above v3. Of it, 45-69 % lies in classes whose
  run times spread >= 5x (41-60 % of the jobs), where (c) gains -0.004 to +0.022, and
  44-68 % in jobs that ran at or below their class's median + 60 s. The rules bracket the
  run time; nothing in the bin says which jobs of a wide class will end early. A feature
  that does (a job's own signal, not its user's history: the executable number did not,
  see jobkeys.py) is the only way to the goal on these traces.
- ``--merge-size`` (the class-size bin dimension dropped, 80 bins; same run otherwise):
  (b) tracking / (b') at v3's rate, mean accuracy against today's: CERIT-SC -0.001 / 0.000,
  HPC2N -0.001 / +0.002, CTC-SP2 +0.003 / +0.003, KTH-SP2 +0.005 / +0.005, SDSC-SP2
  +0.003 / +0.008; bad under-estimates lower on every trace (CERIT-SC tracking 14.13 ->
  11.16 %, at 19.60 % under instead of 20.57; at v3's rate 13.00 -> 12.71; HPC2N 3.72 ->
  3.69 / 3.93 -> 3.90; KTH-SP2 0.68 -> 0.52); MAE 0.96-1.03 x today's (CERIT-SC
  tracking 1.12 x: 32.05 h, 1.19 x v3's). Users cross-fit
  +0.025 / +0.028 / +0.037 / +0.011 / +0.025 (today +0.014 / +0.029 / +0.036 / +0.009 /
  +0.020): fewer bins carry over a little better across users; the accuracy gap stays.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from softwalltime.core import calibrated as cal
from softwalltime.core.predict import PredictorParams
from softwalltime.replay import evaluate as ev
from softwalltime.replay.trace_readers import read_sources

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "tests" / "data" / "traces"
DEFAULT = [
    REPO / "softwalltime" / "data" / "CERIT-SC-wagap-2013.alea.swf.gz",
    TRACES / "HPC2N-2002-2.2-cln.swf.gz",
    TRACES / "CTC-SP2-1996-3.1-cln.swf.gz",
    TRACES / "KTH-SP2-1996-2.1-cln.swf.gz",
    TRACES / "SDSC-SP2-1998-4.2-cln.DERIVED-predictsim-strongfilter-easysim.swf.gz",
]
NRULES = len(cal.RULES)
LAMBDA_LOW = 1e-6  # bisection bracket (lambda weighs an under-rate against an accuracy)
LAMBDA_HIGH = 1e9
BISECT_STEPS = 80
STAT_MEDIAN = cal.STATISTICS.index("median")
STAT_MAX = cal.STATISTICS.index("max")
assert cal.FACTORS[0] == (1, 1)


# ---------------------------------------------------------------------------------------
# Pure parts (tests/test_calibrated_ceiling.py)


def accuracy_matrix(softs: np.ndarray, runs: np.ndarray) -> np.ndarray:
    """``calibrated.accuracy`` of every (job, rule): softs (n, k) against runs (n,)."""
    s = softs.astype(np.float64)
    r = runs.astype(np.float64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        acc = np.where(s < r, s / r, r / s)
    acc = np.where((s <= 0) | (r <= 0), 0.0, acc)
    return np.where(s == r, 1.0, acc)


def bin_sums(
    bins: np.ndarray, acc: np.ndarray, under: np.ndarray, nbins: int
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per bin: outcomes (nbins,), accuracy sums and under-estimates (nbins, k)."""
    count = np.bincount(bins, minlength=nbins)
    acc_sum = np.zeros((nbins, acc.shape[1]))
    under_sum = np.zeros((nbins, acc.shape[1]))
    np.add.at(acc_sum, bins, acc)
    np.add.at(under_sum, bins, under)
    return count, acc_sum, under_sum


def bin_choice(
    count: np.ndarray, acc_sum: np.ndarray, under_sum: np.ndarray, lam: float, min_jobs: int
) -> np.ndarray:
    """The rule per bin, as ``Calibration.choose`` decides on these sums: the first best
    of accuracy - lam x under-estimates; ``R_V3`` in bins with fewer than ``min_jobs``."""
    best = np.argmax(acc_sum - lam * under_sum, axis=1)
    return np.where(count < min_jobs, cal.R_V3, best)


def job_choice(acc: np.ndarray, under: np.ndarray, lam: float) -> np.ndarray:
    """Per job the rule with the best accuracy - lam x under (the first of equal ones)."""
    return np.argmax(acc - lam * under, axis=1)


def bisect_lambda(under_at: Callable[[float], int], allowed: int) -> float:
    """The smallest lambda (within a relative 1e-9) with ``under_at(lambda) <= allowed``.

    ``under_at`` must not increase with lambda (true of any choice by best score - lambda x
    under). 0 when lambda 0 already fits; LAMBDA_HIGH when nothing fits.
    """
    if under_at(0.0) <= allowed:
        return 0.0
    lo, hi = LAMBDA_LOW, LAMBDA_HIGH
    if under_at(lo) <= allowed:
        return lo
    if under_at(hi) > allowed:
        return hi
    for _ in range(BISECT_STEPS):
        mid = (lo * hi) ** 0.5
        if under_at(mid) <= allowed:
            hi = mid
        else:
            lo = mid
    return hi


def hindsight_bins(
    bins: np.ndarray, acc: np.ndarray, under: np.ndarray, allowed: int, min_jobs: int
) -> Tuple[np.ndarray, float]:
    """(c): the rule per job of the best one-rule-per-bin choice with at most ``allowed``
    under-estimates, and its lambda."""
    count, acc_sum, under_sum = bin_sums(bins, acc, under, cal.BINS)

    def under_at(lam: float) -> int:
        rule = bin_choice(count, acc_sum, under_sum, lam, min_jobs)
        return int(under_sum[np.arange(cal.BINS), rule].sum())

    lam = bisect_lambda(under_at, allowed)
    return bin_choice(count, acc_sum, under_sum, lam, min_jobs)[bins], lam


def hindsight_jobs(acc: np.ndarray, under: np.ndarray, allowed: int) -> Tuple[np.ndarray, float]:
    """(d): the rule per job of the per-job oracle with at most ``allowed`` under-estimates."""
    rows = np.arange(len(acc))

    def under_at(lam: float) -> int:
        return int(under[rows, job_choice(acc, under, lam)].sum())

    lam = bisect_lambda(under_at, allowed)
    return job_choice(acc, under, lam), lam


def first_on_second(
    keys: np.ndarray,
    nkeys: int,
    acc: np.ndarray,
    under: np.ndarray,
    v3_under: np.ndarray,
    second: np.ndarray,
) -> Tuple[float, float]:
    """Mean accuracy on the ``second`` jobs of the choice per key learnt on the others
    (keys with < 30 outcomes there: v3), lambda set so that the second part's
    under-estimates are at most v3's there; and that lambda."""
    first = ~second
    count, acc_sum, under_sum = bin_sums(keys[first], acc[first], under[first], nkeys)
    rows = np.flatnonzero(second)

    def rules(lam: float) -> np.ndarray:
        return bin_choice(count, acc_sum, under_sum, lam, cal.MIN_BIN_JOBS)[keys[rows]]

    lam = bisect_lambda(lambda lam: int(under[rows, rules(lam)].sum()), int(v3_under[second].sum()))
    return float(acc[rows, rules(lam)].mean()), lam


def pick(softs: np.ndarray, rule: np.ndarray) -> np.ndarray:
    """Each job's soft walltime under the rule chosen for it."""
    return softs[np.arange(len(softs)), rule]


# ---------------------------------------------------------------------------------------
# The replay: evaluate's own code, recording each job's outcome


class Recorder(cal.Calibration):
    """Today's table, also keeping every outcome it learns, in the order it learns them
    (``replay_calibrated`` calls ``update`` once per job, in ``by_end`` order)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: List[Tuple[cal.Outcome, int]] = []

    def update(
        self,
        out: cal.Outcome,
        runtime_s: int,
        target_under_pct: Optional[float],
        soft_walltime_s: Optional[int] = None,
    ) -> None:
        self.seen.append((out, runtime_s))
        super().update(out, runtime_s, target_under_pct, soft_walltime_s)


class FixedLambda(cal.Calibration):
    """Today's table with lambda held fixed (no steering): the online learner alone."""

    def __init__(self, lam: float) -> None:
        super().__init__()
        self.level = round(math.log(lam) / cal.LAMBDA_GRID)
        self.lam = math.exp(cal.LAMBDA_GRID * self.level)
        self.cold = 0  # predictions from a bin with fewer than MIN_BIN_JOBS outcomes

    def _steer(self, step: float) -> None:
        pass

    def choose(self, bin_: int) -> int:
        if self.jobs[bin_] < cal.MIN_BIN_JOBS:
            self.cold += 1
        return super().choose(bin_)


def online_fixed(cols: ev.ReplayColumns, allowed: int) -> Tuple[List[int], float, int]:
    """The online table with one fixed lambda, bisected (on a 1 % grid of log lambda) so
    that its under-estimates are at most ``allowed``: (softs, lambda, cold predictions)."""
    runs = cols.runs

    def run(lam: float) -> Tuple[List[int], int, int]:
        table = FixedLambda(lam)
        softs, _ = ev.replay_calibrated(cols, 0.0, table)
        return softs, sum(1 for s, r in zip(softs, runs) if s < r), table.cold

    lo, hi = math.log(cal.LAMBDA_MIN), math.log(cal.LAMBDA_MAX)
    while hi - lo > 2 * cal.LAMBDA_GRID:
        mid = (lo + hi) / 2
        if run(math.exp(mid))[1] <= allowed:
            hi = mid
        else:
            lo = mid
    softs, _under, cold = run(math.exp(hi))
    return softs, math.exp(hi), cold


def cross_fit(
    bins: np.ndarray, acc: np.ndarray, under: np.ndarray, fold: np.ndarray, allowed: int
) -> Tuple[np.ndarray, float]:
    """(c) without selection bias: each fold's jobs get the per-bin choice made on the
    other fold (bins with < 30 outcomes there: v3); one lambda, at most ``allowed``."""
    sums = [bin_sums(bins[fold == f], acc[fold == f], under[fold == f], cal.BINS) for f in (0, 1)]
    rows = np.arange(len(bins))

    def rules(lam: float) -> np.ndarray:
        by_fold = [bin_choice(*sums[1 - f], lam, cal.MIN_BIN_JOBS) for f in (0, 1)]
        return np.where(fold == 0, by_fold[0][bins], by_fold[1][bins])

    lam = bisect_lambda(lambda lam: int(under[rows, rules(lam)].sum()), allowed)
    return rules(lam), lam


class Jobs(NamedTuple):
    """One trace's evaluated jobs, in ``columns`` order."""

    runs: np.ndarray
    bins: np.ndarray
    softs: np.ndarray  # (n, NRULES)
    v3: np.ndarray  # evaluate's v3
    tracking: np.ndarray  # calibrated, target v3's running rate
    fixed: np.ndarray  # calibrated, target v3's rate on the trace (fixed)
    rank: np.ndarray  # position in submit order (by_instant)
    users: np.ndarray  # user index (first appearance order)
    online: np.ndarray  # calibrated with lambda fixed, at most v3's under-estimates
    online_lam: float
    online_cold: int
    replay_s: float


def record(path: str) -> Jobs:
    """Replay one trace as ``evaluate`` does and keep what the analysis needs."""
    trace = read_sources([path])
    cols, skipped = ev.columns(trace.jobs, "submit", release=True)
    n = len(cols.runs)
    started = time.perf_counter()
    v3 = ev.replay_columns(cols, skipped, ["v3"], PredictorParams.create()).soft_s["v3"]
    table = Recorder()
    tracking, _ = ev.replay_calibrated(cols, None, table)
    assert len(table.seen) == n
    bins = np.zeros(n, dtype=np.int64)
    softs = np.zeros((n, NRULES), dtype=np.int64)
    for k, (out, runtime_s) in enumerate(table.seen):
        j = cols.by_end[k]
        assert runtime_s == cols.runs[j], "update() calls are not in by_end order"
        bins[j] = out.bin
        softs[j] = out.softs
    del table
    runs = np.array(cols.runs, dtype=np.int64)
    v3_arr = np.array(v3, dtype=np.int64)
    differ = int((softs[:, cal.R_V3] != v3_arr).sum())
    assert differ == 0, f"calibrated's v3 rule differs from evaluate's v3 on {differ} jobs"
    v3_rate = 100.0 * int((v3_arr < runs).sum()) / n
    fixed, _ = ev.replay_calibrated(cols, v3_rate)
    rank = np.zeros(n, dtype=np.int64)
    rank[np.array(cols.by_instant, dtype=np.int64)] = np.arange(n)
    index: Dict[str, int] = {}
    users = np.array([index.setdefault(u, len(index)) for u in cols.users], dtype=np.int64)
    online, online_lam, cold = online_fixed(cols, int((v3_arr < runs).sum()))
    return Jobs(
        runs,
        bins,
        softs,
        v3_arr,
        np.array(tracking, dtype=np.int64),
        np.array(fixed, dtype=np.int64),
        rank,
        users,
        np.array(online, dtype=np.int64),
        online_lam,
        cold,
        time.perf_counter() - started,
    )


# ---------------------------------------------------------------------------------------
# Figures


def metrics(soft: np.ndarray, runs: np.ndarray) -> ev.Metrics:
    return ev.metrics(soft.tolist(), runs.tolist())


def row(name: str, m: ev.Metrics, base_acc: float, lam: Optional[float] = None) -> str:
    assert m.under_pct is not None and m.bad_under_pct is not None
    assert m.mean_accuracy is not None and m.median_accuracy is not None
    assert m.mae_hours is not None
    lam_text = "" if lam is None else f"{lam:>9.3g}"
    return (
        f"  {name:<34}{m.under_pct:>8.2f}{m.bad_under_pct:>8.2f}{m.mean_accuracy:>8.3f}"
        f"{m.median_accuracy:>8.3f}{m.mae_hours:>8.2f}{m.mean_accuracy - base_acc:>+8.3f}{lam_text}"
    )


def mean_acc(soft: np.ndarray, runs: np.ndarray) -> float:
    return float(accuracy_matrix(soft[:, None], runs).mean())


def gains_by(
    label: str, groups: np.ndarray, names: Sequence[str], jobs: Jobs, columns: Sequence[np.ndarray]
) -> None:
    """Per group: share of jobs and each column's accuracy gain over v3, as points of the
    trace's mean (the groups' figures add up to the overall gain)."""
    n = len(jobs.runs)
    base = accuracy_matrix(jobs.v3[:, None], jobs.runs)[:, 0]
    accs = [accuracy_matrix(c[:, None], jobs.runs)[:, 0] - base for c in columns]
    print(f"  gain over v3 by {label} (share of the overall mean acc gain):")
    print(f"    {'':<16}{'jobs':>7}" + "".join(f"{name:>14}" for name in names))
    for g, gname in enumerate(names_of(label)):
        member = groups == g
        if not member.any():
            continue
        cells = "".join(f"{float(a[member].sum()) / n:>+14.4f}" for a in accs)
        print(f"    {gname:<16}{member.sum() / n:>7.1%}{cells}")


def names_of(label: str) -> List[str]:
    if label == "key level":
        return list(cal.LEVELS)
    if label == "run time in its class":
        return ["<= median+60s", "<= max+60s", "> max+60s", "no history"]
    return ["<1.25", "1.25-2", "2-5", ">=5", "no history"]


def run_trace(path: str) -> None:
    started = time.perf_counter()
    jobs = record(path)
    runs, softs, bins = jobs.runs, jobs.softs, jobs.bins
    n = len(runs)
    acc = accuracy_matrix(softs, runs)
    under = (softs < runs[:, None]).astype(np.float64)
    allowed = int((jobs.v3 < runs).sum())
    c30_rule, c30_lam = hindsight_bins(bins, acc, under, allowed, cal.MIN_BIN_JOBS)
    call_rule, call_lam = hindsight_bins(bins, acc, under, allowed, 0)
    d_rule, d_lam = hindsight_jobs(acc, under, allowed)
    c30 = pick(softs, c30_rule)
    call = pick(softs, call_rule)
    oracle = pick(softs, d_rule)
    base = metrics(jobs.v3, runs)
    assert base.mean_accuracy is not None
    b = base.mean_accuracy
    print(
        f"{Path(path).name}: {n} jobs, v3 under {base.under_pct:.2f} % "
        f"(replays {jobs.replay_s:.1f} s, all {time.perf_counter() - started:.1f} s)"
    )
    print(
        f"  {'':<34}{'under%':>8}{'bad%':>8}{'mean':>8}{'median':>8}{'MAE h':>8}"
        f"{'acc-v3':>8}{'lambda':>9}"
    )
    print(row("(a) v3", base, b))
    print(row("(b) calibrated tracking v3", metrics(jobs.tracking, runs), b))
    print(row("(b') calibrated at v3's rate", metrics(jobs.fixed, runs), b))
    print(row("(c) hindsight per bin, >= 30", metrics(c30, runs), b, c30_lam))
    print(row("(c') hindsight per bin, every bin", metrics(call, runs), b, call_lam))
    print(row("(d) hindsight per job (17 rules)", metrics(oracle, runs), b, d_lam))
    print(row("online, lambda fixed (no steering)", metrics(jobs.online, runs), b, jobs.online_lam))
    print(f"    (its predictions from bins with < 30 outcomes: {jobs.online_cold / n:.1%})")
    for name, fold in (
        ("(c) cross-fit, alternate jobs", jobs.rank % 2),
        ("(c) cross-fit, users by parity", jobs.users % 2),
    ):
        rule, lam = cross_fit(bins, acc, under, fold, allowed)
        print(row(name, metrics(pick(softs, rule), runs), b, lam))

    # Halves (submit order): the online learner, (c), and a table learnt on the first half
    # alone (per bin as today, or per user), lambda set in hindsight on the second.
    second = jobs.rank >= n // 2
    first = ~second
    by_bin, lam1 = first_on_second(bins, cal.BINS, acc, under, jobs.v3 < runs, second)
    by_user, lam_u = first_on_second(
        jobs.users, int(jobs.users.max()) + 1, acc, under, jobs.v3 < runs, second
    )
    print("  mean acc by half (submit order):  v3  tracking     (c)  1st half's table on the 2nd")
    for name, part in (("first", first), ("second", second)):
        cells = [mean_acc(x[part], runs[part]) for x in (jobs.v3, jobs.tracking, c30)]
        text = "".join(f"{v:>8.3f}" for v in cells)
        if name == "second":
            text += f"  per bin {by_bin:.3f} (lambda {lam1:.3g}), per user {by_user:.3f}"
            text += f" (lambda {lam_u:.3g})"
        under_t = 100.0 * float((jobs.tracking[part] < runs[part]).mean())
        under_v = 100.0 * float((jobs.v3[part] < runs[part]).mean())
        print(f"    {name:<8}{text}   [under v3 {under_v:.2f} %, tracking {under_t:.2f} %]")

    names = ["tracking", "(c)", "(d)"]
    columns = [jobs.tracking, c30, oracle]
    per_level = cal.N_SIZE * cal.N_SPREAD * cal.N_LEVEL
    level = bins // per_level
    gains_by("key level", level, names, jobs, columns)
    spread = (bins // cal.N_LEVEL) % cal.N_SPREAD
    spread = np.where(level == cal.LEVEL_NONE, cal.N_SPREAD, spread)
    gains_by("spread (max/min)", spread, names, jobs, columns)
    # Where the run time fell in its class: what (d) sees and (c) cannot.
    median_rule = 2 + 3 * STAT_MEDIAN  # median x 1 + 60 s
    max_rule = 2 + 3 * STAT_MAX  # max x 1 + 60 s
    place = np.where(runs <= softs[:, median_rule], 0, np.where(runs <= softs[:, max_rule], 1, 2))
    place = np.where(level == cal.LEVEL_NONE, 3, place)
    gains_by("run time in its class", place, names, jobs, columns)
    sys.stdout.flush()


def merge_size(bin_: int) -> int:
    """The bin with its class-size dimension dropped (size 0): bins that differ only in
    class size become one (80 bins in use instead of 240)."""
    per_level = cal.N_SIZE * cal.N_SPREAD * cal.N_LEVEL
    level, rest = divmod(bin_, per_level)
    return level * per_level + rest % (cal.N_SPREAD * cal.N_LEVEL)


_TODAY_OUTCOME = cal.outcome_of_usable


def _outcome_merged(
    walltime_s: int,
    ncpus: Optional[int],
    usable: List[cal.ClassRow],
    same_wall: Optional[List[cal.ClassRow]] = None,
) -> cal.Outcome:
    out = _TODAY_OUTCOME(walltime_s, ncpus, usable, same_wall)
    return out._replace(bin=merge_size(out.bin))


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("traces", nargs="*", help="SWF traces (default: the five of issue 18)")
    parser.add_argument(
        "--merge-size",
        action="store_true",
        help="a variant of calibrated without the class-size bin dimension, everything "
        "(online replays included) on its bins",
    )
    args = parser.parse_args(argv)
    if args.merge_size:
        # replay_calibrated reads cal.outcome_of_usable at each call: the variant's bins
        cal.outcome_of_usable = _outcome_merged
    for path in args.traces or [str(p) for p in DEFAULT]:
        run_trace(path)
        print()


if __name__ == "__main__":
    main()
