"""Is softwalltime working? The checks behind ``softwalltime status`` (Nagios 0/1/2).

Each check returns a :class:`Check`: a state (OK, WARNING, CRITICAL), one line for a
person, and metrics for Prometheus. The parsers and judgements (:func:`judge_hook`,
:func:`parse_hook_log`, :func:`judge_activity`, :func:`judge_ingester`, ...) are pure and
tested on recorded inputs; :func:`run_checks` gathers the inputs from PBS, the server logs,
the accounting directory and the database.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from ..errors import ConfigError, DatabaseError, SoftwalltimeError
from ..hookpath import pgwire
from ..hookpath.config import Settings, load_settings, redact_dsn
from .commands import Pbs, PbsError
from .refresh import leave_label, parse_qmgr_hook

OK, WARNING, CRITICAL = 0, 1, 2
STATE_NAMES = ("OK", "WARNING", "CRITICAL")
EXPECTED_EVENTS = ("queuejob", "runjob", "modifyjob")
# The ingester's advisory lock key (ingest/load.py LOCK_KEY, ASCII "swtingst"); PostgreSQL
# shows a bigint key as classid (high 32 bits) and objid (low 32 bits).
INGEST_LOCK_KEY = 0x737774696E677374
# What the hook imports, checked under the Python that pbs_server embeds.
HOOK_IMPORTS = (
    "softwalltime.hookpath.config, softwalltime.hookpath.decide, softwalltime.hookpath.lookup"
)


@dataclass
class Metric:
    name: str
    value: float
    help: str
    labels: dict[str, str] = field(default_factory=dict)


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
    metrics = [Metric("softwalltime_hook_enabled", 1.0 if enabled else 0.0, "hook enabled")]
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
    fd, path = tempfile.mkstemp(prefix="softwalltime-status-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        try:
            settings = load_settings(path, environ={})
        except ConfigError as err:
            message = str(err).replace(path, "hook config")
            return Check("config", CRITICAL, message), None
    finally:
        os.unlink(path)
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
        return Check("database", CRITICAL, f"{redact_dsn(dsn)}: {text}")
    ms = (time.monotonic() - start) * 1000
    return Check(
        "database",
        OK,
        f"{redact_dsn(dsn)} answers ({ms:.0f} ms)",
        [Metric("softwalltime_database_connect_seconds", ms / 1000, "connect + SELECT 1")],
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
_LOG_LINE = re.compile(
    r"^(\d\d/\d\d/\d{4} \d\d:\d\d:\d\d);[0-9a-fA-F]{4};[^;]*;Hook;[^;]*;softwalltime: (.*)$"
)
_FAILED = re.compile(r"^job left unchanged after \d+ ms: (\w+)")


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


def parse_hook_log(lines: Iterable[str], since: dt.datetime) -> Activity:
    """Count the hook's lines at or after ``since`` (naive local time, as PBS logs).

    Decisions are logged at PBS's debug level (event class 0x0080, in the default
    ``log_events`` 511); failures ("job left unchanged after ...") as warnings.
    """
    out = Activity()
    for line in lines:
        if ";Hook;" not in line or "softwalltime: " not in line:
            continue
        match = _LOG_LINE.match(line.rstrip("\n"))
        if not match:
            continue
        try:
            when = dt.datetime.strptime(match.group(1), "%m/%d/%Y %H:%M:%S")
        except ValueError:
            continue
        if when < since:
            continue
        text = match.group(2)
        failed = _FAILED.match(text)
        if failed:
            out.failures[failed.group(1)] += 1
            out.first = out.first or text
        elif ": leave alone: " in text:
            out.left_alone[leave_label(text)] += 1
        elif ": dry run, would set " in text:
            out.dry_run += 1
        elif re.search(r": set v\d soft_walltime=", text):
            out.set += 1
    return out


def log_files(server_logs: Path, since: dt.datetime, now: dt.datetime) -> list[Path]:
    """The daily server logs (YYYYMMDD) covering ``since`` .. ``now``."""
    day, files = since.date(), []
    while day <= now.date():
        path = server_logs / day.strftime("%Y%m%d")
        if path.is_file():
            files.append(path)
        day += dt.timedelta(days=1)
    return files


def judge_activity(activity: Activity, since_s: float, max_failure_pct: float) -> Check:
    """Any failure is a warning; a failure rate above ``max_failure_pct`` is critical."""
    window = _span(since_s)
    metrics = [
        Metric("softwalltime_hook_set_total", activity.set, f"soft walltimes set, last {window}"),
        Metric("softwalltime_hook_dry_run_total", activity.dry_run, "dry-run decisions"),
        Metric(
            "softwalltime_hook_failures_total",
            activity.total_failures,
            "jobs left unchanged by a failure",
        ),
    ]
    metrics += [
        Metric("softwalltime_hook_left_alone_total", n, "jobs left alone", {"reason": reason})
        for reason, n in sorted(activity.left_alone.items())
    ]
    details = {
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
    rate = 100.0 * activity.total_failures / activity.events
    first = activity.first or ""
    first = first if len(first) <= 160 else first[:159] + "…"
    summary += f" ({rate:.1f} %; first: {first})"
    state = CRITICAL if rate > max_failure_pct else WARNING
    return Check("activity", state, summary, metrics, details)


def _span(seconds: float) -> str:
    if seconds % 3600 == 0:
        hours = int(seconds // 3600)
        return "hour" if hours == 1 else f"{hours} h"
    return f"{seconds / 60:.0f} min"


# ------------------------------------------------------------------------ the ingester


@dataclass
class IngestState:
    newest_file: Optional[str]
    size: int
    offset: Optional[int]  # the checkpoint's byte offset, None if there is none
    lag_records: int
    last_update_age_s: Optional[float]
    lock_holder: Optional[str]


def count_records(path: str, offset: int, limit_bytes: int = 64 << 20) -> int:
    """Complete lines after ``offset`` (at most ``limit_bytes`` read)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.read(limit_bytes).count(b"\n")


def judge_ingester(state: IngestState, max_age_s: float) -> Check:
    """Behind = unread bytes and no checkpoint written for ``max_age_s``: a warning
    (critical when the newest file was never read at all and is older than that)."""
    metrics = []
    holder = f"; lock held by {state.lock_holder}" if state.lock_holder else ""
    if state.newest_file is None:
        return Check("ingester", WARNING, "no accounting file found" + holder)
    lag = state.size - (state.offset or 0)
    metrics = [
        Metric("softwalltime_ingest_lag_bytes", lag, "unread bytes of the newest accounting file"),
        Metric("softwalltime_ingest_lag_records", state.lag_records, "unread records"),
        Metric(
            "softwalltime_ingest_lock_held", 1.0 if state.lock_holder else 0.0, "an ingest runs"
        ),
    ]
    if state.last_update_age_s is not None:
        metrics.append(
            Metric(
                "softwalltime_ingest_checkpoint_age_seconds",
                state.last_update_age_s,
                "seconds since the newest checkpoint was written",
            )
        )
    name = os.path.basename(state.newest_file)
    age = "never" if state.last_update_age_s is None else f"{_ago(state.last_update_age_s)} ago"
    summary = (
        f"{name}: {lag} bytes / {state.lag_records} records behind; last checkpoint {age}{holder}"
    )
    details = {
        "file": state.newest_file,
        "lag_bytes": lag,
        "lag_records": state.lag_records,
        "last_checkpoint_age_s": state.last_update_age_s,
        "lock_holder": state.lock_holder,
    }
    stale = state.last_update_age_s is None or state.last_update_age_s > max_age_s
    if lag > 0 and stale and not state.lock_holder:
        return Check("ingester", WARNING, summary + " (behind)", metrics, details)
    return Check("ingester", OK, summary, metrics, details)


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def newest_accounting_file(directory: str) -> Optional[str]:
    try:
        names = [n for n in os.listdir(directory) if re.fullmatch(r"\d{8}", n)]
    except OSError:
        return None
    return os.path.join(directory, max(names)) if names else None


_LOCK_SQL = """
SELECT a.pid, a.usename, coalesce(a.client_addr::text, 'local'), a.application_name,
       extract(epoch FROM now() - a.backend_start)::float8
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = $1 AND l.objid::bigint = $2
"""


def ingest_state(conn: Any, directory: str, deadline: float) -> IngestState:
    newest = newest_accounting_file(directory)
    rows = conn.query(
        "SELECT byte_offset, extract(epoch FROM now() - updated_at)::float8"
        " FROM ingest_checkpoints WHERE path = $1",
        (newest or "",),
        deadline,
    )
    last = conn.query(
        "SELECT extract(epoch FROM now() - max(updated_at))::float8 FROM ingest_checkpoints",
        (),
        deadline,
    )[0][0]
    held = conn.query(_LOCK_SQL, (INGEST_LOCK_KEY >> 32, INGEST_LOCK_KEY & 0xFFFFFFFF), deadline)
    holder = None
    if held:
        pid, user, addr, app, age = held[0]
        holder = f"pid {pid} ({user}@{addr}, {app or 'no application name'}, {_ago(age)})"
    size = offset_records = 0
    offset = int(rows[0][0]) if rows else None
    if newest:
        size = os.path.getsize(newest)
        offset_records = count_records(newest, offset or 0)
    return IngestState(newest, size, offset, offset_records, last, holder)


# --------------------------------------------------------------------------- history

_HISTORY_SQL = """
SELECT server, count(*), extract(epoch FROM max(ended_at))::float8
FROM finished_jobs GROUP BY server ORDER BY server
"""

# The definitions of the view soft_walltime_accuracy_by_user (migration 0002), over the jobs
# that ended in the last 24 h of all users together (the view itself has no time window).
_ACCURACY_SQL = """
SELECT count(*) FILTER (WHERE compared),
       round(100.0 * count(*) FILTER (WHERE compared AND soft_walltime_s < runtime_s)
             / NULLIF(count(*) FILTER (WHERE compared), 0), 1)::float8,
       round(avg(abs(walltime_s - runtime_s)) FILTER (WHERE compared) / 3600.0, 2)::float8,
       round(avg(abs(soft_walltime_s - runtime_s)) FILTER (WHERE compared) / 3600.0, 2)::float8
FROM (SELECT f.*, (f.soft_walltime_s IS NOT NULL AND f.walltime_s IS NOT NULL
                   AND f.runtime_s IS NOT NULL) AS compared
      FROM finished_jobs f WHERE f.ended_at > now() - interval '24 hours') AS jobs
"""


def judge_history(
    servers: Sequence[tuple[str, int, Optional[float]]],
    accuracy: tuple[int, Optional[float], Optional[float], Optional[float]],
    now: float,
) -> Check:
    """Rows and newest end time per server; accuracy of the last 24 h. No rows: warning."""
    metrics: list[Metric] = []
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
                    "end time of the newest stored job",
                    {"server": server},
                )
            )
        parts.append(f"{server} {rows} rows, newest {_ago(now - newest) if newest else '?'} ago")
    jobs, under, wall_mae, soft_mae = accuracy
    if jobs:
        metrics += [
            Metric("softwalltime_accuracy_jobs", jobs, "jobs compared, last 24 h"),
            Metric("softwalltime_accuracy_underestimated_pct", under or 0.0, "soft < run time, %"),
            Metric("softwalltime_accuracy_soft_mae_hours", soft_mae or 0.0, "MAE of soft walltime"),
            Metric("softwalltime_accuracy_walltime_mae_hours", wall_mae or 0.0, "MAE of walltime"),
        ]
        last24 = (
            f"last 24 h: {jobs} jobs, {under:.1f} % under, MAE {soft_mae:.2f} h"
            f" (walltime {wall_mae:.2f} h)"
        )
    else:
        last24 = "last 24 h: no job with a soft walltime"
    details = {
        "servers": [{"server": s, "rows": r, "newest_end": n} for s, r, n in servers],
        "last_24h": {
            "jobs": jobs,
            "underestimated_pct": under,
            "walltime_mae_hours": wall_mae,
            "soft_walltime_mae_hours": soft_mae,
        },
    }
    if not servers:
        return Check("history", WARNING, "no finished jobs stored; " + last24, metrics, details)
    return Check("history", OK, "; ".join(parts) + "; " + last24, metrics, details)


# -------------------------------------------------------------------------- all checks


@dataclass
class Options:
    hook: str = "softwalltime"
    since_s: float = 3600.0
    ingest_max_age_s: float = 3600.0
    now: Optional[dt.datetime] = None


def run_checks(pbs: Pbs, cli: Settings, opts: Options) -> list[Check]:
    """Every check in order; one that cannot gather its input says so as its result."""
    checks: list[Check] = []
    hook_settings: Optional[Settings] = None
    try:
        listing = parse_qmgr_hook(pbs.run("qmgr", "-c", f"list hook {opts.hook}").stdout)
        checks.append(judge_hook(opts.hook, listing))
        if listing:
            exported = pbs.check(
                "qmgr", "-c", f"export hook {opts.hook} application/x-config default"
            )
            config, hook_settings = judge_hook_config(exported)
            checks.append(config)
    except PbsError as err:
        checks.append(Check("hook", CRITICAL, f"cannot ask PBS: {err}"))
    if hook_settings is not None and hook_settings.dsn:
        checks.append(check_database(hook_settings.dsn))
        checks.append(check_imports(pbs, hook_settings.sys_path))

    now = opts.now or dt.datetime.now()
    since = now - dt.timedelta(seconds=opts.since_s)
    activity = Activity()
    logs = Path(pbs.home) / "server_logs"
    for path in log_files(logs, since, now):
        with open(path, encoding="utf-8", errors="replace") as fh:
            part = parse_hook_log(fh, since)
        activity.set += part.set
        activity.dry_run += part.dry_run
        activity.left_alone.update(part.left_alone)
        activity.failures.update(part.failures)
        activity.first = activity.first or part.first
    checks.append(judge_activity(activity, opts.since_s, cli.status_failure_rate_pct))

    dsn = cli.dsn or (hook_settings.dsn if hook_settings else None)
    if not dsn:
        checks.append(Check("ingester", WARNING, "no database to read the checkpoints from"))
        return checks
    accounting = cli.accounting_dir or os.path.join(pbs.home, "server_priv", "accounting")
    start = time.monotonic()
    deadline = start + 30.0
    try:
        conn = pgwire.connect(dsn, start + 5.0, startup={"application_name": "softwalltime-status"})
    except (DatabaseError, OSError, ValueError) as err:
        text = " ".join(str(err).split())
        for name in ("ingester", "history"):
            checks.append(Check(name, CRITICAL, f"database {redact_dsn(dsn)}: {text}"))
        return checks
    try:
        try:
            checks.append(
                judge_ingester(ingest_state(conn, accounting, deadline), opts.ingest_max_age_s)
            )
        except (DatabaseError, OSError) as err:
            checks.append(Check("ingester", CRITICAL, " ".join(str(err).split())))
        try:
            servers = [
                (str(s), int(n), None if t is None else float(t))
                for s, n, t in conn.query(_HISTORY_SQL, (), deadline)
            ]
            accuracy = conn.query(_ACCURACY_SQL, (), deadline)[0]
            checks.append(judge_history(servers, tuple(accuracy), time.time()))
        except DatabaseError as err:
            checks.append(Check("history", CRITICAL, " ".join(str(err).split())))
    finally:
        conn.close()
    return checks


def overall(checks: Sequence[Check]) -> int:
    return max((c.state for c in checks), default=OK)


# ------------------------------------------------------------------------------ output

_COLORS = {OK: "\033[32m", WARNING: "\033[33m", CRITICAL: "\033[31m"}


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
                    "metrics": {_metric_key(m): m.value for m in c.metrics},
                }
                for c in checks
            ],
        },
        indent=2,
        sort_keys=False,
    )


def _metric_key(m: Metric) -> str:
    if not m.labels:
        return m.name
    return m.name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(m.labels.items())) + "}"


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_prometheus(checks: Sequence[Check]) -> str:
    """The text exposition format, for node_exporter's textfile collector."""
    out = [
        "# HELP softwalltime_status overall state: 0 OK, 1 warning, 2 critical",
        "# TYPE softwalltime_status gauge",
        f"softwalltime_status {overall(checks)}",
        "# HELP softwalltime_check_state state per check: 0 OK, 1 warning, 2 critical",
        "# TYPE softwalltime_check_state gauge",
    ]
    out += [f'softwalltime_check_state{{check="{c.name}"}} {c.state}' for c in checks]
    seen: set[str] = set()
    by_name: dict[str, list[Metric]] = {}
    for c in checks:
        for m in c.metrics:
            by_name.setdefault(m.name, []).append(m)
    for name, metrics in by_name.items():
        if name not in seen:
            out.append(f"# HELP {name} {metrics[0].help}")
            out.append(f"# TYPE {name} gauge")
            seen.add(name)
        for m in metrics:
            labels = ",".join(f'{k}="{_label_value(v)}"' for k, v in sorted(m.labels.items()))
            out.append(f"{name}{{{labels}}} {m.value:g}" if labels else f"{name} {m.value:g}")
    return "\n".join(out) + "\n"


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it over ``path``
    (node_exporter never reads a half-written file).

    :raises SoftwalltimeError: the directory cannot be written
    """
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".softwalltime-", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as err:
        raise SoftwalltimeError(f"cannot write {path}: {err.strerror}") from None
