"""A workload as the trace readers give it: :class:`Trace` of :class:`TraceJob` (pure).

The readers (:mod:`.trace_readers`: SWF and PBS accounting; :mod:`.history`: the finished_jobs
table) build these; the replays (:mod:`.evaluate`, :mod:`.simulate`, :mod:`softwalltime.wait`)
read them. :func:`skip_reason` says which jobs none of them can use.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional

# Skip reasons, in the order they are checked.
SKIP_WALLTIME = "no requested walltime"
SKIP_RUNTIME = "no run time"
SKIP_USER = "no user"
SKIP_TIMES = "no submit/start/end time"


class TraceJob(NamedTuple):
    """One finished job as a trace source gives it; ``None`` means unknown.

    Times are integer seconds on one clock (Unix epoch, or trace-relative for SWF traces
    without a ``UnixStartTime`` header).
    """

    user: Optional[str]
    submit_s: Optional[int]
    start_s: Optional[int]
    end_s: Optional[int]
    walltime_s: Optional[int]
    runtime_s: Optional[int]
    ncpus: Optional[int] = None
    """Requested processors (SWF: requested, else allocated; PBS: Resource_List.ncpus)."""
    soft_walltime_s: Optional[int] = None
    """The soft walltime the job ended with (PBS: Resource_List.soft_walltime), if any."""


class Trace(NamedTuple):
    """A workload read from one or more sources, jobs in trace order."""

    source: str
    jobs: List[TraceJob]
    skipped: Dict[str, int]
    """Records the reader could not turn into jobs (malformed lines, duplicates), by reason."""


def skip_reason(job: TraceJob, moment: str = "submit") -> Optional[str]:
    """Say why a job can be neither evaluated nor used as history, or ``None`` if it can.

    :param job: the job
    :param moment: ``"submit"`` or ``"start"``: which instant must be known
    """
    if job.walltime_s is None or job.walltime_s <= 0:
        return SKIP_WALLTIME
    if job.runtime_s is None or job.runtime_s < 0:
        return SKIP_RUNTIME
    if not job.user:
        return SKIP_USER
    instant = job.submit_s if moment == "submit" else job.start_s
    if instant is None or job.end_s is None:
        return SKIP_TIMES
    return None
