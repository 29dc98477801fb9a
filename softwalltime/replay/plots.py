"""PNG figures of a replay evaluation, after Figures 4 and 5 of Chlumsky and Klusacek.

matplotlib is optional (``pip install softwalltime[plot]``) and imported only when a figure
is drawn, with the non-interactive Agg canvas, so no display is needed.
"""

from __future__ import annotations

import bisect
import logging
import math
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import SoftwalltimeError
from .evaluate import BASELINE, CLASSES, Metrics, Replay, metrics, runtime_class

log = logging.getLogger(__name__)

SORTED_ERRORS_PNG = "errors_sorted.png"
ERRORS_BY_CLASS_PNG = "errors_by_class.png"
TRADEOFF_PNG = "tradeoff.png"
# |error| below one minute is drawn at one minute: a log axis has no zero.
_FLOOR_H = 1.0 / 60.0
# Points per curve in the sorted-error plot.
_MAX_POINTS = 4000
_COLORS = {
    BASELINE: "#7f7f7f",
    "v1": "#d62728",
    "v2": "#ff7f0e",
    "v3": "#1f77b4",
    "calibrated": "#2ca02c",
}
_CLASS_TITLES = {"short": "short (<= 2 h)", "medium": "medium (2-24 h]", "long": "long (> 24 h)"}


def matplotlib_classes() -> Tuple[Any, Any]:
    """Import matplotlib's object API (Figure, FigureCanvasAgg), or say how to install it."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise SoftwalltimeError(
            "--plot needs matplotlib, which is not installed: pip install 'softwalltime[plot]'"
        ) from err
    return Figure, FigureCanvasAgg


def _errors_h(result: Replay) -> Dict[str, List[float]]:
    """Signed errors soft - runtime in hours, per predictor (negative = underestimated)."""
    runs = result.runtime_s
    return {
        name: [(s - r) / 3600.0 for s, r in zip(softs, runs)]
        for name, softs in result.soft_s.items()
    }


def plot_directory(directory: str) -> Tuple[Any, Any]:
    """Before any figure: matplotlib's classes, and ``directory`` created if missing.

    :raises SoftwalltimeError: matplotlib is missing or the directory cannot be created
    """
    classes = matplotlib_classes()
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as err:
        raise SoftwalltimeError(f"cannot create plot directory {directory}: {err}") from err
    return classes


def save_figure(fig: Any, canvas_cls: Any, path: str) -> None:
    """Render ``fig`` with the Agg canvas into the PNG file ``path``."""
    canvas_cls(fig)
    fig.savefig(path, dpi=120)
    log.debug("wrote %s", path)


def plot_sorted_errors(result: Replay, path: str, title: str = "") -> None:
    """Draw the paper's Figure 4: each predictor's errors sorted, as |error| on a log scale.

    The curves are V-shaped: left of the dip are underestimates (soft < runtime), right of it
    overestimates. The further left the dip, the fewer underestimates.

    :param result: the replay
    :param path: PNG file to write
    :param title: a line above the plot (e.g. the trace name)
    :raises SoftwalltimeError: matplotlib is missing
    """
    figure_cls, canvas_cls = matplotlib_classes()
    fig = figure_cls(figsize=(9, 5.5))
    ax = fig.add_subplot(1, 1, 1)
    errors = _errors_h(result)
    n = len(result.runtime_s)
    for name, errs in errors.items():
        errs = sorted(errs)
        under = sum(1 for e in errs if e < 0)
        # A few thousand points draw the same curve as 10^5 and keep the file small.
        step = max(1, n // _MAX_POINTS)
        picks = list(range(0, n, step))
        if n and picks[-1] != n - 1:
            picks.append(n - 1)
        xs = [100.0 * (k + 0.5) / n for k in picks]
        ys = [max(abs(errs[k]), _FLOOR_H) for k in picks]
        label = "{} (underestimated {:.1f} %)".format(
            "users' walltime" if name == BASELINE else name, 100.0 * under / n if n else 0.0
        )
        ax.plot(xs, ys, label=label, color=_COLORS.get(name), linewidth=1.8)
    ax.set_yscale("log")
    ax.set_xlim(0, 100)
    ax.set_xlabel("jobs, ordered from most underestimated to most overestimated (%)")
    ax.set_ylabel("|soft walltime - run time| (hours, log scale; < 1 min drawn at 1 min)")
    ax.set_title(
        (title + "\n" if title else "")
        + "Sorted estimate errors: left of each dip = underestimated, right = overestimated",
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", axis="y", alpha=0.15)
    ax.legend(loc="upper center", fontsize=9)
    fig.tight_layout()
    save_figure(fig, canvas_cls, path)


def plot_errors_by_class(result: Replay, path: str, title: str = "") -> None:
    """Draw the paper's Figure 5: box plots of signed errors per runtime class and predictor.

    Boxes span the quartiles with the median marked; whiskers reach the 5th and 95th
    percentiles; outliers are not drawn (there can be 10^5 of them). The y axis is linear
    within +-1 h and logarithmic beyond.

    :param result: the replay
    :param path: PNG file to write
    :param title: a line above the plots (e.g. the trace name)
    :raises SoftwalltimeError: matplotlib is missing
    """
    figure_cls, canvas_cls = matplotlib_classes()
    errors = _errors_h(result)
    classes = [runtime_class(r) for r in result.runtime_s]
    names = list(errors)
    fig = figure_cls(figsize=(12, 5.5))
    axes = fig.subplots(1, len(CLASSES), sharey=True)
    for ax, (cls, _limit) in zip(axes, CLASSES):
        idx = [k for k, c in enumerate(classes) if c == cls]
        data = [[errors[name][k] for k in idx] or [0.0] for name in names]
        boxes = ax.boxplot(
            data,
            whis=(5, 95),
            showfliers=False,
            patch_artist=True,
            medianprops={"color": "black"},
        )
        for patch, name in zip(boxes["boxes"], names):
            patch.set_facecolor(_COLORS.get(name, "#cccccc"))
            patch.set_alpha(0.75)
        ax.set_xticks(range(1, len(names) + 1))
        ax.set_xticklabels(["walltime" if nm == BASELINE else nm for nm in names])
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_title(f"{_CLASS_TITLES[cls]}: {len(idx)} jobs", fontsize=10)
        ax.grid(True, axis="y", alpha=0.4)
    axes[0].set_ylabel("soft walltime - run time (hours; < 0 = underestimated)")
    fig.suptitle(
        (title + "\n" if title else "")
        + "Estimate errors by runtime class (box: quartiles and median, whiskers: 5th-95th "
        + "percentile; y linear within +-1 h, logarithmic beyond)",
        fontsize=10,
    )
    fig.tight_layout()
    save_figure(fig, canvas_cls, path)


def spaced_labels(xs: Sequence[float], ys: Sequence[float], min_frac: float = 0.06) -> List[int]:
    """Indexes of the points to label, so that no two labelled points are within
    ``min_frac`` of the axes' spans of each other (in both directions): each point clear of
    the ones labelled before it, and the last one (the other end of a curve) instead of any
    labelled point too close to it."""
    if not xs:
        return []
    span_x = (max(xs) - min(xs)) or 1.0
    span_y = (max(ys) - min(ys)) or 1.0

    def close(a: int, b: int) -> bool:
        return abs(xs[a] - xs[b]) / span_x < min_frac and abs(ys[a] - ys[b]) / span_y < min_frac

    chosen = [0]
    for k in range(1, len(xs)):
        if not any(close(k, c) for c in chosen):
            chosen.append(k)
    last = len(xs) - 1
    if chosen[-1] != last:
        chosen = [c for c in chosen if not close(c, last)] + [last]
    return chosen


def plot_tradeoff(
    result: Replay,
    sweep: Sequence[Tuple[float, Metrics]],
    path: str,
    title: str = "",
) -> None:
    """Draw the trade-off: % under-estimated vs mean accuracy, one point per predictor, and
    the ``calibrated`` predictor as a curve over its targets (labelled by target).

    :param result: the replay (its predictors are the points)
    :param sweep: ``(target_under_pct, metrics)`` of ``calibrated`` replays
    :param path: PNG file to write
    :param title: a line above the plot
    :raises SoftwalltimeError: matplotlib is missing
    """
    figure_cls, canvas_cls = matplotlib_classes()
    fig = figure_cls(figsize=(7.5, 5.5))
    ax = fig.subplots()
    if sweep:
        xs = [m.under_pct or 0.0 for _t, m in sweep]
        ys = [m.mean_accuracy or 0.0 for _t, m in sweep]
        ax.plot(xs, ys, "-", color=_COLORS["calibrated"], alpha=0.6, label="calibrated, by target")
        for x, y in zip(xs, ys):
            ax.plot([x], [y], "o", color=_COLORS["calibrated"], markersize=4)
        # Close targets give close points: label only points clear of the labelled ones,
        # alternately right-below and left-above the point (issue 21: labels overlapped).
        for k, side in zip(spaced_labels(xs, ys), range(len(xs))):
            offset = (5, -11) if side % 2 == 0 else (-5, 6)
            ax.annotate(f"{sweep[k][0]:g} %", (xs[k], ys[k]), textcoords="offset points",
                        xytext=offset, ha="left" if side % 2 == 0 else "right",
                        fontsize=7, color=_COLORS["calibrated"])  # fmt: skip
    for name, softs in result.soft_s.items():
        m = metrics(softs, result.runtime_s)
        if m.jobs == 0:
            continue
        ax.plot([m.under_pct], [m.mean_accuracy], "s", color=_COLORS.get(name, "#444444"),
                markersize=8, label="walltime" if name == BASELINE else name)  # fmt: skip
    ax.set_xlabel("% under-estimated (soft walltime < run time)")
    ax.set_ylabel("mean accuracy  min(run/soft, soft/run)")
    ax.grid(True, alpha=0.4)
    ax.legend(loc="lower right", fontsize=9)
    ax.set_title((title + "\n" if title else "") + "Under-estimates vs accuracy", fontsize=10)
    fig.tight_layout()
    save_figure(fig, canvas_cls, path)


def write_plots(
    result: Replay,
    directory: str,
    title: str = "",
    sweep: Optional[Sequence[Tuple[float, Metrics]]] = None,
) -> List[str]:
    """Write the figures into a directory (created if missing).

    :param result: the replay
    :param directory: where the PNG files go
    :param title: shown above the plots (e.g. the trace name)
    :param sweep: ``calibrated`` replays over several targets: adds the trade-off figure
    :returns: the paths written
    :raises SoftwalltimeError: matplotlib is missing or the directory cannot be created
    """
    plot_directory(directory)
    paths = [
        os.path.join(directory, SORTED_ERRORS_PNG),
        os.path.join(directory, ERRORS_BY_CLASS_PNG),
    ]
    plot_sorted_errors(result, paths[0], title)
    plot_errors_by_class(result, paths[1], title)
    if sweep is not None:
        paths.append(os.path.join(directory, TRADEOFF_PNG))
        plot_tradeoff(result, sweep, paths[2], title)
    return paths


SIM_WAIT_PNG = "simulate_wait_by_class.png"
SIM_BSLD_PNG = "simulate_slowdown_by_class.png"
_SIM_COLORS = {"users": "#7f7f7f", "perfect": "#2ca02c", "fixed10": "#9467bd"}


def mean_ci(values: Sequence[float]) -> Tuple[float, float]:
    """Mean and the half-width of its 95 % confidence interval (normal approximation:
    1.96 x standard deviation / sqrt(n); 0 for fewer than two values)."""
    n = len(values)
    if n == 0:
        return 0.0, 0.0
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, 1.96 * math.sqrt(var / n)


def cdf_points(
    values: Sequence[float], max_points: int = _MAX_POINTS
) -> Tuple[List[float], List[float]]:
    """The empirical CDF of ``values`` as at most ``max_points`` (x, fraction <= x) steps
    (every value when there are fewer; else evenly spaced ranks, the last one included)."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return [], []
    if n <= max_points:
        ranks = list(range(n))
    else:
        ranks = sorted({round(k * (n - 1) / (max_points - 1)) for k in range(max_points)})
    # The fraction at a value counts all its ties (the last rank holding it).
    out_x: List[float] = []
    out_y: List[float] = []
    for r in ranks:
        x = xs[r]
        last = bisect.bisect_right(xs, x)
        if out_x and out_x[-1] == x:
            continue
        out_x.append(x)
        out_y.append(last / n)
    return out_x, out_y


def _simulation_values(work: Any, results: Dict[str, Any], metric: str) -> Dict[str, List[float]]:
    from .simulate import job_outcomes

    values: Dict[str, List[float]] = {}
    for name, result in results.items():
        waits, bslds = job_outcomes(work, result)
        values[name] = [w / 3600.0 for w in waits] if metric == "wait" else list(bslds)
    return values


def plot_simulation_by_class(
    work: Any, results: Dict[str, Any], path: str, metric: str, title: str = ""
) -> None:
    """Per runtime class and estimate source: the distribution of the wait (``"wait"``: its
    CDF, log hours, waits under a minute drawn at one minute) or the mean bounded slowdown
    with its 95 % confidence interval (``"bsld"``). On a lightly loaded trace most jobs do
    not wait and most slowdowns are 1, so box plots (issue 21) collapse to a line; a CDF
    shows the share that waited and how long, and the means with intervals show whether
    two sources differ at all.

    :param work: the simulated workload (:class:`softwalltime.replay.simulate.SimWorkload`)
    :param results: estimate source -> :class:`softwalltime.replay.simulate.SimResult`
    :param metric: ``"wait"`` or ``"bsld"``
    """
    figure_cls, canvas_cls = matplotlib_classes()
    classes = [runtime_class(r) for r in work.run]
    names = list(results)
    values = _simulation_values(work, results, metric)
    fig = figure_cls(figsize=(12, 5.5))
    axes = fig.subplots(1, len(CLASSES), sharey=True)
    for ax, (cls, _limit) in zip(axes, CLASSES):
        idx = [k for k, c in enumerate(classes) if c == cls]
        ax.set_title(f"{_CLASS_TITLES[cls]}: {len(idx)} jobs", fontsize=10)
        if not idx:
            ax.text(0.5, 0.5, "no jobs", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            continue
        for pos, name in enumerate(names):
            data = [values[name][k] for k in idx]
            color = _SIM_COLORS.get(name, _COLORS.get(name, "#444444"))
            mean, half = mean_ci(data)
            if metric == "wait":
                xs, ys = cdf_points([max(v, _FLOOR_H) for v in data])
                ax.plot(xs, ys, drawstyle="steps-post", color=color,
                        label=f"{name}: mean {mean:.2f} h \u00b1 {half:.2f}")  # fmt: skip
            else:
                ax.errorbar([pos], [mean], yerr=[half], fmt="o", color=color, capsize=5)
                ax.annotate(f"{mean:.2f}", (pos, mean), textcoords="offset points",
                            xytext=(8, -3), fontsize=8)  # fmt: skip
        if metric == "wait":
            ax.set_xscale("log")
            ax.set_xlabel("wait (hours, log; < 1 min drawn at 1 min)")
            ax.legend(loc="lower right", fontsize=8)
        else:
            ax.set_xticks(range(len(names)))
            ax.set_xticklabels(names)
            ax.set_xlim(-0.5, len(names) - 0.5)
        ax.grid(True, alpha=0.4)
    axes[0].set_ylabel(
        "fraction of jobs that waited at most x"
        if metric == "wait"
        else "mean bounded slowdown (10-minute bound)"
    )
    fig.suptitle(
        (title + "\n" if title else "")
        + (
            "Waiting time by runtime class and estimate source (CDF; legend: mean and its 95 % "
            "confidence interval)"
            if metric == "wait"
            else "Mean bounded slowdown by runtime class and estimate source (bars: 95 % "
            "confidence interval of the mean)"
        ),
        fontsize=10,
    )
    fig.tight_layout()
    save_figure(fig, canvas_cls, path)


def write_simulation_plots(
    work: Any, results: Dict[str, Any], directory: str, title: str = ""
) -> List[str]:
    """Write the wait and slowdown box plots of a simulation into a directory.

    :returns: the paths written
    :raises SoftwalltimeError: matplotlib is missing or the directory cannot be created
    """
    plot_directory(directory)
    paths = [os.path.join(directory, SIM_WAIT_PNG), os.path.join(directory, SIM_BSLD_PNG)]
    plot_simulation_by_class(work, results, paths[0], "wait", title)
    plot_simulation_by_class(work, results, paths[1], "bsld", title)
    return paths
