"""The formula search of ``simulate --search``: tuned on a trace's first half, reported on
its second (pure but for :func:`write_plot`).

Every candidate of :func:`.formula.candidates` and the baseline (fcfs-bf1 with the users'
walltimes, today's configuration) are simulated on PBS's model (:mod:`.pbsched`) on each
half of the trace on its own (its jobs in submit order, split by count; each half starts
with an empty machine and an empty history, so nothing of the second half reaches the
tuning). The recommendation is, among the candidates within the admin's tolerances on the
first half (:class:`.formula.Tolerances`) and better than the baseline there, the one of
lowest :func:`score`: mean bsld x (1 + the largest share of a bound it uses). The
candidates :func:`checked` picks (the first half's Pareto front and its best
:data:`TOP_CHECKED` within the tolerances) are also simulated on the second half: the
report gives the recommendation's figures there, whether the tolerances still hold, its
rank on both halves, and the front.

On a site with fairshare (:func:`fairshare`: the rules carry the site's tree) the
baseline is the site's own ordering, ``fairshare-bf1`` with the users' walltimes; every
candidate keeps fair_share on (it orders jobs of equal formula value) and the grid gains
the fairshare term; the report says what the rank adds on top of fairshare
(:func:`rank_adds`: the best candidate without the rank key against the best with it,
both run on the second half).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..core import rank as hook_rank
from . import formula as fm
from . import pbsched
from .policies import LONG_S, WIDE_FRACTION
from .sim_workload import take
from .simulate import BASELINE, SimResult, SimWorkload, _pct, job_outcomes
from .sources import EstimateSource

SHORT_S = 2 * 3600  # "short" as in evaluate's classes: run time <= 2 h
BASELINE_POLICY = "fcfs-bf1"
FRONT_PNG = "formula_front.png"
TOP_CHECKED = 8  # the first half's best within the tolerances also run on the second half


def halves(work: SimWorkload) -> Tuple[SimWorkload, SimWorkload]:
    """The trace's first and second half by job count (submit order)."""
    n = len(work.submit) // 2

    def part(lo: int, hi: int) -> SimWorkload:
        return take(work, range(lo, hi))

    return part(0, n), part(n, len(work.submit))


def waits(work: SimWorkload, result: SimResult) -> fm.Waits:
    """The figures the search reads from one simulation."""
    w_s, bslds = job_outcomes(work, result)
    h = [w / 3600.0 for w in w_s]
    wide_min = WIDE_FRACTION * result.procs_total
    by_class: Dict[str, List[float]] = {c: [] for c in fm.CLASSES}
    for k, x in enumerate(h):
        run = work.run[k]
        if run <= SHORT_S:
            by_class["short"].append(x)
        if run > LONG_S:
            by_class["long"].append(x)
        if work.procs[k] >= wide_min:
            by_class["wide"].append(x)
    p95 = {c: (_pct(sorted(v), 0.95) if v else None) for c, v in by_class.items()}
    return fm.Waits(
        bsld=sum(bslds) / len(bslds) if bslds else 0.0,
        wait_mean_h=sum(h) / len(h) if h else 0.0,
        p95=p95,
        max_h=max(h, default=0.0),
        wide_max_h=max(by_class["wide"]) if by_class["wide"] else None,
    )


def fairshare(rules: pbsched.Policy) -> bool:
    """Whether the site has fairshare (:attr:`.pbsched.Policy.fairshare`): then the
    baseline is its ordering (``fairshare-bf1``: fair_share on, no formula), every candidate
    keeps it (fairshare within equal formula values, sort.cpp:735-770) and the grid tries a
    fairshare term (:data:`.formula.FAIRSHARES`)."""
    return rules.fairshare is not None


def baseline_name(rules: pbsched.Policy) -> str:
    """The baseline's policy as :attr:`.pbsched.Policy.name` gives it: ``fcfs-bf1``, or
    ``fairshare-bf1`` with the site's fair_share."""
    return policy_of(None, 1, rules).name


def baseline_text(rules: pbsched.Policy) -> str:
    """The baseline in words: its policy with the users' walltimes, and with fairshare the
    site's ordering."""
    text = f"{baseline_name(rules)} with the users' walltimes"
    f = rules.fairshare
    if f is None:
        return text
    tree = f"{len(f.groups)} resource_group entries, " if f.groups else ""
    return (
        f"{text} (the site's ordering: fair_share {f.fair_share} by {f.entity}, "
        f"{tree}unknown_shares {f.unknown_shares}, usage by {f.usage_res} from the trace's "
        "start; every candidate keeps it within equal formula values)"
    )


def policy_of(cand: Optional[fm.Candidate], procs: int, rules: pbsched.Policy) -> pbsched.Policy:
    """The PBS policy of a candidate (None: the baseline's fcfs-bf1), strict ordering with
    the candidate's backfill_depth, the rules' iteration, backfill rule and classes."""
    sort = pbsched.FCFS if cand is None else fm.expression(cand.params, procs)
    depth = 1 if cand is None else cand.depth
    return rules._replace(job_sort_formula=sort, backfill_depth=depth, strict_ordering=True)


def deeper(firsts: Sequence[Optional[fm.Waits]]) -> List[int]:
    """The candidates (indices of their first-half figures; None: not run) to run again on
    the first half with :data:`~.formula.DEEPER_DEPTH` top jobs: the
    :data:`~.formula.DEEPER_TOP` best by mean bsld, whatever the tolerances (the deeper
    backfill may be what brings one within them)."""
    ranked = sorted((w.bsld, i) for i, w in enumerate(firsts) if w is not None)
    return sorted(i for _b, i in ranked[: fm.DEEPER_TOP])


def simulate(
    work: SimWorkload,
    procs: int,
    cand: Optional[fm.Candidate],
    rules: pbsched.Policy,
    make_source: Callable[[str], EstimateSource],
    rank_refresh_s: int,
    correction: str = "pbs",
    site: Optional[Any] = None,
) -> fm.Waits:
    """One candidate (None: the baseline) on one part of a trace; ``site``: a
    :class:`.site_model.SiteModel` to run it on (None: the pool of ``procs``)."""
    policy = policy_of(cand, procs, rules)
    source = make_source(BASELINE if cand is None else cand.source)
    ranker = None
    if pbsched.sort_formula(policy.job_sort_formula).reads_rank:
        ranker = pbsched.Ranker(rank_refresh_s)
    model, order = site.build(work) if site is not None else (None, None)
    result = pbsched.simulate_pbs(
        work, source, procs, policy, correction, ranker=ranker, model=model, site=order
    )
    return waits(work, result)


class Row(NamedTuple):
    """A candidate's figures on both halves."""

    candidate: fm.Candidate
    expression: str
    first: fm.Waits
    second: Optional[fm.Waits]
    """None: not simulated on the second half (not :func:`checked`)."""


GOAL_PCT = 40.0  # simulate --search --goal: the gain issue 30 asks for


class Report(NamedTuple):
    """The search's outcome (indices into ``rows``)."""

    base: Tuple[fm.Waits, fm.Waits]
    rows: List[Row]
    tolerances: fm.Tolerances
    best: Optional[int]
    """The lowest first-half :func:`score` within the tolerances there and better than the
    baseline's bsld (None: none: change nothing)."""
    front: List[int]
    """The first half's Pareto front (mean bsld, long jobs' p95, wide jobs' longest wait),
    by first-half bsld."""
    rank_first: Optional[int]
    """The recommendation's place (1: best) by :func:`score` among the candidates within the
    tolerances on the first half."""
    rank_second: Optional[int]
    """The same on the second half (None: it breaks a tolerance there)."""
    best_second: Optional[int]
    """The candidate the second half would have chosen."""
    goal_pct: float = GOAL_PCT
    """The admin's goal: mean bsld this many percent under the baseline's on the second
    half, within the tolerances there (:func:`goal`)."""


def score(w: fm.Waits, base: fm.Waits, tol: fm.Tolerances) -> float:
    """What the search picks by, lowest first: mean bsld x (1 + :func:`.formula.used`).

    A candidate near a bound on the first half is likely to cross it on the next period,
    so near the same bsld the one further from the bounds wins; a much lower bsld still
    wins near them. Tried on the five bundled traces (docs/simulate.md): with the best
    bsld alone HPC2N's pick was ``xf2.rank+len1`` (-42.0 % / -37.5 %), whose first-half
    bsld ties ``xf2.rank+age72h``'s (-41.9 % / -45.2 %, further from the bounds); the
    other traces' picks do not change with a weight from 0.5 to 2 on the share used.
    """
    return w.bsld * (1.0 + fm.used(w, base, tol))


def _ok(rows: Sequence[Row], base: fm.Waits, tol: fm.Tolerances, half: int) -> List[int]:
    # indices within the tolerances on a half (0, 1), best score first (on the second
    # half: among those simulated there)
    got = [(i, r.first if half == 0 else r.second) for i, r in enumerate(rows)]
    return _by_score([w for _i, w in got], base, tol)


def _by_score(ws: Sequence[Optional[fm.Waits]], base: fm.Waits, tol: fm.Tolerances) -> List[int]:
    # the indices of ws within the tolerances, lowest score first
    ok = [
        (score(w, base, tol), i)
        for i, w in enumerate(ws)
        if w is not None and not fm.breaches(w, base, tol)
    ]
    return [i for _s, i in sorted(ok)]


def _pick(ok: Sequence[int], ws: Sequence[fm.Waits], base: fm.Waits) -> Optional[int]:
    # the first of ok (within the tolerances, by score) better than the baseline
    return next((i for i in ok if ws[i].bsld < base.bsld), None)


def _point(w: fm.Waits) -> Tuple[float, float, float]:
    return (w.bsld, w.p95["long"] or 0.0, w.wide_max_h or 0.0)


def checked(
    base: fm.Waits,
    firsts: Sequence[fm.Waits],
    tol: fm.Tolerances,
    keys: Optional[Sequence[str]] = None,
) -> List[int]:
    """The candidates (indices of their first-half figures) to simulate on the second half
    too: the first half's Pareto front and its :data:`TOP_CHECKED` best by :func:`score`
    within the tolerances, and the recommendation; with ``keys`` (each candidate's
    :attr:`.formula.Params.key`), the best of each key too (:func:`best_by_key`)."""
    ok = _by_score(firsts, base, tol)
    picks = set(fm.front([_point(w) for w in firsts])) | set(ok[:TOP_CHECKED])
    best = _pick(ok, firsts, base)
    if keys is not None:
        for key in fm.KEYS:
            got = best_by_key(firsts, keys, key, base, tol)
            picks |= {got[0]} if got is not None else set()
    return sorted(picks | ({best} if best is not None else set()))


def best_by_key(
    ws: Sequence[fm.Waits],
    keys: Sequence[str],
    key: str,
    base: fm.Waits,
    tol: fm.Tolerances,
) -> Optional[Tuple[int, bool]]:
    """The best of the candidates of ``key`` (``keys[i]``: candidate i's) on the first half
    (``ws``): the lowest :func:`score` within the tolerances, else (none within them) the
    lowest score; with whether it is within them. None: no candidate of ``key``."""
    mine = [i for i, k in enumerate(keys) if k == key]
    ok = [i for i in _by_score(ws, base, tol) if keys[i] == key]
    if ok:
        return ok[0], True
    if not mine:
        return None
    return min(mine, key=lambda i: (score(ws[i], base, tol), i)), False


def assess(
    base: Tuple[fm.Waits, fm.Waits], rows: List[Row], tol: fm.Tolerances, goal_pct: float = GOAL_PCT
) -> Report:
    """Recommend, rank and find the front (see :class:`Report`)."""
    ok1, ok2 = _ok(rows, base[0], tol, 0), _ok(rows, base[1], tol, 1)
    best = _pick(ok1, [r.first for r in rows], base[0])
    front = fm.front([_point(r.first) for r in rows])
    front.sort(key=lambda i: (rows[i].first.bsld, i))
    return Report(
        base=base,
        rows=rows,
        tolerances=tol,
        best=best,
        front=front,
        rank_first=None if best is None else ok1.index(best) + 1,
        rank_second=None if best is None or best not in ok2 else ok2.index(best) + 1,
        best_second=ok2[0] if ok2 else None,
        goal_pct=goal_pct,
    )


def reaches_goal(rep: Report, row: Row) -> bool:
    """Whether ``row`` lowers mean bsld by the goal on the second half within the
    tolerances there (False for a row not run on it)."""
    base = rep.base[1]
    if row.second is None or not base.bsld:
        return False
    gain = 100.0 * (base.bsld - row.second.bsld) / base.bsld
    return gain >= rep.goal_pct and not fm.breaches(row.second, base, rep.tolerances)


def goal(rep: Report) -> Tuple[bool, List[int]]:
    """Whether the recommendation reaches the goal (:func:`reaches_goal`), and the points
    of the front that do."""
    met = rep.best is not None and reaches_goal(rep, rep.rows[rep.best])
    return met, [i for i in rep.front if reaches_goal(rep, rep.rows[i])]


def _goal_line(rep: Report) -> str:
    met, front = goal(rep)
    head = f"goal: mean bsld -{fm._num(rep.goal_pct)} % on the second half within the tolerances"
    if met:
        return f"{head}: met"
    where = (
        f"{len(front)} point(s) of the front below reach it there; on the first half, which "
        "the search picks by, each breaks a tolerance or has a higher mean bsld than the "
        "recommendation"
        if front
        else "no point of the front below reaches it there"
    )
    return f"{head}: MISSED by the recommendation; {where}"


def _second(row: Row) -> fm.Waits:
    # the second-half figures of a row that has them (the front, the recommendation)
    assert row.second is not None, row.candidate
    return row.second


def _change(x: float, base: float) -> str:
    return f"{100.0 * (x - base) / base:+.1f} %" if base else "-"


def _h(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.2f}"


def settings(row: Row, procs: int, rules: pbsched.Policy, rank_refresh_s: int) -> List[str]:
    """The ``qmgr`` and ``sched_config`` lines (and the hook's settings) that set ``row``."""
    lines = pbsched.pbs_settings(policy_of(row.candidate, procs, rules), rank_refresh_s)
    source = row.candidate.source
    if source != BASELINE:
        lines.append(f'# hook config: "predictor": "{source}" (the soft walltimes)')
    return lines


def _tolerance_line(tol: fm.Tolerances) -> str:
    return (
        f"tolerances: p95 wait of short (<= 2 h), long (> 24 h) and wide (>= 1/8 of the "
        f"machine) jobs at most {fm._num(tol.p95_pct)} % over the baseline's, the longest "
        f"wait at most {fm._num(tol.max_factor)} x its; each + {fm.SLACK_H} h"
    )


def _waits_line(name: str, w: fm.Waits, base: fm.Waits) -> str:
    p = w.p95
    return (
        f"  {name:<12} bsld {w.bsld:6.2f} ({_change(w.bsld, base.bsld)})  p95 short "
        f"{_h(p['short'])} long {_h(p['long'])} wide {_h(p['wide'])}  longest {w.max_h:.1f} h"
        f"  wide longest {_h(w.wide_max_h)}"
    )


def _recommendation(
    rep: Report, procs: int, rules: pbsched.Policy, refresh: int, withheld: str = ""
) -> List[str]:
    tol, base = rep.tolerances, rep.base
    if rep.best is None:
        return [
            f"recommended: no change ({baseline_name(rules)} with the users' walltimes): no "
            "candidate lowers mean bsld within the tolerances on the first half; the front "
            "below shows what each gain costs"
        ]
    row = rep.rows[rep.best]
    second = _second(row)
    broken = fm.breaches(second, base[1], tol)
    held = "held" if not broken else "BROKEN: " + fm.gives_up(second, base[1], tol)
    lines = [
        f"recommended: {row.candidate.label} with {row.candidate.source} estimates",
        f"  job_sort_formula: {row.expression}",
        _waits_line("first half", row.first, base[0]),
        _waits_line("second half", second, base[1]),
        f"  tolerances on the second half: {held}",
    ]
    n1 = len(_ok(rep.rows, base[0], tol, 0))
    n2 = len(_ok(rep.rows, base[1], tol, 1))
    place = f"{rep.rank_second} of {n2}" if rep.rank_second else f"outside them ({n2} within)"
    other = rep.rows[rep.best_second] if rep.best_second is not None else None
    lines.append(
        f"  stability: by score within the tolerances, rank {rep.rank_first} of {n1} on the first "
        f"half, {place} of those run on the second"
        + (
            f"; the second half's best of them: {other.candidate.label} with "
            f"{other.candidate.source} ({_second(other).bsld:.2f})"
            if other is not None
            else ""
        )
    )
    if withheld:
        return lines + ["  " + withheld]
    return lines + ["  " + s for s in settings(row, procs, rules, refresh)]


class Adds(NamedTuple):
    """What the rank adds on a fairshare site: the best candidate (:func:`best_by_key`)
    without the rank key and with it (indices into the rows; None: no such candidate),
    each with whether it is within the tolerances on the first half."""

    no_rank: Optional[Tuple[int, bool]]
    rank: Optional[Tuple[int, bool]]


def rank_adds(rep: Report) -> Adds:
    """The best candidate without the rank key and with it, on the first half."""
    firsts = [r.first for r in rep.rows]
    keys = [r.candidate.params.key for r in rep.rows]
    base, tol = rep.base[0], rep.tolerances
    return Adds(
        best_by_key(firsts, keys, fm.ESTIMATE, base, tol),
        best_by_key(firsts, keys, fm.RANK, base, tol),
    )


def _adds_row(name: str, w: Optional[fm.Waits], base: fm.Waits, what: str) -> str:
    if w is None:
        return f"  {name:<13} {what}: not run on the second half"
    long95, base95 = w.p95["long"], base.p95["long"]
    long_text = "-"  # no long job in the half
    if long95 is not None:
        change95 = "-" if base95 is None else _change(long95, base95)
        long_text = f"{long95:.2f} h ({change95})"
    return (
        f"  {name:<13} bsld {w.bsld:6.2f} ({_change(w.bsld, base.bsld)})  mean wait "
        f"{w.wait_mean_h:.2f} h ({_change(w.wait_mean_h, base.wait_mean_h)})  long p95 "
        f"{long_text}  {what}"
    )


def _adds_lines(rep: Report, rules: pbsched.Policy) -> List[str]:
    adds, base = rank_adds(rep), rep.base[1]
    lines = [
        "What the rank adds to fairshare (second half; the best of each kind is the lowest "
        "score on the first half within the tolerances there, else the lowest score, marked "
        "'outside'):",
        _adds_row("baseline", base, base, baseline_name(rules) + ", users"),
    ]
    got: Dict[str, Optional[fm.Waits]] = {}
    for name, pick in (("without rank", adds.no_rank), ("with rank", adds.rank)):
        if pick is None:
            lines.append(f"  {name:<13} no candidate")
            got[name] = None
            continue
        row = rep.rows[pick[0]]
        what = f"{row.candidate.label}, {row.candidate.source}" + ("" if pick[1] else " (outside)")
        got[name] = row.second
        lines.append(_adds_row(name, row.second, base, what))
    a, b = got["without rank"], got["with rank"]
    if a is not None and b is not None:
        lines.append(
            f"  the rank adds: {b.bsld - a.bsld:+.2f} points of mean bsld "
            f"({_change(b.bsld, a.bsld)} against the best without it)"
        )
    return lines


def adds_json(rep: Report) -> Dict[str, Any]:
    """:func:`rank_adds` as one object: each pick's row index, label, source, whether
    within the tolerances on the first half and second-half figures, and the rank's change
    of mean bsld there against the best without it (points, %)."""
    adds = rank_adds(rep)

    def pick(p: Optional[Tuple[int, bool]]) -> Optional[Dict[str, Any]]:
        if p is None:
            return None
        r = rep.rows[p[0]]
        return {
            "index": p[0],
            "label": r.candidate.label,
            "source": r.candidate.source,
            "within_tolerances_first": p[1],
            "second": None if r.second is None else r.second._asdict(),
        }

    a, b = pick(adds.no_rank), pick(adds.rank)
    points = pct = None
    if a is not None and b is not None and a["second"] and b["second"]:
        x, y = a["second"]["bsld"], b["second"]["bsld"]
        points, pct = y - x, (100.0 * (y - x) / x if x else None)
    return {
        "baseline_second": rep.base[1]._asdict(),
        "without_rank": a,
        "with_rank": b,
        "bsld_points": points,
        "bsld_pct": pct,
    }


def format_report(
    title: str,
    rep: Report,
    procs: int,
    rules: pbsched.Policy,
    rank_refresh_s: int,
    withheld: str = "",
) -> str:
    """The search as text: baseline, recommendation, its PBS lines (``withheld``: instead
    of them, this line saying why not) and the front."""
    from .policies import rules_line

    base = rep.base
    lines = [title, rules_line(rules), _tolerance_line(rep.tolerances)]
    checked_n = sum(r.second is not None for r in rep.rows)
    lines.append(
        f"{len(rep.rows)} candidates (formula x estimates, backfill_depth 1; the first "
        f"half's best also at {fm.DEEPER_DEPTH}: -bf{fm.DEEPER_DEPTH}) tuned on the first "
        f"half; the front and the best within the tolerances ({checked_n}) run on the "
        "second; waits in hours"
    )
    lines += ["", f"baseline: {baseline_text(rules)}"]
    lines += [_waits_line("first half", base[0], base[0])]
    lines += [_waits_line("second half", base[1], base[1]), ""]
    lines += _recommendation(rep, procs, rules, rank_refresh_s, withheld)
    lines += [_goal_line(rep), ""]
    if fairshare(rules):
        lines += _adds_lines(rep, rules) + [""]
    lines.append(
        "Pareto front of the first half (mean bsld, long jobs' p95, wide jobs' longest wait); "
        "figures of the second half, and what each gives up there against the baseline:"
    )
    head = "{:<3}{:<29}{:<10}{:>7}{:>7}{:>9}{:>8}{:>9}  {}".format(
        "", "formula", "estimates", "bsld1", "bsld2", "change", "long95", "widemax", "gives up"
    )
    lines.append(head)
    for i in rep.front:
        r = rep.rows[i]
        mark = "*" if i == rep.best else ""
        w = _second(r)
        lines.append(
            f"{mark:<3}{r.candidate.label:<28} {r.candidate.source:<10}"
            f"{r.first.bsld:>7.2f}{w.bsld:>7.2f}{_change(w.bsld, base[1].bsld):>9}"
            f"{_h(w.p95['long']):>8}{_h(w.wide_max_h):>9}  "
            f"{fm.gives_up(w, base[1], rep.tolerances)}"
        )
    return "\n".join(lines) + "\n"


def as_json(
    rep: Report, procs: int, rules: pbsched.Policy, rank_refresh_s: int, withheld: str = ""
) -> Dict[str, Any]:
    """The search as one object (the text's content; ``withheld``: no PBS settings, and
    why, in ``recommended.pbs_settings_withheld``)."""

    def row(r: Row) -> Dict[str, Any]:
        return {
            "label": r.candidate.label,
            "source": r.candidate.source,
            "params": r.candidate.params._asdict(),
            "backfill_depth": r.candidate.depth,
            "job_sort_formula": r.expression,
            "first": r.first._asdict(),
            "second": None if r.second is None else r.second._asdict(),
            "gives_up_second": None
            if r.second is None
            else [
                {"figure": n, "value_h": v, "baseline_h": b}
                for n, v, b in fm.breaches(r.second, rep.base[1], rep.tolerances)
            ],
        }

    rec = None
    if rep.best is not None:
        best = rep.rows[rep.best]
        rec = dict(row(best))
        rec["pbs_settings"] = [] if withheld else settings(best, procs, rules, rank_refresh_s)
        rec["pbs_settings_withheld"] = withheld or None
        rec["held_on_second_half"] = not fm.breaches(_second(best), rep.base[1], rep.tolerances)
        rec["rank_first"] = rep.rank_first
        rec["rank_second"] = rep.rank_second
    met, reaching = goal(rep)
    extra: Dict[str, Any] = {}
    if fairshare(rules):
        extra = {"baseline_policy": baseline_name(rules), "rank_adds": adds_json(rep)}
    return {
        **extra,
        "backfill_by": rules.backfill_by,
        "classes": rules.classes,
        "backfill_fuzzy_s": rules.backfill_fuzzy,
        "rank": {"resource": pbsched.RANK, "name": hook_rank.NAME, "refresh_s": rank_refresh_s},
        "tolerances": dict(rep.tolerances._asdict(), slack_h=fm.SLACK_H),
        "baseline": {"first": rep.base[0]._asdict(), "second": rep.base[1]._asdict()},
        "candidates": [row(r) for r in rep.rows],
        "front": rep.front,
        "recommended": rec,
        "best_second": rep.best_second,
        "goal": {"bsld_gain_pct": rep.goal_pct, "met": met, "front_reaching": reaching},
    }


def write_plot(rep: Report, directory: str, title: str) -> str:
    """The candidates run on the second half, mean bsld against long jobs' p95 (wide jobs'
    without long jobs) and against wide jobs' longest wait: the first half's front in blue,
    the recommendation in red, the baseline in black, the tolerance dashed. Returns the
    PNG's path.

    :raises SoftwalltimeError: matplotlib is missing
    """
    from .plots import matplotlib_classes, save_figure

    figure_cls, canvas_cls = matplotlib_classes()
    fig = figure_cls(figsize=(11, 4.5))
    base = rep.base[1]
    lim = fm.limits(base, rep.tolerances)
    # long jobs' p95 wait, or wide jobs' where the half has no long job (CTC-SP2)
    cls = "long" if base.p95["long"] is not None else "wide"
    panels: List[Tuple[str, Callable[[fm.Waits], Optional[float]], Optional[float]]] = [
        (f"{cls} jobs' p95 wait (h)", lambda w: w.p95[cls], lim.get(f"{cls}_p95")),
        ("wide jobs' longest wait (h)", lambda w: w.wide_max_h, None),
    ]
    for k, (label, get, most) in enumerate(panels):
        ax = fig.add_subplot(1, 2, k + 1)
        for i, r in enumerate(rep.rows):
            if r.second is None:
                continue
            color = "#d62728" if i == rep.best else "#1f77b4" if i in rep.front else "#c7c7c7"
            ax.plot([r.second.bsld], [get(r.second) or 0.0], "o", color=color, ms=5)
        b = get(base)
        ax.plot([base.bsld], [b or 0.0], "s", color="black", ms=7, label="baseline, users")
        if most is not None:
            ax.axhline(most, ls="--", color="#7f7f7f", lw=1)
        ax.set_xlabel("mean bounded slowdown (second half)")
        ax.set_ylabel(label)
        ax.legend(loc="best", fontsize=8)
    fig.suptitle(title + " (blue: front, red: recommended)")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, FRONT_PNG)
    save_figure(fig, canvas_cls, path)
    return path
