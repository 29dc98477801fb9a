# ruff: noqa: E501
"""``softwalltime status`` without PBS: log parsing and judgements on recorded inputs,
the output formats, and the database checks against the real test PostgreSQL.
(The real server: tests/pbs/test_status_real.py.)"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import resource
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers_runtime import need_runtime, skip_or_fail
from prometheus_client.parser import text_string_to_metric_families
from softwalltime_ingest.load import LOCK_KEY

from softwalltime import outfile
from softwalltime.errors import SoftwalltimeError
from softwalltime.hook import pgwire
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
11/23/2026 01:10:00;0006;Server@pbshost;Hook;Server@pbshost;softwalltime: job left unchanged after 0 ms: ImportError: cannot import name 'lookup' from 'softwalltime.hook' (check sys_path in the hook config)
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
    activity.set += 13  # 1 failure in 20 events: enough for the rate to count
    assert s.judge_activity(activity, 3600, 50.0).state == s.WARNING  # 5 %
    check = s.judge_activity(activity, 3600, 4.0)
    assert check.state == s.CRITICAL
    assert check.summary.startswith("last hour: 15 set, 3 left alone (")
    assert (
        "1 failures (5.0 %; first: job left unchanged after 1001 ms: DatabaseError" in check.summary
    )
    quiet = s.parse_hook_log(LOG.splitlines()[:3], SINCE)
    assert s.judge_activity(quiet, 3600, 5.0).state == s.OK
    assert s.judge_activity(s.Activity(), 1800, 5.0).summary == (
        "last 30 min: 0 set, 0 left alone, 0 failures"
    )


def test_activity_rate_needs_20_events_or_3_failures():
    """Found on the real server: one failure in 17 events (5.9 % > 5 %) was CRITICAL."""
    one_in_17 = s.Activity(set=16, failures=Counter({"DatabaseError": 1}))
    check = s.judge_activity(one_in_17, 3600, 5.0)
    assert check.state == s.WARNING, check.summary
    assert "5.9 % of 17 events, too few for a rate" in check.summary
    one_in_20 = s.Activity(set=19, failures=Counter({"DatabaseError": 1}))
    assert s.judge_activity(one_in_20, 3600, 4.9).state == s.CRITICAL
    three_of_3 = s.Activity(failures=Counter({"DatabaseError": 3}))
    assert s.judge_activity(three_of_3, 3600, 5.0).state == s.CRITICAL
    two_of_2 = s.Activity(failures=Counter({"DatabaseError": 2}))
    assert s.judge_activity(two_of_2, 3600, 5.0).state == s.WARNING


def test_activity_counts_only_the_named_hook():
    """Found on the real server: every softwalltime line counted, whatever --hook said."""
    other = LOG.replace("softwalltime: ", "softwalltime[swt_bench]: ")
    mine = LOG.replace("softwalltime: ", "softwalltime[softwalltime_test]: ")
    lines = (other + mine).splitlines()
    test = s.parse_hook_log(lines, SINCE, "softwalltime_test")
    assert (test.set, test.dry_run, test.events) == (2, 1, 7)
    assert s.parse_hook_log(lines, SINCE, "softwalltime").events == 0
    assert s.parse_hook_log(lines, SINCE, "swt_bench").events == 7
    # an untagged line is the hook named softwalltime's
    assert s.parse_hook_log((LOG + mine).splitlines(), SINCE).events == 7


def test_activity_counts_the_calibrated_predictor_too():
    line = (
        "11/23/2026 02:39:54;0080;Server@pbshost;Hook;Server@pbshost;softwalltime: queuejob"
        " user='alice' queue='' walltime=36000 s: set calibrated soft_walltime=9900 s"
        " (bin 3, rule v3) [0.9 ms]"
    )
    assert s.parse_hook_log([line], SINCE).set == 1


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
    behind = s.IngestState("/acct/20261123", 5000, 1000, 12, 7200.0, None, 7000.0)
    check = s.judge_ingester(behind, 3600)
    assert check.state == s.WARNING
    assert check.summary == (
        "20261123: 4000 bytes / 12 records unread, the oldest 117 min old;"
        " its checkpoint written 2.0 h ago (behind)"
    )
    # the records arrived a minute ago: the next run takes them, whatever the checkpoint's age
    fresh = s.IngestState("/acct/20261123", 5000, 1000, 12, 7200.0, None, 60.0)
    assert s.judge_ingester(fresh, 3600).state == s.OK
    recent = s.IngestState("/acct/20261123", 5000, 1000, 12, 60.0, None)
    assert s.judge_ingester(recent, 3600).state == s.OK  # no timestamp: by the checkpoint
    running = s.IngestState("/acct/20261123", 5000, 1000, 12, 7200.0, "pid 7 (x@local, y, 3 s)")
    assert s.judge_ingester(running, 3600).state == s.OK
    never = s.IngestState("/acct/20261123", 5000, None, 40, None, None)
    check = s.judge_ingester(never, 3600)
    assert check.state == s.WARNING and "never read" in check.summary
    partial = s.IngestState("/acct/20261123", 5000, 4990, 0, 7200.0, None)
    assert s.judge_ingester(partial, 3600).state == s.OK  # an unfinished line is no record


RECORD = "11/23/2026 {}:00:00;E;{}.pbshost;user=alice ctime=1 end=2\n"


def _checkpoint(pg, path, offset, age, deadline):
    pg.query(
        "INSERT INTO ingest_checkpoints (path, fingerprint, byte_offset, line_number,"
        " updated_at) VALUES ($1, 'x', $2, 1, now() - $3::float8 * interval '1 second')",
        (str(path), offset, age),
        deadline,
    )


def test_ingester_looks_at_the_newest_files_own_checkpoint(migrated_dsn, tmp_path):
    """Found on the real server: the newest accounting file was never read, and the check
    said OK because another file's checkpoint had been written a minute ago."""
    acct = tmp_path / "accounting"
    acct.mkdir()
    yesterday = acct / "20261122"
    yesterday.write_text(RECORD.format("23", 1))
    newest = acct / "20261123"
    newest.write_text(RECORD.format("01", 2) + RECORD.format("02", 3))
    now = dt.datetime(2026, 11, 23, 4, 0, 0)
    deadline = time.monotonic() + 10
    pg = pgwire.connect(migrated_dsn, deadline)
    try:
        _checkpoint(pg, yesterday, yesterday.stat().st_size, 60, deadline)
        state = s.ingest_state(pg, str(acct), deadline, now)
        assert (state.newest_file, state.offset, state.checkpoint_age_s) == (
            str(newest),
            None,
            None,
        )
        assert (state.lag_records, state.oldest_unread_age_s) == (2, 3 * 3600)
        check = s.judge_ingester(state, 3600)
        assert check.state == s.WARNING, check.summary
        assert "never read" in check.summary and "the oldest 3.0 h old" in check.summary
        # read up to its second record an hour ago: that record is 2 h old
        _checkpoint(pg, newest, len(RECORD.format("01", 2)), 3600, deadline)
        state = s.ingest_state(pg, str(acct), deadline, now)
        assert (state.lag_records, state.oldest_unread_age_s) == (1, 2 * 3600)
        assert 3500 < (state.checkpoint_age_s or 0) < 3700
        assert s.judge_ingester(state, 3600).state == s.WARNING
        assert s.judge_ingester(state, 3 * 3600).state == s.OK
    finally:
        pg.query("DELETE FROM ingest_checkpoints", (), deadline)
        pg.close()


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
        _checkpoint(pg, newest, 4, 7200, deadline)
        state = s.ingest_state(pg, str(acct), deadline)
        assert (state.newest_file, state.size, state.offset, state.lag_records) == (
            str(newest),
            8,
            4,
            2,
        )
        assert state.oldest_unread_age_s is None  # no record with a timestamp
        assert 7100 < (state.checkpoint_age_s or 0) < 7300 and state.lock_holder is None
        # the ingester's own key: a status that looked for another one would not see it
        holder.query("SELECT pg_advisory_lock($1)", (LOCK_KEY,), deadline)
        locked = s.ingest_state(pg, str(acct), deadline)
        assert locked.lock_holder is not None and locked.lock_holder.startswith("pid ")
    finally:
        pg.query("DELETE FROM ingest_checkpoints", (), deadline)
        holder.close()
        pg.close()


def test_history_judgement():
    now = 1_800_000_000.0
    check = s.judge_history([("pbs01", 120, now - 600)], (10, 0.2, 3.5 * 3600, 4500.0), now)
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
    outfile.write_text(str(path), "softwalltime_status 0\n")
    assert path.read_text() == "softwalltime_status 0\n"
    assert os.stat(path).st_ino != inode  # renamed over, never rewritten in place
    assert [p.name for p in tmp_path.iterdir()] == ["softwalltime.prom"]


def test_a_failed_prometheus_write_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "softwalltime.prom"
    target.mkdir()  # refused before anything is written
    with pytest.raises(SoftwalltimeError, match=f"cannot write {target}: it is a directory"):
        outfile.write_text(str(target), "softwalltime_status 0\n")
    assert [p.name for p in tmp_path.iterdir()] == ["softwalltime.prom"]
    assert list(target.iterdir()) == []
    # A write that fails half way (the file size limit: EFBIG) removes its temporary file.
    path = tmp_path / "full.prom"
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (10, limits[1]))
    try:
        with pytest.raises(SoftwalltimeError) as caught:
            outfile.write_text(str(path), "softwalltime_status 0\n" * 10)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    assert str(caught.value) == f"cannot write {path}: File too large"
    assert [p.name for p in tmp_path.iterdir()] == ["softwalltime.prom"]


def _all_checks() -> list[s.Check]:
    """One of each check, as run_checks gives them, from recorded inputs."""
    today = s.Activity()
    activity = s.parse_hook_log(
        LOG.splitlines(), SINCE, "softwalltime", today, SINCE.replace(hour=0)
    )
    ingest = s.IngestState("/acct/20261123", 5000, 1000, 12, 7200.5, None, 7000.25)
    return [
        s.judge_hook("softwalltime", LISTING),
        s.judge_hook_config(json.dumps({"dsn": "host=/x"}))[0],
        s.Check(
            "database",
            s.OK,
            "answers",
            [s.Metric("softwalltime_database_connect_seconds", 0.0031415926535, "connect")],
        ),
        s.judge_activity(activity, 3600, 5.0, today),
        s.judge_ingester(ingest, 3600),
        s.judge_history(
            [("pbs01", 123456789, 1700153660.0), ("vm", 3, 1700000000.5)],
            (10, 0.2, 12600.0, 4500.123456789),
            1700157260.0,
        ),
    ]


def test_prometheus_names_units_and_full_precision():
    """Found on the real server: values printed with %g (6 digits), 1700153660 as
    1.70015e+09, 3,660 s off; counts over a window named _total; hours and percent."""
    text = s.render_prometheus(_all_checks(), now=1700157260.125)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {
        (x.name, tuple(sorted(x.labels.items()))): x.value
        for f in families.values()
        for x in f.samples
    }
    newest = ("softwalltime_history_newest_end_timestamp_seconds", (("server", "pbs01"),))
    assert samples[newest] == 1700153660
    assert samples[newest[0], (("server", "vm"),)] == 1700000000.5
    assert samples["softwalltime_status_timestamp_seconds", ()] == 1700157260.125
    assert samples["softwalltime_history_rows", (("server", "pbs01"),)] == 123456789
    assert samples["softwalltime_database_connect_seconds", ()] == 0.0031415926535
    assert samples["softwalltime_accuracy_soft_walltime_mae_seconds", ()] == 4500.123456789
    assert samples["softwalltime_accuracy_underestimated_ratio", ()] == 0.2
    assert samples["softwalltime_ingest_checkpoint_age_seconds", ()] == 7200.5
    assert samples["softwalltime_hook_jobs_set", ()] == 2
    assert samples["softwalltime_hook_window_seconds", ()] == 3600
    assert samples["softwalltime_status", ()] == s.WARNING
    # the hook's decisions since midnight: a counter per outcome (the ImportError at 01:10
    # is before the window but after midnight)
    events = {x.labels["outcome"]: x.value for x in families["softwalltime_hook_events"].samples}
    assert events == {"set": 2, "dry_run": 1, "failed": 2, "left_alone": 3}
    # conventions: counters end in _total, gauges never; no hours or percent
    assert {f.type for f in families.values()} == {"gauge", "counter"}
    for f in families.values():
        names = {x.name for x in f.samples}
        if f.type == "counter":
            assert names == {f.name + "_total"}, f.name
        else:
            assert not f.name.endswith("_total"), f.name
        assert not f.name.endswith(("_hours", "_pct")), f.name
        assert f.name.startswith("softwalltime_"), f.name
    assert "e+" not in text  # no value in exponent notation where %g would have put one


def test_every_series_is_written_when_the_database_is_down():
    """Issue 33: ingest and history series vanished with the database, and the oldest
    unread age came and went with the state: absent-series alerts misfired."""
    down = "database postgresql://hook@db/x: connection refused"
    checks = [
        s.judge_hook("softwalltime", LISTING),
        s.Check("database", s.CRITICAL, down, [s.Metric("softwalltime_database_up", 0, "up")]),
        s.Check("activity", s.UNKNOWN, "cannot read /var/spool/pbs/server_logs/20261123"),
        s.Check("ingester", s.CRITICAL, down),
        s.Check("history", s.CRITICAL, down),
    ]
    families = {f.name: f for f in text_string_to_metric_families(s.render_prometheus(checks))}
    for name in s.ALWAYS:
        (sample,) = families[name].samples
        if name == "softwalltime_hook_enabled":
            assert sample.value == 1  # from the hook's check, which ran
        elif name.endswith("_up"):
            assert sample.value == 0, name
        else:
            assert sample.value != sample.value, name  # NaN
    outcomes = {x.labels["outcome"] for x in families["softwalltime_hook_events"].samples}
    assert outcomes == set(s.HOOK_OUTCOMES)
    # JSON has no NaN: null
    assert "NaN" not in s.render_json(checks)
    # the database down: one short Nagios line, the shared text said once
    line = s.render_nagios(checks)
    text = line.split(" | ")[0]
    assert text.count(down) == 1  # said once for the three checks that say it
    assert "database, ingester, history CRITICAL: " + down in text
    assert len(line) < 400
    up = s.judge_ingester(s.IngestState("/acct/20261123", 100, 100, 0, 30.0, None), 3600)
    values = {m.name: m.value for m in up.metrics}
    assert values["softwalltime_ingest_oldest_unread_age_seconds"] == 0  # nothing unread
    assert values["softwalltime_ingest_checkpoint_age_seconds"] == 30.0
    assert values["softwalltime_ingest_up"] == 1
    never = s.judge_ingester(s.IngestState("/acct/20261123", 100, None, 2, None, None), 3600)
    values = {m.name: m.value for m in never.metrics}
    assert (
        values["softwalltime_ingest_checkpoint_age_seconds"]
        != values["softwalltime_ingest_checkpoint_age_seconds"]
    )  # NaN: never read
    assert "softwalltime_ingest_oldest_unread_age_seconds" in values


def test_nagios_perfdata_thresholds_and_digits():
    line = s.render_nagios(_all_checks())
    perf = dict(item.split("=", 1) for item in line.split(" | ")[1].split())
    assert perf["hook_failure_ratio"] == "0.143;0;0.05"  # 1 of 7; any warns, 5 % critical
    assert perf["hook_jobs_failed"] == "1;0"
    assert perf["ingest_oldest_unread_age_seconds"] == "7000.25s;3600"
    assert perf["database_connect_seconds"] == "0.00314s"
    assert perf["accuracy_soft_walltime_mae_seconds"] == "4500.123s"
    assert perf["history_newest_end_timestamp_seconds_vm"] == "1700000000"  # .5: to even
    assert perf["hook_events_total_failed"] == "2c"
    long = s.Check("history", s.CRITICAL, "x" * 600)
    text = s.render_nagios([long]).split(" | ")[0]
    assert len(text) == len("SOFTWALLTIME CRITICAL - history CRITICAL: ") + s.NAGIOS_SUMMARY_CHARS
    assert text.endswith("…")
    assert s.perf_number(float("nan")) == "U" and s.perf_number(12) == "12"


def test_prometheus_special_values():
    assert s.prometheus_value(float("nan")) == "NaN"
    assert s.prometheus_value(float("inf")) == "+Inf"
    assert s.prometheus_value(True) == "1"
    assert s.prometheus_value(1700153660) == "1700153660"
    assert float(s.prometheus_value(1e-300)) == 1e-300


def test_nagios_one_line_and_four_states():
    checks = _all_checks()
    line = s.render_nagios(checks)
    assert "\n" not in line
    assert line.startswith("SOFTWALLTIME WARNING - activity WARNING: last hour: 2 set, ")
    text, perf = line.split(" | ")
    assert "ingester WARNING: 20261123: 4000 bytes" in text
    assert "status=1 hook_enabled=1 database_connect_seconds=0.00314s" in perf
    assert "history_newest_end_timestamp_seconds_pbs01=1700153660 " in perf
    assert "ingest_lag_bytes=4000B " in perf
    ok = [s.Check("hook", s.OK, "fine"), s.Check("config", s.OK, "fine")]
    assert s.render_nagios(ok) == "SOFTWALLTIME OK - 2 checks OK: hook, config | status=0"
    critical = ok + [s.Check("database", s.CRITICAL, "down | really"), checks[3]]
    line = s.render_nagios(critical)
    assert line.startswith("SOFTWALLTIME CRITICAL - database CRITICAL: down / really; activity")
    assert line.count("|") == 1
    unknown = ok + [s.Check("hook", s.UNKNOWN, "cannot ask PBS"), checks[3]]
    assert s.render_nagios(unknown).startswith(
        "SOFTWALLTIME UNKNOWN - hook UNKNOWN: cannot ask PBS; activity WARNING"
    )
    assert s.overall(unknown + [s.Check("x", s.CRITICAL, "")]) == s.CRITICAL
    assert s.overall(unknown) == s.UNKNOWN


def _status(capsys, tmp_path, *args, pbs_home=None, config=None):
    """``softwalltime status`` with no PBS commands (pbs_exec points nowhere)."""
    from softwalltime.cli import main

    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(config or {"pbs_exec": str(tmp_path / "nopbs")}))
    code = main(["--config", str(cfg), "status", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def pbs_home(tmp_path, monkeypatch):
    """A PBS_HOME of its own: the tests never read the machine's server logs."""
    home = tmp_path / "pbs_home"
    (home / "server_logs").mkdir(parents=True)
    monkeypatch.setenv("PBS_HOME", str(home))
    monkeypatch.delenv("SOFTWALLTIME_DSN", raising=False)
    return home


def test_cli_without_pbs_is_unknown_and_says_why(capsys, tmp_path, pbs_home):
    code, out, _ = _status(capsys, tmp_path, "--json")
    data = json.loads(out)
    assert code == 3 and data["exit_code"] == 3 and data["status"] == "UNKNOWN"
    assert data["checks"][0] == {
        "name": "hook",
        "state": "UNKNOWN",
        "summary": f"cannot ask PBS: {tmp_path}/nopbs/bin/qmgr: not found"
        " (set pbs_exec or PBS_EXEC in /etc/pbs.conf)",
        "details": {},
        "metrics": {},
    }
    states = {c["name"]: c["state"] for c in data["checks"]}
    assert states == {
        "hook": "UNKNOWN",
        "activity": "OK",
        "ingester": "UNKNOWN",
        "history": "UNKNOWN",
    }
    code, out, _ = _status(capsys, tmp_path, "--nagios")
    assert code == 3 and out.startswith("SOFTWALLTIME UNKNOWN - hook UNKNOWN: cannot ask PBS")
    assert out.count("\n") == 1


def test_cli_status_honours_pbs_home_from_the_environment(capsys, tmp_path, pbs_home):
    """Found on the real server: status read /etc/pbs.conf's PBS_HOME, ingest the env's."""
    now = dt.datetime.now()
    failure = LOG.splitlines()[6].split(";", 1)[1]
    day = pbs_home / "server_logs" / now.strftime("%Y%m%d")
    day.write_text(f"{now:%m/%d/%Y %H:%M:%S};{failure}\n")
    code, out, _ = _status(capsys, tmp_path, "--json")
    activity = next(c for c in json.loads(out)["checks"] if c["name"] == "activity")
    assert activity["state"] == "WARNING" and activity["details"]["failures"] == {
        "DatabaseError": 1
    }
    os.chmod(day, 0)
    if os.geteuid() != 0:  # root reads it anyway
        code, out, _ = _status(capsys, tmp_path, "--json")
        activity = next(c for c in json.loads(out)["checks"] if c["name"] == "activity")
        assert activity["state"] == "UNKNOWN"


def test_pbs_location_environment_over_pbs_conf(tmp_path):
    from softwalltime.cli.status import pbs_location
    from softwalltime.core.config import load_settings

    conf = tmp_path / "pbs.conf"
    conf.write_text("PBS_EXEC=/opt/pbs\nPBS_HOME=/var/spool/pbs\n")
    settings = load_settings(None, environ={})
    where = pbs_location(settings, {"PBS_CONF_FILE": str(conf)})
    assert (where.exec_dir, where.home) == ("/opt/pbs", "/var/spool/pbs")
    env = {"PBS_CONF_FILE": str(conf), "PBS_HOME": "/srv/pbs", "PBS_EXEC": "/usr/pbs"}
    assert (pbs_location(settings, env).exec_dir, pbs_location(settings, env).home) == (
        "/usr/pbs",
        "/srv/pbs",
    )


def test_cli_prometheus_write_fails_unknown_and_no_temporary_file(capsys, tmp_path, pbs_home):
    prom = tmp_path / "missing-dir" / "x.prom"
    code, _, err = _status(capsys, tmp_path, "--prometheus", str(prom))
    assert code == 3 and err.startswith(f"softwalltime status: error: cannot write {prom}:")
    target = tmp_path / "isdir.prom"
    target.mkdir()
    code, out, err = _status(capsys, tmp_path, "--nagios", "--prometheus", str(target))
    assert code == 3 and err == ""
    assert f"prometheus UNKNOWN: cannot write {target}: it is a directory" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cfg.json",
        "isdir.prom",
        "pbs_home",
    ]


def test_cli_nagios_error_before_the_checks_is_unknown(capsys, tmp_path, pbs_home):
    code, out, err = _status(capsys, tmp_path, "--nagios", config={"predictor": "v9"})
    assert code == 3 and err == ""
    assert out == (
        f"SOFTWALLTIME UNKNOWN - {tmp_path}/cfg.json: key 'predictor': must be one of"
        " v1, v2, v3, calibrated, learned, got 'v9'\n"
    )
    code, out, err = _status(capsys, tmp_path, "--json", config={"predictor": "v9"})
    assert code == 1 and out == "" and "key 'predictor'" in err


def test_cli_prometheus_refuses_a_symlink_and_keeps_the_mode(capsys, tmp_path, pbs_home):
    """Issue 32: the metrics file replaced a symlink at its path and was always chmod 0644;
    now a symlink or device is refused (UNKNOWN, one line), an existing file keeps its mode,
    a new one honours the umask, and '-' prints the metrics instead of the table."""
    secret = tmp_path / "secret"
    secret.write_text("root's\n")
    link = tmp_path / "link.prom"
    link.symlink_to(secret)
    code, _, err = _status(capsys, tmp_path, "--prometheus", str(link))
    assert code == 3 and err == (
        f"softwalltime status: error: cannot write {link}: it is a symlink, not a regular"
        " file; give a file's path\n"
    )
    assert link.is_symlink() and secret.read_text() == "root's\n"
    kept = tmp_path / "kept.prom"
    kept.write_text("old\n")
    kept.chmod(0o640)
    _status(capsys, tmp_path, "--prometheus", str(kept))
    assert oct(kept.stat().st_mode & 0o777) == oct(0o640)
    assert "softwalltime_status 3\n" in kept.read_text()
    new = tmp_path / "new.prom"
    old_mask = os.umask(0o027)
    try:
        _status(capsys, tmp_path, "--prometheus", str(new))
    finally:
        os.umask(old_mask)
    assert oct(new.stat().st_mode & 0o777) == oct(0o640)
    code, out, err = _status(capsys, tmp_path, "--prometheus", "-")
    assert code == 3 and out.startswith("# HELP") and "softwalltime_status 3\n" in out
    assert "│" not in out and not (tmp_path / "-").exists()


def test_exported_settings_load_as_the_hook_does_and_leave_no_file(tmp_path, monkeypatch):
    import tempfile

    from softwalltime.errors import ConfigError
    from softwalltime.pbsserver.commands import exported_settings

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the copy is written
    monkeypatch.setenv("SOFTWALLTIME_PREDICTOR", "v1")  # the hook reads no environment
    settings = exported_settings(json.dumps({"dsn": "host=/x", "rank": "key-mean"}), "cfg")
    assert (settings.dsn, settings.rank, settings.predictor) == ("host=/x", "key-mean", "v3")
    with pytest.raises(ConfigError) as err:
        exported_settings(json.dumps({"predictor": "v9"}), "hook config")
    assert str(err.value).startswith("hook config: key 'predictor'")
    assert str(tmp_path) not in str(err.value)
    assert list(tmp_path.iterdir()) == []  # removed, valid or not


def test_activity_counts_the_learned_predictor_too():
    line = (
        "11/27/2026 02:39:54;0080;Server@pbshost;Hook;Server@pbshost;softwalltime: queuejob"
        " user='alice' queue='' walltime=36000 s: set learned soft_walltime=9900 s"
        " (rule B*1.5+60 in fine bin 12, 40 jobs of history; rank rule last) [0.9 ms]"
    )
    assert s.parse_hook_log([line], SINCE).set == 1


def test_learned_table_judgement():
    none = s.judge_learned([])
    assert none.state == s.WARNING and "uses v3 until 'softwalltime calibrate'" in none.summary
    fresh = s.judge_learned([(600.0, 12000, 15000.5)])
    assert fresh.state == s.OK and fresh.summary == "learned table: 12000 jobs, computed 10 min ago"
    age = next(m for m in fresh.metrics if m.name == "softwalltime_learned_table_age_seconds")
    assert age.value == 600.0 and age.warn == s.LEARNED_MAX_AGE_S
    stale = s.judge_learned([(2 * 86400.0, 12000, 15000.5)])
    assert stale.state == s.WARNING and "computed 48.0 h ago (older than 24.0 h" in stale.summary


def test_cli_status_shows_the_learned_tables_age(capsys, tmp_path, pbs_home, fresh_dsn):
    from softwalltime.core import learned
    from softwalltime.db import engine as db
    from softwalltime.replay.calibrate_learned import store_learned

    config = {"pbs_exec": str(tmp_path / "nopbs"), "dsn": fresh_dsn, "predictor": "learned"}
    _code, out, _ = _status(capsys, tmp_path, "--json", config=config)
    check = next(c for c in json.loads(out)["checks"] if c["name"] == "learned")
    assert check["state"] == "WARNING" and "no learned table" in check["summary"]
    engine = db.make_engine(fresh_dsn)
    with engine.begin() as conn:
        store_learned(conn, learned.Learner(), "fixed", 12.0, False)
    engine.dispose()
    _code, out, _ = _status(capsys, tmp_path, "--json", config=config)
    check = next(c for c in json.loads(out)["checks"] if c["name"] == "learned")
    assert check["state"] == "OK" and check["summary"].startswith("learned table: 0 jobs, computed")
    assert 0 <= check["details"]["age_s"] < 60
    # another predictor: no such check
    config["predictor"] = "v3"
    _code, out, _ = _status(capsys, tmp_path, "--json", config=config)
    assert "learned" not in {c["name"] for c in json.loads(out)["checks"]}


def test_the_units_default_metrics_file_is_written_without_node_exporter(
    capsys, tmp_path, pbs_home
):
    """Issue 50 item 5: softwalltime-status.service's default file is in node_exporter's
    folder, which did not exist without node_exporter ("No such file or directory"). The
    package's tmpfiles.d makes the folder; here applied to an empty root, then status writes
    the unit's default file there."""
    if os.geteuid() != 0:
        skip_or_fail("needs root (systemd-tmpfiles --root chowns)", "CI runs as root")
    need_runtime("/usr/bin/systemd-tmpfiles", "the package's tmpfiles.d")
    packaging = Path(__file__).resolve().parents[1] / "packaging"
    unit = (packaging / "systemd" / "softwalltime-status.service").read_text()
    default = re.search(r"^Environment=SOFTWALLTIME_PROMETHEUS_FILE=(\S+)$", unit, re.M)
    assert default is not None
    root = tmp_path / "host"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text(
        "root:x:0:0::/root:/bin/sh\nsoftwalltime:x:990:990::/:/x\n"
    )
    (root / "etc" / "group").write_text("root:x:0:\nsoftwalltime:x:990:\n")
    conf = packaging / "tmpfiles.d" / "softwalltime.conf"
    subprocess.run(["systemd-tmpfiles", "--create", f"--root={root}", str(conf)], check=True)
    prom = Path(str(root) + default.group(1))
    code, out, err = _status(capsys, tmp_path, "--prometheus", str(prom))
    assert code == 3 and "cannot write" not in err  # UNKNOWN: no PBS here, but written
    assert "prometheus" not in out
    names = {f.name for f in text_string_to_metric_families(prom.read_text())}
    assert "softwalltime_check_state" in names
