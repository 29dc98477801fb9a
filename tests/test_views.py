"""The psql views of migration 0002, against real PostgreSQL, with numbers worked out by hand."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import sqlalchemy as sa

from softwalltime.db import engine as db
from softwalltime.db import schema

H = 3600
# A month ago, whole seconds: old enough to fall outside "the last 24 hours".
T0 = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) - dt.timedelta(days=30)


def _job(seq, user, wall, soft, run, ended_h):
    ended = T0 + dt.timedelta(hours=ended_h)
    return {
        "server": "pbs01",
        "job_id": f"{seq}.pbs01",
        "ctime": ended - dt.timedelta(hours=10),
        "job_seq": seq,
        "username": user,
        "queue": "workq",
        "walltime_s": wall,
        "soft_walltime_s": soft,
        "runtime_s": run,
        "started_at": ended - dt.timedelta(seconds=run),
        "ended_at": ended,
    }


JOBS = [
    _job(1, "alice", 4 * H, 2 * H, 1 * H, 1),  # over by 1 h
    _job(2, "alice", 4 * H, 1 * H, 2 * H, 2),  # under by 1 h: badly
    _job(3, "alice", 2 * H, 1800, 2000, 3),  # under by 200 s: not badly
    _job(4, "alice", 4 * H, None, 1 * H, 4),  # no soft walltime: not compared
    _job(5, "bob", 1 * H, None, 600, 5),  # only jobs without a soft walltime
    _job(6, "carol", 30 * H, 26 * H, 25 * H, 5),  # same end as bob's: higher id first
]


def _insert(conn):
    conn.execute(sa.insert(schema.finished_jobs), JOBS)


def test_accuracy_by_user(conn):
    _insert(conn)
    rows = (
        conn.execute(sa.text("SELECT * FROM soft_walltime_accuracy_by_user ORDER BY username"))
        .mappings()
        .all()
    )
    alice, bob, carol = rows
    assert alice["username"] == "alice"
    assert (alice["finished_jobs"], alice["jobs_with_soft_walltime"]) == (4, 3)
    assert alice["underestimated_pct"] == Decimal("66.7")
    assert alice["badly_underestimated_pct"] == Decimal("33.3")
    # walltime errors 3 h, 2 h, 5200 s; soft walltime errors 1 h, 1 h, 200 s (same 3 jobs).
    assert alice["walltime_mae_hours"] == Decimal("2.15")  # 23200 / 3 / 3600 = 2.148
    assert alice["soft_walltime_mae_hours"] == Decimal("0.69")  # 7400 / 3 / 3600 = 0.685
    assert alice["last_job_ended_at"] == T0 + dt.timedelta(hours=4)
    assert (bob["finished_jobs"], bob["jobs_with_soft_walltime"]) == (1, 0)
    assert bob["underestimated_pct"] is None
    assert bob["walltime_mae_hours"] is None and bob["soft_walltime_mae_hours"] is None
    assert carol["underestimated_pct"] == Decimal("0.0")
    assert carol["walltime_mae_hours"] == Decimal("5.00")
    assert carol["soft_walltime_mae_hours"] == Decimal("1.00")


def test_recent_jobs_side_by_side_most_recent_first(conn):
    _insert(conn)
    rows = conn.execute(sa.text("SELECT * FROM recent_jobs_predicted_vs_actual")).mappings().all()
    assert [r["job_id"] for r in rows] == [
        "6.pbs01",
        "5.pbs01",
        "4.pbs01",
        "3.pbs01",
        "2.pbs01",
        "1.pbs01",
    ]
    by_id = {r["job_id"]: r for r in rows}
    two = by_id["2.pbs01"]
    assert two["requested_walltime"] == dt.timedelta(hours=4)
    assert two["soft_walltime"] == dt.timedelta(hours=1)
    assert two["actual_runtime"] == dt.timedelta(hours=2)
    assert two["soft_minus_actual"] == dt.timedelta(hours=-1)
    assert two["underestimated"] is True
    assert (two["walltime_s"], two["soft_walltime_s"], two["runtime_s"]) == (4 * H, H, 2 * H)
    assert by_id["1.pbs01"]["underestimated"] is False
    assert by_id["6.pbs01"]["requested_walltime"] == dt.timedelta(hours=30)
    four = by_id["4.pbs01"]
    assert four["soft_walltime"] is None and four["underestimated"] is None
    assert four["actual_runtime"] == dt.timedelta(hours=1)


def test_views_are_empty_without_jobs(conn):
    for view in ("soft_walltime_accuracy_by_user", "recent_jobs_predicted_vs_actual"):
        assert conn.execute(sa.text(f"SELECT count(*) FROM {view}")).scalar() == 0


def test_the_readme_queries_run_and_answer(conn):
    """The three example psql queries of docs/evaluate.md, executed as written."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "evaluate.md").read_text()
    section = page.split("# Evaluating the predictors", 1)[1]
    block = section.split("```sql", 1)[1].split("```", 1)[0]
    queries = [q.strip() for q in block.split(";") if q.strip()]
    assert len(queries) == 3
    _insert(conn)
    # ended_at must be recent for the 24-hour query: move job 2 (underestimated) to now.
    conn.execute(
        sa.text("UPDATE finished_jobs SET ended_at = now() - interval '1 hour' WHERE job_seq = 2")
    )
    gains, recent, under = (conn.execute(sa.text(q)).mappings().all() for q in queries)
    assert [r["username"] for r in gains] == ["carol", "alice"]  # 4.00 h gained vs 1.46 h
    assert len(recent) == len(JOBS)
    assert [r["job_id"] for r in under] == ["2.pbs01"]
    assert under[0]["soft_minus_actual"] == dt.timedelta(hours=-1)


def _views(conn):
    return set(sa.inspect(conn).get_view_names())


def test_downgrade_drops_the_views_and_upgrade_restores_them(empty_dsn):
    engine = db.make_engine(empty_dsn)
    try:
        with engine.connect() as conn:
            db.upgrade(conn, "head")
            conn.commit()
            expected = {"soft_walltime_accuracy_by_user", "recent_jobs_predicted_vs_actual"}
            assert _views(conn) == expected
            db.downgrade(conn, "0001")
            conn.commit()
            assert _views(conn) == set()
            assert "finished_jobs" in sa.inspect(conn).get_table_names()
            db.upgrade(conn, "head")
            conn.commit()
            assert _views(conn) == expected
    finally:
        engine.dispose()
