"""Start times on the real server (issue 47): PBS's own ``estimated.start_time`` against
the product's ``wait`` P50 and P90, both read live from ``qstat`` during a twin replay
(:mod:`twin`), scored against the real starts.

What PBS needs so that every queued job gets an ``estimated.start_time``: OpenPBS 23.06
sets it only for a job it puts on its calendar (fifo.cpp:1788-1809, ``add_job_to_calendar``
then ``update_estimated_attrs``), and ``should_backfill_with_job`` (fifo.cpp:1610-1660)
calendars a job only while fewer than ``backfill_depth`` top jobs are planned (the
server's, fifo.cpp:1630-1631; 1 unset), with ``strict_ordering`` on. The server attribute
``est_start_time_freq`` of older PBS Pro does nothing any more (its action is a stub,
include/pbs_v1_module_common.i:657). So the twin sets ``backfill_depth`` to at least the
number of jobs that can be queued at once: the policy ``fcfs-bf<N>`` with N the segment's
job count (strict_ordering on, :func:`twin.apply_policy`; :func:`twin.server` restores
both). That is conservative backfilling: it changes the schedule, not only what PBS tells.

During the replay a :class:`Recorder` looks at the server (``qstat -x -f -F json``, every
job: :meth:`softwalltime.pbsserver.commands.Pbs.jobs` says why not by id) at each batch's
release, just before ``qrls`` (the batch counted as queued), and every ``interval``
seconds while jobs run. At each look it asks the product what ``softwalltime wait
--publish`` computes for every queued job (:func:`softwalltime.wait.livestart.predict_all`:
the P50 and P90 of 9 forward runs of the replay's policy, run times drawn from the jobs
finished by then, as ``wait --source qstat``) and reads each queued job's
``estimated.start_time``. :func:`score` scores both at the release and at every later look
(the refreshes), as :func:`twin.start_times` does: within 1 min, 10 min and 1 h
(compressed), all jobs and those that waited >= 10 min, and the P90's coverage.

PBS has no estimate at the release (its scheduler has not seen the job yet): its answer
"at the release" is the first estimate a later look shows; a job that started before any
later look saw it queued was run by the first cycle(s) after its release, and PBS's answer
is then its start (PBS knew). A look that shows a queued job without an estimate counts as
a miss for PBS.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import pbsctl
import twin

from softwalltime.replay import pbsched
from softwalltime.replay.trace import TraceJob
from softwalltime.units import duration_or_none, qstat_time
from softwalltime.wait import livestart
from softwalltime.wait.live import live_from_qstat

NONE = -1  # no estimate
WITHIN_S = (60, 600, 3600)
LONG_WAIT_S = 600
REFRESH_S = 300  # a look every 5 minutes, compressed (as `wait --publish` from cron)
MAX_JOBS_JSON = 100_000  # jobs of one qstat answer


class Sample(NamedTuple):
    """One job's predictions at one look (epoch seconds)."""

    job: str
    at: int
    release: bool  # the look just before the job's release
    pbs: int  # estimated.start_time; NONE: none shown
    p50: int
    p90: int


def finished_jobs(jobs: Mapping[str, Any]) -> list[TraceJob]:
    """The finished jobs (state F, with stime and obittime) of ``qstat -x -f -F json``."""
    out = []
    for attrs in jobs.values():
        if not isinstance(attrs, dict) or attrs.get("job_state") != "F":
            continue
        start, end = qstat_time(attrs.get("stime")), qstat_time(attrs.get("obittime"))
        if start is None or end is None:
            continue
        res = attrs.get("Resource_List") or {}
        out.append(
            TraceJob(
                user=str(attrs.get("euser") or ""),
                submit_s=qstat_time(attrs.get("ctime")),
                start_s=start,
                end_s=end,
                walltime_s=duration_or_none(res.get("walltime")),
                runtime_s=max(0, end - start),
                ncpus=int(res.get("ncpus") or 1),
                soft_walltime_s=duration_or_none(res.get("soft_walltime")),
            )
        )
    return out


def as_queued(jobs: Mapping[str, Any], ids: Sequence[str]) -> dict[str, Any]:
    """``jobs`` with ``ids`` (held, about to be released) in state Q."""
    return {k: ({**v, "job_state": "Q"} if k in ids else v) for k, v in jobs.items()}


def predictions(
    jobs: Mapping[str, Any], ours: set[str], now: int, procs: int, policy: pbsched.Policy
) -> dict[str, tuple[int, int, int]]:
    """Per queued job of ``ours``: (PBS's estimated.start_time or NONE, P50, P90)."""
    live, _left = live_from_qstat(jobs)
    answers = livestart.predict_all(live, finished_jobs(jobs), now, procs, policy)
    out = {}
    for j in live:
        if j.queued and j.job_id in ours and j.job_id in answers:
            est = qstat_time((jobs[j.job_id].get("estimated") or {}).get("start_time"))
            a = answers[j.job_id]
            out[j.job_id] = (NONE if est is None else est, a.p50, a.p90)
    return out


class Recorder:
    """The looks of one replay (thread-safe: the submit loop and the poller both look)."""

    def __init__(self, procs: int, policy: pbsched.Policy, interval: float) -> None:
        self.procs, self.policy, self.interval = procs, policy, interval
        self.ids: list[str] = []  # the replay's jobs, as known
        self.samples: list[Sample] = []
        self.look_s: list[float] = []  # each look's duration (qstat + predictions)
        self.lock = threading.Lock()

    def look(self, releasing: Sequence[str] = ()) -> None:
        started = time.monotonic()
        with self.lock:
            self.ids += [i for i in releasing if i not in self.ids]
            raw = pbsctl.run("qstat", "-x", "-f", "-F", "json", timeout=300).stdout
            jobs = twin_json(raw)
            now = int(time.time())
            got = predictions(as_queued(jobs, releasing), set(self.ids), now, self.procs,
                              self.policy)  # fmt: skip
            for job, (pbs, p50, p90) in got.items():
                self.samples.append(Sample(job, now, job in releasing, pbs, p50, p90))
            self.look_s.append(time.monotonic() - started)


def twin_json(text: str) -> dict[str, Any]:
    """qstat's ``Jobs`` object; refuses more than :data:`MAX_JOBS_JSON` jobs."""
    import json

    jobs = json.loads(text or "{}").get("Jobs", {})
    if len(jobs) > MAX_JOBS_JSON:
        raise pbsctl.PbsError(f"qstat shows {len(jobs)} jobs, more than {MAX_JOBS_JSON}")
    return jobs


@contextmanager
def polling(rec: Recorder) -> Iterator[None]:
    """``rec`` looks every ``rec.interval`` s in a thread until the block ends; a look's
    failure is raised at the end of the block."""
    stop = threading.Event()
    failed: list[BaseException] = []

    def loop() -> None:
        while not stop.wait(rec.interval):
            try:
                rec.look()
            except BaseException as err:  # handed to the caller
                failed.append(err)
                return

    thread = threading.Thread(target=loop, name="twin-start-poller", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=600)
    if failed:
        raise pbsctl.PbsError(f"a look at the server failed: {failed[0]!r}")


# ---------------------------------------------------------------------------------------
# Scoring (pure)


class Scored(NamedTuple):
    """One prediction of each kind for one job at one instant, and the truth."""

    job: str
    release: int  # the job's release (epoch s)
    start: int  # its real start
    pbs: int  # NONE: PBS gave none
    p50: int
    p90: int


def at_release(
    samples: Sequence[Sample], release: Mapping[str, int], start: Mapping[str, int]
) -> list[Scored]:
    """Each job's predictions at its release (see the module's docstring for PBS's)."""
    later: dict[str, list[Sample]] = {}
    for s in samples:
        if not s.release:
            later.setdefault(s.job, []).append(s)
    out = []
    for s in samples:
        if not s.release:
            continue
        seen = later.get(s.job, [])
        shown = [x.pbs for x in seen if x.pbs != NONE]
        pbs = shown[0] if shown else (start[s.job] if not seen else NONE)
        out.append(Scored(s.job, release[s.job], start[s.job], pbs, s.p50, s.p90))
    return out


def at_refresh(
    samples: Sequence[Sample], release: Mapping[str, int], start: Mapping[str, int]
) -> list[Scored]:
    """Every later look's predictions of a job still queued."""
    return [
        Scored(s.job, release[s.job], start[s.job], s.pbs, s.p50, s.p90)
        for s in samples
        if not s.release
    ]


def _share(hits: int, n: int) -> float | None:
    return round(100.0 * hits / n, 1) if n else None


def figures(rows: Sequence[Scored], factor: float) -> dict[str, Any]:
    """Per group (all, waited >= 10 min compressed): per method (PBS, P50, P90) the share
    within 1 min, 10 min, 1 h (compressed) of the real start (no estimate: a miss); the
    P90's coverage, and how many rows PBS left without an estimate."""
    within = [twin.scaled(s, factor) for s in WITHIN_S]
    long_wait = twin.scaled(LONG_WAIT_S, factor)
    groups = {"all": list(rows), "waited": [r for r in rows if r.start - r.release >= long_wait]}
    out: dict[str, Any] = {}
    for name, group in groups.items():
        n = len(group)
        per: dict[str, Any] = {"rows": n, "jobs": len({r.job for r in group})}
        for method in ("pbs", "p50", "p90"):
            per[method] = [
                _share(sum(getattr(r, method) != NONE and abs(getattr(r, method) - r.start) <= w
                           for r in group), n)
                for w in within
            ]  # fmt: skip
        per["p90_covers"] = _share(sum(r.start <= r.p90 for r in group), n)
        per["pbs_covers"] = _share(sum(r.pbs != NONE and r.start <= r.pbs for r in group), n)
        per["pbs_none"] = sum(r.pbs == NONE for r in group)
        out[name] = per
    return out


def report(fig: dict[str, Any], title: str) -> str:
    """:func:`figures` as a markdown table."""

    def cell(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    lines = [
        f"{title}",
        "| group | rows (jobs) | method | within 1 min % | within 10 min % | within 1 h %"
        " | start <= it % |",
        "|---|---|---|---|---|---|---|",
    ]
    for group, per in fig.items():
        for method, name, covers in (
            ("pbs", "PBS estimated.start_time", per["pbs_covers"]),
            ("p50", "wait P50", None),
            ("p90", "wait P90", per["p90_covers"]),
        ):
            a, b, c = (cell(v) for v in per[method])
            lines.append(
                f"| {group} | {per['rows']} ({per['jobs']}) | {name} | {a} | {b} | {c}"
                f" | {cell(covers)} |"
            )
    lines.append(
        "PBS gave no estimate in "
        + ", ".join(f"{per['pbs_none']} {g} rows" for g, per in fig.items())
    )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# What the setting costs the scheduler


class SchedCost(NamedTuple):
    cpu_s: float  # pbs_sched's user + system CPU over the replay
    cycles: int  # scheduling cycles it logged
    longest_s: int  # the longest cycle (the log's whole seconds)


def sched_cpu_s() -> float:
    """pbs_sched's user + system CPU seconds so far (/proc; its pid from sched.lock)."""
    import os

    pid = pbsctl.SCHED_LOCK.read_text().split()[0]
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cycles_since(since: float) -> tuple[int, int]:
    """(cycles, longest in s) the scheduler logged since ``since`` (epoch s)."""
    log = pbsctl.PBS_HOME / "sched_logs" / time.strftime("%Y%m%d", time.localtime(since))
    begun: int | None = None
    count = longest = 0
    for line in log.read_text(errors="replace").splitlines():
        stamp, _, rest = line.partition(";")
        try:
            at = int(time.mktime(time.strptime(stamp, "%m/%d/%Y %H:%M:%S")))
        except ValueError:
            continue
        if at < since:
            continue
        if rest.endswith("Starting Scheduling Cycle"):
            begun = at
        elif rest.endswith("Leaving Scheduling Cycle") and begun is not None:
            count, longest, begun = count + 1, max(longest, at - begun), None
    return count, longest


@contextmanager
def sched_cost(out: list[SchedCost]) -> Iterator[None]:
    """Appends to ``out`` what the block cost the scheduler."""
    cpu, since = sched_cpu_s(), time.time()
    yield
    cycles, longest = cycles_since(since)
    out.append(SchedCost(sched_cpu_s() - cpu, cycles, longest))
