"""The ``--db`` workload source: finished jobs from the history table (SQLAlchemy Core).

Kept apart from :mod:`.evaluate` and :mod:`.trace_readers` so that those stay free of any
database code.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Dict, List, NamedTuple, Optional

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..db.schema import finished_jobs
from ..errors import UNDEFINED_TABLE, DatabaseError, SchemaMissingError
from .bounds import implausible
from .counterfactual import Jobs
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


# ---------------------------------------------------------------------------------------
# The policy's period, for the counterfactual (issue 48)

MAX_PERIOD_JOBS = 2_000_000  # jobs of one replayed period (warm-up included)
MAX_POLICY_RECORDS = 10_000


class PolicyRecord(NamedTuple):
    changed_at: datetime
    before: Optional[Dict[str, Optional[str]]]
    after: Dict[str, Optional[str]]


def read_policy_changes(conn: Connection) -> List[PolicyRecord]:
    """The recorded policy changes (``policy_changes``), oldest first (the newest
    :data:`MAX_POLICY_RECORDS`)."""
    from ..db.schema import policy_changes

    t = policy_changes.c
    query = sa.select(t.changed_at, t.before, t.after).order_by(t.id.desc())
    try:
        rows = conn.execute(query.limit(MAX_POLICY_RECORDS)).all()
    except sa.exc.SQLAlchemyError as err:
        if getattr(getattr(err, "orig", None), "pgcode", None) == UNDEFINED_TABLE:
            raise SchemaMissingError() from err
        raise DatabaseError(f"cannot read policy_changes ({err.__class__.__name__})") from err
    return [PolicyRecord(at, before, after) for at, before, after in reversed(rows)]


def read_period(
    conn: Connection,
    since: datetime,
    until: datetime,
    warmup_s: int,
    server: Optional[str] = None,
) -> Jobs:
    """The jobs that arrived in ``[since - warmup_s, until)`` and ran, with what the model
    replays: the arrival (``etime``, when the job became eligible, else ``ctime``), its real
    start, run time, walltime, soft walltime, ncpus and queue. Jobs without a start, walltime
    or ncpus are not replayable and left out.

    :raises DatabaseError: the query failed, or the period holds more than
        :data:`MAX_PERIOD_JOBS` jobs
    """
    t = finished_jobs.c
    arrival = sa.func.coalesce(t.etime, t.ctime)
    query = (
        sa.select(
            t.username,
            arrival,
            t.started_at,
            t.runtime_s,
            t.walltime_s,
            t.soft_walltime_s,
            t.ncpus,
            t.queue,
        )  # fmt: skip
        .where(arrival >= since - timedelta(seconds=warmup_s), arrival < until)
        .where(t.started_at.is_not(None), t.runtime_s.is_not(None))
        .where(t.walltime_s > 0, t.ncpus > 0)
        .order_by(arrival, t.job_seq, t.server, t.job_id)
        .limit(MAX_PERIOD_JOBS + 1)
    )
    if server is not None:
        query = query.where(t.server == server)
    out = Jobs([], [], [], [], [], [], [], [], 0)
    cut = int(since.timestamp())
    try:
        for user, at, started, run, wall, soft, ncpus, queue in conn.execute(query):
            a = int(at.timestamp())
            if a < cut:
                out = out._replace(first=out.first + 1)
            out.user.append(user)
            out.arrival.append(a)
            out.start.append(max(a, int(started.timestamp())))
            out.run.append(min(run, wall))
            out.wall.append(wall)
            out.soft.append(soft or 0)
            out.ncpus.append(ncpus)
            out.queue.append(queue or "")
    except sa.exc.SQLAlchemyError as err:
        raise DatabaseError(f"cannot read the period's jobs ({err.__class__.__name__})") from err
    if len(out.user) > MAX_PERIOD_JOBS:
        raise DatabaseError(
            f"the period holds more than {MAX_PERIOD_JOBS} jobs: give a shorter one"
        )
    return out
