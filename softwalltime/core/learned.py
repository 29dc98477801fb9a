"""Predictor ``learned``: per-site choice among candidate rules, by submit-time bins (issue 31).

For each job, from the user's finished jobs only (what PBS has at submit):

1. **Candidate rules** (:data:`RULES`): the walltime; v3; the user's largest run/walltime
   ratio over the last 50 jobs (x 1 and x 1.1) and over the last 15 jobs with the same
   requested walltime (x 1, x 1.1); ``B x f + a`` with ``B`` the largest run time of the
   last 5 same-walltime jobs (else of the user's last 5 jobs), ``f`` in 1, 1.1, 1.25, 1.5,
   2, 3, 5 and ``a`` 0 or 60 s; the newest same-walltime run time (else the newest run
   time) x 1.1, 1.5 or 2, + 60 s; that run time itself; the median of B's window, x 1
   and x 1.5 + 60 s (these three: +0.02 accuracy on CERIT-SC at v3's rate, nothing
   elsewhere). Every value is rounded up and kept in [1, walltime].
2. **Bins** (:func:`outcome`): coarse by the number of same-walltime jobs among the last
   100 (0, 1, 2-4, 5-9, 10+), the spread max/min of B's window (<= 1.05, 1.2, 1.5, 2, 4,
   more) and B / walltime (<= 0.01, 0.05, 0.2, 0.5, 0.9, more); fine adds the time since
   the user's last job ended (<= 1 min, 10 min, 1 h, 1 day, more).
3. **The site's table** (:class:`Learner`): per (bin, rule) the jobs, under-estimates and
   accuracy sum of every job that has ended. A fine bin's rates shrink towards its coarse
   bin's, which shrink towards the site's, with :data:`PSEUDO` (100) pseudo-jobs each.
4. **The choice**: the rule with the best ``accuracy - lam x under-rate``. At every job
   end, with ``under`` 1 when the soft walltime the job got was short of its run time and
   ``allowed`` the target rate, or 1 when v3 was short (target "v3"): a slow level moves
   by ``ETA_C / sqrt(jobs ended) x (under - allowed)``, and ``log lam`` is that level plus
   ``KAPPA x deficit / band``, the deficit the running sum of ``under - allowed`` and the
   band the tolerance, ``TOLERANCE`` of the jobs ended (at least ``BAND_MIN_JOBS``). So
   the running under-estimate count tracks the target's: the deficit pushes lam as hard
   at the tolerance's edge on a large site as on a small one, while a user's batch of
   correlated ends within it barely moves lam (``ETA`` 0.05 on every end, as first
   written, swung lam between 0.02 and 200 on CERIT-SC; +0.012 accuracy on HPC2N).
   The **rank** is the rule with the best accuracy alone (a typical run time, not a safe
   one), from the same table.

Pure: the same history, instant and table give the same choice. Python 3.6+ syntax,
standard library only (the hook may import it).
"""

import math
from operator import add
from typing import List, NamedTuple, Optional, Sequence, Tuple

from . import registry

NAME = registry.LEARNED

# One history row: (runtime_s, walltime_s, end_s), newest end first, every walltime > 0.
Row = Tuple[int, int, int]

HISTORY_ROWS = 100
RATIO_JOBS = 50
SAME_RATIO_JOBS = 15
B_JOBS = 5
V3_JOBS = 15
V3_RESERVE_S = 900
PSEUDO = 100.0  # pseudo-jobs a bin's rates shrink with
MIN_SITE_JOBS = 100  # before this many ended jobs the site uses v3
ETA_C = 1.0  # the slow level's step: ETA_C / sqrt(jobs ended)
KAPPA = 1.5  # log lam rises by KAPPA when the deficit reaches the band
TOLERANCE = 0.0025  # the band: this share of the jobs ended (the goal's +-0.25 point)...
BAND_MIN_JOBS = 20  # ...or at least this many jobs
LAMBDA_START = 1.0
LOG_LAMBDA_MIN = math.log(0.0001)  # 0.01 was too high for CERIT-SC: stuck 0.9 points under
LOG_LAMBDA_MAX = math.log(1000.0)

B_FACTORS = ((1, 1), (11, 10), (5, 4), (3, 2), (2, 1), (3, 1), (5, 1))
B_ADDS = (0, 60)
LAST_FACTORS = ((11, 10), (3, 2), (2, 1))
LAST_ADD_S = 60

RULES = (
    ("walltime", "v3", "ratio50", "ratio50*1.1", "same-ratio15", "same-ratio15*1.1")
    + tuple(f"B*{n / d:g}+{a}" for n, d in B_FACTORS for a in B_ADDS)
    + tuple(f"last*{n / d:g}+{LAST_ADD_S}" for n, d in LAST_FACTORS)
    + ("last", "median", "median*1.5+60")
)
R_WALLTIME = 0
R_V3 = 1
N_RULES = len(RULES)

N_SAME = 5  # 0, 1, 2-4, 5-9, 10+
SPREAD_CUTS = ((21, 20), (6, 5), (3, 2), (2, 1), (4, 1))  # max <= cut x min
LEVEL_CUTS = ((1, 100), (1, 20), (1, 5), (1, 2), (9, 10))  # B <= cut x walltime
GAP_CUTS = (60, 600, 3600, 86400)
N_SPREAD = len(SPREAD_CUTS) + 1
N_LEVEL = len(LEVEL_CUTS) + 1
N_GAP = len(GAP_CUTS) + 1
COARSE = N_SAME * N_SPREAD * N_LEVEL
FINE = COARSE * N_GAP
MANY_SHORT = 10  # Learner.update: above this many rules short, it adds lists, not cells
_ALL_RULES = list(range(N_RULES))
_ONES = [1.0] * N_RULES


class Outcome(NamedTuple):
    """One job's bins (``coarse`` -1 without history), every rule's soft walltime, and the
    smallest and largest of them."""

    coarse: int
    fine: int
    softs: Tuple[int, ...]
    low: int
    high: int


def _same_bucket(n: int) -> int:
    if n < 2:
        return n
    return 2 if n < 5 else (3 if n < 10 else 4)


def ratios_of(rows: Sequence[Row]) -> List[float]:
    """Each of the first RATIO_JOBS rows' run/walltime, the ``ratios`` :func:`outcome` reads."""
    return [row[0] / row[1] for row in rows[:RATIO_JOBS]]


def _largest_ratio(rows: Sequence[Row], ratios: Sequence[float]) -> Row:
    """A row of ``rows`` with the largest run/walltime, exactly (``ratios``: theirs, as
    floats, the same length). Division is correctly rounded, so monotonic: the largest
    ratio has the largest float, and equal floats are told apart by exact products."""
    top = max(ratios)
    first = ratios.index(top)
    if ratios.count(top) > 1:
        return _exact_top(rows, ratios, top, first)
    return rows[first]


def _exact_top(rows: Sequence[Row], ratios: Sequence[float], top: float, first: int) -> Row:
    """The row of the largest exact ratio among those whose float is ``top`` (the first of
    them: ``rows[first]``, unless one is larger)."""
    best = rows[first]
    for row, ratio in zip(rows, ratios):
        if ratio == top and row[0] * best[1] > best[0] * row[1]:
            best = row
    return best


def _largest_ratios(rows: Sequence[Row], ratios: Sequence[float]) -> Tuple[Row, Row]:
    """:func:`_largest_ratio` of the first V3_JOBS rows and of the first RATIO_JOBS (one
    scan when the latter's largest is among the former, as it is for most users)."""
    top = max(ratios)
    first = ratios.index(top)
    r_row = rows[first] if ratios.count(top) == 1 else _exact_top(rows, ratios, top, first)
    if first >= V3_JOBS:  # smaller in the first V3_JOBS
        return _largest_ratio(rows[:V3_JOBS], ratios[:V3_JOBS]), r_row
    if r_row is rows[first]:  # the first float of the largest is the largest exactly
        return r_row, r_row
    return _exact_top(rows[:V3_JOBS], ratios[:V3_JOBS], top, first), r_row


_new = tuple.__new__  # Outcome(...) without the Python-level __new__ of a NamedTuple


def outcome(
    walltime_s: int,
    history: Sequence[Row],
    now_s: int,
    same: Optional[Sequence[Row]] = None,
    ratios: Optional[Sequence[float]] = None,
) -> Outcome:
    """Every rule's soft walltime for a job submitted at ``now_s``, and its bins (pure).

    :param walltime_s: requested walltime (> 0)
    :param history: the user's finished jobs, newest end first, every walltime > 0 (at most
        :data:`HISTORY_ROWS` are read)
    :param now_s: the prediction instant (for the time since the last end)
    :param same: the rows of ``history`` with this walltime, in order, if the caller keeps
        them (the replay does, per user and walltime)
    :param ratios: :func:`ratios_of` ``history`` (at least its first RATIO_JOBS), if the
        caller keeps them (the replay does, per user)
    """
    rows = history if len(history) <= HISTORY_ROWS else history[:HISTORY_ROWS]
    if not rows:
        return Outcome(-1, -1, (walltime_s,) * N_RULES, walltime_s, walltime_s)
    if same is None:
        same = [row for row in rows if row[1] == walltime_s]
    fractions: Sequence[float]
    if ratios is None:
        fractions = ratios_of(rows)
    else:
        fractions = ratios if len(ratios) <= RATIO_JOBS else ratios[:RATIO_JOBS]
    b_rows = same[:B_JOBS] if same else rows[:B_JOBS]
    if len(b_rows) == 1:
        b = low = median = b_rows[0][0]
    else:
        window = sorted([row[0] for row in b_rows])
        b = window[-1]
        low = window[0]
        median = window[(len(window) - 1) // 2]
    last = same[0][0] if same else rows[0][0]
    v3_row, (r_rt, r_wt, _end) = _largest_ratios(rows, fractions)
    v3 = -(-v3_row[0] * walltime_s // v3_row[1]) + V3_RESERVE_S
    r50 = -(-r_rt * walltime_s // r_wt)
    r50x = -(-r_rt * walltime_s * 11 // (r_wt * 10))
    if same:
        s15 = max([row[0] for row in same[:SAME_RATIO_JOBS]]) if len(same) > 1 else last
        s15x = -(-s15 * 11 // 10)
    else:
        s15, s15x = r50, r50x
    # B x f for f in B_FACTORS, each + 0 and + 60 (B_ADDS), written out for speed
    b11, b125, b15 = -(-b * 11 // 10), -(-b * 5 // 4), -(-b * 3 // 2)
    b2, b3, b5 = 2 * b, 3 * b, 5 * b
    values = [walltime_s, v3, r50, r50x, s15, s15x, b, b + 60, b11, b11 + 60, b125,
              b125 + 60, b15, b15 + 60, b2, b2 + 60, b3, b3 + 60, b5, b5 + 60,
              -(-last * 11 // 10) + 60, -(-last * 3 // 2) + 60, 2 * last + 60,
              last, median, -(-median * 3 // 2) + 60]  # fmt: skip
    softs = tuple([walltime_s if v > walltime_s else (v if v >= 1 else 1) for v in values])
    spread = 0
    for num, den in SPREAD_CUTS:
        if b * den <= num * low:
            break
        spread += 1
    level = 0
    for num, den in LEVEL_CUTS:
        if b * den <= num * walltime_s:
            break
        level += 1
    gap_s = now_s - rows[0][2]
    gap = 0
    for cut in GAP_CUTS:
        if gap_s <= cut:
            break
        gap += 1
    coarse = (_same_bucket(len(same)) * N_SPREAD + spread) * N_LEVEL + level
    high = walltime_s if walltime_s >= 1 else max(softs)  # softs[R_WALLTIME]: the largest
    return _new(Outcome, (coarse, coarse * N_GAP + gap, softs, min(softs), high))


class Learner:
    """The site's table: per bin (fine, coarse, site) and rule the jobs, under-estimates
    and accuracy sums of the jobs ended so far, and ``lam``. ``u_fine[b]`` and
    ``a_fine[b]`` are fine bin ``b``'s lists of N_RULES sums (likewise coarse); ``u_site``
    and ``a_site`` the site's."""

    __slots__ = ("n_fine", "n_coarse", "n_site", "u_fine", "u_coarse", "u_site", "a_fine",
                 "a_coarse", "a_site", "log_lam", "lam", "total", "total_under",
                 "v3_under", "level", "_kept")  # fmt: skip

    def __init__(self) -> None:
        # floats: a prior's pseudo-jobs (replay/prior.py) are fractions of jobs
        self.n_fine = [0.0] * FINE
        self.n_coarse = [0.0] * COARSE
        self.n_site = 0.0
        self.u_fine = [[0.0] * N_RULES for _ in range(FINE)]
        self.u_coarse = [[0.0] * N_RULES for _ in range(COARSE)]
        self.u_site = [0.0] * N_RULES
        self.a_fine = [[0.0] * N_RULES for _ in range(FINE)]
        self.a_coarse = [[0.0] * N_RULES for _ in range(COARSE)]
        self.a_site = [0.0] * N_RULES
        self.log_lam = math.log(LAMBDA_START)
        self.lam = LAMBDA_START
        self.level = self.log_lam  # the slow level; log_lam adds the deficit's push
        self.total = 0
        self.total_under = 0
        self.v3_under = 0
        # the last choice: (fine bin, jobs learnt, lam, rule); the same while no job ended
        # and lam did not move (a user's batch of jobs submitted at once)
        self._kept = (-1, -1.0, 0.0, 0)

    def _weights(self, out: Outcome) -> Tuple[float, float, float, float]:
        """``(df, wc, dc, ws)``: a rate in the fine bin is ``fine sum x df + (coarse sum x
        dc + site sum x ws) x wc``: the fine bin's sums plus PSEUDO x the coarse bin's rate,
        itself its sums plus PSEUDO x the site's rate, over the jobs plus PSEUDO."""
        dc = 1.0 / (self.n_coarse[out.coarse] + PSEUDO)
        ws = PSEUDO * dc / (self.n_site or 1.0)  # the site's sums' weight in the coarse rate
        df = 1.0 / (self.n_fine[out.fine] + PSEUDO)
        return df, PSEUDO * df, dc, ws  # PSEUDO x df: the coarse rate's weight

    def scores(self, out: Outcome) -> Tuple[List[float], List[float]]:
        """Each rule's shrunk ``(accuracy, under-rate)`` in the job's fine bin."""
        df, wc, dc, ws = self._weights(out)
        sums = self._sums(out.fine, out.coarse)
        acc, under = (
            [f * df + (c * dc + s * ws) * wc for f, c, s in zip(*three)]
            for three in (sums[:3], sums[3:])
        )
        return acc, under

    def choose(self, out: Outcome) -> int:
        """The rule for the job's soft walltime: best accuracy - lam x under-rate (the
        first of equal scores)."""
        if out.coarse < 0 or self.n_site < MIN_SITE_JOBS:
            return R_V3
        kept = self._kept
        lam = self.lam
        if kept[0] == out.fine and kept[1] == self.n_site and kept[2] == lam:
            return kept[3]
        fine = out.fine
        coarse = out.coarse
        # _weights() written out (once per prediction)
        dc = 1.0 / (self.n_coarse[coarse] + PSEUDO)
        ws = PSEUDO * dc / (self.n_site or 1.0)
        df = 1.0 / (self.n_fine[fine] + PSEUDO)
        wc = PSEUDO * df
        best = self._best(fine, coarse, df, dc, ws, wc, lam)
        self._kept = (fine, self.n_site, lam, best)
        return best

    def _best(
        self, fine: int, coarse: int, df: float, dc: float, ws: float, wc: float, lam: float
    ) -> int:
        """The first rule with the best ``accuracy - lam x under-rate`` in fine bin
        ``fine`` (:meth:`scores` written out in one pass, the same floats; the replay's
        ``learned_native`` runs it in C)."""
        values = [
            fa * df + (ca * dc + sa * ws) * wc - lam * (fu * df + (cu * dc + su * ws) * wc)
            for fa, ca, sa, fu, cu, su in zip(*self._sums(fine, coarse))
        ]
        return values.index(max(values))

    def _sums(self, fine: int, coarse: int) -> Tuple[List[float], ...]:
        """The sums a score in fine bin ``fine`` (of ``coarse``) reads: the accuracy sums of
        the fine bin, the coarse bin and the site, then their under-estimate sums."""
        return (
            self.a_fine[fine],
            self.a_coarse[coarse],
            self.a_site,
            self.u_fine[fine],
            self.u_coarse[coarse],
            self.u_site,
        )

    def rank_rule(self, out: Outcome) -> int:
        """The rule for the job's rank: the best accuracy alone."""
        if out.coarse < 0 or self.n_site < MIN_SITE_JOBS:
            return R_V3
        acc, _under = self.scores(out)
        return acc.index(max(acc))

    def update(self, out: Outcome, runtime_s: int, soft_s: int, target: Optional[float]) -> None:
        """Learn from one ended job (call in end order).

        :param soft_s: the soft walltime it got
        :param target: the under-estimate target, a fraction (0.12), or ``None``: v3's
        """
        softs = out.softs
        under = 1 if soft_s < runtime_s else 0
        v3_under = 1 if softs[R_V3] < runtime_s else 0
        self.total += 1
        self.total_under += under
        self.v3_under += v3_under
        error = under - v3_under if target is None else under - target
        deficit = self.deficit(target)
        if error or deficit:  # (with a deficit, the band widened: the push eases)
            self._steer(error, deficit)
        coarse = out.coarse
        if coarse < 0:
            return
        fine = out.fine
        self.n_site += 1
        self.n_coarse[coarse] += 1
        self.n_fine[fine] += 1
        if runtime_s > 0:  # else every soft walltime is >= 1 s: accuracy 0, none under
            self._add(coarse, fine, softs, runtime_s, out.low, out.high)

    def _add(
        self, coarse: int, fine: int, softs: Tuple[int, ...], r: int, low: int, high: int
    ) -> None:
        """Add one ended job of run time ``r`` > 0 to the sums of its bins and the site's:
        each rule's accuracy, and 1 under-estimate to each rule short of ``r`` (``low``
        and ``high``: the smallest and largest of ``softs``; the replay's
        ``learned_native`` runs it in C)."""
        if r <= low:  # no rule short: accuracy r / v (1.0 when v == r) for each
            accs = [r / v for v in softs]
        elif r > high:  # every rule short: v / r
            accs = [v / r for v in softs]
        else:
            accs = [v / r if v < r else r / v for v in softs]
        self.a_site = list(map(add, self.a_site, accs))
        self.a_coarse[coarse] = list(map(add, self.a_coarse[coarse], accs))
        self.a_fine[fine] = list(map(add, self.a_fine[fine], accs))
        if r > low:  # the rules short count one more (+ 0.0 leaves a sum as it is)
            self._count_short(coarse, fine, softs, r, r > high)

    def deficit(self, target: Optional[float]) -> float:
        """The running sum of ``under - allowed`` over the jobs learnt (``target`` as in
        :meth:`update`)."""
        if target is None:
            return self.total_under - self.v3_under
        return self.total_under - target * self.total

    def push(self, deficit: float) -> float:
        """What ``deficit`` adds to the slow level in log lam: KAPPA per band, the band
        TOLERANCE of the jobs learnt (at least BAND_MIN_JOBS)."""
        band = TOLERANCE * self.total
        if BAND_MIN_JOBS > band:  # max(band, BAND_MIN_JOBS) without a builtin's call
            band = BAND_MIN_JOBS
        return KAPPA * deficit / band

    def _steer(self, error: float, deficit: float) -> None:
        """Move lam after a job end whose ``under - allowed`` is ``error``, ``deficit`` the
        running sum of those (see the module's 4.); the level and log lam each within
        LOG_LAMBDA_MIN..LOG_LAMBDA_MAX."""
        # min(max(x, LOW), HIGH) written out: the same values, without a builtin's call at
        # every end
        low, high = LOG_LAMBDA_MIN, LOG_LAMBDA_MAX
        level = self.level + ETA_C / math.sqrt(self.total) * error
        level = low if low > level else (high if high < level else level)
        log_lam = level + self.push(deficit)
        log_lam = low if low > log_lam else (high if high < log_lam else log_lam)
        self.level = level
        if log_lam != self.log_lam:
            self.log_lam = log_lam
            self.lam = math.exp(log_lam)

    def _count_short(
        self, coarse: int, fine: int, softs: Tuple[int, ...], r: int, every: bool
    ) -> None:
        """Add 1 to the under-estimates of the rules whose soft walltime is short of ``r``
        (``every``: all are)."""
        short = _ALL_RULES if every else [q for q, v in enumerate(softs) if v < r]
        if len(short) > MANY_SHORT:  # a sum per list is faster then
            unders = _ONES if every else [1.0 if v < r else 0.0 for v in softs]
            self.u_site = list(map(add, self.u_site, unders))
            self.u_coarse[coarse] = list(map(add, self.u_coarse[coarse], unders))
            self.u_fine[fine] = list(map(add, self.u_fine[fine], unders))
            return
        u_site = self.u_site
        u_coarse = self.u_coarse[coarse]
        u_fine = self.u_fine[fine]
        for q in short:
            u_site[q] += 1.0
            u_coarse[q] += 1.0
            u_fine[q] += 1.0
