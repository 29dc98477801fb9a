"""``softwalltime status``: is the hook, its database and the ingester working?
(Nagios 0/1/2/3)"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from typing import Any, Mapping

from .. import outfile
from ..core.config import Settings
from ..errors import SoftwalltimeError
from ..pbsserver import status as lib
from ..pbsserver.commands import PBS_CONF, Pbs, read_pbs_conf
from .argtypes import positive_duration
from .tty import use_color


def register(sub: Any) -> None:
    """Add the ``status`` command."""
    parser = sub.add_parser(
        "status",
        help="check the hook, its config, database and imports, its recent work, the ingester",
        description=(
            "One look at everything softwalltime needs on a PBS server host (as root). "
            "Exit 0 OK, 1 warning, 2 critical, 3 unknown: a check could not run (Nagios). "
            "Any hook failure in the window is a warning; a failure rate above "
            f"status_failure_rate_pct (5) is critical once the window holds "
            f"{lib.MIN_EVENTS_FOR_RATE} events or {lib.MIN_FAILURES_FOR_RATE} failures. "
            "PBS_HOME and PBS_EXEC are taken from the environment, else from "
            "PBS_CONF_FILE or /etc/pbs.conf, as PBS's own commands do. The table's states "
            "are coloured on a terminal, unless NO_COLOR is set (to anything but empty) or "
            "TERM is dumb. With --nagios, a usage error is UNKNOWN too (exit 3)."
        ),
    )
    parser.add_argument(
        "--hook", default="softwalltime", help="the hook's name (default: softwalltime)"
    )
    parser.add_argument(
        "--since",
        type=positive_duration,
        default=3600,
        metavar="DURATION",
        help="server log window, [[H:]M:]S (default: 1:00:00)",
    )
    parser.add_argument(
        "--ingest-max-age",
        type=positive_duration,
        default=3600,
        metavar="DURATION",
        help="the ingester is behind when the oldest unread record of the newest accounting "
        "file has waited this long and no ingest runs (default: 1:00:00)",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON instead of the table")
    out.add_argument(
        "--nagios",
        action="store_true",
        help="print one line for Nagios/Icinga, 'SOFTWALLTIME STATE - text | perfdata'; "
        "an error that stops the check is UNKNOWN (exit 3)",
    )
    parser.add_argument(
        "--prometheus",
        metavar="FILE",
        help="also write the metrics to FILE (node_exporter textfile collector): atomically, "
        "replacing only a regular file (keeping its mode; a new one gets the umask's mode); "
        "'-' prints them instead of the table",
    )
    parser.set_defaults(func=run, on_error=_on_error)


def _on_error(args: argparse.Namespace, message: str) -> int | None:
    """With --nagios, an error that stopped the check is one UNKNOWN line (exit 3)."""
    if not getattr(args, "nagios", False):
        return None
    return nagios_unknown(message)


def nagios_unknown(message: str) -> int:
    """Print ``message`` as Nagios's one UNKNOWN line (no '|': it starts perfdata); 3."""
    print(f"SOFTWALLTIME UNKNOWN - {' '.join(message.replace('|', '/').split())}")
    return lib.UNKNOWN


# The global options of ``softwalltime`` that take a value (cli.add_global_options).
_VALUED_GLOBALS = ("--dsn", "--config")


def _command(argv: list[str]) -> tuple[str | None, list[str]]:
    """The command word of a ``softwalltime`` command line and the words after it, found
    without argparse (which may be what failed): global options and their values skipped,
    abbreviations included (``--conf FILE``), as argparse accepts them."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return (argv[i + 1], argv[i + 2 :]) if i + 1 < len(argv) else (None, [])
        if word.startswith("-"):
            takes_value = (
                "=" not in word
                and len(word) > 2
                and any(o.startswith(word) for o in _VALUED_GLOBALS)
            )
            i += 2 if takes_value else 1
            continue
        return word, argv[i + 1 :]
    return None, []


def nagios_requested(argv: list[str]) -> bool:
    """Whether ``argv`` is ``status`` with ``--nagios`` (or an abbreviation of it)."""
    command, rest = _command(argv)
    if command != "status":
        return False
    words = rest[: rest.index("--")] if "--" in rest else rest
    return any(len(w) > 3 and "--nagios".startswith(w) for w in words)


def pbs_location(settings: Settings, environ: Mapping[str, str] | None = None) -> Pbs:
    """Where PBS is, as PBS's own commands find it: ``PBS_HOME`` and ``PBS_EXEC`` in the
    environment win over the file ``PBS_CONF_FILE`` (default /etc/pbs.conf); the
    ``pbs_exec`` setting wins over both."""
    env = os.environ if environ is None else environ
    conf = read_pbs_conf(env.get("PBS_CONF_FILE") or PBS_CONF)
    conf.update({k: env[k] for k in ("PBS_HOME", "PBS_EXEC") if env.get(k)})
    return Pbs.from_settings(settings, conf)


def policy_guard(settings: Settings, dsn: str) -> lib.Check:
    """The policy guard's check (issue 48): the last ``status_guard_days`` of the current
    policy replayed under it and the previous one (:func:`softwalltime.api.policy_guard`)."""
    from .. import api
    from ..replay.counterfactual import Tolerances

    tolerances = Tolerances(
        settings.status_guard_p95_pct,
        settings.status_guard_longest_factor,
        settings.status_guard_noise_s,
    )
    days = settings.status_guard_days
    try:
        found = api.policy_guard(dsn, settings.status_guard_procs, days, tolerances)
    except SoftwalltimeError as err:
        return lib.Check("policy guard", lib.UNKNOWN, " ".join(str(err).split()))
    return lib.judge_guard(found.broken, found.comparison, days)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the checks; the exit status is the worst state."""
    pbs = pbs_location(settings)
    opts = lib.Options(hook=args.hook, since_s=args.since, ingest_max_age_s=args.ingest_max_age)
    if settings.status_guard_procs:
        opts.guard = functools.partial(policy_guard, settings)
    checks = lib.run_checks(pbs, settings, opts)
    code = lib.overall(checks)
    if args.prometheus:
        try:
            outfile.write_text(args.prometheus, lib.render_prometheus(checks))
        except SoftwalltimeError as err:
            checks.append(lib.Check("prometheus", lib.UNKNOWN, str(err)))
            code = lib.overall(checks)
            if not args.nagios:
                print(f"softwalltime status: error: {err}", file=sys.stderr)
    if args.prometheus == outfile.STDOUT:
        pass  # the metrics were the output
    elif args.json:
        print(lib.render_json(checks))
    elif args.nagios:
        print(lib.render_nagios(checks))
    else:
        print(lib.render_table(checks, color=use_color(sys.stdout)))
    return code
