"""The live side of wait prediction: the jobs PBS shows now, as a wait history.

The paper's "second mode" reads the queue and the running jobs from ``qstat -f`` and the
finished ones from the history. :func:`jobs_from_qstat` turns the ``Jobs`` object of
``qstat -f -F json`` into :class:`.workload.WaitJob` rows whose unknown start (queued)
or end (running) is :data:`.pqstar.UNKNOWN_S`; :func:`live_history` joins them with
finished jobs, and :func:`.pqstar.predict_one` predicts a job about to be submitted.
No database and no PBS command here: the caller reads both.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..units import duration_or_none
from .pqstar import UNKNOWN_S
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


def jobs_from_qstat(
    jobs: Mapping[str, Any], ert: str = "walltime"
) -> Tuple[List[WaitJob], Dict[str, int]]:
    """Queued and running jobs of ``qstat -f -F json`` as wait rows, submit order.

    :param jobs: qstat's ``Jobs`` object (job id -> attributes; times as epoch seconds)
    :param ert: ``"walltime"`` or ``"soft"`` (the soft walltime where set, else walltime)
    :returns: the rows, and the jobs left out by reason
    """
    rows: List[Tuple[int, str, WaitJob]] = []
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
        ctime = _int(attrs.get("ctime"))
        if ctime is None:
            leave("no ctime")
            continue
        start = _int(attrs.get("stime")) if state in RUNNING_STATES else UNKNOWN_S
        if start is None:
            leave("running without stime")
            continue
        walltime = duration_or_none(res.get("walltime")) or 0
        soft = duration_or_none(res.get("soft_walltime"))
        user = str(attrs.get("euser") or str(attrs.get("Job_Owner") or "").split("@")[0])
        row = WaitJob(
            submit_s=ctime,
            start_s=start,
            end_s=UNKNOWN_S,
            procs=max(1, _int(res.get("ncpus")) or 1),
            ert_s=soft if ert == "soft" and soft else walltime,
            user=user,
        )
        rows.append((ctime, job_id, row))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [r[2] for r in rows], left


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
