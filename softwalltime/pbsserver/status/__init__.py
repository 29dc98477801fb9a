"""Is softwalltime working? The checks behind ``softwalltime status`` (Nagios 0/1/2/3).

Each check returns a :class:`Check`: a state (OK, WARNING, CRITICAL, or UNKNOWN when the
check itself could not run), one line for a person, and metrics for Prometheus. Three
modules, in the order of a run:

- :mod:`.gather`: everything that does I/O (PBS's commands, pbs_server's Python, the
  server logs, the accounting directory, the database); :func:`run_checks` runs them all;
- :mod:`.judge`: the parsers and judgements (:func:`judge_hook`, :func:`parse_hook_log`,
  :func:`judge_activity`, :func:`judge_ingester`, ...), pure and tested on recorded inputs;
- :mod:`.render`: the table, the Nagios line, JSON and Prometheus's text format.

The names below are the package's interface (``from softwalltime.pbsserver import status``).
"""

from __future__ import annotations

from .gather import (
    HOOK_IMPORTS,
    Options,
    check_database,
    check_imports,
    count_records,
    first_record_time,
    ingest_state,
    log_files,
    newest_accounting_file,
    policy_check,
    run_checks,
)
from .judge import (
    ALWAYS,
    CRITICAL,
    EXPECTED_EVENTS,
    HOOK_EVENTS,
    HOOK_OUTCOMES,
    LEARNED_MAX_AGE_S,
    MIN_EVENTS_FOR_RATE,
    MIN_FAILURES_FOR_RATE,
    NAN,
    OK,
    STATE_NAMES,
    UNKNOWN,
    WARNING,
    Activity,
    Check,
    IngestState,
    Metric,
    embedded_python,
    judge_activity,
    judge_guard,
    judge_history,
    judge_hook,
    judge_hook_config,
    judge_ingester,
    judge_learned,
    overall,
    parse_hook_log,
    worst,
)
from .render import (
    NAGIOS_SUMMARY_CHARS,
    perf_number,
    prometheus_value,
    render_json,
    render_nagios,
    render_prometheus,
    render_table,
)

__all__ = [
    "ALWAYS",
    "CRITICAL",
    "EXPECTED_EVENTS",
    "HOOK_EVENTS",
    "HOOK_IMPORTS",
    "HOOK_OUTCOMES",
    "LEARNED_MAX_AGE_S",
    "MIN_EVENTS_FOR_RATE",
    "MIN_FAILURES_FOR_RATE",
    "NAGIOS_SUMMARY_CHARS",
    "NAN",
    "OK",
    "STATE_NAMES",
    "UNKNOWN",
    "WARNING",
    "Activity",
    "Check",
    "IngestState",
    "Metric",
    "Options",
    "check_database",
    "check_imports",
    "count_records",
    "embedded_python",
    "first_record_time",
    "ingest_state",
    "judge_activity",
    "judge_history",
    "judge_hook",
    "judge_hook_config",
    "judge_guard",
    "judge_ingester",
    "judge_learned",
    "log_files",
    "newest_accounting_file",
    "overall",
    "parse_hook_log",
    "perf_number",
    "policy_check",
    "prometheus_value",
    "render_json",
    "render_nagios",
    "render_prometheus",
    "render_table",
    "run_checks",
    "worst",
]
