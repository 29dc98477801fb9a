"""The report as one self-contained HTML page: inline CSS and SVG, no script, no network.

Each section is a function of the numbers :func:`.queries.collect` returns, so it can be
tested alone; each figure carries a one-line reading computed from those numbers.
"""

from __future__ import annotations

from html import escape
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import svg
from .queries import CLASSES, MIN_JOBS_FOR_WORST, SIZE_LABELS, TIME_LABELS

_CSS = """
body{font-family:sans-serif;margin:24px;max-width:1200px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ccc}
figure{margin:12px 0}figcaption{font-size:13px;margin-top:4px}
.reading{font-weight:bold}.note{font-size:12px;color:#555}
.synthetic{background:#fff3cd;border:1px solid #e0c060;padding:8px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}
.row{display:flex;flex-wrap:wrap;gap:18px}
"""


def _h(value: Optional[float], digits: int = 1) -> str:
    """Hours for a person: ``12.3 h``, ``45 min``, or a dash."""
    if value is None:
        return "-"
    if abs(value) < 1:
        return f"{value * 60:.0f} min"
    return f"{value:.{digits}f} h"


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1f} %"


def _figure(title: str, reading: str, body: str, note: str = "") -> str:
    extra = f'<div class="note">{escape(note)}</div>' if note else ""
    return (
        f"<h2>{escape(title)}</h2><figure>{body}<figcaption>"
        f'<span class="reading">{escape(reading)}</span>{extra}</figcaption></figure>'
    )


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    head = "".join(
        f'<th class="{"l" if i < left else ""}">{escape(h)}</th>' for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{"l" if i < left else ""}">{escape(str(v))}</td>'
            for i, v in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def header(data: Dict[str, Any], meta: Dict[str, Any]) -> str:
    """Title, scope, deployment and counts; a banner when the history is synthetic."""
    t = data["totals"]
    scope = ", ".join(f"{k} {v}" for k, v in meta["scope"].items() if v) or "whole history"
    banner = ""
    if t["synthetic"]:
        sources = "; ".join(s[len("synthetic:") :] for s in t["synthetic_sources"])
        banner = (
            f'<p class="synthetic">Synthetic data: {t["synthetic"]} of {t["jobs"]} jobs are'
            f" not from this system's accounting ({escape(sources)}).</p>"
        )
    return (
        f"<h1>What soft walltimes did here</h1>{banner}"
        f"<p>Scope: {escape(scope)}. Jobs ended {escape(str(t['first_end']))} to"
        f" {escape(str(t['last_end']))}. Deployment: {escape(str(meta['deployed_at']))}"
        f" ({escape(meta['deployed_how'])}).</p>"
        f"<p>{t['jobs']} finished jobs of {t['users']} users: {t['before']} created before"
        f" deployment, {t['after_soft']} after it with a soft walltime (compared),"
        f" {t['after_without_soft']} after it without one (left out, as in the paper).</p>"
        f'<p class="note">Error = estimate - run time (positive: over-estimate). Classes by'
        f" run time: short &le; 2 h, medium 2-24 h, long &gt; 24 h. Generated"
        f" {escape(meta['generated_at'])}.</p>"
    )


def _class_rows(data: Dict[str, Any], after: bool) -> Dict[str, Dict[str, Any]]:
    return {r["cls"]: r for r in data["by_class"] if r["after"] is after}


def summary(data: Dict[str, Any]) -> str:
    """Per class after deployment: median errors, under-estimates (the headline table)."""
    after = _class_rows(data, True)
    rows = []
    for cls in CLASSES:
        r = after.get(cls)
        if r:
            rows.append(
                (
                    cls,
                    r["jobs"],
                    _h(r["median_wall_error_h"]),
                    _h(r["median_soft_error_h"]),
                    _pct(r["under_pct"]),
                )  # fmt: skip
            )
    table = _table(
        ("class", "jobs", "median error of walltime", "median error of soft walltime",
         "under-estimated"), rows)  # fmt: skip
    return f"<h2>Summary (after deployment)</h2>{table}"


def errors_by_month(data: Dict[str, Any]) -> str:
    """Figure 5: error box plots per month x class, walltime vs soft walltime."""
    groups: List[Tuple[str, Sequence[svg.Box]]] = []
    for r in data["error_by_month_class"]:
        boxes = [("walltime", r["wall_q"], svg.WALL), ("soft walltime", r["soft_q"], svg.SOFT)]
        groups.append((f"{r['month']} {r['cls']} ({r['jobs']})", boxes))
    after = _class_rows(data, True)
    worst = [
        f"{c}: {_h(after[c]['median_wall_error_h'])} -> {_h(after[c]['median_soft_error_h'])}"
        for c in CLASSES
        if c in after
    ]
    reading = "Median error after deployment, walltime -> soft walltime: " + "; ".join(worst)
    body = svg.legend([("walltime", svg.WALL), ("soft walltime", svg.SOFT)]) + svg.boxplots(
        groups, "error (h, signed log scale)"
    )
    return _figure(
        "Error of walltime and soft walltime by month and runtime class (Fig. 5)",
        reading,
        body,
        "Boxes: quartiles; whiskers: 5th and 95th percentiles; (n) jobs compared.",
    )


def errors_by_queue(data: Dict[str, Any]) -> str:
    """Figure 7: after deployment, jobs and errors grouped by runtime class (left) and by
    queue (right), the box plots on one scale."""
    after = _class_rows(data, True)
    classes = [(c, after[c]) for c in CLASSES if c in after]
    queues = data["by_queue"]
    total = sum(r["jobs"] for _, r in classes) or 1
    shares = [(f"{c}", 100.0 * r["jobs"] / total) for c, r in classes]
    queue_shares = [(str(r["queue"]), 100.0 * r["jobs"] / total) for r in queues]
    groups: List[Tuple[str, Sequence[svg.Box]]] = [
        (f"{c} ({r['jobs']})",
         [("walltime", r["wall_q"], svg.WALL), ("soft walltime", r["soft_q"], svg.SOFT)])
        for c, r in classes
    ] + [
        (f"{r['queue']} ({r['jobs']})",
         [("walltime", r["wall_q"], svg.WALL), ("soft walltime", r["soft_q"], svg.SOFT)])
        for r in queues
    ]  # fmt: skip
    # The paper's comparison: "long" by run time (> 24 h) against queues whose limit (the
    # longest walltime seen in them) is above 24 h.
    long_queues = [r for r in queues if r["max_walltime_s"] > 86400]
    in_long_queues = sum(r["jobs"] for r in long_queues)
    long_jobs = after.get("long")
    reading = (
        "By run time: " + ", ".join(f"{c} {v:.0f} %" for c, v in shares) + " of jobs;"
        f" in queues with a limit above 24 h: {100.0 * in_long_queues / total:.0f} %."
    )
    if long_jobs and in_long_queues:
        under_long_queues = sum(r["under_pct"] * r["jobs"] for r in long_queues) / in_long_queues
        reading += (
            f" Under-estimated: {_pct(long_jobs['under_pct'])} of long jobs,"
            f" {_pct(under_long_queues)} of the jobs in those queues."
        )
    body = (
        svg.bars(shares, "% of jobs, by run time")
        + svg.bars(queue_shares, "% of jobs, by queue")
        + svg.legend([("walltime", svg.WALL), ("soft walltime", svg.SOFT)])
        + svg.boxplots(groups, "error (h, signed log scale)")
    )
    return _figure(
        "Jobs and errors by runtime class and by queue after deployment (Fig. 7)",
        reading,
        body,
        "Left boxes: runtime classes (short <= 2 h, medium <= 24 h, long), right boxes: queues"
        " ordered by the longest walltime seen in them; one scale for both. Jobs are routed by"
        " walltime, so long queues hold many jobs with short soft walltimes: watch each queue.",
    )


def per_user(data: Dict[str, Any]) -> str:
    """Figure 6: per-user improvement of the mean absolute error, sorted."""
    s = data["users"]["summary"]
    values = [r["improvement_h"] for r in data["users"]["per_user"]]
    reading = (
        f"Soft walltimes were more accurate for {_pct(s['improved_pct'])} of {s['users']} users;"
        f" by more than 1 h for {_pct(s['improved_1h_pct'])}, more than 24 h for"
        f" {_pct(s['improved_24h_pct'])}; median improvement {_h(s['median_improvement_h'])},"
        f" worst deterioration {_h(s['worst_deterioration_h'])}."
    )
    return _figure(
        "Per-user improvement (Fig. 6)",
        reading,
        svg.sorted_bars(values, "walltime MAE - soft MAE (h)"),
        "One bar per user: mean |walltime - run time| minus mean |soft walltime - run time|"
        " after deployment; above 0 the soft walltimes were better.",
    )


def under(data: Dict[str, Any]) -> str:
    """Under-estimates: extensions the server had to make, and the deepest ones."""
    ext = data["under_estimates"]["extensions"]
    total = sum(r["jobs"] for r in ext) or 1
    bars = [
        ("none" if r["extensions"] == 0 else f"{int(r['extensions'])}"
         + ("+" if r["extensions"] >= 5 else ""), 100.0 * r["jobs"] / total)
        for r in ext
    ]  # fmt: skip
    under_pct = 100.0 * sum(r["jobs"] for r in ext if r["extensions"] > 0) / total
    deep = [
        (r["job_id"], r["username"], r["queue"] or "", _h(r["walltime_s"] / 3600),
         _h(r["soft_walltime_s"] / 3600), _h(r["runtime_s"] / 3600), _h(r["beyond_s"] / 3600))
        for r in data["under_estimates"]["deepest"]
    ]  # fmt: skip
    table = _table(
        ("job", "user", "queue", "walltime", "soft walltime", "run time", "beyond soft"),
        deep,
        left=3,
    )
    return _figure(
        "Under-estimates: run time beyond the soft walltime",
        f"{under_pct:.1f} % of the jobs ran past their soft walltime, which the server then"
        " extended (by 100 % of the original each time, never past the walltime).",
        svg.bars(bars, "% of jobs") + "<h3>Deepest under-estimates</h3>" + table,
        "Bars: how many extensions each job needed.",
    )


def _grid(data: Dict[str, Any], after: bool, axis: str, measure: str) -> List[List[float]]:
    cells = [[0.0] * len(TIME_LABELS) for _ in SIZE_LABELS]
    rows = [r for r in data["heatmaps"] if r["after"] is after and r["axis"] == axis]
    total = sum(r[measure] or 0 for r in rows) or 1.0
    for r in rows:
        cells[int(r["size"])][int(r["bucket"])] = 100.0 * (r[measure] or 0) / total
    return cells


def workload(data: Dict[str, Any]) -> str:
    """Figure 9: heatmaps of jobs and CPU-hours, before and after deployment."""
    views = (
        ("jobs by size x run time", "runtime", "jobs"),
        ("jobs by size x walltime", "walltime", "jobs"),
        ("CPU-hours by size x run time", "runtime", "cpu_hours"),
    )
    rows = []
    for title, axis, measure in views:
        maps = [
            svg.heatmap(
                _grid(data, after, axis, measure),
                SIZE_LABELS,
                TIME_LABELS,
                f"{'after' if after else 'before'}: % of {title}",
            )  # fmt: skip
            for after in (False, True)
        ]
        rows.append(f'<div class="row">{"".join(maps)}</div>')
    long_cpu = [
        sum(r[-3:][i] for r in _grid(data, after, "runtime", "cpu_hours") for i in range(3))
        for after in (False, True)
    ]
    return _figure(
        "Workload before and after deployment (Fig. 9)",
        f"Jobs longer than 1 day used {long_cpu[0]:.1f} % of the CPU-hours before and"
        f" {long_cpu[1]:.1f} % after.",
        "".join(rows),
        "Rows: processors per job; columns: run time or requested walltime; cells: % of the"
        " period's jobs or CPU-hours.",
    )


def wait(data: Dict[str, Any]) -> str:
    """Figure 10: wait time and bounded slowdown per class, before vs after."""
    before, after = _class_rows(data, False), _class_rows(data, True)
    wait_groups: List[Tuple[str, Sequence[svg.Box]]] = []
    bsld_groups: List[Tuple[str, Sequence[svg.Box]]] = []
    for cls in CLASSES:
        b, a = before.get(cls, {}), after.get(cls, {})
        wait_groups.append((cls, [("before", b.get("wait_q"), svg.BEFORE),
                                  ("after", a.get("wait_q"), svg.AFTER)]))  # fmt: skip
        bsld_groups.append((cls, [("before", b.get("bsld_q"), svg.BEFORE),
                                  ("after", a.get("bsld_q"), svg.AFTER)]))  # fmt: skip
    means = "; ".join(
        f"{c} {_h(before.get(c, {}).get('mean_wait_h'))} ->"
        f" {_h(after.get(c, {}).get('mean_wait_h'))}"
        for c in CLASSES
    )
    body = (
        svg.legend([("before", svg.BEFORE), ("after", svg.AFTER)])
        + '<div class="row">'
        + svg.boxplots(wait_groups, "wait (h, log scale)")
        + svg.boxplots(bsld_groups, "bounded slowdown (log scale)")
        + "</div>"
    )
    return _figure(
        "Wait time and bounded slowdown by runtime class (Fig. 10)",
        f"Mean wait before -> after: {means}.",
        body,
        "Caveat (paper, section 4): the two periods ran different workloads; compare shapes"
        " and trends, not values. Bounded slowdown = max(1, (wait + run) / max(run, 10 min)).",
    )


def worst(data: Dict[str, Any]) -> str:
    """Users and queues where soft walltimes are most often under-estimated."""
    users = [
        (r["username"], r["jobs"], _pct(r["under_pct"]), _h(r["soft_mae_h"]), _h(r["wall_mae_h"]))
        for r in data["worst_users"]
    ]
    queues = sorted(
        (r for r in data["by_queue"] if r["jobs"] >= MIN_JOBS_FOR_WORST and r["under_pct"] > 0),
        key=lambda r: (-r["under_pct"], r["queue"]),
    )[:10]
    qrows = [(r["queue"], r["jobs"], _pct(r["under_pct"])) for r in queues]
    reading = (
        f"Worst user: {users[0][0]} ({users[0][2]} of {users[0][1]} jobs under-estimated)."
        if users
        else "No user has under-estimated soft walltimes."
    )
    return _figure(
        "Where soft walltimes are worst",
        reading,
        _table(("user", "jobs", "under-estimated", "soft MAE", "walltime MAE"), users)
        + _table(("queue", "jobs", "under-estimated"), qrows),
        f"Only users and queues with at least {MIN_JOBS_FOR_WORST} jobs after deployment.",
    )


def queue_fit(data: Dict[str, Any]) -> str:
    """Jobs in long queues whose soft walltime would fit a shorter queue."""
    rows = [
        (r["queue"], _h(r["limit_s"] / 3600), r["jobs"], r["fit_shorter"],
         _pct(100.0 * r["fit_shorter"] / r["jobs"]), r["usual_target"] or "")
        for r in data["queue_fit"]
    ]  # fmt: skip
    fit = sum(r["fit_shorter"] for r in data["queue_fit"])
    jobs = sum(r["jobs"] for r in data["queue_fit"]) or 1
    return _figure(
        "Jobs whose soft walltime would fit a shorter queue",
        f"{fit} of {jobs} jobs ({100.0 * fit / jobs:.1f} %) sat in a queue longer than their"
        " soft walltime needed.",
        _table(
            ("queue", "limit", "jobs", "would fit shorter", "share", "usual shorter queue"), rows
        ),  # fmt: skip
        "Queue limits: the longest walltime seen in each queue in this report's scope (the"
        " history does not record resources_max.walltime).",
    )


def render(data: Dict[str, Any], meta: Dict[str, Any]) -> str:
    """The whole page."""
    sections = (
        header(data, meta),
        summary(data),
        errors_by_month(data),
        errors_by_queue(data),
        per_user(data),
        under(data),
        worst(data),
        queue_fit(data),
        workload(data),
        wait(data),
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>softwalltime report</title>"
        f"<style>{_CSS}</style></head><body>{''.join(sections)}</body></html>\n"
    )
