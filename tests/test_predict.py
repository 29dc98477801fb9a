"""Predictors v1/v2/v3: the issue's definitions as tables, then properties (hypothesis)."""

import math
import os
import subprocess
from pathlib import Path

import pytest
from helpers_runtime import need_runtime
from hypothesis import given, settings
from hypothesis import strategies as st

from softwalltime.core.config import load_settings
from softwalltime.core.predict import (
    DEFAULT_PARAMS,
    PREDICTORS,
    REASON_CAPPED,
    REASON_FLOOR,
    REASON_HISTORY,
    REASON_NO_HISTORY,
    REASON_NO_WALLTIME,
    PredictorParams,
    predict,
)

REPO = Path(__file__).resolve().parents[1]
H = 3600
DAY = 86400

# (predictor, walltime_s, history [(runtime_s, walltime_s)], expected soft, basis_jobs, reason)
TABLE = [
    # v1: mean runtime of the last 2 finished jobs, capped at walltime
    ("v1", DAY, [(1000, DAY), (2000, DAY), (99999, DAY)], 1500, 2, REASON_HISTORY),
    ("v1", DAY, [(1000, DAY)], 1000, 1, REASON_HISTORY),
    ("v1", DAY, [(1000, None), (2001, 0)], 1501, 2, REASON_HISTORY),  # 1500.5 rounds up
    ("v1", 1200, [(5000, DAY), (7000, DAY)], 1200, 2, REASON_CAPPED),
    ("v1", DAY, [(0, DAY), (0, DAY)], 1, 2, REASON_FLOOR),  # never below 1 s
    ("v1", DAY, [], DAY, 0, REASON_NO_HISTORY),
    # v2: v1 + 900 s, capped at walltime
    ("v2", DAY, [(1000, DAY), (2000, DAY), (99999, DAY)], 2400, 2, REASON_HISTORY),
    ("v2", 2000, [(1000, DAY), (2000, DAY)], 2000, 2, REASON_CAPPED),
    ("v2", DAY, [(0, DAY)], 900, 1, REASON_HISTORY),
    ("v2", 600, [], 600, 0, REASON_NO_HISTORY),
    # v3: max(runtime/walltime) over the last 15 jobs with walltime > 0, x walltime + 900
    ("v3", DAY, [(H, 4 * H), (H, 2 * H)], DAY // 2 + 900, 2, REASON_HISTORY),
    ("v3", 4 * H, [(900, H)], H + 900, 1, REASON_HISTORY),  # 0.25 x 4 h exactly, no float drift
    ("v3", DAY, [(H, None), (H, 0), (H, 4 * H)], DAY // 4 + 900, 1, REASON_HISTORY),
    ("v3", DAY, [(H, None), (H, 0)], DAY, 0, REASON_NO_HISTORY),  # no job with walltime > 0
    ("v3", 1000, [(H, H)], 1000, 1, REASON_CAPPED),
    ("v3", 7, [(1, 3)], 7, 1, REASON_CAPPED),
    ("v3", DAY, [(0, H)], 900, 1, REASON_HISTORY),
    ("v3", 3, [(1, 3)], 3, 1, REASON_CAPPED),  # 1/3 x 3 + 900 > 3
    # only the 15 most recent jobs with walltime > 0 count: the 16th (ratio 1) is ignored
    ("v3", DAY, [(H, 10 * H)] * 15 + [(DAY, DAY)], math.ceil(DAY / 10) + 900, 15, REASON_HISTORY),
    ("v3", DAY, [(H, None)] * 20 + [(H, 2 * H)], DAY // 2 + 900, 1, REASON_HISTORY),
]


@pytest.mark.parametrize("predictor,walltime,history,soft,jobs,reason", TABLE)
def test_definitions(predictor, walltime, history, soft, jobs, reason):
    got = predict(predictor, walltime, history)
    assert (got.soft_walltime_s, got.basis_jobs, got.reason) == (soft, jobs, reason)
    assert got.predictor == predictor


@pytest.mark.parametrize("predictor", PREDICTORS)
@pytest.mark.parametrize("walltime", [None, 0, -5])
def test_no_walltime_no_prediction(predictor, walltime):
    got = predict(predictor, walltime, [(100, 200)])
    assert got.soft_walltime_s is None
    assert got.reason == REASON_NO_WALLTIME


def test_basis_values():
    assert predict("v1", DAY, [(1000, DAY), (2001, DAY)]).basis_value == 1500.5
    assert predict("v3", DAY, [(H, 4 * H), (3 * H, 4 * H)]).basis_value == 0.75
    assert predict("v3", DAY, []).basis_value is None


def test_counts_and_reserve_come_from_params():
    params = PredictorParams.create(v1_jobs=3, v3_jobs=1, reserve_s=60)
    history = [(100, 1000), (200, 1000), (600, 1000), (10_000, 10_000)]
    assert predict("v1", DAY, history, params).soft_walltime_s == 300
    assert predict("v2", DAY, history, params).soft_walltime_s == 360
    # v3 with v3_jobs=1 sees only the most recent job: 0.1 x 10000 + 60
    assert predict("v3", 10_000, history, params).soft_walltime_s == 1060


def test_long_walltime_factor_applies_above_threshold_before_cap():
    params = PredictorParams.create(long_walltime_threshold_s=DAY, long_walltime_factor=2.0)
    history = [(H, 4 * H)]
    # at the threshold: no factor
    assert predict("v3", DAY, history, params).soft_walltime_s == DAY // 4 + 900
    # above: (0.25 x 2 d + 900) x 2
    assert predict("v3", 2 * DAY, history, params).soft_walltime_s == 2 * (DAY // 2 + 900)
    # factor first, then the cap
    capped = predict("v3", 2 * DAY, [(3 * H, 4 * H)], params)
    assert (capped.soft_walltime_s, capped.reason) == (2 * DAY, REASON_CAPPED)
    # a decimal factor stays exact: 1.1 x 1000 = 1100, not 1101
    tenth = PredictorParams.create(long_walltime_threshold_s=1, long_walltime_factor=1.1)
    assert predict("v1", DAY, [(1000, None)], tenth).soft_walltime_s == 1100


def test_params_from_settings():
    s = load_settings(
        environ={},
        overrides={
            "v1_jobs": 4,
            "v3_jobs": 7,
            "reserve_s": 30,
            "long_walltime_threshold_s": 100,
            "long_walltime_factor": 1.5,
        },
    )
    p = PredictorParams.from_settings(s)
    assert (p.v1_jobs, p.v3_jobs, p.reserve_s, p.long_walltime_threshold_s) == (4, 7, 30, 100)
    assert (p.factor_num, p.factor_den) == (3, 2)
    assert p.history_jobs("v1") == p.history_jobs("v2") == 4
    assert p.history_jobs("v3") == 7
    assert PredictorParams.from_settings(load_settings(environ={})) == DEFAULT_PARAMS


@pytest.mark.parametrize(
    "kwargs",
    [{"v1_jobs": 0}, {"v3_jobs": 0}, {"reserve_s": -1}, {"long_walltime_factor": 0.0}],
)
def test_bad_params_rejected(kwargs):
    with pytest.raises(ValueError):
        PredictorParams.create(**kwargs)


def test_unknown_predictor():
    with pytest.raises(ValueError, match="v4"):
        predict("v4", DAY, [])
    with pytest.raises(ValueError, match="v4"):
        predict("v4", None, [])


# ---- properties ----

runtimes = st.integers(min_value=0, max_value=10 * DAY)
walltimes = st.integers(min_value=1, max_value=30 * DAY)
histories = st.lists(
    st.tuples(runtimes, st.one_of(st.none(), st.integers(0, 30 * DAY))), max_size=40
)
param_sets = st.builds(
    PredictorParams.create,
    v1_jobs=st.integers(1, 20),
    v3_jobs=st.integers(1, 20),
    reserve_s=st.integers(0, 7200),
    long_walltime_threshold_s=st.integers(0, 3 * DAY),
    long_walltime_factor=st.floats(0.1, 5.0, allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PREDICTORS), walltimes, histories, param_sets)
def test_soft_is_between_one_second_and_walltime(predictor, walltime, history, params):
    got = predict(predictor, walltime, history, params)
    assert isinstance(got.soft_walltime_s, int)
    assert 0 < got.soft_walltime_s <= walltime


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(PREDICTORS), walltimes, param_sets)
def test_no_history_gives_walltime(predictor, walltime, params):
    assert predict(predictor, walltime, [], params).soft_walltime_s == walltime


@settings(max_examples=300, deadline=None)
@given(walltimes, histories)
def test_v2_is_v1_plus_reserve_capped(walltime, history):
    v1 = predict("v1", walltime, history).soft_walltime_s
    v2 = predict("v2", walltime, history).soft_walltime_s
    if history:
        # v1's own floor of 1 s only applies when the mean is 0, where v2 = 900 s
        mean_up = math.ceil(sum(r for r, _ in history[:2]) / len(history[:2]))
        assert v2 == min(mean_up + 900, walltime)
        if mean_up > 0:
            assert v2 == min(v1 + 900, walltime)  # the wording
        assert v1 == max(1, min(mean_up, walltime))
    else:
        assert v1 == v2 == walltime


@settings(max_examples=300, deadline=None)
@given(walltimes, histories)
def test_v3_matches_its_definition(walltime, history):
    usable = [(r, w) for r, w in history if w is not None and w > 0][:15]
    got = predict("v3", walltime, history).soft_walltime_s
    if not usable:
        assert got == walltime
    else:
        # exact rational arithmetic as a reference
        from fractions import Fraction

        ratio = max(Fraction(r, w) for r, w in usable)
        assert got == max(1, min(math.ceil(ratio * walltime + 900), walltime))


def test_runs_on_python36():
    """The pure hook-path modules import and predict on Python 3.6 (EL8's system Python)."""
    py36 = Path(os.path.expanduser("~/.pyenv/versions/3.6.15/bin/python3.6"))
    need_runtime(py36, "that the predictors and decide() run on Python 3.6 (EL8)")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from softwalltime.core.predict import predict\n"
        "from softwalltime.core.decide import JobEvent, decide\n"
        "from softwalltime.core.config import load_settings\n"
        "s = load_settings(environ={})\n"
        "print(predict('v3', 86400, [(3600, 14400)]).soft_walltime_s)\n"
        "job = JobEvent('queuejob', 'bob', '', 86400, None)\n"
        "d = decide(job, s, lambda u, n, w: [(3600, 14400)])\n"
        "print(d.soft_walltime_s)\n"
    )
    out = subprocess.run(
        [str(py36), "-I", "-S", "-c", code, str(REPO)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(DAY // 4 + 900)] * 2


def test_params_from_settings_follow_the_values():
    settings = load_settings(environ={})
    params = PredictorParams.from_settings(settings)
    assert PredictorParams.from_settings(settings) is params  # the hook asks every event
    other = PredictorParams.from_settings(settings._replace(v3_jobs=7, long_walltime_factor=1.5))
    assert (other.v3_jobs, other.factor_num, other.factor_den) == (7, 3, 2)
    assert PredictorParams.from_settings(settings) == params == DEFAULT_PARAMS


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["--walltime", "99999999999999999999"],
            "argument --walltime: more than 10 years (315360000 s) is no job's walltime",
        ),
        (["--walltime", "1:00:00", "--ncpus", "-4"], "argument --ncpus: must be at least 1"),
        (["--walltime", "1:00:00", "--ncpus", "0"], "argument --ncpus: must be at least 1"),
        (["--walltime", "1:00:00", "--ncpus", "100000001"], "must be at most 100000000"),
        (["--walltime", "1:00:00", "--select", "garbage"], "argument --select: not a select"),
        (["--walltime", "1:00:00", "--select", "2:ncpus=4+"], "argument --select: not a select"),
        (["--walltime", "1:00:00", "--select", "0:ncpus=4"], "argument --select: not a select"),
        (["--walltime", "1:00:00", "--select", "ncpus=-1"], "argument --select: a select's ncpus"),
        (["--walltime", "1:00:00", "--select", "2:ncpus=x"], "argument --select: a select's ncpus"),
    ],
)
def test_predict_refuses_arguments_no_job_has(capsys, args, error):
    """Found on a fresh clone: a 16-digit soft walltime for --walltime 99999999999999999999,
    --ncpus -4 and --select garbage accepted."""
    from softwalltime import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["--dsn", "host=/nowhere", "predict", "--user", "alice", *args])
    assert exit_.value.code == 2
    assert error in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize(
    "text", ["2", "2:ncpus=4", "2:ncpus=4+1:ncpus=2:mem=4gb", "ncpus=8:host=n1"]
)
def test_predict_accepts_real_selects(text):
    from softwalltime.cli.predict import select

    assert select(text) == text
