"""The live side of wait prediction: the jobs queued and running now, as a wait history.

The paper's "second mode" reads the queue and the running jobs and the finished ones from
the history. They come from the database's ``live_jobs`` (the ingester's live states,
read by :mod:`.livedb`) or from ``qstat -f -F json`` (:func:`live_from_qstat`), as
:class:`LiveJob` rows; :func:`wait_rows` turns them into :class:`.workload.WaitJob` rows
whose unknown start (queued) or end (running) is :data:`.pqstar.UNKNOWN_S`;
:func:`live_history` joins them with finished jobs, and :func:`.pqstar.predict_one`
predicts a job submitted now. No database and no PBS command here: the caller reads both.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ..units import duration_or_none, qstat_time
from .pqstar import UNKNOWN_S, WaitAnswer, WaitParams, predict_one
from .workload import WaitJob

# job_state values: Q queued (eligible); R running and E exiting (they hold processors).
# Held (H), waiting for a time (W), in transit (T), suspended (S), array parents (B) and
# the rest neither wait in the scheduler's queue nor hold processors.
QUEUED_STATES = frozenset("Q")
RUNNING_STATES = frozenset("RE")
# History kept besides the jobs PBS shows: the replay is linear in it (about 18 us a job;
# 10,000 finished jobs keep one prediction near 200 ms).
DEFAULT_FINISHED_KEPT = 10_000


def _int(value: Any) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class LiveJob(NamedTuple):
    """A job queued or running now (from live_jobs or qstat); times in epoch seconds."""

    job_id: str
    queued: bool  # False: running
    user: str
    queue: str
    submit_s: int  # ctime
    start_s: Optional[int]  # running: start of the current run
    ncpus: int
    walltime_s: int  # 0: none requested
    soft_s: Optional[int]
    select: str = ""  # Resource_List.select, place and exec_vnode (qstat; "": not known)
    place: str = ""
    exec_vnode: str = ""

    def ert_s(self, ert: str) -> int:
        """Estimated run time: the walltime, or (``ert="soft"``) the soft walltime if set."""
        return self.soft_s if ert == "soft" and self.soft_s else self.walltime_s


def wait_rows(jobs: Sequence[LiveJob], ert: str = "walltime", leave_out: str = "") -> List[WaitJob]:
    """Live jobs as wait rows in submit order (ties: job id), but ``leave_out``'s."""
    rows = sorted((j for j in jobs if j.job_id != leave_out), key=lambda j: (j.submit_s, j.job_id))
    return [
        WaitJob(
            submit_s=j.submit_s,
            start_s=UNKNOWN_S if j.queued or j.start_s is None else j.start_s,
            end_s=UNKNOWN_S,
            procs=max(1, j.ncpus),
            ert_s=j.ert_s(ert),
            user=j.user,
        )
        for j in rows
    ]


def jobs_from_qstat(
    jobs: Mapping[str, Any], ert: str = "walltime"
) -> Tuple[List[WaitJob], Dict[str, int]]:
    """Queued and running jobs of ``qstat -f -F json`` as wait rows, submit order.

    :param jobs: qstat's ``Jobs`` object (job id -> attributes; times as epoch seconds)
    :param ert: ``"walltime"`` or ``"soft"`` (the soft walltime where set, else walltime)
    :returns: the rows, and the jobs left out by reason
    """
    live, left = live_from_qstat(jobs)
    return wait_rows(live, ert), left


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def live_from_qstat(jobs: Mapping[str, Any]) -> Tuple[List[LiveJob], Dict[str, int]]:
    """Queued and running jobs of ``qstat -f -F json``, and the jobs left out by reason.

    :param jobs: qstat's ``Jobs`` object (job id -> attributes; times as epoch seconds)
    """
    rows: List[LiveJob] = []
    left: Dict[str, int] = {}

    def leave(reason: str) -> None:
        left[reason] = left.get(reason, 0) + 1

    for job_id, attrs in jobs.items():
        if not isinstance(attrs, dict):
            leave("not an object")
            continue
        state = str(attrs.get("job_state") or "")
        if state not in QUEUED_STATES and state not in RUNNING_STATES:
            leave(f"state {state or '?'}")
            continue
        res = attrs.get("Resource_List") or {}
        if not isinstance(res, dict):
            res = {}
        ctime = qstat_time(attrs.get("ctime"))
        if ctime is None:
            leave("no ctime")
            continue
        start = qstat_time(attrs.get("stime")) if state in RUNNING_STATES else UNKNOWN_S
        if start is None:
            leave("running without stime")
            continue
        user = str(attrs.get("euser") or str(attrs.get("Job_Owner") or "").split("@")[0])
        rows.append(
            LiveJob(
                job_id=str(job_id),
                queued=state in QUEUED_STATES,
                user=user,
                queue=str(attrs.get("queue") or ""),
                submit_s=ctime,
                start_s=None if start == UNKNOWN_S else start,
                ncpus=max(1, _int(res.get("ncpus")) or 1),
                walltime_s=duration_or_none(res.get("walltime")) or 0,
                soft_s=duration_or_none(res.get("soft_walltime")),
                select=_text(res.get("select")),
                place=_text(res.get("place")),
                exec_vnode=_text(attrs.get("exec_vnode")) if start != UNKNOWN_S else "",
            )
        )
    rows.sort(key=lambda r: (r.submit_s, r.job_id))
    return rows, left


def live_history(
    finished: Sequence[WaitJob],
    current: Sequence[WaitJob],
    now_s: int,
    finished_kept: int = DEFAULT_FINISHED_KEPT,
) -> List[WaitJob]:
    """Finished jobs (ended by ``now_s``; the most recently submitted ``finished_kept``)
    and the jobs PBS shows now, in submit order: the history of a job submitted now."""
    done = sorted((j for j in finished if j.end_s <= now_s), key=lambda j: j.submit_s)
    if finished_kept >= 0:
        done = done[len(done) - finished_kept :] if len(done) > finished_kept else done
    merged = done + [j for j in current if j.submit_s <= now_s]
    merged.sort(key=lambda j: j.submit_s)  # stable: finished before current at equal times
    return merged


def predict_live(
    finished: Sequence[WaitJob],
    live: Sequence[LiveJob],
    job: WaitJob,
    machine_procs: int,
    params: WaitParams,
    ert: str = "walltime",
    finished_kept: int = DEFAULT_FINISHED_KEPT,
    leave_out: str = "",
) -> WaitAnswer:
    """Predict the wait of ``job``, submitted at ``job.submit_s`` (now), from the finished
    jobs and the live ones (without ``leave_out``: the queued job being predicted)."""
    history = live_history(finished, wait_rows(live, ert, leave_out), job.submit_s, finished_kept)
    return predict_one(history, job, machine_procs, params)
