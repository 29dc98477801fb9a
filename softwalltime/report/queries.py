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

Each function takes a Connection (the caller owns the transaction) and a :class:`Scope`
and returns plain, JSON-ready values.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

# The quantiles the box plots draw: whiskers at 5 % and 95 %, box at the quartiles.
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
# Bounded slowdown's floor on the run time (the paper: 10 minutes, CERIT-SC's minimum job).
BSLD_FLOOR_S = 600
# A user or queue enters "worst" tables only with at least this many jobs after deployment:
# with fewer, one unlucky job makes a 100 % under-estimate rate.
MIN_JOBS_FOR_WORST = 10
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


# Jobs of the scope (ended in [since, until), server, queue) with a walltime and a run time.
_SCOPE_WHERE = """
    runtime_s IS NOT NULL AND walltime_s > 0
    AND (CAST(:since AS timestamptz) IS NULL OR ended_at >= CAST(:since AS timestamptz))
    AND (CAST(:until AS timestamptz) IS NULL OR ended_at < CAST(:until AS timestamptz))
    AND (CAST(:server AS text) IS NULL OR server = CAST(:server AS text))
    AND (CAST(:queue AS text) IS NULL OR queue = CAST(:queue AS text))
"""

# The compared jobs: every job before deployment, jobs with a soft walltime after it.
_JOBS_CTE = (
    """
WITH j AS (
    SELECT job_id, username, queue, ncpus, walltime_s, soft_walltime_s, runtime_s,
           ctime, started_at, ended_at,
           CASE WHEN runtime_s <= 7200 THEN 'short'
                WHEN runtime_s <= 86400 THEN 'medium' ELSE 'long' END COLLATE "C" AS cls,
           ctime >= CAST(:deployed_at AS timestamptz) AS after
    FROM finished_jobs
    WHERE""",
    _SCOPE_WHERE,
    """
      AND (ctime < CAST(:deployed_at AS timestamptz) OR soft_walltime_s IS NOT NULL)
)
""",
)


def _rows(
    conn: Connection, parts: Tuple[str, ...], scope: Scope, **extra: Any
) -> List[Dict[str, Any]]:
    """Run the statement made of ``parts``: constant SQL of this module, never values
    (values are bound parameters)."""
    result = conn.execute(sa.text(" ".join(parts)), {**scope.params(), **extra})
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


def totals(conn: Connection, scope: Scope) -> Dict[str, Any]:
    """Job counts of the scope: before, after with and without a soft walltime, synthetic."""
    sql = (
        """
    SELECT count(*) AS jobs,
           count(*) FILTER (WHERE ctime < CAST(:deployed_at AS timestamptz)) AS before,
           count(*) FILTER (WHERE ctime >= CAST(:deployed_at AS timestamptz)
                            AND soft_walltime_s IS NOT NULL) AS after_soft,
           count(*) FILTER (WHERE ctime >= CAST(:deployed_at AS timestamptz)
                            AND soft_walltime_s IS NULL) AS after_without_soft,
           count(*) FILTER (WHERE source_file LIKE :synthetic) AS synthetic,
           min(ended_at) AS first_end, max(ended_at) AS last_end
    FROM finished_jobs WHERE""",
        _SCOPE_WHERE,
    )
    row = _rows(conn, sql, scope, synthetic=SYNTHETIC_PREFIX + "%")[0]
    # GROUP BY (a hash) rather than count(DISTINCT) (a sort): 3x faster on 10^6 rows.
    users_sql = ("SELECT count(*) AS users FROM (SELECT username FROM finished_jobs WHERE",
                 _SCOPE_WHERE, "GROUP BY username) u")  # fmt: skip
    row["users"] = _rows(conn, users_sql, scope)[0]["users"]
    sources = (
        "SELECT DISTINCT source_file FROM finished_jobs WHERE",
        _SCOPE_WHERE,
        "AND source_file LIKE :synthetic ORDER BY 1 LIMIT 5",
    )
    row["synthetic_sources"] = [
        r["source_file"] for r in _rows(conn, sources, scope, synthetic=SYNTHETIC_PREFIX + "%")
    ]
    return row


def error_by_month_class(conn: Connection, scope: Scope) -> List[Dict[str, Any]]:
    """Figure 5: error quantiles (hours) of walltime and soft walltime per month x class."""
    sql = (
        *_JOBS_CTE,
        """
    SELECT to_char(date_trunc('month', ended_at AT TIME ZONE 'UTC'), 'YYYY-MM') COLLATE "C"
               AS month,
           cls, count(*) AS jobs, count(*) FILTER (WHERE after) AS soft_jobs,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP
               (ORDER BY walltime_s - runtime_s) AS wall_q,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP
               (ORDER BY soft_walltime_s - runtime_s) FILTER (WHERE after) AS soft_q
    FROM j GROUP BY 1, 2 ORDER BY 1, array_position(ARRAY['short','medium','long'], cls)
    """,
    )
    rows = _rows(conn, sql, scope, q=list(QUANTILES))
    for row in rows:
        row["wall_q"] = _hours(row["wall_q"])
        row["soft_q"] = _hours(row["soft_q"])
    return rows


def by_class(conn: Connection, scope: Scope) -> List[Dict[str, Any]]:
    """Per class, before and after: errors, under-estimates, wait and bounded slowdown."""
    sql = (
        *_JOBS_CTE,
        """
    , w AS (
        SELECT *, extract(epoch FROM started_at - ctime) AS wait_s,
               greatest(1.0, (extract(epoch FROM started_at - ctime) + runtime_s)
                        / greatest(runtime_s, :floor)) AS bsld
        FROM j
    )
    SELECT cls, after, count(*) AS jobs,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY walltime_s - runtime_s) / 3600.0
               AS median_wall_error_h,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY soft_walltime_s - runtime_s)
               FILTER (WHERE after) / 3600.0 AS median_soft_error_h,
           100.0 * avg(CASE WHEN runtime_s > soft_walltime_s THEN 1 ELSE 0 END)
               FILTER (WHERE after) AS under_pct,
           count(wait_s) AS timed_jobs,
           avg(wait_s) / 3600.0 AS mean_wait_h,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP (ORDER BY wait_s) AS wait_q,
           avg(bsld) AS mean_bsld,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP (ORDER BY bsld) AS bsld_q
    FROM w GROUP BY cls, after
    ORDER BY array_position(ARRAY['short','medium','long'], cls), after
    """,
    )
    rows = _rows(conn, sql, scope, q=list(QUANTILES), floor=BSLD_FLOOR_S)
    for row in rows:
        row["wait_q"] = _hours(row["wait_q"])
        for key in ("median_wall_error_h", "median_soft_error_h", "under_pct", "mean_wait_h"):
            row[key] = None if row[key] is None else float(row[key])
        row["mean_bsld"] = None if row["mean_bsld"] is None else float(row["mean_bsld"])
    return rows


def by_queue(conn: Connection, scope: Scope) -> List[Dict[str, Any]]:
    """Figure 7 (right): after deployment, per queue: error quantiles and under-estimates."""
    sql = (
        *_JOBS_CTE,
        """
    SELECT coalesce(queue, '(none)') AS queue, count(*) AS jobs,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP
               (ORDER BY walltime_s - runtime_s) AS wall_q,
           percentile_cont(CAST(:q AS float8[])) WITHIN GROUP
               (ORDER BY soft_walltime_s - runtime_s) AS soft_q,
           100.0 * avg(CASE WHEN runtime_s > soft_walltime_s THEN 1 ELSE 0 END) AS under_pct,
           max(walltime_s) AS max_walltime_s
    FROM j WHERE after GROUP BY 1 ORDER BY max(walltime_s), 1
    """,
    )
    rows = _rows(conn, sql, scope, q=list(QUANTILES))
    for row in rows:
        row["wall_q"] = _hours(row["wall_q"])
        row["soft_q"] = _hours(row["soft_q"])
        row["under_pct"] = float(row["under_pct"])
    return rows


_USERS_CTE = """
, u AS (
    SELECT username, count(*) AS jobs,
           avg(abs(walltime_s - runtime_s)) / 3600.0 AS wall_mae_h,
           avg(abs(soft_walltime_s - runtime_s)) / 3600.0 AS soft_mae_h,
           100.0 * avg(CASE WHEN runtime_s > soft_walltime_s THEN 1 ELSE 0 END) AS under_pct
    FROM j WHERE after GROUP BY username
)
"""


def users(conn: Connection, scope: Scope) -> Dict[str, Any]:
    """Figure 6: per user, mean absolute error of walltime vs soft walltime (after)."""
    summary_sql = (
        *_JOBS_CTE,
        _USERS_CTE,
        """
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
    FROM u
    """,
    )
    per_user_sql = (
        *_JOBS_CTE,
        _USERS_CTE,
        """
    SELECT username, jobs, wall_mae_h, soft_mae_h, wall_mae_h - soft_mae_h AS improvement_h,
           under_pct
    FROM u ORDER BY improvement_h DESC, username
    """,
    )
    summary = {k: _float(v) for k, v in _rows(conn, summary_sql, scope)[0].items()}
    per_user = [{k: _float(v) for k, v in r.items()} for r in _rows(conn, per_user_sql, scope)]
    return {"summary": summary, "per_user": per_user}


def _float(value: Any) -> Any:
    """Decimals (PostgreSQL numeric) as floats, everything else as it is."""
    if value is None or isinstance(value, (int, str, float)):
        return value
    return float(value)


def worst_users(conn: Connection, scope: Scope) -> List[Dict[str, Any]]:
    """Users (with enough jobs) whose soft walltimes were most often under-estimated."""
    sql = (
        *_JOBS_CTE,
        _USERS_CTE,
        """
    SELECT username, jobs, under_pct, soft_mae_h, wall_mae_h FROM u
    WHERE jobs >= :min_jobs AND under_pct > 0
    ORDER BY under_pct DESC, jobs DESC, username LIMIT :n
    """,
    )
    return [
        {k: _float(v) for k, v in r.items()}
        for r in _rows(conn, sql, scope, min_jobs=MIN_JOBS_FOR_WORST, n=WORST_ROWS)
    ]


def under_estimates(conn: Connection, scope: Scope) -> Dict[str, Any]:
    """Under-estimates after deployment: how many extensions the server made, the deepest."""
    ext_sql = (
        *_JOBS_CTE,
        """
    , e AS (
        SELECT CASE WHEN runtime_s <= soft_walltime_s THEN 0
                    ELSE ceil(CAST(least(runtime_s, walltime_s) AS numeric)
                              / greatest(soft_walltime_s, 1)) - 1 END AS ext
        FROM j WHERE after
    )
    SELECT least(ext, 5) AS extensions, count(*) AS jobs FROM e GROUP BY 1 ORDER BY 1
    """,
    )
    deep_sql = (
        *_JOBS_CTE,
        """
    SELECT job_id, username, queue, walltime_s, soft_walltime_s, runtime_s,
           runtime_s - soft_walltime_s AS beyond_s, ended_at
    FROM j WHERE after AND runtime_s > soft_walltime_s
    ORDER BY beyond_s DESC, job_id LIMIT :n
    """,
    )
    extensions = [{k: _float(v) for k, v in r.items()} for r in _rows(conn, ext_sql, scope)]
    deepest = _rows(conn, deep_sql, scope, n=DEEPEST_ROWS)
    for row in deepest:
        row["ended_at"] = row["ended_at"].isoformat()
    return {"extensions": extensions, "deepest": deepest}


def heatmaps(conn: Connection, scope: Scope) -> List[Dict[str, Any]]:
    """Figure 9: jobs and CPU-hours by size x run time and size x walltime, before/after.

    ``axis`` is ``runtime`` or ``walltime``; ``size`` and ``bucket`` index
    :data:`SIZE_LABELS` and :data:`TIME_LABELS`.
    """
    sql = (
        *_JOBS_CTE,
        """
    , b AS (
        SELECT after, coalesce(ncpus, 1) * runtime_s / 3600.0 AS cpu_h,
               width_bucket(coalesce(ncpus, 1), CAST(:sizes AS int[])) AS size,
               width_bucket(runtime_s, CAST(:times AS int[])) AS rt,
               width_bucket(walltime_s, CAST(:times AS int[])) AS wt
        FROM j
    )
    SELECT after, CASE WHEN GROUPING(rt) = 0 THEN 'runtime' ELSE 'walltime' END AS axis,
           size, coalesce(rt, wt) AS bucket, count(*) AS jobs, sum(cpu_h) AS cpu_hours
    FROM b GROUP BY GROUPING SETS ((after, size, rt), (after, size, wt))
    ORDER BY 1, 2, 3, 4
    """,
    )
    rows = _rows(conn, sql, scope, sizes=list(SIZE_THRESHOLDS), times=list(TIME_THRESHOLDS))
    return [{k: _float(v) for k, v in r.items()} for r in rows]


def queue_fit(conn: Connection, scope: Scope) -> List[Dict[str, Any]]:
    """Jobs after deployment whose soft walltime would fit a queue with a shorter limit.

    A queue's limit is the longest walltime of its jobs in the scope (PBS's
    ``resources_max.walltime`` is not in the history). The shorter queue is the one with the
    smallest such limit that is at least the soft walltime.
    """
    sql = (
        *_JOBS_CTE,
        """
    , lim AS (SELECT queue, max(walltime_s) AS limit_s FROM j
              WHERE queue IS NOT NULL GROUP BY queue)
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
        FROM j JOIN lim ON lim.queue = j.queue CROSS JOIN ladder
        WHERE j.after
    )
    SELECT queue, limit_s, count(*) AS jobs,
           count(*) FILTER (WHERE fit_limit < limit_s) AS fit_shorter,
           mode() WITHIN GROUP (ORDER BY fit_queue) FILTER (WHERE fit_limit < limit_s)
               AS usual_target
    FROM f GROUP BY queue, limit_s ORDER BY limit_s, queue
    """,
    )
    return _rows(conn, sql, scope)


def collect(conn: Connection, scope: Scope) -> Dict[str, Any]:
    """Every figure's numbers, in one consistent snapshot of the history."""
    data: Dict[str, Any] = {"totals": totals(conn, scope)}
    data["error_by_month_class"] = error_by_month_class(conn, scope)
    data["by_class"] = by_class(conn, scope)
    data["by_queue"] = by_queue(conn, scope)
    data["users"] = users(conn, scope)
    data["worst_users"] = worst_users(conn, scope)
    data["under_estimates"] = under_estimates(conn, scope)
    data["heatmaps"] = heatmaps(conn, scope)
    data["queue_fit"] = queue_fit(conn, scope)
    return data
