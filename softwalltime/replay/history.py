"""The ``--db`` workload source: finished jobs from the history table (SQLAlchemy Core).

Kept apart from :mod:`.evaluate` and :mod:`.trace_readers` so that those stay free of any
database code.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Dict, Optional

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..db.schema import finished_jobs
from ..errors import UNDEFINED_TABLE, DatabaseError, SchemaMissingError
from .bounds import implausible
from .trace import Trace, TraceJob

log = logging.getLogger(__name__)

# Rows fetched per round trip; the whole table is streamed, never loaded by one fetchall().
_BATCH_ROWS = 10000


def _epoch(value: Optional[datetime]) -> Optional[int]:
    return None if value is None else int(value.timestamp())


def read_finished_jobs(
    conn: Connection, source: str = "db", server: Optional[str] = None, latest: Optional[int] = None
) -> Trace:
    """Read every finished job as a workload, in submission order (ctime, then job number).

    Submit = ``ctime``, start = ``started_at``, end = ``ended_at``, requested walltime =
    ``walltime_s`` and run time = ``runtime_s``, as the predictors read them in the hook. A row
    with a value beyond :mod:`.bounds` is skipped and counted under the bound's reason.

    :param conn: a connection; the caller owns the transaction
    :param source: how to name the source in reports (pass a redacted DSN, never a password)
    :param server: only this PBS server's jobs (default: all)
    :param latest: only the ``latest`` most recently submitted jobs (default: all); the
        database sorts and limits, so a live command never reads the whole history
    :raises DatabaseError: the query failed (e.g. the schema is not migrated)
    """
    t = finished_jobs.c
    order = [t.ctime, t.job_seq, t.server, t.job_id]
    query = sa.select(
        t.username, t.ctime, t.started_at, t.ended_at, t.walltime_s, t.runtime_s, t.ncpus
    )
    if server is not None:
        query = query.where(t.server == server)
    if latest is not None:  # the newest, read newest first and put back in order below
        query = query.order_by(*(c.desc() for c in order)).limit(int(latest))
    else:
        query = query.order_by(*order)
    jobs = []
    skipped: Dict[str, int] = {}
    try:
        # Per statement: Connection.execution_options() would change the caller's connection
        # for good (every later statement a server-side cursor, which a DELETE cannot be).
        result = conn.execute(query, execution_options={"yield_per": _BATCH_ROWS})
        for user, ctime, started_at, ended_at, walltime_s, runtime_s, ncpus in result:
            submit_s, start_s = _epoch(ctime), _epoch(started_at)
            wait_s = start_s - submit_s if start_s is not None and submit_s is not None else None
            reason = implausible(submit_s, wait_s, runtime_s, walltime_s, ncpus)
            if reason is not None:  # stored before ingest refused such rows
                skipped[reason] = skipped.get(reason, 0) + 1
                continue
            jobs.append(
                TraceJob(
                    user or None,
                    submit_s,
                    start_s,
                    _epoch(ended_at),
                    walltime_s,
                    runtime_s,
                    ncpus,
                )
            )
    except sa.exc.SQLAlchemyError as err:
        if getattr(getattr(err, "orig", None), "pgcode", None) == UNDEFINED_TABLE:
            raise SchemaMissingError() from err
        lines = str(getattr(err, "orig", None) or err).strip().splitlines()
        why = lines[0] if lines else type(err).__name__
        raise DatabaseError(
            f"cannot read finished_jobs ({why}); "
            "is the schema migrated ('softwalltime db upgrade')?"
        ) from err
    if latest is not None:
        jobs.reverse()
    log.info("read %s finished jobs from %s", len(jobs), source)
    return Trace(source=source, jobs=jobs, skipped=skipped)
