"""``softwalltime hooks install|uninstall``: the qmgr sequence for the PBS server hook.

The hook script ships inside the package: ``pyproject.toml`` maps the package
``softwalltime.hookfiles`` to the repository's ``hooks/`` folder, so a regular
``pip install .`` puts ``hooks/softwalltime_hook.py`` at
``<site-packages>/softwalltime/hookfiles/softwalltime_hook.py``. An editable install or a
source checkout has no such folder; the script is then found at ``<repo>/hooks/``. The file
is only read and handed to qmgr, never imported by this package.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import softwalltime

from ..core import dsn as dsnlib
from ..core.config import (
    RANK_OFF,
    RANKS,
    STATEMENT_GRACE_S,
    Settings,
    hook_bound_s,
    redact_dsn,
    require_dsn,
)
from ..core.decide import MARK_RESOURCE
from ..core.rank import DEFAULT as RANK_NAME
from ..core.rank import RANK_RESOURCE
from ..errors import SoftwalltimeError
from ..pbsserver import publish as publish_lib
from ..pbsserver import refresh as refresh_lib
from ..pbsserver.commands import DEFAULT_PBS_EXEC, parse_qmgr_list, read_pbs_conf
from .dbgrant import HOOK_ROLE, INGEST_ROLE, PRUNE_ROLE

HOOK_FILE = "softwalltime_hook.py"
# The packages' system user: made a PBS operator by install (refresh's qalter and qstat as
# that user), removed from the operators by uninstall; nothing when no such user exists.
SERVICE_USER = refresh_lib.SERVICE_USER
# queuejob: first prediction; runjob: refreshed with the final walltime; modifyjob: a
# qalter of the walltime gets a prediction for the new walltime in the same request.
HOOK_EVENTS = "queuejob,runjob,modifyjob"
# Settings the hook reads (a test checks every ``settings.X`` of the hook path is here); the
# rest (accounting_dir, refresh_*, status_*, ...) are for other tools.
HOOK_KEYS = (
    "dsn",
    "predictor",
    "v1_jobs",
    "v3_jobs",
    "reserve_s",
    "long_walltime_threshold_s",
    "long_walltime_factor",
    "runjob_min_wait_s",
    "override_existing",
    "dry_run",
    "connect_timeout_s",
    "statement_timeout_ms",
    "users_allow",
    "users_deny",
    "queues_allow",
    "queues_deny",
    "sys_path",
    "debug",
    "history_scope",
    "server",
    "history_cache_entries",
    "history_recheck_ms",
    "rank",
)
# The hook's mark (the soft walltime it set): a long that only managers and hooks may set
# (flag r: users see it in qstat -f, cannot request or alter it; checked on OpenPBS 23.06).
MARK_DIRECTIVE = f"create resource {MARK_RESOURCE} type=long, flag=r"
RANKS_ON = tuple(r for r in RANKS if r != RANK_OFF)  # what --rank RANK may name
# The sort rank (setting rank, --rank): a long for job_sort_formula, flag r as the mark, so
# a user can neither request a rank (qsub -l) nor alter one (qalter -l) to sort a job first
# (both refused with "Cannot set attribute, read only or insufficient permission" on
# OpenPBS 23.06; a manager's qalter and a hook may set it). Jobs without it read 0 in the
# formula (the scheduler puts every numeric resource in the formula's names, unset ones 0).
RANK_DIRECTIVE = f"create resource {RANK_RESOURCE} type=long, flag=r"
# Every resource the product creates: the hook's mark, the sort rank (hooks install --rank)
# and the predicted start (wait --publish). uninstall deletes them in this order.
RESOURCES = (MARK_RESOURCE, RANK_RESOURCE, publish_lib.RESOURCE)
_OURS_RE = re.compile(r"\b(" + "|".join(RESOURCES) + r")\b")
# The database's roles db grant creates (cluster-wide: DROP DATABASE leaves them) and the
# database's name when no DSN names one (install.md's).
DB_ROLES = (HOOK_ROLE, INGEST_ROLE, PRUNE_ROLE)
DEFAULT_DATABASE = "softwalltime"
# qmgr object names: letters, digits, '_' and '-' (hook names are file names in
# server_priv/hooks, NAME.PY / NAME.CF / NAME.HK).
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,62}$")


def hook_script() -> Path:
    """Locate the hook script of this installation.

    :raises SoftwalltimeError: neither the packaged copy nor the checkout's file exists
    """
    package = Path(softwalltime.__file__).resolve().parent
    for candidate in (package / "hookfiles" / HOOK_FILE, package.parent / "hooks" / HOOK_FILE):
        if candidate.is_file():
            return candidate
    raise SoftwalltimeError(
        f"hook script {HOOK_FILE} not found under {package}/hookfiles or {package.parent}/hooks;"
        " reinstall softwalltime (pip install .)"
    )


def import_roots() -> list[str]:
    """The directory that makes ``softwalltime`` importable (for sys_path).

    The hook path is pure Python and standard library only, so nothing else is needed
    and nothing must match the Python that pbs_server embeds.
    """
    return [str(Path(str(softwalltime.__file__)).resolve().parent.parent)]


def hook_config(settings: Settings, rank: bool = False) -> dict[str, Any]:
    """The JSON hook configuration: current settings plus this installation's sys_path.

    :param rank: set the rank on (``--rank``): the settings' rank if it is on (``--rank
        RANK`` is an override of the setting, as ``--dsn`` is), else ``"key-mean-paid"``
        (:data:`~softwalltime.core.rank.DEFAULT`: the rank that resists gaming, issue 52)
    :raises ConfigError: no DSN configured (the hook could not do anything)
    """
    require_dsn(settings)
    values = settings._asdict()
    if rank and values["rank"] == RANK_OFF:
        values["rank"] = RANK_NAME
    config: dict[str, Any] = {key: values[key] for key in HOOK_KEYS}
    sys_path = list(settings.sys_path)
    sys_path += [p for p in import_roots() if p not in sys_path]
    config["sys_path"] = sys_path
    for key in ("users_allow", "users_deny", "queues_allow", "queues_deny"):
        config[key] = list(config[key])
    return config


def _check_path(path: Path, what: str) -> str:
    text = str(path)
    # qmgr splits its command line on white space and has no escape for it.
    if re.search(r"[\s'\"]", text):
        raise SoftwalltimeError(f"{what} path {text!r} contains spaces or quotes; qmgr cannot")
    return text


def install_commands(name: str, order: int, alarm: int, script: str, config: str) -> list[str]:
    """qmgr directives that create and configure the hook (stock OpenPBS 23.06).

    The first two (create, disable) are skipped when the hook already exists.
    """
    return [
        f"create hook {name}",
        # a new hook is enabled at once: keep it off until its script and config are in
        f"set hook {name} enabled = false",
        f"set hook {name} user = pbsadmin",
        f'set hook {name} event = "{HOOK_EVENTS}"',
        f"set hook {name} order = {order}",
        f"set hook {name} alarm = {alarm}",
        f"import hook {name} application/x-python default {script}",
        f"import hook {name} application/x-config default {config}",
        f"set hook {name} enabled = true",
    ]


def register(sub: Any) -> None:
    """Add the ``hooks`` command group."""
    hooks = sub.add_parser(
        "hooks",
        help="install or remove the PBS server hook (qmgr)",
        description="Install or remove the softwalltime server hook with qmgr.",
    )
    hsub = hooks.add_subparsers(title="hooks commands", metavar="COMMAND", dest="hooks_command")
    hooks.set_defaults(func=lambda args, settings: _usage(hooks))

    inst = hsub.add_parser(
        "install",
        help="create the hook and import its script and JSON config",
        description=(
            f"Create the hook (events {HOOK_EVENTS}), set order and alarm, import the hook "
            "script and a JSON config generated from the current settings, including the "
            "sys_path that makes softwalltime importable from this installation (the hook "
            "path is pure Python: any Python 3.6+ that pbs_server embeds can run it). "
            "Run as root on the PBS server host. "
            "Example: softwalltime --config /etc/softwalltime.json hooks install --dry-run"
        ),
    )
    inst.add_argument("--dry-run", action="store_true", help="print the commands, change nothing")
    _common(inst)
    inst.add_argument("--order", type=int, default=1, help="hook order, 1-1000 (default: 1)")
    inst.add_argument(
        "--alarm", type=int, default=30, help="hook alarm in seconds (default: 30, PBS's)"
    )
    inst.add_argument(
        "--rank",
        nargs="?",
        const=True,
        choices=RANKS_ON,
        metavar="RANK",
        help=f"also publish the sort rank: create resource {RANK_RESOURCE} (type long, flag r)"
        " and write rank RANK in the hook config (for job_sort_formula): "
        f"{', '.join(RANKS_ON)}; without RANK the setting rank if it is on, else {RANK_NAME}"
        " (a rank in the settings does the same without --rank; learned and learned-paid"
        " need predictor learned)",
    )
    _json_option(inst, INSTALL_KEYS)
    inst.add_argument(
        "--operator",
        default=SERVICE_USER,
        metavar="USER",
        help=f"make USER@this-host a PBS operator, for refresh's timer (default: {SERVICE_USER},"
        " the packages' user, when it exists; '' for none)",
    )
    inst.set_defaults(func=install)

    _add_uninstall(hsub)


def _add_uninstall(hsub: Any) -> None:
    """Add ``hooks uninstall``."""
    uninst = hsub.add_parser(
        "uninstall",
        help="delete the hook, its resources and operator, a sort formula that reads them",
        description=(
            "Delete the hook; unset a job_sort_formula that names "
            f"{', '.join(RESOURCES)} (printing what it was); take refresh's user out of the"
            " operators; delete those resources (each kept while a job, or a finished job in"
            " the history, has it, with the command to run later). Uses pbs_command_prefix"
            " and pbs_exec. When the server does not answer: nothing is removed, the"
            " complete list of commands is printed (with the database's) and the exit"
            " status is 1. Example: softwalltime hooks uninstall --dry-run"
        ),
    )
    uninst.add_argument(
        "--dry-run", action="store_true", help="print every command to run, change nothing"
    )
    _common(uninst)
    _json_option(uninst, UNINSTALL_KEYS)
    uninst.add_argument(
        "--operator",
        default=SERVICE_USER,
        metavar="USER",
        help=f"remove USER@this-host from the PBS operators (default: {SERVICE_USER}; '' for none)",
    )
    uninst.add_argument(
        "--keep-formula",
        action="store_true",
        help="keep a job_sort_formula that names the product's resources, and those"
        " resources (default: unset it and print what it was)",
    )
    uninst.set_defaults(func=uninstall)


# hooks install/uninstall --json: their keys, for --help and the test that parses them.
INSTALL_KEYS = (
    ("hook", "the hook's name"),
    ("dry_run", "true in a dry run: nothing changed"),
    ("updated", "the hook existed and was updated; null in a dry run"),
    ("events", "the hook's events"),
    ("dsn", "the DSN of its config, no password"),
    ("rank", "the sort rank it publishes, or off"),
    ("commands", "the qmgr directives run; in a dry run the script's lines"),
)
UNINSTALL_KEYS = (
    ("hook", "the hook's name"),
    ("dry_run", "true in a dry run: nothing changed"),
    ("commands", "the qmgr directives run, or in a dry run to run"),
    ("resources_deleted", "resources deleted"),
    ("resources_kept", "resources kept, each with why (a job still has it)"),
    ("formulas_unset", "job_sort_formula unset, by scheduler: what it was"),
    ("formulas_kept", "job_sort_formula that was kept, by scheduler"),
)


def _json_option(parser: argparse.ArgumentParser, keys: Sequence[tuple[str, str]]) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object instead of text: " + ", ".join(f"{k} ({v})" for k, v in keys),
    )


def _print_json(keys: Sequence[tuple[str, str]], **found: Any) -> None:
    print(json.dumps({k: found[k] for k, _ in keys}, indent=2))


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", default="softwalltime", help="hook name (default: softwalltime)")
    parser.add_argument(
        "--qmgr", default=None, help="qmgr executable (default: qmgr on PATH, else /opt/pbs/bin)"
    )


def _usage(parser: Any) -> int:
    parser.print_help(sys.stderr)
    return 2


def _qmgr(args: Any, settings: Settings) -> list[str]:
    """The qmgr command to run, as argv: the setting ``pbs_command_prefix`` (PBS in another
    namespace or host: pbsx, sudo, ssh), then ``--qmgr`` (checked before anything is done
    when there is no prefix), else ``pbs_exec``'s ``bin/qmgr``, else qmgr on PATH, else
    ``PBS_EXEC`` of /etc/pbs.conf or /opt/pbs (as the other PBS commands find it).

    :raises SoftwalltimeError: none found, or ``--qmgr`` is no executable file
    """
    prefix = list(settings.pbs_command_prefix)
    given = str(args.qmgr) if args.qmgr else ""
    if not given and settings.pbs_exec:
        given = os.path.join(settings.pbs_exec, "bin", "qmgr")
    if given:
        if not args.dry_run and not prefix and not _executable(given):
            why = "not an executable file" if os.path.exists(given) else "no such file"
            what = "--qmgr" if args.qmgr else "qmgr of pbs_exec"
            raise SoftwalltimeError(f"{what} {given}: {why}")
        return [*prefix, given]
    if args.dry_run and not prefix:
        return ["qmgr"]
    conf = os.path.join(read_pbs_conf().get("PBS_EXEC") or DEFAULT_PBS_EXEC, "bin", "qmgr")
    if prefix:  # the command runs where the prefix takes it: nothing to look for here
        return [*prefix, conf]
    for found in (shutil.which("qmgr"), conf, "/opt/pbs/bin/qmgr"):
        if found and _executable(found):
            return [found]
    raise SoftwalltimeError(
        "qmgr not found on PATH, in PBS_EXEC/bin or /opt/pbs/bin (PBS is not installed"
        " here?); pass --qmgr PATH, or set pbs_exec or pbs_command_prefix"
    )


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _shown(qmgr: Sequence[str], directive: str) -> str:
    """The shell line that runs ``directive``."""
    return shlex.join([*qmgr, "-c", directive])


def _validate(args: Any) -> None:
    if not _NAME_RE.match(args.name):
        raise SoftwalltimeError(f"invalid hook name {args.name!r}: use letters, digits, _ and -")
    if hasattr(args, "order") and not 1 <= args.order <= 1000:
        raise SoftwalltimeError(f"--order must be 1-1000 for a site hook, got {args.order}")
    operator = getattr(args, "operator", "")
    if operator and not _NAME_RE.match(operator):
        raise SoftwalltimeError(f"invalid --operator {operator!r}: use letters, digits, _ and -")
    if hasattr(args, "alarm") and args.alarm < 1:
        raise SoftwalltimeError(f"--alarm must be at least 1 second, got {args.alarm}")


def _qmgr_run(qmgr: Sequence[str], directive: str) -> subprocess.CompletedProcess[str]:
    """``qmgr -c directive``; its exit status is the caller's to judge.

    :raises SoftwalltimeError: qmgr cannot be started or does not finish in 60 s
    """
    try:
        return subprocess.run(
            [*qmgr, "-c", directive], capture_output=True, text=True, check=False, timeout=60
        )
    except OSError as err:
        raise SoftwalltimeError(f"cannot run {shlex.join(qmgr)}: {err.strerror}") from None
    except subprocess.TimeoutExpired:
        raise SoftwalltimeError(f"qmgr -c {directive!r} did not finish within 60 s") from None


def _run_qmgr(qmgr: Sequence[str], directive: str) -> None:
    proc = _qmgr_run(qmgr, directive)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().replace("\n", " ")
        raise SoftwalltimeError(f"qmgr -c {directive!r} failed ({proc.returncode}): {detail}")


def _qmgr_ok(qmgr: Sequence[str], directive: str) -> bool:
    """Whether ``qmgr -c directive`` succeeds (``list ...``: the object exists)."""
    return _qmgr_run(qmgr, directive).returncode == 0


def _operator(args: Any) -> str:
    """``USER@host`` for ``--operator`` (checked by :func:`_validate`; this host's name as
    PBS sees local clients), or "" when none is asked or no such user exists here."""
    user = str(getattr(args, "operator", "") or "")
    if not user:
        return ""
    try:
        pwd.getpwnam(user)
    except KeyError:
        return ""
    return f"{user}@{socket.getfqdn()}"


def _operators(qmgr: Sequence[str]) -> list[str]:
    """The server's ``operators`` (empty when unset)."""
    value = parse_qmgr_list(_qmgr_run(qmgr, "list server operators").stdout).get("operators", "")
    return [v.strip() for v in value.split(",") if v.strip()]


def _add_operator(
    qmgr: Sequence[str], entry: str, say: Callable[[str], None] = print
) -> Optional[str]:
    """Add ``entry`` to the server's operators, once; the directive run, if any."""
    if entry in _operators(qmgr):
        return None
    directive = f"set server operators += {entry}"
    _run_qmgr(qmgr, directive)
    say(f"qmgr -c {shlex.quote(directive)}")
    return directive


def _remove_operator(
    qmgr: Sequence[str], entry: str, say: Callable[[str], None] = print
) -> list[str]:
    """Take the user of ``entry`` (``USER@host``) out of the operators on every host: the
    host install wrote is the one PBS saw then, which a pbs_command_prefix (another
    namespace or host) may name differently from here. The directives run."""
    user = entry.split("@", 1)[0]
    operators = _operators(qmgr)
    ours = [o for o in operators if o.split("@", 1)[0] == user]
    if not ours:
        return []
    # PBS 23.06 saves an attribute emptied by -= as no values (attr_fn_arst.c:291) merged
    # into the row it had (db_svr.c:86, "attributes || hstore(...)"): the entry comes back
    # at the next server start. Only unset deletes it from the datastore (req_manager.c:1096).
    if len(ours) == len(operators):
        directives = ["unset server operators"]
    else:
        directives = [operator_directive(o) for o in ours]
    for directive in directives:
        _run_qmgr(qmgr, directive)
        say(f"qmgr -c {shlex.quote(directive)}")
    return directives


def operator_directive(entry: str) -> str:
    """How uninstall takes ``entry`` out of the operators (when others remain)."""
    return f"set server operators -= {entry}"


def install(args: Any, settings: Settings) -> int:
    """Print (``--dry-run``) or run the qmgr sequence that installs the hook.

    :raises ConfigError: no DSN configured
    :raises SoftwalltimeError: bad name/order/alarm, qmgr missing or failing
    """
    _validate(args)
    bound = hook_bound_s(settings)
    if bound > args.alarm / 2:
        # PBS kills a hook that outlives its alarm and then rejects the job: fail-open
        # would turn into reject exactly when the database is slow.
        raise SoftwalltimeError(
            f"connect_timeout_s + statement_timeout_ms + {STATEMENT_GRACE_S:g} s = {bound:g} s,"
            f" more than half the hook alarm ({args.alarm} s): a slow database would get jobs"
            " rejected by the alarm; lower the timeouts or raise --alarm"
        )
    qmgr = _qmgr(args, settings)
    script = _check_path(hook_script(), "hook script")
    config = hook_config(settings, rank=bool(args.rank))
    resources = [(MARK_RESOURCE, MARK_DIRECTIVE)]
    if config["rank"] != "off":
        resources.append((RANK_RESOURCE, RANK_DIRECTIVE))
    found = {
        "hook": args.name,
        "dry_run": bool(args.dry_run),
        "updated": None,
        "events": HOOK_EVENTS,
        "dsn": redact_dsn(settings.dsn),
        "rank": config["rank"],
    }
    if args.dry_run:
        lines = _dry_run_script(args, qmgr, script, config, resources)
        entry = _operator(args)
        if entry:
            lines.append("# 4. refresh's user may qalter and see every job (skipped if it is one)")
            lines.append(_shown(qmgr, f"set server operators += {entry}"))
        if args.json:
            _print_json(INSTALL_KEYS, commands=lines, **found)
        else:
            print("\n".join(lines))
        return 0
    say = (lambda line: None) if args.json else print

    fd, tmp = tempfile.mkstemp(prefix=f"{args.name}-", suffix=".json")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(config, fh, indent=2)
        directives = install_commands(args.name, args.order, args.alarm, script, tmp)
        exists = _qmgr_ok(qmgr, f"list hook {args.name}")
        if exists:
            say(f"hook {args.name} exists; updating it")
            directives = directives[2:]
        for name, directive in reversed(resources):
            if not _qmgr_ok(qmgr, f"list resource {name}"):
                directives.insert(0, directive)
        for directive in directives:
            _run_qmgr(qmgr, directive)
            say(f"qmgr -c {shlex.quote(directive)}")
    finally:
        os.unlink(tmp)
    entry = _operator(args)
    operator = _add_operator(qmgr, entry, say) if entry else None
    if args.json:
        run = [d.replace(tmp, "CONFIG") for d in directives] + ([operator] if operator else [])
        _print_json(INSTALL_KEYS, **dict(found, updated=exists, commands=run))
        return 0
    ranked = f"; rank {config['rank']} in {RANK_RESOURCE}" if config["rank"] != "off" else ""
    print(
        f"hook {args.name} installed (events {HOOK_EVENTS}; DSN {redact_dsn(settings.dsn)}{ranked})"
    )
    return 0


def _dry_run_script(
    args: Any,
    qmgr: Sequence[str],
    script: str,
    config: dict[str, Any],
    resources: list[tuple[str, str]],
) -> list[str]:
    """The shell script ``hooks install --dry-run`` prints, line by line."""
    shown = dict(config, dsn=redact_dsn(config["dsn"]))
    lines = [
        f"# softwalltime hooks install --dry-run: hook {args.name!r} for a stock OpenPBS 23.06",
        "# server. Run as root on the server host. 1. the hook configuration, generated",
        "# from the current settings (password shown as ***; the real install writes it",
        "# to a private temporary file):",
        "config=$(mktemp)",
        "cat > \"$config\" <<'EOF'",
        *json.dumps(shown, indent=2).splitlines(),
        "EOF",
    ]
    step = 2  # one number per step: with the rank, two resources (issue 50)
    for name, directive in resources:
        what = "the hook's mark" if name == MARK_RESOURCE else "the sort rank"
        lines.append(f"# {step}. {what} (skipped if 'list resource {name}' finds it)")
        lines.append(_shown(qmgr, directive))
        step += 1
    lines.append(f"# {step}. the hook")
    for directive in install_commands(args.name, args.order, args.alarm, script, "CONFIG"):
        line = _shown(qmgr, directive)
        lines.append(line.replace(" CONFIG'", ' \'"$config"').replace("CONFIG", "$config"))
    lines.append('rm -f "$config"')
    return lines


def names_ours(formula: str) -> list[str]:
    """The product's resources a ``job_sort_formula`` names, in :data:`RESOURCES` order."""
    found = set(_OURS_RE.findall(formula or ""))
    return [name for name in RESOURCES if name in found]


def parse_sched_formulas(listing: str) -> dict[str, str]:
    """``qmgr -c 'list sched'`` -> {scheduler: its job_sort_formula}, for those with one
    (OpenPBS 23.06 keeps the formula on the scheduler; folded lines joined)."""
    out: dict[str, str] = {}
    blocks: dict[str, list[str]] = {}
    name = ""
    for line in listing.splitlines():
        if line.startswith("Sched "):
            name = line.split(None, 1)[1].strip()
            blocks[name] = []
        elif name:
            blocks[name].append(line)
    for name, lines in blocks.items():
        formula = parse_qmgr_list("\n".join(lines)).get("job_sort_formula")
        if formula:
            out[name] = formula.strip().strip("'\"")
    return out


def database_name(dsn: Optional[str]) -> str:
    """The database a DSN names (``dbname``), else install.md's ``softwalltime``."""
    if not dsn:
        return DEFAULT_DATABASE
    try:
        return dsnlib.parse(dsn).get("dbname") or DEFAULT_DATABASE
    except (ValueError, SoftwalltimeError):
        return DEFAULT_DATABASE


def database_commands(database: str) -> list[str]:
    """The database's removal, as PostgreSQL's superuser on its host: the database, then
    the roles of ``db grant`` (cluster-wide, they outlive the database)."""
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_$-]{0,62}$", database):
        database = DEFAULT_DATABASE  # a name a shell line could not carry as is: the default
    quoted = f'"{database}"' if not re.match(r"^[a-z_][a-z0-9_]*$", database) else database
    return [
        f"# the database {database} and db grant's roles (as PostgreSQL's superuser on its host;"
        " the history is lost):",
        shlex.join(["runuser", "-u", "postgres", "--", "psql", "-c", f"DROP DATABASE {quoted}"]),
        shlex.join(["runuser", "-u", "postgres", "--", "psql", "-c",
                    "DROP ROLE " + ", ".join(DB_ROLES)]),
    ]  # fmt: skip


def removal_commands(
    qmgr: Sequence[str],
    hook: str,
    operator: str,
    formulas: Optional[Mapping[str, str]],
    database: str,
) -> list[str]:
    """Everything that removes the product from a PBS server and its database, as shell
    lines (``# ...`` comments between): what ``hooks uninstall`` prints when the server
    does not answer and for ``--dry-run``.

    :param qmgr: the qmgr argv (with pbs_command_prefix)
    :param operator: ``USER@host`` to take out of the operators, or ""
    :param formulas: {scheduler: job_sort_formula} as read from the server; None when it
        could not be read (the unset line is then given for the default scheduler, with
        the condition in a comment)
    :param database: the database's name
    """
    lines = [
        "# PBS: as root on the server host, once it answers (docs/install.md, Removal)",
        _shown(qmgr, f"delete hook {hook}"),
    ]
    ours = ", ".join(RESOURCES)
    if formulas is None:
        lines.append(
            f"# the sort formula, if it names {ours}"
            f" ({_shown(qmgr, 'list sched default job_sort_formula')}): print it to restore"
            " it later without them, then"
        )
        lines.append(_shown(qmgr, "unset sched default job_sort_formula"))
    else:
        for sched, formula in sorted(formulas.items()):
            if names_ours(formula):
                lines.append(f"# the sort formula reads {', '.join(names_ours(formula))}; it was:"
                             f" {formula}")  # fmt: skip
                lines.append(_shown(qmgr, f"unset sched {sched} job_sort_formula"))
    if operator:
        lines.append(
            "# refresh's user (on whichever host qmgr -c 'list server operators' names);"
            " 'unset server operators' instead if it is the only one"
        )
        lines.append(_shown(qmgr, operator_directive(operator)))
    lines.append(
        "# the resources, after the formula (each refused while a job, or a finished job in"
        " the history, has it: qdel -x -Wforce those jobs, or run it again later)"
    )
    lines += [_shown(qmgr, f"delete resource {name}") for name in RESOURCES]
    return lines + database_commands(database)


def _say_err(line: str) -> None:
    print(line, file=sys.stderr)


def uninstall(args: Any, settings: Settings) -> int:
    """Remove the product from the PBS server: the hook, a ``job_sort_formula`` that names
    its resources (unset, and what it was printed; ``--keep-formula`` keeps it and the
    resources it names), refresh's user from the operators, then the resources (each kept
    while a job has it, with the command for later). Print (``--dry-run``), or when the
    server does not answer, the complete list of commands.

    :raises SoftwalltimeError: bad name, qmgr missing or failing, the server not answering
    """
    _validate(args)
    qmgr = _qmgr(args, settings)
    found: dict[str, Any] = {"hook": args.name, "dry_run": bool(args.dry_run)}
    entry = _operator(args)
    database = database_name(settings.dsn)
    if args.dry_run:
        if args.json:
            deletes = [f"delete resource {name}" for name in RESOURCES]
            _print_json(
                UNINSTALL_KEYS,
                commands=[f"delete hook {args.name}", *deletes],
                resources_deleted=[],
                resources_kept={},
                formulas_unset={},
                formulas_kept={},
                **found,
            )
            return 0
        print("\n".join(removal_commands(qmgr, args.name, entry, None, database)))
        return 0
    answer = _qmgr_run(qmgr, "list server")
    if answer.returncode != 0:
        detail = " ".join((answer.stderr or answer.stdout).split()) or f"exit {answer.returncode}"
        for line in removal_commands(qmgr, args.name, entry, None, database):
            _say_err(line)
        raise SoftwalltimeError(
            f"the PBS server does not answer ({shlex.join([*qmgr, '-c', 'list server'])}:"
            f" {detail}): nothing removed; run the commands above once it does"
        )
    say = (lambda line: None) if args.json else print
    commands: list[str] = []
    if _qmgr_ok(qmgr, f"list hook {args.name}"):
        _run_qmgr(qmgr, f"delete hook {args.name}")
        commands.append(f"delete hook {args.name}")
        say(f"hook {args.name} deleted")
    else:
        say(f"hook {args.name} not installed")
    unset, kept_formulas, keep = _unset_formulas(args, qmgr, commands)
    commands += _remove_operator(qmgr, entry, say) if entry else []
    deleted, kept = _delete_resources(qmgr, keep, commands, say)
    if args.json:
        _print_json(
            UNINSTALL_KEYS,
            commands=commands,
            resources_deleted=deleted,
            resources_kept=kept,
            formulas_unset=unset,
            formulas_kept=kept_formulas,
            **found,
        )
        return 0
    print(f"kept: the database {database} and the roles {', '.join(DB_ROLES)}; to drop them:")
    print("\n".join(database_commands(database)[1:]))
    return 0


def _unset_formulas(
    args: Any, qmgr: Sequence[str], commands: list[str]
) -> tuple[dict[str, str], dict[str, str], set[str]]:
    """uninstall's step: unset each scheduler's job_sort_formula that names the product's
    resources (``--keep-formula``: keep it and those resources); the directives run are
    added to ``commands``. The formulas unset and kept, by scheduler, and the resources to
    keep."""
    listed = _qmgr_run(qmgr, "list sched")
    formulas = parse_sched_formulas(listed.stdout)
    if listed.returncode != 0:
        detail = " ".join((listed.stderr or listed.stdout).split())
        _say_err(
            f"job_sort_formula not read ({detail}): if it names {', '.join(RESOURCES)}, unset"
            f" it: {_shown(qmgr, 'unset sched default job_sort_formula')}"
        )
    unset: dict[str, str] = {}
    kept_formulas: dict[str, str] = {}
    keep: set[str] = set()
    for sched, formula in sorted(formulas.items()):
        named = names_ours(formula)
        if not named:
            continue
        if args.keep_formula:
            kept_formulas[sched] = formula
            keep.update(named)
            _say_err(
                f"job_sort_formula of scheduler {sched} reads {', '.join(named)}: kept"
                " (--keep-formula), and so are those resources"
            )
            continue
        directive = f"unset sched {sched} job_sort_formula"
        _run_qmgr(qmgr, directive)
        commands.append(directive)
        unset[sched] = formula
        restore = _shown(qmgr, f"set sched {sched} job_sort_formula = '{formula}'")
        _say_err(
            f"job_sort_formula of scheduler {sched} read {', '.join(named)}: unset; it was"
            f" {formula} (without those names, restore it with: {restore})"
        )
    return unset, kept_formulas, keep


def _delete_resources(
    qmgr: Sequence[str], keep: set[str], commands: list[str], say: Any
) -> tuple[list[str], dict[str, str]]:
    """uninstall's last step on PBS: delete the product's resources but ``keep``; one a job
    still has is kept, with why. The deleted, and the kept with why."""
    deleted: list[str] = []
    kept: dict[str, str] = {}
    for name in RESOURCES:
        if name in keep or not _qmgr_ok(qmgr, f"list resource {name}"):
            continue
        delete = f"delete resource {name}"
        try:
            _run_qmgr(qmgr, delete)
            commands.append(delete)
            deleted.append(name)
            say(f"resource {name} deleted")
        except SoftwalltimeError as err:  # jobs, or finished jobs in the history, have it
            kept[name] = str(err)
            _say_err(
                f"resource {name} kept ({err}): a job or a finished job in the history has"
                f" it; once none has (qdel -x -Wforce): {_shown(qmgr, delete)}"
            )
    return deleted, kept
