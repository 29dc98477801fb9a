"""Predictor ``calibrated``: the pure rules and table, the replay, and replay == hook path."""

import datetime as dt
import json
import logging
import sys
from collections import Counter
from pathlib import Path

import psycopg2
import pytest
import sqlalchemy as sa
from psycopg2.extras import execute_values

from softwalltime import cli
from softwalltime.core import calibrated as cal
from softwalltime.core.config import load_settings
from softwalltime.core.decide import JobEvent, decide
from softwalltime.db import engine as db
from softwalltime.hook import lookup
from softwalltime.replay.calibrate import store_table
from softwalltime.replay.evaluate import (
    columns,
    metrics,
    replay,
    replay_calibrated,
)
from softwalltime.replay.prior import load_prior
from softwalltime.replay.trace import TraceJob
from softwalltime.replay.trace_readers import read_pbs, read_sources

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "softwalltime" / "data" / "cesnet-openpbs-testserver.log"
CERIT = "CERIT-SC-wagap-2013.alea.swf.gz"
HOOK = str(REPO / "hooks" / "softwalltime_hook.py")
FAKE_PBS = REPO / "tests" / "fakes" / "pbs.py"
H = 3600


# --- pure: keys, rules, bins ------------------------------------------------------------


def test_finest_key_with_three_jobs_wins():
    # newest first: three 4 h/8-cpu jobs, two 4 h/1-cpu jobs, one 1 h job
    hist = [(H, 4 * H, 8), (2 * H, 4 * H, 8), (600, 4 * H, 1), (3 * H, 4 * H, 8),
            (60, 4 * H, 1), (1800, H, 8)]  # fmt: skip
    level, runs, n = cal.features(4 * H, 8, hist)
    assert (level, runs, n) == (cal.LEVEL_WALL_NCPUS, [H, 2 * H, 3 * H], 3)
    level, runs, n = cal.features(4 * H, 1, hist)  # only 2 jobs with 1 cpu: same walltime
    assert (level, n) == (cal.LEVEL_WALL, 5)
    level, runs, n = cal.features(2 * H, 8, hist)  # no 2 h jobs: all, scaled to 2 h
    assert (level, n) == (cal.LEVEL_USER, 6)
    assert runs[:2] == [H // 2, H] and runs[-1] == 3600  # 1800 s of 1 h is 3600 s of 2 h
    assert cal.features(H, 1, [])[0] == cal.LEVEL_NONE
    # rows without a walltime are never used
    assert cal.features(H, 1, [(10, None, 1), (10, 0, 1)]) == (cal.LEVEL_NONE, [], 0)


def test_rule_values_are_exact():
    hist = [(1000, 10000, 4), (2000, 10000, 4), (3000, 10000, 4), (500, 10000, 2)]
    out = cal.outcome(10000, 4, hist)
    assert out.level == cal.LEVEL_WALL_NCPUS and out.class_jobs == 3
    by_name = dict(zip(cal.RULES, out.softs))
    assert by_name["walltime"] == 10000
    assert by_name["v3"] == 3000 + 900  # max ratio 0.3 over the user's jobs, + 900 s
    assert by_name["max*1.5+60"] == 4500 + 60  # 3000 x 1.5 + 60
    assert by_name["p90*1.5+60"] == 4500 + 60  # 90th percentile of 3 values is the max
    assert by_name["median*1.5+60"] == 3000 + 60  # median 2000 x 1.5
    assert by_name["last*2+60"] == 2000 + 60  # the newest job
    assert by_name["p75*2+60"] == 6000 + 60
    assert by_name["max*1+60"] == 3000 + 60
    # exact integers, rounded up: 1001 x 1.5 = 1501.5 -> 1502
    odd = dict(zip(cal.RULES, cal.outcome(10000, 4, [(1001, 10000, 4)] * 3).softs))
    assert odd["last*1.5+60"] == 1502 + 60
    assert len(cal.RULES) == 2 + len(cal.STATISTICS) * len(cal.FACTORS)
    # everything is capped at the walltime and at least 1 s
    assert max(cal.outcome(2000, 4, hist).softs) == 2000
    assert min(cal.outcome(2000, 4, [(0, 2000, 4)] * 3).softs) >= 1


def test_no_history_gives_the_walltime_for_every_rule():
    out = cal.outcome(7200, 1, [])
    assert set(out.softs) == {7200} and out.level == cal.LEVEL_NONE


@pytest.mark.parametrize(
    "ncpus, select, expected",
    [(8, "2:ncpus=4", 8), (None, "2:ncpus=4+1:ncpus=2:mem=1gb", 10), (None, "3:mem=1gb", 3),
     (None, None, 1), ("16", None, 16), (None, "1:ncpus=x", 1)],
)  # fmt: skip
def test_ncpus_of_select(ncpus, select, expected):
    assert cal.ncpus_of({"ncpus": ncpus, "select": select}) == expected


# --- pure: the calibration table ------------------------------------------------------------


def test_new_bins_use_v3_until_they_have_outcomes():
    table = cal.Calibration()
    hist = [(H, 4 * H, 1)] * 5
    out = cal.outcome(4 * H, 1, hist)
    assert table.predict(4 * H, 1, hist).rule == cal.R_V3
    for _ in range(cal.MIN_BIN_JOBS):
        table.update(out, H, 10.0)
    # every job ran exactly 1 h: the tight rules were never under, and more accurate than v3
    choice = table.predict(4 * H, 1, hist)
    assert choice.rule != cal.R_V3
    assert choice.soft_walltime_s < out.softs[cal.R_V3]
    assert choice.soft_walltime_s >= H


def test_lambda_rises_on_under_estimates_and_falls_otherwise():
    out = cal.outcome(4 * H, 1, [(H, 4 * H, 1)] * 5)
    table = cal.Calibration()
    start = table.lam
    for _ in range(5):
        table.update(out, 4 * H, 10.0)  # ran the full walltime: every rule but one under
    assert table.lam > start and table.total_under == 5
    assert table.deficit == pytest.approx(5 * 0.9)  # 5 under-estimates, 0.5 allowed
    high = table.lam
    for _ in range(10):
        table.update(out, 60, 10.0)
    assert table.lam < high and (table.total, table.total_under) == (15, 5)
    assert table.deficit == pytest.approx(5 - 1.5)


def test_integral_term_keeps_moving_lambda_while_the_deficit_persists():
    """A constant deficit (P alone would hold lambda) still pushes lambda up."""
    out = cal.outcome(4 * H, 1, [(H, 4 * H, 1)] * 5)
    table = cal.Calibration()
    table.deficit = 1000.0
    before = table.log_lam
    table.update(out, 60, None, 60)  # neither the choice nor v3 under: the deficit stays
    assert table.deficit == 1000.0
    assert table.log_lam == pytest.approx(before + cal.LAMBDA_INTEGRAL * 1000.0)


def test_target_v3_counts_against_v3s_under_estimates():
    out = cal.outcome(4 * H, 1, [(H, 4 * H, 1)] * 5)
    assert out.softs[cal.R_V3] == H + 900
    table = cal.Calibration()
    table.update(out, 2 * H, None, 3 * H)  # v3 under, the choice not: one to spare
    assert table.deficit == -1.0
    table.update(out, 2 * H, None, H)  # both under: even
    assert table.deficit == -1.0
    table.update(out, 60, None, 30)  # the choice under, v3 not
    assert table.deficit == 0.0 and table.total_under == 2


def test_target_moves_the_trade_off():
    """A higher target gives more under-estimates and more accuracy (same jobs)."""
    jobs = []
    t = 0
    for k in range(3000):
        run = (k * 7919) % 5 * 900 + 300  # 300..3900 s, recurring
        jobs.append(TraceJob(f"u{k % 7}", t, t, t + run, 4 * H, run, 1 + k % 2))
        t += 600
    low = metrics(replay(jobs, ["calibrated"], target_under_pct=2.0).soft_s["calibrated"],
                  [j.runtime_s for j in jobs])  # fmt: skip
    high = metrics(replay(jobs, ["calibrated"], target_under_pct=12.0).soft_s["calibrated"],
                   [j.runtime_s for j in jobs])  # fmt: skip
    assert low.under_pct < high.under_pct
    assert low.mean_accuracy < high.mean_accuracy
    assert low.under_pct <= 2.0 + 1.0 and high.under_pct <= 12.0 + 1.0, (low, high)


def test_rows_round_trip():
    table = cal.Calibration()
    for k in range(50):
        out = cal.outcome(4 * H, 1, [(H + k, 4 * H, 1)] * 4)
        table.update(out, H + 2 * k, 12.0)
    again = cal.Calibration.from_rows(*table.rows())
    assert again.rows() == table.rows()
    assert again.predict(4 * H, 1, [(H, 4 * H, 1)] * 4) == table.predict(
        4 * H, 1, [(H, 4 * H, 1)] * 4
    )


# --- replay: causality --------------------------------------------------------------------


def _jobs(n=400):
    out = []
    for k in range(n):
        submit = k * 500
        run = 200 + (k * 37) % 3000
        out.append(TraceJob(f"u{k % 5}", submit, submit + 10, submit + 10 + run, H, run, k % 3))
    return out


def test_replay_never_learns_from_the_future():
    jobs = _jobs()
    base = replay(jobs, ["calibrated"]).soft_s["calibrated"]
    # Change the run time of the job that ends last: no prediction made before it ended moves.
    last = max(range(len(jobs)), key=lambda k: jobs[k].end_s)
    changed = list(jobs)
    j = changed[last]
    changed[last] = j._replace(runtime_s=1, end_s=j.start_s + 1)
    cut = changed[last].end_s
    again = replay(changed, ["calibrated"]).soft_s["calibrated"]
    for k, job in enumerate(jobs):
        if job.submit_s < cut:
            assert again[k] == base[k], k


# --- replay == hook path, on the bundled PBS sample -----------------------------------------


def _ingest(dsn):
    assert cli.main(["--dsn", dsn, "ingest", "--no-progress", str(SAMPLE)]) == 0


def test_replay_and_hook_path_give_identical_values(fresh_dsn, capsys):
    """Replay the PBS sample; then, for sampled jobs, the hook's decide() on a real database
    holding exactly the history ended by the job's submit time and the site table as the
    replay had it then, gives the same soft walltime."""
    trace = read_pbs([str(SAMPLE)])
    cols, _skipped = columns(trace.jobs, "submit")
    assert len(cols.users) > 100
    seen = {}

    def observe(i, history, table):
        seen[i] = table.rows()

    softs, _table = replay_calibrated(cols, 12.0, observe=observe)
    # a spread of jobs whose users have history (and never the job itself in it)
    candidates = [i for i in cols.by_instant if cols.ends[i] > cols.instants[i]]
    sample = candidates[20::7]
    assert len(sample) >= 15

    _ingest(fresh_dsn)
    capsys.readouterr()
    settings = load_settings(environ={}, overrides={"dsn": fresh_dsn, "predictor": "calibrated"})
    site = lookup.site_fetcher(settings)
    engine = db.make_engine(fresh_dsn)
    try:
        # latest first: each step only deletes more of the future
        for i in sorted(sample, key=lambda k: -cols.instants[k]):
            at = dt.datetime.fromtimestamp(cols.instants[i], tz=dt.timezone.utc)
            with engine.begin() as conn:
                conn.execute(sa.text("DELETE FROM finished_jobs WHERE ended_at > :t"), {"t": at})
                store_table(conn, cal.Calibration.from_rows(*seen[i]), 12.0)
            lookup.forget_calibration()
            job = JobEvent("queuejob", cols.users[i], "workq", cols.walls[i], None,
                           ncpus=cols.ncpus[i])  # fmt: skip
            decision = decide(job, settings, lookup.fetcher(settings), site=site)
            assert decision.soft_walltime_s == softs[i], (i, decision.reason)
    finally:
        engine.dispose()
        lookup.close_cached()
        lookup.forget_calibration()
    # the tables compared were not empty: the hook read real calibration state
    assert sum(1 for i in sample if seen[i][1]) >= len(sample) // 2


def test_calibrate_command_stores_the_replay_end_state(fresh_dsn, capsys):
    _ingest(fresh_dsn)
    capsys.readouterr()
    assert cli.main(["--dsn", fresh_dsn, "calibrate", "--target-under-pct", "12"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("calibrated on ") and "(target 12 %)" in out
    trace = read_pbs([str(SAMPLE)])
    cols, _skipped = columns(trace.jobs, "submit")
    _softs, expected = replay_calibrated(cols, 12.0, load_prior())  # calibrate's default
    conn = psycopg2.connect(fresh_dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT lam, jobs, under_jobs FROM calibration_state")
            state = cur.fetchone()
            cur.execute(
                "SELECT bin, rule, jobs, under_jobs, accuracy_sum FROM calibration_cells"
                " ORDER BY bin, rule"
            )
            cells = cur.fetchall()
    finally:
        conn.close()
    assert (state, cells) == expected.rows()
    assert f"{len(cols.users)} finished jobs" in out
    # and the hook's reader sees the same table
    got = lookup.calibration(fresh_dsn, max_age_s=0)
    lookup.close_cached()
    lookup.forget_calibration()
    assert got.rules == expected.choices() and got.lam == expected.lam
    assert any(rule != cal.R_V3 for rule in got.rules)


@pytest.mark.parametrize("bad", ["100", "0", "v4", "nan"])
def test_calibrate_rejects_a_bad_target(fresh_dsn, capsys, bad):
    assert cli.main(["--dsn", fresh_dsn, "calibrate", "--target-under-pct", bad]) != 0
    err = capsys.readouterr().err
    assert "--target-under-pct" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_calibrate_json_with_target_v3(fresh_dsn, capsys):
    _ingest(fresh_dsn)
    capsys.readouterr()
    assert cli.main(["--dsn", fresh_dsn, "calibrate", "--target-under-pct", "v3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    trace = read_pbs([str(SAMPLE)])
    cols, _skipped = columns(trace.jobs, "submit")
    softs, table = replay_calibrated(cols, None, load_prior())
    v3 = replay(trace.jobs, ["v3"]).soft_s["v3"]
    v3_pct = 100.0 * sum(s < r for s, r in zip(v3, cols.runs)) / len(cols.runs)
    assert doc["target"] == "v3" and doc["jobs"] == len(cols.users)
    assert doc["target_under_pct"] == pytest.approx(v3_pct)  # v3 computed alongside
    assert doc["under_pct"] == pytest.approx(100.0 * table.total_under / table.total)
    assert set(doc) == {"jobs", "under_pct", "target", "target_under_pct", "lam", "cells", "prior"}
    conn = psycopg2.connect(fresh_dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT target_under_pct FROM calibration_state")
            assert cur.fetchone()[0] == pytest.approx(v3_pct)
    finally:
        conn.close()


def test_evaluate_target_v3_reports_v3s_rate_as_the_target(capsys):
    code = cli.main(["evaluate", "--predictors", "v3,calibrated", "--target-under-pct", "v3",
                     "--json", str(SAMPLE)])  # fmt: skip
    assert code == 0
    doc = json.loads(capsys.readouterr().out)["predictors"]
    assert doc["calibrated"]["target"] == "v3"
    assert doc["calibrated"]["target_under_pct"] == pytest.approx(doc["v3"]["under_pct"])
    assert cli.main(["evaluate", "--predictors", "calibrated", "--target-under-pct", "V3",
                     str(SAMPLE)]) == 0  # fmt: skip
    assert "calibrated: target under v3's rate, " in capsys.readouterr().out


@pytest.mark.parametrize("source", ["sample", "trace"])
def test_replay_outcomes_are_the_hooks(source):
    """The replay's fast paths (history cut and filtered once, the same-walltime class kept
    per user, outcomes reused within a batch) give what the hook's outcome() gives on the
    same rows, with rows the hook would skip mixed in, and so the same soft walltimes."""
    if source == "sample":
        jobs = read_pbs([str(SAMPLE)]).jobs
    else:  # the bundled trace's first 3000 jobs: users with more than HISTORY_ROWS jobs
        jobs = read_sources([str(REPO / "softwalltime" / "data" / CERIT)]).jobs[:3000]
    cols, _skipped = columns(jobs, "submit")
    expected = {}

    def observe(i, history, table):
        out = cal.outcome(cols.walls[i], cols.ncpus[i], iter(history))
        assert cal.outcome_of_usable(cols.walls[i], cols.ncpus[i], history) == out
        if len(history) < cal.HISTORY_ROWS:  # a row without walltime is never used
            noisy = [(5, None, 1)] + list(history)
            assert cal.outcome(cols.walls[i], cols.ncpus[i], noisy) == out
        expected[i] = out.softs[table.choose(out.bin)]

    softs, _table = replay_calibrated(cols, 12.0, observe=observe)
    assert len(expected) == len(cols.users)
    assert softs == [expected[i] for i in range(len(softs))]
    if source == "trace":
        assert max(Counter(cols.users).values()) > 2 * cal.HISTORY_ROWS


def test_predict_command_with_keys_on_the_sample(fresh_dsn, capsys):
    _ingest(fresh_dsn)
    assert cli.main(["--dsn", fresh_dsn, "calibrate"]) == 0
    capsys.readouterr()
    trace = read_pbs([str(SAMPLE)])
    user = max({j.user for j in trace.jobs}, key=lambda u: sum(j.user == u for j in trace.jobs))
    code = cli.main(["--dsn", fresh_dsn, "predict", "--predictor", "calibrated", "--user", user,
                     "--walltime", "1:00:00", "--select", "1:ncpus=2"])  # fmt: skip
    out = capsys.readouterr().out
    lookup.close_cached()
    lookup.forget_calibration()
    assert code == 0
    assert out.startswith("soft_walltime: ")
    assert "calibrated soft_walltime=" in out and "rule " in out
    assert "job ncpus 2" in out and "history: " in out


def test_evaluate_reports_the_target_beside_the_achieved_rate(capsys, tmp_path):
    code = cli.main(["evaluate", "--predictors", "v3,calibrated", "--target-under-pct", "7.5",
                     "--json", str(SAMPLE)])  # fmt: skip
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["predictors"]["calibrated"]["target_under_pct"] == 7.5
    assert "target_under_pct" not in doc["predictors"]["v3"]
    assert cli.main(["evaluate", "--predictors", "calibrated", str(SAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "calibrated: target under 12 %, achieved " in out


@pytest.mark.slow
def test_evaluate_plot_adds_the_trade_off_figure(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    assert cli.main(["evaluate", "--plot", str(tmp_path), str(SAMPLE)]) == 0
    png = tmp_path / "tradeoff.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- the hook file (fake pbs) ---------------------------------------------------------------


def _add(dsn, user, rows):
    """rows: (runtime_s, walltime_s, ncpus), oldest first."""
    base = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    values = []
    for k, (run, wall, ncpus) in enumerate(rows, 1):
        end = base + dt.timedelta(hours=k)
        values.append(("pbs01", f"{k}.pbs01", end - dt.timedelta(seconds=run + 60), k, user,
                       wall, run, end, ncpus))  # fmt: skip
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            execute_values(
                cur,
                "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username,"
                " walltime_s, runtime_s, ended_at, ncpus) VALUES %s",
                values,
            )
    finally:
        conn.close()


def test_hook_sets_the_calibrated_prediction_from_the_keys(pbs, fresh_dsn, tmp_path):
    # 4 cpus: ran 1 h of 10 h three times; 1 cpu: 9 h of 10 h
    _add(fresh_dsn, "alice", [(9 * H, 10 * H, 1), (H, 10 * H, 4), (H, 10 * H, 4), (H, 10 * H, 4)])
    table = cal.Calibration()
    hist4 = [(H, 10 * H, 4)] * 3 + [(9 * H, 10 * H, 1)]
    out = cal.outcome(10 * H, 4, hist4)
    for _ in range(cal.MIN_BIN_JOBS):
        table.update(out, H, 12.0)
    engine = db.make_engine(fresh_dsn)
    with engine.begin() as conn:
        store_table(conn, table, 12.0)
    engine.dispose()
    expected = table.predict(10 * H, 4, hist4).soft_walltime_s
    assert expected < 2 * H  # the class key, not alice's 9 h job, decides
    config = tmp_path / "softwalltime.CF"
    config.write_text(json.dumps({"dsn": fresh_dsn, "predictor": "calibrated", "debug": True}))
    pbs.hook_config_filename = str(config)
    job = pbs.job(resources={"walltime": "10:00:00", "select": "1:ncpus=4"}, queue="")
    pbs.new_event(pbs.QUEUEJOB, "alice", job)
    result = pbs.run_hook(HOOK)
    assert result == {"accepted": True, "message": "", "soft_walltime": expected}
    lines = [msg for level, msg in pbs.logged if level == pbs.EVENT_DEBUG]
    assert any("calibrated soft_walltime=" in m and "walltime+ncpus class" in m for m in lines)
    # one cpu: too few 1-cpu jobs; the same-walltime class (with the 9 h job) decides
    pbs.logged.clear()
    job = pbs.job(resources={"walltime": "10:00:00", "ncpus": 1}, queue="")
    pbs.new_event(pbs.QUEUEJOB, "alice", job)
    result = pbs.run_hook(HOOK)
    assert result["soft_walltime"] == table.predict(10 * H, 1, hist4).soft_walltime_s
    assert result["soft_walltime"] > 9 * H


def test_predict_points_calibrated_to_its_module():
    from softwalltime.core.predict import predict

    with pytest.raises(ValueError, match="core.calibrated"):
        predict("calibrated", H, [(60, H)])


def _store_choices(dsn, choices):
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            cur.execute("DELETE FROM calibration_state")
            cur.execute(
                "INSERT INTO calibration_state (id, lam, jobs, under_jobs, target_under_pct,"
                " choices) VALUES (1, 1.0, 5, 1, 12.0, %s)",
                (json.dumps(choices),),
            )
    finally:
        conn.close()


def test_a_table_of_another_releases_rules_is_not_read_with_these(fresh_dsn, caplog):
    """0.4's table was a bare list of ids of 32 rules; read with today's 17 rules, ids
    below 17 would silently mean other rules. The stored table names its rule set: another
    one gives v3 everywhere, with a warning, until calibrate runs."""
    _store_choices(fresh_dsn, [5] * cal.BINS)  # the old format: ids valid here too
    try:
        with caplog.at_level(logging.WARNING):
            assert lookup.calibration(fresh_dsn, max_age_s=0).rules == [cal.R_V3] * cal.BINS
        assert "another version's rules" in caplog.text and "softwalltime calibrate" in caplog.text
        _store_choices(fresh_dsn, {"rule_set": "0123456789abcdef", "rules": [5] * cal.BINS})
        assert lookup.calibration(fresh_dsn, max_age_s=0).rules == [cal.R_V3] * cal.BINS
        _store_choices(fresh_dsn, {"rule_set": cal.RULE_SET, "rules": [5] * cal.BINS})
        assert lookup.calibration(fresh_dsn, max_age_s=0).rules == [5] * cal.BINS
    finally:
        lookup.close_cached()
        lookup.forget_calibration()


def test_a_stored_table_of_another_shape_is_a_clear_error(fresh_dsn):
    from softwalltime.errors import DatabaseError

    _store_choices(fresh_dsn, {"rule_set": cal.RULE_SET, "rules": [1, 2]})
    try:
        with pytest.raises(DatabaseError, match="softwalltime calibrate"):
            lookup.calibration(fresh_dsn, max_age_s=0)
    finally:
        lookup.close_cached()
        lookup.forget_calibration()
    # never calibrated (no row): v3 everywhere
    engine = db.make_engine(fresh_dsn)
    with engine.begin() as c:
        c.execute(sa.text("DELETE FROM calibration_state"))
    engine.dispose()
    try:
        assert lookup.calibration(fresh_dsn, max_age_s=0).rules == [cal.R_V3] * cal.BINS
    finally:
        lookup.close_cached()
        lookup.forget_calibration()


@pytest.mark.slow
def test_replay_keeps_outcomes_of_running_jobs_only():
    """Memory: 20,000 jobs run one after the other; the replay's own allocations stay below
    one outcome per job (each holds a tuple of every rule's soft walltime: a 448,000-job
    trace took 734 MB when they were all kept; kept, these would take over twice the bound)."""
    import tracemalloc

    jobs = []
    t = 0
    for k in range(20000):
        run = 300 + (k * 7919) % 3000
        jobs.append(TraceJob(f"u{k % 50}", t, t, t + run, 4 * H, run, 1 + k % 3))
        t += 61
    cols, _skipped = columns(jobs)
    tracemalloc.start()
    try:
        softs, _table = replay_calibrated(cols, 12.0)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    per_outcome = sys.getsizeof(cal.outcome(4 * H, 1, [(H, 4 * H, 1)] * 5).softs)
    assert len(softs) == 20000
    assert peak < 20000 * per_outcome, (peak, per_outcome)
