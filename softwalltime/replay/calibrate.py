"""Maintain the ``calibrated`` predictor's site table from the finished_jobs history.

The table is the end state of the replay: every finished job of the history table is
replayed through :func:`softwalltime.replay.evaluate.replay_calibrated` (the hook's code,
the table learning at each job end in event order), and the resulting table replaces the
stored one in one transaction. The hook reads it (cached) at its next refresh. Recomputing
from the whole history keeps it exactly the replay's state; it costs a few seconds per
100,000 jobs (``softwalltime calibrate`` from cron, or the ingester after each run).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import NamedTuple, Optional

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core import calibrated as cal
from ..db.schema import calibration_cells, calibration_state
from ..errors import DatabaseError
from .evaluate import columns, replay_calibrated
from .history import read_finished_jobs
from .prior import load_prior

log = logging.getLogger(__name__)


class CalibrationSummary(NamedTuple):
    """What a calibration run learned from."""

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


def build_table(
    conn: Connection, target_under_pct: Optional[float], prior: bool = True
) -> tuple[cal.Calibration, int, float]:
    """Replay the history table; return the final table, jobs replayed, their under-rate.

    :param target_under_pct: percent, or ``None``: as many under-estimates as v3
    :param prior: start from the shipped prior (:mod:`.prior`), not an empty table
    :raises PriorError: the shipped prior does not fit this predictor (a packaging error)

    :raises DatabaseError: the history cannot be read
    """
    trace = read_finished_jobs(conn, source="finished_jobs")
    cols, _skipped = columns(trace.jobs, "submit")
    softs, table = replay_calibrated(cols, target_under_pct, load_prior() if prior else None)
    under = sum(1 for s, r in zip(softs, cols.runs) if s < r)
    n = len(softs)
    return table, n, (100.0 * under / n if n else 0.0)


def store_table(conn: Connection, table: cal.Calibration, target_under_pct: float) -> int:
    """Replace the stored calibration table by ``table`` (the caller commits); cells written.

    :param target_under_pct: the target stored with it (for a target ``v3``, v3's rate)

    :raises DatabaseError: the write failed (e.g. revision 0004 is missing)
    """
    (lam, total, total_under), cells = table.rows()
    now = datetime.now(timezone.utc)
    try:
        conn.execute(sa.delete(calibration_cells))
        if cells:
            conn.execute(
                sa.insert(calibration_cells),
                [
                    {"bin": b, "rule": r, "jobs": n, "under_jobs": u, "accuracy_sum": a}
                    for b, r, n, u, a in cells
                ],
            )
        conn.execute(sa.delete(calibration_state))
        conn.execute(
            sa.insert(calibration_state).values(
                id=1,
                lam=lam,
                jobs=total,
                under_jobs=total_under,
                target_under_pct=float(target_under_pct),
                updated_at=now,
                choices=json.dumps(table.snapshot().stored(), separators=(",", ":")),
            )
        )
    except sa.exc.SQLAlchemyError as err:
        lines = str(getattr(err, "orig", None) or err).strip().splitlines()
        why = lines[0] if lines else type(err).__name__
        raise DatabaseError(
            f"cannot write the calibration table ({why}); "
            "is the schema migrated ('softwalltime db upgrade')?"
        ) from err
    return len(cells)


def calibrate(
    conn: Connection, target_under_pct: Optional[float], prior: bool = True
) -> CalibrationSummary:
    """Rebuild and store the site calibration table from finished_jobs (caller commits).

    :param conn: a connection to the history database
    :param target_under_pct: the admin's target (the ``target_under_pct`` setting), or
        ``None``: as many under-estimates as v3 on the same jobs (v3's rate is stored as the
        table's target)
    :param prior: start from the shipped prior table (each bin's cells hold PRIOR_JOBS
        pseudo-jobs more than the site's own)
    :raises DatabaseError: reading or writing failed
    """
    table, n, under_pct = build_table(conn, target_under_pct, prior)
    target = target_under_pct
    if target is None:
        target = 100.0 * table.v3_under() / n if n else None
    cells = store_table(conn, table, 0.0 if target is None else target)
    log.info("calibrated on %s finished jobs: %s cells, lambda %.4g", n, cells, table.lam)
    return CalibrationSummary(
        n,
        under_pct if n else None,
        "fixed" if target_under_pct is not None else "v3",
        target,
        table.lam,
        cells,
        prior,
    )
