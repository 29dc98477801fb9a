"""History retention (``softwalltime db prune``, issue 21) against a real PostgreSQL: what
goes and what stays, batches of bounded size each committed on its own, the change counter
of migration 0006 moved by each batch (so the hook's kept lookups never outlive a pruned
row) and by nothing else, and the command's text, JSON and refusals."""

from __future__ import annotations

import datetime as dt
import json

import psycopg2
import pytest
import sqlalchemy as sa
from helpers_history import EPOCH, add_jobs

from softwalltime import cli
from softwalltime.db import engine as db
from softwalltime.db import retention
from softwalltime.errors import DatabaseError
from softwalltime.hook import lookup

DAY = 86400
# The prune's "now": 400 days after EPOCH, so history_keep_days 365 cuts at EPOCH + 35 days.
NOW = EPOCH + dt.timedelta(days=400)
CUTOFF = EPOCH + dt.timedelta(days=35)


def _sql(dsn: str, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            cur.execute(statement, params)
            return list(cur.fetchall()) if cur.description else []
    finally:
        conn.close()


def _version(dsn: str) -> int:
    return int(_sql(dsn, "SELECT version FROM history_version")[0][0])


def _rerun(dsn: str, job_id: str, ctime: dt.datetime, ended_day: float) -> None:
    _sql(
        dsn,
        "INSERT INTO job_reruns (server, job_id, ctime, run_count, username, runtime_s,"
        " ended_at) VALUES ('pbs01', %s, %s, 1, 'alice', 60, %s)",
        (job_id, ctime, EPOCH + dt.timedelta(days=ended_day)),
    )


@pytest.fixture()
def history(fresh_dsn: str) -> str:
    """alice: 3 jobs before the cutoff, 2 after; bob: 1 and 1; carol: 1 before. Reruns: of
    alice's first (old) job, of her job of day 100 (the rerun is old, the job is kept), of
    a job never stored (old), and one after the cutoff."""
    add_jobs(fresh_dsn, "alice", [(60, 600, d * DAY) for d in (1, 2, 3, 100, 200)])
    add_jobs(fresh_dsn, "bob", [(60, 600, 10 * DAY), (60, 600, 300 * DAY)], start_seq=10)
    add_jobs(fresh_dsn, "carol", [(60, 600, 5 * DAY)], start_seq=20)
    ctimes = dict(_sql(fresh_dsn, "SELECT job_id, ctime FROM finished_jobs"))
    _rerun(fresh_dsn, "1.pbs01", ctimes["1.pbs01"], 0.5)  # its job goes: it goes
    _rerun(fresh_dsn, "4.pbs01", ctimes["4.pbs01"], 20)  # its job stays: it stays
    _rerun(fresh_dsn, "99.pbs01", EPOCH, 1)  # no finished row: old, goes
    _rerun(fresh_dsn, "98.pbs01", EPOCH, 50)  # after the cutoff: stays
    return fresh_dsn


def _engine(dsn: str) -> sa.Engine:
    return db.make_engine(dsn, poolclass=sa.pool.NullPool)


def test_prune_deletes_what_ended_before_the_cutoff_in_committed_batches(history):
    engine = _engine(history)
    before = _version(history)
    would = retention.dry_run(engine, 365, now=NOW, keep_jobs=1)
    assert (would.cutoff, would.finished_jobs, would.job_reruns) == (CUTOFF, 4, 2)
    assert would.dry_run and would.batches == 0
    assert _sql(history, "SELECT count(*) FROM finished_jobs") == [(8,)]
    assert _version(history) == before  # a dry run changes nothing, the counter included

    seen: list[tuple[int, int]] = []
    done = retention.prune(
        engine, 365, batch_rows=2, now=NOW, on_batch=lambda *a: seen.append(a), keep_jobs=1
    )
    assert (done.finished_jobs, done.job_reruns, done.dry_run) == (4, 2, False)
    # 4 jobs in batches of at most 2, then 2 reruns: each batch reported once committed
    assert seen == [(2, 0), (4, 0), (4, 2)] and done.batches == 3
    # one committed DELETE of finished_jobs per batch, each moving the counter once
    assert _version(history) == before + 2
    kept = _sql(history, "SELECT username, ended_at FROM finished_jobs ORDER BY ended_at")
    assert kept == [
        ("carol", EPOCH + dt.timedelta(days=5)),  # her newest job: kept whatever its age
        ("alice", EPOCH + dt.timedelta(days=100)),
        ("alice", EPOCH + dt.timedelta(days=200)),
        ("bob", EPOCH + dt.timedelta(days=300)),
    ]
    assert _sql(history, "SELECT job_id FROM job_reruns ORDER BY job_id") == [
        ("4.pbs01",),
        ("98.pbs01",),
    ]
    # the checkpoints stay: the ingester never reads the deleted jobs again
    again = retention.prune(engine, 365, now=NOW, keep_jobs=1)
    assert (again.finished_jobs, again.job_reruns, again.batches) == (0, 0, 0)
    assert _version(history) == before + 2  # nothing to delete: no DELETE, no new counter
    engine.dispose()


def test_the_hooks_kept_lookups_do_not_outlive_pruned_rows(history):
    """The hook keeps a user's rows while history_version does not move; a prune's DELETE
    moves it (the statement trigger of 0006 covers DELETE), so the next lookup reads again."""
    lookup.close_cached()
    try:
        first = lookup.recent_jobs(history, "bob", 5, cache_entries=10)
        assert first == [(60, 600), (60, 600)]
        retention.prune(_engine(history), 365, now=NOW, keep_jobs=1)
        assert lookup.recent_jobs(history, "bob", 5, cache_entries=10) == [(60, 600)]
    finally:
        lookup.close_cached()


def test_a_batch_waits_for_a_lock_at_most_lock_timeout(history, monkeypatch):
    monkeypatch.setattr(retention, "LOCK_TIMEOUT", "200ms")
    holder = psycopg2.connect(history)
    try:
        with holder.cursor() as cur:
            cur.execute("LOCK TABLE finished_jobs IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(DatabaseError, match="db prune failed: .*lock timeout"):
                retention.prune(_engine(history), 365, now=NOW, keep_jobs=1)
    finally:
        holder.rollback()
        holder.close()
    assert _sql(history, "SELECT count(*) FROM finished_jobs") == [(8,)]


def _cli(capsys, tmp_path, *args: str, config: dict | None = None) -> tuple[int, str, str]:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(config or {}))
    code = cli.main(["--config", str(cfg), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_keep_days_zero_keeps_everything_and_needs_no_database(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("SOFTWALLTIME_DSN", raising=False)
    monkeypatch.delenv("SOFTWALLTIME_HISTORY_KEEP_DAYS", raising=False)
    code, out, err = _cli(capsys, tmp_path, "db", "prune")
    assert (code, err) == (0, "")
    assert out == "softwalltime db prune: history_keep_days is 0: the whole history is kept\n"
    code, out, _ = _cli(capsys, tmp_path, "db", "prune", "--json")
    data = json.loads(out)
    assert code == 0 and data["keep_days"] == 0 and data["cutoff"] is None
    assert (data["finished_jobs"], data["job_reruns"], data["batches"]) == (0, 0, 0)
    assert list(data) == [k for k, _ in cli.dbprune.JSON_KEYS]


def test_cli_prunes_by_the_setting_and_prints_json(history, capsys, tmp_path):
    # dave: 110 jobs, all before the cutoff; the command keeps each user's newest 100
    add_jobs(history, "dave", [(60, 600, h * 3600) for h in range(1, 111)], start_seq=1000)
    # relative to today: everything in the fixture ended before 2026-12 + 400 days
    days = (dt.datetime.now(dt.timezone.utc) - CUTOFF).days
    config = {"dsn": history, "history_keep_days": days}
    code, out, err = _cli(capsys, tmp_path, "db", "prune", "--dry-run", "--json", config=config)
    assert code == 0, err
    data = json.loads(out)
    assert list(data) == [k for k, _ in cli.dbprune.JSON_KEYS]
    assert (data["keep_days"], data["dry_run"], data["finished_jobs"]) == (days, True, 10)
    assert data["keep_jobs"] == retention.KEEP_JOBS_PER_USER
    assert data["job_reruns"] == 1 and data["batches"] == 0  # 99.pbs01: no job stored
    cutoff = dt.datetime.fromisoformat(data["cutoff"])
    assert abs((cutoff - CUTOFF).total_seconds()) < 2 * DAY
    assert _sql(history, "SELECT count(*) FROM finished_jobs") == [(118,)]
    code, out, err = _cli(capsys, tmp_path, "db", "prune", config=config)
    assert code == 0, err
    assert out.startswith("softwalltime db prune: deleted 10 finished jobs and 1 reruns that")
    assert f"(history_keep_days {days}; each user's newest 100 kept) in 2 batch(es)" in out
    oldest = _sql(
        history, "SELECT min(job_seq), count(*) FROM finished_jobs WHERE username = 'dave'"
    )
    assert oldest == [(1010, 100)]  # the 10 oldest went
    assert _sql(history, "SELECT count(*) FROM finished_jobs") == [(108,)]
    # --keep-days wins over the setting for one run; v3_jobs above 100 keeps more
    config["v3_jobs"] = 150
    code, out, _ = _cli(
        capsys, tmp_path, "db", "prune", "--keep-days", "1", "--json", config=config
    )
    data = json.loads(out)
    assert code == 0 and (data["keep_days"], data["keep_jobs"]) == (1, 150)
    assert data["finished_jobs"] == 0
    cutoff = dt.datetime.fromisoformat(data["cutoff"])
    assert abs((cutoff - dt.datetime.now(dt.timezone.utc)).total_seconds() - -DAY) < 600


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--keep-days", "0"], "argument --keep-days: must be at least 1, got 0"),
        (["--keep-days", "99999"], "argument --keep-days: must be at most 36600, got 99999"),
        (["--batch-rows", "1000000"], "argument --batch-rows: must be at most 100000"),
        (["--batch-rows", "x"], "argument --batch-rows: expected a whole number, got 'x'"),
    ],
)
def test_cli_refuses_bad_numbers_in_one_line(flags, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as stop:
        cli.main(["db", "prune", *flags])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_a_setting_beyond_its_range_is_refused(capsys, tmp_path):
    code, out, err = _cli(capsys, tmp_path, "db", "prune", config={"history_keep_days": -1})
    assert code == 1 and out == ""
    assert "key 'history_keep_days': must be between 0 and 36600, got -1" in err


# Issue 32, item 8: a prune never leaves a user with less history than the hook reads.


def test_the_jobs_kept_per_user_cover_every_row_the_predictors_and_the_rank_read(tmp_path):
    from softwalltime.core import calibrated, predict
    from softwalltime.core.config import load_settings

    read = (
        calibrated.HISTORY_ROWS,  # the rank and predictor calibrated
        calibrated.V3_JOBS,
        calibrated.KEY_JOBS,
        predict.DEFAULT_PARAMS.v1_jobs,  # v1 and v2
        predict.DEFAULT_PARAMS.v3_jobs,  # v3
    )
    assert retention.KEEP_JOBS_PER_USER >= max(read)
    (tmp_path / "cfg.json").write_text("{}")
    settings = load_settings(str(tmp_path / "cfg.json"), environ={})
    assert retention.keep_jobs_for(settings) == retention.KEEP_JOBS_PER_USER
    more = settings._replace(v1_jobs=300, v3_jobs=250)
    assert retention.keep_jobs_for(more) == 300
    # the jobs counted are those the strictest lookup reads (so every lookup has enough)
    assert retention.USABLE in lookup.CLASS_JOBS_SQL
    assert retention.USABLE in str(retention._OLD_JOBS)
    assert retention.USABLE in str(retention._COUNT_OLD)


def _v3(dsn: str, user: str) -> int | None:
    rows = lookup.recent_jobs(dsn, user, 15, with_walltime_only=True, reuse=False)
    return predict_v3(rows)


def predict_v3(rows: list[tuple[int, int | None]]) -> int | None:
    from softwalltime.core import predict

    return predict.predict("v3", 24 * 3600, rows).soft_walltime_s


def test_a_user_with_no_job_within_keep_days_keeps_their_newest_jobs(fresh_dsn):
    """erin ran 120 jobs, all long ago: the newest 100 stay. frank ran 3: all stay. gina's
    5 old jobs with a walltime stay behind 100 newer ones without: v3 reads only those 5."""
    add_jobs(fresh_dsn, "erin", [(3600, 7200, h * 3600) for h in range(1, 121)])
    add_jobs(fresh_dsn, "frank", [(4500, 7200, d * DAY) for d in (1, 2, 3)], start_seq=200)
    add_jobs(fresh_dsn, "gina", [(5000, 7200, d * DAY) for d in (1, 2, 3, 4, 5)], start_seq=300)
    add_jobs(fresh_dsn, "gina", [(60, None, 6 * DAY + h) for h in range(100)], start_seq=400)
    before = {u: _v3(fresh_dsn, u) for u in ("erin", "frank", "gina")}
    assert before["frank"] == 4500 * 12 + 900  # 1.25 h per h of walltime, + 15 min
    engine = _engine(fresh_dsn)
    would = retention.dry_run(engine, 365, now=NOW)
    done = retention.prune(engine, 365, now=NOW)
    engine.dispose()
    assert would.finished_jobs == done.finished_jobs == 20
    counts = _sql(
        fresh_dsn,
        "SELECT username, count(*), min(job_seq) FROM finished_jobs GROUP BY 1 ORDER BY 1",
    )
    assert counts == [("erin", 100, 21), ("frank", 3, 200), ("gina", 105, 300)]
    assert {u: _v3(fresh_dsn, u) for u in before} == before


def test_old_long_jobs_behind_one_recent_short_job_keep_the_prediction(fresh_dsn):
    """The issue's case: 14 jobs of 22 h long ago, then one of 10 minutes within keep_days.
    Pruning the 14 took v3 from 22.25 h to 25 min; they stay, and so does the prediction."""
    add_jobs(fresh_dsn, "hal", [(22 * 3600, 24 * 3600, d * DAY) for d in range(1, 15)])
    add_jobs(fresh_dsn, "hal", [(600, 24 * 3600, 399 * DAY)], start_seq=100)
    assert _v3(fresh_dsn, "hal") == 22 * 3600 + 900
    done = retention.prune(_engine(fresh_dsn), 365, now=NOW)
    assert done.finished_jobs == 0
    assert _v3(fresh_dsn, "hal") == 22 * 3600 + 900


def test_an_insert_between_batches_does_not_wait_for_the_prune(history):
    """Each batch commits on its own: while the prune runs (between two of its batches), the
    ingester's insert into finished_jobs, with a 1 s lock_timeout, goes through."""
    inserted: list[int] = []

    def ingest_now(jobs: int, _reruns: int) -> None:
        if inserted:
            return
        conn = psycopg2.connect(history)
        try:
            with conn, conn.cursor() as cur:
                cur.execute("SET LOCAL lock_timeout = '1s'")
                cur.execute(
                    "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username,"
                    " walltime_s, runtime_s, ended_at) VALUES ('pbs01', '500.pbs01', %s, 500,"
                    " 'alice', 600, 60, %s)",
                    (NOW, NOW),
                )
            inserted.append(jobs)
        finally:
            conn.close()

    done = retention.prune(
        _engine(history), 365, batch_rows=1, now=NOW, on_batch=ingest_now, keep_jobs=1
    )
    assert inserted == [1] and done.finished_jobs == 4 and done.batches == 6
    assert _sql(history, "SELECT count(*) FROM finished_jobs WHERE job_seq = 500") == [(1,)]
