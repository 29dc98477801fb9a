"""Predictor ``learned`` in the hook: the site table's decisions, precomputed per fine bin.

:class:`softwalltime.core.learned.Learner` chooses a job's rule from its fine bin alone
(the coarse bin is ``fine // N_GAP``) and the table. ``softwalltime calibrate`` replays
the history into a Learner as ``evaluate`` does and stores, besides the cells, the rule
:meth:`~softwalltime.core.learned.Learner.choose` and
:meth:`~softwalltime.core.learned.Learner.rank_rule` give in every fine bin
(:meth:`LearnedChoices.from_learner`): the hook reads that one row (cached), computes the
job's :func:`~softwalltime.core.learned.outcome` from the user's finished jobs and the time
since the newest of them ended, and looks its rules up (:func:`predict`). So the hook's
choice is the Learner's for the same history, instant and table. A job without history,
and every job of a table with fewer than ``MIN_SITE_JOBS`` jobs or of a site never
calibrated, gets v3, as in :mod:`~softwalltime.core.learned`.

The rank ``learned`` (setting ``rank``) is the soft walltime of the rank's rule (the best
accuracy alone: a typical run time, not a safe one), from the same rows and table. The
rank ``learned-paid`` is the same, no lower than the user's paid evidence for it allows
(:func:`softwalltime.core.rank.paid_floor`, from the rank's rows ``(runtime_s, walltime_s,
ncpus)``): one cheap job ranks a big one at 1 s under ``learned`` (the rules ``last`` and
``median`` follow it), not under ``learned-paid``.

Hook path: Python 3.6+ syntax, standard library only, pure.
"""

import hashlib
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from . import learned
from .calibrated import ClassRow

NAME = learned.NAME
RANK_NAME = "learned"  # the setting rank's value (predictor learned only)
RANK_PAID_NAME = "learned-paid"  # learned's rank with the paid-evidence floor (core/rank.py)
HISTORY_ROWS = learned.HISTORY_ROWS

# One row the hook reads: (runtime_s, walltime_s > 0, ncpus or None, end_s), newest first
SiteRow = Tuple[int, int, Optional[int], int]

# What a stored table's rule ids and bins mean. A table of another release (other rules,
# bins or cuts) is not read with these meanings: v3 until ``softwalltime calibrate`` runs.
RULE_SET = hashlib.sha256(
    repr(
        (
            learned.RULES,
            learned.SPREAD_CUTS,
            learned.LEVEL_CUTS,
            learned.GAP_CUTS,
            learned.N_SAME,
            learned.FINE,
            learned.HISTORY_ROWS,
            learned.RATIO_JOBS,
            learned.SAME_RATIO_JOBS,
            learned.B_JOBS,
            learned.V3_JOBS,
            learned.V3_RESERVE_S,
            learned.B_FACTORS,
            learned.B_ADDS,
            learned.LAST_FACTORS,
            learned.LAST_ADD_S,
        )
    ).encode()
).hexdigest()[:16]


class OtherRuleSet(ValueError):
    """A stored table of another rule set (see :data:`RULE_SET`)."""


class LearnedChoices:
    """The table's decisions: the soft walltime's rule and the rank's rule per fine bin,
    with lambda and the totals (for the log and ``predict``)."""

    __slots__ = ("soft", "rank", "lam", "total", "total_under", "site_jobs")

    def __init__(
        self,
        soft: Sequence[int],
        rank: Sequence[int],
        lam: float,
        total: int,
        total_under: int,
        site_jobs: float,
    ) -> None:
        self.soft = list(soft)
        self.rank = list(rank)
        self.lam = lam
        self.total = total
        self.total_under = total_under
        self.site_jobs = site_jobs

    @classmethod
    def empty(cls) -> "LearnedChoices":
        """Never calibrated: v3 everywhere (as an empty Learner)."""
        return cls([learned.R_V3] * learned.FINE, [learned.R_V3] * learned.FINE,
                   learned.LAMBDA_START, 0, 0, 0.0)  # fmt: skip

    @classmethod
    def from_learner(cls, table: learned.Learner) -> "LearnedChoices":
        """What ``table`` chooses in every fine bin (its rules depend on nothing else)."""
        soft, rank = [], []
        for fine in range(learned.FINE):
            out = learned.Outcome(fine // learned.N_GAP, fine, (), 0, 0)
            soft.append(table.choose(out))
            rank.append(table.rank_rule(out))
        return cls(soft, rank, table.lam, table.total, table.total_under, table.n_site)

    def stored(self) -> Dict[str, object]:
        """What ``learned_state.choices`` holds: the rule set and both rules per fine bin."""
        return {"rule_set": RULE_SET, "soft": list(self.soft), "rank": list(self.rank)}

    @classmethod
    def from_stored(
        cls, lam: float, total: int, total_under: int, site_jobs: float, stored: object
    ) -> "LearnedChoices":
        """Check and build from the stored row.

        :raises OtherRuleSet: stored with another release's rules or bins
        :raises ValueError: not the shape :meth:`stored` writes
        """
        if not isinstance(stored, dict) or stored.get("rule_set") != RULE_SET:
            raise OtherRuleSet("the table was calibrated with another version's rules")
        lists = []
        for key in ("soft", "rank"):
            rules = stored.get(key)
            if not isinstance(rules, list) or len(rules) != learned.FINE:
                raise ValueError(f"{key}: expected a list of {learned.FINE} rule ids")
            for rule in rules:
                if type(rule) is not int or not 0 <= rule < learned.N_RULES:
                    raise ValueError(f"{key}: not a rule id: {rule!r}")
            lists.append(rules)
        return cls(lists[0], lists[1], lam, total, total_under, site_jobs)

    def choose(self, out: learned.Outcome) -> int:
        """:meth:`Learner.choose` of the table these came from."""
        return learned.R_V3 if out.coarse < 0 else self.soft[out.fine]

    def rank_rule(self, out: learned.Outcome) -> int:
        """:meth:`Learner.rank_rule` of the table these came from."""
        return learned.R_V3 if out.coarse < 0 else self.rank[out.fine]


class LearnedChoice(NamedTuple):
    """One job's prediction: the soft walltime and its rule, the rank and its rule, the
    outcome (bins and every rule's value) and the history rows used."""

    soft_walltime_s: int
    rule: int
    rank_s: int
    rank_rule: int
    outcome: learned.Outcome
    jobs: int


def history_of(rows: Sequence[SiteRow]) -> List[learned.Row]:
    """The ``learned`` rows ``(runtime_s, walltime_s, end_s)`` of the hook's rows."""
    return [(row[0], row[1], row[3]) for row in rows[:HISTORY_ROWS]]


def predict(
    table: LearnedChoices, walltime_s: int, rows: Sequence[SiteRow], now_s: int
) -> LearnedChoice:
    """Predict one job submitted at ``now_s`` (pure).

    :param walltime_s: the requested walltime (> 0)
    :param rows: the user's finished jobs with a walltime, newest end first
    """
    history = history_of(rows)
    out = learned.outcome(walltime_s, history, now_s)
    rule = table.choose(out)
    rank = table.rank_rule(out)
    return LearnedChoice(out.softs[rule], rule, out.softs[rank], rank, out, len(history))


def describe(choice: LearnedChoice) -> str:
    """One line for the debug log: rule, fine bin, history and the rank's rule."""
    out = choice.outcome
    where = "no history" if out.coarse < 0 else f"fine bin {out.fine}"
    return (
        f"rule {learned.RULES[choice.rule]} in {where}, {choice.jobs} jobs of history;"
        f" rank rule {learned.RULES[choice.rank_rule]}"
    )


class LearnedFetch(NamedTuple):
    """What the predictor reads in the hook: ``history(user, limit)`` -> ``(rows as
    :data:`SiteRow`, the rank's rows as :data:`~softwalltime.core.calibrated.ClassRow`)``
    (one query), ``table()`` (the decisions, cached) and ``now()`` (the instant, epoch s)."""

    history: Callable[[str, int], Tuple[Sequence[SiteRow], Sequence[ClassRow]]]
    table: Callable[[], LearnedChoices]
    now: Callable[[], float]
