"""The paper's measures of wait predictions (section 4.2, Tables 3-7).

Per method, over the target jobs:

- **marked %**: of the quick starters (actual wait <= ``quick_s``), those predicted
  <= ``quick_s`` (for a bound: "successfully identified"; Table 3);
- **misguiding %**: of all targets, those predicted <= ``quick_s`` that waited longer, and
  the share of those that waited less than 4 h (Table 4);
- **RMS error** (hours) of predicted - actual wait, and the **normalized RMS error**: each
  error divided by the actual wait, at least ``NRMS_FLOOR_S`` (60 s) so that a job that
  never waited does not divide by zero (Table 5 states no floor);
- **mean PPE_rt**: |predicted - actual wait| / actual response time (wait + run time, at
  least 1 s), as a ratio (Table 7 prints it so: 0.5 is half the response time);
- **good %**: predicted and actual wait in the same slab (<= 1 h, 1-3 h, 3-6 h, 6-12 h,
  12-24 h, 1-2 d, > 2 d), or PPE_rt <= 10 %. The paper rounds both up to its slab's
  interval first (15 min, 30 min, 1 h, 3 h, 6 h, 12 h, 24 h); every slab edge is a
  multiple of its interval, so rounding never moves a value to another slab.
"""

from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Optional, Sequence

# Upper edges of the slabs of Table 6, seconds (the last slab is open).
SLAB_EDGES_S = (3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600, 48 * 3600)
MISGUIDE_SHORT_S = 4 * 3600
NRMS_FLOOR_S = 60
GOOD_PPE = 0.10


class WaitMetrics(NamedTuple):
    """One method's figures over one set of targets (None where undefined)."""

    targets: int
    quick_starters: int
    marked_pct: Optional[float]
    misguiding_pct: Optional[float]
    misguiding_under_4h_pct: Optional[float]
    rms_hours: Optional[float]
    nrms: Optional[float]
    mean_ppe_rt: Optional[float]
    good_pct: Optional[float]


def slab(wait_s: int) -> int:
    """The slab (0-6) of a wait."""
    for k, edge in enumerate(SLAB_EDGES_S):
        if wait_s <= edge:
            return k
    return len(SLAB_EDGES_S)


def measure(
    predicted_s: Sequence[int],
    wait_s: Sequence[int],
    run_s: Sequence[int],
    quick_s: int = 3600,
) -> WaitMetrics:
    """The measures of one method.

    :param predicted_s: predicted wait (or bound) per target, seconds
    :param wait_s: actual wait per target, seconds
    :param run_s: actual run time per target, seconds
    :param quick_s: the quick-starter threshold, seconds
    """
    n = len(wait_s)
    if not n:
        return WaitMetrics(0, 0, None, None, None, None, None, None, None)
    quick = marked = misguided = misguided_short = good = 0
    sq = nsq = ppe_sum = 0.0
    for pred, wait, run in zip(predicted_s, wait_s, run_s):
        err = pred - wait
        sq += err * err
        nsq += (err / max(wait, NRMS_FLOOR_S)) ** 2
        ppe = abs(err) / max(wait + run, 1)
        ppe_sum += ppe
        if wait <= quick_s:
            quick += 1
            marked += pred <= quick_s
        elif pred <= quick_s:
            misguided += 1
            misguided_short += wait < MISGUIDE_SHORT_S
        good += slab(pred) == slab(wait) or ppe <= GOOD_PPE
    return WaitMetrics(
        targets=n,
        quick_starters=quick,
        marked_pct=100.0 * marked / quick if quick else None,
        misguiding_pct=100.0 * misguided / n,
        misguiding_under_4h_pct=100.0 * misguided_short / misguided if misguided else None,
        rms_hours=math.sqrt(sq / n) / 3600.0,
        nrms=math.sqrt(nsq / n),
        mean_ppe_rt=ppe_sum / n,
        good_pct=100.0 * good / n,
    )


def measure_all(
    predicted: Dict[str, List[int]], wait_s: Sequence[int], run_s: Sequence[int], quick_s: int
) -> Dict[str, WaitMetrics]:
    """:func:`measure` for every method."""
    return {name: measure(p, wait_s, run_s, quick_s) for name, p in predicted.items()}
