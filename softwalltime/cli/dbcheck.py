"""``softwalltime db check``: stored rows that the ingester now refuses as impossible.

The rules are the ingester's own, :data:`softwalltime.accounting.FIELD_BOUNDS` and
:data:`softwalltime.accounting.TIME_ORDER`, applied to the columns that store each field;
rows an older ingester stored may break them (negative run times, end before start, zero
ncpus: issue 16 case 6). One scan per table counts the rows of every rule at once
(``count(*) FILTER``); only a rule that finds rows is asked for a few example job ids
(``LIMIT``). Nothing is changed: the output shows each rule's condition, for a ``DELETE``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Sequence

from ..accounting import (
    FIELD_BOUNDS,
    FINISHED_JOB_COLUMNS,
    RERUN_COLUMNS,
    RUN_CHECKS,
    TIME_ORDER,
    WALL_CHECK,
)
from ..core.config import Settings, require_dsn
from ..errors import UNDEFINED_TABLE, DatabaseError, SchemaMissingError
from .argtypes import whole_number

if TYPE_CHECKING:  # SQLAlchemy is imported when the command runs, not with the parser
    from sqlalchemy.engine import Connection

# The history tables and the columns the ingester fills (the keys of the rules).
TABLES = (("finished_jobs", FINISHED_JOB_COLUMNS), ("job_reruns", RERUN_COLUMNS))
_TIME_COLUMNS = frozenset(
    ("ctime", "started_at", "ended_at", "qtime", "etime")
)  # timestamptz, bounds in epoch s
# A table lock held elsewhere (a migration, VACUUM FULL) ends the check with one line.
LOCK_TIMEOUT = "60s"


class Rule(NamedTuple):
    """One ingest rule as a condition on a table's columns."""

    name: str  # as the ingester counts it: "end before start"
    sql: str  # the condition, values as bind parameters
    params: Dict[str, int]
    shown: str  # the condition with its values, for people (and a DELETE)


class Finding(NamedTuple):
    rule: Rule
    rows: int
    examples: List[str]  # job ids, newest end first


class TableReport(NamedTuple):
    table: str
    rows: int
    impossible: int  # rows that break at least one rule
    findings: List[Finding]  # one per rule, in rule order


def add_check_command(dbsub: Any) -> None:
    """Add ``db check`` to the ``db`` command group."""
    check = dbsub.add_parser(
        "check",
        help="find stored rows that ingest now refuses as impossible (exit 1 if any)",
        description=(
            "Count the rows of finished_jobs and job_reruns that break the ingester's rules "
            "(values beyond their bounds, end before start or ctime), with a few example job "
            "ids per rule. Exit 0: none; 1: some (each rule's condition is shown). "
            "Example: softwalltime db check --json"
        ),
    )
    check.add_argument("--json", action="store_true", help="print JSON instead of text")
    check.add_argument(
        "--examples",
        type=whole_number(0),
        default=3,
        metavar="N",
        help="job ids shown per rule (default 3)",
    )
    check.set_defaults(func=run)


def rules_for(columns: Sequence[str]) -> List[Rule]:
    """The rules a table with these columns can break, in FIELD_BOUNDS, TIME_ORDER, then
    RUN_CHECKS order."""
    rules = []
    for i, bound in enumerate(FIELD_BOUNDS):
        col = bound.column
        if col is None or col not in columns:
            continue
        low, high = (f"to_timestamp(:{p}{i})" if col in _TIME_COLUMNS else f":{p}{i}" for p in "lh")
        sql = f"({col} < {low} OR {col} > {high})"
        shown = sql.replace(f":l{i}", str(bound.low)).replace(f":h{i}", str(bound.high))
        rules.append(Rule(bound.rule, sql, {f"l{i}": bound.low, f"h{i}": bound.high}, shown))
    for order in TIME_ORDER:
        if order.earlier_column in columns and order.later_column in columns:
            sql = f"{order.later_column} < {order.earlier_column}"
            rules.append(Rule(order.rule, sql, {}, sql))
    if {"runtime_s", "started_at", "ended_at"} <= set(columns):
        rules += [Rule(c.rule, f"({c.sql})", {}, f"({c.sql})") for c in RUN_CHECKS]
        if "walltime_s" in columns:
            rules.append(Rule(WALL_CHECK.rule, f"({WALL_CHECK.sql})", {}, f"({WALL_CHECK.sql})"))
    return rules


def check_table(conn: Connection, table: str, columns: Sequence[str], n: int) -> TableReport:
    """Count each rule's rows in one scan, then fetch up to ``n`` example ids per rule found.

    :param table: a name from TABLES (identifiers are constants; values are parameters)
    """
    from sqlalchemy import text

    rules = rules_for(columns)
    params: Dict[str, Any] = {k: v for r in rules for k, v in r.params.items()}
    counts = ", ".join(f"count(*) FILTER (WHERE {r.sql})" for r in rules)
    any_rule = " OR ".join(r.sql for r in rules)
    sql = f"SELECT count(*), count(*) FILTER (WHERE {any_rule}), {counts} FROM {table}"  # noqa: S608
    total, impossible, *per_rule = conn.execute(text(sql), params).one()
    findings = [
        Finding(rule, rows, _examples(conn, table, rule, n) if rows else [])
        for rule, rows in zip(rules, per_rule)
    ]
    return TableReport(table, total, impossible, findings)


def _examples(conn: Connection, table: str, rule: Rule, n: int) -> List[str]:
    from sqlalchemy import text

    sql = (
        f"SELECT job_id, server FROM {table} WHERE {rule.sql}"  # noqa: S608
        " ORDER BY ended_at DESC, job_id LIMIT :limit"
    )
    rows = conn.execute(text(sql), {**rule.params, "limit": n}).all()
    return [job if job.endswith("." + server) else f"{job}@{server}" for job, server in rows]


def check(conn: Connection, examples: int = 3) -> List[TableReport]:
    """Every history table's report (read only).

    :raises SchemaMissingError: the tables do not exist yet
    :raises DatabaseError: the check failed (a lock held too long, the server gone)
    """
    from sqlalchemy import exc, text

    try:
        conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
        return [check_table(conn, table, cols, examples) for table, cols in TABLES]
    except exc.SQLAlchemyError as err:
        if getattr(getattr(err, "orig", None), "pgcode", None) == UNDEFINED_TABLE:
            raise SchemaMissingError() from err
        lines = str(getattr(err, "orig", None) or err).strip().splitlines()
        raise DatabaseError(
            f"db check failed: {lines[0] if lines else type(err).__name__}"
        ) from err


def render(reports: Sequence[TableReport]) -> str:
    """The text report: per table, each rule that found rows with its count and examples."""
    out = []
    for rep in reports:
        if not rep.impossible:
            out.append(f"{rep.table}: {rep.rows:,} rows, none impossible")
            continue
        out.append(f"{rep.table}: {rep.impossible:,} of {rep.rows:,} rows hold impossible values")
        for f in rep.findings:
            if f.rows:
                out.append(f"  {f.rows:>9,}  {f.rule.name}  [{f.rule.shown}]")
                out.append(f"             e.g. {', '.join(f.examples)}")
    return "\n".join(out)


def as_json(reports: Sequence[TableReport]) -> Dict[str, Any]:
    """The report for ``--json``: every rule of every table, found or not."""
    return {
        "impossible_rows": sum(r.impossible for r in reports),
        "tables": [
            {
                "table": r.table,
                "rows": r.rows,
                "impossible_rows": r.impossible,
                "rules": [
                    {
                        "rule": f.rule.name,
                        "condition": f.rule.shown,
                        "rows": f.rows,
                        "examples": f.examples,
                    }
                    for f in r.findings
                ],
            }
            for r in reports
        ],
    }


def run(args: argparse.Namespace, settings: Settings) -> int:
    """``softwalltime db check``: 0 if no stored row breaks a rule, 1 if some do."""
    from ..db import engine as db

    dsn = require_dsn(settings)
    with db.connect(db.make_engine(dsn), dsn) as conn:
        reports = check(conn, args.examples)
        conn.rollback()
    print(json.dumps(as_json(reports), indent=2) if args.json else render(reports))
    found = sum(r.impossible for r in reports)
    if found:
        print(
            f"softwalltime db check: {found:,} stored row(s) hold values the ingester refuses"
            " (each rule's condition is shown above); they stay until you delete them",
            file=sys.stderr,
        )
        return 1
    return 0
