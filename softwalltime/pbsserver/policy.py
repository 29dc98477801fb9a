"""The scheduling policy, recorded (issue 48): read the live settings, change them, and keep
every change in the table ``policy_changes`` (migration 0009).

The settings (:data:`SETTINGS`, each a string as PBS shows it, or None when unset/absent):

- ``job_sort_formula`` and ``opt_backfill_fuzzy``: scheduler attributes (``qmgr -c "list
  sched"``; OpenPBS 23.06 keeps ``job_sort_formula`` on the scheduler, ``set sched``);
- ``backfill_depth`` and ``eligible_time_enable``: server attributes (``list server``);
- ``strict_ordering`` and ``fair_share``: lines of ``$PBS_HOME/sched_priv/sched_config``
  (value and prime option, e.g. ``True ALL``), which pbs_sched reads again on SIGHUP.

:func:`plan` lists what differs between two settings; :func:`commands` prints it as the
shell commands an admin would type; :func:`execute` does it. The records go through the
hook's database client (:mod:`softwalltime.hook.pgwire`), each statement its own
transaction, parameters always bound.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import signal
import stat
import tempfile
import time
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from ..errors import SoftwalltimeError
from ..hook import pgwire
from .commands import Pbs, parse_qmgr_list

SCHED_ATTRS = ("job_sort_formula", "opt_backfill_fuzzy")
SERVER_ATTRS = ("backfill_depth", "eligible_time_enable")
CONFIG_LINES = ("strict_ordering", "fair_share")
SETTINGS = SCHED_ATTRS + SERVER_ATTRS + CONFIG_LINES
OUTSIDE_BY = "qmgr (seen by status)"
SEARCH_MAX_BYTES = 64 * 1024  # the stored --from-search JSON, compact

Policy = Dict[str, Optional[str]]


class PolicyError(SoftwalltimeError):
    """The policy cannot be read, changed or recorded."""


class Record(NamedTuple):
    id: int
    changed_at: str
    changed_by: str
    action: str
    label: Optional[str]
    before: Optional[Policy]
    after: Policy
    commands: str


def sched_config_path(pbs: Pbs) -> str:
    return os.path.join(pbs.home, "sched_priv", "sched_config")


def config_value(text: str, key: str) -> Optional[str]:
    """The value of sched_config's (last) ``key:`` line, words joined by one space
    (``strict_ordering: false\tALL`` -> ``false ALL``); None when there is no such line."""
    found = None
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key and not line.lstrip().startswith("#"):
            found = " ".join(value.split())
    return found


def with_config_value(text: str, key: str, value: str) -> str:
    """sched_config ``text`` with its ``key:`` lines set to ``value`` (the prime option after
    a tab, as PBS's own file has it); appended when there is none."""
    word, _, rest = value.partition(" ")
    line = f"{key}: {word}" + (f"\t{rest}" if rest else "")
    lines = text.splitlines()
    hits = [i for i, ln in enumerate(lines) if config_value(ln, key) is not None]
    for i in hits:
        lines[i] = line
    if not hits:
        lines.append(line)
    return "\n".join(lines) + "\n"


def read_live(pbs: Pbs) -> Policy:
    """The live settings (see the module).

    :raises PbsError: qmgr failed
    :raises PolicyError: sched_config cannot be read
    """
    sched = parse_qmgr_list(pbs.check("qmgr", "-c", "list sched"))
    server = parse_qmgr_list(pbs.check("qmgr", "-c", "list server"))
    path = sched_config_path(pbs)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as err:
        raise PolicyError(f"cannot read {path}: {err.strerror}") from None
    out: Policy = {name: sched.get(name) for name in SCHED_ATTRS}
    out.update({name: server.get(name) for name in SERVER_ATTRS})
    out.update({name: config_value(text, name) for name in CONFIG_LINES})
    return out


def target_of(live: Policy, formula: str, backfill_depth: int) -> Policy:
    """``live`` with ``formula`` and ``backfill_depth``, strict ordering (the search's
    policies all have it) and, for a formula that reads ``eligible_time``, eligible time on."""
    if "'" in formula or "\n" in formula:
        raise PolicyError("a job_sort_formula with a quote or a newline cannot be set by qmgr")
    if backfill_depth < 0:
        raise PolicyError(f"backfill_depth must be 0 or more, not {backfill_depth}")
    out = dict(live)
    out.update(job_sort_formula=formula, backfill_depth=str(backfill_depth))
    out["strict_ordering"] = "True ALL"
    if re.search(r"\beligible_time\b", formula):
        out["eligible_time_enable"] = "True"
    return out


def plan(live: Policy, target: Policy) -> List[str]:
    """The names of the settings that differ, in :data:`SETTINGS` order."""
    return [name for name in SETTINGS if live.get(name) != target.get(name)]


def _qmgr_directive(name: str, value: Optional[str]) -> str:
    kind = "sched" if name in SCHED_ATTRS else "server"
    if value is None:
        return f"unset {kind} {name}"
    if name == "job_sort_formula":
        return f"set {kind} {name} = '{value}'"
    return f"set {kind} {name} = {value}"


def commands(pbs: Pbs, live: Policy, target: Policy) -> List[str]:
    """The changes from ``live`` to ``target`` as shell commands, one a line."""
    out = []
    names = plan(live, target)
    for name in names:
        if name in CONFIG_LINES:
            value = target[name]
            if value is None:
                continue  # a line that was absent stays as it is now
            word, _, rest = value.partition(" ")
            repl = f"{name}: {word}" + (f"\\t{rest}" if rest else "")
            out.append(f"sed -i 's/^{name}:.*/{repl}/' {sched_config_path(pbs)}")
        else:
            out.append(f'qmgr -c "{_qmgr_directive(name, target[name])}"')
    if any(n in CONFIG_LINES and target[n] is not None for n in names):
        lock = os.path.join(pbs.home, "sched_priv", "sched.lock")
        out.append(f"kill -HUP $(head -n 1 {lock})  # pbs_sched reads sched_config again")
    return out


def execute(pbs: Pbs, live: Policy, target: Policy) -> None:
    """Change the server from ``live`` to ``target``: qmgr for the attributes; sched_config
    rewritten in place (its mode kept) and pbs_sched told by SIGHUP.

    :raises PbsError: qmgr refused a change (those before it stay made)
    :raises PolicyError: sched_config or pbs_sched's pid cannot be read or written
    """
    names = plan(live, target)
    for name in names:
        if name not in CONFIG_LINES:
            pbs.check("qmgr", "-c", _qmgr_directive(name, target[name]))
    edits = [n for n in names if n in CONFIG_LINES and target[n] is not None]
    if not edits:
        return
    path = sched_config_path(pbs)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        for name in edits:
            text = with_config_value(text, name, str(target[name]))
        _replace(path, text)
        with open(os.path.join(pbs.home, "sched_priv", "sched.lock"), encoding="ascii") as fh:
            pid = int(fh.read().split()[0])
        os.kill(pid, signal.SIGHUP)
    except (OSError, ValueError, IndexError) as err:
        raise PolicyError(f"cannot change {path} or signal pbs_sched: {err}") from None


def _replace(path: str, text: str) -> None:
    """``path``'s content made ``text`` at once (a new file renamed over it, with its mode and
    owner): pbs_sched never reads half a sched_config, even if this process dies meanwhile."""
    st = os.stat(path)
    fd, tmp = tempfile.mkstemp(prefix=".sched_config.", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.chown(tmp, st.st_uid, st.st_gid)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def who() -> str:
    """The OS user running this, and SUDO_USER when set (``root (sudo: alice)``)."""
    try:
        name = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        name = f"uid {os.geteuid()}"
    sudo = os.environ.get("SUDO_USER")
    return f"{name} (sudo: {sudo})" if sudo else name


def capped_search(data: Any) -> Any:
    """What is stored of a ``simulate --search --json`` object: all of it when its compact
    JSON is at most :data:`SEARCH_MAX_BYTES`, else its recommendation, tolerances and goal
    (``"truncated": true``).

    :raises PolicyError: not a JSON object, or too large even so
    """
    if not isinstance(data, dict):
        raise PolicyError("--from-search: expected the JSON object simulate --search --json prints")
    if len(json.dumps(data, separators=(",", ":"))) <= SEARCH_MAX_BYTES:
        return data
    keep = {k: data.get(k) for k in ("recommended", "tolerances", "goal", "baseline")}
    keep["truncated"] = True
    if len(json.dumps(keep, separators=(",", ":"))) > SEARCH_MAX_BYTES:
        raise PolicyError(f"--from-search: the recommendation alone is over {SEARCH_MAX_BYTES} B")
    return keep


# ------------------------------------------------------------------------------ records

# LIMIT NULL: every row
_HISTORY_SQL = (
    "SELECT id, to_char(changed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC',"
    " changed_by, action, label, before::text, after::text, commands"
    " FROM policy_changes ORDER BY id DESC LIMIT $1"
)


def connect(dsn: str, app: str = "softwalltime-policy") -> pgwire.Connection:
    return pgwire.connect(dsn, time.monotonic() + 5.0, startup={"application_name": app})


def _record(row: Sequence[Any]) -> Record:
    before = None if row[5] is None else json.loads(row[5])
    return Record(
        int(row[0]), str(row[1]), str(row[2]), str(row[3]), row[4], before,
        json.loads(row[6]), str(row[7]),
    )  # fmt: skip


def history(conn: pgwire.Connection, limit: int = 0) -> List[Record]:
    """The records, newest first (``limit`` 0: all)."""
    return [_record(r) for r in conn.query(_HISTORY_SQL, (limit or None,))]


def record(
    conn: pgwire.Connection,
    action: str,
    by: str,
    change: tuple[Optional[Policy], Policy],
    label: Optional[str] = None,
    run: Sequence[str] = (),
    search: Any = None,
) -> int:
    """Store one change (``change``: the settings before, None when first seen, and after);
    its id."""
    before, after = change
    rows = conn.query(
        "INSERT INTO policy_changes (changed_by, action, label, before, after, commands, search)"
        " VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6, $7::jsonb) RETURNING id",
        (
            by,
            action,
            label,
            None if before is None else json.dumps(before),
            json.dumps(after),
            "\n".join(run),
            None if search is None else json.dumps(search),
        ),
    )
    return int(rows[0][0])


def observe(conn: pgwire.Connection, live: Policy) -> Optional[Record]:
    """Record ``live`` as an outside change when it is not what the newest record says (or
    nothing is recorded yet); the new record, or None when it matched."""
    newest = history(conn, 1)
    before = newest[0].after if newest else None
    if before == live:
        return None
    rid = record(conn, "outside", OUTSIDE_BY, (before, live))
    return history(conn, 1)[0] if rid else None


def previous_policy(records: Sequence[Record]) -> Optional[Policy]:
    """What ``policy revert`` goes back to (``records`` newest first): the settings of the
    record before the newest, else the newest's settings before it; None when there is
    nothing to go back to."""
    if len(records) >= 2:
        return records[1].after
    if records and records[0].before is not None:
        return records[0].before
    return None


def describe(before: Optional[Policy], after: Policy) -> str:
    """What changed, one phrase: ``backfill_depth 1 -> 3, strict_ordering ...``."""
    if before is None:
        return "first seen: " + ", ".join(f"{k} {after.get(k)}" for k in SETTINGS)
    return ", ".join(f"{k} {before.get(k)} -> {after.get(k)}" for k in plan(before, after))
