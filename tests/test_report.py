"""``softwalltime report``: its numbers against independent SQL, its refusals, its page.

The demo history is the CERIT-SC 2013 trace replayed through predictor v3 from 2013-02-01
(softwalltime.report.synthetic), loaded once per module into its own database.
"""

import datetime as dt
import json
import os

import pytest
import sqlalchemy as sa
from helpers_history import add_jobs

from softwalltime.cli import main
from softwalltime.db import engine as db
from softwalltime.report import NothingToReportError, build, html, synthetic
from softwalltime.report.queries import CLASSES, Scope, materialise, queue_fit, under_estimates

DEPLOYED = synthetic.DEFAULT_DEPLOYED_AT
CLASS = (
    "CASE WHEN runtime_s <= 7200 THEN 'short' WHEN runtime_s <= 86400 THEN 'medium' ELSE 'long' END"
)


@pytest.fixture(scope="module")
def demo_dsn(pg_server, template_db):
    name = f"swt_report_{os.getpid()}"
    dsn = pg_server.create_database(name, template=template_db)
    engine = db.make_engine(dsn, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        synthetic.load(conn)
    engine.dispose()
    yield dsn
    pg_server.drop_database(name)


@pytest.fixture(scope="module")
def demo(demo_dsn):
    engine = db.make_engine(demo_dsn, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        data, meta = build.make_report(conn)
        deployed = conn.execute(
            sa.text("SELECT min(ctime) FROM finished_jobs WHERE soft_walltime_s IS NOT NULL")
        ).scalar()
    yield data, meta, engine, deployed
    engine.dispose()


def _sql(engine, statement, **params):
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.text(statement), params)]


@pytest.mark.slow
def test_synthetic_history_has_soft_walltimes_only_after_deployment(demo):
    _, _, engine, deployed = demo
    [(before_soft, after_soft, over_wall)] = _sql(
        engine,
        "SELECT count(*) FILTER (WHERE ctime < :d AND soft_walltime_s IS NOT NULL),"
        " count(*) FILTER (WHERE ctime >= :d AND soft_walltime_s IS NOT NULL),"
        " count(*) FILTER (WHERE soft_walltime_s > walltime_s) FROM finished_jobs",
        d=DEPLOYED,
    )
    assert before_soft == 0 and over_wall == 0
    assert after_soft > 10000
    assert deployed >= DEPLOYED


def test_deployment_found_and_synthetic_said(demo):
    data, meta, _, deployed = demo
    assert meta["deployed_at"] == deployed.isoformat()
    assert meta["deployed_how"] == "the first job with a soft walltime"
    assert data["totals"]["synthetic"] == data["totals"]["jobs"]
    page = html.render(data, meta)
    assert "Synthetic data: " in page and "replayed through predictor v3" in page


def test_per_class_medians_and_under_estimates_equal_independent_sql(demo):
    data, _, engine, deployed = demo
    expected = {
        cls: (wall, soft, under)
        for cls, wall, soft, under in _sql(
            engine,
            f"SELECT {CLASS}, percentile_cont(0.5) WITHIN GROUP"
            " (ORDER BY (walltime_s - runtime_s) / 3600.0),"
            " percentile_cont(0.5) WITHIN GROUP (ORDER BY (soft_walltime_s - runtime_s) / 3600.0),"
            " 100.0 * count(*) FILTER (WHERE runtime_s > soft_walltime_s) / count(*)"
            " FROM finished_jobs WHERE ctime >= :d AND soft_walltime_s IS NOT NULL"
            " AND walltime_s > 0 AND runtime_s IS NOT NULL GROUP BY 1",
            d=deployed,
        )
    }
    got = {r["cls"]: r for r in data["by_class"] if r["after"]}
    assert set(got) == set(expected) == {"short", "medium", "long"}
    for cls, (wall, soft, under) in expected.items():
        assert got[cls]["median_wall_error_h"] == pytest.approx(wall, abs=1e-9), cls
        assert got[cls]["median_soft_error_h"] == pytest.approx(soft, abs=1e-9), cls
        assert got[cls]["under_pct"] == pytest.approx(float(under), abs=1e-9), cls
    # The headline's mean absolute errors, against independent SQL too.
    mae = dict(
        (cls, (wall, soft))
        for cls, wall, soft in _sql(
            engine,
            f"SELECT {CLASS}, avg(abs(walltime_s - runtime_s)) / 3600.0,"
            " avg(abs(soft_walltime_s - runtime_s)) / 3600.0"
            " FROM finished_jobs WHERE ctime >= :d AND soft_walltime_s IS NOT NULL"
            " AND walltime_s > 0 AND runtime_s IS NOT NULL GROUP BY 1",
            d=deployed,
        )
    )
    for cls, (wall, soft) in mae.items():
        assert got[cls]["wall_mae_h"] == pytest.approx(float(wall), abs=1e-9), cls
        assert got[cls]["soft_mae_h"] == pytest.approx(float(soft), abs=1e-9), cls
    # Soft walltimes of the replayed v3 beat the users' walltimes in every class.
    for r in got.values():
        assert abs(r["median_soft_error_h"]) < r["median_wall_error_h"]


def test_mean_wait_per_class_before_and_after_equal_independent_sql(demo):
    data, _, engine, deployed = demo
    expected = {
        (cls, after): wait
        for cls, after, wait in _sql(
            engine,
            f"SELECT {CLASS}, ctime >= :d, avg(extract(epoch FROM started_at - ctime)) / 3600"
            " FROM finished_jobs WHERE walltime_s > 0 AND runtime_s IS NOT NULL"
            " AND (ctime < :d OR soft_walltime_s IS NOT NULL) GROUP BY 1, 2",
            d=deployed,
        )
    }
    got = {(r["cls"], r["after"]): r["mean_wait_h"] for r in data["by_class"]}
    assert len(got) == 6 and set(got) == set(expected)
    for key, wait in expected.items():
        assert got[key] == pytest.approx(float(wait), rel=1e-12), key


def test_share_of_users_improved_equals_independent_sql(demo):
    data, _, engine, deployed = demo
    [(users, improved)] = _sql(
        engine,
        "SELECT count(*), count(*) FILTER (WHERE w > s) FROM ("
        " SELECT username, sum(abs(walltime_s - runtime_s)) AS w,"
        " sum(abs(soft_walltime_s - runtime_s)) AS s FROM finished_jobs"
        " WHERE ctime >= :d AND soft_walltime_s IS NOT NULL GROUP BY username) per_user",
        d=deployed,
    )
    summary = data["users"]["summary"]
    assert summary["users"] == users == len(data["users"]["per_user"])
    assert summary["improved_pct"] == pytest.approx(100.0 * improved / users, abs=1e-9)
    assert 50 < summary["improved_pct"] < 100


def test_heatmap_shares_cover_every_job_once(demo):
    data, _, _, _ = demo
    t = data["totals"]
    for axis in ("runtime", "walltime"):
        before = sum(r["jobs"] for r in data["heatmaps"] if r["axis"] == axis and not r["after"])
        after = sum(r["jobs"] for r in data["heatmaps"] if r["axis"] == axis and r["after"])
        assert (before, after) == (t["before"], t["after_soft"])


def test_scope_filters_are_bound_values(demo_dsn, capsys):
    queue = "q_2h'; DROP TABLE finished_jobs; --"
    code = main(["--dsn", demo_dsn, "report", "--queue", queue, "--json"])
    assert code == 1
    err = capsys.readouterr().err
    assert "no finished jobs" in err and "in queue q_2h'; DROP" in err
    code = main(["--dsn", demo_dsn, "report", "--queue", "q_2h", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and {r["queue"] for r in out["by_queue"]} == {"q_2h"}


def test_cli_writes_the_page_and_json(demo_dsn, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["--dsn", demo_dsn, "report", "--out", str(out)]) == 0
    page = out.read_text()
    assert page.count("<svg") >= 10 and page.count("<figcaption>") == 8
    # Self-contained: nothing fetched (the only URL is the SVG namespace).
    assert "src=" not in page and "href=" not in page
    assert page.replace("http://www.w3.org/2000/svg", "").count("http") == 0
    capsys.readouterr()
    assert main(["--dsn", demo_dsn, "report", "--json", "--since", "2013-03-01"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["meta"]["scope"]["since"] == "2013-03-01T00:00:00+00:00"
    assert {r["month"] for r in data["error_by_month_class"]} == {"2013-03", "2013-04"}


def test_empty_database_is_one_line_and_exit_1(fresh_dsn, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["--dsn", fresh_dsn, "report", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["softwalltime: error: no finished jobs with a walltime and a run time in the"
                   " history"]  # fmt: skip
    assert not out.exists()


def test_pre_deployment_database_says_so(fresh_dsn, capsys):
    add_jobs(fresh_dsn, "alice", [(600, 3600, 1000), (700, 3600, 2000)])
    assert main(["--dsn", fresh_dsn, "report", "--json"]) == 1
    err = capsys.readouterr().err
    assert "no job has a soft walltime in the history: soft walltimes were not deployed" in err
    assert "(2 finished jobs)" in err
    assert main(["--dsn", fresh_dsn, "report", "--json", "--deployed-at", "2030-01-01"]) == 1
    assert "nothing to compare yet (2 jobs before)" in capsys.readouterr().err


def _job(seq, queue, wall, soft, run, ctime):
    end = ctime + dt.timedelta(seconds=run + 60)
    return {
        "server": "s", "job_id": f"{seq}.s", "ctime": ctime, "job_seq": seq, "username": "u",
        "queue": queue, "walltime_s": wall, "soft_walltime_s": soft, "runtime_s": run,
        "started_at": ctime + dt.timedelta(seconds=60), "ended_at": end, "ncpus": 1,
    }  # fmt: skip


def test_extensions_and_shorter_queue_on_hand_made_jobs(conn):
    from softwalltime.db.schema import finished_jobs

    t0 = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
    conn.execute(
        sa.insert(finished_jobs),
        [
            _job(1, "short", 3600, None, 100, t0 - dt.timedelta(days=1)),  # before: limit 1 h
            _job(2, "long", 86400, 1800, 1000, t0),  # fits "short"
            _job(3, "long", 86400, 1000, 2500, t0),  # 2 extensions (2000, 3000)
            _job(4, "long", 86400, 7200, 7000, t0),  # does not fit "short"
            _job(5, "long", 86400, 1000, 90000, t0),  # capped at walltime: 86 extensions
        ],
    )
    materialise(conn, Scope(deployed_at=t0))
    ext = {r["extensions"]: r["jobs"] for r in under_estimates(conn)["extensions"]}
    assert ext == {0: 2, 2: 1, 5: 1}
    deepest = under_estimates(conn)["deepest"]
    assert [r["job_id"] for r in deepest] == ["5.s", "3.s"]
    fit = {r["queue"]: r for r in queue_fit(conn)}
    assert fit["long"]["jobs"] == 4 and fit["long"]["fit_shorter"] == 3
    assert fit["long"]["usual_target"] == "short" and fit["long"]["limit_s"] == 86400
    with pytest.raises(NothingToReportError, match="on server other"):
        build.make_report(conn, server="other")


def test_two_connections_give_the_numbers_of_one(demo):
    """In a REPEATABLE READ transaction that wrote nothing, the figures come from three
    connections (one snapshot); the numbers are those of one connection."""
    data, _, engine, _ = demo
    timings = {}
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
        both, _ = build.make_report(conn, timings=timings)
    assert {"materialise (2)", "materialise (3)", "heatmaps (3)"} <= set(timings)
    assert "materialise (2)" not in _timings_of_one(engine)
    assert json.loads(build.to_json(both, {})) == json.loads(build.to_json(data, {}))
    assert [(r["cls"], r["after"]) for r in both["by_class"]] == [
        (c, a) for c in CLASSES for a in (False, True)
    ]


def _timings_of_one(engine):
    timings = {}
    with engine.connect() as conn:  # READ COMMITTED: one connection
        build.make_report(conn, timings=timings)
    return timings


def test_second_connection_reads_the_first_ones_snapshot(fresh_dsn):
    from softwalltime.db.schema import finished_jobs

    t0 = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
    engine = db.make_engine(fresh_dsn, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as setup:
            setup.execute(sa.insert(finished_jobs), [
                _job(1, "short", 3600, None, 100, t0 - dt.timedelta(days=1)),
                _job(2, "long", 86400, 1800, 1000, t0),
            ])  # fmt: skip
        with engine.connect() as conn:
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
            conn.execute(sa.text("SELECT count(*) FROM finished_jobs"))  # the snapshot
            with engine.begin() as other:  # committed after it: invisible to the report
                other.execute(sa.insert(finished_jobs), [
                    _job(3, "long", 86400, 1000, 2500, t0 + dt.timedelta(hours=1)),
                    _job(4, "short", 3600, None, 100, t0 - dt.timedelta(days=2)),
                ])  # fmt: skip
            timings = {}
            data, _ = build.make_report(conn, timings=timings)
    finally:
        engine.dispose()
    assert "heatmaps (3)" in timings and "by_queue (2)" in timings
    assert (data["totals"]["before"], data["totals"]["after_soft"]) == (1, 1)
    for axis in ("runtime", "walltime"):
        jobs = [r["jobs"] for r in data["heatmaps"] if r["axis"] == axis]
        assert sum(jobs) == 2, axis
    assert sum(r["jobs"] for r in data["by_queue"]) == 1


def test_error_quantiles_by_class_equal_independent_sql_and_fig7_reads_them(demo):
    """Figure 7 (left): per runtime class after deployment, the error box plots."""
    data, meta, engine, deployed = demo
    expected = {
        cls: (wall, soft)
        for cls, wall, soft in _sql(
            engine,
            f"SELECT {CLASS}, percentile_cont(ARRAY[0.05, 0.25, 0.5, 0.75, 0.95]) WITHIN GROUP"
            " (ORDER BY walltime_s - runtime_s), percentile_cont(ARRAY[0.05, 0.25, 0.5, 0.75,"
            " 0.95]) WITHIN GROUP (ORDER BY soft_walltime_s - runtime_s) FROM finished_jobs"
            " WHERE ctime >= :d AND soft_walltime_s IS NOT NULL AND walltime_s > 0"
            " AND runtime_s IS NOT NULL GROUP BY 1",
            d=deployed,
        )
    }
    got = {r["cls"]: r for r in data["by_class"] if r["after"]}
    for cls, (wall, soft) in expected.items():
        assert got[cls]["wall_q"] == pytest.approx([v / 3600 for v in wall], abs=1e-4), cls
        assert got[cls]["soft_q"] == pytest.approx([v / 3600 for v in soft], abs=1e-4), cls
        assert got[cls]["median_wall_error_h"] == pytest.approx(wall[2] / 3600, abs=1e-12)
    assert all(r["soft_q"] is None for r in data["by_class"] if not r["after"])
    page = html.render(data, meta)
    shares = [100.0 * got[c]["jobs"] / sum(r["jobs"] for r in got.values()) for c in CLASSES]
    assert "By run time: short {:.0f} %, medium {:.0f} %, long {:.0f} %".format(*shares) in page
    assert "in queues with a limit above 24 h: " in page


def test_a_failed_other_connection_leaves_its_figures_to_the_first(demo, monkeypatch):
    data, _, engine, _ = demo
    real = build.queries.materialise

    def materialise(conn, scope, names=None):
        if names == build.queries.GROUPS[1]:
            raise sa.exc.OperationalError("connect", {}, Exception("too many connections"))
        return real(conn, scope, names)

    monkeypatch.setattr(build.queries, "materialise", materialise)
    timings = {}
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
        got, _ = build.make_report(conn, timings=timings)
    assert "heatmaps (3)" in timings and "by_queue (2)" not in timings
    assert json.loads(build.to_json(got, {})) == json.loads(build.to_json(data, {}))


@pytest.mark.slow
def test_cli_out_never_replaces_what_is_not_a_regular_file(demo_dsn, tmp_path, capsys):
    """Issue 32: as root, --out /dev/null became a 173 kB regular file and a symlink at the
    path was replaced. Now a symlink, a fifo or a directory is refused: one line, exit 1."""
    secret = tmp_path / "secret"
    secret.write_text("root's\n")
    link = tmp_path / "r.html"
    link.symlink_to(secret)
    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    for path, kind in ((link, "a symlink"), (fifo, "a fifo"), (tmp_path, "a directory")):
        assert main(["--dsn", demo_dsn, "report", "--out", str(path)]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [
            f"softwalltime: error: cannot write {path}: it is {kind}, not a regular file;"
            " give a file's path"
        ]
    assert link.is_symlink() and secret.read_text() == "root's\n"
    assert fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.html", "r.html", "secret"]


def test_cli_out_keeps_the_mode_honours_the_umask_and_dash_is_stdout(demo_dsn, tmp_path, capsys):
    """Issue 32: the page was always chmod 0644, world-readable whatever the umask."""
    new = tmp_path / "new.html"
    old_mask = os.umask(0o077)
    try:
        assert main(["--dsn", demo_dsn, "report", "--out", str(new)]) == 0
    finally:
        os.umask(old_mask)
    assert oct(new.stat().st_mode & 0o777) == oct(0o600)
    kept = tmp_path / "kept.html"
    kept.write_text("old")
    kept.chmod(0o640)
    assert main(["--dsn", demo_dsn, "report", "--out", str(kept)]) == 0
    assert oct(kept.stat().st_mode & 0o777) == oct(0o640) and "<svg" in kept.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.html", "new.html"]
    capsys.readouterr()
    assert main(["--dsn", demo_dsn, "report", "--out", "-"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("<!DOCTYPE html>") and out.count("<svg") >= 10
    assert err.startswith("-: ") and " jobs, " in err
    assert not (tmp_path / "-").exists()


def test_an_empty_schema_says_to_run_db_upgrade(empty_dsn, tmp_path, capsys):
    """Issue 33: a database the migrations never ran on was a 58-line traceback."""
    out = tmp_path / "r.html"
    assert main(["--dsn", empty_dsn, "report", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("softwalltime: error: the softwalltime tables do not exist")
    assert "run 'softwalltime db upgrade' first" in err[0]
    assert not out.exists()


def test_json_goes_to_out_when_given(demo_dsn, tmp_path, capsys):
    """Issue 33: --json --out FILE printed the JSON and ignored --out."""
    out = tmp_path / "r.json"
    assert main(["--dsn", demo_dsn, "report", "--json", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["totals"]["jobs"] > 1000 and "by_class" in data
    assert printed.startswith(f"{out}: {data['totals']['jobs']} jobs")


def test_times_round_to_seconds_and_minutes_under_an_hour():
    """Issue 33: a 10 s under-estimate read "0 min"."""
    cases = {
        10 / 3600: "10 s",
        -10 / 3600: "-10 s",
        0.0: "0 s",
        750 / 3600: "12 min 30 s",
        -(720 / 3600): "-12 min",
        3599.6 / 3600: "1.0 h",
        1.25: "1.2 h",
        None: "-",
    }
    for hours, text in cases.items():
        assert html._h(hours) == text, hours


def _few_jobs(conn, n, long_name=False):
    """``n`` jobs after a deployment: one user, each run 10 s past its soft walltime."""
    from softwalltime.db.schema import finished_jobs

    t0 = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
    user = "a-user-with-a-very-long-name-indeed-" * 2 if long_name else "u"
    jobs = [_job(1, "q", 3600, None, 300, t0 - dt.timedelta(days=1))]
    jobs += [_job(i + 2, "q", 3600, 600, 610, t0 + dt.timedelta(hours=i)) for i in range(n)]
    for job in jobs:
        job["username"] = user
    conn.execute(sa.insert(finished_jobs), jobs)
    data, meta = build.make_report(conn, parallel=False)
    return data, meta, user


def test_small_data_is_greyed_and_never_contradicts_itself(conn):
    """Issue 33: with 5 jobs after deployment the page spoke with confidence ("more accurate
    for 100.0 % of 1 users"), said "No user has under-estimated soft walltimes." beside
    100 % under-estimated, and a 10 s error read "0 min"."""
    data, meta, _ = _few_jobs(conn, 5)
    page = html.render(data, meta)
    assert html.TOO_FEW == "too few jobs (fewer than 30)"
    # the verdict at the top, greyed, then the per-user reading, greyed
    top = page.index('id="verdict"')
    assert top < page.index("Summary (after deployment)")
    verdict = page[top : page.index("</div>", top)]
    assert verdict.count('<p class="few">') == 3 and verdict.count(html.TOO_FEW) == 3
    assert "100.0 % of those jobs ran past their soft walltime" in verdict
    assert "more accurate for 100.0 % of 1 user;" in page
    per_user = page[page.index("Per-user improvement") :]
    assert per_user.index('class="reading few"') < per_user.index("</figcaption>")
    assert '<tr class="few"' in page  # the summary's row of 5 short jobs
    assert "No user has under-estimated" not in page
    assert "1 user with fewer jobs (5 jobs in all) had under-estimates: too few" in page
    # a 10 s under-estimate is 10 s, a 5 min error 5 min
    assert "<td>10 s</td>" in page
    # the headline: mean absolute errors beside the under-estimates
    (row,) = [r for r in data["by_class"] if r["after"]]
    assert row["soft_mae_h"] == pytest.approx(10 / 3600)
    assert row["wall_mae_h"] == pytest.approx(2990 / 3600)
    assert "<td>10 s</td><td>100.0 %</td>" in page.replace("<td>49 min 50 s</td>", "")


def test_enough_jobs_are_not_greyed_and_long_names_are_cut_with_a_tooltip(conn):
    data, meta, user = _few_jobs(conn, 40, long_name=True)
    page = html.render(data, meta)
    verdict = page[page.index('id="verdict"') :]
    verdict = verdict[: verdict.index("</div>")]
    # accuracy and under-estimates rest on 40 jobs; waits on 1 job before: greyed
    assert verdict.count('<p class="few">') == 1 and "Waits:" in verdict.split('"few">')[1]
    assert 'class="reading few"' not in page.split("Per-user improvement")[1].split("<h2>")[0]
    cut = user[: html.NAME_CHARS - 1] + "…"
    assert f'<td class="l" title="{user}">{cut}</td>' in page
    assert f">{user}<" not in page


def test_the_report_from_python_is_the_commands(demo_dsn, capsys):
    from softwalltime import api

    found = api.report(demo_dsn, queue="q_2h")
    assert {r["queue"] for r in found.data["by_queue"]} == {"q_2h"}
    assert "<svg" in found.html() and found.as_json()["meta"] == found.meta
    assert main(["--dsn", demo_dsn, "report", "--queue", "q_2h", "--json"]) == 0
    printed, got = json.loads(capsys.readouterr().out), json.loads(found.to_json())
    for one in (printed, got):
        one["meta"].pop("generated_at")  # the second the figures were read
    assert printed == got
