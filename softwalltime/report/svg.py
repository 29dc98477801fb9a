"""Small inline-SVG charts (box plots, bars, heatmaps): no library, no network, no script.

Each function returns one ``<svg>`` element as text; every label is escaped.
"""

from __future__ import annotations

import math
from html import escape
from typing import Callable, List, Optional, Sequence, Tuple

WALL = "#9e9e9e"  # the users' walltimes
SOFT = "#1f77b4"  # soft walltimes
BEFORE = "#9e9e9e"
AFTER = "#1f77b4"
_FONT = 'font-family="sans-serif" font-size="11"'

# One box: (series label, quantiles p5 p25 p50 p75 p95 or None, colour).
Box = Tuple[str, Optional[Sequence[float]], str]
# Value -> pixel row.
Scale = Callable[[float], float]


def symlog(value: float) -> float:
    """Signed log scale, linear near 0: sign(v) * log10(1 + |v|)."""
    return math.copysign(math.log10(1.0 + abs(value)), value)


def _ticks(lo: float, hi: float, log: bool) -> List[float]:
    if log:
        base = [0.0] + [s * 10.0**k for k in range(0, 5) for s in (1.0, -1.0)]
        return sorted(t for t in base if lo <= symlog(t) <= hi)
    step = _nice_step((hi - lo) / 5 or 1.0)
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def _nice_step(raw: float) -> float:
    exp = 10.0 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * exp:
            return m * exp
    return 10 * exp


def _fmt(v: float) -> str:
    return f"{v:g}" if abs(v) >= 0.01 or v == 0 else f"{v:.2g}"


# The page's width for charts (html's body is 1200 px wide, less its margins).
PAGE_WIDTH = 1150
# Group labels longer than this are cut, whole in their tooltip.
LABEL_CHARS = 28


def _label(text: str) -> str:
    """A label's SVG text: cut to :data:`LABEL_CHARS`, with the whole in a ``<title>``."""
    if len(text) <= LABEL_CHARS:
        return escape(text)
    return f"<title>{escape(text)}</title>{escape(text[: LABEL_CHARS - 1])}…"


def boxplots(
    groups: Sequence[Tuple[str, Sequence[Box]]],
    y_label: str,
    log: bool = True,
    min_width: int = PAGE_WIDTH,
) -> str:
    """Box plots in groups (x) of a few boxes each; y is ``symlog`` when ``log``. Few groups
    are spread over ``min_width`` pixels."""
    values = [v for _, boxes in groups for _, q, _ in boxes if q for v in q]
    scale = symlog if log else float
    lo = min([scale(v) for v in values] + [0.0])
    hi = max([scale(v) for v in values] + [1.0 if not log else symlog(1.0)])
    per_group = max((len(b) for _, b in groups), default=1)
    gw = max(18 * per_group + 26, (min_width - 130) / max(len(groups), 1))
    # A wide left margin: the first rotated x label reaches left of its group.
    width, height, left, top, bottom = 130 + gw * max(len(groups), 1), 350, 120, 14, 110
    plot_h = height - top - bottom

    def y(v: float) -> float:
        return top + plot_h * (hi - scale(v)) / ((hi - lo) or 1.0)

    parts = [_axis_y(_ticks(lo, hi, log), y, left, width, y_label, top + plot_h / 2)]
    for gi, (label, boxes) in enumerate(groups):
        x0 = left + 10 + gi * gw
        first = x0 + (gw - 26 - 18 * len(boxes)) / 2  # the boxes in the middle of the group
        for bi, (name, q, colour) in enumerate(boxes):
            if q:
                parts.append(_box(round(first + bi * 18, 1), q, colour, y, name))
        parts.append(
            f'<text x="{x0 + gw / 2 - 13:.1f}" y="{height - bottom + 14}" {_FONT}'
            f' text-anchor="end" transform="rotate(-35 {x0 + gw / 2 - 13:.1f}'
            f' {height - bottom + 14})">{_label(label)}</text>'
        )
    return _svg(width, height, parts)


def _axis_y(
    ticks: Sequence[float], y: Scale, left: int, width: float, label: str, mid: float
) -> str:
    out = []
    for t in ticks:
        yy = y(t)
        stroke = "#444" if t == 0 else "#ddd"
        out.append(
            f'<line x1="{left}" x2="{width - 5}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="{stroke}"/>'
            f'<text x="{left - 4}" y="{yy + 4:.1f}" {_FONT} text-anchor="end">{_fmt(t)}</text>'
        )
    out.append(
        f'<text x="{left - 40}" y="{mid:.1f}" {_FONT} text-anchor="middle"'
        f' transform="rotate(-90 {left - 40} {mid:.1f})">{escape(label)}</text>'
    )
    return "".join(out)


def _box(x: float, q: Sequence[float], colour: str, y: Scale, name: str) -> str:
    p5, p25, p50, p75, p95 = (y(v) for v in q)
    cx = x + 7
    tip = escape(f"{name}: p5 {q[0]:.2f}, p25 {q[1]:.2f}, median {q[2]:.2f},"
                 f" p75 {q[3]:.2f}, p95 {q[4]:.2f}")  # fmt: skip
    return (
        f"<g><title>{tip}</title>"
        f'<line x1="{cx}" x2="{cx}" y1="{p95:.1f}" y2="{p5:.1f}" stroke="{colour}"/>'
        f'<rect x="{x}" y="{p75:.1f}" width="14" height="{max(p25 - p75, 1):.1f}"'
        f' fill="{colour}" fill-opacity="0.35" stroke="{colour}"/>'
        f'<line x1="{x}" x2="{x + 14}" y1="{p50:.1f}" y2="{p50:.1f}" stroke="#000"'
        ' stroke-width="2"/></g>'
    )


def bars(values: Sequence[Tuple[str, float]], y_label: str, colour: str = SOFT) -> str:
    """Vertical bars with a value label on each (linear scale from 0)."""
    hi = max([v for _, v in values] + [1e-9])
    width, height, left, top, bottom = 80 + 46 * max(len(values), 1), 220, 60, 18, 40
    plot_h = height - top - bottom
    parts = [
        _axis_y(
            _ticks(0, hi, False),
            lambda v: top + plot_h * (1 - v / hi),
            left,
            width,
            y_label,
            top + plot_h / 2,
        )  # fmt: skip
    ]
    for i, (label, v) in enumerate(values):
        x = left + 10 + i * 46
        h = plot_h * v / hi
        parts.append(
            f'<rect x="{x}" y="{top + plot_h - h:.1f}" width="32" height="{max(h, 0.5):.1f}"'
            f' fill="{colour}"/><text x="{x + 16}" y="{top + plot_h - h - 3:.1f}" {_FONT}'
            f' text-anchor="middle">{_fmt(round(v, 1))}</text>'
            f'<text x="{x + 16}" y="{height - bottom + 14}" {_FONT}'
            f' text-anchor="middle">{_label(label)}</text>'
        )
    return _svg(width, height, parts)


def sorted_bars(values: Sequence[float], y_label: str) -> str:
    """One thin bar per value (already sorted), symlog y: blue above 0, red below."""
    n = max(len(values), 1)
    width, height, left, top, bottom = PAGE_WIDTH, 260, 60, 14, 24
    plot_h, plot_w = height - top - bottom, width - left - 10
    lo = min([symlog(v) for v in values] + [0.0])
    hi = max([symlog(v) for v in values] + [symlog(1.0)])

    def y(v: float) -> float:
        return top + plot_h * (hi - symlog(v)) / ((hi - lo) or 1.0)

    parts = [_axis_y(_ticks(lo, hi, True), y, left, width, y_label, top + plot_h / 2)]
    bw = plot_w / n
    for i, v in enumerate(values):
        y0, y1 = sorted((y(0.0), y(v)))
        colour = SOFT if v >= 0 else "#d62728"
        parts.append(
            f'<rect x="{left + i * bw:.2f}" y="{y0:.1f}" width="{max(bw * 0.8, 0.3):.2f}"'
            f' height="{max(y1 - y0, 0.5):.1f}" fill="{colour}"/>'
        )
    return _svg(width, height, parts)


def heatmap(
    cells: Sequence[Sequence[float]], rows: Sequence[str], cols: Sequence[str], title: str
) -> str:
    """Percentages in a grid (rows x cols), darker for more; rows drawn bottom-up."""
    cw, ch, left, top = 52, 22, 52, 30
    width, height = left + cw * len(cols) + 6, top + ch * len(rows) + 40
    hi = max([v for r in cells for v in r] + [1e-9])
    parts = [f'<text x="{left}" y="16" {_FONT} font-weight="bold">{escape(title)}</text>']
    for ri, label in enumerate(rows):
        yy = top + ch * (len(rows) - 1 - ri)
        parts.append(
            f'<text x="{left - 4}" y="{yy + 15}" {_FONT} text-anchor="end">{escape(label)}</text>'
        )
        for ci, v in enumerate(cells[ri]):
            a = 0.05 + 0.95 * v / hi if v else 0.0
            ink = "#fff" if a > 0.55 else "#000"
            parts.append(
                f'<rect x="{left + ci * cw}" y="{yy}" width="{cw - 1}" height="{ch - 1}"'
                f' fill="#08519c" fill-opacity="{a:.3f}" stroke="#eee"/>'
                f'<text x="{left + ci * cw + cw / 2}" y="{yy + 15}" {_FONT} fill="{ink}"'
                f' text-anchor="middle">{_fmt(round(v, 1)) if v else ""}</text>'
            )
    for ci, label in enumerate(cols):
        parts.append(
            f'<text x="{left + ci * cw + cw / 2}" y="{top + ch * len(rows) + 14}" {_FONT}'
            f' text-anchor="middle">{escape(label)}</text>'
        )
    return _svg(width, height, parts)


def legend(items: Sequence[Tuple[str, str]]) -> str:
    """A one-line colour legend."""
    parts = []
    for i, (label, colour) in enumerate(items):
        x = 4 + i * 150
        parts.append(
            f'<rect x="{x}" y="4" width="12" height="12" fill="{colour}" fill-opacity="0.6"/>'
            f'<text x="{x + 16}" y="14" {_FONT}>{escape(label)}</text>'
        )
    return "<div>" + _svg(150 * len(items) + 8, 20, parts) + "</div>"


def _svg(width: float, height: float, parts: Sequence[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}"'
        f' viewBox="0 0 {width:.0f} {height:.0f}" role="img">{"".join(parts)}</svg>'
    )
