"""Soft-walltime predictors v1, v2 and v3: pure functions of the walltime and a user's history.

* **v1**: mean runtime of the user's last ``v1_jobs`` (2) finished jobs.
* **v2**: v1 + ``reserve_s`` (900 s).
* **v3**: over the last ``v3_jobs`` (15) finished jobs that requested a walltime > 0,
  ``max(runtime / walltime) x walltime + reserve_s``.

Every predictor: no history gives the walltime itself; an optional factor multiplies the
prediction of jobs whose walltime exceeds a threshold (CERIT-SC: x2 above 24 h), applied
before the cap; the result is rounded up to whole seconds, at least 1 s and at most the
walltime. No walltime (or a walltime <= 0) gives "no prediction" (``soft_walltime_s=None``).

The arithmetic is exact: each prediction is kept as an integer fraction and rounded up once,
so ``0.25 x 3600`` is 900 s, never 901 s from a float error.

Hook path: Python 3.6+ syntax, standard library only, no database, no ``pbs``. The replay
evaluator calls :func:`predict` per job in a tight loop, so it avoids allocations it can.
"""

from fractions import Fraction
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple

from . import registry

PREDICTORS = registry.HISTORY_PREDICTORS  # v1, v2, v3

# One history entry: (runtime_s, walltime_s or None), most recent end first.
HistoryRow = Tuple[int, Optional[int]]

# Reason codes, kept as constants so a prediction costs no string formatting.
REASON_NO_WALLTIME = "no walltime"
REASON_NO_HISTORY = "no history"
REASON_HISTORY = "history"
REASON_CAPPED = "history, capped at walltime"
REASON_FLOOR = "history, raised to 1 s"


class Prediction(NamedTuple):
    """One prediction.

    ``soft_walltime_s``: whole seconds, or ``None`` for "leave the job alone".
    ``basis_jobs``: how many history jobs were used. ``basis_value``: v1/v2 the mean
    runtime (s), v3 the maximal runtime/walltime ratio, ``None`` without history.
    ``reason``: one of the ``REASON_*`` codes.
    """

    soft_walltime_s: Optional[int]
    predictor: str
    basis_jobs: int
    basis_value: Optional[float]
    reason: str


class PredictorParams(NamedTuple):
    """Predictor parameters; build once (:meth:`create` or :meth:`from_settings`), reuse.

    The long-walltime factor is stored as an exact fraction ``factor_num / factor_den``
    (``1.1`` is 11/10), so rounding up stays exact. ``long_walltime_threshold_s = 0``
    turns the factor off.
    """

    v1_jobs: int
    v3_jobs: int
    reserve_s: int
    long_walltime_threshold_s: int
    factor_num: int
    factor_den: int

    @classmethod
    def create(
        cls,
        v1_jobs: int = 2,
        v3_jobs: int = 15,
        reserve_s: int = 900,
        long_walltime_threshold_s: int = 0,
        long_walltime_factor: float = 1.0,
    ) -> "PredictorParams":
        """Build parameters from plain values.

        :param v1_jobs: history jobs averaged by v1 and v2 (>= 1)
        :param v3_jobs: history jobs (with walltime > 0) examined by v3 (>= 1)
        :param reserve_s: seconds added by v2 and v3
        :param long_walltime_threshold_s: walltime (s) above which the factor applies; 0 = off
        :param long_walltime_factor: multiplier (> 0) for jobs above the threshold
        :raises ValueError: a count below 1, a negative reserve or a factor <= 0
        """
        if v1_jobs < 1 or v3_jobs < 1:
            raise ValueError("v1_jobs and v3_jobs must be at least 1")
        if reserve_s < 0 or long_walltime_threshold_s < 0:
            raise ValueError("reserve_s and long_walltime_threshold_s must not be negative")
        if not long_walltime_factor > 0:
            raise ValueError("long_walltime_factor must be greater than 0")
        # repr() gives the shortest decimal that round-trips, so 1.1 becomes 11/10, not
        # the binary value 2476979795053773/2251799813685248.
        factor = Fraction(repr(float(long_walltime_factor)))
        return cls(
            int(v1_jobs),
            int(v3_jobs),
            int(reserve_s),
            int(long_walltime_threshold_s),
            factor.numerator,
            factor.denominator,
        )

    @classmethod
    def from_settings(cls, settings: Any) -> "PredictorParams":
        """Build parameters from :class:`softwalltime.core.config.Settings` (the last
        ones built are reused while the values are the same: the hook asks at every event)."""
        values = (
            settings.v1_jobs,
            settings.v3_jobs,
            settings.reserve_s,
            settings.long_walltime_threshold_s,
            settings.long_walltime_factor,
        )
        last = _LAST_PARAMS.get(values)
        if last is None:
            last = cls.create(*values)
            _LAST_PARAMS.clear()
            _LAST_PARAMS[values] = last
        return last

    def history_jobs(self, predictor: str) -> int:
        """How many history rows ``predictor`` reads (the lookup's LIMIT)."""
        return self.v3_jobs if predictor == "v3" else self.v1_jobs


DEFAULT_PARAMS = PredictorParams.create()
# PredictorParams.from_settings: the values last asked for and their parameters.
_LAST_PARAMS: Dict[Tuple[Any, ...], PredictorParams] = {}


def _finish(
    predictor: str,
    walltime_s: int,
    num: int,
    den: int,
    params: PredictorParams,
    basis_jobs: int,
    basis_value: float,
) -> Prediction:
    """Apply the long-walltime factor, round ``num/den`` up, clamp to [1, walltime]."""
    if params.long_walltime_threshold_s and walltime_s > params.long_walltime_threshold_s:
        num *= params.factor_num
        den *= params.factor_den
    soft = -(-num // den)  # exact ceiling of num/den for integers
    if soft > walltime_s:
        return Prediction(walltime_s, predictor, basis_jobs, basis_value, REASON_CAPPED)
    if soft < 1:
        return Prediction(1, predictor, basis_jobs, basis_value, REASON_FLOOR)
    return Prediction(int(soft), predictor, basis_jobs, basis_value, REASON_HISTORY)


def predict_mean(
    predictor: str,
    walltime_s: int,
    history: Sequence[HistoryRow],
    params: PredictorParams,
    reserve_s: int,
) -> Prediction:
    """v1 (``reserve_s=0``) and v2: mean runtime of the last ``v1_jobs`` jobs plus a reserve."""
    limit = params.v1_jobs  # a local: NamedTuple attribute access is slow in the loop
    total = 0
    count = 0
    for runtime_s, _walltime in history:
        total += runtime_s
        count += 1
        if count == limit:
            break
    if count == 0:
        return Prediction(walltime_s, predictor, 0, None, REASON_NO_HISTORY)
    return _finish(
        predictor, walltime_s, total + reserve_s * count, count, params, count, total / count
    )


def predict_v3(
    walltime_s: int, history: Sequence[HistoryRow], params: PredictorParams
) -> Prediction:
    """v3: the largest runtime/walltime ratio of the last ``v3_jobs`` jobs with walltime > 0."""
    limit = params.v3_jobs  # a local: NamedTuple attribute access is slow in the loop
    best_rt = 0
    best_wt = 0  # the best ratio so far is best_rt / best_wt; 0/0 means "none yet"
    count = 0
    for runtime_s, job_walltime_s in history:
        if not job_walltime_s or job_walltime_s < 0:  # None, 0 or negative: no ratio
            continue
        # runtime_s/job_walltime_s >= best_rt/best_wt, exactly, without division; always
        # true for the first usable job, where best_wt is 0 (equal ratios predict the same).
        if runtime_s * best_wt >= best_rt * job_walltime_s:
            best_rt = runtime_s
            best_wt = job_walltime_s
        count += 1
        if count == limit:
            break
    if count == 0:
        return Prediction(walltime_s, "v3", 0, None, REASON_NO_HISTORY)
    return _finish(
        "v3",
        walltime_s,
        best_rt * walltime_s + params.reserve_s * best_wt,
        best_wt,
        params,
        count,
        best_rt / best_wt,
    )


def predict(
    predictor: str,
    walltime_s: Optional[int],
    history: Sequence[HistoryRow],
    params: PredictorParams = DEFAULT_PARAMS,
) -> Prediction:
    """Predict a soft walltime.

    :param predictor: ``"v1"``, ``"v2"`` or ``"v3"``
    :param walltime_s: the job's requested walltime in seconds; ``None`` or <= 0 gives
        ``soft_walltime_s=None`` (no prediction)
    :param history: the user's finished jobs as ``(runtime_s, walltime_s or None)``, most
        recent end first; only the first rows that the predictor needs are read
    :param params: counts, reserve and long-walltime factor
    :returns: a :data:`Prediction` with ``1 <= soft_walltime_s <= walltime_s``
    :raises ValueError: unknown predictor
    """
    if walltime_s is None or walltime_s <= 0:
        if predictor not in PREDICTORS:
            raise ValueError(f"unknown predictor {predictor!r}")
        return Prediction(None, predictor, 0, None, REASON_NO_WALLTIME)
    walltime_s = int(walltime_s)
    if predictor == "v3":
        return predict_v3(walltime_s, history, params)
    if predictor == "v2":
        return predict_mean("v2", walltime_s, history, params, params.reserve_s)
    if predictor == "v1":
        return predict_mean("v1", walltime_s, history, params, 0)
    if predictor in registry.TARGETED:
        raise ValueError(
            f"predictor {predictor!r} needs the job's keys and its site table:"
            f" use softwalltime.core.{predictor} (decide() does)"
        )
    raise ValueError(
        "unknown predictor {!r} (expected one of {})".format(predictor, ", ".join(PREDICTORS))
    )
