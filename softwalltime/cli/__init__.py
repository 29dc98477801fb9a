"""The ``softwalltime`` command: a thin argparse front end over the library.

Each command group lives in its own module with ``register(subparsers)``; every parser
it adds sets ``func=handler`` where ``handler(args, settings) -> int``. Commands from
other packages (the ingester) arrive through the ``softwalltime.commands`` entry-point
group, so this package never imports them by name.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import logging
import os
import sys
from importlib import metadata
from typing import Any, Callable

from .. import __version__
from ..core.config import Settings, load_settings, redact_dsn, require_dsn
from ..errors import SoftwalltimeError
from . import logs

log = logging.getLogger(__name__)

# Command modules of this package, in the order they appear in --help.
_COMMAND_MODULES = (
    "softwalltime.cli",
    "softwalltime.cli.predict",
    "softwalltime.cli.hooks",
    "softwalltime.cli.evaluate",
    "softwalltime.cli.wait",
    "softwalltime.cli.calibrate",
    "softwalltime.cli.simulate",
    "softwalltime.cli.refresh",
    "softwalltime.cli.status",
    "softwalltime.cli.policy",
    "softwalltime.cli.site",
    "softwalltime.cli.report",
)
_ENTRY_POINT_GROUP = "softwalltime.commands"

Handler = Callable[[argparse.Namespace, Settings], int]


def _add_db_commands(sub: Any) -> None:
    db = sub.add_parser(
        "db",
        help="create, upgrade or inspect the PostgreSQL schema (alembic)",
        description="Manage the history schema with the alembic migrations of this version.",
    )
    dbsub = db.add_subparsers(title="db commands", metavar="COMMAND", dest="db_command")
    db.set_defaults(func=lambda args, settings: _usage(db))

    up = dbsub.add_parser(
        "upgrade",
        help="upgrade the schema (default: to the newest revision)",
        description="Upgrade the schema, e.g. softwalltime --dsn postgresql://db/pbs db upgrade",
    )
    up.add_argument("revision", nargs="?", default="head", help="target revision (default: head)")
    _json_option(up, DB_MIGRATE_KEYS)
    up.set_defaults(func=_db_migrate, migrate="upgrade")

    down = dbsub.add_parser(
        "downgrade",
        help="downgrade the schema to REV ('base' removes every table)",
        description="Downgrade the schema. Example: softwalltime db downgrade base",
    )
    down.add_argument("revision", help="target revision, or 'base'")
    down.add_argument(
        "--yes",
        action="store_true",
        help="go ahead although the history tables hold rows (a downgrade drops tables)",
    )
    _json_option(down, DB_MIGRATE_KEYS)
    down.set_defaults(func=_db_migrate, migrate="downgrade")

    cur = dbsub.add_parser(
        "current",
        help="print the database's revision and the newest one (exit 1 unless up to date)",
        description=(
            "Compare the database's schema revision with the newest one of this version. "
            "Exit 0: up to date; 1: behind (run 'softwalltime db upgrade') or newer than this "
            "version knows. --json prints one object: "
            + ", ".join(f"{k} ({v})" for k, v in DB_CURRENT_KEYS)
            + ". Example: softwalltime db current --json"
        ),
    )
    cur.add_argument("--json", action="store_true", help="print JSON instead of text")
    cur.set_defaults(func=_db_current)

    from .dbcheck import add_check_command

    add_check_command(dbsub)

    from .dbgrant import add_grant_command

    add_grant_command(dbsub)

    from .dbprune import add_prune_command

    add_prune_command(dbsub)


def _add_config_commands(sub: Any) -> None:
    cfg = sub.add_parser(
        "config",
        help="show the effective configuration and where each part came from",
        description=(
            "Print settings after defaults < file < environment < flags (no password). "
            "--json prints one object: source (where the settings came from, in order, as one "
            "line) and "
            "settings, each key an object with value (JSON-typed; null when unset; dsn "
            "without its password), origin ('default', the file, the variable or the option) "
            "and, for an unset key, when_unset (what the tools use instead). "
            "Example: softwalltime config --json"
        ),
    )
    cfg.add_argument("--json", action="store_true", help="print JSON instead of text")
    cfg.set_defaults(func=_config_show)


def register(sub: Any) -> None:
    """Commands of the core package: db, config."""
    _add_db_commands(sub)
    _add_config_commands(sub)


def _json_option(parser: argparse.ArgumentParser, keys: tuple[tuple[str, str], ...]) -> None:
    """``--json``, its help listing ``keys`` (key and meaning) as every command's does."""
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object instead of text: " + ", ".join(f"{k} ({v})" for k, v in keys),
    )


# db upgrade/downgrade --json: its keys, for --help and the test that parses them.
DB_MIGRATE_KEYS = (
    ("database", "user@host:port/dbname, no password"),
    ("command", "upgrade or downgrade"),
    ("previous", "the revision before, null when empty"),
    ("revision", "the revision now, null when empty"),
    ("head", "the newest revision of this version"),
)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _engine(settings: Settings) -> Any:
    from ..db.engine import make_engine

    return make_engine(require_dsn(settings))


def _db_migrate(args: argparse.Namespace, settings: Settings) -> int:
    """``db upgrade`` and ``db downgrade``: args.migrate is db.upgrade or db.downgrade.

    A downgrade runs in one transaction and is rolled back, unless ``--yes`` (or a
    confirmation on a terminal), when it dropped a table that held rows: only then, so a
    downgrade that removes a trigger or a view never asks.
    """
    from ..db import engine as db

    dsn = require_dsn(settings)
    with db.connect(_engine(settings), dsn) as conn:
        before = db.table_rows(conn) if args.migrate == "downgrade" else {}
        previous = db.current_revision(conn)
        getattr(db, args.migrate)(conn, args.revision)
        lost = db.dropped_rows(conn, before)
        if lost and not args.yes:
            held = ", ".join(f"{n} rows in {table}" for table, n in lost.items())
            if not _confirmed(f"downgrade to {args.revision} drops {held}"):
                conn.rollback()
                raise SoftwalltimeError(
                    f"db downgrade {args.revision} drops tables and the rows they hold ({held});"
                    " nothing done: pass --yes to go ahead"
                )
        conn.commit()
        now = db.current_revision(conn)
    if args.json:
        found = (db.dsn_target(dsn), args.migrate, previous, now, db.head_revision())
        print(json.dumps(dict(zip((k for k, _ in DB_MIGRATE_KEYS), found)), indent=2))
    else:
        print(f"database {db.dsn_target(dsn)} is at revision {now or 'base'}")
    return 0


def _confirmed(what: str) -> bool:
    """Ask on a terminal; never when stdin is not one (cron, scripts): then it is 'no'."""
    if not sys.stdin.isatty():
        return False
    answer = input(f"{what}: type 'yes' to go ahead: ")
    return answer.strip() == "yes"


# db current --json: its keys, for --help and the test that parses them.
DB_CURRENT_KEYS = (
    ("database", "user@host:port/dbname, no password"),
    ("current", "the database's revision, null when empty"),
    ("head", "the newest revision of this version"),
    ("state", "up_to_date, behind or newer"),
    ("exit_code", "0 when up_to_date, else 1"),
)


def _db_current(args: argparse.Namespace, settings: Settings) -> int:
    """Where the database is against this version's newest revision: exit 0 only when
    they are the same (a script or a package's postinst can test it)."""
    from ..db import engine as db

    dsn = require_dsn(settings)
    with db.connect(_engine(settings), dsn) as conn:
        current = db.current_revision(conn)
    head = db.head_revision()
    if current == head:
        state, text, code = "up_to_date", "up to date", 0
    elif current is not None and current not in db.known_revisions():
        state, code = "newer", 1
        text = f"revision {current} is newer than this version of softwalltime knows"
    else:
        state, text, code = "behind", "behind: run 'softwalltime db upgrade'", 1
    if args.json:
        found = (db.dsn_target(dsn), current, head, state, code)
        print(json.dumps(dict(zip((k for k, _ in DB_CURRENT_KEYS), found)), indent=2))
    else:
        print(f"current: {current or 'base (empty)'}\nhead:    {head}\n{text}")
    return code


# How a setting left unset reads (what the tools then use).
_UNSET = {
    "dsn": "(none)",
    "accounting_dir": "$PBS_HOME/server_priv/accounting",
    "server": "(each job id's suffix)",
}


def _pbs_exec_unset() -> str:
    """What the PBS commands use when ``pbs_exec`` is not set: /etc/pbs.conf's PBS_EXEC."""
    from ..pbsserver.commands import DEFAULT_PBS_EXEC, PBS_CONF, read_pbs_conf

    found = read_pbs_conf().get("PBS_EXEC")
    if found:
        return f"{found} (PBS_EXEC of {PBS_CONF})"
    return f"{DEFAULT_PBS_EXEC} (no PBS_EXEC in {PBS_CONF})"


def _shown(key: str, value: Any) -> str:
    if value is None and key == "pbs_exec":
        return _pbs_exec_unset()
    if value is None:
        return _UNSET.get(key, "(none)")
    if key == "dsn":
        return redact_dsn(value)
    if isinstance(value, (tuple, list, bool)):
        return json.dumps(list(value) if isinstance(value, tuple) else value)
    return str(value)


def _json_value(key: str, value: Any) -> Any:
    """A setting as JSON: lists for tuples, the DSN without its password."""
    if key == "dsn" and value is not None:
        return redact_dsn(value)
    return list(value) if isinstance(value, tuple) else value


def config_as_json(settings: Settings) -> dict[str, Any]:
    """``config --json``: where the settings came from, and each one's value and origin."""
    entries: dict[str, Any] = {}
    for key, origin in settings.origins:
        value = getattr(settings, key)
        entry = {"value": _json_value(key, value), "origin": origin}
        if value is None:
            entry["when_unset"] = _shown(key, None)
        entries[key] = entry
    return {"source": settings.source, "settings": entries}


def _config_show(args: argparse.Namespace, settings: Settings) -> int:
    """One line per setting: key, effective value (passwords as ***), where it came from."""
    if args.json:
        print(json.dumps(config_as_json(settings), indent=2))
        return 0
    for key, origin in settings.origins:
        print(f"{key:<26} {_shown(key, getattr(settings, key)):<34} {origin}")
    return 0


def _command_registrars() -> list[Callable[[Any], None]]:
    registrars = [importlib.import_module(name).register for name in _COMMAND_MODULES]
    eps: Any = metadata.entry_points()
    group = (
        eps.select(group=_ENTRY_POINT_GROUP)
        if hasattr(eps, "select")
        else eps.get(_ENTRY_POINT_GROUP, [])  # Python 3.9
    )
    for ep in sorted(group, key=lambda e: e.name):
        try:
            registrars.append(ep.load())
        except Exception as err:  # noqa: BLE001 -- a broken plugin must not take the other commands down
            log.warning("command %r unavailable: %s: %s", ep.name, type(err).__name__, err)
    return registrars


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="softwalltime",
        description=(
            "Predict PBS soft walltimes from each user's job history. "
            "The database is given by --dsn, SOFTWALLTIME_DSN, or the 'dsn' key of the JSON "
            "config file (--config, SOFTWALLTIME_CONFIG, /etc/softwalltime.json); "
            "precedence: defaults < file < environment < flags. The options below may also"
            " follow the command (softwalltime db current --dsn DSN)."
        ),
    )
    add_global_options(parser)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", dest="command")
    for registrar in _command_registrars():
        registrar(sub)
    share_global_options(parser)
    return parser


# The global options: flags and argparse keywords. Accepted before the command and after it
# (``softwalltime db current --dsn X``): :func:`share_global_options` adds them to every
# command's parser too, with no default, so a value given before the command stays.
_GLOBAL_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (
        ("--dsn",),
        {
            "help": "PostgreSQL libpq DSN or SQLAlchemy URL (SOFTWALLTIME_DSN). A password given"
            " here is visible to every local user in ps: put it in SOFTWALLTIME_DSN, the config"
            " file (mode 600) or ~/.pgpass / PGPASSFILE instead",
        },
    ),
    (("--config",), {"metavar": "FILE", "help": "JSON config file (SOFTWALLTIME_CONFIG)"}),
    (
        ("--quiet",),
        {
            "action": "store_true",
            "help": "errors only: no warnings, and no summary on standard output (what a"
            " --json, '--out -' or '--prometheus -' asks for is still printed): for cron",
        },
    ),
    (
        ("--verbose",),
        {"action": "store_true", "help": "informational lines too (default: warnings and errors)"},
    ),
    (("--debug",), {"action": "store_true", "help": "debug logging; tracebacks on errors"}),
)


def add_global_options(parser: argparse.ArgumentParser) -> None:
    """``--version``, ``--dsn``, ``--config``, ``--quiet``, ``--verbose``, ``--debug``:
    shared by every entry point."""
    parser.add_argument("--version", action="version", version=f"softwalltime {__version__}")
    for flags, kwargs in _GLOBAL_OPTIONS:
        parser.add_argument(*flags, **kwargs)


def share_global_options(parser: argparse.ArgumentParser) -> None:
    """Let every command under ``parser`` take the global options after its name too.

    Each is added without a default (``SUPPRESS``), so it sets its value only when given
    there, and without help (the top-level ``--help`` lists them once); a command's own
    option of the same name (``refresh --verbose``) stays its own.
    """
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        seen: set[int] = set()
        for child in action.choices.values():
            if id(child) in seen:
                continue
            seen.add(id(child))
            for flags, kwargs in _GLOBAL_OPTIONS:
                if not any(f in child._option_string_actions for f in flags):
                    hidden = {"default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
                    child.add_argument(*flags, **{**kwargs, **hidden})
            share_global_options(child)


def run(
    build: Callable[[], argparse.ArgumentParser],
    argv: list[str] | None,
    prog: str,
    nagios_usage: bool = False,
) -> int:
    """Parse ``argv`` with the parser ``build`` makes, load settings, call the handler.

    The one place that turns expected failures into ``PROG: error: ...`` and an exit code
    (a traceback only with ``--debug``); every console script goes through it.

    :param nagios_usage: the parser has ``status``: its usage errors with ``--nagios`` are
        UNKNOWN (exit 3), not argparse's exit 2
    """
    argv = sys.argv[1:] if argv is None else argv
    # Logging first, so a plugin that fails to load while building the parser is reported;
    # its level from the words given, until the parsed options say it exactly.
    lines = logs.setup(prog, logs.level_of(set(argv)))
    try:  # building the parser imports every command module: Ctrl-C may land there
        parser = build()
        args = _parse(parser, argv) if nagios_usage else parser.parse_args(argv)
    except KeyboardInterrupt:
        lines.say(logging.ERROR, "interrupted")
        return 130
    except _UsageAnswered as usage:
        return usage.code
    flags = {f"--{k}" for k in ("quiet", "verbose", "debug") if getattr(args, k, False)}
    lines.reset(logs.level_of(flags), logs.identifier(prog, args))
    if not args.debug:
        # alembic and SQLAlchemy narrate every step at INFO; admins want our lines only.
        logging.getLogger("alembic").setLevel(logging.WARNING)
    func: Handler | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        rank = getattr(args, "rank", None)  # hooks install --rank RANK (True: --rank alone)
        overrides = {"dsn": args.dsn, "rank": rank if isinstance(rank, str) else None}
        # wait JOBID answers an ordinary user without the config file that holds the password
        without_file = getattr(args, "config_optional", False)
        settings = load_settings(args.config, overrides=overrides, skip_unreadable=without_file)
        with logs.quieted(args):
            code = func(args, settings)
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at exit
        return code
    except SoftwalltimeError as err:
        if args.debug:
            raise
        # a command may answer its own errors (status --nagios: one UNKNOWN line, exit 3)
        on_error: Callable[[argparse.Namespace, str], int | None] | None = getattr(
            args, "on_error", None
        )
        answered = on_error(args, str(err)) if on_error else None
        if answered is not None:
            return answered
        lines.say(logging.ERROR, f"error: {err}")
        return 1
    except KeyboardInterrupt:
        lines.say(logging.ERROR, "interrupted")
        return 130
    except BrokenPipeError:
        # `softwalltime evaluate ... | head`: the reader left; say nothing more. Point stdout
        # at /dev/null so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports it


class _UsageAnswered(Exception):
    """A usage error a command answered in its own form (status --nagios: exit 3)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args(argv)``; a usage error of ``status --nagios`` is one UNKNOWN line
    on stdout and exit 3, as Nagios plugins answer (argparse would exit 2: CRITICAL)."""
    from .status import nagios_requested, nagios_unknown

    if not nagios_requested(argv):
        return parser.parse_args(argv)
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return parser.parse_args(argv)
    except SystemExit as stop:
        if stop.code != 2:  # --help, --version: not an error
            sys.stderr.write(said.getvalue())
            raise
        lines = [line for line in said.getvalue().splitlines() if line.strip()]
        raise _UsageAnswered(nagios_unknown(lines[-1] if lines else "usage error")) from None


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``softwalltime`` console script."""
    return run(build_parser, argv, "softwalltime", nagios_usage=True)


if __name__ == "__main__":
    sys.exit(main())
