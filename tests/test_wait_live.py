"""Live wait prediction from qstat's JSON (recorded shape, as test_refresh.py's) and
finished jobs: what PBS shows now becomes history with unknown starts and ends."""

from __future__ import annotations

from softwalltime.wait import live, pqstar
from softwalltime.wait.workload import WaitJob

NOW = 1_795_920_000

QSTAT = {
    "70.pbshost": {  # running since NOW - 500 on 4 of 16 processors: a large job
        "Job_Owner": "alice@pbshost", "euser": "alice", "job_state": "R", "queue": "workq",
        "ctime": NOW - 900, "stime": NOW - 500,
        "Resource_List": {"ncpus": 4, "walltime": "10:00:00", "soft_walltime": "02:00:00"},
    },
    "71.pbshost": {  # queued for 3000 s, 2 processors, walltime 01:00:00
        "Job_Owner": "bob@pbshost", "job_state": "Q", "queue": "workq", "ctime": NOW - 3000,
        "Resource_List": {"ncpus": 2, "walltime": "01:00:00"},
    },
    "72.pbshost": {  # held: neither queued for the scheduler nor running
        "Job_Owner": "bob@pbshost", "job_state": "H", "queue": "workq", "ctime": NOW - 100,
        "Resource_List": {"ncpus": 2, "walltime": "01:00:00"},
    },
    "73.pbshost": {"job_state": "R", "ctime": NOW - 50, "Resource_List": {"ncpus": 1}},
}  # fmt: skip


def test_jobs_from_qstat():
    rows, left = live.jobs_from_qstat(QSTAT)
    assert rows == [
        WaitJob(NOW - 3000, pqstar.UNKNOWN_S, pqstar.UNKNOWN_S, 2, 3600, "bob"),
        WaitJob(NOW - 900, NOW - 500, pqstar.UNKNOWN_S, 4, 36000, "alice"),
    ]
    assert left == {"state H": 1, "running without stime": 1}
    soft, _ = live.jobs_from_qstat(QSTAT, ert="soft")
    assert [r.ert_s for r in soft] == [3600, 7200]  # no soft walltime on 71: its walltime


def test_a_job_submitted_now():
    current, _ = live.jobs_from_qstat(QSTAT)
    finished = [
        WaitJob(NOW - 400, NOW - 390, NOW - 100, 1, 1800, "carol"),  # quick, 1 cpu, 30 min
        WaitJob(NOW - 300, NOW - 290, NOW + 100, 1, 1800, "carol"),  # ends later: not yet
    ]
    history = live.live_history(finished, current, NOW)
    assert [j.submit_s for j in history] == [NOW - 3000, NOW - 900, NOW - 400]
    # 1 cpu, 20 min: carol's job, submitted after the large job started, is similar and
    # started quickly, and the one similar queued job (bob's) is not: near-term, 1 h bound
    answer = pqstar.predict_one(history, WaitJob(NOW, 0, 0, 1, 1200, "dave"), 16)
    assert answer.rule == pqstar.NEAR and answer.predicted_s["pqstar"] == 3600
    # 2 cpus, 1 h: bob's similar job has been queued for 50 min (not yet > 1 h), and no
    # similar job has started: not marked
    answer = pqstar.predict_one(history, WaitJob(NOW, 0, 0, 2, 3600, "dave"), 16)
    assert answer.rule == pqstar.IBL


def test_finished_kept_bounds_the_history():
    finished = [
        WaitJob(NOW - 1000 + k, NOW - 999 + k, NOW - 900 + k, 1, 60, "u") for k in range(10)
    ]
    history = live.live_history(finished, [], NOW, finished_kept=3)
    assert [j.submit_s for j in history] == [NOW - 993, NOW - 992, NOW - 991]


def _fake_qstat(tmp_path, jobs):
    """A PBS_EXEC whose bin/qstat prints ``jobs`` as qstat -f -F json does."""
    import json
    import stat

    bindir = tmp_path / "pbs" / "bin"
    bindir.mkdir(parents=True)
    data = tmp_path / "qstat.json"
    data.write_text(json.dumps({"pbs_version": "23.06.06", "Jobs": jobs}))
    script = bindir / "qstat"
    script.write_text(f"#!/bin/sh\ncat '{data}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"pbs_exec": str(tmp_path / "pbs")}))
    return cfg


def _add_finished(dsn, rows):
    """rows: (user, ctime, start, end, ncpus, walltime_s), epoch seconds."""
    import datetime as dt

    import psycopg2

    def ts(s):
        return dt.datetime.fromtimestamp(s, dt.timezone.utc)

    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            for seq, (user, ctime, start, end, ncpus, wall) in enumerate(rows, 1):
                cur.execute(
                    "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username,"
                    " walltime_s, runtime_s, started_at, ended_at, ncpus)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    ("pbs01", f"{seq}.pbs01", ts(ctime), seq, user, wall, end - start,
                     ts(start), ts(end), ncpus),
                )  # fmt: skip
    finally:
        conn.close()


def test_wait_command_on_the_database_and_qstat(fresh_dsn, tmp_path, capsys):
    import json
    import time

    from softwalltime.cli import main

    now = int(time.time())
    jobs = {
        "70.pbs01": {"euser": "alice", "job_state": "R", "ctime": now - 900, "stime": now - 500,
                     "Resource_List": {"ncpus": 4, "walltime": "10:00:00"}},
        "71.pbs01": {"euser": "bob", "job_state": "Q", "ctime": now - 3000,
                     "Resource_List": {"ncpus": 2, "walltime": "01:00:00"}},
    }  # fmt: skip
    cfg = _fake_qstat(tmp_path, jobs)
    _add_finished(fresh_dsn, [("carol", now - 400, now - 390, now - 100, 1, 1800)])
    base = ["--dsn", fresh_dsn, "--config", str(cfg), "wait", "--machine-procs", "16"]
    assert main([*base, "--ncpus", "1", "--walltime", "00:20:00", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["quick_starter"] is True and out["decided_by"] == "near"
    assert out["predicted_wait_s"] == 3600
    assert (out["queued"], out["running"], out["finished_jobs"]) == (1, 1, 1)
    assert 95 <= out["database_newest_end_s_ago"] <= 160
    assert main([*base, "--ncpus", "2", "--walltime", "01:00:00"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("quick starter: no; predicted wait ")
    assert text[2].startswith("state: 1 queued, 1 running (qstat now); machine 16 processors")
    assert text[3].startswith("history: 1 finished jobs, the newest ended 00:0")
    assert text[3].endswith("ago (the database's lag)")


def test_wait_without_qstat_is_one_error_line(fresh_dsn, tmp_path, capsys):
    import json

    from softwalltime.cli import main

    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"pbs_exec": str(tmp_path / "nopbs")}))
    args = ["--dsn", fresh_dsn, "--config", str(cfg), "wait", "--ncpus", "1", "--walltime", "60"]
    assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("softwalltime: error: ") and "qstat" in err[0]
