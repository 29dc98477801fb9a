"""The one registry of the predictors and the ranks: every other list derives from here.

The settings' validation (``predictor``, ``rank``), ``evaluate``'s and ``simulate``'s lists,
the command line's choices and the docs' table (``docs/hook.md``, kept true by a test) are all
read from :data:`PREDICTOR_TABLE` and :data:`RANK_TABLE`. Adding a predictor: see "Adding a
predictor" in ``docs/development.md``.

Hook path: Python 3.6+ syntax, standard library only, imports nothing of softwalltime.
"""

from typing import NamedTuple, Optional

V1 = "v1"
V2 = "v2"
V3 = "v3"
CALIBRATED = "calibrated"
LEARNED = "learned"


class Predictor(NamedTuple):
    """One predictor.

    ``name``: the setting ``predictor``'s value. ``history``: a pure function of the
    user's history (:func:`softwalltime.core.predict.predict`), else it reads a site table
    that ``softwalltime calibrate`` keeps and learns towards ``target_under_pct``.
    ``by_default``: replayed by ``evaluate`` unless ``--predictors`` says otherwise.
    """

    name: str
    history: bool
    by_default: bool


PREDICTOR_TABLE = (
    Predictor(V1, history=True, by_default=True),
    Predictor(V2, history=True, by_default=True),
    Predictor(V3, history=True, by_default=True),
    Predictor(CALIBRATED, history=False, by_default=True),
    Predictor(LEARNED, history=False, by_default=False),
)
DEFAULT_PREDICTOR = V3  # the setting predictor's default

PREDICTORS = tuple(p.name for p in PREDICTOR_TABLE)
# the predictors of softwalltime.core.predict (the history alone, no site table)
HISTORY_PREDICTORS = tuple(p.name for p in PREDICTOR_TABLE if p.history)
# the predictors with a site table and an under-estimate target (target_under_pct)
TARGETED = tuple(p.name for p in PREDICTOR_TABLE if not p.history)
DEFAULT_EVALUATED = tuple(p.name for p in PREDICTOR_TABLE if p.by_default)


class Rank(NamedTuple):
    """One sort rank (the setting ``rank``, ``simulate --rank-by``).

    ``predictor``: the only predictor it works with (``None``: any). ``paid``: no lower than
    the user's paid evidence allows (:func:`softwalltime.core.rank.paid_floor`).
    """

    name: str
    predictor: Optional[str]
    paid: bool


KEY_MEAN = "key-mean"
KEY_MEAN_PAID = "key-mean-paid"
LEARNED_PAID = "learned-paid"
RANK_TABLE = (
    Rank(KEY_MEAN, predictor=None, paid=False),
    Rank(KEY_MEAN_PAID, predictor=None, paid=True),
    Rank(LEARNED, predictor=LEARNED, paid=False),
    Rank(LEARNED_PAID, predictor=LEARNED, paid=True),
)
RANK_OFF = "off"  # the setting rank's default: no rank
RANKS = tuple(r.name for r in RANK_TABLE)
DEFAULT_RANK = KEY_MEAN_PAID  # what hooks install --rank sets without a value (issue 52)

# The simulator's estimate sources: the users' walltimes, every predictor, and two yardsticks
# (the real run time; 10 minutes at most the walltime).
USERS = "users"
PERFECT = "perfect"
FIXED10 = "fixed10"
SIMULATED = (USERS,) + PREDICTORS + (PERFECT, FIXED10)


def rank_predictor(name: str) -> Optional[str]:
    """The only predictor the rank ``name`` works with, ``None`` for any (or no such rank)."""
    for rank in RANK_TABLE:
        if rank.name == name:
            return rank.predictor
    return None
