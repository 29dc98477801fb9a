"""``softwalltime db check`` against a real database holding rows an older ingester stored."""

from __future__ import annotations

import datetime as dt
import json

import psycopg2
import pytest

from softwalltime import accounting as acct
from softwalltime import cli
from softwalltime.cli import dbcheck

UTC = dt.timezone.utc
CTIME = dt.datetime(2025, 4, 2, 13, 0, tzinfo=UTC)
START = CTIME + dt.timedelta(minutes=5)
END = START + dt.timedelta(hours=1)
_GOOD = {
    "server": "pbs01",
    "username": "u",
    "ctime": CTIME,
    "started_at": START,
    "ended_at": END,
    "walltime_s": 7200,
    "runtime_s": 3600,
    "ncpus": 8,
    "ngpus": 0,
    "run_count": 1,
    "mem_bytes": 4 << 30,
}
RUNTIME = "resources_used.walltime negative or over 10 years"
NCPUS = "Resource_List.ncpus below 1 or over 10^8"
OVER = "resources_used.walltime over end - start"
ZERO = "resources_used.walltime 0 for a run over 60 s"
# Rows as an ingester without the rules stored them, and the rules each breaks.
BAD_JOBS = [
    ({"runtime_s": -5}, {RUNTIME}),
    ({"runtime_s": 2**31 - 1}, {RUNTIME, OVER}),
    ({"walltime_s": -60}, {"Resource_List.walltime negative or over 10 years"}),
    ({"ncpus": 0}, {NCPUS}),
    ({"ncpus": -8}, {NCPUS}),
    ({"ngpus": -1}, {"Resource_List.ngpus negative or over 10^8"}),
    ({"run_count": -1}, {"run_count negative or over 2^31 - 1"}),
    ({"mem_bytes": -1}, {"Resource_List.mem beyond 2^63 - 1 bytes"}),
    ({"started_at": END + dt.timedelta(hours=1)}, {"end before start"}),
    ({"started_at": CTIME - dt.timedelta(hours=1)}, {"start before ctime"}),
    ({"started_at": None, "ended_at": CTIME - dt.timedelta(seconds=1)}, {"end before ctime"}),
    ({"ended_at": dt.datetime(2100, 1, 2, tzinfo=UTC)}, {"end before 1970 or after 2099"}),
    # issue 32: 10 h used in a 1 h run; none used in a 1 h run
    ({"runtime_s": 36000}, {OVER}),
    ({"runtime_s": 0}, {ZERO}),
]


def _insert(dsn: str, table: str, rows: list[dict]) -> None:
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            for row in rows:
                cols = ", ".join(row)  # column names: constants of this test
                marks = ", ".join(["%s"] * len(row))
                cur.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", list(row.values()))
        conn.commit()
    finally:
        conn.close()


def _job(seq: int, changes: dict) -> dict:
    return {**_GOOD, "job_id": f"{seq}.pbs01", "job_seq": seq, **changes}


def _rerun(seq: int, changes: dict) -> dict:
    row = {k: v for k, v in _job(seq, changes).items() if k in acct.RERUN_COLUMNS}
    return {**row, "run_count": row.get("run_count", 1)}


def _check(capsys, dsn: str, *args: str) -> tuple[int, str, str]:
    code = cli.main(["--dsn", dsn, "db", "check", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def stored(fresh_dsn: str) -> str:
    jobs = [_job(1, {}), _job(2, {})] + [_job(100 + i, c) for i, (c, _) in enumerate(BAD_JOBS)]
    _insert(fresh_dsn, "finished_jobs", jobs)
    reruns = [_rerun(1, {}), _rerun(2, {"runtime_s": -1}), _rerun(3, BAD_JOBS[8][0])]
    _insert(fresh_dsn, "job_reruns", reruns)
    return fresh_dsn


def test_a_clean_history_exits_0(capsys, fresh_dsn):
    _insert(fresh_dsn, "finished_jobs", [_job(1, {}), _job(2, {"started_at": None})])
    code, out, err = _check(capsys, fresh_dsn)
    assert code == 0, err
    assert out.splitlines() == [
        "finished_jobs: 2 rows, none impossible",
        "job_reruns: 0 rows, none impossible",
    ]


def test_each_rule_counts_its_rows_with_examples_and_exits_1(capsys, stored):
    code, out, err = _check(capsys, stored, "--json", "--examples", "5")
    assert code == 1
    assert f"{len(BAD_JOBS) + 2:,} stored row(s) hold values the ingester refuses" in err
    report = json.loads(out)
    jobs, reruns = report["tables"]
    assert (jobs["table"], jobs["rows"], jobs["impossible_rows"]) == (
        "finished_jobs",
        len(BAD_JOBS) + 2,
        len(BAD_JOBS),
    )
    expected: dict[str, list[str]] = {}
    for i, (_, rules) in enumerate(BAD_JOBS):
        for rule in rules:
            expected.setdefault(rule, []).append(f"{100 + i}.pbs01")
    found = {r["rule"]: sorted(r["examples"]) for r in jobs["rules"] if r["rows"]}
    assert found == {rule: sorted(ids) for rule, ids in expected.items()}
    assert all(r["rows"] == len(r["examples"]) for r in jobs["rules"])
    rerun_rules = {r["rule"]: r["examples"] for r in reruns["rules"] if r["rows"]}
    assert rerun_rules == {RUNTIME: ["2.pbs01"], "end before start": ["3.pbs01"]}
    assert report["impossible_rows"] == len(BAD_JOBS) + 2


def test_the_text_report_shows_counts_conditions_and_a_few_ids(capsys, stored):
    code, out, _ = _check(capsys, stored, "--examples", "1")
    assert code == 1
    lines = out.splitlines()
    assert (
        lines[0]
        == f"finished_jobs: {len(BAD_JOBS)} of {len(BAD_JOBS) + 2} rows hold impossible values"
    )
    at = lines.index(f"          2  {RUNTIME}  [(runtime_s < 0 OR runtime_s > 315360000)]")
    assert lines[at + 1] == "             e.g. 100.pbs01"  # newest end first, then by id
    assert "          1  end before start  [ended_at < started_at]" in lines
    assert lines[-5] == "job_reruns: 2 of 3 rows hold impossible values"


def test_the_rules_are_the_ingesters():
    """Every bound of a stored field and every time order is checked, under the name the
    ingester counts it by, with the bound's own values."""
    names = [r.name for r in dbcheck.rules_for(acct.FINISHED_JOB_COLUMNS)]
    stored = [b.rule for b in acct.FIELD_BOUNDS if b.column] + [o.rule for o in acct.TIME_ORDER]
    stored += [c.rule for c in acct.RUN_CHECKS] + [acct.WALL_CHECK.rule]  # issue 52
    assert names == stored
    assert acct.WALL_CHECK.rule not in [r.name for r in dbcheck.rules_for(acct.RERUN_COLUMNS)]
    ncpus = next(r for r in dbcheck.rules_for(acct.FINISHED_JOB_COLUMNS) if r.name == NCPUS)
    assert sorted(ncpus.params.values()) == [1, 10**8]


def test_a_database_without_the_schema_says_how_to_fix(capsys, empty_dsn):
    code, _, err = _check(capsys, empty_dsn)
    assert code == 1
    assert "run 'softwalltime db upgrade' first" in err and "Traceback" not in err
