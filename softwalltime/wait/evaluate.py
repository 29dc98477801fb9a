"""A trace in, the paper's table out: ``softwalltime eval-wait``.

Each source is one workload: an SWF trace (the machine size from its ``; MaxProcs:``
header) or PBS accounting logs (the machine size = the most processors ever in use at
once), unless the caller gives the machine size. Every method is replayed once per
estimated-run-time source (the users' walltimes, the v3 soft walltimes).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..core.predict import PredictorParams
from ..replay.trace import Trace
from ..replay.trace_readers import SWF, InputLimits, read_sources, sniff_format
from .metrics import measure_all
from .pqstar import METHODS, RULES, WaitParams, replay_waits
from .workload import ERT_SOURCES, build, large_job_procs, swf_max_procs

METHOD_TITLES = {
    "loguniform": "log-uniform",
    "qbets": "QBETS-style",
    "ibl": "IBL",
    "pqstar": "PQStar",
    "pqstar_ibl": "PQStar+IBL",
}


def machine_size(paths: Sequence[str], limits: Optional[InputLimits] = None) -> Optional[int]:
    """The ``MaxProcs`` of a single SWF source, else None (the replay then uses the peak)."""
    if len(paths) == 1:
        try:
            if sniff_format(paths[0], limits) == SWF:
                return swf_max_procs(paths[0])
        except IsADirectoryError:
            return None
    return None


def evaluate_trace(
    trace: Trace,
    machine_procs: Optional[int] = None,
    params: Optional[WaitParams] = None,
    ert_sources: Sequence[str] = ERT_SOURCES,
    predictor_params: Optional[PredictorParams] = None,
    plot_dir: Optional[str] = None,
    on_stage: Optional[Callable[[str], None]] = None,
) -> Dict[str, Any]:
    """Replay one workload through every method, per ERT source; the report as a dict.

    :param trace: the finished jobs
    :param machine_procs: the machine's processors (default: the most in use at once)
    :param params: wait-predictor settings and the target range
    :param ert_sources: ``"walltime"`` and/or ``"soft"``
    :param predictor_params: the v3 predictor's parameters for ``"soft"``
    :param plot_dir: also write the paper's figures (:mod:`.plots`) into
        ``plot_dir/<source name>-<ert>/``
    :param on_stage: called with a few words before each stage (progress for a person)
    """
    if params is None:
        params = WaitParams()
    stage = on_stage or (lambda text: None)
    report: Dict[str, Any] = {"source": trace.source, "by_ert": {}}
    for number, ert in enumerate(ert_sources, 1):
        step = f"ERT {ert} ({number}/{len(ert_sources)})"
        started = time.perf_counter()
        stage(f"{step}: preparing {len(trace.jobs):,} jobs")
        work = build(trace, ert, machine_procs, predictor_params)
        stage(f"{step}: replaying {len(work.jobs):,} jobs through {len(METHODS)} predictors")
        res = replay_waits(work.jobs, work.machine_procs, params)
        elapsed = time.perf_counter() - started
        n = len(res.targets)
        quick = sum(1 for w in res.wait_s if w <= params.quick_s)
        report.update(
            jobs=len(work.jobs),
            skipped=sum(work.skipped.values()),
            skipped_by_reason=dict(sorted(work.skipped.items())),
            machine_procs=work.machine_procs,
            large_procs=large_job_procs(work.machine_procs),
            quick_s=params.quick_s,
            first_target=params.first_target + 1,
            last_target=params.first_target + n,
            targets=n,
            quick_starter_pct=100.0 * quick / n if n else None,
        )
        rules, fallback, criteria = rule_counts(res, params.quick_s)
        metrics = measure_all(res.predicted_s, res.wait_s, res.run_s, params.quick_s)
        # PQStar's own marks, without what IBL predicts <= quick_s for the jobs it leaves.
        own_marked = sum(rules[r]["jobs"] - rules[r]["waited_longer"] for r in RULES if r != "ibl")
        own_misguided = sum(rules[r]["waited_longer"] for r in RULES if r != "ibl")
        if plot_dir is not None:
            from .plots import write_wait_plots

            stage(f"{step}: plotting")
            name = os.path.basename(trace.source.split(", ")[0].rstrip("/")) or "source"
            write_wait_plots(res, os.path.join(plot_dir, f"{name}-{ert}"), f"{name}, ERT {ert}")
        report["by_ert"][ert] = {
            "methods": {m: metrics[m]._asdict() for m in METHODS},
            "pqstar_rules": rules,
            "pqstar_ibl_marked": fallback,
            "pqstar_mid_criteria": criteria,
            "pqstar_rules_marked_pct": 100.0 * own_marked / quick if quick else None,
            "pqstar_rules_misguiding_pct": 100.0 * own_misguided / n if n else None,
            "near_history_mean_jobs": sum(res.near_jobs) / n if n else None,
            "seconds": round(elapsed, 2),
        }
    return report


def rule_counts(
    res: Any, quick_s: int
) -> Tuple[Dict[str, Dict[str, int]], Dict[str, int], Dict[str, Dict[str, int]]]:
    """Per PQStar rule, the jobs it decided and those that waited longer than ``quick_s``;
    the jobs PQStar leaves to IBL that IBL predicts <= ``quick_s`` (marked all the same);
    and per mid-term criterion, the jobs it held for."""
    rules: Dict[str, Dict[str, int]] = {r: {"jobs": 0, "waited_longer": 0} for r in RULES}
    fallback = {"marked": 0, "waited_longer": 0}
    for rule, wait, ibl_s in zip(res.rule, res.wait_s, res.predicted_s["ibl"]):
        rules[rule]["jobs"] += 1
        rules[rule]["waited_longer"] += wait > quick_s
        if rule == "ibl" and ibl_s <= quick_s:
            fallback["marked"] += 1
            fallback["waited_longer"] += wait > quick_s
    criteria: Dict[str, Dict[str, int]] = {
        c: {"jobs": 0, "waited_longer": 0} for c in ("size_rank", "ert_rank", "free_nodes")
    }
    for held, wait in zip(res.mid_criteria, res.wait_s):
        for flag, name in (("S", "size_rank"), ("E", "ert_rank"), ("F", "free_nodes")):
            if flag in held:
                criteria[name]["jobs"] += 1
                criteria[name]["waited_longer"] += wait > quick_s
    return rules, fallback, criteria


def evaluate_sources(
    paths: Sequence[str],
    machine_procs: Optional[int] = None,
    params: Optional[WaitParams] = None,
    ert_sources: Sequence[str] = ERT_SOURCES,
    predictor_params: Optional[PredictorParams] = None,
    limits: Optional[InputLimits] = None,
    server: Optional[str] = None,
    plot_dir: Optional[str] = None,
) -> Dict[str, Any]:
    """Read ``paths`` as one workload and :func:`evaluate_trace` it.

    :raises ParseError: a source cannot be read
    """
    trace = read_sources(paths, server=server, limits=limits)
    if machine_procs is None:
        machine_procs = machine_size(paths, limits)
    return evaluate_trace(trace, machine_procs, params, ert_sources, predictor_params, plot_dir)


def _num(value: Optional[float], fmt: str) -> str:
    """``value`` formatted, or a dash as wide as the format's width."""
    if value is None:
        width = fmt.split(".")[0]
        return "-".rjust(int(width) if width.isdigit() else 1)
    return format(value, fmt)


def format_report(report: Dict[str, Any]) -> str:
    """The report as the text table ``eval-wait`` prints."""
    lines: List[str] = [
        f"source: {report['source']}",
        f"jobs: {report['jobs']:,}   skipped: {report['skipped']:,}   machine:"
        f" {report['machine_procs']:,} processors (large job: >= {report['large_procs']})",
        f"targets: jobs {report['first_target']:,}-{report['last_target']:,}"
        f" ({report['targets']:,}); quick starters (wait <= {report['quick_s']} s):"
        f" {_num(report['quick_starter_pct'], '.1f')} %",
    ]
    for ert, part in report["by_ert"].items():
        title = "users' walltimes" if ert == "walltime" else "soft walltimes (v3 at submit)"
        lines.append("")
        lines.append(f"estimated run time: {title}")
        lines.append(
            f"  {'method':<12} {'marked %':>8} {'misguid %':>9} {'<4h %':>6} {'RMS h':>7}"
            f" {'NRMS':>8} {'PPE_rt':>8} {'good %':>7}"
        )
        for name, m in part["methods"].items():
            lines.append(
                f"  {METHOD_TITLES[name]:<12} {_num(m['marked_pct'], '8.1f')}"
                f" {_num(m['misguiding_pct'], '9.1f')}"
                f" {_num(m['misguiding_under_4h_pct'], '6.0f')} {_num(m['rms_hours'], '7.2f')}"
                f" {_num(m['nrms'], '8.1f')} {_num(m['mean_ppe_rt'], '8.2f')}"
                f" {_num(m['good_pct'], '7.1f')}"
            )
        rules = part["pqstar_rules"]
        lines.append(
            "  PQStar decided by: "
            + ", ".join(
                f"{r} {rules[r]['jobs']:,} ({rules[r]['waited_longer']:,} waited longer)"
                for r in RULES
            )
            + f" (of ibl, IBL predicted <= {report['quick_s']} s for"
            f" {part['pqstar_ibl_marked']['marked']:,}:"
            f" {part['pqstar_ibl_marked']['waited_longer']:,} waited longer)"
            + f"; near-term history {_num(part['near_history_mean_jobs'], '.1f')} jobs on average"
        )
        crit = part["pqstar_mid_criteria"]
        lines.append(
            "  mid-term marks by criterion (several may hold): "
            + ", ".join(
                f"{c.replace('_', ' ')} {crit[c]['jobs']:,} ({crit[c]['waited_longer']:,} waited"
                " longer)"
                for c in crit
            )
        )
        lines.append(
            "  PQStar's rules alone (no IBL): marked"
            f" {_num(part['pqstar_rules_marked_pct'], '.1f')} %, misguiding"
            f" {_num(part['pqstar_rules_misguiding_pct'], '.1f')} %"
        )
    return "\n".join(lines)
