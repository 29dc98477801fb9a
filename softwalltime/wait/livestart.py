"""A live job's start time (issue 35): the queue and running jobs now, as a
:class:`.starttime.QueueSnapshot`, and the finished jobs' histories to draw run times from (pure:
the caller reads the database or qstat).
"""

from __future__ import annotations

import random
from typing import Dict, List, Optional, Sequence, Tuple

from ..replay import pbsched
from ..replay.trace import TraceJob
from ..site_file import Site
from .live import LiveJob
from .livesite import LiveSiteSnapshot, site_snapshot
from .starttime import (
    DEFAULT_SAMPLES,
    SITE_RATIOS,
    QueuedJob,
    QueueSnapshot,
    RunningJob,
    RunSampler,
    StartAnswer,
    all_quantiles,
    start_quantiles,
)

# A job without a walltime may run for ever; PBS plans it as 5 years (its scheduler's
# "infinity" for a job with no walltime, sched's JOB_INFINITY is much larger; any horizon
# beyond every other job's gives the same order).
NO_WALLTIME_S = 5 * 366 * 86400
HISTORY_ROWS = 100  # a user's finished jobs kept (as the hook reads)
Row = Tuple[int, int, int]


def histories(finished: Sequence[TraceJob]) -> Tuple[Dict[str, List[Row]], List[float]]:
    """Each user's finished jobs ``(run, walltime, ncpus)``, newest end first, and the
    run/walltime ratios of the site's last :data:`SITE_RATIOS` jobs."""
    done = sorted(
        (
            j
            for j in finished
            if j.user and j.end_s is not None and j.runtime_s is not None and j.walltime_s
        ),
        key=lambda j: -(j.end_s or 0),
    )
    rows: Dict[str, List[Row]] = {}
    for j in done:
        mine = rows.setdefault(j.user or "", [])
        if len(mine) < HISTORY_ROWS:
            mine.append((int(j.runtime_s or 0), int(j.walltime_s or 0), int(j.ncpus or 1)))
    site = [min(1.0, (j.runtime_s or 0) / (j.walltime_s or 1)) for j in done[:SITE_RATIOS]]
    return rows, site


def _wall(job: LiveJob) -> int:
    return job.walltime_s or NO_WALLTIME_S


def _waiting(live: Sequence[LiveJob], target: LiveJob) -> List[LiveJob]:
    # the queued jobs in submit order (ties by id), and the target last if not among them
    waiting = sorted((j for j in live if j.queued), key=lambda j: (j.submit_s, j.job_id))
    if all(j.job_id != target.job_id for j in waiting):
        waiting.append(target)
    return waiting


def _running(live: Sequence[LiveJob]) -> List[LiveJob]:
    return [j for j in live if not j.queued and j.start_s is not None]


def snapshot(live: Sequence[LiveJob], now: int, procs_total: int, target: LiveJob) -> QueueSnapshot:
    """The running and queued jobs of ``live`` at ``now``; ``target`` is one of the queued
    (by id), or a job not submitted (queued last)."""
    running = [
        RunningJob(j.start_s or now, j.soft_s or 0, _wall(j), max(1, j.ncpus))
        for j in _running(live)
    ]
    waiting = _waiting(live, target)
    queued = [QueuedJob(j.submit_s, j.soft_s or 0, _wall(j), max(1, j.ncpus)) for j in waiting]
    index = next(i for i, j in enumerate(waiting) if j.job_id == target.job_id)
    return QueueSnapshot(now, procs_total, running, queued, index)


def on_machine(
    live: Sequence[LiveJob],
    now: int,
    procs_total: int,
    target: Optional[LiveJob],
    on: Optional[Site],
) -> LiveSiteSnapshot:
    """The snapshot (:func:`snapshot`), or on ``on``'s model (:func:`.livesite.site_snapshot`,
    which may leave jobs out), with the queued and running jobs it holds in its order;
    ``target`` None: every queued job's (``wait --publish``; the snapshot's target is
    then its first queued job, if any).

    :raises ValueError: as :func:`.livesite.site_snapshot`
    """
    running = _running(live)
    if target is None:
        waiting = sorted((j for j in live if j.queued), key=lambda j: (j.submit_s, j.job_id))
        index = None
    else:
        waiting = _waiting(live, target)
        index = next(i for i, j in enumerate(waiting) if j.job_id == target.job_id)
    if on is not None:
        return site_snapshot(on, waiting, running, now, index, _wall)
    snap = snapshot(live, now, procs_total, target or waiting[0])
    return LiveSiteSnapshot(snap, waiting, running, {})


def predict_start(
    live: Sequence[LiveJob],
    finished: Sequence[TraceJob],
    target: LiveJob,
    now: int,
    procs_total: int,
    policy: pbsched.Policy,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> StartAnswer:
    """P50 and P90 of ``target``'s start and PBS's estimate (see :mod:`.starttime`; no
    learned widening of the P90 here: it needs predictions whose job has started), on one
    pool of ``procs_total``.

    :raises ValueError: the job needs more processors than the machine has
    """
    found = on_machine(live, now, procs_total, target, None)
    return predict_snapshot(found, finished, policy, samples, seed)


def predict_snapshot(
    found: LiveSiteSnapshot,
    finished: Sequence[TraceJob],
    policy: pbsched.Policy,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> StartAnswer:
    """:func:`predict_start` for the target of a snapshot :func:`on_machine` made (on a
    site's model with ``on``).

    :raises ValueError: the job never starts on the machine
    """
    rows, site = histories(finished)
    sampler = RunSampler(random.Random(seed), site)

    def kind(j: LiveJob) -> List[int]:
        return sampler.runs_of(_wall(j), max(1, j.ncpus), rows.get(j.user, []))

    waiting = found.waiting
    running = [kind(j) for j in found.running]
    return start_quantiles(
        found.snap, policy, sampler, lambda i: kind(waiting[i]), running, samples
    )


def predict_all(
    live: Sequence[LiveJob],
    finished: Sequence[TraceJob],
    now: int,
    procs_total: int,
    policy: pbsched.Policy,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    on: Optional[Site] = None,
) -> Dict[str, StartAnswer]:
    """Every queued job's start time by job id, from one set of forward runs to the last
    start (``wait --publish``); a job that cannot start (wider than the machine) is left
    out."""
    waiting = sorted((j for j in live if j.queued), key=lambda j: (j.submit_s, j.job_id))
    if not waiting:
        return {}
    found = on_machine(live, now, procs_total, None, on)
    waiting = found.waiting
    if not waiting:
        return {}  # none the site model can run
    rows, site = histories(finished)
    sampler = RunSampler(random.Random(seed), site)

    def kind(j: LiveJob) -> List[int]:
        return sampler.runs_of(_wall(j), max(1, j.ncpus), rows.get(j.user, []))

    running = [kind(j) for j in found.running]
    answers = all_quantiles(
        found.snap, policy, sampler, lambda i: kind(waiting[i]), running, samples
    )
    return {j.job_id: a for j, a in zip(waiting, answers) if a is not None}
