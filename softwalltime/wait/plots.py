"""The paper's Figures 3 and 4 for a wait replay (needs matplotlib: ``softwalltime[plot]``).

- ``wait_error_by_range.png`` (Figure 3a): mean |predicted - actual| wait per range of
  actual wait, per method;
- ``wait_scatter_quick.png`` (Figures 3b, 3c): predicted vs actual wait of the quick
  starters, IBL and PQStar side by side (log scales);
- ``wait_predicted_ranges.png`` (Figure 4): for each range of actual wait, how the
  predictions of each method fall into the same ranges (stacked shares).
"""

from __future__ import annotations

import logging
import os
from typing import Any, List, Sequence

from ..replay.plots import plot_directory, save_figure
from .pqstar import METHODS, WaitPredictions

log = logging.getLogger(__name__)

# Ranges of wait (upper edges, seconds) for Figures 3a and 4, as the paper draws them.
RANGES_S = (3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600)
RANGE_LABELS = ("<=1h", "1-3h", "3-6h", "6-12h", "12-24h", ">24h")
TITLES = {
    "loguniform": "log-uniform",
    "qbets": "QBETS-style",
    "ibl": "IBL",
    "pqstar": "PQStar",
    "pqstar_ibl": "PQStar+IBL",
}


def wait_range(wait_s: int) -> int:
    """Index of a wait's range in :data:`RANGE_LABELS`."""
    for k, edge in enumerate(RANGES_S):
        if wait_s <= edge:
            return k
    return len(RANGES_S)


def write_wait_plots(res: WaitPredictions, directory: str, title: str = "") -> List[str]:
    """Write the three figures into ``directory`` (created if needed); their paths.

    :raises SoftwalltimeError: matplotlib is not installed, or the directory cannot be created
    """
    figure_cls, canvas_cls = plot_directory(directory)
    paths = [
        os.path.join(directory, name)
        for name in (
            "wait_error_by_range.png",
            "wait_scatter_quick.png",
            "wait_predicted_ranges.png",
        )
    ]
    actual = [wait_range(w) for w in res.wait_s]
    nranges = len(RANGE_LABELS)

    fig = figure_cls(figsize=(8, 4.5))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / len(METHODS)
    for m, name in enumerate(METHODS):
        sums = [0.0] * nranges
        counts = [0] * nranges
        for k, pred, wait in zip(actual, res.predicted_s[name], res.wait_s):
            sums[k] += abs(pred - wait) / 3600.0
            counts[k] += 1
        means = [s / c if c else 0.0 for s, c in zip(sums, counts)]
        ax.bar([k + (m - 1.5) * width for k in range(nranges)], means, width, label=TITLES[name])
    ax.set_xticks(range(nranges), RANGE_LABELS)
    ax.set_xlabel("actual wait")
    ax.set_ylabel("mean |predicted - actual| (h)")
    ax.set_title(title or "prediction error by actual wait")
    ax.legend()
    save_figure(fig, canvas_cls, paths[0])

    fig = figure_cls(figsize=(10, 4.5))
    quick = [k for k, a in enumerate(actual) if a == 0]
    for pos, name in enumerate(("ibl", "pqstar"), 1):
        ax = fig.add_subplot(1, 2, pos)
        xs = [max(res.wait_s[k], 1) / 60.0 for k in quick]
        ys = [max(res.predicted_s[name][k], 1) / 60.0 for k in quick]
        ax.scatter(xs, ys, s=2, alpha=0.3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(60, color="grey", linewidth=0.8)
        ax.set_xlabel("actual wait (min)")
        ax.set_ylabel("predicted wait (min)")
        ax.set_title(f"{TITLES[name]}: quick starters")
    save_figure(fig, canvas_cls, paths[1])

    fig = figure_cls(figsize=(12, 4.5))
    for pos, name in enumerate(METHODS, 1):
        ax = fig.add_subplot(1, len(METHODS), pos)
        _stacked_shares(ax, actual, [wait_range(p) for p in res.predicted_s[name]], nranges)
        ax.set_title(TITLES[name])
        ax.set_xlabel("actual wait")
        if pos == 1:
            ax.set_ylabel("share of jobs by predicted range (%)")
            ax.legend(fontsize=6, title="predicted", title_fontsize=6)
    fig.subplots_adjust(bottom=0.2, wspace=0.3)
    save_figure(fig, canvas_cls, paths[2])
    return paths


def _stacked_shares(ax: Any, actual: Sequence[int], predicted: Sequence[int], nranges: int) -> None:
    counts = [[0] * nranges for _ in range(nranges)]  # [actual][predicted]
    for a, p in zip(actual, predicted):
        counts[a][p] += 1
    bottoms = [0.0] * nranges
    for p in range(nranges):
        shares = [
            100.0 * counts[a][p] / sum(counts[a]) if sum(counts[a]) else 0.0 for a in range(nranges)
        ]
        ax.bar(range(nranges), shares, bottom=bottoms, label=RANGE_LABELS[p])
        bottoms = [b + s for b, s in zip(bottoms, shares)]
    ax.set_xticks(range(nranges), RANGE_LABELS, rotation=45, fontsize=7)
