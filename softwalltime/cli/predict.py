"""``softwalltime predict``: the soft walltime the hook would set now, and why."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any, Dict, List, Optional

from ..accounting import FIELD_BOUNDS
from ..core import calibrated
from ..core.config import PREDICTORS, Settings
from ..core.decide import EVENTS, JobEvent, decide
from ..core.learned_site import HISTORY_ROWS as LEARNED_HISTORY_ROWS
from ..core.learned_site import LearnedFetch
from ..core.predict import HistoryRow, PredictorParams
from ..hook import lookup
from ..units import format_duration
from .argtypes import positive_duration, whole_number

# The bounds the ingester holds stored records to (accounting.FIELD_BOUNDS): a walltime of
# more than 10 years, or more than 10^8 processors, is no job's.
_WALLTIME_MAX_S = next(b.high for b in FIELD_BOUNDS if b.key == "Resource_List.walltime")
_NCPUS_MAX = next(b.high for b in FIELD_BOUNDS if b.key == "Resource_List.ncpus")
_RESOURCE = r"[A-Za-z_]\w*=[^:+=\s]+"
_CHUNK = re.compile(rf"(?:[1-9]\d*(?::{_RESOURCE})*|{_RESOURCE}(?::{_RESOURCE})*)")
# --json: its keys, for --help and the test that parses them.
JSON_KEYS = (
    ("user", "as given"),
    ("walltime_s", "requested walltime, seconds"),
    ("predictor", "v1, v2, v3, calibrated or learned"),
    ("event", "hook event"),
    ("queue", "as given"),
    ("ncpus", "the job's processors (predictor calibrated)"),
    ("soft_walltime_s", "what the hook sets, seconds; null: it leaves the job alone"),
    ("predicted_s", "the prediction, seconds, also in a dry run; null: none"),
    ("rank_s", "the sort rank (setting rank), seconds, also in a dry run; null: none"),
    ("dry_run", "the dry_run setting: the hook sets nothing"),
    ("reason", "the hook's one-line reason"),
    ("basis_jobs", "history jobs the prediction used"),
    ("basis_value", "v1/v2 mean runtime s, v3 max runtime/walltime ratio, or null"),
    ("history_limit", "most history jobs the predictor reads"),
    ("history", "[{runtime_s, walltime_s, ncpus}] the jobs read, most recent first"),
    ("calibration", "predictors calibrated and learned: {jobs, lambda}; otherwise null"),
)


def walltime(text: str) -> int:
    """An argparse type: a PBS duration > 0 and at most 10 years."""
    seconds = positive_duration(text)
    if seconds > _WALLTIME_MAX_S:
        raise argparse.ArgumentTypeError(
            f"more than 10 years ({_WALLTIME_MAX_S} s) is no job's walltime: {text!r}"
        )
    return seconds


def ncpus(text: str) -> int:
    """An argparse type: processors, 1 to 10^8."""
    value = whole_number(1)(text)
    if value > _NCPUS_MAX:
        raise argparse.ArgumentTypeError(f"must be at most {_NCPUS_MAX}, got {value}")
    return value


def select(text: str) -> str:
    """An argparse type: a PBS select, chunks ``[N:]res=value[:res=value...]`` joined by
    ``+`` (``2:ncpus=4+1:ncpus=2:mem=4gb``), with whole ``ncpus`` from 1 to 10^8."""
    for chunk in text.split("+"):
        if not _CHUNK.fullmatch(chunk):
            raise argparse.ArgumentTypeError(
                f"not a select (chunks [N:]res=value[:res=value...] joined by +): {text!r}"
            )
        for part in chunk.split(":"):
            name, _, value = part.partition("=")
            if name.lower() == "ncpus" and not (value.isdigit() and 1 <= int(value) <= _NCPUS_MAX):
                raise argparse.ArgumentTypeError(
                    f"a select's ncpus must be a whole number, 1 to {_NCPUS_MAX}: {text!r}"
                )
    return text


def register(sub: Any) -> None:
    """Add the ``predict`` command."""
    parser = sub.add_parser(
        "predict",
        help="print the soft walltime the hook would set now, and why",
        description=(
            "Run the hook's decision for one user and walltime against the configured "
            "database (same settings, lists and predictor as the hook). --json prints one "
            "object: " + ", ".join(f"{k} ({v})" for k, v in JSON_KEYS) + ". "
            "Example: softwalltime predict --user alice --walltime 24:00:00 --predictor v2"
        ),
    )
    parser.add_argument("--user", required=True, help="PBS user name (euser)")
    parser.add_argument(
        "--walltime",
        required=True,
        type=walltime,
        help="requested walltime, [[H:]M:]S (at most 10 years)",
    )
    parser.add_argument(
        "--predictor", choices=PREDICTORS, help="predictor (default: from the settings, v3)"
    )
    parser.add_argument("--queue", default="", help="queue name, for the allow/deny lists")
    parser.add_argument(
        "--ncpus",
        type=ncpus,
        help="requested processors (predictor calibrated; default: from --select, else 1)",
    )
    parser.add_argument(
        "--select",
        type=select,
        help="requested select, e.g. 2:ncpus=4 (predictor calibrated: its ncpus)",
    )
    parser.add_argument(
        "--server",
        help="the job's PBS server, for history_scope = server (default: the server setting)",
    )
    parser.add_argument(
        "--event", choices=EVENTS, default="queuejob", help="hook event (default: queuejob)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the decision for ``args.user``/``args.walltime``; 0 on success.

    :raises ConfigError: no database configured
    :raises DatabaseError: the history cannot be read
    """
    if args.predictor:
        settings = settings._replace(predictor=args.predictor)
    fetch = lookup.fetcher(settings, args.server)
    seen: list[HistoryRow] = []

    def recording_fetch(user: str, limit: int, with_walltime_only: bool) -> list[HistoryRow]:
        rows = fetch(user, limit, with_walltime_only)
        seen.extend(rows)
        return rows

    class_rows: list[calibrated.ClassRow] = []

    def recording_both(
        user: str, limit: int, with_walltime_only: bool
    ) -> tuple[list[HistoryRow], list[calibrated.ClassRow]]:
        """The rank on: the predictor's rows and the rank's, in one statement (as the hook)."""
        rows, classes = fetch.both(user, limit, with_walltime_only)  # type: ignore[attr-defined]
        seen.extend(rows)
        class_rows.extend(classes)
        return rows, classes

    recording_fetch.both = recording_both  # type: ignore[attr-defined]
    params = PredictorParams.from_settings(settings)
    site = lookup.site_fetcher(settings, args.server)

    def recording_history(user: str, limit: int) -> list[calibrated.ClassRow]:
        rows = list(site.history(user, limit))
        class_rows.extend(rows)
        return rows

    ncpus = calibrated.ncpus_of({"ncpus": args.ncpus, "select": args.select})
    this = JobEvent(args.event, args.user, args.queue, args.walltime, None, ncpus=ncpus)
    site_readers = calibrated.SiteFetch(recording_history, site.calibration)
    learned = _recording_learned(settings, args.server, seen)
    decision = decide(
        this, settings, recording_fetch, params=params, site=site_readers, learned=learned
    )
    prediction = decision.prediction
    is_learned = prediction is not None and learned is not None
    is_calibrated = prediction is not None and settings.predictor == calibrated.NAME
    if is_calibrated:
        limit = calibrated.HISTORY_ROWS
    elif is_learned:
        limit = LEARNED_HISTORY_ROWS
    else:
        limit = params.history_jobs(settings.predictor)
    if args.json:
        history: List[Dict[str, Optional[int]]] = (
            [{"runtime_s": r, "walltime_s": w, "ncpus": c} for r, w, c in class_rows]
            if is_calibrated
            else [{"runtime_s": r, "walltime_s": w, "ncpus": None} for r, w in seen]
        )
        table: Any = site.calibration() if is_calibrated else None
        if is_learned and learned is not None:
            table = learned.table()
        found = {
            "user": args.user,
            "walltime_s": args.walltime,
            "predictor": settings.predictor,
            "event": args.event,
            "queue": args.queue,
            "ncpus": ncpus,
            "soft_walltime_s": decision.soft_walltime_s,
            "predicted_s": prediction.soft_walltime_s if prediction else None,
            "rank_s": decision.computed_rank_s,
            "dry_run": settings.dry_run,
            "reason": decision.reason,
            "basis_jobs": prediction.basis_jobs if prediction else 0,
            "basis_value": prediction.basis_value if prediction else None,
            "history_limit": limit,
            "history": history,
            "calibration": {"jobs": table.total, "lambda": table.lam} if table else None,
        }
        print(json.dumps({k: found[k] for k, _ in JSON_KEYS}, indent=2))
        return 0
    if decision.soft_walltime_s is not None:
        soft = decision.soft_walltime_s
        print(f"soft_walltime: {format_duration(soft)} ({soft} s)")
    elif prediction is not None and prediction.soft_walltime_s is not None:
        soft = prediction.soft_walltime_s
        print(f"soft_walltime: none set (dry run; would be {format_duration(soft)}, {soft} s)")
    else:
        print("soft_walltime: none (the hook leaves the job alone)")
    if decision.computed_rank_s is not None:
        print(f"rank: {decision.computed_rank_s} s ({settings.rank}, for job_sort_formula)")
    print(f"why: {decision.reason}")
    if is_calibrated:
        table = site.calibration()
        print(
            f"calibration: {table.total} finished jobs learned, lambda {table.lam:.4g};"
            f" job ncpus {ncpus}"
        )
        print(f"history: {len(class_rows)} of at most {limit} jobs with walltime > 0")
        for runtime_s, walltime_s, cpus in class_rows[:10]:
            wall = "-" if walltime_s is None else format_duration(walltime_s)
            print(f"  runtime {format_duration(runtime_s)}  walltime {wall}  ncpus {cpus}")
        if len(class_rows) > 10:
            print(f"  ... {len(class_rows) - 10} more")
    elif prediction is not None:
        if is_learned and learned is not None:
            table = learned.table()
            print(f"learned table: {table.total} finished jobs learned, lambda {table.lam:.4g}")
        kind = "jobs with walltime > 0" if settings.predictor in ("v3", "learned") else "jobs"
        print(f"history: {len(seen)} of at most {limit} {kind}, most recent first")
        for runtime_s, walltime_s in seen:
            wall = "-" if walltime_s is None else format_duration(walltime_s)
            print(f"  runtime {format_duration(runtime_s)}  walltime {wall}")
    return 0


def _recording_learned(
    settings: Settings, server: Optional[str], seen: list[HistoryRow]
) -> Optional[LearnedFetch]:
    """Predictor learned's readers (None for another predictor), its rows recorded in
    ``seen`` as ``(runtime_s, walltime_s)``."""
    if settings.predictor != "learned":
        return None
    readers = lookup.learned_fetcher(settings, server)

    def history(user: str, limit: int) -> Any:
        rows, classes = readers.history(user, limit)
        seen.extend((r, w) for r, w, _n, _end in rows)
        return rows, classes

    return readers._replace(history=history)
