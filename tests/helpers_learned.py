"""A stored ``learned`` table for the hook's tests (fake and real server)."""

from __future__ import annotations

import json
from typing import Any

import psycopg2


def store_choices(dsn: str, choices: Any) -> None:
    """A learned_state row whose ``choices`` are ``choices`` (as stored, JSON)."""
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            cur.execute("DELETE FROM learned_state")
            cur.execute(
                "INSERT INTO learned_state (id, lam, log_lam, jobs, under_jobs, v3_under_jobs,"
                " site_jobs, target, target_under_pct, prior, choices)"
                " VALUES (1, 1.0, 0.0, 500, 50, 60, 500.0, 'fixed', 12.0, false, %s)",
                (json.dumps(choices),),
            )
    finally:
        conn.close()
