"""The sort rank (setting ``rank``, issue 17) as the hook publishes it: the hook file run as
pbs_server runs it (fake ``pbs``) against a real PostgreSQL, and the one statement that reads
the predictor's rows and the rank's together."""

import datetime as dt
import json

import psycopg2
import pytest
from helpers_history import closed_port
from psycopg2.extras import execute_values
from test_hook import HOOK, MARK, debug_lines, modifyjob, queuejob, runjob, warnings

from softwalltime.core import rank
from softwalltime.core.config import load_settings
from softwalltime.hook import lookup
from softwalltime.hook.state import STATE

H = 3600
DAY = 86400
RANK = "softwalltime_rank"
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
# alice's jobs (runtime_s, walltime_s, ncpus), oldest first: three 4-cpu 10 h jobs, two
# 1-cpu 24 h jobs, one without a walltime (v1 counts it, v3 and the rank do not)
ALICE = [
    (2 * H, 10 * H, 4),
    (3 * H, 10 * H, 4),
    (4 * H, 10 * H, 4),
    (6 * H, DAY, 1),
    (2 * H, DAY, 1),
    (600, None, 1),
]
CLASS_ROWS = [(r, w, n) for r, w, n in reversed(ALICE) if w]  # newest first, walltime > 0
# the 10 h, 4-cpu key holds three jobs: their mean
RANK_10H_4 = 3 * H


def insert(dsn, user, jobs, server="pbs01"):
    """``user``'s finished jobs (runtime_s, walltime_s, ncpus), oldest first."""
    rows = []
    for i, (runtime_s, walltime_s, ncpus) in enumerate(jobs, 1):
        ended = EPOCH + dt.timedelta(hours=i)
        rows.append((server, f"{i}{user}.{server}", ended - dt.timedelta(seconds=runtime_s + 60), i,
                     user, walltime_s, runtime_s, ncpus, ended))  # fmt: skip
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            execute_values(
                cur,
                "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username,"
                " walltime_s, runtime_s, ncpus, ended_at) VALUES %s",
                rows,
            )
    finally:
        conn.close()


@pytest.fixture()
def db(fresh_dsn):
    insert(fresh_dsn, "alice", ALICE)
    return fresh_dsn


@pytest.fixture()
def ranked(pbs, tmp_path):
    """Write the hook config with the rank on; the rank's resource defined (hooks install
    --rank creates it; a server without it is a test of its own)."""
    pbs.define_resource(RANK, int)

    def write(**values):
        path = tmp_path / "softwalltime.CF"
        path.write_text(json.dumps({"rank": "key-mean", **values}))
        pbs.hook_config_filename = str(path)

    return write


def test_queuejob_sets_the_rank_beside_the_soft_walltime_in_one_query(pbs, db, ranked):
    ranked(dsn=db)
    ev = queuejob(pbs, walltime="10:00:00", ncpus=4)
    out = pbs.run_hook(HOOK)
    res = ev.job.Resource_List
    # v3: max runtime/walltime of the 15 newest jobs with a walltime (0.4) x 10 h + 900 s
    assert out["soft_walltime"] == res[MARK] == 4 * H + 900
    assert res[RANK] == RANK_10H_4 == rank.key_mean(10 * H, 4, CLASS_ROWS)
    (line,) = [m for m in debug_lines(pbs) if "queuejob" in m]
    assert ": set v3 soft_walltime=15300 s" in line and "; rank key-mean=10800 s set" in line
    assert warnings(pbs) == []
    # one statement read both (the kept lookup is the only one)
    assert [sql for sql, _params in STATE.lookups] == [lookup.V3_WITH_CLASSES_SQL]
    # another ncpus, another key: the 24 h, 1-cpu jobs hold two, fewer than three, so the
    # 24 h key does too; all five jobs scaled to 24 h
    ev = queuejob(pbs, walltime="24:00:00", ncpus=1)
    pbs.run_hook(HOOK)
    assert ev.job.Resource_List[RANK] == rank.key_mean(DAY, 1, CLASS_ROWS)
    assert ev.job.Resource_List[RANK] == 21312  # (2 + 6 + 9.6 + 7.2 + 4.8) h / 5


@pytest.mark.parametrize("predictor", ["v1", "v2", "calibrated"])
def test_every_predictor_ranks_from_its_own_read(pbs, db, ranked, predictor):
    ranked(dsn=db, predictor=predictor)
    ev = queuejob(pbs, walltime="10:00:00", ncpus=4)
    out = pbs.run_hook(HOOK)
    assert out["soft_walltime"] is not None
    assert ev.job.Resource_List[RANK] == RANK_10H_4
    if predictor != "calibrated":
        # v1 still averages its last two jobs, the one without a walltime included
        v1 = -(-(600 + 2 * H) // 2) + (900 if predictor == "v2" else 0)
        assert out["soft_walltime"] == v1
        assert [sql for sql, _ in STATE.lookups] == [lookup.both_sql(False, False)]


def test_rank_off_sets_no_rank_and_reads_as_before(pbs, db, ranked):
    ranked(dsn=db, rank="off")
    ev = queuejob(pbs, walltime="10:00:00", ncpus=4)
    assert pbs.run_hook(HOOK)["soft_walltime"] == 4 * H + 900
    assert ev.job.Resource_List[RANK] is None
    assert [sql for sql, _ in STATE.lookups] == [lookup.RECENT_JOBS_WITH_WALLTIME_SQL]
    assert not any("rank" in m for m in debug_lines(pbs))


@pytest.mark.parametrize(
    "case,config,resources",
    [
        ("user denied", {"users_deny": ["alice"]}, {}),
        ("queue denied", {"queues_deny": ["workq"]}, {}),
        ("shrink-to-fit", {}, {"min_walltime": "01:00:00"}),
        ("no walltime", {}, {"walltime": None}),
    ],
)
def test_no_rank_where_no_soft_walltime_is_set(pbs, db, ranked, case, config, resources):
    ranked(dsn=db, **config)
    walltime = resources.pop("walltime", "10:00:00")
    ev = queuejob(pbs, walltime=walltime, queue="workq", ncpus=4, **resources)
    out = pbs.run_hook(HOOK)
    assert out["accepted"] and out["soft_walltime"] is None, case
    assert ev.job.Resource_List[RANK] is None, case
    assert "rank" not in " ".join(debug_lines(pbs)), case


def test_dry_run_sets_no_rank_but_says_it(pbs, db, ranked):
    ranked(dsn=db, dry_run=True)
    ev = queuejob(pbs, walltime="10:00:00", ncpus=4)
    assert pbs.run_hook(HOOK)["soft_walltime"] is None
    assert ev.job.Resource_List[RANK] is None and ev.job.Resource_List[MARK] is None
    (line,) = [m for m in debug_lines(pbs) if "queuejob" in m]
    assert "dry run, would set v3" in line and "rank key-mean=10800 s would be set" in line


def test_database_down_sets_nothing(pbs, ranked):
    ranked(dsn=f"postgresql://hook@127.0.0.1:{closed_port()}/x", connect_timeout_s=0.3)
    ev = queuejob(pbs, walltime="10:00:00", ncpus=4)
    out = pbs.run_hook(HOOK)
    assert out == {"accepted": True, "message": "", "soft_walltime": None}
    assert ev.job.Resource_List[RANK] is None and ev.job.Resource_List[MARK] is None
    (line,) = warnings(pbs)
    assert line.startswith("softwalltime: job left unchanged after"), line


def test_without_the_rank_resource_the_soft_walltime_is_set_with_a_warning(pbs, db, ranked):
    ranked(dsn=db)
    pbs.undefine_resource(RANK)  # rank on in the config, the resource never created
    ev = queuejob(pbs, walltime="10:00:00", ncpus=4)
    out = pbs.run_hook(HOOK)
    assert out["accepted"] and out["soft_walltime"] == ev.job.Resource_List[MARK] == 4 * H + 900
    (line,) = warnings(pbs)
    assert "sort rank not set (UnsetResourceNameError" in line
    assert f"resource {RANK}" in line and "hooks install --rank" in line
    # at modifyjob the rank cannot be read either: no rank, the soft walltime as ever
    modifyjob(pbs, old_walltime="10:00:00", old_soft="04:15:00", mark="15300", walltime="20:00:00")
    out = pbs.run_hook(HOOK)
    assert out["accepted"] and out["soft_walltime"] == 8 * H + 900


def test_an_unchanged_soft_walltime_still_gets_its_rank(pbs, db, ranked):
    ranked(dsn=db)
    # runjob: the soft walltime the hook set at queuejob is still the prediction; the rank
    # is missing (set while the resource did not exist): it is set, the soft walltime kept
    ev = runjob(pbs, walltime="10:00:00", ncpus=4, soft_walltime=4 * H + 900, **{MARK: 15300})
    out = pbs.run_hook(HOOK)
    assert (
        out["soft_walltime"] == 4 * H + 900 and "soft_walltime" not in ev.job.Resource_List.hook_set
    )
    assert ev.job.Resource_List[RANK] == RANK_10H_4
    (line,) = [m for m in debug_lines(pbs) if "runjob" in m]
    assert ": unchanged; rank key-mean=10800 s set" in line
    # the same rank again: nothing is set at all
    ev = runjob(pbs, walltime="10:00:00", ncpus=4, soft_walltime=15300,
                **{MARK: 15300, RANK: RANK_10H_4})  # fmt: skip
    pbs.run_hook(HOOK)
    assert ev.job.Resource_List.hook_set == {}
    assert "rank key-mean=10800 s unchanged" in debug_lines(pbs)[-1]


def test_a_managers_soft_walltime_is_kept_and_the_job_ranked(pbs, db, ranked):
    ranked(dsn=db)
    ev = runjob(pbs, walltime="10:00:00", ncpus=4, soft_walltime="02:00:00", **{MARK: 999})
    out = pbs.run_hook(HOOK)
    assert out["soft_walltime"] == 2 * H
    assert ev.job.Resource_List[RANK] == RANK_10H_4
    assert "soft_walltime already set to 7200 s; rank key-mean=10800 s set" in debug_lines(pbs)[-1]


def test_runjob_min_wait_keeps_the_rank_too(pbs, db, ranked):
    ranked(dsn=db, runjob_min_wait_s=3600)
    ev = runjob(pbs, walltime="10:00:00", ncpus=4, waited_s=60, soft_walltime=5000,
                **{MARK: 5000, RANK: 42})  # fmt: skip
    pbs.run_hook(HOOK)
    assert ev.job.Resource_List.hook_set == {}


def test_a_walltime_qalter_ranks_for_the_new_walltime(pbs, db, ranked):
    ranked(dsn=db)
    ev = modifyjob(pbs, old_walltime="24:00:00", old_soft="06:15:00", mark="22500",
                   walltime="10:00:00")  # fmt: skip
    ev.job_o.Resource_List["ncpus"] = 4
    ev.job_o.Resource_List.hook_set.clear()
    out = pbs.run_hook(HOOK)
    assert out["accepted"] and out["soft_walltime"] == 4 * H + 900
    assert ev.job.Resource_List[RANK] == RANK_10H_4


def test_a_burst_is_decided_once_per_ncpus(pbs, db, ranked):
    ranked(dsn=db)
    for ncpus, expected in [(4, RANK_10H_4), (1, rank.key_mean(10 * H, 1, CLASS_ROWS))] * 2:
        ev = queuejob(pbs, walltime="10:00:00", ncpus=ncpus)
        pbs.run_hook(HOOK)
        assert ev.job.Resource_List[RANK] == expected
    assert len(STATE.decisions) == 2


# ---- the statement: exactly the two queries it replaces ----


def test_both_jobs_is_recent_jobs_and_class_jobs(fresh_dsn):
    """The one statement returns, part by part, what the predictor's query and the rank's
    (calibrated's) return: odd rows (no walltime, walltime 0, ncpus 0 or unknown, another
    server) and limits included."""
    jobs = [
        (100 * i + 1, [None, 0, 3600, 7200][i % 4], [None, 0, 1, 4, -1][i % 5]) for i in range(400)
    ]
    insert(fresh_dsn, "bob", jobs)
    insert(fresh_dsn, "bob", [(5, 3600, 2)] * 3, server="other")
    insert(fresh_dsn, "carol", [(7, 3600, 1)])
    for only in (False, True):
        for limit in (1, 2, 15, 200):
            for server in (None, "pbs01"):
                got = lookup.both_jobs(fresh_dsn, "bob", limit, only, 100, server=server,
                                       reuse=False)  # fmt: skip
                history = lookup.recent_jobs(fresh_dsn, "bob", limit, only, server=server,
                                             reuse=False)  # fmt: skip
                classes = lookup.class_jobs(fresh_dsn, "bob", 100, server=server, reuse=False)
                assert got == (history, classes), (only, limit, server)
                assert len(classes) == 100 and len(history) == min(limit, 400)


def test_v3_and_the_rank_read_one_scan_unless_odd_rows_push_the_ranks_past_it(fresh_dsn):
    insert(fresh_dsn, "bob", [(60, 3600, 1)] * 120)
    insert(fresh_dsn, "carol", [(60, 3600, [1, 0][i % 2]) for i in range(120)])
    try:
        for user, statements in (("bob", 1), ("carol", 2)):
            lookup.close_cached()
            history, classes = lookup.both_jobs(fresh_dsn, user, 15, True, 100, cache_entries=10)
            assert len(history) == 15 and len(classes) == (100 if user == "bob" else 60)
            # the lookups kept: one statement, or the rank's read again (ncpus 0 rows)
            assert len(STATE.lookups) == statements, list(STATE.lookups)
    finally:
        lookup.close_cached()


def test_fetch_both_honours_the_history_scope(fresh_dsn):
    insert(fresh_dsn, "bob", [(60, 3600, 1)] * 3)
    insert(fresh_dsn, "bob", [(900, 3600, 1)] * 3, server="other")
    settings = load_settings(environ={}, overrides={"dsn": fresh_dsn, "history_scope": "server"})
    try:
        history, classes = lookup.fetcher(settings, "other").both("bob", 15, True)
        assert history == [(900, 3600)] * 3 and classes == [(900, 3600, 1)] * 3
    finally:
        lookup.close_cached()


# ---- softwalltime predict shows the rank the hook would set ----


def test_predict_shows_the_rank(db, capsys, tmp_path, monkeypatch):
    from softwalltime import cli

    monkeypatch.delenv("SOFTWALLTIME_RANK", raising=False)
    argv = ["--dsn", db, "predict", "--user", "alice", "--walltime", "10:00:00", "--ncpus", "4"]
    try:
        assert cli.main([*argv, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["rank_s"] is None  # rank off
        cfg = tmp_path / "cfg.json"
        cfg.write_text(json.dumps({"rank": "key-mean"}))
        assert cli.main(["--config", str(cfg), *argv, "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert (data["soft_walltime_s"], data["rank_s"]) == (4 * H + 900, RANK_10H_4)
        assert data["history"][0] == {"runtime_s": 2 * H, "walltime_s": DAY, "ncpus": None}
        assert cli.main(["--config", str(cfg), *argv]) == 0
        out = capsys.readouterr().out
        assert "rank: 10800 s (key-mean, for job_sort_formula)" in out
        assert "; rank key-mean=10800 s set" in out
    finally:
        lookup.close_cached()
