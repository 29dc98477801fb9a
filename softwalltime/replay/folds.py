"""The formula search across folds in time (``simulate --search --folds K``): a pick that
holds on the next period, not on one split only (issue 48). Pure.

The trace is cut into K consecutive folds by job count (submit order, :func:`bounds`). Step
k (1..K-1) is :mod:`.formula_search`'s search with folds 1..k as its first half and fold k+1
as its second: the same candidates, tolerances, score, recommendation and checks on the
next fold. Each part starts from an empty machine and an empty history, as the halves do.

Across the steps, the **contenders** are the steps' picks; each is also simulated on every
next fold (2..K) it was not checked on. The pick to recommend (:func:`choose`) is the one
that held the tolerances on the most next folds, ties broken by its worst fold's mean bsld
gain against the baseline there (higher first), then by its mean gain. A later step's pick
run on an earlier next fold was tuned on data that include that fold: its count there is
in-sample, and :class:`Standing` says on how many of its folds that is so.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from . import formula as fm
from . import formula_search as fs

MAX_FOLDS = 12
"""--folds at most: each step is a whole search (about 84 simulations); 12 folds are 11
searches, hours on a large trace (a search of HPC2N took 9 min with 2 workers)."""
MIN_FOLD_JOBS = 20
"""A fold has at least this many jobs: fewer give no p95 per class worth checking."""


def bounds(n: int, folds: int) -> List[int]:
    """The job indices where each fold starts, and ``n`` at the end (``folds + 1`` of them).

    :raises ValueError: ``folds`` below 2 or above :data:`MAX_FOLDS`, or a fold of fewer
        than :data:`MIN_FOLD_JOBS` jobs
    """
    if not 2 <= folds <= MAX_FOLDS:
        raise ValueError(f"--folds: {folds}: from 2 to {MAX_FOLDS}")
    if n // folds < MIN_FOLD_JOBS:
        raise ValueError(
            f"--folds: {folds} folds of {n} jobs have fewer than {MIN_FOLD_JOBS} jobs each"
        )
    return [n * k // folds for k in range(folds + 1)]


class Step(NamedTuple):
    """One step: tuned on folds 1..k, checked on fold k+1."""

    k: int
    """Folds tuned on (1..K-1); the fold checked is k+1."""
    jobs: Tuple[int, int]
    """Jobs tuned on, jobs of the next fold."""
    report: fs.Report
    """The search of this step (``base``: the baseline on the tuning folds, on the next)."""


def pick(step: Step) -> Optional[fs.Row]:
    """The step's recommendation (None: no change)."""
    rep = step.report
    return None if rep.best is None else rep.rows[rep.best]


def held(w: fm.Waits, base: fm.Waits, tol: fm.Tolerances) -> bool:
    """Within the tolerances (p95 per class, the longest wait) against the baseline."""
    return not fm.breaches(w, base, tol)


def gain_pct(w: fm.Waits, base: fm.Waits) -> float:
    """Mean bsld's gain against the baseline, % (positive: better; 0 for a zero baseline)."""
    return 100.0 * (base.bsld - w.bsld) / base.bsld if base.bsld else 0.0


class Standing(NamedTuple):
    """A contender on every next fold."""

    candidate: fm.Candidate
    picked_at: List[int]
    """The steps (k) that picked it."""
    next_folds: List[Tuple[int, fm.Waits, fm.Waits]]
    """Per step k: (k, its figures on fold k+1, the baseline's there)."""
    held_n: int
    worst: int
    """The step whose next fold gave the lowest gain."""
    in_sample: int
    """Next folds that were part of the tuning of the first step that picked it."""

    def gains(self) -> List[float]:
        return [gain_pct(w, b) for _k, w, b in self.next_folds]

    def mean_gain(self) -> float:
        g = self.gains()
        return sum(g) / len(g) if g else 0.0

    def worst_gain(self) -> float:
        return min(self.gains(), default=0.0)

    def worst_figures(self) -> Tuple[int, fm.Waits, fm.Waits]:
        return next(x for x in self.next_folds if x[0] == self.worst)


def standing(
    cand: fm.Candidate,
    steps: Sequence[Step],
    on_next: Dict[Tuple[int, fm.Candidate], fm.Waits],
    tol: fm.Tolerances,
) -> Standing:
    """``cand``'s figures on each step's next fold, from ``on_next`` ((k, candidate) ->
    figures) or the step's own rows.

    :raises KeyError: a step's next fold lacks ``cand``'s figures
    """
    rows: List[Tuple[int, fm.Waits, fm.Waits]] = []
    for s in steps:
        w = on_next.get((s.k, cand)) or _second_of(s, cand)
        if w is None:
            raise KeyError(f"{cand.label} with {cand.source}: not run on fold {s.k + 1}")
        rows.append((s.k, w, s.report.base[1]))
    picked = [s.k for s in steps if _picked(s) == cand]
    ok = sum(held(w, b, tol) for _k, w, b in rows)
    worst = min(rows, key=lambda x: (gain_pct(x[1], x[2]), x[0]))[0]
    first = min(picked) if picked else len(steps) + 1
    return Standing(cand, picked, rows, ok, worst, sum(k < first for k, _w, _b in rows))


def _picked(step: Step) -> Optional[fm.Candidate]:
    row = pick(step)
    return None if row is None else row.candidate


def pick_held(step: Step) -> bool:
    """Whether the step's pick held the tolerances on its next fold (False: no pick)."""
    row, rep = pick(step), step.report
    return row is not None and held(fs._second(row), rep.base[1], rep.tolerances)


def _second_of(step: Step, cand: fm.Candidate) -> Optional[fm.Waits]:
    return next((r.second for r in step.report.rows if r.candidate == cand), None)


def contenders(steps: Sequence[Step]) -> List[fm.Candidate]:
    """The steps' picks, each once, in the order of the steps."""
    out: List[fm.Candidate] = []
    for s in steps:
        row = pick(s)
        if row is not None and row.candidate not in out:
            out.append(row.candidate)
    return out


def missing(steps: Sequence[Step]) -> List[Tuple[int, fm.Candidate]]:
    """(step, contender) pairs whose next fold the step's search did not run."""
    return [(s.k, c) for c in contenders(steps) for s in steps if _second_of(s, c) is None]


def choose(standings: Sequence[Standing]) -> Optional[int]:
    """The index of the contender to recommend: held on the most next folds, then the best
    worst-fold gain, then the best mean gain (None: no contender held on any next fold:
    change nothing, as the halves' search does when nothing holds on the first half)."""
    if not any(st.held_n for st in standings):
        return None
    order = sorted(
        range(len(standings)),
        key=lambda i: (
            -standings[i].held_n,
            -standings[i].worst_gain(),
            -standings[i].mean_gain(),
            i,
        ),
    )
    return order[0]


class FoldReport(NamedTuple):
    """The search across folds."""

    folds: int
    steps: List[Step]
    standings: List[Standing]
    best: Optional[int]
    """Index into ``standings`` (None: no step picked anything)."""
    tolerances: fm.Tolerances
    narrowed: bool = False
    """Steps after the first tuned only what the previous step checked on its next fold."""


def assess(
    folds: int,
    steps: List[Step],
    on_next: Dict[Tuple[int, fm.Candidate], fm.Waits],
    tol: fm.Tolerances,
    narrowed: bool = False,
) -> FoldReport:
    """The contenders' standings and the pick across the folds."""
    st = [standing(c, steps, on_next, tol) for c in contenders(steps)]
    return FoldReport(folds, steps, st, choose(st), tol, narrowed)


def _name(c: fm.Candidate) -> str:
    return f"{c.label} with {c.source}"


def _step_lines(s: Step) -> List[str]:
    rep, row = s.report, pick(s)
    tuned = "fold 1" if s.k == 1 else f"folds 1-{s.k}"
    head = (
        f"step {s.k}: tuned on {tuned} ({s.jobs[0]} jobs), checked on fold {s.k + 1} "
        f"({s.jobs[1]} jobs)"
    )
    if row is None:
        return [head, "  pick: no change (nothing better than the baseline within the tolerances)"]
    second = fs._second(row)
    ok = held(second, rep.base[1], rep.tolerances)
    verdict = "held" if ok else "BROKEN: " + fm.gives_up(second, rep.base[1], rep.tolerances)
    goal = "met" if fs.reaches_goal(rep, row) else "missed"
    return [
        head,
        f"  pick: {_name(row.candidate)}   next fold: {verdict}; "
        f"goal -{fm._num(rep.goal_pct)} %: {goal}",
        fs._waits_line("tuned", row.first, rep.base[0]),
        fs._waits_line("next fold", second, rep.base[1]),
    ]


def _standing_line(st: Standing, n: int) -> str:
    k, w, b = st.worst_figures()
    return (
        f"  {_name(st.candidate):<40} held {st.held_n} of {n}  mean gain {st.mean_gain():+.1f} %"
        f"  worst (fold {k + 1}) {gain_pct(w, b):+.1f} %"
        + (f"  [{st.in_sample} in-sample]" if st.in_sample else "")
    )


def format_report(title: str, rep: FoldReport) -> str:
    """The steps, the contenders and the pick, as text."""
    n = len(rep.steps)
    lines = [
        title,
        fs._tolerance_line(rep.tolerances),
        f"{rep.folds} folds in time by job count; step k tunes on folds 1..k (the search of "
        "--search on them) and checks its pick on fold k+1; waits in hours"
        + (
            "; steps after the first tune only what the previous step ran on its next fold"
            " (--fold-narrow)"
            if rep.narrowed
            else ""
        ),
        "",
    ]
    for s in rep.steps:
        lines += _step_lines(s)
    held_n = sum(pick_held(s) for s in rep.steps)
    lines += ["", f"the step's pick held on the next fold: {held_n} of {n}", ""]
    lines.append(
        "the picks on every next fold (gain: mean bsld against the baseline there; in-sample: "
        "folds the pick was tuned on):"
    )
    lines += [_standing_line(st, n) for st in rep.standings]
    lines.append("")
    lines += _recommended(rep)
    return "\n".join(lines) + "\n"


def _recommended(rep: FoldReport) -> List[str]:
    if rep.best is None:
        why = (
            "no pick held the tolerances on any next fold"
            if rep.standings
            else "no step picked a formula"
        )
        return [f"recommended across the folds: no change ({why})"]
    st = rep.standings[rep.best]
    k, w, b = st.worst_figures()
    row = next(r for s in rep.steps for r in s.report.rows if r.candidate == st.candidate)
    mean_bsld = sum(x.bsld for _k, x, _b in st.next_folds) / len(st.next_folds)
    mean_base = sum(x.bsld for _k, _x, x in st.next_folds) / len(st.next_folds)
    lines = [
        f"recommended across the folds: {_name(st.candidate)}, held on {st.held_n} of "
        f"{len(rep.steps)} next folds",
        f"  job_sort_formula: {row.expression}",
        f"  mean over the next folds: bsld {mean_bsld:.2f} against {mean_base:.2f} "
        f"(gain {st.mean_gain():+.1f} %); worst fold ({k + 1}): {w.bsld:.2f} against "
        f"{b.bsld:.2f} (gain {gain_pct(w, b):+.1f} %)",
    ]
    for j, x, y in st.next_folds:
        verdict = "held" if held(x, y, rep.tolerances) else fm.gives_up(x, y, rep.tolerances)
        mark = " (worst)" if j == k else ""
        lines.append(f"  fold {j + 1}{mark}: {verdict}")
        lines.append(fs._waits_line("    it", x, y))
        lines.append(fs._waits_line("    baseline", y, y))
    return lines


def as_json(rep: FoldReport) -> Dict[str, Any]:
    """The same as one object."""

    def cand(c: fm.Candidate) -> Dict[str, Any]:
        return {"label": c.label, "source": c.source, "backfill_depth": c.depth}

    def step(s: Step) -> Dict[str, Any]:
        row = pick(s)
        second = None if row is None else fs._second(row)
        return {
            "tuned_on_folds": s.k,
            "jobs": list(s.jobs),
            "baseline": {"tuned": s.report.base[0]._asdict(), "next": s.report.base[1]._asdict()},
            "pick": None
            if row is None
            else dict(cand(row.candidate), job_sort_formula=row.expression),
            "tuned": None if row is None else row.first._asdict(),
            "next": None if second is None else second._asdict(),
            "held": None if second is None else held(second, s.report.base[1], rep.tolerances),
            "goal_met": None if row is None else fs.reaches_goal(s.report, row),
        }

    def standing_obj(st: Standing) -> Dict[str, Any]:
        k, w, b = st.worst_figures()
        return dict(
            cand(st.candidate),
            picked_at=st.picked_at,
            held=st.held_n,
            of=len(rep.steps),
            in_sample=st.in_sample,
            gains_pct=st.gains(),
            mean_gain_pct=st.mean_gain(),
            next_folds=[
                {"fold": j + 1, "held": held(x, y, rep.tolerances), "waits": x._asdict()}
                for j, x, y in st.next_folds
            ],
            worst={
                "fold": k + 1,
                "gain_pct": gain_pct(w, b),
                "waits": w._asdict(),
                "baseline": b._asdict(),
            },
        )

    return {
        "folds": rep.folds,
        "narrowed": rep.narrowed,
        "tolerances": dict(rep.tolerances._asdict(), slack_h=fm.SLACK_H),
        "steps": [step(s) for s in rep.steps],
        "contenders": [standing_obj(st) for st in rep.standings],
        "recommended": None if rep.best is None else rep.best,
    }
