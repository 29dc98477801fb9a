"""A history in which soft walltimes were deployed part way through, built from a real trace.

The bundled CERIT-SC 2013 workload (Alea SWF: submit, wait, run time, processors, requested
walltime, user, queue) is replayed in submit order through the hook's own predictor
(:func:`softwalltime.core.predict.predict`, default parameters). Jobs submitted before
the deployment instant get no soft walltime; jobs submitted at or after it get the
prediction the hook would have made at ``queuejob`` from the user's jobs that had ended by
then, except when the user had no finished job yet (the paper's trace has no soft walltime
for those either). Run times, waits and queues are the trace's own: the scheduler that
produced them planned with the users' walltimes, so the report's before/after wait figures
compare two periods of one scheduler, not the effect of soft walltimes.

Every row's ``source_file`` starts with :data:`~.queries.SYNTHETIC_PREFIX`, which the report
detects and states in its header.

Usage: ``python -m softwalltime.report.synthetic DSN [YYYY-MM-DD]`` (schema must exist).
"""

from __future__ import annotations

import datetime as dt
import gzip
import sys
from collections import deque
from importlib import resources
from typing import Any, Deque, Dict, Iterator, List, NamedTuple, Optional, Tuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core.predict import REASON_NO_HISTORY, PredictorParams, predict
from .queries import SYNTHETIC_PREFIX

TRACE = "CERIT-SC-wagap-2013.alea.swf.gz"
SERVER = "synthetic-cerit"
# The trace runs from 2012-12-31 to 2013-03-30: January before, February-March after.
DEFAULT_DEPLOYED_AT = dt.datetime(2013, 2, 1, tzinfo=dt.timezone.utc)
PREDICTOR = "v3"
_HISTORY = 15  # v3 reads the last 15 jobs; v1/v2 fewer


class SwfJob(NamedTuple):
    """One job of the Alea SWF trace (times in Unix seconds)."""

    job_id: str
    user: str
    queue: Optional[str]
    submit_s: int
    wait_s: int
    runtime_s: int
    walltime_s: int
    ncpus: int


def trace_path() -> str:
    """Path of the bundled CERIT-SC trace."""
    return str(resources.files("softwalltime") / "data" / TRACE)


def read_alea(path: str) -> List[SwfJob]:
    """Jobs of an Alea 21-column SWF with known submit, wait, run time, walltime and user.

    Lines with an unknown (-1) value among those are left out.
    """
    jobs: List[SwfJob] = []
    with gzip.open(path, "rt") as fh:
        for line in fh:
            f = line.split()
            if not f or f[0].startswith(";") or len(f) < 18:
                continue
            submit, wait, run, alloc, req_p, req_t = (int(f[i]) for i in (1, 2, 3, 4, 7, 8))
            if min(submit, wait, run) < 0 or req_t <= 0 or int(f[11]) < 0:
                continue
            queue = f[19] if len(f) > 19 and not f[19].startswith("{") else None
            procs = req_p if req_p > 0 else max(alloc, 1)
            jobs.append(SwfJob(f[0], "u" + f[11], queue, submit, wait, run, req_t, procs))
    return jobs


def soft_walltimes(jobs: List[SwfJob], deployed_at_s: int) -> List[Optional[int]]:
    """The hook's soft walltime for each job (``None`` before deployment or with no history).

    Predictions are made at submission from the user's jobs that ended at or before it,
    most recent end first (the hook's history query).
    """
    params = PredictorParams.create()
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].submit_s)
    ends = sorted(range(len(jobs)), key=lambda i: _end_s(jobs[i]))
    history: Dict[str, Deque[Tuple[int, Optional[int]]]] = {}
    soft: List[Optional[int]] = [None] * len(jobs)
    e = 0
    for i in order:
        job = jobs[i]
        while e < len(ends) and _end_s(jobs[ends[e]]) <= job.submit_s:
            done = jobs[ends[e]]
            history.setdefault(done.user, deque(maxlen=_HISTORY)).appendleft(
                (done.runtime_s, done.walltime_s)
            )
            e += 1
        if job.submit_s < deployed_at_s:
            continue
        p = predict(PREDICTOR, job.walltime_s, list(history.get(job.user, ())), params)
        if p.reason != REASON_NO_HISTORY:
            soft[i] = p.soft_walltime_s
    return soft


def _end_s(job: SwfJob) -> int:
    return job.submit_s + job.wait_s + job.runtime_s


def rows(path: str, deployed_at: dt.datetime) -> Iterator[Dict[str, Any]]:
    """``finished_jobs`` rows of the replayed trace."""
    jobs = read_alea(path)
    soft = soft_walltimes(jobs, int(deployed_at.timestamp()))
    source = (
        f"{SYNTHETIC_PREFIX}{TRACE} replayed through predictor {PREDICTOR} at submission"
        f" from {deployed_at.date().isoformat()}"
    )
    utc = dt.timezone.utc
    for job, soft_s in zip(jobs, soft):
        start = job.submit_s + job.wait_s
        yield {
            "server": SERVER,
            "job_id": f"{job.job_id}.{SERVER}",
            "ctime": dt.datetime.fromtimestamp(job.submit_s, utc),
            "job_seq": int(job.job_id),
            "username": job.user,
            "queue": job.queue,
            "walltime_s": job.walltime_s,
            "soft_walltime_s": soft_s,
            "runtime_s": job.runtime_s,
            "started_at": dt.datetime.fromtimestamp(start, utc),
            "ended_at": dt.datetime.fromtimestamp(start + job.runtime_s, utc),
            "ncpus": job.ncpus,
            "source_file": source,
        }


def load(
    conn: Connection,
    path: Optional[str] = None,
    deployed_at: dt.datetime = DEFAULT_DEPLOYED_AT,
) -> int:
    """Insert the synthetic history into ``finished_jobs`` (the caller commits).

    :returns: rows inserted
    """
    from ..db.schema import finished_jobs

    batch = list(rows(path or trace_path(), deployed_at))
    conn.execute(sa.insert(finished_jobs), batch)
    return len(batch)


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m softwalltime.report.synthetic DSN [YYYY-MM-DD]``."""
    from ..db.engine import make_engine

    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    when = DEFAULT_DEPLOYED_AT
    if len(args) > 1:
        when = dt.datetime.fromisoformat(args[1]).replace(tzinfo=dt.timezone.utc)
    engine = make_engine(args[0])
    with engine.begin() as conn:
        n = load(conn, deployed_at=when)
    engine.dispose()
    print(f"{n} synthetic finished jobs loaded (soft walltimes from {when.date()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
