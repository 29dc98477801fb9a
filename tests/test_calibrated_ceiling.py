"""The pure parts of tests/benchmarks/calibrated_ceiling.py: lambda bisection, hindsight
choices per bin and per job, and the replay recorder (issue 18)."""

import importlib.util
import random
from pathlib import Path

import numpy as np
import pytest

from softwalltime.core import calibrated as cal
from softwalltime.replay import evaluate as ev
from softwalltime.replay.trace_readers import read_sources

_PATH = Path(__file__).resolve().parent / "benchmarks" / "calibrated_ceiling.py"
_SPEC = importlib.util.spec_from_file_location("calibrated_ceiling", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
ceiling = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ceiling)


def test_accuracy_matrix_is_calibrated_accuracy():
    values = [0, 1, 59, 60, 61, 3600, 7200]
    softs = np.array([[s for s in values] for _r in values])
    runs = np.array(values)
    got = ceiling.accuracy_matrix(softs, runs)
    for j, r in enumerate(values):
        for k, s in enumerate(values):
            assert got[j, k] == pytest.approx(cal.accuracy(s, r)), (s, r)


def test_bisect_lambda_finds_the_smallest_feasible_lambda():
    def under_at(lam):
        return 10 if lam < 2.5 else (3 if lam < 40 else 0)

    assert ceiling.bisect_lambda(under_at, 5) == pytest.approx(2.5, rel=1e-6)
    assert ceiling.bisect_lambda(under_at, 5) >= 2.5
    assert ceiling.bisect_lambda(under_at, 0) == pytest.approx(40, rel=1e-6)
    assert ceiling.bisect_lambda(under_at, 10) == 0.0
    assert ceiling.bisect_lambda(lambda lam: 7, 3) == ceiling.LAMBDA_HIGH


def _bin_jobs(bin_, n, rows):
    """n jobs in bin_, cycling through rows of (accuracy, under) per rule."""
    return [(bin_, rows[k % len(rows)]) for k in range(n)]


def _arrays(jobs):
    bins = np.array([b for b, _ in jobs])
    acc = np.array([[a for a, _u in rules] for _b, rules in jobs], dtype=float)
    under = np.array([[u for _a, u in rules] for _b, rules in jobs], dtype=float)
    return bins, acc, under


# Three rules: 0 safe (0.5, never under), 1 "v3" (0.4, never under), 2 tight.
# Bin 3: tight has mean accuracy 0.9 and under-rate 0.5: better than safe while lam < 0.8.
# Bin 7: tight 0.8 and 0.25: better while lam < 1.2. Bin 9 (5 jobs): tight is perfect.
HAND = (
    _bin_jobs(3, 40, [((0.5, 0), (0.4, 0), (1.0, 0)), ((0.5, 0), (0.4, 0), (0.8, 1))])
    + _bin_jobs(
        7,
        40,
        [((0.5, 0), (0.4, 0), (1.0, 0))] * 3 + [((0.5, 0), (0.4, 0), (0.2, 1))],
    )
    + _bin_jobs(9, 5, [((0.5, 0), (0.4, 0), (1.0, 0))])
)


def test_hindsight_bins_chooses_per_bin_at_the_allowed_rate():
    bins, acc, under = _arrays(HAND)
    # 10 under-estimates allowed: tight only in bin 7 (10), not in bin 3 (20 more)
    rule, lam = ceiling.hindsight_bins(bins, acc, under, 10, 30)
    assert lam == pytest.approx(0.8, rel=1e-6)
    assert set(rule[bins == 3]) == {0}
    assert set(rule[bins == 7]) == {2}
    assert set(rule[bins == 9]) == {cal.R_V3}  # < 30 outcomes: v3, as today
    rule, _lam = ceiling.hindsight_bins(bins, acc, under, 10, 0)
    assert set(rule[bins == 9]) == {2}  # every bin may choose
    # 30 allowed: tight everywhere (lam 0); none allowed: safe everywhere
    rule, lam = ceiling.hindsight_bins(bins, acc, under, 30, 30)
    assert lam == 0.0 and set(rule[bins != 9]) == {2}
    rule, _lam = ceiling.hindsight_bins(bins, acc, under, 0, 30)
    assert set(rule[bins != 9]) == {0}


def test_hindsight_jobs_drops_the_cheapest_under_estimates_first():
    # per job: rule 0 never under (acc a0), rule 1 under (acc a1): gain a1 - a0 for one under
    pairs = [(0.5, 0.9), (0.5, 0.6), (0.2, 0.95), (0.7, 0.8)]
    acc = np.array([[a0, a1] for a0, a1 in pairs])
    under = np.array([[0.0, 1.0]] * len(pairs))
    rule, _lam = ceiling.hindsight_jobs(acc, under, 2)
    assert rule.tolist() == [1, 0, 1, 0]  # the two largest gains (0.75, 0.4) keep rule 1
    rule, _lam = ceiling.hindsight_jobs(acc, under, 0)
    assert rule.tolist() == [0, 0, 0, 0]


def test_cross_fit_uses_the_other_folds_choice():
    # bin 3: tight wins on fold 0 (never under there), loses on fold 1 (always under)
    good = ((0.5, 0), (0.4, 0), (1.0, 0))
    bad = ((0.5, 0), (0.4, 0), (0.1, 1))
    bins, acc, under = _arrays(_bin_jobs(3, 40, [good]) + _bin_jobs(3, 40, [bad]))
    fold = np.array([0] * 40 + [1] * 40)
    rule, _lam = ceiling.cross_fit(bins, acc, under, fold, 80)
    assert set(rule[fold == 0]) == {0}  # fold 1's choice: tight loses there
    assert set(rule[fold == 1]) == {2}  # fold 0's choice: tight
    assert ceiling.hindsight_bins(bins, acc, under, 80, 30)[0].tolist() == [2] * 80


def test_record_maps_each_outcome_to_its_job(tmp_path):
    rng = random.Random(5)
    lines = []
    for k in range(400):
        user = rng.randint(1, 4)
        wall = rng.choice([600, 3600, 7200])
        run = rng.randint(0, wall)
        submit = 37 * k
        wait = rng.randint(0, 500)
        procs = rng.choice([1, 4])
        row = [k + 1, submit, wait, run, procs, -1, -1, procs, wall, -1, 1, user]
        lines.append(" ".join(str(v) for v in row + [1, 1, 1, 1, -1, -1]))
    path = tmp_path / "t.swf"
    path.write_text("\n".join(lines) + "\n")
    jobs = ceiling.record(str(path))
    cols, _skipped = ev.columns(read_sources([str(path)]).jobs)
    tracking, _table = ev.replay_calibrated(cols, None)
    assert jobs.tracking.tolist() == tracking
    assert jobs.runs.tolist() == cols.runs
    # each job's soft walltime is one of its own recorded rules' values, with its own bin
    for j in range(len(cols.runs)):
        assert int(jobs.tracking[j]) in jobs.softs[j].tolist()
    assert len(set(jobs.bins.tolist())) > 3
    assert jobs.online_lam > 0


def test_merge_size_drops_only_the_size_dimension():
    seen = {}
    for level in range(len(cal.LEVELS)):
        for size in range(cal.N_SIZE):
            for spread in range(cal.N_SPREAD):
                for lvl in range(cal.N_LEVEL):
                    bin_ = ((level * cal.N_SIZE + size) * cal.N_SPREAD + spread) * cal.N_LEVEL + lvl
                    merged = ceiling.merge_size(bin_)
                    assert (
                        merged == ((level * cal.N_SIZE) * cal.N_SPREAD + spread) * cal.N_LEVEL + lvl
                    )
                    seen.setdefault(merged, set()).add((level, spread, lvl))
    assert len(seen) == len(cal.LEVELS) * cal.N_SPREAD * cal.N_LEVEL
    assert all(len(keys) == 1 for keys in seen.values())
