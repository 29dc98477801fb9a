"""Views for psql: soft-walltime accuracy per user, recent jobs predicted vs actual.

A frozen snapshot: the SQL is written out here and never imported from the package.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Both mean absolute errors are over the same jobs (soft walltime, walltime and run time all
# known), so the two columns compare like with like.
ACCURACY_BY_USER = """
CREATE VIEW soft_walltime_accuracy_by_user AS
SELECT
    username,
    count(*) AS finished_jobs,
    count(*) FILTER (WHERE compared) AS jobs_with_soft_walltime,
    round(100.0 * count(*) FILTER (WHERE compared AND soft_walltime_s < runtime_s)
          / NULLIF(count(*) FILTER (WHERE compared), 0), 1) AS underestimated_pct,
    round(100.0 * count(*) FILTER (WHERE compared AND soft_walltime_s < runtime_s - 1800)
          / NULLIF(count(*) FILTER (WHERE compared), 0), 1) AS badly_underestimated_pct,
    round(avg(abs(walltime_s - runtime_s)) FILTER (WHERE compared) / 3600.0, 2)
        AS walltime_mae_hours,
    round(avg(abs(soft_walltime_s - runtime_s)) FILTER (WHERE compared) / 3600.0, 2)
        AS soft_walltime_mae_hours,
    max(ended_at) AS last_job_ended_at
FROM (
    SELECT
        f.*,
        (f.soft_walltime_s IS NOT NULL AND f.walltime_s IS NOT NULL AND f.runtime_s IS NOT NULL)
            AS compared
    FROM finished_jobs f
) AS jobs
GROUP BY username
"""

ACCURACY_BY_USER_COMMENT = """
COMMENT ON VIEW soft_walltime_accuracy_by_user IS
'Per user: finished jobs; jobs_with_soft_walltime = jobs with soft walltime, walltime and run
time all known; of those: % with soft walltime < run time, % short by more than 30 min, and the
mean absolute error (hours) of the user''s walltime and of the soft walltime.'
"""

RECENT_JOBS = """
CREATE VIEW recent_jobs_predicted_vs_actual AS
SELECT
    job_id,
    username,
    queue,
    ended_at,
    make_interval(secs => walltime_s) AS requested_walltime,
    make_interval(secs => soft_walltime_s) AS soft_walltime,
    make_interval(secs => runtime_s) AS actual_runtime,
    make_interval(secs => soft_walltime_s - runtime_s) AS soft_minus_actual,
    soft_walltime_s < runtime_s AS underestimated,
    walltime_s,
    soft_walltime_s,
    runtime_s,
    server
FROM finished_jobs
ORDER BY ended_at DESC, job_seq DESC
"""

RECENT_JOBS_COMMENT = """
COMMENT ON VIEW recent_jobs_predicted_vs_actual IS
'Finished jobs, most recent end first: requested walltime, soft walltime and actual run time
side by side (intervals, plus the same in seconds). underestimated = soft walltime < run time.
Add LIMIT or a WHERE on ended_at.'
"""


def upgrade():
    op.execute(ACCURACY_BY_USER)
    op.execute(ACCURACY_BY_USER_COMMENT)
    op.execute(RECENT_JOBS)
    op.execute(RECENT_JOBS_COMMENT)


def downgrade():
    op.execute("DROP VIEW IF EXISTS recent_jobs_predicted_vs_actual")
    op.execute("DROP VIEW IF EXISTS soft_walltime_accuracy_by_user")
