"""Predictor ``calibrated``: per job class, calibrated online to an under-estimate target.

The paper's v3 treats all jobs of a user alike and cannot trade accuracy for
under-estimates. This predictor:

1. **Classes** the job by similarity keys, fine to coarse: the user's recent jobs with the
   same requested walltime *and* processors (``ncpus``), else the same requested walltime,
   else all the user's jobs (Tang et al.'s similarity keys). The finest key with at least
   ``MIN_KEY_JOBS`` (3) jobs among the user's last ``HISTORY_ROWS`` (100) finished jobs is
   used, over its ``KEY_JOBS`` (10) most recent jobs. Each job's run time is scaled to this
   job's walltime (``runtime x walltime / its walltime``, rounded up), so the rules below
   work in seconds of this job.
2. Computes the **candidate rules** (:data:`RULES`): the walltime itself, v3, and each
   statistic of the class (max, 90th/75th percentile, median, newest) x a factor + 60 s.
3. Puts the job in a **bin** by key level, class size, spread of the class's run times and
   their level relative to the walltime (:func:`features`).
4. Picks the rule with the best ``mean accuracy - lambda x under-rate`` in that bin, from a
   **site-wide calibration table** (:class:`Calibration`) of the outcomes of every rule on
   finished jobs (a bin with too few outcomes uses v3).
5. ``lambda`` is adjusted at every job end (:meth:`Calibration.update`), multiplicatively,
   so that the running under-estimate rate tracks the admin's ``target_under_pct``.

Causality: the table only ever learns from jobs that have ended, in end order; the hook
reads a snapshot of it (maintained by ``softwalltime calibrate``), the replay updates it at
each job end. Both run this module.

Hook path: Python 3.6+ syntax, standard library only, no database, no ``pbs``.
"""

import hashlib
import math
from itertools import islice
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from . import registry

NAME = registry.CALIBRATED

# One history entry: (runtime_s, walltime_s or None, ncpus or None), most recent end first.
ClassRow = Tuple[int, Optional[int], Optional[int]]

HISTORY_ROWS = 100  # the hook's one query reads at most this many rows of the user
KEY_JOBS = 10  # most recent jobs of the chosen key that the rules look at
MIN_KEY_JOBS = 3  # a key needs this many jobs to be used
V3_JOBS = 15
V3_RESERVE_S = 900
MIN_BIN_JOBS = 30  # outcomes a bin needs before its table choice replaces v3
LAMBDA_START = 2.0
LAMBDA_MIN = 0.01
LAMBDA_MAX = 1000.0
LAMBDA_STEP = 0.01  # lambda = LAMBDA_START x exp(step x the whole deficit), see Calibration
LAMBDA_INTEGRAL = 3e-6  # and x exp(integral x the deficit) at every job end
LAMBDA_GRID = 0.01  # choices use lambda rounded to exp(grid x an integer level)
LOG_LAMBDA_MIN = math.log(LAMBDA_MIN)
LOG_LAMBDA_MAX = math.log(LAMBDA_MAX)
DEFAULT_TARGET_UNDER_PCT = 12.0

# Rule ids, stable: the calibration table stores them.
R_WALLTIME = 0
R_V3 = 1
# The other rules: a statistic of the class's scaled run times x a factor + 60 s, every
# combination of STATISTICS and FACTORS (chosen on CERIT-SC, HPC2N and CTC-SP2: factors
# 1.1, 1.2 and 3 as well, 32 rules, gave the same accuracy at the same under-estimate rate
# within 0.002, and cost twice the time in a replay).
STATISTICS = ("max", "p90", "p75", "median", "last")  # "last": the newest job; this order
FACTORS = ((1, 1), (3, 2), (2, 1))  # exact fractions
RULE_ADD_S = 60
RULE_SPECS = tuple((stat, num, den, RULE_ADD_S) for stat in STATISTICS for num, den in FACTORS)


def _rule_name(spec: Tuple[str, int, int, int]) -> str:
    stat, num, den, add = spec
    return f"{stat}*{num / den:g}+{add}"


RULES = ("walltime", "v3") + tuple(_rule_name(spec) for spec in RULE_SPECS)
# The rule with the largest value (max x the largest factor): if it is within the walltime,
# so are all others.
_MAX_RULE = max(
    range(len(RULE_SPECS)),
    key=lambda k: (RULE_SPECS[k][0] == "max", RULE_SPECS[k][1] / RULE_SPECS[k][2]),
)

# Key levels (part of the bin).
LEVEL_WALL_NCPUS = 0
LEVEL_WALL = 1
LEVEL_USER = 2
LEVEL_NONE = 3
LEVELS = ("walltime+ncpus", "walltime", "user", "no history")


class Outcome(NamedTuple):
    """What the rules say for one job: its bin and each rule's soft walltime (by rule id)."""

    bin: int
    softs: Tuple[int, ...]
    level: int
    class_jobs: int


class Choice(NamedTuple):
    """The prediction: soft walltime, the rule chosen and the job's outcome record."""

    soft_walltime_s: int
    rule: int
    outcome: Outcome


def _clamp(value: int, walltime_s: int) -> int:
    if value > walltime_s:
        return walltime_s
    return value if value >= 1 else 1


def scaled_runs(rows: Sequence[ClassRow], walltime_s: int) -> List[int]:
    """Run times scaled to ``walltime_s``, at most KEY_JOBS of them (newest first): the run
    times :func:`features` gives for the rows of :func:`key_rows`."""
    return _scaled(rows, walltime_s)


def _scaled(rows: Sequence[ClassRow], walltime_s: int) -> List[int]:
    """Run times scaled to ``walltime_s``, at most KEY_JOBS of them (newest first)."""
    return [
        runtime_s if wall == walltime_s else -(-runtime_s * walltime_s // wall)  # type: ignore[operator]
        for runtime_s, wall, _ncpus in rows[:KEY_JOBS]
    ]


def _bucket(value: int, walltime_s: int, cuts: Sequence[Tuple[int, int]]) -> int:
    """Index of the first cut ``num/den`` with ``value < num/den x walltime``."""
    k = 0  # counted by hand: enumerate() costs a replay more
    for num, den in cuts:
        if value * den < num * walltime_s:
            return k
        k += 1
    return k


_LEVEL_CUTS = ((1, 20), (1, 8), (3, 10), (6, 10))  # max run/walltime: <0.05,<0.125,<0.3,<0.6,>=
_SPREAD_CUTS = ((5, 4), (2, 1), (5, 1))  # max/min run time: <1.25, <2, <5, >=5
N_LEVEL = len(_LEVEL_CUTS) + 1
N_SPREAD = len(_SPREAD_CUTS) + 1
N_SIZE = 3  # class size: 3-5, 6-14, >=15 (or 1-2 at the user level)
BINS = len(LEVELS) * N_SIZE * N_SPREAD * N_LEVEL


def features(
    walltime_s: int, ncpus: Optional[int], history: Iterable[ClassRow]
) -> Tuple[int, List[int], int]:
    """Choose the job's class: ``(level, scaled run times newest first, class size)``.

    :param walltime_s: the job's requested walltime (> 0)
    :param ncpus: the job's processors, ``None`` if unknown (then only the walltime key)
    :param history: the user's finished jobs, most recent first (at most HISTORY_ROWS read)
    """
    return _features(walltime_s, ncpus, _usable(history))


def key_rows(walltime_s: int, ncpus: Optional[int], history: Iterable[ClassRow]) -> List[ClassRow]:
    """The rows behind :func:`features`' run times, in the same order (newest first; at
    most KEY_JOBS): the class's jobs themselves, to price them (the rank's paid evidence)."""
    usable = _usable(history)
    same_wall = [row for row in usable if row[1] == walltime_s]
    if len(same_wall) >= MIN_KEY_JOBS:
        if ncpus is not None:
            same_both = [row for row in same_wall if row[2] == ncpus]
            if len(same_both) >= MIN_KEY_JOBS:
                return same_both[:KEY_JOBS]
        return same_wall[:KEY_JOBS]
    return usable[:KEY_JOBS]


def _usable(history: Iterable[ClassRow]) -> List[ClassRow]:
    """The rows with a walltime among the first HISTORY_ROWS (list comprehensions: this
    runs for every prediction of a replay)."""
    return [row for row in islice(history, HISTORY_ROWS) if row[1] and row[1] > 0]


def _features(
    walltime_s: int,
    ncpus: Optional[int],
    usable: List[ClassRow],
    same_wall: Optional[List[ClassRow]] = None,
    same_both: Optional[List[ClassRow]] = None,
) -> Tuple[int, List[int], int]:
    if same_wall is None:
        same_wall = [row for row in usable if row[1] == walltime_s]
    if len(same_wall) >= MIN_KEY_JOBS:
        if ncpus is not None:
            if same_both is None:
                same_both = [row for row in same_wall if row[2] == ncpus]
            if len(same_both) >= MIN_KEY_JOBS:
                runs = [row[0] for row in same_both[:KEY_JOBS]]
                return LEVEL_WALL_NCPUS, runs, len(same_both)
        return LEVEL_WALL, [row[0] for row in same_wall[:KEY_JOBS]], len(same_wall)
    if usable:
        return LEVEL_USER, _scaled(usable, walltime_s), len(usable)
    return LEVEL_NONE, [], 0


def _positions(m: int) -> Tuple[int, int, int]:
    """Where the p90, p75 and median of ``m`` sorted run times are (nearest rank)."""
    return max(0, -(-9 * m // 10) - 1), max(0, -(-3 * m // 4) - 1), (m - 1) // 2


_AT = [_positions(m) for m in range(KEY_JOBS + 1)]  # by class size (runs: <= KEY_JOBS)


def _v3(walltime_s: int, usable: Sequence[ClassRow]) -> int:
    """v3 with the default parameters (15 jobs, +900 s), exact, uncapped."""
    best_rt = 0
    best_wt = 0
    for row in usable[:V3_JOBS]:
        runtime_s, wall = row[0], row[1]
        if runtime_s * best_wt >= best_rt * wall:  # type: ignore[operator]
            best_rt = runtime_s
            best_wt = wall  # type: ignore[assignment]
    if best_wt == 0:
        return walltime_s
    num = best_rt * walltime_s + V3_RESERVE_S * best_wt
    return -(-num // best_wt)


def outcome(walltime_s: int, ncpus: Optional[int], history: Iterable[ClassRow]) -> Outcome:
    """Every rule's soft walltime for one job, and its bin (pure).

    :param walltime_s: requested walltime, seconds (> 0)
    :param ncpus: requested processors, or ``None``
    :param history: the user's finished jobs ``(runtime_s, walltime_s, ncpus)``, newest first
    """
    return outcome_of_usable(walltime_s, ncpus, _usable(history))


def outcome_of_usable(
    walltime_s: int,
    ncpus: Optional[int],
    usable: List[ClassRow],
    same_wall: Optional[List[ClassRow]] = None,
    same_both: Optional[List[ClassRow]] = None,
) -> Outcome:
    """:func:`outcome` of a history already cut to HISTORY_ROWS rows, every one with a
    walltime > 0 (the replay keeps its buffers so, and skips the filter).

    :param same_wall: the rows of ``usable`` with this walltime, in the same order, if the
        caller keeps them (the replay does, per user and walltime)
    :param same_both: the rows of ``same_wall`` with ``ncpus`` processors, in the same
        order, if the caller keeps them too (the simulation does, per user and class)
    """
    level, runs, n = _features(walltime_s, ncpus, usable, same_wall, same_both)
    if not runs:
        return Outcome(level * N_SIZE * N_SPREAD * N_LEVEL, (walltime_s,) * len(RULES), level, 0)
    v3 = _clamp(_v3(walltime_s, usable), walltime_s)
    ordered = sorted(runs)
    p90, p75, median = _AT[len(ordered)]
    top = ordered[-1]
    low = ordered[0]
    stats = (top, ordered[p90], ordered[p75], ordered[median], runs[0])  # runs[0]: last
    # every value is >= RULE_ADD_S >= 1, so only the cap at the walltime applies
    values = [walltime_s, v3]
    values += [-(-value * num // den) + RULE_ADD_S for value in stats for num, den in FACTORS]
    if values[2 + _MAX_RULE] > walltime_s:  # the largest value: cap the others only then
        values = [v if v < walltime_s else walltime_s for v in values]
    softs = tuple(values)
    size = 0 if n < 6 else (1 if n < 15 else 2)
    spread = _bucket(top, max(low, 1), _SPREAD_CUTS)
    lvl = _bucket(top, walltime_s, _LEVEL_CUTS)
    bin_ = ((level * N_SIZE + size) * N_SPREAD + spread) * N_LEVEL + lvl
    return Outcome(bin_, softs, level, n)


def accuracy(soft_s: int, runtime_s: int) -> float:
    """min(runtime/soft, soft/runtime), 1 when both are equal (the evaluation's measure)."""
    if soft_s == runtime_s:
        return 1.0
    if soft_s <= 0 or runtime_s <= 0:
        return 0.0
    return soft_s / runtime_s if soft_s < runtime_s else runtime_s / soft_s


class Calibration:
    """The site-wide calibration table: per (bin, rule) jobs, under-estimates, accuracy sum.

    Plus ``lam`` (the under-estimate penalty) and the running totals of the chosen rules.
    Build from stored values with :meth:`from_rows`; :meth:`rows` gives them back.

    ``lam`` is ``LAMBDA_START x exp(LAMBDA_STEP x level)``, ``level`` the whole part of the
    *deficit*: the under-estimates of the chosen rules minus those the target allows (the
    target rate x jobs, or, with target ``None``, the under-estimates v3 made on the same
    jobs). An integral controller: every job end moves the deficit, so the running rate
    is pulled back to the target however long it drifted; the deficit is bounded so that
    ``lam`` stays within LAMBDA_MIN..LAMBDA_MAX (no wind-up). A bin's choice depends on its
    cells and ``level`` only, so it is kept until either changes.
    """

    __slots__ = ("jobs", "under", "acc", "lam", "total", "total_under", "deficit", "log_lam",
                 "level", "_best")  # fmt: skip

    def __init__(self) -> None:
        size = BINS * len(RULES)
        self.jobs = [0] * BINS
        self.under = [0] * size
        self.acc = [0.0] * size
        self.lam = LAMBDA_START
        self.total = 0
        self.total_under = 0
        self.deficit = 0.0
        self.log_lam = math.log(LAMBDA_START)
        self.level = round(self.log_lam / LAMBDA_GRID)
        self.lam = math.exp(LAMBDA_GRID * self.level)
        # bin -> (its jobs, level, chosen rule): valid while both are unchanged
        self._best: Dict[int, Tuple[int, int, int]] = {}

    def choose(self, bin_: int) -> int:
        """The rule for a job in ``bin_``: best accuracy - lam x under-rate; v3 when unsure."""
        n = self.jobs[bin_]
        kept = self._best.get(bin_)
        if kept is not None and kept[0] == n and kept[1] == self.level:
            return kept[2]
        if n < MIN_BIN_JOBS:
            best = R_V3
        else:
            base = bin_ * len(RULES)
            end = base + len(RULES)
            lam = self.lam
            scores = [a - lam * u for a, u in zip(self.acc[base:end], self.under[base:end])]
            best = scores.index(max(scores))  # the first of equal scores, as before
        self._best[bin_] = (n, self.level, best)
        return best

    def predict(self, walltime_s: int, ncpus: Optional[int], history: Sequence[ClassRow]) -> Choice:
        """Predict one job (pure given this table's state)."""
        out = outcome(walltime_s, ncpus, history)
        rule = self.choose(out.bin)
        return Choice(out.softs[rule], rule, out)

    def update(
        self,
        out: Outcome,
        runtime_s: int,
        target_under_pct: Optional[float],
        soft_walltime_s: Optional[int] = None,
    ) -> None:
        """Learn from one finished job (call in end order, with the job's :func:`outcome`).

        Whether the job's soft walltime was an under-estimate moves the deficit (and so
        ``lam``) towards the target; then every rule's outcome in the job's bin is counted.

        :param target_under_pct: the target rate, percent; ``None``: as many under-estimates
            as v3 (``R_V3``'s soft walltime in ``out``) made on the same jobs
        :param soft_walltime_s: the soft walltime the job got (default: what this table
            chooses for it now)
        """
        bin_ = out.bin
        softs = out.softs
        if soft_walltime_s is None:
            soft_walltime_s = softs[self.choose(bin_)]
        self.total += 1
        step = 0.0
        if soft_walltime_s < runtime_s:
            self.total_under += 1
            step += 1.0
        if target_under_pct is None:
            if softs[R_V3] < runtime_s:
                step -= 1.0
        else:
            step -= target_under_pct / 100.0
        if step:
            self._steer(step)
        elif self.deficit:  # no step: only the integral term moves lambda
            self._steer(0.0)
        base = bin_ * len(RULES)
        self.jobs[bin_] += 1
        under = self.under
        acc = self.acc
        k = base
        for soft in softs:  # accuracy() written out: this runs for every rule and job
            if soft < runtime_s:
                under[k] += 1
                acc[k] += soft / runtime_s
            else:
                acc[k] += runtime_s / soft  # exactly 1.0 when equal
            k += 1

    def v3_under(self) -> float:
        """With target ``None`` throughout: the jobs v3 under-estimated (the deficit is
        the chosen rules' under-estimates minus v3's)."""
        return self.total_under - self.deficit

    def _steer(self, step: float) -> None:
        """Move the deficit by ``step`` and lambda with it (proportional + integral)."""
        self.deficit += step
        log_lam = self.log_lam + LAMBDA_STEP * step + LAMBDA_INTEGRAL * self.deficit
        # min(LOG_LAMBDA_MAX, max(LOG_LAMBDA_MIN, log_lam)) without two calls (NaN too)
        if log_lam > LOG_LAMBDA_MAX:
            log_lam = LOG_LAMBDA_MAX
        elif not log_lam >= LOG_LAMBDA_MIN:
            log_lam = LOG_LAMBDA_MIN
        self.log_lam = log_lam
        level = round(log_lam / LAMBDA_GRID)
        if level != self.level:
            self.level = level
            self.lam = math.exp(LAMBDA_GRID * level)

    def choices(self) -> List[int]:
        """The rule chosen in every bin now (what the hook reads, :class:`Choices`)."""
        return [self.choose(bin_) for bin_ in range(BINS)]

    def snapshot(self) -> "Choices":
        """The decisions of this table as they are now."""
        return Choices(self.choices(), self.lam, self.total, self.total_under)

    def rows(self) -> Tuple[Tuple[float, int, int], List[Tuple[int, int, int, int, float]]]:
        """``((lam, total, total_under), [(bin, rule, jobs, under, acc_sum), ...])`` to store."""
        cells = []
        for bin_ in range(BINS):
            n = self.jobs[bin_]
            if n:
                base = bin_ * len(RULES)
                for rule in range(len(RULES)):
                    cells.append((bin_, rule, n, self.under[base + rule], self.acc[base + rule]))
        return (self.lam, self.total, self.total_under), cells

    @classmethod
    def from_rows(
        cls,
        state: Optional[Tuple[float, int, int]],
        cells: Iterable[Tuple[int, int, int, int, float]],
    ) -> "Calibration":
        """Rebuild a table from :meth:`rows` output (unknown bins or rules are ignored)."""
        table = cls()
        if state is not None:
            table.lam, table.total, table.total_under = (
                float(state[0]),
                int(state[1]),
                int(state[2]),
            )
            if table.lam > 0:
                table.log_lam = min(LOG_LAMBDA_MAX, max(LOG_LAMBDA_MIN, math.log(table.lam)))
                table.level = round(table.log_lam / LAMBDA_GRID)
        for bin_, rule, n, under, acc in cells:
            if 0 <= bin_ < BINS and 0 <= rule < len(RULES):
                table.jobs[bin_] = int(n)
                table.under[bin_ * len(RULES) + rule] = int(under)
                table.acc[bin_ * len(RULES) + rule] = float(acc)
        return table


def describe(choice: Choice) -> str:
    """One line for the debug log: rule, key level and class size."""
    out = choice.outcome
    level = LEVELS[out.level]
    return f"rule {RULES[choice.rule]} on {level} class of {out.class_jobs} jobs (bin {out.bin})"


# What a stored table's rule ids mean: the rules and the bins, by name and cut. A table
# calibrated by another release (other rules or bins) is not read with these meanings; the
# hook then uses v3 until ``softwalltime calibrate`` runs (``lookup.calibration``).
RULE_SET = hashlib.sha256(
    repr((RULES, RULE_SPECS, LEVELS, _LEVEL_CUTS, _SPREAD_CUTS, N_SIZE, BINS)).encode()
).hexdigest()[:16]


class OtherRuleSet(ValueError):
    """A stored table of another rule set (see :data:`RULE_SET`)."""


class Choices:
    """A snapshot of the table's decisions: the rule per bin (what the hook reads).

    ``predict`` gives what :meth:`Calibration.predict` gives on the table it came from.
    """

    __slots__ = ("rules", "lam", "total", "total_under")

    def __init__(self, rules: Sequence[int], lam: float, total: int, total_under: int) -> None:
        self.rules = list(rules)
        self.lam = lam
        self.total = total
        self.total_under = total_under

    @classmethod
    def empty(cls) -> "Choices":
        """Never calibrated: v3 everywhere."""
        return cls([R_V3] * BINS, LAMBDA_START, 0, 0)

    def stored(self) -> Dict[str, Any]:
        """What ``calibration_state.choices`` holds: the rule per bin and the rule set they
        are ids of (:data:`RULE_SET`)."""
        return {"rule_set": RULE_SET, "rules": list(self.rules)}

    @classmethod
    def from_stored(cls, lam: float, total: int, total_under: int, stored: object) -> "Choices":
        """Check and build from the stored row.

        :raises OtherRuleSet: stored with another release's rules or bins (or before they
            were named): its ids would mean other rules here
        :raises ValueError: not the shape :meth:`stored` writes
        """
        if not isinstance(stored, dict) or stored.get("rule_set") != RULE_SET:
            raise OtherRuleSet("the table was calibrated with another version's rules")
        rules = stored.get("rules")
        if not isinstance(rules, list) or len(rules) != BINS:
            raise ValueError(f"expected a list of {BINS} rule ids")
        for rule in rules:
            if type(rule) is not int or not 0 <= rule < len(RULES):
                raise ValueError(f"not a rule id: {rule!r}")
        return cls(rules, lam, total, total_under)

    def predict(self, walltime_s: int, ncpus: Optional[int], history: Sequence[ClassRow]) -> Choice:
        """Predict one job with these decisions (pure)."""
        out = outcome(walltime_s, ncpus, history)
        rule = self.rules[out.bin]
        return Choice(out.softs[rule], rule, out)


class SiteFetch(NamedTuple):
    """What the predictor reads in the hook: ``history(user, limit)`` (rows as
    :data:`ClassRow`, newest first) and ``calibration()`` (the table's decisions, cached)."""

    history: Callable[[str, int], Sequence[ClassRow]]
    calibration: Callable[[], Choices]


def ncpus_of(resources: Any) -> int:
    """The job's processors as the accounting record will show ``Resource_List.ncpus``.

    ``ncpus`` when set; else the sum over the ``select`` chunks (``2:ncpus=4+1:ncpus=2`` is
    10; a chunk without ``ncpus`` counts 1); else 1 (PBS's default).

    :param resources: the job's ``Resource_List`` (or a dict): ``resources["ncpus"]`` and
        ``resources["select"]`` (None when unset; ``select`` any object whose ``str`` is
        the select text)
    """
    ncpus = resources["ncpus"]
    select = resources["select"]
    if ncpus is not None:
        try:
            return max(0, int(str(ncpus)))
        except ValueError:
            pass
    if select is None:
        return 1
    total = 0
    for chunk in str(select).split("+"):
        parts = chunk.strip().split(":")
        count = 1
        if parts and parts[0].isdigit():
            count = int(parts[0])
            parts = parts[1:]
        each = 1
        for part in parts:
            name, _eq, value = part.partition("=")
            if name.strip().lower() == "ncpus" and value.strip().isdigit():
                each = int(value.strip())
        total += count * each
    return total
