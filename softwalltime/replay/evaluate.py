"""Replay evaluation of the soft-walltime predictors (pure: no database, no ``pbs``).

A workload (a list of :class:`TraceJob`, in trace order) is replayed through the same
:func:`softwalltime.core.predict.predict` the hook runs, and each predictor's soft walltimes are
compared with the real run times, as Chlumsky and Klusacek did in "Improving Accuracy of
Walltime Estimates in PBS Professional using Soft Walltimes" (section 3.1, Figures 4 and 5).

Replay semantics (also in ``softwalltime evaluate --help`` and the README):

- A job's prediction is made at its submit time (``moment="submit"``) or its start time
  (``moment="start"``), from the same user's jobs that had *ended* at or before that instant.
  At equal times, ends come first; among equal end times, the job later in the trace counts
  as more recent. A job is never part of its own history.
- Only jobs with a requested walltime > 0 and a known run time >= 0 (and a known user and
  known submit, start and end times) are evaluated or used as history; the others are
  skipped and counted by reason.
- A user with no finished job yet gets soft = walltime (that is what ``predict`` does with
  an empty history).

Metrics, per predictor and for the users' own walltimes (``"walltime"``), over all
evaluated jobs and split by runtime class (short <= 2 h, medium <= 24 h, long > 24 h):
% underestimated (soft < runtime), % badly underestimated (soft < runtime - 30 min), mean
and median accuracy with accuracy = min(runtime/soft, soft/runtime) (1 when both are 0),
and the mean absolute error in hours.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Deque, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, cast

from ..core import calibrated as cal
from ..core import learned, registry
from ..core.predict import PredictorParams, predict
from .learned_native import new_learner
from .trace import TraceJob, skip_reason

log = logging.getLogger(__name__)

BASELINE = "walltime"
PREDICTORS = registry.PREDICTORS
DEFAULT_PREDICTORS = registry.DEFAULT_EVALUATED  # the hook's; learned on request
TARGETED = registry.TARGETED  # the predictors with an under-estimate target
MOMENTS = ("submit", "start")
# Runtime classes of the paper's Figure 5: short [0, 2] h, medium (2, 24] h, long > 24 h.
CLASSES = (("short", 2 * 3600), ("medium", 24 * 3600), ("long", None))
# "Badly underestimated": the soft walltime is short by more than this (30 minutes).
BAD_UNDER_S = 30 * 60


class Replay(NamedTuple):
    """Per-job outcome of a replay: parallel lists, one entry per evaluated job."""

    moment: str
    runtime_s: List[int]
    walltime_s: List[int]
    soft_s: Dict[str, List[int]]
    """Soft walltime per predictor name, ``"walltime"`` (the baseline) included."""
    skipped: Dict[str, int]
    v3_under_pct: Optional[float] = None
    """With ``calibrated`` replayed at target ``None``: v3's under-estimate rate on the same
    jobs, computed alongside (the target it tracked)."""


class Metrics(NamedTuple):
    """Accuracy figures of one predictor over one set of jobs (``None`` when there are none)."""

    jobs: int
    under_pct: Optional[float]
    bad_under_pct: Optional[float]
    mean_accuracy: Optional[float]
    median_accuracy: Optional[float]
    mae_hours: Optional[float]


class PredictorReport(NamedTuple):
    """Metrics over all evaluated jobs and per runtime class (``short``, ``medium``, ``long``)."""

    overall: Metrics
    by_class: Dict[str, Metrics]


def replay(
    jobs: Sequence[TraceJob],
    predictors: Sequence[str] = DEFAULT_PREDICTORS,
    params: Optional[PredictorParams] = None,
    moment: str = "submit",
    target_under_pct: Optional[float] = cal.DEFAULT_TARGET_UNDER_PCT,
    start: Optional[cal.Calibration] = None,
) -> Replay:
    """Replay jobs through the predictors with per-user ring buffers (no query per job).

    :param jobs: the workload in trace order (the order breaks ties between equal end times)
    :param predictors: names accepted by :func:`softwalltime.core.predict.predict`, and
        ``"calibrated"`` (:func:`replay_calibrated`)
    :param params: predictor parameters; defaults to ``PredictorParams.create()``
    :param moment: ``"submit"`` or ``"start"``: when each prediction is made
    :param target_under_pct: the ``calibrated`` predictor's under-estimate target
        (``None``: as many under-estimates as v3)
    :param start: the ``calibrated`` predictor's starting table (default: empty; a copy is
        used), e.g. :func:`softwalltime.replay.prior.load_prior`
    :raises ValueError: unknown moment or predictor name
    """
    if moment not in MOMENTS:
        raise ValueError(f"moment must be one of {MOMENTS}, not {moment!r}")
    cols, skipped = columns(jobs, moment)
    return replay_columns(cols, skipped, predictors, params, moment, target_under_pct, start)


def replay_columns(
    cols: ReplayColumns,
    skipped: Dict[str, int],
    predictors: Sequence[str] = DEFAULT_PREDICTORS,
    params: Optional[PredictorParams] = None,
    moment: str = "submit",
    target_under_pct: Optional[float] = cal.DEFAULT_TARGET_UNDER_PCT,
    start: Optional[cal.Calibration] = None,
    learned_start: Optional[learned.Learner] = None,
) -> Replay:
    """:func:`replay` of jobs already turned into :func:`columns` (the caller may then drop
    the jobs themselves: half the memory of a large trace).

    :param learned_start: the ``learned`` predictor's starting table (default: empty; it is
        changed), e.g. :func:`softwalltime.replay.prior.load_learned_prior`

    :param skipped: the jobs :func:`columns` skipped, by reason (reported as they are)
    :param moment: the moment ``cols`` were made for (reported)
    :raises ValueError: unknown predictor name
    """
    for name in predictors:
        if name not in PREDICTORS:
            raise ValueError("unknown predictor {!r}; known: {}".format(name, ",".join(PREDICTORS)))
    if params is None:
        params = PredictorParams.create()

    classic = [name for name in predictors if name not in TARGETED]
    soft = replay_classic(cols, classic, params)
    walls, runs = cols.walls, cols.runs
    soft_all: Dict[str, List[int]] = {BASELINE: list(walls)}
    v3_under_pct = None
    for name in predictors:
        if name == cal.NAME:
            soft_all[name], table = replay_calibrated(cols, target_under_pct, copy_table(start))
            if target_under_pct is None and table.total:
                v3_under_pct = 100.0 * table.v3_under() / table.total
        elif name == learned.NAME:
            soft_all[name], learner = replay_learned(cols, target_under_pct, learned_start)
            if target_under_pct is None and learner.total:
                v3_under_pct = 100.0 * learner.v3_under / learner.total
        else:
            soft_all[name] = soft[name]
    return Replay(moment, runs, walls, soft_all, skipped, v3_under_pct)


def replay_classic(
    cols: ReplayColumns, classic: Sequence[str], params: PredictorParams
) -> Dict[str, List[int]]:
    """The soft walltimes (job order) of the predictors :func:`predict` knows (v1, v2, v3)
    for the jobs of ``cols``, each predicted at its instant from its user's jobs ended by
    then (ends first at equal times; a job is never its own history).

    :param classic: the predictors' names
    """
    users, instants, ends, walls, runs, _cpus, by_instant, by_end = cols
    n = len(users)

    keep = max(params.v1_jobs, params.v3_jobs, 1)
    # Buffers hold the newest entry on the left. One spare slot: a job that ends at its own
    # prediction instant (run time 0) is already in its buffer and is filtered out, and the
    # next older job must still be there.
    buffers: Dict[str, Deque[Tuple[int, int]]] = {}
    # Entries of jobs that end exactly at their own prediction instant, by job index.
    own_entry: Dict[int, Tuple[int, int]] = {}
    soft: Dict[str, List[int]] = {name: [0] * n for name in classic}
    outputs = [(name, soft[name]) for name in classic]
    empty: List[Tuple[int, int]] = []
    # Per user: (newest history entry, walltime, predictions) of the last prediction made.
    memo: Dict[str, Tuple[Tuple[int, int], int, List[int]]] = {}
    get_buffer = buffers.get

    e = 0
    next_end = ends[by_end[0]] if n else 0
    for i in by_instant if classic else ():
        t = instants[i]
        # Everything that ended at or before t enters its user's buffer first ("ends first").
        while e < n and next_end <= t:
            j = by_end[e]
            buf = get_buffer(users[j])
            if buf is None:
                buf = buffers[users[j]] = deque(maxlen=keep + 1)
            entry = (runs[j], walls[j])
            if next_end == instants[j]:
                own_entry[j] = entry
            buf.appendleft(entry)
            e += 1
            if e < n:
                next_end = ends[by_end[e]]
        user = users[i]
        wall = walls[i]
        buf = get_buffer(user)
        head: Optional[Tuple[int, int]] = None
        history: Sequence[Tuple[int, int]]
        if buf is None:
            history = empty
        elif ends[i] == t:
            own = own_entry.pop(i)
            history = [x for x in buf if x is not own][:keep]
        else:
            # predict() reads only the first v1_jobs / v3_jobs rows, so the buffer itself
            # (newest first, at most keep + 1 rows) is passed without a copy.
            history = buf
            head = buf[0]
            # Users submit in batches: the same walltime with the same history (no job of
            # theirs ended in between) gives the same predictions, as predict() is pure.
            last = memo.get(user)
            if last is not None and last[0] is head and last[1] == wall:
                for (_name, out), value in zip(outputs, last[2]):
                    out[i] = value
                continue
        values = []
        for name, out in outputs:
            # predict() returns None only for a walltime <= 0, which was skipped above.
            value = cast(int, predict(name, wall, history, params).soft_walltime_s)
            out[i] = value
            values.append(value)
        if head is not None:
            memo[user] = (head, wall, values)

    return soft


class ReplayColumns(NamedTuple):
    """The evaluated jobs as parallel columns, and their order by instant and by end."""

    users: List[str]
    instants: List[int]
    ends: List[int]
    walls: List[int]
    runs: List[int]
    ncpus: List[Optional[int]]
    by_instant: List[int]
    by_end: List[int]


def columns(
    jobs: Sequence[TraceJob], moment: str = "submit", release: bool = False
) -> Tuple[ReplayColumns, Dict[str, int]]:
    """The jobs that can be evaluated, as columns in trace order, and the others by reason.

    :param jobs: the workload in trace order
    :param moment: ``"submit"`` or ``"start"``: the prediction instant
    :param release: empty ``jobs`` (a list) while reading it, so that the jobs and their
        columns are never both in memory (a large trace's peak)
    """
    skipped: Dict[str, int] = {}
    users: List[str] = []
    instants: List[int] = []
    ends: List[int] = []
    walls: List[int] = []
    runs: List[int] = []
    cpus: List[Optional[int]] = []
    at_submit = moment == "submit"
    if release:
        assert isinstance(jobs, list)
        jobs.reverse()  # popped from the end, oldest first
        pop = jobs.pop
        source: Iterable[TraceJob] = (pop() for _ in range(len(jobs)))
    else:
        source = jobs
    for job in source:
        user = job[0]
        submit_s, start_s, end_s, wall, run = job[1], job[2], job[3], job[4], job[5]
        instant = submit_s if at_submit else start_s
        # Inline fast path of skip_reason(): most jobs pass every check.
        if (
            wall is None
            or wall <= 0
            or run is None
            or run < 0
            or not user
            or instant is None
            or end_s is None
        ):
            reason = skip_reason(job, moment)
            assert reason is not None
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        users.append(user)
        instants.append(instant)
        ends.append(end_s)
        walls.append(wall)
        runs.append(run)
        cpus.append(job[6] if len(job) > 6 else None)

    n = len(users)
    # Python's sort is stable: sorting indices by time alone keeps trace order within ties.
    by_instant = sorted(range(n), key=instants.__getitem__)
    by_end = sorted(range(n), key=ends.__getitem__)

    return ReplayColumns(users, instants, ends, walls, runs, cpus, by_instant, by_end), skipped


class CalibratedHistories:
    """The users' finished jobs as :func:`replay_calibrated` reads them: per user, newest
    first, the last ``keep`` (plus a spare one, for the entry of a job that ends at its own
    instant, which is not its own history), and among them those of each walltime (the
    rules' "same walltime" class, without a scan of the history).

    Every entry ``(runtime_s, walltime_s, ncpus)`` has a walltime > 0 (:func:`columns`
    keeps no other job), so :func:`softwalltime.core.calibrated.outcome_of_usable` applies.
    """

    __slots__ = ("keep", "buffers", "by_wall", "own_entry", "memo")

    def __init__(self, keep: int = cal.HISTORY_ROWS) -> None:
        self.keep = keep
        # Newest first, lists (the rules read a slice): at most keep + 1 entries.
        self.buffers: Dict[str, List[cal.ClassRow]] = {}
        # Per user and walltime: the entries of the user's first keep with it, newest first.
        self.by_wall: Dict[str, Dict[Optional[int], List[cal.ClassRow]]] = {}
        # The entries of the jobs that end at their own instant, by job, until predicted.
        self.own_entry: Dict[int, cal.ClassRow] = {}
        # Per user: (newest entry, walltime, ncpus, outcome) of the last outcome(): the
        # outcome is a pure function of these (users submit in batches).
        self.memo: Dict[str, Tuple[cal.ClassRow, int, Optional[int], cal.Outcome]] = {}

    def of(self, user: str, exclude: int) -> List[cal.ClassRow]:
        """The user's last ``keep`` entries, newest first, without job ``exclude``'s own."""
        buf = self.buffers.get(user)
        if buf is None:
            return []
        own = self.own_entry.get(exclude)
        if own is None:
            return buf[: self.keep]
        return [x for x in buf if x is not own][: self.keep]

    def add(self, user: str, entry: cal.ClassRow, own: int = -1) -> None:
        """A job of ``user`` ended: ``entry`` becomes the newest; ``own``: the job's index
        when it ends at its own instant (kept out of its own history until
        :meth:`predicted`), else -1."""
        keep = self.keep
        buf = self.buffers.get(user)
        if buf is None:
            buf = self.buffers[user] = []
            walls_of = self.by_wall[user] = {}
        else:
            walls_of = self.by_wall[user]
        if own >= 0:
            self.own_entry[own] = entry
        buf.insert(0, entry)
        same = walls_of.get(entry[1])
        if same is None:
            walls_of[entry[1]] = [entry]
        else:
            same.insert(0, entry)
        if len(buf) > keep:  # the entry now at position keep left the first keep
            walls_of[buf[keep][1]].pop()
            if len(buf) > keep + 1:
                buf.pop()

    def outcome(self, user: str, wall: int, cpus: Optional[int]) -> cal.Outcome:
        """The outcome of a job of ``user`` not ended yet (so not in its own history)."""
        buf = self.buffers.get(user)
        if buf is None:
            return cal.outcome_of_usable(wall, cpus, [])
        head = buf[0]
        last = self.memo.get(user)
        if last is not None and last[0] is head and last[1] == wall and last[2] == cpus:
            return last[3]
        same = self.by_wall[user].get(wall, [])
        out = cal.outcome_of_usable(wall, cpus, buf[: self.keep], same)
        self.memo[user] = (head, wall, cpus, out)
        return out

    def predicted(self, i: int) -> None:
        """Job ``i`` was predicted: its own entry, if any, is history like any other."""
        self.own_entry.pop(i, None)


def replay_calibrated(
    columns: ReplayColumns,
    target_under_pct: Optional[float],
    table: Optional[cal.Calibration] = None,
    observe: Optional[Any] = None,
) -> Tuple[List[int], cal.Calibration]:
    """Replay the ``calibrated`` predictor: the hook's code, with the site table updated
    at every job end in event order (ends first at equal times), from finished jobs only.

    Each job is predicted at its instant from the user's last ``HISTORY_ROWS`` jobs ended by
    then (:class:`CalibratedHistories`) and the table as it is then; at its end, the table
    learns the job's outcome.

    :param columns: the jobs (see :class:`ReplayColumns`)
    :param target_under_pct: the admin's target, percent
    :param table: the starting table (default: empty)
    :param observe: ``observe(i, history, table)`` called before job ``i`` is predicted
        (tests use it to compare with the hook path)
    :returns: the soft walltimes (job order) and the final table
    """
    users, instants, ends, walls, runs, ncpus, by_instant, by_end = columns
    n = len(users)
    if table is None:
        table = cal.Calibration()
    histories = CalibratedHistories(cal.HISTORY_ROWS)
    # Outcomes of the jobs predicted and not yet ended (memory: only the running ones).
    pending: Dict[int, cal.Outcome] = {}
    softs = [0] * n
    update = table.update
    choose = table.choose
    outcome = cal.outcome_of_usable
    history_of = histories.of

    e = 0
    next_end = ends[by_end[0]] if n else 0
    for i in by_instant:
        t = instants[i]
        while e < n and next_end <= t:
            j = by_end[e]
            got = pending.pop(j, None)
            if got is None:  # ends at its own instant: its outcome from the history so far
                out = outcome(walls[j], ncpus[j], history_of(users[j], j))
                pending[j] = out  # predicted below
                update(out, runs[j], target_under_pct)
            else:
                update(got, runs[j], target_under_pct, softs[j])
            entry = (runs[j], walls[j], ncpus[j])
            histories.add(users[j], entry, j if ends[j] == instants[j] else -1)
            e += 1
            if e < n:
                next_end = ends[by_end[e]]
        user = users[i]
        wall = walls[i]
        cpus = ncpus[i]
        if observe is not None:
            observe(i, history_of(user, i), table)
        if pending.pop(i, None) is not None:
            # ended at its own instant (the table learnt it above): predicted from the
            # history as it is now, which may hold more of the user's jobs ended at t
            out = outcome(wall, cpus, history_of(user, i))
        else:
            out = pending[i] = histories.outcome(user, wall, cpus)
        softs[i] = out.softs[choose(out.bin)]
        histories.predicted(i)
    # The remaining ends: the table's final state covers every finished job.
    while e < n:
        j = by_end[e]
        update(pending.pop(j), runs[j], target_under_pct, softs[j])
        e += 1
    return softs, table


def copy_table(table: Optional[cal.Calibration]) -> Optional[cal.Calibration]:
    """A fresh copy of a starting table (the replay changes the one it is given)."""
    return None if table is None else cal.Calibration.from_rows(*table.rows())


SWEEP_TARGETS = (2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 15.0, 20.0, 25.0)


def sweep_calibrated(
    cols: ReplayColumns,
    targets: Sequence[float] = SWEEP_TARGETS,
    start: Optional[cal.Calibration] = None,
) -> List[Tuple[float, Metrics]]:
    """Replay the ``calibrated`` predictor once per target: ``[(target, metrics), ...]``.

    :param cols: the jobs, from :func:`columns`
    :param start: the starting table (default: empty)
    """
    out = []
    for target in targets:
        softs, _table = replay_calibrated(cols, target, copy_table(start))
        out.append((float(target), metrics(softs, cols.runs)))
    return out


def accuracy(soft_s: int, runtime_s: int) -> float:
    """Accuracy of one estimate: min(runtime/soft, soft/runtime), 1 when both are 0.

    :param soft_s: the estimate, seconds
    :param runtime_s: the real run time, seconds
    """
    if soft_s == runtime_s:
        return 1.0
    if soft_s <= 0 or runtime_s <= 0:
        return 0.0
    return soft_s / runtime_s if soft_s < runtime_s else runtime_s / soft_s


def _median(sorted_values: List[float]) -> float:
    n = len(sorted_values)
    mid = n // 2
    if n % 2:
        return sorted_values[mid]
    return (sorted_values[mid - 1] + sorted_values[mid]) / 2.0


def metrics(soft_s: Sequence[int], runtime_s: Sequence[int]) -> Metrics:
    """Compute the accuracy figures of one set of estimates.

    :param soft_s: estimates, seconds
    :param runtime_s: real run times, seconds, same length and order
    :raises ValueError: the sequences differ in length
    """
    if len(soft_s) != len(runtime_s):
        raise ValueError("soft_s and runtime_s differ in length")
    n = len(soft_s)
    if n == 0:
        return Metrics(0, None, None, None, None, None)
    # Written out (not via accuracy()) because this runs once per job and predictor.
    under = sum(1 for s, r in zip(soft_s, runtime_s) if s < r)
    bad = sum(1 for s, r in zip(soft_s, runtime_s) if s < r - BAD_UNDER_S)
    abs_err = sum(abs(s - r) for s, r in zip(soft_s, runtime_s))
    accs = [
        1.0 if s == r else (0.0 if s <= 0 or r <= 0 else (s / r if s < r else r / s))
        for s, r in zip(soft_s, runtime_s)
    ]
    accs.sort()
    return Metrics(
        jobs=n,
        under_pct=100.0 * under / n,
        bad_under_pct=100.0 * bad / n,
        mean_accuracy=sum(accs) / n,
        median_accuracy=_median(accs),
        mae_hours=abs_err / n / 3600.0,
    )


def runtime_class(runtime_s: int) -> str:
    """Name the runtime class of a job: ``short`` (<= 2 h), ``medium`` (<= 24 h) or ``long``.

    :param runtime_s: run time, seconds
    """
    for name, limit in CLASSES:
        if limit is None or runtime_s <= limit:
            return name
    raise AssertionError("unreachable: the last class has no limit")


def summarize(result: Replay) -> Dict[str, PredictorReport]:
    """Compute :class:`PredictorReport` for the baseline and every replayed predictor.

    :param result: what :func:`replay` returned
    """
    runs = result.runtime_s
    members: Dict[str, List[int]] = {cls: [] for cls, _limit in CLASSES}
    for k, r in enumerate(runs):
        members[runtime_class(r)].append(k)
    reports: Dict[str, PredictorReport] = {}
    for name, softs in result.soft_s.items():
        by_class: Dict[str, Metrics] = {}
        for cls, idx in members.items():
            by_class[cls] = metrics([softs[k] for k in idx], [runs[k] for k in idx])
        reports[name] = PredictorReport(metrics(softs, result.runtime_s), by_class)
    return reports


def report_dict(
    source: str,
    result: Replay,
    reports: Dict[str, PredictorReport],
    trace_skipped: Dict[str, int],
    target_under_pct: Optional[float] = None,
    target_v3: bool = False,
) -> Dict[str, Any]:
    """Build the ``--json`` object: source, moment, jobs, skipped, predictors.

    :param source: what was read, for people (paths, or the redacted DSN)
    :param result: the replay
    :param reports: from :func:`summarize`
    :param trace_skipped: records the reader itself skipped, by reason
    :param target_under_pct: the ``calibrated`` predictor's target, reported beside its
        achieved rate (``predictors.calibrated.target_under_pct``); with ``target_v3``,
        ignored: v3's rate on the same jobs is reported (``result.v3_under_pct``)
    :param target_v3: the target was "as many under-estimates as v3"
        (``predictors.calibrated.target`` is ``"v3"``, else ``"fixed"``)
    """
    skipped_by_reason = dict(trace_skipped)
    for reason, count in result.skipped.items():
        skipped_by_reason[reason] = skipped_by_reason.get(reason, 0) + count
    predictors: Dict[str, Any] = {}
    for name, rep in reports.items():
        obj: Dict[str, Any] = rep.overall._asdict()
        obj["by_class"] = {cls: m._asdict() for cls, m in rep.by_class.items()}
        if name in TARGETED and target_v3:
            obj["target"] = "v3"
            obj["target_under_pct"] = result.v3_under_pct
        elif name in TARGETED and target_under_pct is not None:
            obj["target"] = "fixed"
            obj["target_under_pct"] = target_under_pct
        predictors[name] = obj
    return {
        "source": source,
        "moment": result.moment,
        "jobs": len(result.runtime_s),
        "skipped": sum(skipped_by_reason.values()),
        "skipped_by_reason": skipped_by_reason,
        "predictors": predictors,
    }


def target_text(obj: Dict[str, Any]) -> str:
    """``target under R %, achieved A %`` for calibrated's report entry (``target`` "v3" or
    "fixed", ``target_under_pct``, ``under_pct``): evaluate and simulate print it alike."""
    if obj.get("target") == "v3":
        target = "v3's rate, {} %".format(format_figure(obj["target_under_pct"], ".1f"))
    else:
        target = "{:g} %".format(obj["target_under_pct"])
    return "target under {}, achieved {} %".format(target, format_figure(obj["under_pct"], ".1f"))


def format_figure(value: Optional[float], spec: str) -> str:
    """``value`` formatted with ``spec``, or ``-`` when there is none (a table's empty
    cell; ``evaluate`` and ``simulate`` print alike)."""
    return "-" if value is None else format(value, spec)


def format_table(report: Dict[str, Any]) -> str:
    """Render the ``report_dict`` object as a plain-text table for people.

    :param report: what :func:`report_dict` returned
    """
    skipped = report["skipped_by_reason"]
    why = ", ".join(f"{k} {v}" for k, v in sorted(skipped.items()))
    lines = [
        "source: {}".format(report["source"]),
        "moment: {}   jobs evaluated: {}   skipped: {}{}".format(
            report["moment"], report["jobs"], report["skipped"], f" ({why})" if why else ""
        ),
        "",
        "{:<18}{:>8}{:>9}{:>13}{:>10}{:>12}{:>10}".format(
            "", "jobs", "under %", "bad under %", "mean acc", "median acc", "MAE h"
        ),
    ]
    groups = [("all jobs", None)] + [
        ("short (<= 2 h)", "short"),
        ("medium (2-24 h]", "medium"),
        ("long (> 24 h)", "long"),
    ]
    for name, obj in report["predictors"].items():
        if "target_under_pct" in obj:
            lines.insert(3, f"{name}: {target_text(obj)}")
    for title, cls in groups:
        lines.append(title)
        for name, obj in report["predictors"].items():
            m = obj if cls is None else obj["by_class"][cls]
            lines.append(
                "  {:<16}{:>8}{:>9}{:>13}{:>10}{:>12}{:>10}".format(
                    name,
                    m["jobs"],
                    format_figure(m["under_pct"], ".1f"),
                    format_figure(m["bad_under_pct"], ".1f"),
                    format_figure(m["mean_accuracy"], ".3f"),
                    format_figure(m["median_accuracy"], ".3f"),
                    format_figure(m["mae_hours"], ".2f"),
                )
            )
    return "\n".join(lines) + "\n"


# a user's rows in replay_learned: newest first, their run/walltime ratios, rows per walltime
_UserRows = Tuple[List[learned.Row], List[float], Dict[int, List[learned.Row]]]


def replay_learned(
    columns: ReplayColumns,
    target_under_pct: Optional[float],
    learner: Optional[learned.Learner] = None,
) -> Tuple[List[int], learned.Learner]:
    """Replay the ``learned`` predictor fully online: the site table learns every job at
    its end, in event order (ends first at equal times), from finished jobs only.

    Each job is predicted at its instant from the user's last ``HISTORY_ROWS`` jobs ended
    by then, the time since the newest of them ended, and the table as it is then. A job
    that ends at its own instant (run time 0 at submit) is predicted when its end comes,
    before it is learnt, from the jobs ended before it.

    Long because it is the replay's one hot loop, its state (the buffers with their rows'
    ratios and rows per walltime, the per-user memo, the pending outcomes) kept in locals
    for speed; ``tests/test_learned.py`` checks it against a plain replay of the pure code.

    :param target_under_pct: the target, percent, or ``None``: v3's under-estimates
    :returns: the soft walltimes (job order) and the final table
    """
    users, instants, ends, walls, runs, _cpus, by_instant, by_end = columns
    n = len(users)
    if learner is None:
        learner = new_learner()
    target = None if target_under_pct is None else target_under_pct / 100.0
    keep = learned.HISTORY_ROWS
    # Per user: the rows, newest first; their run/walltime ratios, alike; the rows per
    # walltime, newest first (no scan of 100 rows for the same walltime or the ratios)
    kept: Dict[str, _UserRows] = {}
    pending: Dict[int, learned.Outcome] = {}
    done = [False] * n
    softs = [0] * n
    # Per user: (newest row, walltime, the gap's bucket end) -> outcome (users submit in
    # batches; the outcome depends on the instant only through the gap's bucket)
    memo: Dict[str, Tuple[Any, int, int, int, learned.Outcome]] = {}
    outcome = learned.outcome
    choose = learner.choose
    update = learner.update
    empty: List[learned.Row] = []
    no_user: _UserRows = (empty, [], {})

    def predict_at(i: int, t: int) -> None:
        user = users[i]
        wall = walls[i]
        buf, ratios, walls_of = kept.get(user, no_user)
        if buf:
            head = buf[0]
            last = memo.get(user)
            if last is not None and last[0] is head and last[1] == wall and last[2] <= t <= last[3]:
                out = last[4]
            else:
                out = outcome(wall, buf, t, walls_of.get(wall, empty), ratios)
                low, high = _gap_span(head[2], t)
                memo[user] = (head, wall, low, high, out)
        else:
            out = outcome(wall, empty, t)
        pending[i] = out
        # every rule the same soft walltime (5 % of HPC2N's choices): any choice gives it
        softs[i] = out.low if out.low == out.high else out.softs[choose(out)]
        done[i] = True

    e = 0
    end_at: List[float] = [ends[j] for j in by_end]
    end_at.append(float("inf"))  # after every instant: the loop below stops there
    for i in by_instant:
        t = instants[i]
        while end_at[e] <= t:
            j = by_end[e]
            if not done[j]:  # ends at its own instant, not predicted yet
                predict_at(j, instants[j])
            run = runs[j]
            wall = walls[j]
            update(pending.pop(j), run, softs[j], target)
            got = kept.get(users[j])
            if got is None:
                got = kept[users[j]] = ([], [], {})
            buf, ratios, walls_of = got
            entry = (run, wall, ends[j])
            buf.insert(0, entry)
            ratios.insert(0, run / wall)
            same = walls_of.get(wall)
            if same is None:
                walls_of[wall] = [entry]
            else:
                same.insert(0, entry)
            if len(buf) > keep:
                walls_of[buf.pop()[1]].pop()
                ratios.pop()
            e += 1
        if not done[i]:
            predict_at(i, t)
    while e < n:
        j = by_end[e]
        update(pending.pop(j), runs[j], softs[j], target)
        e += 1
    return softs, learner


def _gap_span(last_end_s: int, now_s: int) -> Tuple[int, int]:
    """The instants with the same gap bucket as ``now_s`` after an end at ``last_end_s``."""
    low = last_end_s - 10**18
    for cut in learned.GAP_CUTS:
        if now_s - last_end_s <= cut:
            return low, last_end_s + cut
        low = last_end_s + cut + 1
    return low, 10**18
