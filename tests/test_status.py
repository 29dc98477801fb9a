# ruff: noqa: E501
"""``softwalltime status`` without PBS: log parsing and judgements on recorded inputs,
the output formats, and the database checks against the real test PostgreSQL.
(The real server: tests/pbs/test_status_real.py.)"""

from __future__ import annotations

import datetime as dt
import json
import os
import time

from softwalltime.hookpath import pgwire
from softwalltime.pbsserver import status as s

# Recorded from the real OpenPBS 23.06 server log (server_logs/YYYYMMDD), paths shortened.
LOG = """\
11/23/2026 02:39:54;0080;Server@pbshost;Hook;Server@pbshost;softwalltime: queuejob user='alice' queue='' walltime=36000 s: set v3 soft_walltime=9900 s (max runtime/walltime 0.2500 over 2 jobs; history) [0.9 ms]
11/23/2026 02:39:55;0080;Server@pbshost;Hook;Server@pbshost;softwalltime: modifyjob user='alice' queue='workq' walltime=72000 s: set v3 soft_walltime=36900 s (max runtime/walltime 0.5000 over 3 jobs; history) [1.2 ms]
11/23/2026 02:39:56;0080;Server@pbshost;Hook;Server@pbshost;softwalltime: runjob user='alice' queue='workq' walltime=43200 s: leave alone: soft_walltime already set to 18000 s [0.4 ms]
11/23/2026 02:39:57;0080;Server@pbshost;Hook;Server@pbshost;softwalltime: queuejob user='alice' queue='workq' walltime=36000 s: leave alone: user in the deny list [29.1 ms]
11/23/2026 02:39:58;0080;Server@pbshost;Hook;Server@pbshost;softwalltime: runjob user='alice' queue='workq' walltime=600 s: leave alone: v3 soft_walltime=600 s (max runtime/walltime 0.2500 over 2 jobs; history): unchanged [0.3 ms]
11/23/2026 02:39:59;0080;Server@pbshost;Hook;Server@pbshost;softwalltime: queuejob user='alice' queue='' walltime=36000 s: dry run, would set v3 soft_walltime=9900 s (max runtime/walltime 0.2500 over 2 jobs; history) [1.0 ms]
11/23/2026 02:40:00;0006;Server@pbshost;Hook;Server@pbshost;softwalltime: job left unchanged after 1001 ms: DatabaseError: cannot connect to postgresql://hook@/softwalltime?port=5432&host=/tmp/nodb: socket /tmp/nodb/.s.PGSQL.5432: No such file or directory
11/23/2026 02:40:01;0080;Server@pbshost;Hook;Server@pbshost;softwalltime: connected to postgresql://postgres@/hook?port=37901&host=/tmp/x in 3.1 ms
11/23/2026 02:40:02;0004;Server@pbshost;Hook;softwalltime_test;deleted at request of root@pbshost
11/23/2026 01:10:00;0006;Server@pbshost;Hook;Server@pbshost;softwalltime: job left unchanged after 0 ms: ImportError: cannot import name 'lookup' from 'softwalltime.hookpath' (check sys_path in the hook config)
"""

SINCE = dt.datetime(2026, 11, 23, 1, 40)


def test_hook_log_counts_by_outcome_and_reason():
    activity = s.parse_hook_log(LOG.splitlines(), SINCE)
    assert activity.set == 2 and activity.dry_run == 1
    assert dict(activity.left_alone) == {
        "soft_walltime set by a manager": 1,
        "user or queue lists": 1,
        "same value": 1,
    }
    # the ImportError at 01:10 is before the window
    assert dict(activity.failures) == {"DatabaseError": 1}
    assert activity.events == 7
    everything = s.parse_hook_log(LOG.splitlines(), dt.datetime(2026, 11, 23))
    assert dict(everything.failures) == {"DatabaseError": 1, "ImportError": 1}


def test_activity_any_failure_warns_a_high_rate_is_critical():
    activity = s.parse_hook_log(LOG.splitlines(), SINCE)
    assert s.judge_activity(activity, 3600, 50.0).state == s.WARNING  # 1 of 7 = 14 %
    check = s.judge_activity(activity, 3600, 10.0)
    assert check.state == s.CRITICAL
    assert check.summary.startswith("last hour: 2 set, 3 left alone (")
    assert (
        "1 failures (14.3 %; first: job left unchanged after 1001 ms: DatabaseError"
        in check.summary
    )
    quiet = s.parse_hook_log(LOG.splitlines()[:3], SINCE)
    assert s.judge_activity(quiet, 3600, 5.0).state == s.OK
    assert s.judge_activity(s.Activity(), 1800, 5.0).summary == (
        "last 30 min: 0 set, 0 left alone, 0 failures"
    )


def test_log_files_cover_the_window(tmp_path):
    for name in ("20261122", "20261123", "20261124"):
        (tmp_path / name).write_text("")
    files = s.log_files(
        tmp_path, dt.datetime(2026, 11, 22, 23, 30), dt.datetime(2026, 11, 23, 0, 30)
    )
    assert [f.name for f in files] == ["20261122", "20261123"]


LISTING = {
    "type": "site",
    "enabled": "true",
    "event": "queuejob,modifyjob,runjob",
    "order": "1",
    "alarm": "30",
}


def test_hook_judgement():
    assert s.judge_hook("softwalltime", LISTING).state == s.OK
    assert "enabled, events queuejob,modifyjob,runjob, order 1, alarm 30 s" in (
        s.judge_hook("softwalltime", LISTING).summary
    )
    assert s.judge_hook("softwalltime", {**LISTING, "enabled": "false"}).state == s.CRITICAL
    assert s.judge_hook("softwalltime", {**LISTING, "event": "queuejob,runjob"}).state == (
        s.WARNING
    )
    assert s.judge_hook("softwalltime", {**LISTING, "event": "modifyjob"}).state == s.CRITICAL
    assert s.judge_hook("softwalltime", {}).summary == "hook 'softwalltime' is not installed"


def test_hook_config_judgement():
    ok, settings = s.judge_hook_config(json.dumps({"dsn": "postgresql://u:secret@/db?host=/x"}))
    assert ok.state == s.OK and "secret" not in ok.summary and settings is not None
    dry, _ = s.judge_hook_config(json.dumps({"dsn": "host=/x", "dry_run": True}))
    assert dry.state == s.WARNING
    bad, none = s.judge_hook_config(json.dumps({"dsn": "host=/x", "predictor": "v9"}))
    assert bad.state == s.CRITICAL and none is None
    assert bad.summary.startswith("hook config: key 'predictor'")
    assert s.judge_hook_config("{")[0].state == s.CRITICAL


def test_embedded_python_from_ldd():
    ldd = "\tlibpython3.11.so.1.0 => /lib/x86_64-linux-gnu/libpython3.11.so.1.0 (0x00007f)\n"
    assert s.embedded_python(ldd) == "/usr/bin/python3.11"
    assert s.embedded_python("\tlibc.so.6 => /lib/libc.so.6\n") is None


def test_ingester_judgement():
    base = s.IngestState("/acct/20261123", 1000, 1000, 0, 7200.0, None)
    assert s.judge_ingester(base, 3600).state == s.OK  # nothing new: an old checkpoint is fine
    behind = s.IngestState("/acct/20261123", 5000, 1000, 12, 7200.0, None)
    check = s.judge_ingester(behind, 3600)
    assert check.state == s.WARNING
    assert check.summary == (
        "20261123: 4000 bytes / 12 records behind; last checkpoint 2.0 h ago (behind)"
    )
    recent = s.IngestState("/acct/20261123", 5000, 1000, 12, 60.0, None)
    assert s.judge_ingester(recent, 3600).state == s.OK  # behind, but it ran a minute ago
    running = s.IngestState("/acct/20261123", 5000, 1000, 12, 7200.0, "pid 7 (x@local, y, 3 s)")
    assert s.judge_ingester(running, 3600).state == s.OK
    never = s.IngestState("/acct/20261123", 5000, None, 40, None, None)
    assert "last checkpoint never" in s.judge_ingester(never, 3600).summary


def test_ingest_state_reads_checkpoints_and_the_lock(migrated_dsn, tmp_path, conn):
    acct = tmp_path / "accounting"
    acct.mkdir()
    (acct / "20261122").write_text("old\n")
    newest = acct / "20261123"
    newest.write_text("a\nb\nc\nd\n")
    deadline = time.monotonic() + 10
    pg = pgwire.connect(migrated_dsn, deadline)
    holder = pgwire.connect(migrated_dsn, deadline)
    try:
        pg.query(
            "INSERT INTO ingest_checkpoints (path, fingerprint, byte_offset, line_number,"
            " updated_at) VALUES ($1, 'x', 4, 2, now() - interval '2 hours')",
            (str(newest),),
            deadline,
        )
        state = s.ingest_state(pg, str(acct), deadline)
        assert (state.newest_file, state.size, state.offset, state.lag_records) == (
            str(newest),
            8,
            4,
            2,
        )
        assert 7100 < (state.last_update_age_s or 0) < 7300 and state.lock_holder is None
        holder.query("SELECT pg_advisory_lock($1)", (s.INGEST_LOCK_KEY,), deadline)
        locked = s.ingest_state(pg, str(acct), deadline)
        assert locked.lock_holder is not None and locked.lock_holder.startswith("pid ")
    finally:
        pg.query("DELETE FROM ingest_checkpoints", (), deadline)
        holder.close()
        pg.close()


def test_history_judgement():
    now = 1_800_000_000.0
    check = s.judge_history([("pbs01", 120, now - 600)], (10, 20.0, 3.5, 1.25), now)
    assert check.state == s.OK
    assert check.summary == (
        "pbs01 120 rows, newest 10 min ago; "
        "last 24 h: 10 jobs, 20.0 % under, MAE 1.25 h (walltime 3.50 h)"
    )
    empty = s.judge_history([], (0, None, None, None), now)
    assert empty.state == s.WARNING and "no job with a soft walltime" in empty.summary


def test_outputs():
    checks = [
        s.Check("hook", s.OK, "fine", [s.Metric("softwalltime_hook_enabled", 1, "enabled")]),
        s.Check(
            "activity",
            s.WARNING,
            "1 failure",
            [s.Metric("softwalltime_hook_left_alone_total", 2, "left", {"reason": 'a "b"'})],
        ),
    ]
    assert s.overall(checks) == s.WARNING
    table = s.render_table(checks, color=False)
    assert table.splitlines() == [
        "hook      OK       fine",
        "activity  WARNING  1 failure",
        "softwalltime status: WARNING",
    ]
    assert "\033[33mWARNING " in s.render_table(checks, color=True)
    data = json.loads(s.render_json(checks))
    assert data["status"] == "WARNING" and data["exit_code"] == 1
    assert data["checks"][1]["metrics"] == {'softwalltime_hook_left_alone_total{reason="a "b""}': 2}
    prom = s.render_prometheus(checks)
    assert "softwalltime_status 1\n" in prom
    assert 'softwalltime_check_state{check="activity"} 1\n' in prom
    assert 'softwalltime_hook_left_alone_total{reason="a \\"b\\""} 2\n' in prom
    assert "# TYPE softwalltime_hook_enabled gauge\nsoftwalltime_hook_enabled 1\n" in prom


def test_prometheus_file_is_replaced_atomically(tmp_path):
    path = tmp_path / "softwalltime.prom"
    path.write_text("old\n")
    inode = os.stat(path).st_ino
    s.write_atomically(str(path), "softwalltime_status 0\n")
    assert path.read_text() == "softwalltime_status 0\n"
    assert os.stat(path).st_ino != inode  # renamed over, never rewritten in place
    assert [p.name for p in tmp_path.iterdir()] == ["softwalltime.prom"]


def test_cli_without_pbs_is_critical_and_says_why(capsys, tmp_path):
    from softwalltime.cli import main

    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"pbs_exec": str(tmp_path / "nopbs")}))
    code = main(["--config", str(cfg), "status", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 2 and data["exit_code"] == 2
    assert data["checks"][0] == {
        "name": "hook",
        "state": "CRITICAL",
        "summary": f"cannot ask PBS: {tmp_path}/nopbs/bin/qmgr: not found"
        " (set pbs_exec or PBS_EXEC in /etc/pbs.conf)",
        "details": {},
        "metrics": {},
    }
    prom = tmp_path / "missing-dir" / "x.prom"
    code = main(["--config", str(cfg), "status", "--prometheus", str(prom)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"softwalltime status: error: cannot write {prom}:")
