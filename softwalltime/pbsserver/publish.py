"""Show each queued job's predicted start to its owner: the job attribute
``Resource_List.softwalltime_wait`` (``softwalltime wait --publish``, from cron as a PBS
manager on the server host).

Why a job attribute: a user reads it with ``qstat -f JOBID`` like any other, with no
database credentials and no new file or service; PBS decides who sees it with the rules
it applies to the job itself (``query_other_jobs``), so nobody learns through it anything
qstat would not show them; and the accounting log's E record keeps the last value, so a
prediction can be checked against the start afterwards. The resource is a string with
``flag=r``: users read it and cannot set it (only managers and operators can).

The value is an absolute time in the server's zone, e.g.
``quick_starter:by_2026-11-25T12:52+0000`` (PQStar marked the job: it starts within the
quick-starter threshold) or ``predicted:about_2026-11-25T15:10+0000`` (the start time's
P50, :mod:`..wait.livestart`, else IBL's predicted wait). It is altered only when the
answer changed: the kind, an expired time (the minute it names has ended), or a predicted
start moved by more than max(15 min, 10 %) (each ``qalter`` writes an ``a`` record to the
accounting log).

:func:`value`, :func:`parse_value` and :func:`needs_update` are pure.
"""

from __future__ import annotations

import datetime
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from ..units import qstat_time
from .commands import Pbs, PbsError, chunks

RESOURCE = "softwalltime_wait"
RESOURCE_DIRECTIVE = f"create resource {RESOURCE} type=string, flag=r"
QUICK, PREDICTED = "quick_starter", "predicted"
_VALUE = re.compile(
    r"(quick_starter|predicted):(?:by|about)_(\d{4}-\d\d-\d\dT\d\d:\d\d[+-]\d{4})\Z"
)
_FORMAT = "%Y-%m-%dT%H:%M%z"
MIN_MOVE_S = 900
MIN_MOVE_FRACTION = 0.10
QALTER_IDS = 50  # job ids per qalter (as refresh)


def value(quick: bool, start_s: int) -> str:
    """The attribute's text: the kind and the start time (local time with its offset)."""
    when = datetime.datetime.fromtimestamp(start_s).astimezone().strftime(_FORMAT)
    return f"{QUICK}:by_{when}" if quick else f"{PREDICTED}:about_{when}"


def parse_value(text: Optional[str]) -> Optional[Tuple[bool, int]]:
    """(quick starter, start epoch) of a value :func:`value` wrote; None for anything else."""
    m = _VALUE.match(text or "")
    if m is None:
        return None
    try:
        when = datetime.datetime.strptime(m.group(2), _FORMAT)
    except ValueError:
        return None
    return m.group(1) == QUICK, int(when.timestamp())


def needs_update(old: Optional[str], quick: bool, start_s: int, now_s: int) -> bool:
    """Whether the published value must change (see the module docstring)."""
    parsed = parse_value(old)
    if parsed is None:
        return True
    was_quick, was_s = parsed
    if was_quick != quick or was_s + 60 <= now_s:  # expired: the minute it names has ended
        return True
    if quick:
        return False  # a promise made earlier still holds while PQStar still marks the job
    return abs(start_s - was_s) > max(MIN_MOVE_S, MIN_MOVE_FRACTION * max(0, was_s - now_s))


@dataclass
class PublishSummary:
    seen: int = 0
    changed: int = 0
    unchanged: int = 0
    errors: int = 0
    skipped: int = 0  # not predicted: the time budget ran out
    elapsed_s: float = 0.0
    dry_run: bool = False
    lines: List[str] = field(default_factory=list)

    def line(self) -> str:
        verb = "would change" if self.dry_run else "changed"
        return (
            f"publish: {self.seen} queued jobs, {self.changed} {verb}, {self.unchanged}"
            f" unchanged, {self.skipped} not predicted (time budget), {self.errors} errors"
            f" in {self.elapsed_s:.1f} s"
        )


def ensure_resource(pbs: Pbs) -> bool:
    """Create the resource if PBS does not have it; True if it was created.

    :raises PbsError: it is missing and cannot be created (not a manager?)
    """
    if pbs.run("qmgr", "-c", f"list resource {RESOURCE}").returncode == 0:
        return False
    pbs.check("qmgr", "-c", RESOURCE_DIRECTIVE)
    return True


def publish(
    pbs: Pbs,
    queued: List[Tuple[str, Optional[str]]],
    predict: Callable[[str], Tuple[bool, int]],
    now_s: int,
    *,
    dry_run: bool = False,
    time_budget_s: float = 120.0,
    err: Callable[[str], None] = print,
) -> PublishSummary:
    """Predict each queued job and alter the attribute of those whose answer changed.

    :param queued: (job id, its current value) of the jobs to publish, oldest first
    :param predict: job id -> (quick starter, predicted start epoch)
    """
    started = time.monotonic()
    summary = PublishSummary(seen=len(queued), dry_run=dry_run)
    by_value: Dict[str, List[str]] = {}
    for index, (job_id, old) in enumerate(queued):
        if time.monotonic() - started > time_budget_s:
            summary.skipped = len(queued) - index
            break
        quick, start_s = predict(job_id)
        if not needs_update(old, quick, start_s, now_s):
            summary.unchanged += 1
            continue
        new = value(quick, start_s)
        by_value.setdefault(new, []).append(job_id)
        summary.lines.append(f"{job_id}: {old or 'unset'} -> {new}")
    for new, ids in by_value.items():
        for group in chunks(ids, QALTER_IDS):
            if dry_run:
                summary.changed += len(group)
                continue
            proc = pbs.run("qalter", "-l", f"{RESOURCE}={new}", *group)
            if proc.returncode == 0:
                summary.changed += len(group)
                continue
            # a job may have started or gone meanwhile: qalter says which, one line each
            detail = " ".join((proc.stderr or proc.stdout or "").split()) or "no output"
            failed = sum(1 for job_id in group if job_id in detail)
            summary.errors += failed or len(group)
            summary.changed += len(group) - (failed or len(group))
            err(f"publish: qalter {RESOURCE}: {detail}")
    summary.elapsed_s = time.monotonic() - started
    return summary


__all__ = [
    "RESOURCE",
    "PbsError",
    "PublishSummary",
    "ensure_resource",
    "needs_update",
    "parse_value",
    "publish",
    "value",
]


@dataclass
class Published:
    """What a job's owner can learn of its start from the job itself (``qstat -f``)."""

    job_id: str
    user: str
    state: str  # PBS's job_state: Q queued, R running, H held, ...
    queued_since_s: Optional[int]
    answer: Optional[Tuple[bool, int]]  # (quick starter, start epoch) published, if any
    raw: Optional[str]  # the attribute as PBS shows it (another writer's text too)
    pbs_estimate_s: Optional[int]  # the scheduler's estimated.start_time, if it planned one


def find_published(jobs: Dict[str, Dict[str, object]], job_id: str) -> Optional[Published]:
    """The job ``job_id`` names in qstat's ``Jobs`` (its full id, or its number alone when
    one job has it), and what it carries: None when qstat does not show it."""
    attrs = jobs.get(job_id)
    if attrs is None and "." not in job_id:
        same = [k for k in jobs if k.split(".", 1)[0] == job_id]
        if len(same) == 1:
            job_id, attrs = same[0], jobs[same[0]]
    if not isinstance(attrs, dict):
        return None
    resources = attrs.get("Resource_List")
    raw = resources.get(RESOURCE) if isinstance(resources, dict) else None
    raw = raw if isinstance(raw, str) else None
    estimated = attrs.get("estimated")
    owner = attrs.get("euser") or str(attrs.get("Job_Owner") or "").split("@", 1)[0]
    return Published(
        job_id=job_id,
        user=str(owner),
        state=str(attrs.get("job_state") or "?"),
        queued_since_s=qstat_time(attrs.get("qtime") or attrs.get("ctime")),
        answer=parse_value(raw),
        raw=raw,
        pbs_estimate_s=qstat_time(estimated.get("start_time"))
        if isinstance(estimated, dict)
        else None,
    )
