"""The queue and the running jobs as the database knows them: ``live_jobs``, which the
ingester keeps from the Q, S, R and D records (migration 0007).

Read in the same REPEATABLE READ transaction as the finished jobs, they are one snapshot
of the accounting log at one position: a job that ended is either still running here or
finished there, never in neither or both (which mixing qstat's now with the database's
past would give). What that snapshot lags behind the server is stated with it.
"""

from __future__ import annotations

import datetime
from typing import List, NamedTuple, Optional

import sqlalchemy as sa
from sqlalchemy import Connection

from ..db.schema import live_jobs
from ..errors import ConfigError, DatabaseError, SchemaMissingError
from .live import LiveJob

UNDEFINED_TABLE = "42P01"
# live_jobs rows read at most: more is no live queue (PBS's own limits are far lower);
# the ingester drops stale rows, so only a broken setup gets here.
MAX_LIVE_ROWS = 200_000


class LiveState(NamedTuple):
    jobs: List[LiveJob]
    newest_s: Optional[int]  # the latest state change the database knows (epoch seconds)


def _epoch(value: Optional[datetime.datetime]) -> Optional[int]:
    return None if value is None else int(value.timestamp())


def read_live_jobs(conn: Connection, server: Optional[str] = None) -> LiveState:
    """Queued and running jobs of ``live_jobs``, and its newest state change.

    :param conn: a connection; the caller owns the transaction
    :param server: only this PBS server's jobs (default: all)
    :raises SchemaMissingError: the table is missing (database not upgraded to 0007)
    :raises ConfigError: more than MAX_LIVE_ROWS rows
    :raises DatabaseError: the query failed
    """
    t = live_jobs.c
    query = sa.select(
        t.job_id,
        t.state,
        t.username,
        t.queue,
        t.ctime,
        t.started_at,
        t.ncpus,
        t.walltime_s,
        t.soft_walltime_s,
    ).where(t.state.in_(("queued", "running")))
    newest = sa.select(sa.func.max(t.event_at))
    if server is not None:
        query = query.where(t.server == server)
        newest = newest.where(t.server == server)
    try:
        rows = conn.execute(query.limit(MAX_LIVE_ROWS + 1)).all()
        newest_at = conn.execute(newest).scalar()
    except sa.exc.SQLAlchemyError as err:
        if getattr(getattr(err, "orig", None), "pgcode", None) == UNDEFINED_TABLE:
            raise SchemaMissingError() from err
        lines = str(getattr(err, "orig", None) or err).strip().splitlines()
        raise DatabaseError(
            f"cannot read live_jobs ({lines[0] if lines else type(err).__name__})"
        ) from err
    if len(rows) > MAX_LIVE_ROWS:
        raise ConfigError(
            f"live_jobs holds more than {MAX_LIVE_ROWS:,} queued and running jobs: no live"
            " queue is that long (is the ingester dropping stale states?)"
        )
    jobs = [
        LiveJob(
            job_id=job_id,
            queued=state == "queued",
            user=user,
            queue=queue or "",
            submit_s=int(ctime.timestamp()),
            start_s=_epoch(started),
            ncpus=max(1, ncpus or 1),
            walltime_s=walltime or 0,
            soft_s=soft,
        )
        for job_id, state, user, queue, ctime, started, ncpus, walltime, soft in rows
    ]
    return LiveState(jobs, _epoch(newest_at))
