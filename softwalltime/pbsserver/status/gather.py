"""What ``softwalltime status`` gathers: PBS's commands, pbs_server's Python, the server
logs, the accounting directory and the database (everything that does I/O), handed to
:mod:`.judge`; :func:`run_checks` runs every check in order."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ...core.config import Settings, redact_dsn
from ...core.locks import INGEST_LOCK_KEY
from ...core.registry import LEARNED
from ...errors import DatabaseError
from ...hook import pgwire
from .. import policy
from ..commands import Pbs, PbsError
from ..refresh import parse_qmgr_hook
from .judge import (
    ALWAYS,
    CRITICAL,
    OK,
    UNKNOWN,
    WARNING,
    Activity,
    Check,
    IngestState,
    Metric,
    _ago,
    embedded_python,
    judge_activity,
    judge_history,
    judge_hook,
    judge_hook_config,
    judge_ingester,
    judge_learned,
    parse_hook_log,
)

# What the hook imports, checked under the Python that pbs_server embeds.
HOOK_IMPORTS = "softwalltime.core.config, softwalltime.core.decide, softwalltime.hook.lookup"


# ----------------------------------------------------------------------------- the hook


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


def log_files(server_logs: Path, since: dt.datetime, now: dt.datetime) -> list[Path]:
    """The daily server logs (YYYYMMDD) covering ``since`` .. ``now``."""
    day, files = since.date(), []
    while day <= now.date():
        path = server_logs / day.strftime("%Y%m%d")
        if path.is_file():
            files.append(path)
        day += dt.timedelta(days=1)
    return files


# ------------------------------------------------------------------------- the ingester


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


# ------------------------------------------------------------ predictor learned's table


# Predictor learned (migration 0008): the age of the table the hook reads, and its size.
_LEARNED_SQL = (
    "SELECT extract(epoch FROM now() - updated_at)::float8, jobs, site_jobs FROM learned_state"
)


# -------------------------------------------------------------------------- all checks


@dataclass
class Options:
    hook: str = "softwalltime"
    since_s: float = 3600.0
    ingest_max_age_s: float = 3600.0
    now: Optional[dt.datetime] = None
    # The policy guard, given the database's DSN (the CLI passes the library's, which
    # replays the history; None: no guard)
    guard: Optional[Callable[[str], Check]] = None


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
    checks += policy_check(pbs, dsn)
    if opts.guard is not None:
        checks.append(opts.guard(dsn))
    return checks


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
