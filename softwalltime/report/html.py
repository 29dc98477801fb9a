"""The report as one self-contained HTML page: inline CSS and SVG, no script, no network.

Each section is a function of the numbers :func:`.queries.collect` returns, so it can be
tested alone; each figure carries a one-line reading computed from those numbers.
"""

from __future__ import annotations

from html import escape
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from . import svg
from .queries import CLASSES, MIN_JOBS_FOR_FIGURE, MIN_JOBS_FOR_WORST, SIZE_LABELS, TIME_LABELS

# Longer names (users, queues, job ids) are cut to this many characters in tables, the whole
# name in the cell's tooltip.
NAME_CHARS = 24

_CSS = """
body{font-family:sans-serif;margin:24px;max-width:1200px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ccc}
figure{margin:12px 0}figure svg{max-width:100%;height:auto}figcaption{font-size:13px;margin-top:4px}
.reading{font-weight:bold}.note{font-size:12px;color:#555}
.synthetic{background:#fff3cd;border:1px solid #e0c060;padding:8px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}
.row{display:flex;flex-wrap:wrap;gap:18px}
td.l{max-width:16em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.few,tr.few td{color:#999}.few-tag{font-size:11px;color:#999;font-weight:normal}
.verdict{border:1px solid #ccc;background:#f8f8f8;padding:6px 12px}.verdict p{margin:4px 0}
.verdict h2{margin-top:4px}
"""
TOO_FEW = f"too few jobs (fewer than {MIN_JOBS_FOR_FIGURE})"


def _h(value: Optional[float], digits: int = 1) -> str:
    """Hours for a person: ``12.3 h``; under an hour ``12 min 30 s``; under a minute
    ``10 s``; or a dash."""
    if value is None:
        return "-"
    seconds = round(abs(value) * 3600)
    sign = "-" if value < 0 and seconds else ""
    if seconds < 60:
        return f"{sign}{seconds} s"
    if seconds < 3600:
        minutes, rest = divmod(seconds, 60)
        return f"{sign}{minutes} min" + (f" {rest} s" if rest else "")
    return f"{value:.{digits}f} h"


def _n(count: int, noun: str) -> str:
    """``1 job``, ``2 jobs``."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _few(jobs: Optional[float]) -> bool:
    """Whether a figure resting on ``jobs`` jobs says too little to be read (greyed)."""
    return (jobs or 0) < MIN_JOBS_FOR_FIGURE


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1f} %"


def _figure(title: str, reading: str, body: str, note: str = "", few: bool = False) -> str:
    """A section: title, chart, its reading in bold (greyed and marked when ``few``)."""
    extra = f'<div class="note">{escape(note)}</div>' if note else ""
    shown = f'<span class="reading">{escape(reading)}</span>'
    if few:
        shown = f'<span class="reading few">{escape(reading)} <em>({TOO_FEW})</em></span>'
    return f"<h2>{escape(title)}</h2><figure>{body}<figcaption>{shown}{extra}</figcaption></figure>"


def _cell(value: Any, name: bool) -> str:
    """A table cell; a name (left column) longer than :data:`NAME_CHARS` is cut, whole in
    its tooltip."""
    text = str(value)
    if not name:
        return f"<td>{escape(text)}</td>"
    if len(text) <= NAME_CHARS:
        return f'<td class="l">{escape(text)}</td>'
    return f'<td class="l" title="{escape(text)}">{escape(text[: NAME_CHARS - 1])}…</td>'


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    left: int = 1,
    few: Sequence[bool] = (),
) -> str:
    """A table; the first ``left`` columns are names; the rows flagged in ``few`` are greyed
    and marked "too few jobs"."""
    head = "".join(
        f'<th class="{"l" if i < left else ""}">{escape(h)}</th>' for i, h in enumerate(headers)
    )
    body = []
    for n, row in enumerate(rows):
        cells = "".join(_cell(v, i < left) for i, v in enumerate(row))
        if n < len(few) and few[n]:
            body.append(f'<tr class="few" title="{escape(TOO_FEW)}">{cells}</tr>')
        else:
            body.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


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
        f"<p>{_n(t['jobs'], 'finished job')} of {_n(t['users'], 'user')}: {t['before']} created"
        " before"
        f" deployment, {t['after_soft']} after it with a soft walltime (compared),"
        f" {t['after_without_soft']} after it without one (left out, as in the paper).</p>"
        f'<p class="note">Error = estimate - run time (positive: over-estimate). Classes by'
        f" run time: short &le; 2 h, medium 2-24 h, long &gt; 24 h. Generated"
        f" {escape(meta['generated_at'])}.</p>"
    )


def _class_rows(data: Dict[str, Any], after: bool) -> Dict[str, Dict[str, Any]]:
    return {r["cls"]: r for r in data["by_class"] if r["after"] is after}


def _weighted(rows: Sequence[Dict[str, Any]], key: str, weight: str = "jobs") -> Optional[float]:
    """The mean of ``key`` over ``rows`` weighted by ``weight`` (None: no weight)."""
    pairs = [(r[key], r[weight] or 0) for r in rows if r.get(key) is not None]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else None


def verdict_lines(data: Dict[str, Any]) -> List[Tuple[str, bool]]:
    """Three lines for the top of the page: accuracy, under-estimates, waits; each with
    whether it rests on too few jobs."""
    after = list(_class_rows(data, True).values())
    before = list(_class_rows(data, False).values())
    jobs = sum(r["jobs"] for r in after)
    wall, soft = _weighted(after, "wall_mae_h"), _weighted(after, "soft_mae_h")
    if wall is None or soft is None:
        accuracy = "Accuracy: no job to compare after deployment."
    else:
        better = "closer to" if soft < wall else "further from" if soft > wall else "as close to"
        accuracy = (
            f"Accuracy: soft walltimes were {better} the run times than the requested walltimes:"
            f" mean absolute error {_h(soft)} against {_h(wall)} ({_n(jobs, 'job')} after"
            " deployment)."
        )
    under_pct = _weighted(after, "under_pct")
    under = (
        f"Under-estimates: {_pct(under_pct)} of those jobs ran past their soft walltime, which"
        " the server then extended."
    )
    waits = [_weighted(rows, "mean_wait_h", "timed_jobs") for rows in (before, after)]
    timed = [_timed(rows) for rows in (before, after)]
    wait_line = (
        f"Waits: mean wait {_h(waits[0])} before deployment ({_n(timed[0], 'job')}),"
        f" {_h(waits[1])} after ({_n(timed[1], 'job')}); the workloads differ, so compare"
        " with care."
    )
    return [(accuracy, _few(jobs)), (under, _few(jobs)), (wait_line, _few(min(timed)))]


def verdict(data: Dict[str, Any]) -> str:
    """The three-line verdict: what changed for accuracy, under-estimates and waits."""
    lines = "".join(
        f'<p class="few">{escape(text)} <em>({TOO_FEW})</em></p>' if few
        else f"<p>{escape(text)}</p>"
        for text, few in verdict_lines(data)
    )  # fmt: skip
    return f'<div class="verdict" id="verdict"><h2>Verdict</h2>{lines}</div>'


def summary(data: Dict[str, Any]) -> str:
    """Per class after deployment: mean absolute errors beside the under-estimates (the
    headline table), then the signed medians."""
    after = _class_rows(data, True)
    rows = []
    few = []
    for cls in CLASSES:
        r = after.get(cls)
        if r:
            rows.append(
                (cls, r["jobs"], _h(r["wall_mae_h"]), _h(r["soft_mae_h"]), _pct(r["under_pct"]),
                 _h(r["median_wall_error_h"]), _h(r["median_soft_error_h"]))
            )  # fmt: skip
            few.append(_few(r["jobs"]))
    table = _table(
        ("class", "jobs", "mean absolute error of walltime", "mean absolute error of soft"
         " walltime", "under-estimated", "median signed error of walltime",
         "median signed error of soft walltime"), rows, few=few)  # fmt: skip
    note = (
        f'<p class="note">Greyed rows: {TOO_FEW}. Signed error = estimate - run time: a median'
        " near 0 may hide errors both ways; the mean absolute error does not.</p>"
    )
    return f"<h2>Summary (after deployment)</h2>{table}{note}"


def errors_by_month(data: Dict[str, Any]) -> str:
    """Figure 5: error box plots per month x class, walltime vs soft walltime."""
    groups: List[Tuple[str, Sequence[svg.Box]]] = []
    for r in data["error_by_month_class"]:
        boxes = [("walltime", r["wall_q"], svg.WALL), ("soft walltime", r["soft_q"], svg.SOFT)]
        groups.append((f"{r['month']} {r['cls']} ({r['jobs']})", boxes))
    after = _class_rows(data, True)
    worst = [
        f"{c}: {_h(after[c]['wall_mae_h'])} -> {_h(after[c]['soft_mae_h'])}"
        + (" (too few jobs)" if _few(after[c]["jobs"]) else "")
        for c in CLASSES
        if c in after
    ]
    reading = "Mean absolute error after deployment, walltime -> soft walltime: " + "; ".join(worst)
    body = svg.legend([("walltime", svg.WALL), ("soft walltime", svg.SOFT)]) + svg.boxplots(
        groups, "error (h, signed log scale)"
    )
    return _figure(
        "Error of walltime and soft walltime by month and runtime class (Fig. 5)",
        reading,
        body,
        "Boxes: quartiles; whiskers: 5th and 95th percentiles; (n) jobs compared.",
        few=_few(data["totals"]["after_soft"]),
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
        few=_few(total),
    )


def per_user(data: Dict[str, Any]) -> str:
    """Figure 6: per-user improvement of the mean absolute error, sorted."""
    s = data["users"]["summary"]
    values = [r["improvement_h"] for r in data["users"]["per_user"]]
    jobs = sum(r["jobs"] for r in data["users"]["per_user"])
    users = _n(s["users"], "user")
    reading = (
        f"Soft walltimes were more accurate for {_pct(s['improved_pct'])} of {users};"
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
        few=_few(jobs),
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
    jobs = sum(r["jobs"] for r in ext)
    return _figure(
        "Under-estimates: run time beyond the soft walltime",
        f"{under_pct:.1f} % of the {jobs} jobs ran past their soft walltime, which the server"
        " then extended (by 100 % of the original each time, never past the walltime).",
        svg.bars(bars, "% of jobs") + "<h3>Deepest under-estimates</h3>" + table,
        "Bars: how many extensions each job needed.",
        few=_few(jobs),
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
        few=_few(min(data["totals"]["before"], data["totals"]["after_soft"])),
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
        + svg.boxplots(wait_groups, "wait (h, log scale)", min_width=svg.PAGE_WIDTH // 2 - 10)
        + svg.boxplots(
            bsld_groups, "bounded slowdown (log scale)", min_width=svg.PAGE_WIDTH // 2 - 10
        )
        + "</div>"
    )
    return _figure(
        "Wait time and bounded slowdown by runtime class (Fig. 10)",
        f"Mean wait before -> after: {means}.",
        body,
        "Caveat (paper, section 4): the two periods ran different workloads; compare shapes"
        " and trends, not values. Bounded slowdown = max(1, (wait + run) / max(run, 10 min)).",
        few=_few(min(_timed(before.values()), _timed(after.values()))),
    )


def _timed(rows: Iterable[Dict[str, Any]]) -> int:
    """Jobs with a start time (a wait) in ``rows``."""
    return sum(r.get("timed_jobs") or 0 for r in rows)


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
    reading = _worst_reading(users, data["users"]["per_user"])
    return _figure(
        "Where soft walltimes are worst",
        reading,
        _table(("user", "jobs", "under-estimated", "soft MAE", "walltime MAE"), users)
        + _table(("queue", "jobs", "under-estimated"), qrows),
        f"Only users and queues with at least {MIN_JOBS_FOR_WORST} jobs after deployment.",
    )


def _worst_reading(ranked: Sequence[Sequence[Any]], per_user: Sequence[Dict[str, Any]]) -> str:
    """The worst user; when none has enough jobs to rank, whether smaller users were
    under-estimated (never "no user" while the under-estimate share is above 0)."""
    if ranked:
        return (
            f"Worst user: {ranked[0][0]} ({ranked[0][2]} of {ranked[0][1]} jobs under-estimated)."
        )
    smaller = [u for u in per_user if (u.get("under_pct") or 0) > 0]
    if not smaller:
        return "No user's soft walltimes were under-estimated."
    jobs = sum(u["jobs"] for u in smaller)
    return (
        f"No user with at least {MIN_JOBS_FOR_WORST} jobs after deployment was under-estimated;"
        f" {_n(len(smaller), 'user')} with fewer jobs ({_n(jobs, 'job')} in all) had"
        " under-estimates: too few jobs to rank."
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
            ("queue", "limit", "jobs", "would fit shorter", "share", "usual shorter queue"),
            rows,
            few=[_few(r["jobs"]) for r in data["queue_fit"]],
        ),  # fmt: skip
        "Queue limits: the longest walltime seen in each queue in this report's scope (the"
        " history does not record resources_max.walltime).",
        few=_few(jobs),
    )


def _effect_row(row: Dict[str, Any]) -> List[Any]:
    cells: List[Any] = [row["group"], row["jobs"]]
    for key in ("mean_wait_h", "p95_wait_h", "max_wait_h"):
        for label in ("real", "current", "previous"):
            figures = row.get(label)
            cells.append(_h(figures[key]) if figures else "")
    for label in ("current", "previous"):
        figures = row.get(label)
        cells.append(_h(figures["mean_bsld"]) if figures else "")
    return cells


def policy_effect(data: Dict[str, Any]) -> str:
    """What the policy did: the same jobs under the current and the previous policy, with
    the model's fit to the real starts (section absent without ``report --procs``)."""
    effect = data.get("policy_effect")
    if effect is None:
        return ""
    note = effect.get("note", "")
    rows = effect.get("rows", [])
    if not rows:
        return f'<h2 id="policy-effect">What the policy did</h2><p>{escape(note)}.</p>'
    fit = effect["fit"]
    reading = (
        f"{effect['jobs']} jobs since the change to {effect['current_policy']}, replayed under it"
        f" and under {effect['previous_policy'] or 'no previous policy'} on"
        f" {effect['procs']} processors. The model's fit to the real starts is"
        f" {fit['verdict']}: {fit['within_1h_pct']:.0f} % within an hour"
        f" ({fit['within_10min_pct']:.0f} % within 10 min), {_pct(fit['pair_order_pct'])} of"
        f" the pairs of jobs queued together started in the real order; mean wait"
        f" {_h(fit['model_mean_wait_h'])} h in the model against {_h(fit['real_mean_wait_h'])} h"
        " really. Trust a difference between the policies only as far as that fit."
    )
    headers = ["group", "jobs"] + [
        f"{what} {who}" for what in ("mean wait h", "p95 wait h", "longest h")
        for who in ("real", "now", "before")
    ] + ["bsld now", "bsld before"]  # fmt: skip
    table = _table(headers, [_effect_row(r) for r in rows], few=[_few(r["jobs"]) for r in rows])
    body = f'<div id="policy-effect">{table}</div>'
    return _figure("What the policy did", reading, body, note)


def render(data: Dict[str, Any], meta: Dict[str, Any]) -> str:
    """The whole page."""
    sections = (
        header(data, meta),
        verdict(data),
        summary(data),
        errors_by_month(data),
        errors_by_queue(data),
        per_user(data),
        under(data),
        worst(data),
        queue_fit(data),
        workload(data),
        wait(data),
        policy_effect(data),
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>softwalltime report</title>"
        f"<style>{_CSS}</style></head><body>{''.join(sections)}</body></html>\n"
    )
