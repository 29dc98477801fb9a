"""Scheduler simulation: what soft walltimes do to waiting times and slowdown (pure).

The model (also in ``softwalltime simulate --help`` and the README):

- **Machine**: a pool of ``procs_total`` processors. A job uses its allocated (else
  requested) processors.
- **Jobs** arrive at their submit time and run for their real run time, cut at their
  requested walltime (PBS kills there).
- **Estimates** the scheduler plans with come from an :class:`EstimateSource`: the users'
  walltimes, a predictor of the hook (v1, v2, v3 through
  :func:`softwalltime.core.predict.predict`), ``perfect`` (the real run time) or
  ``fixed10`` (10 minutes, at most the walltime). A source is asked at submit
  (``queuejob``) and again at start (``runjob``); predictors use the history of the user's
  jobs that have *ended in the simulation* by then, most recent end first.
- **Scheduler**: first come first served (submit time, then trace order) with EASY
  backfilling. At each pass, jobs start from the head while the head fits. For the head that
  does not fit, its *shadow time* is the earliest estimated end of a running job
  (``max(now, start + current estimate)``) at which enough processors are free, and *extra*
  is the number of processors free at the shadow time counting every running job whose
  estimated end is at or before it, minus the head's processors. The rest of the queue is
  scanned in order: a job that fits now starts if ``now + estimate <= shadow``, or else if it
  needs no more than *extra* processors (which it then uses up). A queued job's estimate is
  its submit-time prediction. ``backfill_depth`` K > 1 gives the first K jobs that cannot
  start a reservation each (computed on the availability profile, earlier reservations
  included), and a job starts if the processors free from now to its estimated end, with
  those reservations, never fall below its own (PBS's ``simulate_resmin`` over the events
  before the job's end, simulate.cpp:1800-1802). ``sjbf`` scans backfill candidates
  shortest estimate first.
- **Event order** at equal times: job ends (reported to the estimate source in FCFS
  order: a source that learns from ends, like ``calibrated``, may depend on it), then
  estimate corrections (and refreshes), then arrivals, then one scheduling pass.
- **Corrections** when a running job outlives its estimate: ``pbs`` (each time the
  estimate is exceeded it grows by the estimate the job started with), ``simple`` (+1 h
  once the job is within 60 s of its estimate), ``power`` (the i-th correction adds
  15 x 2^(i-2) minutes) and ``walltime`` (the user's walltime). Never past the walltime.
  Steps of ``pbs`` that cannot change any scheduling decision (no other event in between and
  the estimated end does not cross the head's shadow time) are taken in one closed-form
  jump, so a 1-second estimate of a day-long job costs a few operations, not 86,400 events.
  With ``backfill_depth`` 1 they are applied only when a pass reads the running jobs' ends
  in order, and windows in which provably no job can start are skipped (the shadow can
  run ahead of now by at most the largest increment of the jobs it waits for).
- **Refresh** (optional, ``refresh_every_s``): at every multiple of that period, queued
  jobs of users with newly ended jobs are predicted again; the new value replaces the
  estimate when it differs by more than ``refresh_pct`` % and at least ``refresh_min_s``.

Metrics: wait (start - submit), bounded slowdown ``max(1, (wait + run) / max(run, 600 s))``,
overall and per runtime class of ``evaluate``; utilization; makespan; corrections.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from .corrections import CORRECTIONS
from .easy import Easy, Refresh, SimResult
from .evaluate import CLASSES, format_figure, runtime_class, target_text
from .sim_workload import (
    SKIP_PROCS,
    SKIP_TOO_WIDE,
    SimWorkload,
    fit_machine,
    make_workload,
    read_workload,
)
from .sources import (
    BASELINE,
    CALIBRATED,
    FIXED10,
    PERFECT,
    SOURCE_NAMES,
    CalibratedSource,
    EstimateSource,
    FixedSource,
    LearnedSource,
    PerfectSource,
    PredictorSource,
    WalltimeSource,
    make_source,
)

# The workload, the estimate sources, the correction rules and the result are re-exported:
# callers of simulate name them here.
__all__ = [
    "BASELINE",
    "BSLD_BOUND_S",
    "CALIBRATED",
    "CORRECTIONS",
    "FIXED10",
    "PERFECT",
    "SKIP_PROCS",
    "SKIP_TOO_WIDE",
    "SOURCE_NAMES",
    "CalibratedSource",
    "LearnedSource",
    "EstimateSource",
    "FixedSource",
    "PerfectSource",
    "PredictorSource",
    "Refresh",
    "SimResult",
    "Stats",
    "WalltimeSource",
    "SimWorkload",
    "fit_machine",
    "format_table",
    "job_outcomes",
    "make_source",
    "make_workload",
    "read_workload",
    "simulate",
    "stats",
    "summarize",
]

BSLD_BOUND_S = 600


# ---------------------------------------------------------------------------------------
# Simulation


def simulate(
    work: SimWorkload,
    source: EstimateSource,
    procs_total: int,
    correction: str = "pbs",
    backfill_depth: int = 1,
    sjbf: bool = False,
    refresh: Optional[Refresh] = None,
    lazy_corrections: bool = False,
) -> SimResult:
    """Simulate FCFS + EASY backfilling with the estimates of ``source``; see the module doc
    and :class:`.easy.Easy`, which runs it.

    ``lazy_corrections``: corrections get no scheduling pass of their own; they are applied
    (in closed form) when a pass happens for an end or an arrival, as PBS's scheduler
    extends soft walltimes when it runs a cycle.

    :param work: the jobs (none wider than ``procs_total``: see :func:`fit_machine`)
    :raises ValueError: bad parameters or a job wider than the machine
    """
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}, not {correction!r}")
    if backfill_depth < 1:
        raise ValueError("backfill_depth must be at least 1")
    if procs_total < 1:
        raise ValueError("the machine needs at least 1 processor")
    if work.procs and max(work.procs) > procs_total:
        raise ValueError("a job needs more processors than the machine has")
    return Easy(
        work, source, procs_total, correction, backfill_depth, sjbf, refresh, lazy_corrections
    ).run()


# ---------------------------------------------------------------------------------------
# Metrics


class Stats(NamedTuple):
    jobs: int
    wait_mean_h: Optional[float]
    wait_median_h: Optional[float]
    wait_p95_h: Optional[float]
    bsld_mean: Optional[float]
    bsld_median: Optional[float]
    bsld_p95: Optional[float]


def _pct(sorted_values: Sequence[float], q: float) -> float:
    # Linear interpolation between closest ranks (numpy's default).
    n = len(sorted_values)
    pos = (n - 1) * q
    lo = int(math.floor(pos))
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def stats(waits: Sequence[int], bslds: Sequence[float]) -> Stats:
    n = len(waits)
    if n == 0:
        return Stats(0, None, None, None, None, None, None)
    w = sorted(waits)
    b = sorted(bslds)
    return Stats(
        n,
        sum(w) / n / 3600.0,
        _pct(w, 0.5) / 3600.0,
        _pct(w, 0.95) / 3600.0,
        sum(b) / n,
        _pct(b, 0.5),
        _pct(b, 0.95),
    )


def job_outcomes(work: SimWorkload, result: SimResult) -> Tuple[List[int], List[float]]:
    """Per job: wait (s) and bounded slowdown (10-minute bound)."""
    waits = [s - sub for s, sub in zip(result.start, work.submit)]
    bslds = [max(1.0, (w + r) / max(r, BSLD_BOUND_S)) for w, r in zip(waits, work.run)]
    return waits, bslds


def summarize(
    work: SimWorkload, result: SimResult, source: Optional[EstimateSource] = None
) -> Dict[str, Any]:
    """Metrics of one simulation as a JSON-ready dict.

    :param source: the estimate source simulated: ``calibrated`` and ``learned`` add their
        target and the under-estimate rate achieved (:meth:`CalibratedSource.target_report`)
    """
    waits, bslds = job_outcomes(work, result)
    classes = [runtime_class(r) for r in work.run]
    by_class = {}
    for cls, _limit in CLASSES:
        idx = [k for k, c in enumerate(classes) if c == cls]
        by_class[cls] = stats([waits[k] for k in idx], [bslds[k] for k in idx])._asdict()
    n = len(waits)
    if n:
        first = min(work.submit)
        last = max(s + r for s, r in zip(result.start, work.run))
        span = last - first
        work_ps = sum(p * r for p, r in zip(work.procs, work.run))
        util = work_ps / (result.procs_total * span) if span > 0 else None
    else:
        span = 0
        util = None
    obj: Dict[str, Any] = stats(waits, bslds)._asdict()
    obj.update(
        {
            "utilization": util,
            "makespan_h": span / 3600.0,
            "corrections": sum(result.corrections),
            "jobs_corrected": sum(1 for c in result.corrections if c),
            "refresh_changes": result.refresh_changes,
            "by_class": by_class,
        }
    )
    if isinstance(source, (CalibratedSource, LearnedSource)):
        obj.update(source.target_report())
    return obj


def _rel(value: Optional[float], base: Optional[float]) -> str:
    if value is None or not base:
        return "-"
    return format(100.0 * (value - base) / base, "+.1f")


def format_table(report: Dict[str, Any]) -> str:
    """Render one trace's report (``sources`` -> summarize() dicts) as text."""
    # As evaluate's table says it: the skip counts by reason after the total.
    why = ", ".join(f"{k} {v}" for k, v in sorted(report.get("skipped_by_reason", {}).items()))
    lines = [
        "source: {}".format(report["source"]),
        "machine: {} processors   jobs: {}   skipped: {}   correction: {}   "
        "backfill depth: {}{}{}".format(
            report["procs"],
            report["jobs"],
            "{}{}".format(report["skipped"], f" ({why})" if why else ""),
            report["correction"],
            report["backfill_depth"],
            "   SJBF" if report["sjbf"] else "",
            "   refresh every {} min".format(report["refresh_every_min"])
            if report.get("refresh_every_min")
            else "",
        ),
        "",
        "{:<17}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>7}{:>12}".format(
            "wait in hours",
            "jobs",
            "mean",
            "median",
            "p95",
            "vs usr%",
            "bsld",
            "vs usr%",
            "bsld95",
            "util",
            "corrections",
        ),
    ]
    sources = report["sources"]
    base = sources.get(BASELINE)
    groups = [("all jobs", None)] + [
        ("short (<= 2 h)", "short"),
        ("medium (2-24 h]", "medium"),
        ("long (> 24 h)", "long"),
    ]
    for title, cls in groups:
        lines.append(title)
        for name, obj in sources.items():
            m = obj if cls is None else obj["by_class"][cls]
            b = None if base is None else (base if cls is None else base["by_class"][cls])
            lines.append(
                "  {:<15}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>7}{:>12}".format(
                    name,
                    m["jobs"],
                    format_figure(m["wait_mean_h"], ".2f"),
                    format_figure(m["wait_median_h"], ".2f"),
                    format_figure(m["wait_p95_h"], ".2f"),
                    _rel(m["wait_mean_h"], b["wait_mean_h"] if b else None),
                    format_figure(m["bsld_mean"], ".2f"),
                    _rel(m["bsld_mean"], b["bsld_mean"] if b else None),
                    format_figure(m["bsld_p95"], ".1f"),
                    format_figure(obj["utilization"], ".3f") if cls is None else "",
                    str(obj["corrections"]) if cls is None else "",
                ).rstrip()
            )
    lines.append("")
    lines.append(
        "makespan (h): "
        + "   ".join("{} {:.1f}".format(k, v["makespan_h"]) for k, v in sources.items())
    )
    for name, obj in sources.items():
        if "target" in obj:  # calibrated: its target and the rate achieved, as evaluate's
            lines.append(f"{name}: {target_text(obj)} (estimates the jobs started with)")
    if report.get("refresh_every_min"):
        lines.append(
            "refresh changes: "
            + "   ".join("{} {}".format(k, v["refresh_changes"]) for k, v in sources.items())
        )
    return "\n".join(lines) + "\n"
