"""The report's aggregations: one parameterized SQL statement per figure (PostgreSQL).

Definitions (the same as ``softwalltime evaluate`` and the paper):

* a job is *before* deployment when it was created (``ctime``) before the deployment
  instant, *after* otherwise; after deployment only jobs with a soft walltime count, as in
  the paper's CERIT-soft-wall trace (the others are counted in :func:`totals`);
* runtime class: short <= 2 h, medium (2 h, 24 h], long > 24 h of ``runtime_s``;
* error = estimate - run time, in hours (positive: over-estimate); *under-estimate*: the
  run time exceeded the soft walltime, so the server had to extend it (PP-482: by 100 % of
  the original soft walltime each time, never past the walltime);
* wait = ``started_at - ctime``; bounded slowdown = max(1, (wait + run) / max(run, 10 min)).

:func:`materialise` reads the jobs of a :class:`Scope` once into temporary tables; every
figure's function then takes the Connection (the caller owns the transaction, which must
not be READ ONLY) and returns plain, JSON-ready values.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

# The quantiles the box plots draw: whiskers at 5 % and 95 %, box at the quartiles.
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
# Bounded slowdown's floor on the run time (the paper: 10 minutes, CERIT-SC's minimum job).
BSLD_FLOOR_S = 600
# A user or queue enters "worst" tables only with at least this many jobs after deployment:
# with fewer, one unlucky job makes a 100 % under-estimate rate.
MIN_JOBS_FOR_WORST = 10
# A figure, row or reading that rests on fewer jobs than this is greyed out and marked "too
# few jobs" (docs/report.md): below 30, a share's 95 % interval is wider than +-18 points.
MIN_JOBS_FOR_FIGURE = 30
WORST_ROWS = 10
DEEPEST_ROWS = 15
# Heatmap axes (Figure 9): processors, and run time or walltime. Upper bounds are
# exclusive thresholds for width_bucket (an integer n <= t - 1 falls below threshold t).
SIZE_LABELS = ("1", "2-4", "5-8", "9-16", "17-32", "33-64", ">64")
SIZE_THRESHOLDS = (2, 5, 9, 17, 33, 65)
TIME_LABELS = ("<=10 min", "<=1 h", "<=2 h", "<=4 h", "<=1 d", "<=2 d", "<=1 w", ">1 w")
TIME_THRESHOLDS = (601, 3601, 7201, 14401, 86401, 172801, 604801)
CLASSES = ("short", "medium", "long")
# Synthetic histories (softwalltime.report.synthetic) mark their rows' source_file so.
SYNTHETIC_PREFIX = "synthetic:"


class Scope(NamedTuple):
    """Which jobs the report covers; ``None`` means no bound."""

    deployed_at: dt.datetime
    since: Optional[dt.datetime] = None
    until: Optional[dt.datetime] = None
    server: Optional[str] = None
    queue: Optional[str] = None

    def params(self) -> Dict[str, Any]:
        return {
            "deployed_at": self.deployed_at,
            "since": self.since,
            "until": self.until,
            "server": self.server,
            "queue": self.queue,
        }


# The jobs of the scope (ended in [since, until), server, queue) with a walltime and a run
# time, read once into a narrow temporary table (:func:`materialise`) that every figure reads:
# one scan of the wide history instead of one per figure, class and month as integers.
# ``compared``: the compared jobs, every job before deployment and the jobs with a soft
# walltime after it. ``wait_s`` is NULL for a job without a start time; ``under_job_id`` and
# ``synthetic_source`` are NULL except where a figure needs them (kept narrow). ``cls`` is
# an integer code (0 short, 1 medium, 2 long), ``month`` the UTC month the job ended in.
# Each column of report_jobs and the expression computing it.
_COLUMNS = {
    "cls": "CAST(CASE WHEN runtime_s <= 7200 THEN 0 WHEN runtime_s <= 86400 THEN 1 ELSE 2 END"
    " AS int2)",
    "after": "ctime >= CAST(:deployed_at AS timestamptz)",
    "compared": "(ctime < CAST(:deployed_at AS timestamptz) OR soft_walltime_s IS NOT NULL)",
    "walltime_s": "walltime_s",
    "soft_walltime_s": "soft_walltime_s",
    "runtime_s": "runtime_s",
    "queue": "queue",
    "month": "date_trunc('month', ended_at AT TIME ZONE 'UTC')",
    "ncpus": "ncpus",
    "username": "username",
    "wait_s": "date_part('epoch', started_at - ctime)",
    "ended_at": "ended_at",
    "under_job_id": "CASE WHEN runtime_s > soft_walltime_s THEN job_id END",
    "synthetic_source": "CASE WHEN source_file LIKE :synthetic THEN source_file END",
}
_ALWAYS = ("cls", "after", "compared", "walltime_s", "soft_walltime_s", "runtime_s")
# The columns each figure reads besides _ALWAYS (report_users: username).
_READS = {
    "totals": ("username", "ended_at", "synthetic_source"),
    "error_by_month_class": ("month",),
    "by_class": (),
    "waits_by_class": ("wait_s",),
    "by_queue": ("queue",),
    "users": ("username",),
    "worst_users": ("username",),
    "under_estimates": ("username", "queue", "ended_at", "under_job_id"),
    "heatmaps": ("ncpus",),
    "queue_fit": ("queue",),
}
_JOBS_FROM = """
FROM finished_jobs
WHERE runtime_s IS NOT NULL AND walltime_s > 0
  AND (CAST(:since AS timestamptz) IS NULL OR ended_at >= CAST(:since AS timestamptz))
  AND (CAST(:until AS timestamptz) IS NULL OR ended_at < CAST(:until AS timestamptz))
  AND (CAST(:server AS text) IS NULL OR server = CAST(:server AS text))
  AND (CAST(:queue AS text) IS NULL OR queue = CAST(:queue AS text))
"""
# Per user after deployment (Figure 6 and the worst users), from the table above.
_USERS_SELECT = """
SELECT username, count(*) AS jobs,
       avg(abs(walltime_s - runtime_s)) / 3600.0 AS wall_mae_h,
       avg(abs(soft_walltime_s - runtime_s)) / 3600.0 AS soft_mae_h,
       100.0 * avg(CASE WHEN runtime_s > soft_walltime_s THEN 1 ELSE 0 END) AS under_pct
FROM report_jobs WHERE compared AND after GROUP BY username
"""


def _rows(conn: Connection, sql: str, **params: Any) -> List[Dict[str, Any]]:
    """Run ``sql``: constant SQL of this module, never values (values are bound parameters)."""
    result = conn.execute(sa.text(sql), params)
    return [dict(row._mapping) for row in result]


def _hours(values: Optional[List[float]]) -> Optional[List[float]]:
    return None if values is None else [round(v / 3600.0, 4) for v in values]


def find_deployment(conn: Connection, server: Optional[str] = None) -> Optional[dt.datetime]:
    """The creation time of the first job with a soft walltime (on ``server`` if given).

    :returns: ``None`` when no job has one (soft walltimes were never deployed here)
    """
    sql = (
        "SELECT min(ctime) FROM finished_jobs WHERE soft_walltime_s IS NOT NULL"
        " AND (CAST(:server AS text) IS NULL OR server = CAST(:server AS text))"
    )
    value: Optional[dt.datetime] = conn.execute(sa.text(sql), {"server": server}).scalar()
    return value


def materialise(conn: Connection, scope: Scope, names: Optional[Sequence[str]] = None) -> None:
    """Read the jobs of ``scope`` into the transaction's temporary tables, which every other
    function of this module reads (they are dropped at the end of the transaction).

    Needs a transaction that may write (temporary tables; not READ ONLY) and the TEMPORARY
    privilege on the database, which PostgreSQL grants every role unless revoked. Run it in
    a REPEATABLE READ transaction: the figures then come from the snapshot this reads, and
    the tables are a copy of it in any case.

    :param names: the figures (and ``totals``) that will read the tables: only the columns
        they read are made; default: all
    """
    if names is None:
        names = ("totals", *FIGURES)
    conn.execute(sa.text("DROP TABLE IF EXISTS pg_temp.report_users, pg_temp.report_jobs"))
    wanted = set(_ALWAYS).union(*(_READS[name] for name in names))
    columns = ", ".join(f"{_COLUMNS[c]} AS {c}" for c in _COLUMNS if c in wanted)
    create = "CREATE TEMPORARY TABLE report_jobs ON COMMIT DROP AS SELECT"
    params = {**scope.params(), "synthetic": SYNTHETIC_PREFIX + "%"}
    conn.execute(sa.text(" ".join((create, columns, _JOBS_FROM))), params)
    if "users" in names or "worst_users" in names:
        create = "CREATE TEMPORARY TABLE report_users ON COMMIT DROP AS"
        conn.execute(sa.text(" ".join((create, _USERS_SELECT))))


def totals(conn: Connection) -> Dict[str, Any]:
    """Job counts of the scope: before, after with and without a soft walltime, synthetic."""
    # The synthetic sources are sorted (DISTINCT) only where there are any (a demo history);
    # the users are hashed in a second scan: GROUPING SETS in one scan would compute every
    # aggregate per user too (measured 30 % slower), count(DISTINCT) would sort.
    sql = """
    SELECT count(*) AS jobs, count(*) FILTER (WHERE NOT after) AS before,
           count(*) FILTER (WHERE after AND soft_walltime_s IS NOT NULL) AS after_soft,
           count(*) FILTER (WHERE after AND soft_walltime_s IS NULL) AS after_without_soft,
           count(synthetic_source) AS synthetic,
           min(ended_at) AS first_end, max(ended_at) AS last_end,
           array_agg(DISTINCT synthetic_source) FILTER (WHERE synthetic_source IS NOT NULL)
               AS sources
    FROM report_jobs
    """
    row = _rows(conn, sql)[0]
    row["synthetic_sources"] = sorted(row.pop("sources") or [])[:5]
    users_sql = "SELECT count(*) AS users FROM (SELECT username FROM report_jobs GROUP BY 1) u"
    row["users"] = _rows(conn, users_sql)[0]["users"]
    return row


def error_by_month_class(conn: Connection) -> List[Dict[str, Any]]:
    """Figure 5: error quantiles (hours) of walltime and soft walltime per month x class."""
    sql = """
    SELECT to_char(month, 'YYYY-MM') AS month,
           (ARRAY['short','medium','long'])[cls + 1] AS cls, jobs, soft_jobs, wall_q, soft_q
    FROM (
    SELECT month, cls, count(*) AS jobs, count(*) FILTER (WHERE after) AS soft_jobs,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP
               (ORDER BY walltime_s - runtime_s) AS wall_q,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP
               (ORDER BY soft_walltime_s - runtime_s) FILTER (WHERE after) AS soft_q
    FROM report_jobs WHERE compared GROUP BY month, cls
    ) g ORDER BY g.month, g.cls
    """
    rows = _rows(conn, sql, q=list(QUANTILES))
    for row in rows:
        row["wall_q"] = _hours(row["wall_q"])
        row["soft_q"] = _hours(row["soft_q"])
    return rows


def by_class(conn: Connection) -> List[Dict[str, Any]]:
    """Per class, before and after: errors, under-estimates, wait and bounded slowdown.

    ``wall_q`` and ``soft_q`` (hours): the error quantiles of Figure 7 (left); the medians
    are their middle values, unrounded (one sort per measure and group for both).
    ``wall_mae_h`` and ``soft_mae_h``: the mean absolute errors (hours), the headline's
    measure (a signed median near 0 hides errors both ways).
    """
    sql = """
    SELECT (ARRAY['short','medium','long'])[cls + 1] AS cls, after, count(*) AS jobs,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP
               (ORDER BY walltime_s - runtime_s) AS wall_q,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP
               (ORDER BY soft_walltime_s - runtime_s) FILTER (WHERE after) AS soft_q,
           100.0 * avg(CASE WHEN runtime_s > soft_walltime_s THEN 1 ELSE 0 END)
               FILTER (WHERE after) AS under_pct,
           avg(abs(walltime_s - runtime_s)) / 3600.0 AS wall_mae_h,
           avg(abs(soft_walltime_s - runtime_s)) FILTER (WHERE after) / 3600.0 AS soft_mae_h
    FROM report_jobs j WHERE compared GROUP BY j.cls, after ORDER BY j.cls, after
    """
    rows = _rows(conn, sql, q=list(QUANTILES))
    middle = QUANTILES.index(0.5)
    for row in rows:
        for kind in ("wall", "soft"):
            q = row[f"{kind}_q"]
            row[f"median_{kind}_error_h"] = None if q is None else q[middle] / 3600.0
            row[f"{kind}_q"] = _hours(q)
        for key in ("under_pct", "wall_mae_h", "soft_mae_h"):
            row[key] = None if row[key] is None else float(row[key])
    return rows


def waits_by_class(conn: Connection) -> List[Dict[str, Any]]:
    """Per class, before and after: wait and bounded slowdown (merged into ``by_class``
    rows by :func:`merge_waits`)."""
    sql = """
    SELECT (ARRAY['short','medium','long'])[cls + 1] AS cls, after,
           count(wait_s) AS timed_jobs,
           avg(wait_s) / 3600.0 AS mean_wait_h,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP (ORDER BY wait_s) AS wait_q,
           avg(bsld) AS mean_bsld,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP (ORDER BY bsld) AS bsld_q
    FROM (SELECT cls, after, wait_s,
                 greatest(1.0, (wait_s + runtime_s) / greatest(runtime_s, :floor)) AS bsld
          FROM report_jobs WHERE compared) w
    GROUP BY w.cls, after ORDER BY w.cls, after
    """
    rows = _rows(conn, sql, q=list(QUANTILES), floor=BSLD_FLOOR_S)
    for row in rows:
        row["wait_q"] = _hours(row["wait_q"])
        for key in ("mean_wait_h", "mean_bsld"):
            row[key] = None if row[key] is None else float(row[key])
    return rows


def merge_waits(data: Dict[str, Any]) -> None:
    """Move the rows of ``waits_by_class`` into those of ``by_class`` (same class, period)."""
    waits = {(r.pop("cls"), r.pop("after")): r for r in data.pop("waits_by_class")}
    for row in data["by_class"]:
        row.update(waits[(row["cls"], row["after"])])


def by_queue(conn: Connection) -> List[Dict[str, Any]]:
    """Figure 7 (right): after deployment, per queue: error quantiles and under-estimates."""
    sql = """
    SELECT coalesce(queue, '(none)') AS queue, count(*) AS jobs,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP
               (ORDER BY walltime_s - runtime_s) AS wall_q,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP
               (ORDER BY soft_walltime_s - runtime_s) AS soft_q,
           100.0 * avg(CASE WHEN runtime_s > soft_walltime_s THEN 1 ELSE 0 END) AS under_pct,
           max(walltime_s) AS max_walltime_s
    FROM report_jobs WHERE compared AND after GROUP BY 1 ORDER BY max(walltime_s), 1
    """
    rows = _rows(conn, sql, q=list(QUANTILES))
    for row in rows:
        row["wall_q"] = _hours(row["wall_q"])
        row["soft_q"] = _hours(row["soft_q"])
        row["under_pct"] = float(row["under_pct"])
    return rows


def users(conn: Connection) -> Dict[str, Any]:
    """Figure 6: per user, mean absolute error of walltime vs soft walltime (after)."""
    summary_sql = """
    SELECT count(*) AS users,
           100.0 * avg(CASE WHEN wall_mae_h > soft_mae_h THEN 1 ELSE 0 END) AS improved_pct,
           100.0 * avg(CASE WHEN wall_mae_h - soft_mae_h > 1 THEN 1 ELSE 0 END)
               AS improved_1h_pct,
           100.0 * avg(CASE WHEN wall_mae_h - soft_mae_h > 24 THEN 1 ELSE 0 END)
               AS improved_24h_pct,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY wall_mae_h - soft_mae_h)
               AS median_improvement_h,
           max(soft_mae_h - wall_mae_h) FILTER (WHERE soft_mae_h > wall_mae_h)
               AS worst_deterioration_h
    FROM report_users
    """
    per_user_sql = """
    SELECT username, jobs, wall_mae_h, soft_mae_h, wall_mae_h - soft_mae_h AS improvement_h,
           under_pct
    FROM report_users ORDER BY improvement_h DESC, username
    """
    summary = {k: _float(v) for k, v in _rows(conn, summary_sql)[0].items()}
    per_user = [{k: _float(v) for k, v in r.items()} for r in _rows(conn, per_user_sql)]
    return {"summary": summary, "per_user": per_user}


def _float(value: Any) -> Any:
    """Decimals (PostgreSQL numeric) as floats, everything else as it is."""
    if value is None or isinstance(value, (int, str, float)):
        return value
    return float(value)


def worst_users(conn: Connection) -> List[Dict[str, Any]]:
    """Users (with enough jobs) whose soft walltimes were most often under-estimated."""
    sql = """
    SELECT username, jobs, under_pct, soft_mae_h, wall_mae_h FROM report_users
    WHERE jobs >= :min_jobs AND under_pct > 0
    ORDER BY under_pct DESC, jobs DESC, username LIMIT :n
    """
    return [
        {k: _float(v) for k, v in r.items()}
        for r in _rows(conn, sql, min_jobs=MIN_JOBS_FOR_WORST, n=WORST_ROWS)
    ]


def under_estimates(conn: Connection) -> Dict[str, Any]:
    """Under-estimates after deployment: how many extensions the server made, the deepest."""
    ext_sql = """
    SELECT least(ext, 5) AS extensions, count(*) AS jobs FROM (
        SELECT CASE WHEN runtime_s <= soft_walltime_s THEN 0
                    ELSE (least(runtime_s, walltime_s) + greatest(soft_walltime_s, 1) - 1)
                         / greatest(soft_walltime_s, 1) - 1 END AS ext
        FROM report_jobs WHERE compared AND after
    ) e GROUP BY 1 ORDER BY 1
    """
    deep_sql = """
    SELECT under_job_id AS job_id, username, queue, walltime_s, soft_walltime_s, runtime_s,
           runtime_s - soft_walltime_s AS beyond_s, ended_at
    FROM report_jobs WHERE compared AND after AND under_job_id IS NOT NULL
    ORDER BY beyond_s DESC, job_id LIMIT :n
    """
    extensions = [{k: _float(v) for k, v in r.items()} for r in _rows(conn, ext_sql)]
    deepest = _rows(conn, deep_sql, n=DEEPEST_ROWS)
    for row in deepest:
        row["ended_at"] = row["ended_at"].isoformat()
    return {"extensions": extensions, "deepest": deepest}


def heatmaps(conn: Connection) -> List[Dict[str, Any]]:
    """Figure 9: jobs and CPU-hours by size x run time and size x walltime, before/after.

    ``axis`` is ``runtime`` or ``walltime``; ``size`` and ``bucket`` index
    :data:`SIZE_LABELS` and :data:`TIME_LABELS`.
    """
    # One hash of the jobs by (size, run time, walltime) cell, then the two axes from its few
    # hundred rows: 20 % faster than GROUPING SETS over every job.
    sql = """
    SELECT after, CASE WHEN GROUPING(rt) = 0 THEN 'runtime' ELSE 'walltime' END AS axis,
           size, coalesce(rt, wt) AS bucket, CAST(sum(jobs) AS bigint) AS jobs,
           sum(cpu_s) / 3600.0 AS cpu_hours
    FROM (
        SELECT after, size, rt, wt, count(*) AS jobs, sum(cpu_s) AS cpu_s FROM (
            SELECT after, CAST(coalesce(ncpus, 1) AS int8) * runtime_s AS cpu_s,
                   width_bucket(coalesce(ncpus, 1), CAST(:sizes AS int[])) AS size,
                   width_bucket(runtime_s, CAST(:times AS int[])) AS rt,
                   width_bucket(walltime_s, CAST(:times AS int[])) AS wt
            FROM report_jobs WHERE compared
        ) b GROUP BY 1, 2, 3, 4
    ) cells
    GROUP BY GROUPING SETS ((after, size, rt), (after, size, wt))
    ORDER BY 1, 2, 3, 4
    """
    rows = _rows(conn, sql, sizes=list(SIZE_THRESHOLDS), times=list(TIME_THRESHOLDS))
    return [{k: _float(v) for k, v in r.items()} for r in rows]


def queue_fit(conn: Connection) -> List[Dict[str, Any]]:
    """Jobs after deployment whose soft walltime would fit a queue with a shorter limit.

    A queue's limit is the longest walltime of its jobs in the scope (PBS's
    ``resources_max.walltime`` is not in the history). The shorter queue is the one with the
    smallest such limit that is at least the soft walltime. ``usual_target``: the most
    frequent such queue (on a tie, the first by name, as ``mode()`` chooses).
    """
    sql = """
    WITH lim AS (SELECT queue, max(walltime_s) AS limit_s FROM report_jobs
                 WHERE compared AND queue IS NOT NULL GROUP BY queue)
    , ladder AS (
        SELECT array_agg(limit_s ORDER BY limit_s) AS limits,
               array_agg(queue ORDER BY limit_s) AS queues
        FROM (SELECT DISTINCT ON (limit_s) limit_s, queue FROM lim
              ORDER BY limit_s, queue) d
    )
    , f AS (
        SELECT j.queue, lim.limit_s,
               ladder.queues[width_bucket(j.soft_walltime_s - 1, ladder.limits) + 1] AS fit_queue,
               ladder.limits[width_bucket(j.soft_walltime_s - 1, ladder.limits) + 1] AS fit_limit
        FROM report_jobs j JOIN lim ON lim.queue = j.queue CROSS JOIN ladder
        WHERE j.compared AND j.after
    )
    , per_fit AS (
        SELECT queue, limit_s, fit_queue, fit_limit < limit_s AS shorter, count(*) AS jobs
        FROM f GROUP BY 1, 2, 3, 4
    )
    SELECT queue, limit_s, CAST(sum(jobs) AS bigint) AS jobs,
           CAST(coalesce(sum(jobs) FILTER (WHERE shorter), 0) AS bigint) AS fit_shorter,
           (array_agg(fit_queue ORDER BY jobs DESC, fit_queue) FILTER (WHERE shorter))[1]
               AS usual_target
    FROM per_fit GROUP BY queue, limit_s ORDER BY limit_s, queue
    """
    return _rows(conn, sql)


FIGURES = (
    "error_by_month_class",
    "by_class",
    "waits_by_class",
    "by_queue",
    "users",
    "worst_users",
    "under_estimates",
    "heatmaps",
    "queue_fit",
)


# The figures of each connection when the report runs on three (build.py), with about a
# third of the work each (measured on 10^6 rows); each materialises only what it reads.
GROUPS = (
    ("totals", "by_class", "users", "worst_users", "under_estimates"),
    ("error_by_month_class", "by_queue", "queue_fit"),
    ("waits_by_class", "heatmaps"),
)


def collect(
    conn: Connection,
    timings: Optional[Dict[str, float]] = None,
    names: Sequence[str] = FIGURES,
) -> Dict[str, Any]:
    """Figures' numbers from the tables :func:`materialise` made (then the transaction's
    snapshot), keyed by their names (default: all of :data:`FIGURES`).

    :param timings: if given, filled with the seconds each figure's statements took
    """
    data: Dict[str, Any] = {}
    for name in names:
        start = time.perf_counter()
        data[name] = globals()[name](conn)
        if timings is not None:
            timings[name] = time.perf_counter() - start
    return data
