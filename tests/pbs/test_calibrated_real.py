"""The predictor ``calibrated`` inside the real OpenPBS server: keys from the real qsub,
the site table from the database, the value PBS shows."""

from __future__ import annotations

import pbsctl
import psycopg2
import sqlalchemy as sa

from softwalltime.core import calibrated as cal
from softwalltime.db import engine as db
from softwalltime.hook import lookup
from softwalltime.replay.calibrate import store_table
from softwalltime.units import parse_duration

H = 3600


def test_calibrated_uses_the_class_and_the_site_table(install, hook_db, jobs):
    # alice's newest jobs: three 10 h jobs on 1 cpu that ran 1 h (her seeded history
    # has a 10 h job that ran 2 h, and a 4 h job)
    conn = psycopg2.connect(hook_db)
    try:
        with conn, conn.cursor() as cur:
            for i in range(3):
                cur.execute(
                    "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username,"
                    " walltime_s, runtime_s, ncpus, ended_at)"
                    " VALUES ('seed', %s, to_timestamp(%s), %s, %s, %s, %s, 1,"
                    " now() - %s * interval '1 minute')",
                    (f"{100 + i}.seed", 100 + i, 100 + i, pbsctl.USER, 10 * H, H, 10 - i),
                )
    finally:
        conn.close()
    history = lookup.class_jobs(hook_db, pbsctl.USER, cal.HISTORY_ROWS, reuse=False)
    # a site table that has seen such jobs run 1 h: a tight rule wins over v3
    table = cal.Calibration()
    out = cal.outcome(10 * H, 1, history)
    for _ in range(cal.MIN_BIN_JOBS):
        table.update(out, H, 12.0)
    engine = db.make_engine(hook_db, poolclass=sa.pool.NullPool)
    with engine.begin() as c:
        store_table(c, table, 12.0)
    engine.dispose()
    expected = table.predict(10 * H, 1, history)
    assert expected.rule != cal.R_V3 and expected.soft_walltime_s < 2 * H

    install(dsn=hook_db, predictor="calibrated")
    pbsctl.reload_hook_modules(jobs)
    log = pbsctl.ServerLog()
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00 -l select=1:ncpus=1"))
    value = pbsctl.resource(jobs[1], "soft_walltime")
    assert value is not None, log.hook_lines("")
    assert parse_duration(value) == expected.soft_walltime_s
    (line,) = log.hook_lines("queuejob user='alice'")
    assert "calibrated soft_walltime=" in line and "walltime+ncpus class of 3 jobs" in line
