"""``softwalltime predict``: the soft walltime the hook would set now, and why."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any, Dict, List, NamedTuple, Optional

from ..accounting import FIELD_BOUNDS
from ..core import calibrated
from ..core.config import PREDICTORS, Settings
from ..core.decide import EVENTS, Decision, JobEvent, decide
from ..core.learned_site import HISTORY_ROWS as LEARNED_HISTORY_ROWS
from ..core.learned_site import LearnedFetch
from ..core.predict import HistoryRow, PredictorParams
from ..core.registry import LEARNED, V3
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


class _Recorder:
    """The hook's history readers, each row they return also kept: what the decision read.

    Called as the hook's ``fetch`` (:data:`softwalltime.core.decide.HistoryFetch`); its
    :meth:`both` is the rank's one statement and :meth:`history` the site readers' (the
    predictor ``calibrated``)."""

    def __init__(self, fetch: Any, site: Any) -> None:
        self.fetch = fetch
        self.site = site
        self.seen: list[HistoryRow] = []  # (runtime_s, walltime_s), v1/v2/v3 and learned
        self.class_rows: list[calibrated.ClassRow] = []  # calibrated's and the rank's

    def __call__(self, user: str, limit: int, with_walltime_only: bool) -> list[HistoryRow]:
        rows = list(self.fetch(user, limit, with_walltime_only))
        self.seen.extend(rows)
        return rows

    def both(
        self, user: str, limit: int, with_walltime_only: bool
    ) -> tuple[list[HistoryRow], list[calibrated.ClassRow]]:
        """The rank on: the predictor's rows and the rank's, in one statement (as the hook)."""
        rows, classes = self.fetch.both(user, limit, with_walltime_only)
        self.seen.extend(rows)
        self.class_rows.extend(classes)
        return rows, classes

    def history(self, user: str, limit: int) -> list[calibrated.ClassRow]:
        rows = list(self.site.history(user, limit))
        self.class_rows.extend(rows)
        return rows


class _Outcome(NamedTuple):
    """What :func:`run` found: the decision, the rows it read, the table it used."""

    decision: Decision
    ncpus: Optional[int]
    record: _Recorder
    kind: str  # calibrated.NAME, learned_site's predictor "learned", or "history"
    limit: int  # the most history rows the predictor reads
    table: Any  # the site table (calibrated's or learned's), None for v1/v2/v3


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the decision for ``args.user``/``args.walltime``; 0 on success.

    :raises ConfigError: no database configured
    :raises DatabaseError: the history cannot be read
    """
    if args.predictor:
        settings = settings._replace(predictor=args.predictor)
    found = _predict(args, settings)
    if args.json:
        print(json.dumps(_json_report(args, settings, found), indent=2))
    else:
        for line in _text_report(settings, found):
            print(line)
    return 0


def _predict(args: argparse.Namespace, settings: Settings) -> _Outcome:
    """The hook's decision for the job ``args`` describes, with what it read."""
    site = lookup.site_fetcher(settings, args.server)
    record = _Recorder(lookup.fetcher(settings, args.server), site)
    params = PredictorParams.from_settings(settings)
    ncpus = calibrated.ncpus_of({"ncpus": args.ncpus, "select": args.select})
    this = JobEvent(args.event, args.user, args.queue, args.walltime, None, ncpus=ncpus)
    site_readers = calibrated.SiteFetch(record.history, site.calibration)
    learned = _recording_learned(settings, args.server, record.seen)
    decision = decide(this, settings, record, params=params, site=site_readers, learned=learned)
    if decision.prediction is not None and settings.predictor == calibrated.NAME:
        return _Outcome(
            decision, ncpus, record, calibrated.NAME, calibrated.HISTORY_ROWS, site.calibration()
        )
    if decision.prediction is not None and learned is not None:
        return _Outcome(decision, ncpus, record, LEARNED, LEARNED_HISTORY_ROWS, learned.table())
    limit = params.history_jobs(settings.predictor)
    return _Outcome(decision, ncpus, record, "history", limit, None)


def _json_report(args: argparse.Namespace, settings: Settings, found: _Outcome) -> Dict[str, Any]:
    """``predict --json``: the keys of :data:`JSON_KEYS`, in their order."""
    decision, prediction, table = found.decision, found.decision.prediction, found.table
    history: List[Dict[str, Optional[int]]] = (
        [{"runtime_s": r, "walltime_s": w, "ncpus": c} for r, w, c in found.record.class_rows]
        if found.kind == calibrated.NAME
        else [{"runtime_s": r, "walltime_s": w, "ncpus": None} for r, w in found.record.seen]
    )
    values = {
        "user": args.user,
        "walltime_s": args.walltime,
        "predictor": settings.predictor,
        "event": args.event,
        "queue": args.queue,
        "ncpus": found.ncpus,
        "soft_walltime_s": decision.soft_walltime_s,
        "predicted_s": prediction.soft_walltime_s if prediction else None,
        "rank_s": decision.computed_rank_s,
        "dry_run": settings.dry_run,
        "reason": decision.reason,
        "basis_jobs": prediction.basis_jobs if prediction else 0,
        "basis_value": prediction.basis_value if prediction else None,
        "history_limit": found.limit,
        "history": history,
        "calibration": {"jobs": table.total, "lambda": table.lam} if table else None,
    }
    return {k: values[k] for k, _ in JSON_KEYS}


def _text_report(settings: Settings, found: _Outcome) -> List[str]:
    """``predict``'s lines: the soft walltime, the rank, why, and the history read."""
    decision, prediction, limit = found.decision, found.decision.prediction, found.limit
    lines = []
    if decision.soft_walltime_s is not None:
        soft = decision.soft_walltime_s
        lines.append(f"soft_walltime: {format_duration(soft)} ({soft} s)")
    elif prediction is not None and prediction.soft_walltime_s is not None:
        soft = prediction.soft_walltime_s
        lines.append(
            f"soft_walltime: none set (dry run; would be {format_duration(soft)}, {soft} s)"
        )
    else:
        lines.append("soft_walltime: none (the hook leaves the job alone)")
    if decision.computed_rank_s is not None:
        lines.append(f"rank: {decision.computed_rank_s} s ({settings.rank}, for job_sort_formula)")
    lines.append(f"why: {decision.reason}")
    if found.kind == calibrated.NAME:
        rows = found.record.class_rows
        lines.append(
            f"calibration: {found.table.total} finished jobs learned,"
            f" lambda {found.table.lam:.4g}; job ncpus {found.ncpus}"
        )
        lines.append(f"history: {len(rows)} of at most {limit} jobs with walltime > 0")
        for runtime_s, walltime_s, cpus in rows[:10]:
            wall = "-" if walltime_s is None else format_duration(walltime_s)
            lines.append(f"  runtime {format_duration(runtime_s)}  walltime {wall}  ncpus {cpus}")
        if len(rows) > 10:
            lines.append(f"  ... {len(rows) - 10} more")
    elif prediction is not None:
        if found.kind == LEARNED:
            lines.append(
                f"learned table: {found.table.total} finished jobs learned,"
                f" lambda {found.table.lam:.4g}"
            )
        kind = "jobs with walltime > 0" if settings.predictor in (V3, LEARNED) else "jobs"
        lines.append(
            f"history: {len(found.record.seen)} of at most {limit} {kind}, most recent first"
        )
        for runtime_s, walltime_s in found.record.seen:
            wall = "-" if walltime_s is None else format_duration(walltime_s)
            lines.append(f"  runtime {format_duration(runtime_s)}  walltime {wall}")
    return lines


def _recording_learned(
    settings: Settings, server: Optional[str], seen: list[HistoryRow]
) -> Optional[LearnedFetch]:
    """Predictor learned's readers (None for another predictor), its rows recorded in
    ``seen`` as ``(runtime_s, walltime_s)``."""
    if settings.predictor != LEARNED:
        return None
    readers = lookup.learned_fetcher(settings, server)

    def history(user: str, limit: int) -> Any:
        rows, classes = readers.history(user, limit)
        seen.extend((r, w) for r, w, _n, _end in rows)
        return rows, classes

    return readers._replace(history=history)
