"""The jobs a wait replay needs: submit, start, end, processors and an estimated run time.

A workload is built from a :class:`softwalltime.replay.trace.Trace` (SWF or PBS
accounting, read by :mod:`softwalltime.replay.trace_readers`). The estimated run time (ERT) is
what the scheduler plans with: the user's requested walltime, or the soft walltime the v3
predictor gives at submit time (replayed exactly as ``softwalltime evaluate`` does).
"""

from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..core.predict import PredictorParams
from ..replay.evaluate import replay
from ..replay.sim_workload import SKIP_PROCS
from ..replay.trace import Trace, TraceJob, skip_reason
from ..replay.trace_readers import InputLimits, read_lines

ERT_SOURCES = ("walltime", "soft")


class WaitJob(NamedTuple):
    """One job of a wait replay; times in integer seconds on one clock."""

    submit_s: int
    start_s: int
    end_s: int
    procs: int
    ert_s: int
    """Estimated run time: the requested walltime, or the soft walltime."""
    user: str


class WaitWorkload(NamedTuple):
    """Jobs in submit order (ties: trace order) and the machine's processors."""

    source: str
    jobs: List[WaitJob]
    machine_procs: int
    skipped: Dict[str, int]


def swf_max_procs(path: str) -> Optional[int]:
    """The ``; MaxProcs:`` of an SWF header (read until the first data line), or None.

    :param path: an SWF trace, plain or gzip-compressed
    """
    for _lineno, line in read_lines(path, InputLimits()):
        if not line.startswith(";"):
            if line.strip():
                return None
            continue
        low = line.lower()
        if "maxprocs:" in low:
            try:
                value = int(low.split("maxprocs:", 1)[1].split()[0])
            except (ValueError, IndexError):
                return None
            return value if value > 0 else None
    return None


def peak_procs(jobs: Sequence[WaitJob]) -> int:
    """The most processors in use at any instant (ends before starts at equal times)."""
    events: List[Tuple[int, int]] = []
    for job in jobs:
        events.append((job.start_s, job.procs))
        events.append((job.end_s, -job.procs))
    events.sort(key=lambda e: (e[0], e[1]))
    used = peak = 0
    for _t, delta in events:
        used += delta
        peak = max(peak, used)
    return max(1, peak)


def build(
    trace: Trace,
    ert: str = "walltime",
    machine_procs: Optional[int] = None,
    params: Optional[PredictorParams] = None,
) -> WaitWorkload:
    """Turn a trace into a wait workload.

    Jobs the soft-walltime replay cannot use (no walltime, run time, user or times) and
    jobs without a processor count are skipped, counted by reason. Jobs are sorted by
    submit time, trace order within ties.

    :param trace: the finished jobs
    :param ert: ``"walltime"`` or ``"soft"`` (v3 at submit, from ``params``)
    :param machine_procs: the machine's processors (default: the peak in use)
    :param params: the v3 predictor's parameters (default: ``PredictorParams.create()``)
    :raises ValueError: unknown ``ert``
    """
    if ert not in ERT_SOURCES:
        raise ValueError(f"ert must be one of {ERT_SOURCES}, not {ert!r}")
    skipped: Dict[str, int] = dict(trace.skipped)
    usable: List[TraceJob] = []
    for job in trace.jobs:
        reason = skip_reason(job, "submit")
        if reason is None and (job.ncpus is None or job.ncpus < 1):
            reason = SKIP_PROCS
        if reason is None and job.start_s is None:
            reason = "no start time"
        if reason is not None:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        usable.append(job)
    if ert == "soft":
        estimates = replay(usable, ["v3"], params, "submit").soft_s["v3"]
    else:
        estimates = [int(j.walltime_s or 0) for j in usable]
    order = sorted(range(len(usable)), key=lambda k: int(usable[k].submit_s or 0))
    jobs = []
    for k in order:
        j = usable[k]
        # skip_reason() and the checks above guarantee every field below
        jobs.append(
            WaitJob(
                int(j.submit_s or 0),
                int(j.start_s or 0),
                int(j.end_s or 0),
                int(j.ncpus or 1),
                int(estimates[k]),
                str(j.user),
            )
        )
    procs = machine_procs if machine_procs else peak_procs(jobs) if jobs else 1
    return WaitWorkload(trace.source, jobs, procs, skipped)


def large_job_procs(machine_procs: int) -> int:
    """The paper's "large" request: the next power of two >= sqrt(machine size)."""
    root = math.isqrt(max(1, machine_procs))
    if root * root < machine_procs:
        root += 1
    return 1 << max(0, (root - 1).bit_length())
