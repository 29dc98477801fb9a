"""``softwalltime policy apply | history | revert``: the scheduling policy a search
recommends, set on PBS and recorded (issue 48; the library: pbsserver/policy.py)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any, Optional

from ..core.config import Settings, require_dsn
from ..errors import SoftwalltimeError
from ..pbsserver import policy as lib
from ..replay import formula as fm
from .status import pbs_location

_DEPTH = re.compile(r"^(?P<label>.+)-bf(?P<depth>\d+)$")


def register(sub: Any) -> None:
    """Add the ``policy`` command group."""
    parser = sub.add_parser(
        "policy",
        help="apply a searched job_sort_formula and backfill_depth, recorded; history; revert",
        description=(
            "Set the scheduling policy 'simulate --search' recommends (job_sort_formula, "
            "backfill_depth, strict_ordering, eligible_time_enable) and record every change "
            "in the database: when, by whom, the settings before and after, the search. "
            "'status' records a change made with qmgr directly. Run as root on the PBS "
            "server host (sched_config is edited in place)."
        ),
    )
    psub = parser.add_subparsers(title="policy commands", metavar="COMMAND")
    parser.set_defaults(func=lambda args, settings: _usage(parser))

    apply = psub.add_parser(
        "apply",
        help="print (with --yes: run) the qmgr and sched_config changes of a policy",
        description=(
            "Print the qmgr and sched_config changes that set LABEL (a search label, e.g. "
            "xf2.rank+len1-bf3: the formula of simulate --search's family, -bfK its "
            "backfill_depth, else 1) or --formula and --backfill-depth; change nothing "
            "unless --yes. The policy has strict_ordering True ALL (as the search simulates) "
            "and eligible_time_enable True for a formula that reads eligible_time. "
            "Example: softwalltime policy apply xf2.rank+len1-bf3 --from-search search.json"
        ),
    )
    apply.add_argument("label", nargs="?", help="a search label (default: --from-search's)")
    apply.add_argument("--formula", help="a job_sort_formula instead of LABEL")
    apply.add_argument("--backfill-depth", type=int, metavar="K", help="with --formula (default 1)")
    apply.add_argument(
        "--from-search",
        metavar="FILE",
        help="the JSON 'simulate --search --json' printed: stored with the record (capped at "
        f"{lib.SEARCH_MAX_BYTES // 1024} KiB), its candidates' formulas used for LABEL",
    )
    apply.add_argument(
        "--procs",
        type=int,
        metavar="N",
        help="the machine's processors, for a label with a width term (+wW) not in the search",
    )
    apply.add_argument("--yes", action="store_true", help="make the changes and record them")
    apply.set_defaults(func=run_apply)

    hist = psub.add_parser(
        "history",
        help="list the recorded policy changes, newest first",
        description="The records of policy apply, policy revert and status, newest first.",
    )
    hist.add_argument("--limit", type=int, default=0, metavar="N", help="at most N (default all)")
    hist.add_argument("--json", action="store_true", help="print a JSON list instead of text")
    hist.set_defaults(func=run_history)

    rev = psub.add_parser(
        "revert",
        help="go back to the previous recorded policy (printed; --yes runs it)",
        description=(
            "Set the policy of the record before the newest one (with one record: the "
            "settings before it), recorded as a revert; without --yes only print it."
        ),
    )
    rev.add_argument("--yes", action="store_true", help="make the changes and record them")
    rev.set_defaults(func=run_revert)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _search(path: Optional[str]) -> Any:
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as err:
        raise SoftwalltimeError(f"--from-search {path}: {err.strerror}") from None
    except ValueError as err:
        raise SoftwalltimeError(f"--from-search {path}: not JSON: {err}") from None


def resolve(args: argparse.Namespace, search: Any) -> tuple[Optional[str], str, int]:
    """The label (None for --formula), job_sort_formula and backfill_depth asked for.

    :raises SoftwalltimeError: neither or both of LABEL and --formula, or a label that is
        not of the family
    """
    if args.formula is not None:
        if args.label:
            raise SoftwalltimeError("give LABEL or --formula, not both")
        return None, args.formula, 1 if args.backfill_depth is None else args.backfill_depth
    if args.backfill_depth is not None:
        raise SoftwalltimeError("--backfill-depth goes with --formula (a label says -bfK)")
    found = search if isinstance(search, dict) else {}
    label = args.label or (found.get("recommended") or {}).get("label")
    if not label:
        raise SoftwalltimeError("give LABEL, --formula, or --from-search with a recommendation")
    for row in found.get("candidates") or []:
        if isinstance(row, dict) and row.get("label") == label and row.get("job_sort_formula"):
            return label, str(row["job_sort_formula"]), int(row.get("backfill_depth") or 1)
    deep = _DEPTH.match(label)
    name, depth = (deep.group("label"), int(deep.group("depth"))) if deep else (label, 1)
    try:
        params = fm.parse_label(name)
    except ValueError as err:
        raise SoftwalltimeError(str(err)) from None
    if params.width and not args.procs:
        raise SoftwalltimeError(f"{label} has a width term: give --procs (or --from-search)")
    return label, fm.expression(params, args.procs or 1), depth


def _show(lines: list[str], yes: bool) -> None:
    if not lines:
        print("# the server already has this policy: nothing to change")
        return
    for line in lines:
        print(line)
    if not yes:
        print("# nothing changed: pass --yes to run these and record them")


def run_apply(args: argparse.Namespace, settings: Settings) -> int:
    """Print, or with --yes make and record, the changes to a policy."""
    search = _search(args.from_search)
    stored = lib.capped_search(search) if search is not None else None
    label, formula, depth = resolve(args, search)
    pbs = pbs_location(settings)
    live = lib.read_live(pbs)
    target = lib.target_of(live, formula, depth)
    lines = lib.commands(pbs, live, target)
    _show(lines, args.yes)
    if not args.yes:
        return 0
    conn = lib.connect(require_dsn(settings))
    try:
        lib.observe(conn, live)  # a change made with qmgr since the last record
        if lines:
            lib.execute(pbs, live, target)
        after = lib.read_live(pbs)
        rid = lib.record(conn, "apply", lib.who(), (live, after), label, lines, stored)
    finally:
        conn.close()
    print(f"# recorded as #{rid}")
    return 0


def run_revert(args: argparse.Namespace, settings: Settings) -> int:
    """Print, or with --yes make and record, the way back to the previous policy."""
    pbs = pbs_location(settings)
    live = lib.read_live(pbs)
    conn = lib.connect(require_dsn(settings))
    try:
        if args.yes:
            lib.observe(conn, live)
        records = lib.history(conn, 2)
        target = lib.previous_policy(records)
        if target is None:
            raise SoftwalltimeError("no previous policy recorded: nothing to revert to")
        lines = lib.commands(pbs, live, target)
        _show(lines, args.yes)
        if not args.yes:
            return 0
        if lines:
            lib.execute(pbs, live, target)
        after = lib.read_live(pbs)
        label = records[1].label if len(records) > 1 else None
        rid = lib.record(conn, "revert", lib.who(), (live, after), label, lines)
    finally:
        conn.close()
    print(f"# recorded as #{rid}")
    return 0


def run_history(args: argparse.Namespace, settings: Settings) -> int:
    """The records, newest first."""
    conn = lib.connect(require_dsn(settings))
    try:
        records = lib.history(conn, max(args.limit, 0))
    finally:
        conn.close()
    if args.json:
        print(json.dumps([r._asdict() for r in records], indent=2))
        return 0
    if not records:
        print("no policy change recorded")
    for r in records:
        label = f" [{r.label}]" if r.label else ""
        print(f"#{r.id} {r.changed_at} {r.action} by {r.changed_by}{label}")
        print(f"    {lib.describe(r.before, r.after)}")
    return 0
