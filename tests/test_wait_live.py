"""Live wait prediction from qstat's JSON (recorded shape, as test_refresh.py's) and
finished jobs: what PBS shows now becomes history with unknown starts and ends."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_users import as_nobody, need_root, public_dir

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


def test_qstat_prints_times_as_local_dates():
    """OpenPBS 23.06's qstat -f -F json (seen on the real server): "ctime":"Wed Nov 25
    11:57:14 2026". Read as epoch numbers only, every job was left out ("no ctime")."""
    import time

    text = time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(NOW))
    assert live.qstat_time(text) == NOW
    assert live.qstat_time(NOW) == NOW and live.qstat_time(str(NOW)) == NOW
    assert live.qstat_time("yesterday") is None and live.qstat_time(None) is None
    real = {
        "9.pbshost": {"euser": "alice", "job_state": "Q", "ctime": text,
                      "Resource_List": {"ncpus": 1, "walltime": "00:20:00"}},
    }  # fmt: skip
    rows, left = live.live_from_qstat(real)
    assert [(r.job_id, r.submit_s, r.queued) for r in rows] == [("9.pbshost", NOW, True)]
    assert left == {}


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


def _fake_qstat(tmp_path, jobs, sched=""):
    """A PBS_EXEC whose bin/qstat prints ``jobs`` as qstat -f -F json does, and whose
    bin/qmgr answers ``-c "list sched default"`` as the real one does: the set attributes
    (``sched``, "name = value" lines) under "Sched default", indented by four spaces."""
    import json
    import stat

    bindir = tmp_path / "pbs" / "bin"
    bindir.mkdir(parents=True)
    data = tmp_path / "qstat.json"
    data.write_text(json.dumps({"pbs_version": "23.06.06", "Jobs": jobs}))
    listing = tmp_path / "sched.txt"
    listing.write_text("Sched default\n" + "".join(f"    {ln}\n" for ln in sched.splitlines()))
    scripts = {
        "qstat": f"#!/bin/sh\ncat '{data}'\n",
        "qmgr": f'#!/bin/sh\n[ "$*" = "-c list sched default" ] || exit 1\ncat \'{listing}\'\n',
    }
    for name, text in scripts.items():
        script = bindir / name
        script.write_text(text)
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
    base += ["--source", "qstat"]
    assert main([*base, "--ncpus", "1", "--walltime", "00:20:00", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["quick_starter"] is True and out["decided_by"] == "near"
    assert out["predicted_wait_s"] == 3600
    assert (out["queued"], out["running"], out["finished_jobs"]) == (1, 1, 1)
    assert 95 <= out["database_newest_end_s_ago"] <= 160
    assert main([*base, "--ncpus", "2", "--walltime", "01:00:00"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("quick starter: no; predicted wait ")
    assert text[1].startswith("start time: in ") and "runs of the fcfs-bf1 scheduler" in text[1]
    assert text[2].startswith("PBS's method (every job runs its soft walltime): in ")
    assert text[4].startswith("state: 1 queued, 1 running (qstat now); machine 16 processors")
    assert text[5].startswith("history: 1 finished jobs; the database's newest record is 00:0")
    assert text[5].endswith("old (its lag)")


def test_wait_without_qstat_is_one_error_line(fresh_dsn, tmp_path, capsys):
    import json

    from softwalltime.cli import main

    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"pbs_exec": str(tmp_path / "nopbs")}))
    args = ["--dsn", fresh_dsn, "--config", str(cfg), "wait", "--ncpus", "1", "--walltime", "60"]
    assert main([*args, "--source", "qstat"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("softwalltime: error: ") and "qstat" in err[0]


# -- the queue from the database (live_jobs, kept by the ingester) -------------------------


def _ingest(dsn: str, path) -> None:
    from softwalltime.cli import main

    assert main(["--dsn", dsn, "ingest", "--no-progress", str(path)]) == 0


def test_wait_jobid_from_the_databases_live_jobs(fresh_dsn, tmp_path, capsys):
    """A 2-processor machine: job 1 holds both, alice's job 2 (1 cpu, 20 min) queued behind
    it. Carol's similar job started at once after the node's large job started: near-term
    history marks job 2 a quick starter. No PBS command runs: everything is in the database."""
    import json
    import time

    from helpers_live import e_line, q_line, s_line

    from softwalltime.cli import main

    now = int(time.time())
    log = tmp_path / "20261125"
    log.write_text(
        q_line(1, now - 700, user="bob", ncpus=2, walltime="10:00:00")
        + s_line(1, now - 700, now - 650, user="bob", ncpus=2, walltime="10:00:00")
        + q_line(3, now - 600, user="carol", walltime="00:30:00")
        + s_line(3, now - 600, now - 590, user="carol", walltime="00:30:00")
        + e_line(3, now - 600, now - 590, now - 400, user="carol", walltime="00:30:00")
        + q_line(2, now - 300, walltime="00:20:00")
    )
    _ingest(fresh_dsn, log)
    capsys.readouterr()
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"pbs_exec": str(tmp_path / "nopbs")}))  # qstat is never run
    base = ["--dsn", fresh_dsn, "--config", str(cfg), "wait", "--machine-procs", "2"]
    assert main([*base, "2.pbshost", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["job_id"], out["user"], out["ncpus"]) == ("2.pbshost", "alice", 1)
    assert out["quick_starter"] is True and out["decided_by"] == "near"
    assert out["predicted_wait_s"] == 3600 and out["source"] == "database"
    assert (out["queued"], out["running"], out["finished_jobs"]) == (1, 1, 1)
    assert 300 <= out["queued_for_s"] <= 360
    assert 300 <= out["database_lag_s"] <= 360  # the newest record: job 2's Q
    assert out["starts_by_s"] - int(time.time()) in range(3500, 3601)
    # The start time (issue 35): job 2 waits for bob's job. PBS's method: bob's job runs
    # its whole walltime (no soft walltime), 10 h from its start at now - 650. The forward
    # runs: bob has no finished job, so his run time is the site's ratio (carol's 190 s of
    # 1800 s) x his 10 h = 3800 s from his start, in every run: P50 = P90.
    start = out["start"]
    assert (start["policy"], start["samples"]) == ("fcfs-bf1", 9)
    assert start["pbs_method_s"] - now == 36_000 - 650
    assert start["p50_s"] - now == start["p90_s"] - now == 3800 - 650

    assert main([*base, "2"]) == 0  # the number alone names it too
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("job 2.pbshost (alice, 1 processors): queued for 00:0")
    assert text[1] == "quick starter: yes, starts within 01:00:00 (near-term history)"
    assert text[2].startswith("start time: in 00:52:") and "(P50), by 00:52:" in text[2]
    assert text[3].startswith("PBS's method (every job runs its soft walltime): in 09:49:")
    assert text[5].startswith("state: 1 queued, 1 running (database); machine 2 processors")
    assert text[6].startswith("history: 1 finished jobs; the database's newest record is 00:0")


@pytest.mark.parametrize(
    "args, message",
    [
        (["1.pbshost"], "job 1.pbshost is running (started 00:"),
        (["3.pbshost"], "job 3.pbshost is not queued in the database's live jobs (finished,"),
        (["9"], "job 9 is not queued in the database's live jobs"),
        ([], "give a queued JOBID, or --ncpus and --walltime of a job not submitted"),
        (["2", "--ncpus", "1"], "give a JOBID or --ncpus and --walltime"),
        (["--ncpus", "1", "--walltime", "60", "--dry-run"], "--dry-run goes with --publish"),
        (["2", "--publish"], "--publish predicts every queued job: no JOBID"),
    ],
)
def test_wait_refuses_in_one_line(fresh_dsn, tmp_path, capsys, args, message):
    import time

    from helpers_live import e_line, q_line, s_line

    from softwalltime.cli import main

    now = int(time.time())
    log = tmp_path / "20261125"
    log.write_text(
        s_line(1, now - 700, now - 650, ncpus=2)
        + q_line(2, now - 300)
        + e_line(3, now - 600, now - 590, now - 400)
    )
    _ingest(fresh_dsn, log)
    capsys.readouterr()
    assert main(["--dsn", fresh_dsn, "wait", *args]) in (1, 2)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_published_values_read_back_and_change_only_when_the_answer_does():
    from softwalltime.pbsserver import publish

    now = 1_795_920_000
    quick = publish.value(True, now + 3600)
    assert quick.startswith("quick_starter:by_20") and " " not in quick and "," not in quick
    assert publish.parse_value(quick) == (True, now + 3600 - (now + 3600) % 60)
    later = publish.value(False, now + 5 * 3600)
    assert later.startswith("predicted:about_") and publish.parse_value(later)[0] is False
    assert publish.parse_value("something a manager set") is None
    # unset, or a value not ours: set it
    assert publish.needs_update(None, True, now + 3600, now)
    assert publish.needs_update("x", True, now + 3600, now)
    # a quick starter's promise holds while PQStar still marks it, until it expires
    assert not publish.needs_update(quick, True, now + 4000, now + 400)
    assert publish.needs_update(quick, True, now + 7300, now + 3700)
    assert publish.needs_update(quick, False, now + 9000, now + 60)  # no longer quick
    # a predicted start moves by more than max(15 min, 10 % of the time to it)
    assert not publish.needs_update(later, False, now + 5 * 3600 + 600, now)
    assert publish.needs_update(later, False, now + 5 * 3600 + 1900, now)
    assert publish.needs_update(later, True, now + 3600, now)
    # the value names a minute: a start within the current minute is not expired by the
    # seconds the minute has run (each run would alter it again), only once it has ended
    minute = now - now % 60
    soon = publish.value(False, minute + 40)
    assert not publish.needs_update(soon, False, minute + 40, minute + 50)
    assert not publish.needs_update(soon, False, minute + 59, minute + 59)
    assert publish.needs_update(soon, False, minute + 70, minute + 60)


def test_wait_jobid_from_qstat_shows_pbss_own_estimate(fresh_dsn, tmp_path, capsys):
    """--source qstat: the job's estimated.start_time (the scheduler's plan, as the real
    server prints it with strict_ordering on) next to the prediction."""
    import json
    import time

    from softwalltime.cli import main

    now = int(time.time())

    def date(epoch: int) -> str:
        return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(epoch))

    jobs = {
        "80.pbs01": {"euser": "bob", "job_state": "R", "ctime": date(now - 900),
                     "stime": date(now - 500), "Resource_List": {"ncpus": 2,
                     "walltime": "00:10:00"}},
        "81.pbs01": {"euser": "alice", "job_state": "Q", "ctime": date(now - 100),
                     "Resource_List": {"ncpus": 1, "walltime": "00:20:00"},
                     "estimated": {"exec_vnode": "(pbshost:ncpus=1)",
                                   "start_time": date(now + 100)}},
    }  # fmt: skip
    cfg = _fake_qstat(tmp_path, jobs)
    base = ["--dsn", fresh_dsn, "--config", str(cfg), "wait", "--source", "qstat", "81.pbs01"]
    assert main([*base, "--machine-procs", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pbs_estimated_start_s"] == now + 100
    assert out["job_id"] == "81.pbs01" and 90 <= out["queued_for_s"] <= 160
    assert main([*base, "--machine-procs", "2"]) == 0
    text = capsys.readouterr().out
    assert "PBS's own estimate (estimated.start_time, qstat -T): in 00:01:" in text
    assert "(qstat now)" in text


def test_the_start_time_takes_the_schedulers_opt_backfill_fuzzy(fresh_dsn, tmp_path, capsys):
    """PBS searches a top job's start in windows of opt_backfill_fuzzy (pbsched.Policy).
    5 cpus; two 2-cpu jobs run until 100 s and 200 s past the next hour H; the top job
    (queued, 3 cpus) fits after the first end. A window of an hour (high) reserves it at
    the second end, so the new 1-cpu job, ending at H + 150 s, backfills now; a window of a
    second (off) reserves it at the first, and the new job waits until H + 200 s. wait
    reads the scheduler's value with qmgr when it reads qstat; --backfill-fuzzy overrides."""
    import json
    import time

    from softwalltime.cli import main
    from softwalltime.units import format_duration

    now = int(time.time())
    hour = (now // 3600 + 1) * 3600  # both ends in one window of an hour on the epoch clock
    jobs = {
        f"{90 + k}.pbs01": {"euser": "bob", "job_state": "R", "ctime": now - 900,
                            "stime": now - 500, "Resource_List": {"ncpus": 2,
                            "walltime": format_duration(hour + end - (now - 500))}}
        for k, end in enumerate((100, 200))
    }  # fmt: skip
    jobs["92.pbs01"] = {"euser": "carol", "job_state": "Q", "ctime": now - 300,
                        "Resource_List": {"ncpus": 3, "walltime": "01:00:00"}}  # fmt: skip
    cfg = _fake_qstat(tmp_path, jobs, sched="opt_backfill_fuzzy = high")
    base = ["--dsn", fresh_dsn, "--config", str(cfg), "wait", "--source", "qstat", "--json"]
    base += [
        "--machine-procs",
        "5",
        "--ncpus",
        "1",
        "--walltime",
        format_duration(hour + 150 - now),
    ]

    def start(*extra: str) -> dict:
        assert main([*base, *extra]) == 0
        return json.loads(capsys.readouterr().out)["start"]

    site = start()
    assert (site["backfill_fuzzy_s"], site["backfill_fuzzy_from"]) == (3600, "the scheduler's")
    assert site["pbs_method_s"] <= now + 30  # backfilled: starts now
    given = start("--backfill-fuzzy", "off")
    assert (given["backfill_fuzzy_s"], given["backfill_fuzzy_from"]) == (0, "--backfill-fuzzy")
    assert given["pbs_method_s"] == hour + 200


def test_wait_refuses_a_fuzzy_value_pbs_does_not_take(fresh_dsn, tmp_path, capsys):
    from softwalltime.cli import main

    cfg = _fake_qstat(tmp_path, {}, sched="opt_backfill_fuzzy = sometimes")
    args = ["--dsn", fresh_dsn, "--config", str(cfg), "wait", "--source", "qstat"]
    assert main([*args, "--ncpus", "1", "--walltime", "1:00:00"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "opt_backfill_fuzzy 'sometimes'" in err[0], err
    assert "give --backfill-fuzzy" in err[0]
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--ncpus", "1", "--walltime", "1:00:00", "--backfill-fuzzy", "x"])
    assert exit_.value.code == 2
    assert "expected off, low, medium, high or seconds" in capsys.readouterr().err


def test_publish_alters_only_what_changed_and_stops_at_its_time_budget():
    from softwalltime.pbsserver import publish
    from softwalltime.pbsserver.commands import Pbs

    now = 1_795_920_000
    nopbs = Pbs(exec_dir="/nonexistent")  # a dry run runs no PBS command
    kept = publish.value(True, now + 1800)
    queued = [("1.s", None), ("2.s", kept), ("3.s", "set by hand")]
    asked = []

    def predict(job_id):
        asked.append(job_id)
        return True, now + 3600

    summary = publish.publish(nopbs, queued, predict, now, dry_run=True)
    assert (summary.seen, summary.changed, summary.unchanged, summary.errors) == (3, 2, 1, 0)
    assert asked == ["1.s", "2.s", "3.s"]
    assert summary.lines == [
        f"1.s: unset -> {publish.value(True, now + 3600)}",
        f"3.s: set by hand -> {publish.value(True, now + 3600)}",
    ]
    assert summary.line().startswith("publish: 3 queued jobs, 2 would change, 1 unchanged")
    late = publish.publish(nopbs, queued, predict, now, dry_run=True, time_budget_s=-1)
    assert (late.skipped, late.changed, late.unchanged) == (3, 0, 0)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--history", "1000001", "5"], "--history: at most 1,000,000 jobs, got 1,000,001"),
        (["--publish", "--time-budget", "2:00:00"], "at most 3,600 seconds, got 7,200"),
        (["--ncpus", "100000001", "--walltime", "60"], "at most 100,000,000 processors"),
        # issue 32: every number and duration of wait and eval-wait is bounded
        (["--ncpus", "1", "--walltime", "999999999:00:00"], "--walltime: at most 316,224,000"),
        (["--ncpus", "1", "--walltime", "nan"], "--walltime: not a duration: 'nan'"),
        (["--ncpus", "1", "--walltime=-1:00:00"], "--walltime: must be positive"),
        (["--ncpus", "-1", "--walltime", "60"], "--ncpus: must be at least 1, got -1"),
        (["--quick", "9999:00:00", "5"], "--quick: at most 31,622,400 seconds, got 35,996,400"),
        (["--quick", "inf", "5"], "--quick: not a duration: 'inf'"),
        (["--machine-procs", "nan", "5"], "--machine-procs: expected a whole number, got 'nan'"),
        (["--max-lag", "0", "5"], "--max-lag: must be positive: '0'"),
        (["--warn-lag", "99999:00:00", "5"], "--warn-lag: at most 31,622,400 seconds"),
        (["--history", "-5", "5"], "--history: must be at least 1, got -5"),
        (["--publish", "--time-budget", "nan"], "--time-budget: not a duration: 'nan'"),
    ],
)
def test_what_a_user_chooses_is_capped(capsys, args, message):
    from softwalltime.cli import main

    with pytest.raises(SystemExit) as stop:  # argparse's own exit
        main(["wait", *args])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and err[-1].startswith("softwalltime wait: error: argument")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--quick", "99999:00:00"], "--quick: at most 31,622,400 seconds, got 359,996,400"),
        (["--quick", "nan"], "--quick: not a duration: 'nan'"),
        (["--first", "10000000000"], "--first: at most 1,000,000,000 jobs"),
        (["--targets", "-3"], "--targets: must be at least 1, got -3"),
        (["--targets", "nan"], "--targets: expected a whole number, got 'nan'"),
        (["--machine-procs", "100000001"], "--machine-procs: at most 100,000,000 processors"),
    ],
)
def test_what_eval_wait_is_given_is_capped(capsys, args, message):
    from softwalltime.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["eval-wait", "trace.swf", *args])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and err[-1].startswith("softwalltime eval-wait: error: argument")


# -- a stale database (issue 32): its lag said, a warning past --warn-lag, a refusal past
# --max-lag -------------------------------------------------------------------------------


def test_wait_says_how_stale_the_database_is_and_refuses_past_max_lag(fresh_dsn, tmp_path, capsys):
    """The issue's case: the history's newest record 123 h old. wait answered "quick
    starter: yes" without a word; now it refuses, and with a --max-lag above the lag it
    answers with a warning line on stderr and the lag in its JSON."""
    import json
    import time

    from softwalltime.cli import main

    now = int(time.time())
    h = 3600
    _add_finished(fresh_dsn, [("carol", now - 124 * h, now - 124 * h, now - 123 * h, 1, 7200)])
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"pbs_exec": str(tmp_path / "nopbs")}))
    base = ["--dsn", fresh_dsn, "--config", str(cfg), "wait", "--machine-procs", "16"]
    base += ["--ncpus", "1", "--walltime", "00:20:00"]
    assert main(base) == 1
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1, err
    assert err[0].startswith("softwalltime: error: the database's newest record is 123:0")
    assert "more than --max-lag 24:00:00: its answer would be stale" in err[0]

    assert main([*base, "--max-lag", "200:00:00", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert 123 * h <= out["database_lag_s"] <= 123 * h + 60 and out["database_stale"] is True
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("softwalltime wait: warning: the database's")
    assert "(more than --warn-lag 01:00:00): the answer may be stale" in err[0]

    # a lag under --warn-lag: no warning
    assert main([*base, "--warn-lag", "130:00:00", "--max-lag", "200:00:00", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and json.loads(captured.out)["database_stale"] is False


def test_publish_gives_a_job_pqstar_leaves_its_start_times_p50(fresh_dsn, tmp_path, capsys):
    """A 6-processor machine: alice's 4-processor job runs (10 h walltime, started 500 s
    ago), bob's 4-processor job waits for it. PQStar does not mark bob's job, so --publish
    gives it the start time's P50: alice has no finished job, so her run time is the site's
    ratio (carol's 290 s of 1800 s) x 10 h = 5800 s from her start, in every forward run."""
    import time

    from softwalltime.cli import main
    from softwalltime.pbsserver import publish

    now = int(time.time())
    jobs = {
        "70.pbs01": {"euser": "alice", "job_state": "R", "ctime": now - 900, "stime": now - 500,
                     "Resource_List": {"ncpus": 4, "walltime": "10:00:00"}},
        "71.pbs01": {"euser": "bob", "job_state": "Q", "ctime": now - 3000,
                     "Resource_List": {"ncpus": 4, "walltime": "01:00:00"}},
    }  # fmt: skip
    cfg = _fake_qstat(tmp_path, jobs)
    _add_finished(fresh_dsn, [("carol", now - 400, now - 390, now - 100, 1, 1800)])
    args = ["--dsn", fresh_dsn, "--config", str(cfg), "wait", "--machine-procs", "6"]
    assert main([*args, "--publish", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"71.pbs01: unset -> {publish.value(False, now - 500 + 5800)}"


def _queued_job(now: int, **extra) -> dict:
    import time

    def date(epoch: int) -> str:
        return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(epoch))

    job = {"euser": "alice", "job_state": "Q", "ctime": date(now - 300), "qtime": date(now - 240),
           "Resource_List": {"ncpus": 1, "walltime": "00:20:00"}}  # fmt: skip
    job.update(extra)
    return job


def test_wait_with_no_database_answers_from_the_job(tmp_path, capsys, monkeypatch):
    """Issue 50: a user with no database (no config, or one they may not read) gets the
    start ``wait --publish`` put on the job and the scheduler's estimate, from their qstat."""
    import json
    import time

    from softwalltime.cli import main
    from softwalltime.pbsserver import publish

    monkeypatch.delenv("SOFTWALLTIME_DSN", raising=False)
    now = int(time.time())
    by = now + 3600 - (now + 3600) % 60
    jobs = {
        "81.pbs01": _queued_job(now, Resource_List={"ncpus": 1, "walltime": "00:20:00",
                                publish.RESOURCE: publish.value(True, by)}),
        "82.pbs01": _queued_job(now),  # nothing published, no estimate
        "83.pbs01": _queued_job(now, job_state="R"),
    }  # fmt: skip
    cfg = _fake_qstat(tmp_path, jobs)
    base = ["--config", str(cfg), "wait"]
    assert main([*base, "81", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["job_id"] == "81.pbs01" and out["source"] == "job"
    assert (out["quick_starter"], out["starts_by_s"]) == (True, by)
    assert 200 <= out["queued_for_s"] <= 300 and out["pbs_estimated_start_s"] is None
    assert main([*base, "81.pbs01"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("job 81.pbs01 (alice): queued for 00:0")
    assert text[1].startswith("softwalltime: quick starter, starts by ") and "(in 00:5" in text[1]
    assert text[2] == (
        "PBS's own estimate (estimated.start_time): none (the scheduler plans only the jobs"
        " it must)"
    )
    # nothing to say is a failure, in one line that says why
    assert main([*base, "82.pbs01"]) == 1
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "no start time on job 82.pbs01 yet" in err[0], err
    assert "softwalltime: nothing published on the job yet" in captured.out
    assert main([*base, "83.pbs01"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "job 83.pbs01 is not queued (state R)" in err[0], err


def test_wait_as_a_user_who_may_not_read_the_config_file(tmp_path, capsys):
    """The config file with the database's password is root's (0600): an ordinary user's
    ``wait JOBID`` leaves it out and answers from the job, and prints no secret; any other
    command still says the file cannot be read."""
    import json
    import os
    import shutil
    import time

    from softwalltime.cli import main

    need_root()
    now = int(time.time())
    jobs = {"81.pbs01": _queued_job(now, estimated={"start_time": now + 120})}
    public = Path(public_dir("swt-wait-user-"))
    try:
        public.chmod(0o755)
        cfg = _fake_qstat(public, jobs)
        for path in public.rglob("*"):
            path.chmod(0o755 if path.is_dir() or path.parent.name == "bin" else 0o644)
        assert main(["--config", str(cfg), "wait", "81.pbs01"]) == 0  # as root: no dsn
        capsys.readouterr()
        secret = json.loads(cfg.read_text())
        secret["dsn"] = "postgresql://swt:s3cret-pw@db.example/swt"
        cfg.write_text(json.dumps(secret))
        cfg.chmod(0o600)  # root's, as the package installs it
        # the file is left out whole: the user's PBS commands are named by the environment
        env = {"PATH": os.environ["PATH"], "SOFTWALLTIME_CONFIG": str(cfg), "LANG": "C.UTF-8"}
        env["SOFTWALLTIME_PBS_EXEC"] = str(public / "pbs")
        code, out, err = as_nobody(lambda: main(["wait", "81.pbs01"]), env)
        assert code == 0, err
        assert out.startswith("job 81.pbs01 (alice): queued for 00:0"), out
        assert "PBS's own estimate (estimated.start_time): " in out and "(in 00:0" in out
        code, out, err = as_nobody(
            lambda: main(["predict", "--user", "x", "--walltime", "60"]), env
        )
        assert code != 0 and "cannot read configuration file" in err, (code, out, err)
        assert all("s3cret" not in text for text in (out, err))
    finally:
        shutil.rmtree(public)


def test_wait_site_holds_running_jobs_on_their_exec_vnode(fresh_dsn, tmp_path, capsys):
    """--site: the start time on the site's vnodes (issue 46). A 2-cpu chunk runs on each of
    two 4-cpu vnodes (its exec_vnode; first fit would put both on n0): the pool of 8 has 4
    free for the queued 3-cpu chunk, no vnode does until the running job ends (at the
    latest its walltime, 100 s from now)."""
    import json
    import time

    from softwalltime import site_file as sf
    from softwalltime.cli import main

    now = int(time.time())

    def date(epoch: int) -> str:
        return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(epoch))

    jobs = {
        "90.pbs01": {"euser": "bob", "job_state": "R", "queue": "workq", "ctime": date(now - 900),
                     "stime": date(now - 500), "exec_vnode": "(n0:ncpus=2)+(n1:ncpus=2)",
                     "Resource_List": {"ncpus": 4, "select": "2:ncpus=2", "place": "free",
                                       "walltime": "00:10:00"}},
        "91.pbs01": {"euser": "alice", "job_state": "Q", "queue": "workq",
                     "ctime": date(now - 100), "Resource_List": {"ncpus": 3,
                     "select": "1:ncpus=3", "place": "pack", "walltime": "00:20:00"}},
    }  # fmt: skip
    site = tmp_path / "site.json"
    vnodes = (sf.Vnode("n0", "n0", 4), sf.Vnode("n1", "n1", 4))
    site.write_text(sf.dump(sf.Site("two", vnodes, (sf.Queue("workq"),), "workq")))
    cfg = _fake_qstat(tmp_path, jobs)
    base = ["--dsn", fresh_dsn, "--config", str(cfg), "wait", "--source", "qstat", "91.pbs01"]
    assert main([*base, "--machine-procs", "8", "--json"]) == 0
    pool = json.loads(capsys.readouterr().out)
    assert main([*base, "--site", str(site), "--json"]) == 0
    out, err = capsys.readouterr()
    nodes = json.loads(out)
    assert err.startswith("site two: 2 vnodes, 1 queues, modelled as a site model")
    assert "model" not in pool["start"] and nodes["start"]["model"].startswith("site model: 2")
    asked = pool["starts_by_s"] - pool["predicted_wait_s"]  # the snapshot's now
    assert pool["start"]["p50_s"] == pool["start"]["pbs_method_s"] == asked
    begun = nodes["starts_by_s"] - nodes["predicted_wait_s"]
    assert begun < nodes["start"]["p50_s"] <= nodes["start"]["p90_s"] <= now - 500 + 600 + 5
    assert nodes["start"]["site_left"] == {}
    assert main([*base, "--site", str(site)]) == 0
    assert (
        "start time on the site model: 2 vnodes, 1 queues (two, 8 cpus)\n"
        in capsys.readouterr().out
    )
