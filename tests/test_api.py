"""softwalltime.api: a search, an evaluation and the simulations from Python, no argparse;
their results are what the commands' --json prints. And fork_map, which runs the
simulations in workers that get their inputs as arguments."""

import json
import os
import random
from pathlib import Path

import pytest

from softwalltime import api, cli
from softwalltime.replay import formula_search
from softwalltime.replay.fit import withheld_line
from softwalltime.replay.parallel import fork_map


def _trace(path: Path, jobs: int = 120, procs: int = 16) -> str:
    # A busy little machine (as test_search_formula's): 1-16 processors, 1 min to 30 h
    rnd = random.Random(3)
    lines = [f"; MaxProcs: {procs}"]
    t = 0
    for k in range(1, jobs + 1):
        t += rnd.randrange(0, 1800)
        run = rnd.choice([60, 300, 1200, 3600, 4 * 3600, 30 * 3600])
        wall = run * rnd.choice([1, 2, 4])
        cpus = rnd.choice([1, 1, 2, 4, 8, 16])
        fields = [k, t, k % 600, run, cpus, -1, -1, cpus, wall, -1, 1, rnd.randrange(1, 6)]
        lines.append(" ".join(str(f) for f in fields + [-1] * 6))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert cli.main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_a_search_from_python(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _trace(tmp_path / "t.swf")
    [result] = api.search([trace], ["users"], jobs=2)
    assert result.procs == 16 and result.half_jobs == (60, 60)
    assert "job_sort_formula" in result.format()
    # what simulate --search --json prints: the fit to the trace's real starts first (issue
    # 46), the PBS settings withheld when it is poor (waits of seconds against hours here)
    [fit] = api.fit([trace])
    assert fit is not None and fit.poor
    withheld = withheld_line([fit], with_site=False)
    result = result._replace(fit=fit, withheld=withheld)
    assert result.as_json()["recommended"]["pbs_settings"] == []
    assert result.as_json() == _cli_json(
        capsys, "simulate", "--search", "--estimates", "users", "--json", trace
    )


def test_an_evaluation_from_python(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _trace(tmp_path / "t.swf")
    result = api.evaluate([trace], ["v1", "v3"])
    assert result.report["jobs"] == 120 and set(result.report["predictors"]) >= {"v1", "v3"}
    assert "v3" in result.format()
    assert result.as_json() == _cli_json(
        capsys, "evaluate", "--predictors", "v1,v3", "--json", trace
    )
    with pytest.raises(ValueError, match="unknown predictors: v9"):
        api.evaluate([trace], ["v9"])


def test_simulations_from_python(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _trace(tmp_path / "t.swf")
    opts = api.SimOptions(correction="simple", backfill_depth=2)
    runs = api.simulate(api.load([trace], procs=32), ["v3", "users"], options=opts, jobs=2)
    assert [o.source for o in runs[0].outcomes] == ["users", "v3"]  # the baseline first
    assert runs[0].as_json() == _cli_json(
        capsys, "simulate", "--procs", "32", "--estimates", "v3,users", "--correction",
        "simple", "--backfill-depth", "2", "--json", trace,
    )  # fmt: skip
    [pol] = api.policies([trace], ["fcfs-bf1", "sjf-greedy"], ["users"])
    assert [r.policy for r in pol.rows] == ["fcfs-bf1", "sjf-greedy"]
    [fit] = api.fit([trace])  # --force: the settings printed although the fit is poor
    assert pol._replace(fit=fit).as_json() == _cli_json(
        capsys, "simulate", "--policies", "fcfs-bf1,sjf-greedy", "--estimates", "users",
        "--force", "--json", trace,
    )  # fmt: skip
    with pytest.raises(ValueError, match="unknown estimate sources: v9"):
        api.simulate([trace], ["v9"])


def _add(shared: int, task: int) -> int:
    return shared + task


def _pid(shared: object, task: int) -> int:
    return os.getpid()


def _fail(shared: object, task: int) -> int:
    if task == 3:
        raise ValueError("task 3")
    return task


def test_fork_map_runs_the_tasks_in_workers_in_order() -> None:
    done = []
    assert fork_map(_add, 10, list(range(7)), jobs=3, done=done.append) == list(range(10, 17))
    assert done == list(range(1, 8))
    assert os.getpid() not in fork_map(_pid, None, [1, 2, 3], jobs=2)
    assert fork_map(_pid, None, [1, 2], jobs=1) == [os.getpid()] * 2
    with pytest.raises(ValueError, match="task 3"):
        fork_map(_fail, None, list(range(6)), jobs=2)


def test_the_workers_get_their_inputs_as_arguments() -> None:
    # no module global hands data to a worker: the simulate command and its runs hold none
    import ast

    from softwalltime.cli import simulate as cli_simulate
    from softwalltime.replay import parallel, runs

    for module in (cli_simulate, runs, parallel, api):
        tree = ast.parse(Path(str(module.__file__)).read_text())
        for node in tree.body:
            names = [t.id for t in getattr(node, "targets", [getattr(node, "target", None)])
                     if isinstance(t, ast.Name)]  # fmt: skip
            if names != ["__all__"] and isinstance(
                getattr(node, "value", None), (ast.Dict, ast.List, ast.Set)
            ):
                raise AssertionError(f"{module.__name__}: a mutable module global")


def test_the_clis_copies_are_the_librarys() -> None:
    """cli/simulate.py spells out the library's values it needs for its options (building
    the parser imports no simulator): each copy is checked here."""
    from softwalltime.cli import simulate as cmd
    from softwalltime.replay import corrections, folds, pbsched, runs, sources

    assert cmd.SOURCES == sources.SOURCE_NAMES
    assert cmd.DEFAULT_SOURCES == ",".join(api.DEFAULT_ESTIMATES)
    assert cmd.SEARCH_SOURCES == ",".join(api.SEARCH_ESTIMATES)
    assert (cmd.P95_TOLERANCE_PCT, cmd.MAX_FACTOR) == runs.TOLERANCES
    assert cmd.GOAL_PCT == formula_search.GOAL_PCT
    assert cmd.MAX_FOLDS == folds.MAX_FOLDS
    assert cmd.CORRECTIONS == corrections.CORRECTIONS
    assert cmd.BACKFILL_BY == pbsched.BACKFILL_BY
    assert cmd.CLASSES == pbsched.CLASSES
    assert cmd.RANK_REFRESH_S == pbsched.DEFAULT_RANK_REFRESH_S == api.SimOptions().rank_refresh_s
    assert cmd.RANK_BY == pbsched.RANK_BY
    assert cmd.DEFAULT_FUZZY_S == pbsched.DEFAULT_FUZZY_S == api.SimOptions().backfill_fuzzy


def test_the_example_of_the_development_page_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = "<!-- api: run by tests/test_api.py -->"
    page = (Path(__file__).resolve().parents[1] / "docs" / "development.md").read_text()
    block = page.split(marker + "\n```python\n", 1)[1].split("\n```", 1)[0]
    _trace(tmp_path / "trace.swf")
    monkeypatch.chdir(tmp_path)
    names: dict[str, object] = {}
    exec(compile(block, "docs/development.md", "exec"), names)  # noqa: S102 - our own page
    out = capsys.readouterr().out
    assert "v3" in out and "job_sort_formula" in out
    assert isinstance(names["report"], formula_search.Report)


def test_a_prediction_from_python() -> None:
    from softwalltime.core import predict as core

    history = [(3000, 7200), (1800, 3600)]
    got = api.predict(7200, history)
    assert got == core.predict("v3", 7200, history) and got.soft_walltime_s is not None
    assert api.predict(7200, history, "v1").predictor == "v1"
    with pytest.raises(ValueError, match="unknown predictor"):
        api.predict(7200, history, "v9")


def test_start_times_from_python(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _trace(tmp_path / "t.swf")
    opts = api.StartOptions(first=20, targets=40, predictions=10, samples=4)
    got = api.start_times(trace, opts)
    assert got.report["predictions"] == 10 and "P50" in got.format()
    out = _cli_json(
        capsys, "eval-start", "--first", "20", "--targets", "40", "--predictions", "10",
        "--samples", "4", "--json", trace,
    )  # fmt: skip
    assert isinstance(out, dict)
    assert {**out, "seconds": 0} == {**got.as_json(), "seconds": 0}
    with pytest.raises(ValueError, match="rank"):
        api.start_times(trace, opts._replace(policy="sjf.rank-bf1"))
