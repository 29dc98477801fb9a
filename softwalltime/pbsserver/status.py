"""Is softwalltime working? The checks behind ``softwalltime status`` (Nagios 0/1/2/3).

Each check returns a :class:`Check`: a state (OK, WARNING, CRITICAL, or UNKNOWN when the
check itself could not run), one line for a person, and metrics for Prometheus. The
parsers and judgements (:func:`judge_hook`, :func:`parse_hook_log`, :func:`judge_activity`,
:func:`judge_ingester`, ...) are pure and tested on recorded inputs; :func:`run_checks`
gathers the inputs from PBS, the server logs, the accounting directory and the database.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from ..core.config import Settings, redact_dsn
from ..core.locks import INGEST_LOCK_KEY
from ..core.registry import LEARNED
from ..errors import ConfigError, DatabaseError
from ..hook import pgwire
from . import policy
from .commands import Pbs, PbsError, exported_settings
from .refresh import leave_label, parse_qmgr_hook

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
# What the hook imports, checked under the Python that pbs_server embeds.
HOOK_IMPORTS = "softwalltime.core.config, softwalltime.core.decide, softwalltime.hook.lookup"


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


def check_database(dsn: str, timeout_s: float = 3.0) -> Check:
    """Connect with the hook's own driver and DSN, and run one query."""
    start = time.monotonic()
    try:
        conn = pgwire.connect(
            dsn, start + timeout_s, startup={"application_name": "softwalltime-status"}
        )
        try:
            conn.query("SELECT 1", (), start + timeout_s)
        finally:
            conn.close()
    except (DatabaseError, OSError, ValueError) as err:
        text = " ".join(str(err).split()) or type(err).__name__
        down = [Metric("softwalltime_database_up", 0, ALWAYS["softwalltime_database_up"][0])]
        return Check("database", CRITICAL, f"{redact_dsn(dsn)}: {text}", down)
    ms = (time.monotonic() - start) * 1000
    return Check(
        "database",
        OK,
        f"{redact_dsn(dsn)} answers ({ms:.0f} ms)",
        [
            Metric("softwalltime_database_up", 1, ALWAYS["softwalltime_database_up"][0]),
            Metric("softwalltime_database_connect_seconds", ms / 1000, "connect + SELECT 1"),
        ],
    )


_LIBPYTHON = re.compile(r"libpython(\d+\.\d+)")


def embedded_python(ldd_output: str) -> Optional[str]:
    """``/usr/bin/pythonX.Y`` for the libpython that ``ldd pbs_server.bin`` lists."""
    match = _LIBPYTHON.search(ldd_output)
    return f"/usr/bin/python{match.group(1)}" if match else None


def check_imports(pbs: Pbs, sys_path: Sequence[str]) -> Check:
    """Import the hook path under pbs_server's Python, isolated as the hook is (-I -S)."""
    binary = os.path.join(pbs.exec_dir, "sbin", "pbs_server.bin")
    try:
        ldd = subprocess.run(
            ["ldd", binary], capture_output=True, text=True, check=False, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as err:
        return Check("imports", WARNING, f"cannot run ldd {binary}: {err}")
    python = embedded_python(ldd)
    if python is None or not os.access(python, os.X_OK):
        return Check("imports", WARNING, f"cannot find the Python {binary} embeds")
    code = f"import sys; sys.path[:0] = {list(sys_path)!r}; import {HOOK_IMPORTS}"
    try:
        proc = subprocess.run(
            [python, "-I", "-S", "-c", code],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return Check("imports", WARNING, f"cannot run {python}: {err}")
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return Check("imports", CRITICAL, f"{os.path.basename(python)}: {last}")
    return Check("imports", OK, f"hook path imports under {os.path.basename(python)}")


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


def log_files(server_logs: Path, since: dt.datetime, now: dt.datetime) -> list[Path]:
    """The daily server logs (YYYYMMDD) covering ``since`` .. ``now``."""
    day, files = since.date(), []
    while day <= now.date():
        path = server_logs / day.strftime("%Y%m%d")
        if path.is_file():
            files.append(path)
        day += dt.timedelta(days=1)
    return files


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


def count_records(path: str, offset: int, limit_bytes: int = 64 << 20) -> int:
    """Complete lines after ``offset`` (at most ``limit_bytes`` read)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.read(limit_bytes).count(b"\n")


_RECORD_TIME = re.compile(rb"^(\d\d/\d\d/\d{4} \d\d:\d\d:\d\d);")


def first_record_time(path: str, offset: int, max_lines: int = 100) -> Optional[dt.datetime]:
    """The timestamp (naive local time, as PBS writes it) of the first complete record
    after ``offset``; None if none of the next ``max_lines`` complete lines has one."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        for _ in range(max_lines):
            line = fh.readline(1 << 16)
            if not line.endswith(b"\n"):
                return None  # end of file, an unfinished line, or a huge one
            match = _RECORD_TIME.match(line)
            if match:
                try:
                    return dt.datetime.strptime(match.group(1).decode(), "%m/%d/%Y %H:%M:%S")
                except ValueError:
                    continue
    return None


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


def newest_accounting_file(directory: str) -> Optional[str]:
    """The newest ``YYYYMMDD`` file in ``directory``; None if there is none.

    :raises OSError: the directory cannot be listed
    """
    names = [n for n in os.listdir(directory) if re.fullmatch(r"\d{8}", n)]
    return os.path.join(directory, max(names)) if names else None


_LOCK_SQL = """
SELECT a.pid, a.usename, coalesce(a.client_addr::text, 'local'), a.application_name,
       extract(epoch FROM now() - a.backend_start)::float8
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = $1 AND l.objid::bigint = $2
"""


def ingest_state(
    conn: Any, directory: str, deadline: float, now: Optional[dt.datetime] = None
) -> IngestState:
    """The newest accounting file in ``directory``, its own checkpoint and the lock.

    :param now: naive local time, as PBS writes its records (default: now)
    """
    newest = newest_accounting_file(directory)
    rows = conn.query(
        "SELECT byte_offset, extract(epoch FROM now() - updated_at)::float8"
        " FROM ingest_checkpoints WHERE path = $1",
        (newest or "",),
        deadline,
    )
    held = conn.query(_LOCK_SQL, (INGEST_LOCK_KEY >> 32, INGEST_LOCK_KEY & 0xFFFFFFFF), deadline)
    holder = None
    if held:
        pid, user, addr, app, age = held[0]
        holder = f"pid {pid} ({user}@{addr}, {app or 'no application name'}, {_ago(age)})"
    offset = int(rows[0][0]) if rows else None
    checkpoint_age = float(rows[0][1]) if rows else None
    size = records = 0
    oldest = None
    if newest:
        size = os.path.getsize(newest)
        records = count_records(newest, offset or 0)
        first = first_record_time(newest, offset or 0) if records else None
        if first is not None:
            oldest = max(0.0, ((now or dt.datetime.now()) - first).total_seconds())
    return IngestState(newest, size, offset, records, checkpoint_age, holder, oldest)


# --------------------------------------------------------------------------- history

_HISTORY_SQL = """
SELECT server, count(*), extract(epoch FROM max(ended_at))::float8
FROM finished_jobs GROUP BY server ORDER BY server
"""

# The definitions of the view soft_walltime_accuracy_by_user (migration 0002), over the jobs
# that ended in the last 24 h of all users together (the view itself has no time window),
# unrounded and in base units: a ratio, seconds.
_ACCURACY_SQL = """
SELECT count(*) FILTER (WHERE compared),
       (count(*) FILTER (WHERE compared AND soft_walltime_s < runtime_s))::float8
             / NULLIF(count(*) FILTER (WHERE compared), 0),
       (avg(abs(walltime_s - runtime_s)) FILTER (WHERE compared))::float8,
       (avg(abs(soft_walltime_s - runtime_s)) FILTER (WHERE compared))::float8
FROM (SELECT f.*, (f.soft_walltime_s IS NOT NULL AND f.walltime_s IS NOT NULL
                   AND f.runtime_s IS NOT NULL) AS compared
      FROM finished_jobs f WHERE f.ended_at > now() - interval '24 hours') AS jobs
"""


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

# Predictor learned (migration 0008): the age of the table the hook reads, and its size.
_LEARNED_SQL = (
    "SELECT extract(epoch FROM now() - updated_at)::float8, jobs, site_jobs FROM learned_state"
)
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


# -------------------------------------------------------------------------- all checks


@dataclass
class Options:
    hook: str = "softwalltime"
    since_s: float = 3600.0
    ingest_max_age_s: float = 3600.0
    now: Optional[dt.datetime] = None


def run_checks(pbs: Pbs, cli: Settings, opts: Options) -> list[Check]:
    """Every check in order; one that cannot gather its input says so as its result."""
    checks, hook_settings = _hook_checks(pbs, opts.hook)
    if hook_settings is not None and hook_settings.dsn:
        checks.append(check_database(hook_settings.dsn))
        checks.append(check_imports(pbs, hook_settings.sys_path))
    checks.append(_activity_check(pbs, cli, opts))
    dsn = cli.dsn or (hook_settings.dsn if hook_settings else None)
    if not dsn:
        for name in ("ingester", "history"):
            checks.append(
                Check(
                    name,
                    UNKNOWN,
                    "no database: give --dsn or SOFTWALLTIME_DSN (or install the hook)",
                )
            )
        return checks
    accounting = cli.accounting_dir or os.path.join(pbs.home, "server_priv", "accounting")
    predictor = (hook_settings or cli).predictor
    checks += _database_checks(dsn, accounting, predictor, opts.ingest_max_age_s)
    return checks + policy_check(pbs, dsn)


def _hook_checks(pbs: Pbs, hook: str) -> tuple[list[Check], Optional[Settings]]:
    """The hook as qmgr lists it, and its configuration; the settings found there."""
    checks: list[Check] = []
    hook_settings: Optional[Settings] = None
    try:
        listing = parse_qmgr_hook(pbs.run("qmgr", "-c", f"list hook {hook}").stdout)
        checks.append(judge_hook(hook, listing))
        if listing:
            exported = pbs.check("qmgr", "-c", f"export hook {hook} application/x-config default")
            config, hook_settings = judge_hook_config(exported)
            checks.append(config)
    except PbsError as err:
        checks.append(Check("hook", UNKNOWN, f"cannot ask PBS: {err}"))
    return checks, hook_settings


def _activity_check(pbs: Pbs, cli: Settings, opts: Options) -> Check:
    """The hook's events in the server logs since ``opts.since_s`` ago (and today)."""
    now = opts.now or dt.datetime.now()
    since = now - dt.timedelta(seconds=opts.since_s)
    activity, today = Activity(), Activity()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    logs = Path(pbs.home) / "server_logs"
    try:
        for path in log_files(logs, min(since, midnight), now):
            with open(path, encoding="utf-8", errors="replace") as fh:
                activity.add(parse_hook_log(fh, since, opts.hook, today, midnight))
    except OSError as err:
        reason = err.strerror or type(err).__name__
        return Check("activity", UNKNOWN, f"cannot read {err.filename}: {reason}")
    return judge_activity(activity, opts.since_s, cli.status_failure_rate_pct, today)


def _database_checks(
    dsn: str, accounting: str, predictor: str, ingest_max_age_s: float
) -> list[Check]:
    """The ingester, the history and (predictor ``learned``) its table, over one connection
    (5 s to connect, 30 s in all)."""
    checks: list[Check] = []
    start = time.monotonic()
    deadline = start + 30.0
    try:
        conn = pgwire.connect(dsn, start + 5.0, startup={"application_name": "softwalltime-status"})
    except (DatabaseError, OSError, ValueError) as err:
        text = " ".join(str(err).split())
        return [
            Check(name, CRITICAL, f"database {redact_dsn(dsn)}: {text}")
            for name in ("ingester", "history")
        ]
    try:
        try:
            checks.append(
                judge_ingester(ingest_state(conn, accounting, deadline), ingest_max_age_s)
            )
        except DatabaseError as err:
            checks.append(Check("ingester", CRITICAL, " ".join(str(err).split())))
        except OSError as err:
            reason = err.strerror or type(err).__name__
            checks.append(Check("ingester", UNKNOWN, f"cannot read {err.filename}: {reason}"))
        try:
            servers = [
                (str(s), int(n), None if t is None else float(t))
                for s, n, t in conn.query(_HISTORY_SQL, (), deadline)
            ]
            accuracy = conn.query(_ACCURACY_SQL, (), deadline)[0]
            checks.append(judge_history(servers, tuple(accuracy), time.time()))
        except DatabaseError as err:
            checks.append(Check("history", CRITICAL, " ".join(str(err).split())))
        if predictor == LEARNED:
            try:
                checks.append(judge_learned(conn.query(_LEARNED_SQL, (), deadline)))
            except DatabaseError as err:
                checks.append(Check("learned", CRITICAL, " ".join(str(err).split())))
    finally:
        conn.close()
    return checks


def policy_check(pbs: Pbs, dsn: str) -> list[Check]:
    """The live scheduling policy against the newest record of ``policy_changes``; a
    difference is recorded as a change made outside softwalltime (issue 48). No check when
    PBS cannot be asked (the hook's check says so)."""
    try:
        live = policy.read_live(pbs)
    except PbsError:
        return []
    except policy.PolicyError as err:
        return [Check("policy", UNKNOWN, str(err))]
    try:
        conn = policy.connect(dsn, "softwalltime-status")
    except (DatabaseError, OSError, ValueError) as err:
        return [Check("policy", WARNING, "cannot record: " + " ".join(str(err).split()))]
    try:
        seen = policy.observe(conn, live)
        newest = seen or policy.history(conn, 1)[0]
    except DatabaseError as err:
        text = " ".join(str(err).split())
        state = getattr(err, "sqlstate", "")
        if state == "42P01":  # undefined_table
            text += " (run softwalltime db upgrade)"
        elif state == "42501":  # insufficient_privilege
            text += " (give status a DSN that may: the ingester's role of db grant)"
        return [Check("policy", WARNING, "cannot record: " + text)]
    finally:
        conn.close()
    details = {"live": live, "record": newest.id}
    if seen is None:
        text = f"as recorded (#{newest.id}, {newest.action} by {newest.changed_by})"
        return [Check("policy", OK, text, details=details)]
    change = policy.describe(seen.before, seen.after)
    text = f"INFO: changed outside softwalltime, recorded as #{seen.id}: {change}"
    return [Check("policy", OK, text, details=details)]


def worst(states: Iterable[int]) -> int:
    """The state of several together: CRITICAL > UNKNOWN > WARNING > OK."""
    return max(states, key=_RANK.__getitem__, default=OK)


def overall(checks: Sequence[Check]) -> int:
    return worst(c.state for c in checks)


# ------------------------------------------------------------------------------ output

_COLORS = {OK: "\033[32m", WARNING: "\033[33m", CRITICAL: "\033[31m", UNKNOWN: "\033[35m"}


def render_table(checks: Sequence[Check], color: bool) -> str:
    width = max(len(c.name) for c in checks) if checks else 0
    lines = []
    for c in checks:
        state = STATE_NAMES[c.state]
        if color:
            state = f"{_COLORS[c.state]}{state:<8}\033[0m"
        else:
            state = f"{state:<8}"
        lines.append(f"{c.name:<{width}}  {state} {c.summary}")
    verdict = STATE_NAMES[overall(checks)]
    lines.append(f"softwalltime status: {verdict}")
    return "\n".join(lines)


def render_json(checks: Sequence[Check]) -> str:
    return json.dumps(
        {
            "status": STATE_NAMES[overall(checks)],
            "exit_code": overall(checks),
            "checks": [
                {
                    "name": c.name,
                    "state": STATE_NAMES[c.state],
                    "summary": c.summary,
                    "details": c.details,
                    "metrics": {_metric_key(m): _json_number(m.value) for m in c.metrics},
                }
                for c in checks
            ],
        },
        indent=2,
        sort_keys=False,
    )


def _json_number(value: float) -> Optional[float]:
    """A value for JSON, which has no NaN: null."""
    return None if isinstance(value, float) and math.isnan(value) else value


def _metric_key(m: Metric) -> str:
    if not m.labels:
        return m.name
    return m.name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(m.labels.items())) + "}"


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_value(value: float) -> str:
    """A sample value at full precision: ``int`` as is, ``float`` by ``repr`` (the shortest
    text that reads back as the same float), never ``%g`` (6 digits: 1700153660 would be
    ``1.70015e+09``, 3,660 s off)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def render_prometheus(checks: Sequence[Check], now: Optional[float] = None) -> str:
    """The text exposition format, for node_exporter's textfile collector.

    The names ending in ``_total`` are counters (the hook's events since local midnight,
    reset with the server's daily log); every other is a gauge: the state when the command
    ran or a count over the ``--since`` window. Times are in seconds, sizes in bytes, shares
    as ratios (0 to 1). Every series of :data:`ALWAYS` is written on every run: NaN when its
    check could not gather it, 0 for an ``_up`` gauge.
    """
    states = "0 OK, 1 warning, 2 critical, 3 unknown (the check could not run)"
    ran = time.time() if now is None else now
    out = [
        f"# HELP softwalltime_status overall state: {states}",
        "# TYPE softwalltime_status gauge",
        f"softwalltime_status {overall(checks)}",
        f"# HELP softwalltime_check_state state per check: {states}",
        "# TYPE softwalltime_check_state gauge",
    ]
    out += [f'softwalltime_check_state{{check="{c.name}"}} {c.state}' for c in checks]
    out += [
        "# HELP softwalltime_status_timestamp_seconds when softwalltime status ran (Unix time)",
        "# TYPE softwalltime_status_timestamp_seconds gauge",
        f"softwalltime_status_timestamp_seconds {prometheus_value(ran)}",
    ]
    by_name: dict[str, list[Metric]] = {}
    for c in checks:
        for m in c.metrics:
            by_name.setdefault(m.name, []).append(m)
    for name, (text, missing) in ALWAYS.items():
        if name not in by_name:
            by_name[name] = [Metric(name, missing, text)]
    by_name.setdefault(HOOK_EVENTS, _counters(None))
    for name, metrics in by_name.items():
        out.append(f"# HELP {name} {_help_text(metrics[0].help)}")
        out.append(f"# TYPE {name} {'counter' if name.endswith('_total') else 'gauge'}")
        for m in metrics:
            labels = ",".join(f'{k}="{_label_value(v)}"' for k, v in sorted(m.labels.items()))
            value = prometheus_value(m.value)
            out.append(f"{name}{{{labels}}} {value}" if labels else f"{name} {value}")
    return "\n".join(out) + "\n"


def _help_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _perf_label(m: Metric) -> str:
    name = m.name.removeprefix("softwalltime_")
    for _key, value in sorted(m.labels.items()):
        name += "_" + re.sub(r"[^A-Za-z0-9_.-]+", "_", value)
    return name


def perf_number(value: float, timestamp: bool = False) -> str:
    """A perfdata number with sane digits: integers as they are, a time stamp to the
    second, 3 decimals from 1 up, 3 significant digits below; ``U`` for NaN (the plugin
    guidelines' "undetermined")."""
    if isinstance(value, bool) or isinstance(value, int):
        return str(int(value))
    if math.isnan(value) or math.isinf(value):
        return "U"
    if timestamp or value == int(value):
        return str(int(round(value)))
    if abs(value) >= 1:
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def _perf_value(m: Metric) -> str:
    """``value[unit];[warn];[crit]`` (units s, B, c for a counter)."""
    stamp = m.name.endswith("_timestamp_seconds")
    unit = ""
    if m.name.endswith("_seconds") and not stamp:
        unit = "s"
    elif m.name.endswith("_bytes"):
        unit = "B"
    elif m.name.endswith("_total"):
        unit = "c"
    text = perf_number(m.value, stamp) + unit
    if m.warn is not None or m.crit is not None:
        limits = [m.warn, m.crit]
        text += "".join(";" + ("" if v is None else perf_number(v)) for v in limits).rstrip(";")
    return text


# A check's text in the Nagios line is cut to this many characters (the whole in --json).
NAGIOS_SUMMARY_CHARS = 120


def render_nagios(checks: Sequence[Check]) -> str:
    """One line for Nagios/Icinga: ``SOFTWALLTIME STATE - text | perfdata``.

    The text names the checks that are not OK, worst first (all of them OK: how many);
    checks that say the same (the database down: ingester and history) are named once, and
    each text is cut to :data:`NAGIOS_SUMMARY_CHARS`. The perfdata are the metrics,
    ``label=value[unit][;warn;crit]`` (s, B, c), in the plugin guidelines' form.
    """
    state = overall(checks)
    bad = sorted((c for c in checks if c.state != OK), key=lambda c: -_RANK[c.state])
    if bad:
        said: dict[tuple[int, str], list[str]] = {}
        for c in bad:
            said.setdefault((c.state, _cut(c.summary)), []).append(c.name)
        text = "; ".join(
            f"{', '.join(names)} {STATE_NAMES[st]}: {summary}"
            for (st, summary), names in said.items()
        )
    else:
        text = f"{len(checks)} checks OK: " + ", ".join(c.name for c in checks)
    text = " ".join(text.replace("|", "/").split())
    perf = [f"status={state}"]
    perf += [f"{_perf_label(m)}={_perf_value(m)}" for c in checks for m in c.metrics]
    return f"SOFTWALLTIME {STATE_NAMES[state]} - {text} | {' '.join(perf)}"


def _cut(text: str) -> str:
    text = " ".join(text.replace("|", "/").split())
    if len(text) <= NAGIOS_SUMMARY_CHARS:
        return text
    return text[: NAGIOS_SUMMARY_CHARS - 1] + "…"
