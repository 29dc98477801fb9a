"""What the policy did (issue 48): the same jobs under the current and previous policy, the
fit, and the guard's tolerances; read from a real PostgreSQL history."""

from __future__ import annotations

import datetime as dt
import json
import random

import pytest
import sqlalchemy as sa

from softwalltime import api
from softwalltime.replay import counterfactual as cf
from softwalltime.replay import pbsched

UTC = dt.timezone.utc


BASE = 1_800_000_000


def _columns(seed: int, n: int = 400, gap: int = 900, base: int = BASE):
    rng = random.Random(seed)
    t = base
    cols = {k: [] for k in ("user", "arrival", "run", "wall", "soft", "ncpus", "queue")}
    for _ in range(n):
        t += rng.randint(0, gap)
        wall = rng.choice([3600, 4 * 3600, 24 * 3600])
        cols["user"].append(f"u{rng.randint(0, 5)}")
        cols["arrival"].append(t)
        cols["run"].append(max(60, int(wall * rng.random() ** 2)))
        cols["wall"].append(wall)
        cols["soft"].append(0)
        cols["ncpus"].append(rng.choice([1, 2, 4, 8, 16, 32]))
        cols["queue"].append("short" if wall <= 3600 else "long")
    return cols


def _period(seed: int, procs: int = 16) -> cf.Period:
    c = _columns(seed)
    jobs = cf.Jobs(
        c["user"], c["arrival"], c["arrival"], c["run"], c["wall"], c["soft"], c["ncpus"],
        c["queue"], 50,
    )  # fmt: skip
    period, wide = cf.period_of(jobs, procs)
    assert wide == sum(1 for p in c["ncpus"] if p > procs) > 0  # counted, not silently lost
    return period


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_policy_worse_for_short_jobs_breaks_the_tolerance(seed) -> None:
    period = _period(seed)
    fcfs, sjf = pbsched.parse_policy("fcfs-bf1"), pbsched.parse_policy("sjf-bf1")
    worse = cf.judge(cf.compare(period, fcfs, sjf))
    assert any(line.startswith(("queue short", "class short")) for line in worse), worse
    assert cf.judge(cf.compare(period, sjf, fcfs)) == []  # the other way round holds
    same = cf.compare(period, fcfs, fcfs)
    assert cf.judge(same) == []
    for row in same["rows"]:
        assert row["current"] == row["previous"]  # one policy twice: the same figures


def test_the_scored_jobs_are_the_period_s_and_the_groups_cover_them() -> None:
    period = _period(0)
    out = cf.compare(period, pbsched.parse_policy("fcfs-bf1"), pbsched.parse_policy("sjf-bf1"))
    n = len(period.work.submit) - period.first
    assert out["jobs"] == n and out["fit"]["jobs"] == n
    groups = {r["group"]: r["jobs"] for r in out["rows"]}
    assert groups[cf.ALL] == n
    assert groups["queue short"] + groups["queue long"] == n
    assert sum(v for k, v in groups.items() if k.startswith("class ")) == n
    # real starts = arrivals here: the real figures are no wait at all
    assert out["rows"][0]["real"]["max_wait_h"] == 0.0


def test_no_previous_policy_or_too_few_jobs_says_so_and_judges_nothing() -> None:
    period = _period(0)
    alone = cf.compare(period, pbsched.parse_policy("fcfs-bf1"), None)
    assert "no previous policy" in alone["note"] and cf.judge(alone) == []
    assert "previous" not in alone["rows"][0]
    few = period._replace(first=len(period.work.submit) - 10)
    out = cf.compare(few, pbsched.parse_policy("fcfs-bf1"), pbsched.parse_policy("sjf-bf1"))
    assert "too few jobs" in out["note"] and cf.judge(out) == []


def test_policy_of_reads_pbs_settings_with_pbs_defaults() -> None:
    p = cf.policy_of({})
    assert (p.job_sort_formula, p.backfill_depth, p.strict_ordering) == (pbsched.FCFS, 1, False)
    p = cf.policy_of(
        {"job_sort_formula": "'-walltime'", "backfill_depth": "4", "strict_ordering": "True ALL",
         "opt_backfill_fuzzy": "high"}
    )  # fmt: skip
    assert (p.job_sort_formula, p.backfill_depth, p.strict_ordering) == ("-walltime", 4, True)
    assert p.backfill_fuzzy == 3600
    with pytest.raises(ValueError):
        cf.policy_of({"job_sort_formula": "no_such_resource * 2"})


def _store(conn, seed: int, changed_at: int, before, after, base: int = BASE) -> None:
    """300 jobs from ``base``, real starts up to an hour after arrival; the policy change
    ``changed_at`` seconds after ``base``."""
    c = _columns(seed, n=300, gap=600, base=base)
    changed_at += base
    rng = random.Random(seed)
    rows = []
    for k in range(len(c["arrival"])):
        start = c["arrival"][k] + rng.randint(0, 3600)
        rows.append({
            "server": "s", "job_id": f"{k}.s", "job_seq": k, "username": c["user"][k],
            "ctime": dt.datetime.fromtimestamp(c["arrival"][k] - 5, UTC),
            "etime": dt.datetime.fromtimestamp(c["arrival"][k], UTC),
            "started_at": dt.datetime.fromtimestamp(start, UTC),
            "ended_at": dt.datetime.fromtimestamp(start + c["run"][k], UTC),
            "runtime_s": c["run"][k], "walltime_s": c["wall"][k], "ncpus": c["ncpus"][k],
            "queue": c["queue"][k],
        })  # fmt: skip
    conn.execute(
        sa.text(
            "INSERT INTO finished_jobs (server, job_id, job_seq, username, ctime, etime,"
            " started_at, ended_at, runtime_s, walltime_s, ncpus, queue) VALUES (:server,"
            " :job_id, :job_seq, :username, :ctime, :etime, :started_at, :ended_at,"
            " :runtime_s, :walltime_s, :ncpus, :queue)"
        ),
        rows,
    )
    conn.execute(
        sa.text(
            "INSERT INTO policy_changes (changed_at, changed_by, action, before, after)"
            " VALUES (:at, 'test', 'apply', CAST(:before AS jsonb), CAST(:after AS jsonb))"
        ),
        {
            "at": dt.datetime.fromtimestamp(changed_at, UTC),
            "before": json.dumps(before),
            "after": json.dumps(after),
        },  # fmt: skip
    )


FCFS = {"job_sort_formula": None, "backfill_depth": "1", "strict_ordering": "True ALL"}
SJF = dict(FCFS, job_sort_formula="-walltime")


def test_policy_effect_replays_the_history_since_the_last_change(conn) -> None:
    _store(conn, 3, 40_000, SJF, FCFS)
    last = conn.execute(sa.text("SELECT max(etime) FROM finished_jobs")).scalar()
    until = last + dt.timedelta(seconds=1)
    out = api.policy_effect(conn, 16, until=until)
    assert out["current_policy"] == "fcfs-bf1" and out["previous_policy"] == "-walltime-bf1"
    since = dt.datetime.fromisoformat(out["since"]).timestamp()
    assert since == BASE + 40_000
    stored = conn.execute(
        sa.text(
            "SELECT count(*) FROM finished_jobs WHERE etime >= :s AND etime < :u AND ncpus <= 16"
        ),
        {"s": dt.datetime.fromtimestamp(since, UTC), "u": until},
    ).scalar()
    assert out["jobs"] == stored > 50
    assert out["wider_than_machine"] > 0
    real = out["rows"][0]["real"]
    assert 0 < real["mean_wait_h"] <= 1.0  # the stored starts: 0 to 1 h after arrival
    assert out["fit"]["jobs"] == out["jobs"]
    # the last half day only
    recent = api.policy_effect(conn, 16, until=until, days=0.5)
    assert 0 < recent["jobs"] < out["jobs"]


def test_policy_effect_without_records_says_what_records_them(conn) -> None:
    assert "no policy recorded" in api.policy_effect(conn, 16)["note"]


STRICT = dict(FCFS, backfill_depth="0")


@pytest.mark.parametrize(
    "before, after, state",
    [(FCFS, SJF, "WARNING"), (STRICT, FCFS, "OK")],
    ids=["sjf-after-fcfs-breaks", "backfilling-after-strict-holds"],
)
def test_status_guard_warns_with_the_way_back_and_never_reverts(
    fresh_dsn, tmp_path, capsys, monkeypatch, before, after, state
) -> None:
    """On 384 processors SJF makes the long jobs' p95 wait worse than FCFS on the same jobs
    (a WARNING naming the revert); turning backfilling on after strict FCFS breaks nothing."""
    from softwalltime.cli import main
    from softwalltime.db import engine as db

    span = 300 * 600  # the stored jobs end before now: the guard's "last 7 days"
    base = int(dt.datetime.now(UTC).timestamp()) - span - 2 * 3600
    engine = db.make_engine(fresh_dsn, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        _store(conn, 3, 40_000, before, after, base=base)
    home = tmp_path / "pbs_home"
    (home / "server_logs").mkdir(parents=True)
    monkeypatch.setenv("PBS_HOME", str(home))
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({
        "pbs_exec": str(tmp_path / "nopbs"), "dsn": fresh_dsn, "status_guard_procs": 384,
        "status_guard_days": 7,
    }))  # fmt: skip
    main(["--config", str(cfg), "status", "--json"])
    out = json.loads(capsys.readouterr().out)
    [guard] = [c for c in out["checks"] if c["name"] == "policy guard"]
    assert guard["state"] == state, guard
    broken = guard["metrics"]["softwalltime_policy_guard_broken"]
    if state == "WARNING":
        assert "softwalltime policy revert --yes" in guard["summary"]
        assert "under the previous policy" in guard["summary"] and broken >= 1
    else:
        assert "holds" in guard["summary"] and broken == 0
    with engine.connect() as conn:  # the guard changed nothing
        records = conn.execute(sa.text("SELECT count(*) FROM policy_changes")).scalar()
    engine.dispose()
    assert records == 1
