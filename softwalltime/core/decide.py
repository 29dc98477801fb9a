"""What the hook does with one job: set a soft walltime of N seconds, or leave the job alone.

Pure: it gets plain values from the hook (never ``pbs`` objects) and a callable that
fetches history, so it runs unchanged in tests, ``softwalltime predict`` and the hook.

Rules, in order (each "leave" names its reason in :attr:`Decision.reason`):

1. only ``queuejob``, ``runjob`` and ``modifyjob`` are handled (the hook calls this at
   ``modifyjob`` only when the request changes the walltime; the job is then predicted
   again for the new walltime, so that a user's ``qalter -l walltime=`` below the current
   soft walltime is not refused by the server);
2. user and queue allow/deny lists (deny wins; an empty allow list allows all). At
   ``queuejob`` the queue may be ``""`` (PBS substitutes the default queue later): when
   queue lists are configured such a job is left for ``runjob``, which sees the real queue;
3. shrink-to-fit jobs (``min_walltime`` set) are left alone: PBS rejects soft_walltime there;
4. no walltime: left alone (at ``queuejob`` the queue default comes later; ``runjob`` decides);
5. an existing soft_walltime is kept unless ``override_existing`` is set or the hook set it
   itself at ``queuejob`` (``existing_is_ours``), in which case ``runjob`` predicts again;
   with ``runjob_min_wait_s`` > 0 a job that waited less than that keeps its value;
6. the prediction is capped at the walltime (never above it: PBS rejects the ``qsub`` at
   queuejob and checks nothing at runjob);
7. ``dry_run``: everything above happens, the decision says what would be set, nothing is.

With ``rank`` on (``key-mean``), the decision also carries the job's sort rank
(:data:`softwalltime.core.rank.RANKERS`, for ``Resource_List.softwalltime_rank``),
from the same history read (one query: :meth:`fetch.both` for v1/v2/v3, the class rows of
``calibrated``, the rows of ``learned``; the rank ``learned`` is that predictor's own,
:mod:`softwalltime.core.learned_site`, and ``learned-paid`` the same floored by the
user's paid evidence, :func:`softwalltime.core.rank.paid_floor`). Rules 1 to 4 leave the
rank alone too, and so does a ``runjob`` kept by ``runjob_min_wait_s``; a soft walltime
kept (a manager's, or unchanged) does not keep the rank from being set; a rank equal to
the job's is not set again; ``dry_run`` sets none.

Hook path: Python 3.6+ syntax, standard library only.
"""

from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

from . import calibrated as cal
from . import learned_site as ls
from .config import Settings
from .predict import HistoryRow, Prediction, PredictorParams, predict
from .rank import RANK_RESOURCE, RANKERS, paid_floor

EVENTS = ("queuejob", "runjob", "modifyjob")
# The hook's mark: the soft walltime it set, in seconds, in a custom resource of this name
# (type long, flag r: users can neither set nor alter it; `softwalltime hooks install`
# creates it). A soft walltime that the mark does not match is a manager's: kept.
MARK_RESOURCE = "softwalltime_set"

# fetch(username, limit, with_walltime_only) -> [(runtime_s, walltime_s or None), ...]
HistoryFetch = Callable[[str, int, bool], Sequence[HistoryRow]]


def rank_of(resources: Any) -> Optional[int]:
    """The job's rank (``Resource_List.softwalltime_rank``) in seconds, None when unset or
    when the resource is not defined (PBS raises on reading an undefined name)."""
    try:
        value = resources[RANK_RESOURCE]
        return None if value is None else int(value)
    except Exception:  # noqa: BLE001 - undefined resource, odd value: no rank
        return None


def marked(resources: Any, soft: Any) -> bool:
    """Whether the job's ``Resource_List`` carries the hook's mark for soft walltime
    ``soft``: the value the hook set (a resource users cannot set, and that pbs_server logs
    alone; a ``Variable_List`` entry made it log the user's whole environment). False when
    unset, or when the resource is not defined (PBS raises its own types then)."""
    if soft is None:
        return False
    try:
        mark = resources[MARK_RESOURCE]
        return mark is not None and int(mark) == int(soft)
    except Exception:  # noqa: BLE001 - undefined resource, odd value: not ours
        return False


class JobEvent(NamedTuple):
    kind: str
    user: Optional[str]
    queue: Optional[str]
    walltime_s: Optional[int]
    existing_soft_s: Optional[int]
    existing_is_ours: bool = False
    shrink_to_fit: bool = False
    wait_s: Optional[float] = None
    ncpus: Optional[int] = None
    server: Optional[str] = None
    existing_rank_s: Optional[int] = None


JobEvent.__doc__ = """What the hook knows of one job at one event: plain values, no ``pbs``.

``kind``: ``"queuejob"``, ``"runjob"`` or ``"modifyjob"`` (anything else: leave alone).
``user``: the job's user (queuejob: the requestor; runjob, modifyjob: euser).
``queue``: the queue as the event shows it; ``""`` or None if not known yet.
``walltime_s``: the requested walltime in seconds, None if unset (modifyjob: the new one).
``existing_soft_s``: the soft_walltime already on the job in seconds, None if unset.
``existing_is_ours``: that soft_walltime is the value this hook set (its mark says so).
``shrink_to_fit``: the job has ``min_walltime`` (PBS forbids soft_walltime then).
``wait_s``: seconds since the job was created (runjob), None if unknown.
``ncpus``: the job's processors (predictor ``calibrated``, the rank), None if unknown.
``server``: the job's PBS server (``history_scope = server``), None if unknown.
``existing_rank_s``: the job's ``softwalltime_rank`` in seconds, None if unset.

Hashable: a user's burst of identical ``queuejob`` requests is decided once
(:func:`softwalltime.hook.lookup.decided` keys the kept decisions by it).
"""


class Decision(NamedTuple):
    soft_walltime_s: Optional[int]
    prediction: Optional[Prediction]
    reason: str
    rank_to_set_s: Optional[int] = None
    computed_rank_s: Optional[int] = None


Decision.__doc__ = """The outcome for one event.

``soft_walltime_s``: the value to set, in seconds, or ``None`` to leave the job unchanged
(always ``None`` in dry-run mode). ``prediction``: the prediction made, if any.
``reason``: one line for the debug log (user, walltime, predictor, soft walltime, basis;
the rank). ``rank_to_set_s``: the sort rank to set in ``softwalltime_rank``, or ``None``
to leave it (rank off, excluded job, unchanged, dry run). ``computed_rank_s``: the rank
computed, if any (also when unchanged or in a dry run).
"""


def _describe(prediction: Prediction) -> str:
    """Human-readable basis of a prediction, e.g. "max ratio 0.4123 over 15 jobs"."""
    if prediction.basis_value is None:
        return prediction.reason
    if prediction.predictor == "v3":
        what = f"max runtime/walltime {prediction.basis_value:.4f}"
    else:
        what = f"mean runtime {prediction.basis_value:.0f} s"
    return f"{what} over {prediction.basis_jobs} jobs; {prediction.reason}"


def _listed(name: str, allow: Sequence[str], deny: Sequence[str]) -> Optional[str]:
    """Why ``name`` is excluded by the lists, or None if it passes."""
    if name in deny:
        return "in the deny list"
    if allow and name not in allow:
        return "not in the allow list"
    return None


def _excluded(job: JobEvent, settings: Settings) -> Optional[str]:
    """Why rules 1 to 4 leave ``job`` alone before any history is read, or None."""
    event, user, queue = job.kind, job.user, job.queue
    if event not in EVENTS:
        return "not a queuejob, runjob or modifyjob event"
    if not user:
        return "no user name"
    excluded = _listed(user, settings.users_allow, settings.users_deny)
    if excluded:
        return "user " + excluded
    if settings.queues_allow or settings.queues_deny:
        if not queue:
            return "queue not known yet (lists configured); runjob decides"
        excluded = _listed(queue, settings.queues_allow, settings.queues_deny)
        if excluded:
            return "queue " + excluded
    if job.shrink_to_fit:
        return "shrink-to-fit job (min_walltime set)"
    walltime_s = job.walltime_s
    if walltime_s is None:
        if event == "queuejob":
            return "no walltime requested yet; runjob decides"
        return "no walltime"
    if walltime_s <= 0:
        return "walltime is not positive"
    return None


def _existing(
    job: JobEvent, settings: Settings, ranking: bool
) -> Tuple[Optional[str], Optional[str]]:
    """Rule 5 for ``job``'s soft walltime: ``(kept, leave)``. ``kept``: why it stays as it
    is while the rank is still decided (None: a prediction may replace it); ``leave``: why
    the job is left alone now, rank included (None: go on)."""
    existing_soft_s = job.existing_soft_s
    if existing_soft_s is None:
        return None, None
    if not (settings.override_existing or job.existing_is_ours):
        kept = f"soft_walltime already set to {existing_soft_s} s"
        return kept, None if ranking else kept
    wait_s = job.wait_s
    if (
        job.kind == "runjob"
        and settings.runjob_min_wait_s
        and wait_s is not None
        and wait_s < settings.runjob_min_wait_s
    ):
        return None, (
            f"waited {wait_s:.0f} s < runjob_min_wait_s {settings.runjob_min_wait_s} s;"
            f" keeping {existing_soft_s} s"
        )
    return None, None


def _predict(
    job: JobEvent,
    settings: Settings,
    fetch: HistoryFetch,
    params: PredictorParams,
    site: Optional[cal.SiteFetch],
    ranking: bool,
    learned: Optional[ls.LearnedFetch] = None,
) -> Tuple[Optional[Prediction], Optional[Sequence[cal.ClassRow]], Optional[int]]:
    """The prediction of ``settings.predictor`` for ``job`` (its walltime set and positive),
    the rank's history rows (None with the rank off) and the rank ``learned`` (None but
    for predictor ``learned``), from one history read. The prediction is None only for
    predictor ``calibrated`` or ``learned`` without its readers (``site`` or ``learned``
    None: ``fetch.site`` or ``fetch.learned``)."""
    predictor, user, walltime_s = settings.predictor, job.user, job.walltime_s
    assert user and walltime_s is not None  # as _excluded() lets through
    if predictor == cal.NAME:
        if site is None:
            site = getattr(fetch, "site", None)
        if site is None:
            return None, None, None
        rows = site.history(user, cal.HISTORY_ROWS)
        choice = site.calibration().predict(walltime_s, job.ncpus, rows)
        soft, jobs = choice.soft_walltime_s, choice.outcome.class_jobs
        return Prediction(soft, predictor, jobs, None, cal.describe(choice)), rows, None
    if predictor == ls.NAME:
        if learned is None:
            learned = getattr(fetch, "learned", None)
        if learned is None:
            return None, None, None
        learned_rows, classes = learned.history(user, ls.HISTORY_ROWS)
        got = ls.predict(learned.table(), walltime_s, learned_rows, int(learned.now()))
        prediction = Prediction(got.soft_walltime_s, predictor, got.jobs, None, ls.describe(got))
        return prediction, (classes if ranking else None), got.rank_s
    limit, only = params.history_jobs(predictor), predictor == "v3"
    if ranking:  # the predictor's rows and the rank's, one round trip
        history, rows = fetch.both(user, limit, only)  # type: ignore[attr-defined]
    else:
        history, rows = fetch(user, limit, only), None
    return predict(predictor, walltime_s, history, params), rows, None


def _rank(
    job: JobEvent, settings: Settings, rows: Optional[Sequence[cal.ClassRow]], own: Optional[int]
) -> Tuple[Optional[int], Optional[int], str]:
    """The job's rank from the rank's history ``rows`` (the rank ``learned``: ``own``, the
    predictor's; ``learned-paid``: ``own`` floored by the paid evidence of ``rows``):
    ``(rank to set, rank computed, log text)``; none to set when it equals the job's
    (``existing_rank_s``) or in a dry run; all None and "" with the rank off or without
    rows."""
    ranker = RANKERS.get(settings.rank)
    walltime_s = job.walltime_s
    if settings.rank == ls.RANK_NAME:
        rank = own
    elif settings.rank == ls.RANK_PAID_NAME:
        if own is None or rows is None or walltime_s is None:
            return None, None, ""
        rank = paid_floor(walltime_s, job.ncpus, list(rows[: cal.HISTORY_ROWS]), own)
    elif ranker is None or rows is None or walltime_s is None:
        return None, None, ""
    else:
        rank = ranker(walltime_s, job.ncpus, rows)
    if rank is None:
        return None, None, ""
    to_set = None if rank == job.existing_rank_s else rank
    state = "unchanged" if to_set is None else "would be set" if settings.dry_run else "set"
    text = f"; rank {settings.rank}={rank} s {state}"
    return (None if settings.dry_run else to_set), rank, text


def decide(
    job: JobEvent,
    settings: Settings,
    fetch: HistoryFetch,
    params: Optional[PredictorParams] = None,
    site: Optional[cal.SiteFetch] = None,
    learned: Optional[ls.LearnedFetch] = None,
) -> Decision:
    """Decide what to set on one job.

    :param job: the job at this event
    :param settings: :class:`softwalltime.core.config.Settings`
    :param fetch: ``fetch(user, limit, with_walltime_only)`` returning history rows, most
        recent first; its exceptions propagate (the hook fails open on them)
    :param params: predictor parameters (default: built from ``settings``)
    :param site: history and calibration readers for predictor ``calibrated`` (default:
        ``fetch.site``, which :func:`softwalltime.hook.lookup.fetcher` provides)
    :param learned: history, table and clock readers for predictor ``learned`` (default:
        ``fetch.learned``, likewise)
    :returns: the decision; ``reason`` is one line for the debug log
    """
    walltime_s, existing_soft_s = job.walltime_s, job.existing_soft_s
    who = "{} user={!r} queue={!r} walltime={}".format(
        job.kind, job.user, job.queue, "unset" if walltime_s is None else f"{walltime_s} s"
    )
    ranking = settings.rank != "off"
    why, kept = _excluded(job, settings), None
    if why is None:
        kept, why = _existing(job, settings, ranking)
    if why is not None or walltime_s is None:  # (no walltime: _excluded() said why)
        return Decision(None, None, f"{who}: leave alone: {why}")

    if params is None:
        params = PredictorParams.from_settings(settings)
    predictor = settings.predictor
    prediction, rows, own = _predict(job, settings, fetch, params, site, ranking, learned)
    if prediction is None:
        why = f"predictor {predictor} needs its site readers (site=... or learned=...)"
        return Decision(None, None, f"{who}: leave alone: {why}")
    rank_to_set, rank, rank_text = _rank(job, settings, rows, own)

    def keep(why: str) -> Decision:
        text = f"{who}: leave alone: {why}{rank_text}"
        return Decision(None, prediction, text, rank_to_set, rank)

    if kept is not None:
        return keep(kept)
    soft = prediction.soft_walltime_s
    if soft is None:
        return keep(f"{predictor}: no prediction")
    # predict() already caps; this guard keeps the PBS invariant even if it ever did not.
    soft = max(1, min(int(soft), int(walltime_s)))
    what = f"{predictor} soft_walltime={soft} s ({_describe(prediction)})"
    if existing_soft_s is not None and existing_soft_s == soft:
        return keep(f"{what}: unchanged")
    if settings.dry_run:
        text = f"{who}: dry run, would set {what}{rank_text}"
        return Decision(None, prediction, text, None, rank)
    return Decision(soft, prediction, f"{who}: set {what}{rank_text}", rank_to_set, rank)
