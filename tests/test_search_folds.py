"""The formula search across folds in time (softwalltime.replay.folds, ``simulate --search
--folds K``)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import List, Optional

import pytest

from softwalltime import api
from softwalltime.replay import folds
from softwalltime.replay import formula as fm
from softwalltime.replay import formula_search as fs
from softwalltime.replay.runs import load


def _waits(bsld: float, wide95: float = 1.0, mx: float = 10.0) -> fm.Waits:
    return fm.Waits(bsld, 1.0, {"short": 1.0, "long": None, "wide": wide95}, mx, wide95)


def _cand(age: float) -> fm.Candidate:
    return fm.Candidate("v3", fm.Params(age_h=age))


def _step(
    k: int, picked: Optional[fm.Candidate], rows: List[fs.Row], base_next: fm.Waits
) -> folds.Step:
    base = (_waits(10.0), base_next)
    best = None if picked is None else [r.candidate for r in rows].index(picked)
    rep = fs.Report(base, rows, fm.Tolerances(), best, [], None, None, None)
    return folds.Step(k, (100 * k, 100), rep)


def test_bounds_split_by_job_count_and_refuse_small_folds() -> None:
    assert folds.bounds(100, 4) == [0, 25, 50, 75, 100]
    assert folds.bounds(101, 2) == [0, 50, 101]
    with pytest.raises(ValueError, match="from 2 to 12"):
        folds.bounds(1000, 1)
    with pytest.raises(ValueError, match="from 2 to 12"):
        folds.bounds(10**6, folds.MAX_FOLDS + 1)
    with pytest.raises(ValueError, match="3 folds of 59 jobs have fewer than 20 jobs each"):
        folds.bounds(59, 3)


def test_the_pick_that_held_on_most_next_folds_wins_then_the_worst_fold() -> None:
    a, b, c = _cand(72.0), _cand(24.0), _cand(0.0)
    base = _waits(10.0, wide95=1.0, mx=10.0)
    broken = _waits(2.0, wide95=5.0)  # a fine bsld, wide jobs' p95 5x the baseline's
    # a: picked at step 1, held on folds 2 and 3 (gains 30 and 10 %)
    # b: picked at step 2, better gains (50 %) but broke on fold 2
    # c: picked at step 3, held everywhere, gains 20 and 20 %: the same count as a, a
    #    better worst fold (20 against 10): c wins
    s1 = _step(
        1, a, [fs.Row(a, "", _waits(5.0), _waits(7.0)), fs.Row(b, "", _waits(6.0), broken)], base
    )
    s2 = _step(2, b, [fs.Row(b, "", _waits(5.0), _waits(5.0))], base)
    s3 = _step(3, c, [fs.Row(c, "", _waits(5.0), _waits(8.0))], base)
    steps = [s1, s2, s3]
    assert folds.contenders(steps) == [a, b, c]
    assert folds.missing(steps) == [(2, a), (3, a), (3, b), (1, c), (2, c)]
    on_next = {(2, a): _waits(9.0), (3, a): _waits(8.0), (3, b): _waits(5.0)}
    on_next.update({(1, c): _waits(8.0), (2, c): _waits(8.0)})
    rep = folds.assess(4, steps, on_next, fm.Tolerances())
    by = {st.candidate: st for st in rep.standings}
    assert [by[x].held_n for x in (a, b, c)] == [3, 2, 3]
    assert by[a].gains() == pytest.approx([30.0, 10.0, 20.0])
    assert by[a].worst == 2 and by[a].in_sample == 0
    assert by[b].worst_gain() == pytest.approx(50.0) and by[b].in_sample == 1
    assert by[c].in_sample == 2 and by[c].picked_at == [3]
    assert rep.standings[rep.best].candidate == c
    # none held on any next fold: no change
    never = [st._replace(held_n=0) for st in rep.standings]
    assert folds.choose(never) is None
    text = folds.format_report("t", rep._replace(standings=never, best=None))
    assert (
        "recommended across the folds: no change (no pick held the tolerances on any next fold)"
        in text
    )
    # a step with no pick adds no contender; without any, no recommendation
    none = _step(1, None, [fs.Row(a, "", _waits(5.0), _waits(7.0))], base)
    assert folds.assess(2, [none], {}, fm.Tolerances()).best is None
    # a contender without figures on a next fold is an error, not a silent gap
    with pytest.raises(KeyError, match="not run on fold 3"):
        folds.standing(a, steps, {}, fm.Tolerances())


def _periodic_trace(path: Path, per_fold: int, copies: int, procs: int = 16) -> Path:
    # One fold of jobs, repeated ``copies`` times four weeks apart: every fold is the same
    # workload shifted in time by whole days (the folds are simulated apart anyway)
    rnd = random.Random(11)
    base = []
    t = 0
    for _ in range(per_fold):
        t += rnd.randrange(0, 1200)
        run = rnd.choice([60, 600, 3600, 4 * 3600, 26 * 3600])
        base.append(
            (t, run, run * rnd.choice([1, 2, 4]), rnd.choice([1, 2, 4, 8, 16]), rnd.randrange(1, 5))
        )
    lines = [f"; MaxProcs: {procs}"]
    week = 7 * 86400
    for c in range(copies):
        for j, (sub, run, wall, cpus, user) in enumerate(base):
            k = c * per_fold + j + 1
            fields = [k, c * 4 * week + sub, -1, run, cpus, -1, -1, cpus, wall, -1, 1, user]
            lines.append(" ".join(str(f) for f in fields + [-1] * 6))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_on_folds_that_repeat_the_first_the_first_pick_holds_on_every_next_fold(
    tmp_path: Path,
) -> None:
    # Each part is simulated from an empty machine and history, so a fold that repeats
    # fold 1 gives every candidate fold 1's figures: the answer is known. Step 1's pick
    # holds on every next fold with step 1's first-half gain, and is recommended.
    trace = load([str(_periodic_trace(tmp_path / "p.swf", 60, 3))])
    [res] = api.search_folds(trace, 3, ["users"], jobs=2)
    rep = res.report
    s1, s2 = rep.steps
    assert s1.jobs == (60, 60) and s2.jobs == (120, 60)
    base1, base_next = s1.report.base
    assert base_next == base1 == s2.report.base[1]
    row = folds.pick(s1)
    assert row is not None and row.second == row.first
    st = rep.standings[rep.best]
    assert st.candidate == row.candidate
    assert st.held_n == 2 and st.in_sample == 0
    gain = folds.gain_pct(row.first, base1)
    assert gain > 0
    assert st.gains() == pytest.approx([gain, gain])
    text = res.format()
    assert "\nbaseline: fcfs-bf1 with the users' walltimes\n" in text
    assert res.as_json()["baseline_policy"] == "fcfs-bf1"
    assert f"recommended across the folds: {row.candidate.label} with users, held on 2 of 2" in text
    assert f"worst (fold 2) {gain:+.1f} %" in text
    assert "  fold 2 (worst): held\n" in text and "  fold 3: held\n" in text
    obj = res.as_json()
    assert obj["folds"] == 3 and len(obj["steps"]) == 2
    assert obj["steps"][0]["held"] is True
    best = obj["contenders"][obj["recommended"]]
    assert best["label"] == row.candidate.label and best["held"] == 2 and best["of"] == 2
    assert best["worst"]["gain_pct"] == pytest.approx(gain)
    assert [(f["fold"], f["held"]) for f in best["next_folds"]] == [(2, True), (3, True)]


def test_narrowed_steps_tune_only_what_the_previous_step_checked(tmp_path: Path) -> None:
    trace = load([str(_periodic_trace(tmp_path / "p.swf", 40, 4))])
    [res] = api.search_folds(trace, 4, ["users"], jobs=2, narrow=True)
    s1, s2, s3 = res.report.steps
    checked = {r.candidate._replace(depth=1) for r in s1.report.rows if r.second is not None}
    tuned2 = {r.candidate for r in s2.report.rows if r.candidate.depth == 1}
    assert tuned2 == checked and len(tuned2) < len(fm.candidates(["users"]))
    assert "(--fold-narrow)" in res.format()
    assert res.as_json()["narrowed"] is True


def test_cli_folds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from softwalltime import cli

    trace = str(_periodic_trace(tmp_path / "p.swf", 30, 3))
    assert (
        cli.main(["simulate", "--search", "--folds", "3", "--estimates", "users", "--json", trace])
        == 0
    )
    obj = json.loads(capsys.readouterr().out)  # one trace: its object
    assert obj["source"] == trace and [s["tuned_on_folds"] for s in obj["steps"]] == [1, 2]
    # --folds 2 (the default) is today's search, its output unchanged
    argv = ["simulate", "--search", "--estimates", "users", trace]
    assert cli.main(argv) == 0
    today = capsys.readouterr().out
    assert cli.main(argv[:2] + ["--folds", "2"] + argv[2:]) == 0
    assert capsys.readouterr().out == today and "Pareto front of the first half" in today
    for extra, message in [
        (["--folds", "5"], "5 folds of 90 jobs have fewer than 20 jobs each"),
        (["--folds", "3", "--plot", str(tmp_path)], "--folds: not with --plot or --current"),
    ]:
        assert cli.main(["simulate", "--search", *extra, trace]) == 1
        assert message in capsys.readouterr().err
    assert cli.main(["simulate", "--folds", "3", trace]) == 1
    assert "--folds, --fold-narrow: only with --search" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["simulate", "--search", "--folds", "13", trace])
