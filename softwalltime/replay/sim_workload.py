"""The jobs a simulation replays: one trace read into parallel lists (pure).

:func:`read_workload` reads SWF traces and PBS accounting logs through :mod:`.trace_readers`, the
reader of ``evaluate`` (same limits, same skip reasons), with each job's processors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..errors import ParseError
from .trace import SKIP_RUNTIME, SKIP_TIMES, SKIP_USER, SKIP_WALLTIME

if TYPE_CHECKING:
    from .trace_readers import InputLimits

SKIP_PROCS = "no processor count"
SKIP_TOO_WIDE = "more processors than the machine"


class SiteColumns(NamedTuple):
    """Per-job columns for a site-shaped replay (issue 46), parallel to the workload's:
    the job's ``Resource_List.select`` (e.g. ``"2:ncpus=8:mem=4gb+1:ncpus=1:brno=True"``; a
    legacy ``nodes=`` spec is converted by :mod:`.nodes`), ``place`` (``""``: PBS's default
    ``free``), the execution queue it ran in (``""``: the site's default routing), its group
    and account (``""``: none)."""

    select: List[str]
    place: List[str]
    queue: List[str]
    group: List[str]
    account: List[str]


class SimWorkload(NamedTuple):
    """Jobs to simulate, in FCFS order (submit time, then trace order): parallel lists."""

    source: str
    user: List[str]
    submit: List[int]
    run: List[int]
    """Run time as simulated: the trace's run time cut at the walltime."""
    wall: List[int]
    procs: List[int]
    machine_procs: Optional[int]
    """Processors of the machine from the trace header (SWF ``MaxProcs``), if any."""
    skipped: Dict[str, int]
    site: Optional[SiteColumns] = None
    """What a site-shaped replay needs of each job (None: a pool trace: ``procs`` cpus)."""
    real_start: Optional[List[int]] = None
    """When each job really started (SWF: submit + field 3's wait; PBS: the ``start`` of
    its E record), -1 where the trace does not say; None: no job's is known. What
    :mod:`.fit` measures the model against."""
    recorded_soft: Optional[List[int]] = None
    """The soft walltime each job had on the site (a PBS E record's
    ``Resource_List.soft_walltime``), -1 where none; None: no job had one. :mod:`.fit`
    replays the site's policy with them."""


def make_workload(
    source: str,
    rows: Sequence[
        Tuple[Optional[str], Optional[int], Optional[int], Optional[int], Optional[int]]
    ],
    machine_procs: Optional[int] = None,
    skipped: Optional[Dict[str, int]] = None,
    starts: Optional[Sequence[Optional[int]]] = None,
    site_rows: Optional[Sequence[Tuple[str, ...]]] = None,
    softs: Optional[Sequence[Optional[int]]] = None,
) -> SimWorkload:
    """Build a :class:`SimWorkload` from ``(user, submit_s, walltime_s, runtime_s, procs)`` rows.

    Rows are in trace order; unusable rows are skipped and counted by reason.

    :param starts: each row's real start (None: unknown), parallel to ``rows``
    :param site_rows: each row's ``(select, place, queue[, group, account])``, parallel to
        ``rows``
    :param softs: each row's recorded soft walltime (None: none), parallel to ``rows``
    """
    skipped = dict(skipped or {})
    keep = []
    for k, (user, submit, wall, run, procs) in enumerate(rows):
        reason = None
        if wall is None or wall <= 0:
            reason = SKIP_WALLTIME
        elif run is None or run < 0:
            reason = SKIP_RUNTIME
        elif not user:
            reason = SKIP_USER
        elif submit is None:
            reason = SKIP_TIMES
        elif procs is None or procs <= 0:
            reason = SKIP_PROCS
        if reason is not None:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        keep.append((submit, k, user, min(run, wall), wall, procs))  # type: ignore[type-var]
    keep.sort(key=lambda r: (r[0], r[1]))
    real_start = None
    if starts is not None and any(x is not None for x in starts):
        real_start = [_or_unknown(starts[r[1]]) for r in keep]
    recorded_soft = None
    if softs is not None and any(x is not None and x > 0 for x in softs):
        recorded_soft = [_or_unknown(softs[r[1]]) for r in keep]
    site = None
    if site_rows is not None:
        cols = [tuple(site_rows[r[1]]) + ("", "") for r in keep]
        site = SiteColumns(*([c[k] for c in cols] for k in range(5)))
    return SimWorkload(
        source=source,
        user=[r[2] for r in keep],  # type: ignore[misc]
        submit=[r[0] for r in keep],  # type: ignore[misc]
        run=[r[3] for r in keep],  # type: ignore[misc]
        wall=[r[4] for r in keep],  # type: ignore[misc]
        procs=[r[5] for r in keep],  # type: ignore[misc]
        machine_procs=machine_procs,
        skipped=skipped,
        site=site,
        real_start=real_start,
        recorded_soft=recorded_soft,
    )


def _or_unknown(value: Optional[int]) -> int:
    return -1 if value is None else value


def take(work: SimWorkload, keep: Sequence[int]) -> SimWorkload:
    """The jobs ``keep`` (indices, in order) of ``work``, every column (site ones too)."""
    site = work.site
    if site is not None:
        site = SiteColumns(*([col[k] for k in keep] for col in site))
    return work._replace(
        user=[work.user[k] for k in keep],
        submit=[work.submit[k] for k in keep],
        run=[work.run[k] for k in keep],
        wall=[work.wall[k] for k in keep],
        procs=[work.procs[k] for k in keep],
        site=site,
        real_start=None if work.real_start is None else [work.real_start[k] for k in keep],
        recorded_soft=None if work.recorded_soft is None else [work.recorded_soft[k] for k in keep],
    )


def fit_machine(work: SimWorkload, procs_total: int) -> SimWorkload:
    """Drop jobs wider than the machine (counted as skipped)."""
    wide = [k for k, p in enumerate(work.procs) if p > procs_total]
    if not wide:
        return work
    drop = set(wide)
    skipped = dict(work.skipped)
    skipped[SKIP_TOO_WIDE] = skipped.get(SKIP_TOO_WIDE, 0) + len(wide)
    keep = [k for k in range(len(work.procs)) if k not in drop]
    return take(work, keep)._replace(skipped=skipped)


def read_workload(
    path: str, limits: Optional[InputLimits] = None, site_columns: bool = False
) -> SimWorkload:
    """Read one SOURCE (SWF trace, PBS accounting file or directory) with processor counts.

    SWF: processors = field 5 (allocated), else field 8 (requested); ``; MaxProcs:`` gives
    the machine. PBS: ``ncpus`` of the ``E`` records (the machine must be given). The readers
    of ``evaluate`` (:mod:`.trace_readers`) read it: same limits, same skip reasons (malformed
    lines, duplicates, values beyond :mod:`.bounds`).

    :param limits: shared by the sources of one command (default: a fresh one)
    :param site_columns: read the columns of a site-shaped replay (:class:`SiteColumns`)
        where the trace has them (PBS accounting's: ``Resource_List.select``,
        ``Resource_List.place``, ``queue``, ``group``, ``account``; Alea's: queue and node
        spec); a job whose node spec no
        PBS select can say is then skipped, counted by reason. False: a pool's workload,
        every job with a processor count (the figures of the pool model stay as they were)
    :raises ParseError: the source cannot be read or is beyond the limits
    """
    import os

    from . import trace_readers

    if limits is None:
        limits = trace_readers.InputLimits()
    if os.path.isdir(path) or (
        os.path.exists(path) and trace_readers.sniff_format(path, limits) == trace_readers.PBS
    ):
        site_rows: Optional[List[Tuple[str, ...]]] = [] if site_columns else None
        trace = trace_readers.read_pbs([path], limits=limits, site_rows=site_rows)
        rows = [(j.user, j.submit_s, j.walltime_s, j.runtime_s, j.ncpus) for j in trace.jobs]
        pbs_starts = [j.start_s for j in trace.jobs]
        softs = [j.soft_walltime_s for j in trace.jobs]
        return make_workload(path, rows, None, trace.skipped, pbs_starts, site_rows, softs)
    if not os.path.exists(path):
        raise ParseError(f"{path}: no such file or directory")
    header = trace_readers.SwfHeader()
    skipped: Dict[str, int] = {}
    rows = []
    starts: List[Optional[int]] = []
    extra: List[List[str]] = []
    for user, submit_s, wait_s, run_s, alloc, req_procs, req_s in trace_readers.swf_rows(
        path, skipped, header, limits, extra
    ):
        procs = alloc if alloc is not None and alloc > 0 else req_procs
        rows.append(
            (user, submit_s, req_s, run_s, procs if procs is not None and procs > 0 else None)
        )
        starts.append(None if submit_s is None or wait_s is None else submit_s + wait_s)
    if site_columns and extra and all(len(x) >= 3 and x[0].startswith("{") for x in extra):
        keep, alea_rows = alea_requests(extra, skipped)
        rows, starts = [rows[k] for k in keep], [starts[k] for k in keep]
        return make_workload(path, rows, header.max_procs, skipped, starts, alea_rows)
    return make_workload(path, rows, header.max_procs, skipped, starts)


def alea_requests(
    extra: Sequence[Sequence[str]], skipped: Dict[str, int]
) -> Tuple[List[int], List[Tuple[str, str, str]]]:
    """The rows whose Alea node spec (column 21) a PBS select can say, and their
    ``(select, place, queue)``; the others are counted in ``skipped`` by reason
    (:mod:`.alea`)."""
    from . import alea

    keep: List[int] = []
    out: List[Tuple[str, str, str]] = []
    for k, cols in enumerate(extra):
        try:
            req = alea.to_select(cols[2])
        except alea.Unreadable as err:
            skipped[str(err)] = skipped.get(str(err), 0) + 1
            continue
        keep.append(k)
        out.append((req.select, req.place, cols[1]))
    return keep, out
