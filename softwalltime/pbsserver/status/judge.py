"""The judgements of ``softwalltime status``: functions from gathered facts (qmgr's listing,
the hook's config text, server log lines, the ingester's state, rows of the history) to a
:class:`Check` each, and the states and their order. No PBS, no database, no clock: the
one file touched is the private temporary copy :func:`judge_hook_config` loads the config
text from, as the hook loads its own file (:func:`.commands.exported_settings`)."""

from __future__ import annotations

import datetime as dt
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

from ...core.config import Settings, redact_dsn
from ...errors import ConfigError
from ..commands import exported_settings
from ..refresh import leave_label

OK, WARNING, CRITICAL, UNKNOWN = 0, 1, 2, 3
STATE_NAMES = ("OK", "WARNING", "CRITICAL", "UNKNOWN")
# How states combine: a check that could not run (UNKNOWN) may hide a failure, so it ranks
# above WARNING; CRITICAL, a failure seen, ranks above everything.
_RANK = {OK: 0, WARNING: 1, UNKNOWN: 2, CRITICAL: 3}
# The activity check's failure rate counts only from this many events, or this many
# failures, in the window: one failure in 17 events is a warning, not an outage.
MIN_EVENTS_FOR_RATE = 20
MIN_FAILURES_FOR_RATE = 3
EXPECTED_EVENTS = ("queuejob", "runjob", "modifyjob")


@dataclass
class Metric:
    """One sample. A name ending in ``_total`` is a counter, every other a gauge; ``warn``
    and ``crit`` are the thresholds Nagios perfdata carry (None: none)."""

    name: str
    value: float
    help: str
    labels: dict[str, str] = field(default_factory=dict)
    warn: Optional[float] = None
    crit: Optional[float] = None


NAN = float("nan")
# The series every run writes, whether or not its check could gather them (a missing value
# is NaN; an ``_up`` gauge 0), so that absent-series alerts never fire on a state change:
# name -> (help, value when missing). Series with labels (per server, per reason) come and
# go with their label values; ``softwalltime_history_up`` says whether they could be read.
ALWAYS = {
    "softwalltime_hook_enabled": ("hook enabled (1) or disabled (0)", NAN),
    "softwalltime_database_up": ("the hook's database answered (1) or not (0)", 0.0),
    "softwalltime_database_connect_seconds": ("connect + SELECT 1 with the hook's DSN", NAN),
    "softwalltime_hook_window_seconds": ("the window the hook_jobs gauges cover", NAN),
    "softwalltime_hook_jobs_set": ("soft walltimes set in the window", NAN),
    "softwalltime_hook_jobs_dry_run": ("dry-run decisions in the window", NAN),
    "softwalltime_hook_jobs_failed": ("jobs left unchanged by a failure in the window", NAN),
    "softwalltime_hook_failure_ratio": ("failed / all events in the window", NAN),
    "softwalltime_ingest_up": ("the ingester's state could be read (1) or not (0)", 0.0),
    "softwalltime_ingest_lag_bytes": ("unread bytes of the newest accounting file", NAN),
    "softwalltime_ingest_lag_records": ("unread records of the newest accounting file", NAN),
    "softwalltime_ingest_lock_held": ("an ingest runs (1) or not (0)", NAN),
    "softwalltime_ingest_checkpoint_age_seconds": (
        "seconds since the newest accounting file's checkpoint was written",
        NAN,
    ),
    "softwalltime_ingest_oldest_unread_age_seconds": (
        "age of the newest accounting file's first unread record (0: nothing unread)",
        NAN,
    ),
    "softwalltime_history_up": ("the history could be read (1) or not (0)", 0.0),
    "softwalltime_accuracy_jobs": ("jobs that ended in the last 24 h with a soft walltime", NAN),
    "softwalltime_accuracy_underestimated_ratio": (
        "share of those jobs whose soft walltime was below their run time",
        NAN,
    ),
    "softwalltime_accuracy_soft_walltime_mae_seconds": (
        "mean absolute error of their soft walltimes",
        NAN,
    ),
    "softwalltime_accuracy_walltime_mae_seconds": (
        "mean absolute error of their requested walltimes",
        NAN,
    ),
    "softwalltime_policy_guard_broken": (
        "tolerances the current policy breaks against the previous one on the same jobs",
        NAN,
    ),
}
# The counter of the hook's decisions, one series per outcome, all always written.
HOOK_EVENTS = "softwalltime_hook_events_total"
HOOK_OUTCOMES = ("set", "dry_run", "failed", "left_alone")
_EVENTS_HELP = (
    "the hook's decisions since local midnight, by outcome (a counter: it resets with the"
    " server's daily log)"
)


@dataclass
class Check:
    name: str
    state: int
    summary: str
    metrics: list[Metric] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------- the hook


def judge_hook(name: str, listing: dict[str, str]) -> Check:
    """The hook's qmgr attributes (:func:`parse_qmgr_hook` of ``list hook NAME``)."""
    if not listing:
        return Check("hook", CRITICAL, f"hook {name!r} is not installed")
    events = [e for e in listing.get("event", "").split(",") if e]
    enabled = listing.get("enabled") == "true"
    details = {
        "enabled": enabled,
        "events": events,
        "order": listing.get("order"),
        "alarm": listing.get("alarm"),
    }
    what = (
        f"{'enabled' if enabled else 'DISABLED'}, events {','.join(events) or 'none'}, "
        f"order {listing.get('order', '?')}, alarm {listing.get('alarm', '?')} s"
    )
    metrics = [Metric("softwalltime_hook_enabled", 1 if enabled else 0, "hook enabled")]
    missing = [e for e in EXPECTED_EVENTS if e not in events]
    if not enabled:
        return Check("hook", CRITICAL, f"{name}: {what}", metrics, details)
    if "queuejob" in missing or "runjob" in missing:
        return Check("hook", CRITICAL, f"{name}: {what}; missing {','.join(missing)}", metrics)
    if missing:
        return Check("hook", WARNING, f"{name}: {what}; missing {','.join(missing)}", metrics)
    return Check("hook", OK, f"{name}: {what}", metrics, details)


def judge_hook_config(text: str) -> tuple[Check, Optional[Settings]]:
    """Validate the exported hook config with the same loader the hook uses."""
    try:
        settings = exported_settings(text, "hook config")
    except ConfigError as err:
        return Check("config", CRITICAL, str(err)), None
    if not settings.dsn:
        return Check("config", CRITICAL, "hook config has no dsn"), settings
    mode = "DRY RUN (sets nothing)" if settings.dry_run else "active"
    summary = f"valid; {mode}; predictor {settings.predictor}; dsn {redact_dsn(settings.dsn)}"
    return Check("config", WARNING if settings.dry_run else OK, summary), settings


_LIBPYTHON = re.compile(r"libpython(\d+\.\d+)")


def embedded_python(ldd_output: str) -> Optional[str]:
    """``/usr/bin/pythonX.Y`` for the libpython that ``ldd pbs_server.bin`` lists."""
    match = _LIBPYTHON.search(ldd_output)
    return f"/usr/bin/python{match.group(1)}" if match else None


# -------------------------------------------------------------------- what the hook did

# 11/23/2026 02:39:54;0080;Server@pbshost;Hook;Server@pbshost;softwalltime: queuejob ...
# pbs.logmsg puts no hook name in the line: a hook installed under another name than
# "softwalltime" tags its lines "softwalltime[NAME]: " (hooklog.line_prefix).
_LOG_LINE = re.compile(
    r"^(\d\d/\d\d/\d{4} \d\d:\d\d:\d\d);[0-9a-fA-F]{4};[^;]*;Hook;[^;]*;"
    r"softwalltime(?:\[([^\]]*)\])?: (.*)$"
)
_FAILED = re.compile(r"^job left unchanged after \d+ ms: (\w+)")
_SET = re.compile(r": set (?:v\d|calibrated|learned) soft_walltime=")


@dataclass
class Activity:
    set: int = 0
    dry_run: int = 0
    left_alone: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    first: Optional[str] = None  # the first failure line, for the person reading

    @property
    def events(self) -> int:
        return self.set + self.dry_run + sum(self.left_alone.values()) + self.total_failures

    @property
    def total_failures(self) -> int:
        return sum(self.failures.values())

    def add(self, other: Activity) -> None:
        self.set += other.set
        self.dry_run += other.dry_run
        self.left_alone.update(other.left_alone)
        self.failures.update(other.failures)
        self.first = self.first or other.first


def parse_hook_log(
    lines: Iterable[str],
    since: dt.datetime,
    hook: str = "softwalltime",
    today: Optional[Activity] = None,
    day_start: Optional[dt.datetime] = None,
) -> Activity:
    """Count the lines of the hook named ``hook`` at or after ``since`` (naive local time,
    as PBS logs); those at or after ``day_start`` also into ``today`` when given (the
    counters since local midnight).

    Decisions are logged at PBS's debug level (event class 0x0080, in the default
    ``log_events`` 511); failures ("job left unchanged after ...") as warnings. The
    lines of other hooks that run softwalltime (tagged ``softwalltime[OTHER]: ``) are
    not counted.
    """
    out = Activity()
    for line in lines:
        if ";Hook;" not in line or "softwalltime" not in line:
            continue
        match = _LOG_LINE.match(line.rstrip("\n"))
        if not match or (match.group(2) or "softwalltime") != hook:
            continue
        try:
            when = dt.datetime.strptime(match.group(1), "%m/%d/%Y %H:%M:%S")
        except ValueError:
            continue
        if when >= since:
            _count(out, match.group(3))
        if today is not None and day_start is not None and when >= day_start:
            _count(today, match.group(3))
    return out


def _count(out: Activity, text: str) -> None:
    """Count one line of the hook (its text after the tag) into ``out``."""
    failed = _FAILED.match(text)
    if failed:
        out.failures[failed.group(1)] += 1
        out.first = out.first or text
    elif ": leave alone: " in text:
        out.left_alone[leave_label(text)] += 1
    elif ": dry run, would set " in text:
        out.dry_run += 1
    elif _SET.search(text):
        out.set += 1


def judge_activity(
    activity: Activity,
    since_s: float,
    max_failure_pct: float,
    today: Optional[Activity] = None,
) -> Check:
    """Any failure is a warning. A failure rate above ``max_failure_pct`` is critical once
    the window holds :data:`MIN_EVENTS_FOR_RATE` events or :data:`MIN_FAILURES_FOR_RATE`
    failures (fewer say too little about a rate). ``today``: the counts since local
    midnight, written as counters (``_total``; they reset with the server's daily log)."""
    window = _span(since_s)
    in_window = f"in the last {window} (softwalltime_hook_window_seconds)"
    ratio = activity.total_failures / activity.events if activity.events else NAN
    metrics = [
        Metric("softwalltime_hook_window_seconds", since_s, "the window the counts cover"),
        Metric("softwalltime_hook_jobs_set", activity.set, f"soft walltimes set {in_window}"),
        Metric(
            "softwalltime_hook_jobs_dry_run", activity.dry_run, f"dry-run decisions {in_window}"
        ),
        Metric(
            "softwalltime_hook_jobs_failed",
            activity.total_failures,
            f"jobs left unchanged by a failure {in_window}",
            warn=0,
        ),
        Metric(
            "softwalltime_hook_failure_ratio",
            ratio,
            f"failed / all events {in_window} (NaN: no event)",
            warn=0,
            crit=max_failure_pct / 100,
        ),
    ]
    if today is not None:
        metrics += _counters(today)
    metrics += [
        Metric(
            "softwalltime_hook_jobs_left_alone",
            n,
            f"jobs left alone {in_window}, by reason",
            {"reason": reason},
        )
        for reason, n in sorted(activity.left_alone.items())
    ]
    details: dict[str, Any] = {
        "set": activity.set,
        "dry_run": activity.dry_run,
        "left_alone": dict(activity.left_alone),
        "failures": dict(activity.failures),
        "first_failure": activity.first,
    }
    alone = ", ".join(f"{k} {v}" for k, v in sorted(activity.left_alone.items()))
    summary = (
        f"last {window}: {activity.set} set, {sum(activity.left_alone.values())} left alone"
        + (f" ({alone})" if alone else "")
        + (f", {activity.dry_run} dry run" if activity.dry_run else "")
        + f", {activity.total_failures} failures"
    )
    if not activity.total_failures:
        return Check("activity", OK, summary, metrics, details)
    first = activity.first or ""
    first = first if len(first) <= 160 else first[:159] + "…"
    enough = (
        activity.events >= MIN_EVENTS_FOR_RATE or activity.total_failures >= MIN_FAILURES_FOR_RATE
    )
    rate = f"{100 * ratio:.1f} %"
    if not enough:
        rate += (
            f" of {activity.events} events, too few for a rate: it counts from"
            f" {MIN_EVENTS_FOR_RATE} events or {MIN_FAILURES_FOR_RATE} failures"
        )
    summary += f" ({rate}; first: {first})"
    state = CRITICAL if enough and 100 * ratio > max_failure_pct else WARNING
    return Check("activity", state, summary, metrics, details)


def _counters(today: Optional[Activity]) -> list[Metric]:
    """The hook's decisions since local midnight, a counter per outcome (NaN: unknown)."""
    counts = dict.fromkeys(HOOK_OUTCOMES, NAN)
    if today is not None:
        left = sum(today.left_alone.values())
        counts = dict(zip(HOOK_OUTCOMES, (today.set, today.dry_run, today.total_failures, left)))
    return [
        Metric(HOOK_EVENTS, n, _EVENTS_HELP, {"outcome": outcome}) for outcome, n in counts.items()
    ]


def _span(seconds: float) -> str:
    if seconds % 3600 == 0:
        hours = int(seconds // 3600)
        return "hour" if hours == 1 else f"{hours} h"
    return f"{seconds / 60:.0f} min"


# ------------------------------------------------------------------------ the ingester


@dataclass
class IngestState:
    """The newest accounting file against its own checkpoint (never another file's).

    :param offset: the checkpoint's byte offset; None: the file was never read
    :param checkpoint_age_s: seconds since that checkpoint was written; None: never read
    :param oldest_unread_age_s: age of the first unread record, by its own timestamp
        (how long the oldest unread data has waited); None: nothing unread, or no
        readable timestamp
    """

    newest_file: Optional[str]
    size: int
    offset: Optional[int]
    lag_records: int
    checkpoint_age_s: Optional[float]
    lock_holder: Optional[str]
    oldest_unread_age_s: Optional[float] = None


def judge_ingester(state: IngestState, max_age_s: float) -> Check:
    """Behind: the newest file holds unread records, the oldest of them has waited longer
    than ``max_age_s`` (by its timestamp; else by the age of the file's checkpoint; a
    file never read with no readable timestamp counts as waiting), and no ingest runs."""
    holder = f"; lock held by {state.lock_holder}" if state.lock_holder else ""
    if state.newest_file is None:
        up = [Metric("softwalltime_ingest_up", 1, ALWAYS["softwalltime_ingest_up"][0])]
        return Check("ingester", WARNING, "no accounting file found" + holder, up)
    lag = state.size - (state.offset or 0)
    unread_age = state.oldest_unread_age_s
    if unread_age is None:
        unread_age = 0.0 if state.lag_records == 0 else NAN  # NaN: unread, no timestamp read
    metrics = [
        Metric("softwalltime_ingest_up", 1, ALWAYS["softwalltime_ingest_up"][0]),
        Metric("softwalltime_ingest_lag_bytes", lag, "unread bytes of the newest accounting file"),
        Metric("softwalltime_ingest_lag_records", state.lag_records, "unread records"),
        Metric("softwalltime_ingest_lock_held", 1 if state.lock_holder else 0, "an ingest runs"),
        Metric(
            "softwalltime_ingest_checkpoint_age_seconds",
            NAN if state.checkpoint_age_s is None else state.checkpoint_age_s,
            "seconds since the newest accounting file's checkpoint was written (NaN: never)",
        ),
        Metric(
            "softwalltime_ingest_oldest_unread_age_seconds",
            unread_age,
            ALWAYS["softwalltime_ingest_oldest_unread_age_seconds"][0],
            warn=max_age_s,
        ),
    ]
    name = os.path.basename(state.newest_file)
    if state.offset is None:
        where = "never read"
    else:
        where = f"its checkpoint written {_ago(state.checkpoint_age_s or 0.0)} ago"
    oldest = (
        f", the oldest {_ago(state.oldest_unread_age_s)} old"
        if state.oldest_unread_age_s is not None and state.lag_records
        else ""
    )
    summary = f"{name}: {lag} bytes / {state.lag_records} records unread{oldest}; {where}{holder}"
    details = {
        "file": state.newest_file,
        "lag_bytes": lag,
        "lag_records": state.lag_records,
        "never_read": state.offset is None,
        "checkpoint_age_s": state.checkpoint_age_s,
        "oldest_unread_age_s": state.oldest_unread_age_s,
        "lock_holder": state.lock_holder,
    }
    waited = state.oldest_unread_age_s
    if waited is None:
        waited = state.checkpoint_age_s
    stale = waited is None or waited > max_age_s
    if state.lag_records > 0 and stale and not state.lock_holder:
        return Check("ingester", WARNING, summary + " (behind)", metrics, details)
    return Check("ingester", OK, summary, metrics, details)


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# ------------------------------------------------------------------------------ history


def judge_history(
    servers: Sequence[tuple[str, int, Optional[float]]],
    accuracy: tuple[int, Optional[float], Optional[float], Optional[float]],
    now: float,
) -> Check:
    """Rows and newest end time per server; accuracy of the last 24 h (``accuracy``: jobs
    compared, ratio underestimated, MAE of the walltimes and of the soft walltimes in
    seconds). No rows: warning."""
    metrics = [Metric("softwalltime_history_up", 1, ALWAYS["softwalltime_history_up"][0])]
    parts = []
    for server, rows, newest in servers:
        metrics.append(
            Metric("softwalltime_history_rows", rows, "finished jobs stored", {"server": server})
        )
        if newest is not None:
            metrics.append(
                Metric(
                    "softwalltime_history_newest_end_timestamp_seconds",
                    newest,
                    "end time of the newest stored job (Unix time)",
                    {"server": server},
                )
            )
        parts.append(f"{server} {rows} rows, newest {_ago(now - newest) if newest else '?'} ago")
    jobs, under, wall_mae, soft_mae = accuracy
    under, wall_mae, soft_mae = under or 0.0, wall_mae or 0.0, soft_mae or 0.0
    if jobs:
        last24_help = "jobs that ended in the last 24 h with a soft walltime"
        metrics += [
            Metric("softwalltime_accuracy_jobs", jobs, last24_help),
            Metric(
                "softwalltime_accuracy_underestimated_ratio",
                under,
                "share of those jobs whose soft walltime was below their run time",
            ),
            Metric(
                "softwalltime_accuracy_soft_walltime_mae_seconds",
                soft_mae,
                "mean absolute error of their soft walltimes",
            ),
            Metric(
                "softwalltime_accuracy_walltime_mae_seconds",
                wall_mae,
                "mean absolute error of their requested walltimes",
            ),
        ]
        last24 = (
            f"last 24 h: {jobs} jobs, {100 * under:.1f} % under, MAE {soft_mae / 3600:.2f} h"
            f" (walltime {wall_mae / 3600:.2f} h)"
        )
    else:
        metrics.append(
            Metric("softwalltime_accuracy_jobs", 0, ALWAYS["softwalltime_accuracy_jobs"][0])
        )
        last24 = "last 24 h: no job with a soft walltime"
    details = {
        "servers": [{"server": s, "rows": r, "newest_end": n} for s, r, n in servers],
        "last_24h": {
            "jobs": jobs,
            "underestimated_ratio": under if jobs else None,
            "walltime_mae_s": wall_mae if jobs else None,
            "soft_walltime_mae_s": soft_mae if jobs else None,
        },
    }
    if not servers:
        return Check("history", WARNING, "no finished jobs stored; " + last24, metrics, details)
    return Check("history", OK, "; ".join(parts) + "; " + last24, metrics, details)


# ------------------------------------------------------------- predictor learned's table


LEARNED_MAX_AGE_S = 86400.0  # older: warning (calibrate runs from cron, every few minutes)


def judge_learned(rows: Sequence[tuple[Any, ...]], max_age_s: float = LEARNED_MAX_AGE_S) -> Check:
    """The ``learned`` table the hook reads (the hook's predictor is ``learned``): its age
    and the jobs it learned from. None stored: warning (the hook uses v3 until ``softwalltime
    calibrate`` runs); older than ``max_age_s``: warning."""
    if not rows:
        return Check(
            "learned",
            WARNING,
            "no learned table: the hook uses v3 until 'softwalltime calibrate' runs",
            [Metric("softwalltime_learned_table_age_seconds", NAN, _LEARNED_AGE_HELP)],
        )
    age, jobs, site_jobs = float(rows[0][0]), int(rows[0][1]), float(rows[0][2])
    metrics = [
        Metric("softwalltime_learned_table_age_seconds", age, _LEARNED_AGE_HELP, warn=max_age_s),
        Metric("softwalltime_learned_table_jobs", jobs, "finished jobs the table learned from"),
    ]
    details = {"age_s": age, "jobs": jobs, "site_jobs": site_jobs}
    text = f"learned table: {jobs} jobs, computed {_ago(age)} ago"
    if age > max_age_s:
        text += f" (older than {_ago(max_age_s)}: is 'softwalltime calibrate' run from cron?)"
        return Check("learned", WARNING, text, metrics, details)
    return Check("learned", OK, text, metrics, details)


_LEARNED_AGE_HELP = "seconds since 'softwalltime calibrate' wrote predictor learned's table"


# --------------------------------------------------------------------------- all checks


def worst(states: Iterable[int]) -> int:
    """The state of several together: CRITICAL > UNKNOWN > WARNING > OK."""
    return max(states, key=_RANK.__getitem__, default=OK)


def overall(checks: Sequence[Check]) -> int:
    return worst(c.state for c in checks)


# ---------------------------------------------------------------------------- the guard

GUARD_METRIC = "softwalltime_policy_guard_broken"
REVERT = "softwalltime policy revert --yes"


def judge_guard(broken: list[str], comparison: dict[str, Any], days: float) -> Check:
    """The guard (issue 48): the last ``days`` of the current policy against the same jobs
    under the previous one (:func:`softwalltime.api.policy_guard`). A broken tolerance is a
    WARNING that names the way back; the guard never reverts on its own."""
    help_text = ALWAYS[GUARD_METRIC][0]
    note = comparison.get("note")
    details = {"comparison": comparison}
    if note:
        missing = Metric(GUARD_METRIC, NAN, help_text)
        return Check("policy guard", OK, f"nothing to judge: {note}", [missing], details)
    metric = Metric(GUARD_METRIC, float(len(broken)), help_text, warn=1.0)
    fit = comparison.get("fit", {})
    trust = f"model within 1 h of {fit.get('within_1h_pct', 0):.0f} % of real starts"
    where = f"last {days:g} days, {comparison.get('jobs', 0)} jobs, {trust}"
    if not broken:
        holds = f"{comparison.get('current_policy')} holds ({where})"
        return Check("policy guard", OK, holds, [metric], details)
    text = f"{'; '.join(broken)} ({where}); to go back: {REVERT}"
    return Check("policy guard", WARNING, text, [metric], details)
