"""What happens to a running job's estimate when the job outlives it (pure).

The rules (``correction``), each never past the job's walltime:

- ``pbs``: each time the estimate is exceeded it grows by the estimate the job started with
  (PBS extends a soft walltime by its original value);
- ``simple``: +1 h once the job is within 60 s of its estimate;
- ``power``: the i-th correction adds 15 x 2^(i-2) minutes (450 s, 900 s, 1800 s, ...);
- ``walltime``: the user's walltime.

The simulators (:mod:`.easy`, :mod:`.pbsched`) keep a running job as its start, the estimate
it started with (``orig``), its current estimate, its corrections so far, its walltime and
its run time; these functions answer from those alone.
"""

from __future__ import annotations

from typing import Optional, Tuple

PBS = "pbs"
SIMPLE = "simple"
POWER = "power"
WALLTIME = "walltime"
CORRECTIONS = (PBS, SIMPLE, POWER, WALLTIME)
SIMPLE_MARGIN_S = 60
SIMPLE_STEP_S = 3600
_INF = float("inf")


def power_step(i: int) -> int:
    """What the ``i``-th ``power`` correction (i >= 1) adds: 450 s, 900 s, 1800 s, ..."""
    return 450 << (i - 1)


def margin(correction: str) -> int:
    """How long before its estimated end a job is corrected (``simple``: 60 s)."""
    return SIMPLE_MARGIN_S if correction == SIMPLE else 0


def next_estimate(correction: str, est: int, orig: int, wall: int, i: int) -> int:
    """The estimate after the ``i``-th correction (i >= 1), from ``est``."""
    if correction == PBS:
        return min(est + max(orig, 1), wall)
    if correction == SIMPLE:
        return min(est + SIMPLE_STEP_S, wall)
    if correction == POWER:
        return min(est + power_step(i), wall)
    return wall


def pbs_steps(est: int, orig: int, wall: int, late_s: int) -> Tuple[int, int]:
    """Under ``pbs``: ``(estimate, corrections taken)`` for a running job whose estimated
    end (``est``, < ``wall``) passed ``late_s`` >= 0 seconds ago; each correction adds the
    estimate the job started with (at least 1 s), never past the walltime. The one step
    the simulators take, in closed form (millions of times on a large trace)."""
    inc = orig if orig > 1 else 1
    m = late_s // inc + 1
    cap = -(-(wall - est) // inc)
    if cap < m:
        m = cap
    est += m * inc
    return (est if est < wall else wall), m


def extended_estimate(
    correction: str, est: int, orig: int, ncorr: int, wall: int, elapsed: int
) -> Tuple[int, int]:
    """A running job's ``(estimate, corrections so far)`` after the corrections due once it
    has run ``elapsed`` seconds: in closed form under ``pbs``, step by step otherwise."""
    m0 = margin(correction)
    if est >= wall or elapsed < est - m0:
        return est, ncorr
    if correction == PBS:
        est, m = pbs_steps(est, orig, wall, elapsed - est)
        return est, ncorr + m
    while est < wall and elapsed >= est - m0:
        ncorr += 1
        est = next_estimate(correction, est, orig, wall, ncorr)
    return est, ncorr


def crossing(
    correction: str, est: int, orig: int, ncorr: int, wall: int, start: int, run: int, sh: float
) -> float:
    """When a running job's estimated end (``start + est``, at most ``sh``) first moves past
    ``sh`` by its corrections (inf: never before the job ends)."""
    end = start + run
    if start + wall <= sh:
        return _INF
    if correction == PBS:
        inc = max(orig, 1)
        c = start + est + int((sh - start - est) // inc) * inc
        return c if c < end else _INF
    m0 = margin(correction)
    i = ncorr
    while est < wall:
        c = start + est - m0
        if c >= end:
            return _INF
        i += 1
        est = next_estimate(correction, est, orig, wall, i)
        if start + est > sh:
            return c
    return _INF


def reach(correction: str, orig: int) -> Optional[int]:
    """The most one correction can put a job's estimated end past the instant it happens
    (``None``: up to the walltime)."""
    if correction == PBS:
        return max(orig, 1)
    if correction == SIMPLE:
        return SIMPLE_STEP_S + SIMPLE_MARGIN_S
    return None
