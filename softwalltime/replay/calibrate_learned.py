"""Maintain the ``learned`` predictor's site table from the finished_jobs history.

As for ``calibrated`` (:mod:`.calibrate`): every finished job of the history table is
replayed through :func:`softwalltime.replay.evaluate.replay_learned`, the code ``evaluate
--predictors learned`` runs (the table learning at each job end in event order, each job
predicted from the jobs ended before it), by default from the shipped prior as ``evaluate
--prior`` does, and the final table replaces the stored one in one transaction: its cells
(``learned_cells``) and one row (``learned_state``) with lambda, the totals and the rules
the table chooses in each fine bin, for the soft walltime and the rank
(:class:`~softwalltime.core.learned_site.LearnedChoices`), which the hook reads. Not
incremental: each run recomputes the whole history (as ``calibrated``'s), so the stored
table is exactly the replay's end state; :func:`learner_from_rows` reads it back.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any, NamedTuple, Optional, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core import learned
from ..core.learned_site import LearnedChoices
from ..db.schema import learned_cells, learned_state
from ..errors import DatabaseError
from .evaluate import columns, replay_learned
from .history import read_finished_jobs
from .learned_native import new_learner
from .prior import load_learned_prior

log = logging.getLogger(__name__)

LEVEL_FINE, LEVEL_COARSE, LEVEL_SITE = 0, 1, 2
# One stored cell: (level, bin, rule, jobs, under_jobs, accuracy_sum)
Cell = tuple[int, int, int, float, float, float]


class LearnedSummary(NamedTuple):
    """What a ``learned`` calibration run learned from."""

    predictor: str
    jobs: int
    """finished jobs replayed (the others lack a walltime, run time or times)"""
    under_pct: Optional[float]
    """under-estimate rate of the predictor over those jobs, percent"""
    target: str
    """``fixed`` (a percentage) or ``v3`` (as many under-estimates as v3)"""
    target_under_pct: Optional[float]
    """the target, percent (``v3``: v3's rate over the same jobs, None without jobs)"""
    lam: float
    cells: int
    prior: bool
    """whether the table started from the shipped prior"""


def build_learned(
    conn: Connection, target_under_pct: Optional[float], prior: bool = True
) -> tuple[learned.Learner, int, float]:
    """Replay the history table as ``evaluate`` does; the final table, jobs replayed and
    their under-estimate rate (percent).

    :param target_under_pct: percent, or ``None``: as many under-estimates as v3
    :param prior: start from the shipped prior (``evaluate --prior``), not an empty table
    :raises PriorError: the shipped prior does not fit this predictor (a packaging error)
    :raises DatabaseError: the history cannot be read
    """
    trace = read_finished_jobs(conn, source="finished_jobs")
    cols, _skipped = columns(trace.jobs, "submit")
    softs, table = replay_learned(cols, target_under_pct, load_learned_prior() if prior else None)
    under = sum(1 for s, r in zip(softs, cols.runs) if s < r)
    n = len(softs)
    return table, n, (100.0 * under / n if n else 0.0)


def cells_of(table: learned.Learner) -> list[Cell]:
    """The table's cells, every level, the bins that saw a job (or a prior's fraction)."""
    levels = (
        (LEVEL_FINE, table.n_fine, table.u_fine, table.a_fine),
        (LEVEL_COARSE, table.n_coarse, table.u_coarse, table.a_coarse),
        (LEVEL_SITE, [table.n_site], [table.u_site], [table.a_site]),
    )
    out: list[Cell] = []
    for level, counts, under, acc in levels:
        for bin_, n in enumerate(counts):
            if n or any(under[bin_]) or any(acc[bin_]):
                for rule in range(learned.N_RULES):
                    out.append((level, bin_, rule, n, under[bin_][rule], acc[bin_][rule]))
    return out


def learner_from_rows(cells: Sequence[Sequence[Any]], state: Any) -> learned.Learner:
    """The Learner the stored rows were written from (``state``: the ``learned_state`` row
    with ``lam``, ``log_lam``, ``jobs``, ``under_jobs``, ``v3_under_jobs``).

    :raises ValueError: a cell outside the bins or rules
    """
    table = new_learner()
    site = ([0.0], [table.u_site], [table.a_site])
    sizes = {LEVEL_FINE: learned.FINE, LEVEL_COARSE: learned.COARSE, LEVEL_SITE: 1}
    for level, bin_, rule, n, under, acc in cells:
        if level not in sizes or not 0 <= bin_ < sizes[level] or not 0 <= rule < learned.N_RULES:
            raise ValueError(f"learned_cells: no cell ({level}, {bin_}, {rule})")
        counts, u, a = {
            LEVEL_FINE: (table.n_fine, table.u_fine, table.a_fine),
            LEVEL_COARSE: (table.n_coarse, table.u_coarse, table.a_coarse),
            LEVEL_SITE: site,
        }[level]
        counts[bin_] = float(n)
        u[bin_][rule] = float(under)
        a[bin_][rule] = float(acc)
    table.n_site = site[0][0]
    table.log_lam = float(state.log_lam)
    table.lam = float(state.lam)
    table.total = int(state.jobs)
    table.total_under = int(state.under_jobs)
    table.v3_under = int(state.v3_under_jobs)
    table.level = _level(table, state)
    return table


def _level(table: learned.Learner, state: Any) -> float:
    """The slow level of ``table``'s steering (not stored): log lam less the deficit's push
    (exact unless either was held at a bound of LOG_LAMBDA_MIN..LOG_LAMBDA_MAX)."""
    target = None if state.target == "v3" else float(state.target_under_pct) / 100.0
    return table.log_lam - table.push(table.deficit(target))


def store_learned(
    conn: Connection, table: learned.Learner, target: str, target_under_pct: float, prior: bool
) -> int:
    """Replace the stored ``learned`` table by ``table`` (the caller commits); cells written.

    :param target: ``fixed`` or ``v3``; ``target_under_pct`` the rate (``v3``: v3's)
    :raises DatabaseError: the write failed (e.g. revision 0008 is missing)
    """
    cells = cells_of(table)
    choices = LearnedChoices.from_learner(table)
    try:
        conn.execute(sa.delete(learned_cells))
        if cells:
            keys = ("level", "bin", "rule", "jobs", "under_jobs", "accuracy_sum")
            conn.execute(sa.insert(learned_cells), [dict(zip(keys, cell)) for cell in cells])
        conn.execute(sa.delete(learned_state))
        conn.execute(
            sa.insert(learned_state).values(
                id=1, lam=table.lam, log_lam=table.log_lam, jobs=table.total,
                under_jobs=table.total_under, v3_under_jobs=table.v3_under,
                site_jobs=table.n_site, target=target, target_under_pct=float(target_under_pct),
                prior=prior, updated_at=datetime.now(timezone.utc),
                choices=json.dumps(choices.stored(), separators=(",", ":")),
            )
        )  # fmt: skip
    except sa.exc.SQLAlchemyError as err:
        lines = str(getattr(err, "orig", None) or err).strip().splitlines()
        why = lines[0] if lines else type(err).__name__
        raise DatabaseError(
            f"cannot write the learned table ({why}); "
            "is the schema migrated ('softwalltime db upgrade')?"
        ) from err
    return len(cells)


def calibrate_learned(
    conn: Connection, target_under_pct: Optional[float], prior: bool = True
) -> LearnedSummary:
    """Rebuild and store the ``learned`` table from finished_jobs (the caller commits).

    :param target_under_pct: the admin's target, percent, or ``None``: as many
        under-estimates as v3 on the same jobs (v3's rate is stored as the target)
    :param prior: start from the shipped prior table
    :raises DatabaseError: reading or writing failed
    """
    table, n, under_pct = build_learned(conn, target_under_pct, prior)
    target = target_under_pct
    if target is None:
        target = 100.0 * table.v3_under / table.total if table.total else None
    kind = "fixed" if target_under_pct is not None else "v3"
    cells = store_learned(conn, table, kind, 0.0 if target is None else target, prior)
    log.info("learned on %s finished jobs: %s cells, lambda %.4g", n, cells, table.lam)
    return LearnedSummary(
        learned.NAME, n, under_pct if n else None, kind, target, table.lam, cells, prior
    )
