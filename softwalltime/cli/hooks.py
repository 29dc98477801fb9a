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
from typing import Any, Callable, Optional, Sequence

import softwalltime

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
from ..pbsserver import refresh as refresh_lib
from ..pbsserver.commands import parse_qmgr_list

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

    uninst = hsub.add_parser(
        "uninstall",
        help="delete the hook",
        description="Delete the hook. Example: softwalltime hooks uninstall --dry-run",
    )
    uninst.add_argument("--dry-run", action="store_true", help="print the command only")
    _common(uninst)
    _json_option(uninst, UNINSTALL_KEYS)
    uninst.add_argument(
        "--operator",
        default=SERVICE_USER,
        metavar="USER",
        help=f"remove USER@this-host from the PBS operators (default: {SERVICE_USER}; '' for none)",
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


def _qmgr(args: Any) -> str:
    """The qmgr to run: ``--qmgr`` (checked before anything is done), qmgr on PATH, or
    /opt/pbs/bin/qmgr.

    :raises SoftwalltimeError: none found, or ``--qmgr`` is no executable file
    """
    if args.qmgr:
        path = str(args.qmgr)
        if not args.dry_run and not (os.path.isfile(path) and os.access(path, os.X_OK)):
            why = "not an executable file" if os.path.exists(path) else "no such file"
            raise SoftwalltimeError(f"--qmgr {path}: {why}")
        return path
    if args.dry_run:
        return "qmgr"
    found = shutil.which("qmgr") or (
        "/opt/pbs/bin/qmgr" if os.access("/opt/pbs/bin/qmgr", os.X_OK) else None
    )
    if not found:
        raise SoftwalltimeError("qmgr not found on PATH or in /opt/pbs/bin; pass --qmgr PATH")
    return found


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


def _qmgr_run(qmgr: str, directive: str) -> subprocess.CompletedProcess[str]:
    """``qmgr -c directive``; its exit status is the caller's to judge.

    :raises SoftwalltimeError: qmgr cannot be started or does not finish in 60 s
    """
    try:
        return subprocess.run(
            [qmgr, "-c", directive], capture_output=True, text=True, check=False, timeout=60
        )
    except OSError as err:
        raise SoftwalltimeError(f"cannot run {qmgr}: {err.strerror}") from None
    except subprocess.TimeoutExpired:
        raise SoftwalltimeError(f"qmgr -c {directive!r} did not finish within 60 s") from None


def _run_qmgr(qmgr: str, directive: str) -> None:
    proc = _qmgr_run(qmgr, directive)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().replace("\n", " ")
        raise SoftwalltimeError(f"qmgr -c {directive!r} failed ({proc.returncode}): {detail}")


def _qmgr_ok(qmgr: str, directive: str) -> bool:
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


def _operators(qmgr: str) -> list[str]:
    """The server's ``operators`` (empty when unset)."""
    value = parse_qmgr_list(_qmgr_run(qmgr, "list server operators").stdout).get("operators", "")
    return [v.strip() for v in value.split(",") if v.strip()]


def _set_operator(
    qmgr: str, entry: str, add: bool, say: Callable[[str], None] = print
) -> Optional[str]:
    """Add ``entry`` to (or remove it from) the server's operators, once; the directive
    run, if any."""
    operators = _operators(qmgr)
    if (entry in operators) == add:
        return None
    directive = f"set server operators {'+' if add else '-'}= {entry}"
    if not add and operators == [entry]:
        # PBS 23.06 saves an attribute emptied by -= as no values (attr_fn_arst.c:291) merged
        # into the row it had (db_svr.c:86, "attributes || hstore(...)"): the entry comes back
        # at the next server start. Only unset deletes it from the datastore
        # (req_manager.c:1096).
        directive = "unset server operators"
    _run_qmgr(qmgr, directive)
    say(f"qmgr -c {shlex.quote(directive)}")
    return directive


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
    qmgr = _qmgr(args)
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
            lines.append(shlex.join([qmgr, "-c", f"set server operators += {entry}"]))
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
    operator = _set_operator(qmgr, entry, True, say) if entry else None
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
    args: Any, qmgr: str, script: str, config: dict[str, Any], resources: list[tuple[str, str]]
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
        lines.append(shlex.join([qmgr, "-c", directive]))
        step += 1
    lines.append(f"# {step}. the hook")
    for directive in install_commands(args.name, args.order, args.alarm, script, "CONFIG"):
        line = shlex.join([qmgr, "-c", directive])
        lines.append(line.replace(" CONFIG'", ' \'"$config"').replace("CONFIG", "$config"))
    lines.append('rm -f "$config"')
    return lines


def uninstall(args: Any, settings: Settings) -> int:
    """Print (``--dry-run``) or run ``qmgr -c "delete hook NAME"``, then delete the mark's
    and the rank's resources (kept while jobs still have them).

    :raises SoftwalltimeError: bad name, qmgr missing or failing
    """
    _validate(args)
    qmgr = _qmgr(args)
    directive = f"delete hook {args.name}"
    found: dict[str, Any] = {"hook": args.name, "dry_run": bool(args.dry_run)}
    entry = _operator(args)
    if args.dry_run:
        deletes = [f"delete resource {name}" for name in (MARK_RESOURCE, RANK_RESOURCE)]
        if args.json:
            _print_json(
                UNINSTALL_KEYS,
                commands=[directive, *deletes],
                resources_deleted=[],
                resources_kept={},
                **found,
            )
            return 0
        print(shlex.join([qmgr, "-c", directive]))
        if entry:
            print(shlex.join([qmgr, "-c", f"set server operators -= {entry}"]) + "  # if it is"
                  " one; 'unset server operators' if it is the only one")  # fmt: skip
        for delete in deletes:
            print(f"{shlex.join([qmgr, '-c', delete])}  # if it exists; refused while a job"
                  " has it: kept then")  # fmt: skip
        return 0
    say = (lambda line: None) if args.json else print
    _run_qmgr(qmgr, directive)
    say(f"hook {args.name} deleted")
    commands, deleted, kept = [directive], [], {}
    operator = _set_operator(qmgr, entry, False, say) if entry else None
    if operator:
        commands.append(operator)
    for name in (MARK_RESOURCE, RANK_RESOURCE):
        if _qmgr_ok(qmgr, f"list resource {name}"):
            delete = f"delete resource {name}"
            try:
                _run_qmgr(qmgr, delete)
                commands.append(delete)
                deleted.append(name)
                say(f"resource {name} deleted")
            except SoftwalltimeError as err:  # jobs still carry it
                kept[name] = str(err)
                print(
                    f"resource {name} kept ({err}); when no job has it:"
                    f" {shlex.join([qmgr, '-c', delete])}",
                    file=sys.stderr,
                )
    if args.json:
        _print_json(
            UNINSTALL_KEYS,
            commands=commands,
            resources_deleted=deleted,
            resources_kept=kept,
            **found,
        )
    return 0
