"""Policy search: PBS scheduler policies x estimate sources on one workload (pure).

Each configuration's figures (:func:`figures`), the recommendation (:func:`recommend`: the
best mean bounded slowdown whose long jobs' p95 wait stays within a bound) and the table.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..core import rank as hook_rank
from . import pbsched
from .formula import SLACK_H, hours
from .simulate import BASELINE, PERFECT, SimResult, SimWorkload, _pct, job_outcomes

LONG_S = 24 * 3600  # "long" as in evaluate's classes: run time > 24 h
WIDE_FRACTION = 0.125  # "wide": at least 1/8 of the machine's processors
# The recommendation's default bound on wide jobs' longest wait: 3 x the baseline's. A sort
# by length starves wide jobs (CTC-SP2, sjf.rank-bf1 with v3: 2,288 h against 84 h under
# FCFS); the sorts that age jobs stay within 1.2-2.7 x on the bundled traces.
WIDE_MAX_FACTOR = 3.0


class Figures(NamedTuple):
    policy: str
    source: str
    wait_mean_h: float
    wait_p95_h: float
    bsld_mean: float
    long_jobs: int
    long_wait_mean_h: float
    long_wait_p95_h: float
    long_wait_max_h: float
    wide_jobs: int
    wide_wait_mean_h: float
    wide_wait_max_h: float
    rank: str = ""
    """What ``softwalltime_rank`` was (a :class:`~.pbsched.Ranker`'s name: ``key-mean``,
    or ``perfect`` with perfect estimates); empty when the sort does not read it."""


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def figures(policy: str, work: SimWorkload, result: SimResult, rank: str = "") -> Figures:
    """The search's figures of one simulation (waits in hours; ``rank``: the ranker's
    name if the sort read one)."""
    waits, bslds = job_outcomes(work, result)
    h = [w / 3600.0 for w in waits]
    long_w = sorted(h[k] for k, r in enumerate(work.run) if r > LONG_S)
    wide_min = WIDE_FRACTION * result.procs_total
    wide_w = [h[k] for k, p in enumerate(work.procs) if p >= wide_min]
    return Figures(
        policy=policy,
        source=result.source,
        wait_mean_h=_mean(h),
        wait_p95_h=_pct(sorted(h), 0.95) if h else 0.0,
        bsld_mean=_mean(bslds),
        long_jobs=len(long_w),
        long_wait_mean_h=_mean(long_w),
        long_wait_p95_h=_pct(long_w, 0.95) if long_w else 0.0,
        long_wait_max_h=max(long_w, default=0.0),
        wide_jobs=len(wide_w),
        wide_wait_mean_h=_mean(wide_w),
        wide_wait_max_h=max(wide_w, default=0.0),
        rank=rank,
    )


def baseline(rows: Sequence[Figures]) -> Optional[Figures]:
    """The users' walltimes under the first policy (today's configuration), if simulated."""
    return next((r for r in rows if r.source == BASELINE), None)


def runnable(row: Figures) -> bool:
    """A site can run this configuration: not ``perfect``, and not the users' walltimes
    under a sort by the rank (the hook that publishes the rank also sets soft walltimes;
    that row shows what the rank alone does)."""
    return row.source != PERFECT and not (row.rank and row.source == BASELINE)


class Bounds(NamedTuple):
    """What the recommendation may cost the jobs a sort by length pushes back (hours; None:
    no bound)."""

    long_p95_h: Optional[float]
    wide_max_h: Optional[float]


def bounds(
    rows: Sequence[Figures], long_p95_h: Optional[float], wide_max_h: Optional[float] = None
) -> Bounds:
    """The admin's bounds, each defaulting to the baseline's: long jobs' p95 wait as high as
    theirs, wide jobs' longest wait :data:`WIDE_MAX_FACTOR` times theirs."""
    base = baseline(rows)
    if long_p95_h is None and base is not None:
        long_p95_h = base.long_wait_p95_h
    if wide_max_h is None and base is not None and base.wide_jobs:
        wide_max_h = WIDE_MAX_FACTOR * base.wide_wait_max_h
    return Bounds(long_p95_h, wide_max_h)


def within(row: Figures, limits: Bounds) -> bool:
    """Whether ``row`` keeps long jobs' p95 wait and wide jobs' longest wait in bounds,
    give or take :data:`~.formula.SLACK_H` (a bound is not broken by seconds: CERIT-SC's
    long jobs' p95 0.04972 h against 0.04944 h, issue 30)."""
    if limits.long_p95_h is not None and row.long_wait_p95_h > limits.long_p95_h + SLACK_H:
        return False
    return limits.wide_max_h is None or row.wide_wait_max_h <= limits.wide_max_h + SLACK_H


def recommend(
    rows: Sequence[Figures],
    long_p95_bound_h: Optional[float],
    wide_max_bound_h: Optional[float] = None,
) -> Optional[Figures]:
    """The configuration with the best mean bsld within the bounds (:func:`bounds`), among
    those a site can run (:func:`runnable`)."""
    limits = bounds(rows, long_p95_bound_h, wide_max_bound_h)
    ok = [r for r in rows if runnable(r) and within(r, limits)]
    return min(ok, key=lambda r: r.bsld_mean) if ok else None


def _bound_text(limits: Bounds) -> str:
    parts = []
    if limits.long_p95_h is not None:
        parts.append(f"long p95 <= {hours(limits.long_p95_h)}")
    if limits.wide_max_h is not None:
        parts.append(f"wide max <= {hours(limits.wide_max_h)}")
    return ", ".join(parts) or "none"


def _cells(jobs: int, *values: Tuple[float, str]) -> str:
    # "-" where the class is empty (no long or wide job), not a misleading 0.00.
    return "".join(format(format(v, spec) if jobs else "-", ">9") for v, spec in values)


RULES = {
    pbsched.ESTIMATE: "backfilling by estimate (PBS's rule): a job passes a top job's "
    "reservation if its soft walltime ends by it",
    pbsched.WALLTIME: "backfilling by walltime (PBS's rule only next to an advance "
    "reservation): a job passes a top job's reservation only if its walltime ends by it",
}
CLASS_RULES = {
    pbsched.CLASSES_PBS: "equivalence classes of (processors, walltime), as PBS's",
    pbsched.CLASSES_RANK: "equivalence classes of (processors, walltime, softwalltime_rank): "
    "the rank on sched_config's resources: line",
    pbsched.CLASSES_NONE: "no equivalence classes (every job checked on its own; not PBS)",
}


PBS_RULES = pbsched.Policy()  # PBS's rules, the default iteration


def rules_line(rules: pbsched.Policy) -> str:
    """The model's rules a search ran with, in one line."""
    if rules.backfill_fuzzy is None:
        fuzzy = "a top job's start searched at every event"
    else:
        fuzzy = f"opt_backfill_fuzzy {rules.backfill_fuzzy} s"
    return f"{RULES[rules.backfill_by]}; {CLASS_RULES[rules.classes]}; {fuzzy}"


FAIRSHARE_MARK = "+" + pbsched.FAIRSHARE


def fair_name(policy: str, parsed: pbsched.Policy) -> str:
    """``policy`` as a row names it: under the site's ``fair_share``
    (:attr:`.pbsched.Policy.fairshare`) its sort with ``+fairshare``, ``fcfs`` then being
    ``fairshare`` (as :attr:`.pbsched.Policy.name`): ``sjf+fairshare-bf1``,
    ``fairshare-bf1``."""
    f = parsed.fairshare
    m = pbsched._HOW.match(policy.strip())
    if f is None or not f.fair_share or m is None:
        return policy
    sort, how = m.group("sort"), m.group("how") or "bf1"
    if sort == pbsched.FAIRSHARE or sort.endswith(FAIRSHARE_MARK):
        return policy
    sort = pbsched.FAIRSHARE if sort == pbsched.FCFS else sort + FAIRSHARE_MARK
    return f"{sort}-{how}"


def _policy(name: str, rules: pbsched.Policy) -> pbsched.Policy:
    # a row's policy (fair_name's +fairshare: the rules' fairshare) under the rules
    m = pbsched._HOW.match(name.strip())
    fair = m is not None and m.group("sort").endswith(FAIRSHARE_MARK)
    if fair and m is not None:
        name = m.group("sort")[: -len(FAIRSHARE_MARK)] + "-" + (m.group("how") or "bf1")
    policy = pbsched.parse_policy(
        name, rules.scheduler_iteration, rules.backfill_by, rules.classes, rules.backfill_fuzzy
    )
    if rules.fairshare is not None and (fair or policy.fairshare is not None):
        policy = policy._replace(fairshare=rules.fairshare)
    return policy


def rank_name(rows: Sequence[Figures]) -> str:
    """The rank the rows' ``*.rank`` sorts read but with perfect estimates (``key-mean``,
    unless ``simulate --rank-by`` chose another)."""
    names = sorted({r.rank for r in rows if r.rank and r.rank != pbsched.PerfectRanker.name})
    return ",".join(names) or hook_rank.NAME


def rank_note(rows: Sequence[Figures], rank_refresh_s: int) -> Optional[str]:
    """What the rank policies' rows sorted by, if any row read the rank."""
    if not any(r.rank for r in rows):
        return None
    every = f"refreshed every {rank_refresh_s} s" if rank_refresh_s else "set at submit only"
    return (
        f"*.rank: sorted by {pbsched.RANK} = the user's {rank_name(rows)} ({every}) with every "
        "estimate source (users: the rank alone, not recommended as the hook sets both); "
        "with perfect estimates the rank is the run time too"
    )


def format_search(
    title: str,
    rows: Sequence[Figures],
    best: Optional[Figures],
    bound_h: Optional[float],
    rules: pbsched.Policy = PBS_RULES,
    rank_refresh_s: int = pbsched.DEFAULT_RANK_REFRESH_S,
    wide_bound_h: Optional[float] = None,
    withheld: str = "",
) -> str:
    """The search table, the recommendation and the PBS settings that express it (or, with
    ``withheld``, this line instead)
    (``bound_h``, ``wide_bound_h``: the admin's bounds, None for the defaults; ``rules``:
    the scheduler iteration, backfill rule and classes the search ran with, its sort
    unused)."""
    base = baseline(rows)
    width = max([16] + [len(r.policy) + 2 for r in rows])  # xfactor.rank-bf1 is 16 long
    head = "{:<{w}}{:<12}{:>8}{:>8}{:>8}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}".format(
        "policy", "estimates", "wait", "p95", "bsld", "vs base%", "long", "long95",
        "longmax", "wide", "widemax", w=width,
    )  # fmt: skip
    lines = [title, rules_line(rules)]
    lines.append("waits in hours; long: run > 24 h; wide: >= 1/8 of the machine")
    note = rank_note(rows, rank_refresh_s)
    lines += ([note] if note else []) + ["", head]
    for r in rows:
        rel = (
            format(100.0 * (r.bsld_mean - base.bsld_mean) / base.bsld_mean, "+.1f")
            if base and base.bsld_mean
            else "-"
        )
        long = _cells(r.long_jobs, (r.long_wait_mean_h, ".2f"), (r.long_wait_p95_h, ".2f"))
        long += _cells(r.long_jobs, (r.long_wait_max_h, ".1f"))
        wide = _cells(r.wide_jobs, (r.wide_wait_mean_h, ".2f"), (r.wide_wait_max_h, ".1f"))
        lines.append(
            f"{r.policy:<{width}}{r.source:<12}{r.wait_mean_h:>8.2f}{r.wait_p95_h:>8.2f}"
            f"{r.bsld_mean:>8.2f}{rel:>9}{long}{wide}"
        )
    lines.append("")
    limits = bounds(rows, bound_h, wide_bound_h)
    lines.append(f"bounds are kept give or take {SLACK_H} h")
    if best is None:
        lines.append(
            "no configuration keeps long jobs' p95 wait and wide jobs' longest wait within "
            f"the bounds ({_bound_text(limits)})"
        )
        return "\n".join(lines) + "\n"
    if best.long_jobs:
        bound = limits.long_p95_h if limits.long_p95_h is not None else 0.0
        why = f"with long jobs' p95 wait {hours(best.long_wait_p95_h)} <= {hours(bound)}"
    else:
        why = "no long jobs in this workload"
    if best.wide_jobs and limits.wide_max_h is not None:
        why += (
            f", wide jobs' longest wait {hours(best.wide_wait_max_h)} <= {hours(limits.wide_max_h)}"
        )
    lines.append(
        f"recommended: {best.policy} with {best.source} estimates, backfilling by "
        f"{rules.backfill_by} (best mean bsld {best.bsld_mean:.2f}; {why})"
    )
    policy = _policy(best.policy, rules)
    if withheld:
        lines.append("  " + withheld)
    else:
        lines.extend(
            "  " + s for s in pbsched.pbs_settings(policy, rank_refresh_s, rank_name(rows))
        )
    return "\n".join(lines) + "\n"


def as_json(
    rows: Sequence[Figures],
    best: Optional[Figures],
    rules: pbsched.Policy = PBS_RULES,
    rank_refresh_s: int = pbsched.DEFAULT_RANK_REFRESH_S,
    limits: Optional[Bounds] = None,
    withheld: str = "",
) -> Dict[str, Any]:
    """The search as one object; ``rank`` describes the rank the ``*.rank`` rows sorted by
    (None if none did); ``bounds``: those the recommendation kept to (default: the
    defaults of :func:`bounds`)."""
    if limits is None:
        limits = bounds(rows, None)
    out: List[Dict[str, Any]] = [r._asdict() for r in rows]
    rec = None
    if best is not None:
        rec = dict(best._asdict())
        policy = _policy(best.policy, rules)
        settings = pbsched.pbs_settings(policy, rank_refresh_s, rank_name(rows))
        rec["pbs_settings"] = [] if withheld else settings
        rec["pbs_settings_withheld"] = withheld or None
    rank = None
    if any(r.rank for r in rows):
        # each row's "rank" says which ranked it: key-mean, or perfect with perfect estimates
        rank = {"resource": pbsched.RANK, "name": rank_name(rows), "refresh_s": rank_refresh_s}
    return {
        "backfill_by": rules.backfill_by,
        "classes": rules.classes,
        "backfill_fuzzy_s": rules.backfill_fuzzy,
        "rank": rank,
        "bounds": limits._asdict(),
        "configurations": out,
        "recommended": rec,
    }
