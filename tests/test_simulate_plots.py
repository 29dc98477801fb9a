"""The simulation figures' pure parts: confidence intervals, CDF steps, label spacing
(issue 21: box plots collapsed on lightly loaded traces; trade-off labels overlapped)."""

from __future__ import annotations

import pytest

from softwalltime.replay.plots import cdf_points, mean_ci, spaced_labels


def test_mean_ci() -> None:
    assert mean_ci([]) == (0.0, 0.0)
    assert mean_ci([3.0]) == (3.0, 0.0)
    assert mean_ci([1.0, 1.0, 1.0]) == (1.0, 0.0)
    mean, half = mean_ci([0.0, 2.0])  # sample variance 2, n 2: 1.96 x sqrt(2 / 2)
    assert mean == 1.0 and half == pytest.approx(1.96)


def test_cdf_points_count_ties_and_end_at_one() -> None:
    assert cdf_points([]) == ([], [])
    assert cdf_points([1.0, 0.0, 0.0]) == ([0.0, 1.0], [2 / 3, 1.0])
    values = [float(k % 250) for k in range(10_000)]  # 40 ties per value
    xs, ys = cdf_points(values, max_points=100)
    assert len(xs) <= 100 and xs == sorted(set(xs)) and ys == sorted(ys)
    assert xs[0] == 0.0 and ys[0] == 40 / 10_000  # all the zeros, not the first one
    assert xs[-1] == 249.0 and ys[-1] == 1.0


def test_spaced_labels_skip_close_points_and_keep_both_ends() -> None:
    xs = [0.0, 0.01, 0.5, 0.98, 1.0]
    ys = [0.0, 0.01, 0.5, 0.98, 1.0]
    assert spaced_labels(xs, ys) == [0, 2, 4]  # 1 is next to 0, 3 next to the last
    # Close in x but far apart in y: both labelled.
    assert spaced_labels([0.0, 0.0, 1.0], [0.0, 1.0, 0.5]) == [0, 1, 2]
    assert spaced_labels([2.0], [0.5]) == [0]
    assert spaced_labels([], []) == []
