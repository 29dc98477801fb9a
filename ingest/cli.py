"""``softwalltime ingest``: the subcommand (registered through the ``softwalltime.commands``
entry point) and the option set shared with the ``softwalltime-ingest`` console script."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Optional

from softwalltime.accounting import RECORD_TYPES
from softwalltime.cli.argtypes import whole_number
from softwalltime.core.config import Settings, require_dsn
from softwalltime.db.keepalive import with_keepalives
from softwalltime.errors import ConfigError, SoftwalltimeError

from .files import default_directory
from .run import DEFAULT_BATCH_SIZE, Options, Summary, run

DESCRIPTION = (
    "Store finished PBS jobs from accounting logs in the history tables. Reads only new "
    "complete lines (a checkpoint per file, committed with the rows), so it can run from "
    "cron every few minutes; a second concurrent run exits 0 without doing anything. "
    "Examples: softwalltime ingest    (the accounting directory) | "
    "softwalltime ingest --server pbs01 /archive/2024*.gz    (backfill archives)"
)


# --json: its keys, for --help and the test that parses them.
JSON_KEYS = (
    ("locked_out", "true: another ingest held the lock, nothing was done"),
    ("lock_holder", "{backend_pid, application_name, client, since, held_s} or null"),
    ("files", "{state: count} of the files looked at"),
    ("bytes_read", "bytes"),
    ("seconds", "time taken"),
    ("records", "{read, stored, skipped, malformed} over all record types"),
    ("record_types", "{type: {meaning, read, stored, skipped, malformed}}"),
    ("malformed_lines", "lines that are no accounting record or hold impossible values"),
    ("impossible", "{rule: records refused as impossible}"),
    ("ignored_lines", "blank or comment lines"),
    ("ignored_files", "files in the directory not named YYYYMMDD[.gz]"),
    ("failed", "[one line per file that could not be read]"),
    ("notes", "[other lines of the text summary]"),
)

# A PBS server name is a host name: nothing that COPY's text format would have to escape.
_SERVER_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


def _server_name(name: Optional[str]) -> Optional[str]:
    if name is not None and _SERVER_NAME_RE.match(name) is None:
        raise ConfigError(f"server name {name!r}: expected a host name ([A-Za-z0-9._-])")
    return name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ingest options, for both front ends."""
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="accounting files, plain or .gz (default: every YYYYMMDD[.gz] file in --dir)",
    )
    parser.add_argument(
        "--dir",
        metavar="DIR",
        help="accounting directory (default: accounting_dir setting, else "
        "$PBS_HOME/server_priv/accounting with PBS_HOME from the environment or /etc/pbs.conf)",
    )
    parser.add_argument(
        "--server",
        metavar="NAME",
        help="PBS server of the logs (default: setting server, else each job id's suffix)",
    )
    parser.add_argument(
        "--batch-size",
        type=whole_number(1),
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help="stored records per transaction (default: %(default)s)",
    )
    parser.add_argument(
        "--workers",
        type=whole_number(0),
        default=0,
        metavar="N",
        help="parse in N processes when there is much to read (default 0: in this one)",
    )
    parser.add_argument(
        "--print-cron",
        action="store_true",
        help="print /etc/cron.d/softwalltime-ingest for this installation (by its absolute"
        " path) and exit",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show bytes and records per second on stderr (default: only on a terminal)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the summary as one JSON object instead of the table: "
        + ", ".join(f"{k} ({v})" for k, v in JSON_KEYS),
    )


CRON_FILE = Path(__file__).with_name("softwalltime-ingest.cron")
_CRON_LINE = "*/5 * * * * root softwalltime-ingest --quiet"


def ingest_command() -> str:
    """Absolute path of this installation's ``softwalltime-ingest``."""
    beside = Path(sys.executable).with_name("softwalltime-ingest")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("softwalltime-ingest")
    if found:
        return os.path.abspath(found)
    raise SoftwalltimeError(
        f"softwalltime-ingest not found beside {sys.executable} nor on PATH; reinstall"
        " softwalltime (pip install .)"
    )


def cron_file(config: Optional[str] = None) -> str:
    """The shipped cron file with this installation's absolute command (and --config)."""
    text = CRON_FILE.read_text(encoding="utf-8")
    command = shlex.quote(ingest_command())
    if config:
        command += " --config " + shlex.quote(os.path.abspath(config))
    if _CRON_LINE not in text:
        raise SoftwalltimeError(f"{CRON_FILE}: its cron line is not the expected one")
    return text.replace(_CRON_LINE, _CRON_LINE.replace("softwalltime-ingest", command, 1))


def register(subparsers: Any) -> None:
    """Add ``ingest`` to the ``softwalltime`` command line."""
    parser = subparsers.add_parser(
        "ingest", help="load PBS accounting logs into the job history", description=DESCRIPTION
    )
    add_arguments(parser)
    parser.set_defaults(func=handle)


def _counts(read: int, stored: int, malformed: int) -> Dict[str, int]:
    return {
        "read": read,
        "stored": stored,
        "skipped": read - stored - malformed,
        "malformed": malformed,
    }


def summary_json(summary: Summary) -> Dict[str, Any]:
    """``ingest --json``: the run's summary with the keys of :data:`JSON_KEYS`."""
    holder = summary.lock_holder
    totals = [sum(c[i] for c in summary.counts.values()) for i in range(3)]
    found: Dict[str, Any] = {
        "locked_out": summary.locked_out,
        "lock_holder": None
        if holder is None
        else {
            "backend_pid": holder.backend_pid,
            "application_name": holder.application_name,
            "client": holder.client,
            "since": holder.since.isoformat() if holder.since is not None else None,
            "held_s": round(holder.held_s, 3),
        },
        "files": dict(sorted(summary.file_states.items())),
        "bytes_read": summary.bytes_read,
        "seconds": round(summary.seconds, 3),
        "records": _counts(*totals),
        "record_types": {
            rtype: {"meaning": RECORD_TYPES.get(rtype, "unrecognisable line"), **_counts(*c)}
            for rtype, c in sorted(summary.counts.items())
        },
        "malformed_lines": summary.malformed,
        "impossible": dict(sorted(summary.impossible.items())),
        "ignored_lines": summary.ignored_lines,
        "ignored_files": summary.ignored_files,
        "failed": list(summary.failed),
        "notes": list(summary.notes),
    }
    return {k: found[k] for k, _ in JSON_KEYS}


def options(args: argparse.Namespace, settings: Settings) -> Options:
    """The run's options from the command line and the settings. The DSN gets TCP
    keepalives (softwalltime.db.keepalive): a dead database server or network ends the
    run within minutes instead of holding the ingest lock for hours.

    :raises ConfigError: no DSN, or a server name that is no host name
    :raises FileError: PBS_CONF_FILE names a file that cannot be read
    """
    directory = args.dir or settings.accounting_dir
    if not directory and not args.files:  # files named: no directory is read
        directory = default_directory(os.environ)
    return Options(
        dsn=with_keepalives(require_dsn(settings)),
        paths=tuple(args.files),
        directory=directory or "",
        server=_server_name(args.server or settings.server),
        batch_size=args.batch_size,
        progress=sys.stderr.isatty() if args.progress is None else args.progress,
        workers=args.workers,
    )


def handle(args: argparse.Namespace, settings: Settings) -> int:
    """Run one ingest and print its summary.

    :returns: 0 when done (also when another ingester holds the lock), 1 when some files
        could not be read (the others were ingested)
    :raises DatabaseError: the database cannot be used
    :raises FileError: the accounting directory cannot be listed
    """
    if args.print_cron:
        print(cron_file(args.config), end="")
        return 0
    summary = run(options(args, settings))
    text = json.dumps(summary_json(summary), indent=2) if args.json else summary.render()
    print(text, flush=True)
    holder = summary.lock_holder
    if holder is not None and holder.held_s > settings.ingest_lock_stale_s:
        # cron must hear of it: a run that cannot do anything because something is stuck
        print(
            f"softwalltime ingest: the ingest lock has been held for {holder.held_s:.0f} s, more"
            f" than ingest_lock_stale_s ({settings.ingest_lock_stale_s} s): the holder looks"
            f" stuck ({holder.describe()}); stop it, or end its session with"
            f" pg_terminate_backend({holder.backend_pid})",
            file=sys.stderr,
        )
        return 1
    if summary.failed:
        print(
            f"softwalltime ingest: {len(summary.failed)} file(s) could not be read (see above)",
            file=sys.stderr,
        )
        return 1
    return 0
