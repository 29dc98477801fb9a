"""Replay rules and metrics on hand-built workloads whose answers are worked out by hand.

Expected soft walltimes follow the paper's algorithms (v1: mean of the last 2 run times;
v2: v1 + 900 s; v3: max(runtime/walltime) of the last 15 jobs x walltime + 900 s; all capped
at the walltime). Values are chosen so that no rounding is involved.
"""

from __future__ import annotations

import json
import random
import struct
import zlib
from pathlib import Path

import pytest

from softwalltime import cli
from softwalltime.core.predict import PredictorParams, predict
from softwalltime.replay.evaluate import (
    BASELINE,
    Metrics,
    Replay,
    accuracy,
    format_table,
    metrics,
    replay,
    report_dict,
    runtime_class,
    skip_reason,
    summarize,
)
from softwalltime.replay.trace import SKIP_RUNTIME, SKIP_TIMES, SKIP_USER, SKIP_WALLTIME, TraceJob

H = 3600
ALL = ("v1", "v2", "v3")


def job(user, submit, run, wall, wait=0):
    """A job that starts ``wait`` s after ``submit`` and ends ``run`` s later."""
    return TraceJob(user, submit, submit + wait, submit + wait + run, wall, run)


def softs(result, k):
    """Soft walltime of the k-th evaluated job, per predictor (baseline included)."""
    return {name: values[k] for name, values in result.soft_s.items()}


# --- metrics ---------------------------------------------------------------------------


def test_accuracy_is_the_smaller_ratio_and_one_when_both_are_zero():
    assert accuracy(3600, 7200) == 0.5
    assert accuracy(7200, 3600) == 0.5
    assert accuracy(0, 0) == 1.0
    assert accuracy(0, 100) == 0.0
    assert accuracy(100, 0) == 0.0
    assert accuracy(900, 900) == 1.0


def test_metrics_by_hand():
    # (soft, runtime): exact, 10 min under, 1 h under (bad), 2x over, both zero.
    soft = [3600, 3000, 3600, 7200, 0]
    run = [3600, 3600, 7200, 3600, 0]
    m = metrics(soft, run)
    assert m.jobs == 5
    assert m.under_pct == pytest.approx(40.0)  # 3000<3600, 3600<7200
    assert m.bad_under_pct == pytest.approx(20.0)  # only 3600 < 7200-1800
    accs = [1.0, 3000 / 3600, 0.5, 0.5, 1.0]
    assert m.mean_accuracy == pytest.approx(sum(accs) / 5)
    assert m.median_accuracy == pytest.approx(3000 / 3600)
    assert m.mae_hours == pytest.approx((0 + 600 + 3600 + 3600 + 0) / 5 / H)


def test_bad_underestimate_threshold_is_strictly_more_than_30_minutes():
    m = metrics([H, H - 1], [H + 1800, H + 1800])
    assert m.under_pct == 100.0
    assert m.bad_under_pct == 50.0  # exactly 30 min short is not "bad"


def test_median_of_an_even_count_is_the_mean_of_the_middle_two():
    m = metrics([100, 100, 100, 100], [100, 200, 400, 1000])  # accs 1, .5, .25, .1
    assert m.median_accuracy == pytest.approx((0.5 + 0.25) / 2)


def test_metrics_of_no_jobs_are_none():
    assert metrics([], []) == Metrics(0, None, None, None, None, None)
    with pytest.raises(ValueError):
        metrics([1], [])


@pytest.mark.parametrize(
    "run,cls",
    [
        (0, "short"),
        (2 * H, "short"),
        (2 * H + 1, "medium"),
        (24 * H, "medium"),
        (24 * H + 1, "long"),
    ],
)
def test_runtime_class_boundaries(run, cls):
    assert runtime_class(run) == cls


def test_summarize_splits_by_runtime_class():
    result = Replay(
        moment="submit",
        runtime_s=[H, 3 * H, 30 * H, 2 * H],
        walltime_s=[2 * H, 4 * H, 48 * H, 4 * H],
        soft_s={BASELINE: [2 * H, 4 * H, 48 * H, 4 * H], "v1": [H // 2, 3 * H, 24 * H, 4 * H]},
        skipped={},
    )
    rep = summarize(result)
    short = rep["v1"].by_class["short"]
    assert short.jobs == 2
    assert short.under_pct == 50.0  # 0.5 h < 1 h; 4 h >= 2 h
    assert short.bad_under_pct == 0.0  # 30 min short is not more than 30 min
    assert short.mae_hours == pytest.approx((0.5 + 2) / 2)
    assert short.mean_accuracy == pytest.approx((0.5 + 0.5) / 2)
    medium = rep["v1"].by_class["medium"]
    assert (medium.jobs, medium.under_pct, medium.mean_accuracy) == (1, 0.0, 1.0)
    long_ = rep["v1"].by_class["long"]
    assert (long_.jobs, long_.under_pct, long_.bad_under_pct) == (1, 100.0, 100.0)
    assert long_.mae_hours == pytest.approx(6.0)
    assert rep["v1"].overall.jobs == 4
    assert rep["v1"].overall.under_pct == 50.0
    assert rep[BASELINE].overall.under_pct == 0.0
    assert rep[BASELINE].by_class["long"].mean_accuracy == pytest.approx(30 / 48)


def test_an_empty_class_reports_zero_jobs_and_no_figures():
    result = Replay("submit", [H], [2 * H], {BASELINE: [2 * H]}, {})
    rep = summarize(result)
    assert rep[BASELINE].by_class["long"] == Metrics(0, None, None, None, None, None)
    assert "-" in format_table(report_dict("x", result, rep, {}))


# --- replay rules ----------------------------------------------------------------------


def test_no_history_means_soft_equals_walltime():
    result = replay([job("alice", 0, H, 10 * H), job("bob", 100, H, 5 * H)], ALL)
    for k, wall in enumerate([10 * H, 5 * H]):
        assert softs(result, k) == {BASELINE: wall, "v1": wall, "v2": wall, "v3": wall}


def test_predictions_from_the_users_finished_jobs():
    jobs = [
        job("alice", 0, H, 2 * H),  # ends 3600, usage 0.5
        job("alice", 0, 2 * H, 4 * H),  # ends 7200, usage 0.5
        job("bob", 0, 10, 20 * H),  # another user's job never counts
        job("alice", 10000, 5 * H, 10 * H),
    ]
    result = replay(jobs, ALL)
    assert softs(result, 3) == {
        BASELINE: 10 * H,
        "v1": (H + 2 * H) // 2,  # 5400
        "v2": (H + 2 * H) // 2 + 900,
        "v3": int(0.5 * 10 * H) + 900,  # 18900
    }


def test_soft_walltime_is_capped_at_the_walltime():
    jobs = [job("u", 0, 8 * H, 8 * H), job("u", 0, 8 * H, 8 * H), job("u", 9 * H, H, 2 * H)]
    result = replay(jobs, ALL)
    assert softs(result, 2) == {BASELINE: 2 * H, "v1": 2 * H, "v2": 2 * H, "v3": 2 * H}


def test_a_job_ending_exactly_at_the_instant_counts_and_one_ending_a_second_later_does_not():
    jobs = [
        job("u", 0, 4 * H, 8 * H),  # ends at 4 h: counts for a submit at 4 h
        job("u", 0, 4 * H + 1, 8 * H),  # ends 1 s later: does not
        job("u", 4 * H, 2 * H, 8 * H),
    ]
    result = replay(jobs, ALL)
    assert softs(result, 2)["v1"] == 4 * H  # the one job that had ended
    assert softs(result, 2)["v3"] == 4 * H + 900


@pytest.mark.parametrize("first_run,second_run", [(H, 3 * H), (3 * H, H)])
def test_among_equal_end_times_the_later_job_in_the_trace_is_more_recent(first_run, second_run):
    params = PredictorParams.create(v1_jobs=1)
    end = 5 * H
    jobs = [
        TraceJob("u", 0, end - first_run, end, 8 * H, first_run),
        TraceJob("u", 0, end - second_run, end, 8 * H, second_run),
        job("u", end, H, 8 * H),
    ]
    result = replay(jobs, ("v1",), params)
    assert softs(result, 2)["v1"] == second_run


def test_history_keeps_the_2_and_15_most_recent_jobs():
    # The oldest job used its whole walltime; the 15 after it used a quarter of theirs.
    jobs = [job("u", 0, 4 * H, 4 * H)]
    jobs += [job("u", 10 * H + k, H, 4 * H) for k in range(14)]
    jobs += [job("u", 20 * H, 2 * H, 8 * H)]  # 15th recent job (usage 0.25), ends 22 h
    jobs += [job("u", 30 * H, H, 40 * H)]
    result = replay(jobs, ALL)
    last = softs(result, len(jobs) - 1)
    assert last["v3"] == int(0.25 * 40 * H) + 900  # the usage-1.0 job is 16th: forgotten
    assert last["v1"] == (2 * H + H) // 2  # the last two: 2 h (ended 22 h) and 1 h
    with_16 = replay(jobs, ("v3",), PredictorParams.create(v3_jobs=16))
    assert softs(with_16, len(jobs) - 1)["v3"] == 40 * H  # 1.0 x walltime + 900, capped


def test_skipped_jobs_are_counted_by_reason_and_never_used_as_history():
    jobs = [
        job("u", 0, H, 0),  # walltime 0
        TraceJob("u", 0, 0, H, None, H),  # walltime unknown
        TraceJob("u", 0, 0, None, 4 * H, None),  # run time unknown
        TraceJob("u", 0, 0, -1, 4 * H, -1),  # run time -1
        TraceJob(None, 0, 0, H, 4 * H, H),  # no user
        TraceJob("u", None, None, None, 4 * H, H),  # no times
        job("u", 10 * H, H, 6 * H),
    ]
    result = replay(jobs, ALL)
    assert result.skipped == {SKIP_WALLTIME: 2, SKIP_RUNTIME: 2, SKIP_USER: 1, SKIP_TIMES: 1}
    assert len(result.runtime_s) == 1
    assert softs(result, 0)["v1"] == 6 * H  # nothing usable before it
    rep = report_dict("t", result, summarize(result), {"malformed line": 3})
    assert rep["jobs"] == 1
    assert rep["skipped"] == 9


def test_a_zero_run_time_job_is_kept_and_evaluated():
    result = replay([job("u", 0, 0, H), job("u", 10, H, 4 * H)], ALL)
    assert len(result.runtime_s) == 2
    assert softs(result, 1)["v2"] == 0 + 900  # mean run time 0 + reserve
    assert softs(result, 1)["v3"] == 0 * 4 * H + 900  # usage 0 -> reserve only


def test_moment_start_sees_jobs_that_ended_while_the_job_waited():
    jobs = [
        job("u", 0, 2 * H, 8 * H),  # ends at 2 h
        job("u", H, 4 * H, 8 * H, wait=2 * H),  # submitted at 1 h, starts at 3 h
    ]
    at_submit = replay(jobs, ALL, moment="submit")
    at_start = replay(jobs, ALL, moment="start")
    assert softs(at_submit, 1)["v1"] == 8 * H
    assert softs(at_start, 1)["v1"] == 2 * H
    assert softs(at_start, 1)["v3"] == int(2 / 8 * 8 * H) + 900  # usage 0.25 x 8 h + 15 min
    assert at_start.moment == "start"


def test_moment_start_skips_jobs_without_a_start_time():
    jobs = [TraceJob("u", 0, None, H, 2 * H, H), job("u", 0, H, 2 * H)]
    result = replay(jobs, ALL, moment="start")
    assert result.skipped == {SKIP_TIMES: 1}
    assert replay(jobs, ALL, moment="submit").skipped == {}  # only the instant must be known


def test_a_job_is_never_its_own_history():
    # Run time 0 at --moment start: the job ends at the very instant it is predicted.
    jobs = [job("u", 0, 0, 4 * H, wait=H)]
    result = replay(jobs, ALL, moment="start")
    assert softs(result, 0) == {BASELINE: 4 * H, "v1": 4 * H, "v2": 4 * H, "v3": 4 * H}


def test_self_exclusion_still_leaves_a_full_history():
    params = PredictorParams.create(v1_jobs=2, v3_jobs=2)
    jobs = [
        job("u", 0, 2 * H, 8 * H),  # ends 2 h
        job("u", 0, 4 * H, 8 * H),  # ends 4 h
        job("u", 5 * H, 0, 8 * H),  # predicted at 5 h and ends at 5 h
    ]
    result = replay(jobs, ("v1",), params, moment="submit")
    assert softs(result, 2)["v1"] == 3 * H  # both older jobs, not itself


def test_unknown_predictor_or_moment_is_rejected():
    with pytest.raises(ValueError, match="unknown predictor"):
        replay([], ("v9",))
    with pytest.raises(ValueError, match="moment"):
        replay([], ALL, moment="end")


# --- the command -----------------------------------------------------------------------

SWF_LINES = [
    "; UnixStartTime: 1356994800",
    # 1 submit wait run procs cpu mem reqp reqtime reqmem status user group ...
    "1 0 0 3600 1 -1 -1 1 7200 -1 1 7 1 -1 -1 -1 -1 -1",
    "2 0 0 7200 1 -1 -1 1 14400 -1 1 7 1 -1 -1 -1 -1 -1",
    "3 10000 0 18000 1 -1 -1 1 36000 -1 1 7 1 -1 -1 -1 -1 -1",
    "4 10000 0 90000 1 -1 -1 1 100000 -1 1 8 1 -1 -1 -1 -1 -1",
    "5 10000 0 100 1 -1 -1 1 -1 -1 1 8 1 -1 -1 -1 -1 -1",
]


@pytest.fixture()
def swf(tmp_path: Path) -> Path:
    path = tmp_path / "small.swf"
    path.write_text("\n".join(SWF_LINES) + "\n")
    return path


def test_json_output_has_the_documented_schema(swf, capsys):
    assert cli.main(["evaluate", "--json", str(swf)]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert set(doc) >= {"source", "moment", "jobs", "skipped", "predictors"}
    assert doc["source"] == str(swf)
    assert (doc["moment"], doc["jobs"], doc["skipped"]) == ("submit", 4, 1)
    assert list(doc["predictors"]) == [BASELINE, "v1", "v2", "v3", "calibrated"]
    keys = {"jobs", "under_pct", "bad_under_pct", "mean_accuracy", "median_accuracy", "mae_hours"}
    for name, obj in doc["predictors"].items():
        extra = {"target", "target_under_pct"} if name == "calibrated" else set()
        assert set(obj) == keys | {"by_class"} | extra
        assert set(obj["by_class"]) == {"short", "medium", "long"}
        for cls in obj["by_class"].values():
            assert set(cls) == keys
        assert obj["jobs"] == sum(c["jobs"] for c in obj["by_class"].values())
    v3 = doc["predictors"]["v3"]
    # Job 3 (5 h run, 10 h requested) gets 0.5 x 10 h + 15 min = 5.25 h: over by 15 min.
    assert v3["by_class"]["medium"]["jobs"] == 1
    assert v3["by_class"]["medium"]["mae_hours"] == pytest.approx(0.25)
    assert v3["by_class"]["long"]["jobs"] == 1


def test_predictors_option_and_moment_option(swf, capsys):
    assert (
        cli.main(["evaluate", "--json", "--predictors", "v3,v1", "--moment", "start", str(swf)])
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["predictors"]) == [BASELINE, "v3", "v1"]
    assert doc["moment"] == "start"


def test_table_output(swf, capsys):
    assert cli.main(["evaluate", str(swf)]) == 0
    out = capsys.readouterr().out
    assert "jobs evaluated: 4" in out
    assert "skipped: 1 (no requested walltime 1)" in out
    for title in ("all jobs", "short (<= 2 h)", "medium (2-24 h]", "long (> 24 h)"):
        assert title in out
    assert out.count("  v3 ") == 4


def test_the_man_page_states_the_replay_semantics(capsys):
    """The method is the man page's (issue 51: --help names it, in its paragraph)."""
    from softwalltime.cli import manpage

    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--help"])
    assert "man softwalltime-evaluate" in " ".join(capsys.readouterr().out.split())
    page = manpage.pages()["softwalltime-evaluate"]
    out = " ".join(manpage.render(page, {}, "2026-01-01").replace("\\-", "-").split())
    assert "ended at or before that instant" in out
    assert "ends come first" in out
    assert (
        "later in the trace (for PBS logs and --db: submitted later) counts as more recent" in out
    )
    assert "never in its own history" in out
    assert "requested walltime > 0 and a known run time >= 0" in out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["evaluate"], "nothing to evaluate"),
        (["evaluate", "--predictors", "v1,v4", "x.swf"], "unknown v4"),
        (["evaluate", "--db", "x.swf"], "not both"),
        (["evaluate", "/no/such/trace.swf"], "no such file"),
    ],
)
def test_bad_arguments_give_a_clear_error(argv, message, capsys):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "softwalltime: error:" in err
    assert message in err


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.slow
def test_plot_writes_non_trivial_pngs(swf, tmp_path, capsys):
    out_dir = tmp_path / "plots"
    assert cli.main(["evaluate", "--plot", str(out_dir), str(swf)]) == 0
    files = sorted(p.name for p in out_dir.iterdir())
    assert files == ["errors_by_class.png", "errors_sorted.png", "tradeoff.png"]
    for name in files:
        path = out_dir / name
        width, height = _png_size(path)
        assert width >= 800 and height >= 500
        assert path.stat().st_size > 20_000  # axes, curves and text, not a blank canvas
        # The image data must vary: decompress the IDAT stream and count distinct bytes.
        data = path.read_bytes()
        idat = b""
        pos = 8
        while pos < len(data):
            (length,) = struct.unpack(">I", data[pos : pos + 4])
            kind = data[pos + 4 : pos + 8]
            if kind == b"IDAT":
                idat += data[pos + 8 : pos + 8 + length]
            pos += 12 + length
        assert len(set(zlib.decompress(idat))) > 50


def _reference_replay(jobs, predictors, params, moment):
    """The replay rules applied literally, one job at a time (quadratic; small inputs only)."""
    valid = [(k, j) for k, j in enumerate(jobs) if skip_reason(j, moment) is None]
    out = {name: [] for name in predictors}
    for k, j in valid:
        instant = j.submit_s if moment == "submit" else j.start_s
        ended = [
            (o.end_s, m, o) for m, o in valid if m != k and o.user == j.user and o.end_s <= instant
        ]
        ended.sort(key=lambda x: (x[0], x[1]), reverse=True)  # most recent end first
        history = [(o.runtime_s, o.walltime_s) for _, _, o in ended]
        for name in predictors:
            out[name].append(predict(name, j.walltime_s, history, params).soft_walltime_s)
    return out


@pytest.mark.parametrize("moment", ["submit", "start"])
@pytest.mark.parametrize("seed", range(12))
def test_replay_matches_the_rules_applied_literally(seed, moment):
    rng = random.Random(seed)
    params = PredictorParams.create(v1_jobs=rng.choice([1, 2, 3]), v3_jobs=rng.choice([1, 4, 15]))
    jobs = []
    for _ in range(80):
        # Few users, coarse times and many zero waits/run times: ties everywhere.
        submit = rng.randrange(0, 40) * 600
        wait = rng.choice([0, 0, 600, 1200])
        run = rng.choice([0, 0, 600, 1800, 3600, rng.randrange(1, 20000)])
        wall = rng.choice([600, 3600, 7200, 86400, rng.randrange(1, 100000), 0])
        jobs.append(
            TraceJob(rng.choice("abc"), submit, submit + wait, submit + wait + run, wall, run)
        )
    result = replay(jobs, ALL, params, moment)
    expected = _reference_replay(jobs, ALL, params, moment)
    for name in ALL:
        assert result.soft_s[name] == expected[name], name


def test_cli_moments_match_the_replay_moments():
    from softwalltime.cli import evaluate as cli_evaluate
    from softwalltime.core import config
    from softwalltime.replay import evaluate

    assert cli_evaluate.MOMENTS == evaluate.MOMENTS
    # every predictor runs in the hook and in the replay (learned too, issue 31); evaluate's
    # default leaves learned out (it is slower), as before
    assert config.PREDICTORS == evaluate.PREDICTORS
    assert evaluate.DEFAULT_PREDICTORS == config.PREDICTORS[:-1]


def test_a_workload_with_nothing_to_evaluate_is_an_error_without_plots(tmp_path, capsys):
    # issue 9 item 15: this used to exit 0 with empty figures ("underestimated 0.0 %")
    path = tmp_path / "none.swf"
    path.write_text("1 0 0 100 1 -1 -1 1 -1 -1 1 3 1 -1 -1 1 -1 -1\n")  # no requested time
    assert cli.main(["evaluate", "--json", "--plot", str(tmp_path / "p"), str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "(no requested walltime: 1); nothing written" in err
    assert not (tmp_path / "p").exists()


def test_plot_without_matplotlib_says_how_to_install_it(swf, tmp_path, monkeypatch, capsys):
    import sys

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes "import matplotlib" fail
    assert cli.main(["evaluate", "--plot", str(tmp_path / "p"), str(swf)]) == 1
    assert "pip install 'softwalltime[plot]'" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


# --- the replay's parts, alone


def test_replay_classic_predicts_each_job_from_its_users_ended_jobs():
    from softwalltime.replay.evaluate import columns, replay_classic

    jobs = [
        job("alice", 0, H, 2 * H),  # ends 3600
        job("alice", 0, 2 * H, 4 * H),  # ends 7200
        job("alice", 10000, 5 * H, 10 * H),  # both ended
        job("alice", 10000, 5 * H, 10 * H),  # the same batch: the same predictions
        job("alice", 10000, 5 * H, 6 * H),  # same history, another walltime: not the memo's
        job("bob", 0, H, 2 * H),  # ends 3600
        job("bob", 3600, 0, 4 * H),  # ends at its own instant: not its own history
    ]
    cols, _skipped = columns(jobs)
    got = replay_classic(cols, ["v1", "v3"], PredictorParams.create())
    assert list(got) == ["v1", "v3"]
    assert got["v1"] == [2 * H, 4 * H, 5400, 5400, 5400, 2 * H, H]
    assert got["v3"] == [2 * H, 4 * H, 18900, 18900, 3 * H + 900, 2 * H, 2 * H + 900]
    assert replay_classic(cols, [], PredictorParams.create()) == {}


def test_calibrated_histories_keep_the_last_rows_and_their_walltime_classes():
    from softwalltime.core import calibrated as cal
    from softwalltime.replay.evaluate import CalibratedHistories

    h = CalibratedHistories(keep=3)
    assert h.of("u", 0) == [] and h.outcome("u", H, 1) == cal.outcome_of_usable(H, 1, [])
    entries = [(k, (k % 2 + 1) * H, 1) for k in range(10)]
    for entry in entries:
        h.add("u", entry)
    assert h.of("u", 0) == entries[::-1][:3]
    assert len(h.buffers["u"]) == 4  # the spare one
    for wall, same in h.by_wall["u"].items():
        assert same == [x for x in entries[::-1][:3] if x[1] == wall]
    # a job that ends at its own instant is not its own history until predicted
    own = (99, H, 1)
    h.add("u", own, own=7)
    assert h.of("u", 7) == entries[::-1][:3]  # the spare entry fills the gap
    assert h.of("u", 8) == [own] + entries[::-1][:2]
    h.predicted(7)
    assert h.of("u", 7) == [own] + entries[::-1][:2]


def test_calibrated_histories_outcome_is_memoised_until_the_history_moves():
    from softwalltime.core import calibrated as cal
    from softwalltime.replay.evaluate import CalibratedHistories

    h = CalibratedHistories(keep=3)
    for k in range(5):
        h.add("u", (600 + k, H, 2))
    first = h.outcome("u", H, 2)
    assert first == cal.outcome_of_usable(H, 2, h.of("u", -1))
    assert h.outcome("u", H, 2) is first  # the same batch: not computed again
    assert h.outcome("u", H, 4) is not first  # other processors
    h.add("u", (3000, H, 2))  # a newer end: computed again
    again = h.outcome("u", H, 2)
    assert again is not first and again == cal.outcome_of_usable(H, 2, h.of("u", -1))
