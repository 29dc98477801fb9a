"""Behaviour unchanged: the figures ``evaluate``, ``simulate`` and ``eval-wait`` print on a
segment of the bundled CERIT-SC trace are the ones in tests/golden/figures.json.

Committed before the simulators and the wait predictor were restructured (issue 34), so a
refactoring that moves any figure fails here. A change that means to move them rewrites
the file: ``SOFTWALLTIME_GOLDEN=write .venv/bin/pytest tests/test_golden_figures.py``
(then say in the commit why the figures moved).
"""

import gzip
import json
import os
from pathlib import Path

import pytest

from softwalltime import cli

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "softwalltime" / "data" / "CERIT-SC-wagap-2013.alea.swf.gz"
GOLDEN = REPO / "tests" / "golden" / "figures.json"
SEGMENT_JOBS = 3000  # the trace's first jobs: each run below takes a second or two
RUNS = {
    "evaluate": ["evaluate", "--predictors", "v1,v2,v3,calibrated"],
    "evaluate-start": ["evaluate", "--moment", "start", "--predictors", "v3,calibrated"],
    "simulate": ["simulate", "--procs", "300", "--estimates", "users,v3,perfect,calibrated"],
    "simulate-depth3-refresh": [
        "simulate", "--procs", "300", "--estimates", "v3", "--backfill-depth", "3",
        "--refresh-every", "30",
    ],
    "simulate-simple-sjbf-lazy": [
        "simulate", "--procs", "300", "--estimates", "v3", "--correction", "simple", "--sjbf",
        "--lazy-corrections",
    ],
    "eval-wait": ["eval-wait", "--first", "1000", "--targets", "2000", "--ert", "both"],
}  # fmt: skip


@pytest.fixture(scope="module")
def segment(tmp_path_factory):
    path = tmp_path_factory.mktemp("golden") / "cerit-segment.swf"
    with gzip.open(TRACE, "rt", encoding="utf-8") as fh:
        jobs = [line for line in fh if not line.startswith(";")][:SEGMENT_JOBS]
    path.write_text("".join(jobs), encoding="utf-8")
    return path


UNSTABLE = {"source", "seconds"}  # the temporary path; how long a replay took here


def _stable(value):
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in UNSTABLE}
    return [_stable(v) for v in value] if isinstance(value, list) else value


def _figures(capsys, argv, segment):
    assert cli.main([*argv, "--json", str(segment)]) == 0
    return _stable(json.loads(capsys.readouterr().out))


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_figures_are_the_golden_ones(name, capsys, segment):
    got = _figures(capsys, RUNS[name], segment)
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if os.environ.get("SOFTWALLTIME_GOLDEN") == "write":
        golden[name] = got
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    assert name in golden, f"no golden figures for {name}: see this module's docstring"
    assert got == golden[name]
