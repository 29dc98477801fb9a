"""The twin replay's source ``live``: the product runs as at a site (issue 29).

Each trace user of the segment becomes a Unix user (``swtw<uid>``, created for the replay
and deleted afterwards, only those created here); a throwaway PostgreSQL (unix socket)
holds the history, migrated with ``softwalltime db upgrade``; the hook is installed with
``softwalltime hooks install --rank``, as an admin would, with the product's time
constants compressed by the replay's factor (``reserve_s``, ``refresh_min_change_s``).
The segment's earlier jobs of the same users (the trace's ``history`` jobs before it,
compressed by the same factor and ending before the replay starts) are written as PBS
accounting E records and ingested with ``softwalltime ingest``, then the real server's
accounting directory is ingested once (so that the timers read only what the replay adds).

During the replay each job is submitted by its own user at its scaled submit time (no
hold, no manager: the hook's queuejob sets the soft walltime and the rank); ``softwalltime
ingest`` and ``softwalltime refresh`` run on the package's timers (5 and 15 minutes)
compressed by the factor, at least :data:`TIMER_FLOOR_S` apart. The simulation then reads
what the product really gave each job: the soft walltime and rank right after its qsub
(one ``qstat`` per batch), the soft walltime it ran with (``qstat -x``: the runjob event
predicts again), and the ranks ``refresh`` moved, from the time each refresh pass ended.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pbsctl
import psycopg2
import twin

from softwalltime.db.localpg import LocalCluster
from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim
from softwalltime.units import parse_duration

LIVE = "live"
HOOK = "softwalltime_twin"
MAX_USERS = 300
MAX_HISTORY = 10_000
USER_PREFIX = "swtw"
INGEST_S = 300  # the package's softwalltime-ingest timer
REFRESH_S = 900  # softwalltime-refresh.timer
TIMER_FLOOR_S = 3
HISTORY_SERVER = "twinhistory"  # the job ids' suffix of the ingested history
RESTART = ("python_restart_max_hooks", "python_restart_min_interval")


def softwalltime() -> str:
    """The ``softwalltime`` command beside this interpreter (the venv's)."""
    return str(Path(sys.executable).with_name("softwalltime"))


# ---------------------------------------------------------------------------------------
# Users and history (pure)


def unix_name(user: str) -> str:
    """The Unix user of a trace user: ``swtw`` and the trace's id (letters and digits)."""
    clean = re.sub(r"[^a-z0-9]", "", user.lower())[:24]
    if not clean:
        raise ValueError(f"trace user {user!r} has no letter or digit for a Unix name")
    return USER_PREFIX + clean


def segment_users(users: Sequence[str], cap: int = MAX_USERS) -> list[str]:
    """The segment's distinct trace users, in order of first job.

    :raises ValueError: more than ``cap`` of them
    """
    out = list(dict.fromkeys(users))
    if len(out) > cap:
        raise ValueError(f"the segment has {len(out)} users: at most {cap} Unix users are made")
    return out


class PastJob(NamedTuple):
    """A finished job of the history, epoch seconds."""

    user: str  # the Unix name
    submit: int
    start: int
    end: int
    wall: int
    procs: int


def history(
    work: sim.SimWorkload, first: int, n: int, count: int, factor: float, origin: int
) -> list[PastJob]:
    """Of the ``count`` trace jobs before the segment (jobs ``first`` .. ``first + n -
    1``), those of the segment's users, compressed by ``factor`` around ``origin`` (the
    epoch second the segment's first submit maps to). A job runs from its submit (the
    trace's wait is not kept); only those that end before ``origin`` are kept (the others
    would end during the replay)."""
    if not 0 <= count <= MAX_HISTORY:
        raise ValueError(f"history jobs must be 0 to {MAX_HISTORY}, not {count}")
    t0 = work.submit[first]
    users = set(work.user[first : first + n])
    out = []
    for j in range(max(0, first - count), first):
        if work.user[j] not in users:
            continue
        submit = origin + math.floor((work.submit[j] - t0) / factor)
        run = twin.scaled(work.run[j], factor)
        if submit + run >= origin:
            continue
        wall = max(twin.scaled(work.wall[j], factor), run)
        out.append(
            PastJob(unix_name(work.user[j]), submit, submit, submit + run, wall, work.procs[j])
        )
    return out


def _hms(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def accounting(jobs: Sequence[PastJob], server: str = HISTORY_SERVER) -> str:
    """``jobs`` as PBS accounting E records (OpenPBS 23.06's layout), one line each."""
    lines = []
    for n, j in enumerate(jobs, 1):
        date = time.strftime("%m/%d/%Y %H:%M:%S", time.gmtime(j.end))
        p = j.procs
        lines.append(
            f"{date};E;{n}.{server};user={j.user} group={j.user} project=_pbs_project_default"
            f" jobname=twin queue=workq ctime={j.submit} qtime={j.submit} etime={j.submit}"
            f" start={j.start} exec_host={server}/0*{p} exec_vnode=({server}:ncpus={p})"
            f" Resource_List.ncpus={p} Resource_List.nodect=1 Resource_List.place=pack"
            f" Resource_List.select=1:ncpus={p} Resource_List.walltime={_hms(j.wall)}"
            f" session=1 end={j.end} Exit_status=0 resources_used.cput=00:00:00"
            f" resources_used.walltime={_hms(j.end - j.start)} run_count=1\n"
        )
    return "".join(lines)


def settings(dsn: str, factor: float, rank: str) -> dict[str, Any]:
    """The site's config: the product's time constants compressed by ``factor``."""
    return {
        "dsn": dsn,
        "rank": rank,
        "reserve_s": twin.scaled(900, factor),
        "refresh_min_change_s": twin.scaled(300, factor),
        "accounting_dir": str(pbsctl.ACCOUNTING),
        "pbs_command_prefix": [str(pbsctl.PBSX)],
    }


def timer_periods(factor: float) -> tuple[int, int]:
    """(ingest, refresh) periods in seconds: the package's timers compressed."""
    return (
        max(TIMER_FLOOR_S, round(INGEST_S / factor)),
        max(TIMER_FLOOR_S, round(REFRESH_S / factor)),
    )


_RANK_MOVE = re.compile(r"^(\S+) user=.*softwalltime_rank \S+(?: s)? -> (\d+) s")
_SOFT_MOVE = re.compile(r"^(\S+) user=.*soft_walltime \S+ -> ([0-9:]+)")


def refresh_moves(lines: Sequence[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Of ``refresh --verbose``'s lines: ({job id: new rank}, {job id: new soft walltime})."""
    ranks, softs = {}, {}
    for line in lines:
        if m := _RANK_MOVE.match(line):
            ranks[m.group(1)] = int(m.group(2))
        if m := _SOFT_MOVE.match(line):
            softs[m.group(1)] = parse_duration(m.group(2))
    return ranks, softs


# ---------------------------------------------------------------------------------------
# The simulated twin with the product's outputs (pure)


class _Given(sim.EstimateSource):
    """At submit, the soft walltime the hook gave at queuejob; at start, the one the job
    ran with (the runjob event predicts again); the walltime where none."""

    name = LIVE

    def __init__(self, queued: Sequence[int], started: Sequence[int]) -> None:
        self.queued, self.started = list(queued), list(started)

    def on_submit(self, j: int, now: int) -> int:
        return self.queued[j]

    def on_start(self, j: int, now: int) -> int:
        return self.started[j]


class GivenRanker(pbsched.Ranker):
    """The ranks the hook gave at queuejob, moved by refresh at the times it did."""

    name = LIVE

    def __init__(self, first: Sequence[int], moves: Sequence[tuple[int, int, int]]) -> None:
        super().__init__(0)
        self.first = list(first)
        self.moves = sorted(moves)  # (time, job, rank)

    def bind(self, work: sim.SimWorkload) -> None:
        super().bind(work)
        self.due = 0

    def on_submit(self, j: int, now: int) -> None:
        self.rank[j] = self.first[j]

    def on_end(self, j: int, now: int) -> None:
        pass

    def refresh(self, queue: Sequence[int], now: int) -> list[int]:
        changed = []
        while self.due < len(self.moves) and self.moves[self.due][0] <= now:
            _, j, r = self.moves[self.due]
            self.due += 1
            if r != self.rank[j]:
                self.rank[j] = r
                changed.append(j)
        return changed


class Outputs(NamedTuple):
    """What the product gave each job (seconds; a missing value is None)."""

    queued_soft: list[int | None]  # right after qsub
    queued_rank: list[int | None]
    soft: list[int | None]  # what it ran with
    soft_mark: list[int | None]  # softwalltime_set: the hook's mark
    rank: list[int | None]
    rank_moves: list[tuple[int, int, int]]  # (time since t0, job, rank) set by refresh
    soft_moves: int  # soft walltimes refresh changed


def simulate(
    jobs: Sequence[twin.TwinJob],
    submit: Sequence[int],
    out: Outputs,
    procs: int,
    policy: pbsched.Policy,
    epoch: int,
) -> list[int]:
    """Simulated starts of ``jobs`` with the product's outputs ``out``; as
    :func:`twin.simulate` otherwise."""
    order = sorted(range(len(jobs)), key=lambda k: (submit[k], k))
    pos = {k: p for p, k in enumerate(order)}
    rows = [(pbsctl.USER, submit[k], jobs[k].wall, jobs[k].run, jobs[k].procs) for k in order]
    work = sim.make_workload("twin", rows, procs)
    assert len(work.submit) == len(jobs)

    def est(values: Sequence[int | None], k: int) -> int:
        value = values[k]
        return jobs[k].wall if value is None else value

    source = _Given([est(out.queued_soft, k) for k in order], [est(out.soft, k) for k in order])
    ranker = GivenRanker(
        [out.queued_rank[k] or 0 for k in order], [(t, pos[k], r) for t, k, r in out.rank_moves]
    )
    start = pbsched.simulate_pbs(work, source, procs, policy, ranker=ranker, epoch=epoch).start
    result = [0] * len(jobs)
    for p, k in enumerate(order):
        result[k] = start[p]
    return result


# ---------------------------------------------------------------------------------------
# The site: Unix users, database, hook


def run_cli(config: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``softwalltime --config CONFIG ARGS`` inside PBS's namespaces (refresh runs qstat)."""
    return pbsctl.run(softwalltime(), "--config", str(config), *args, timeout=timeout, check=False)  # type: ignore[no-any-return]


def create_users(names: Sequence[str], created: list[str]) -> None:
    """Unix users ``names`` (home and bash, as build.sh makes alice); those made here go
    to ``created`` (an existing user is used, never deleted)."""
    for name in names:
        if subprocess.run(["id", "-u", name], capture_output=True, check=False).returncode == 0:
            continue
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True, timeout=60)
        created.append(name)


def delete_users(names: Sequence[str]) -> list[str]:
    """Delete the users ``names`` made here, after their processes (qsub's daemon, which
    stays after a qsub) by pid; the failures, one line each."""
    failed = []
    for name in names:
        pids = subprocess.run(
            ["pgrep", "-u", name], capture_output=True, text=True, check=False
        ).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), 15)
            except ProcessLookupError:
                pass
        for _ in range(50):
            proc = subprocess.run(
                ["userdel", "-r", name], capture_output=True, text=True, check=False
            )
            if proc.returncode in (0, 6):  # 6: no such user
                break
            time.sleep(0.1)  # the killed processes exit; bounded (5 s)
        else:
            failed.append(f"userdel {name}: {proc.stderr.strip()}")
    return failed


class Site(NamedTuple):
    dsn: str
    config: Path
    workdir: Path


def _database(cluster: LocalCluster) -> str:
    conn = psycopg2.connect(cluster.dsn("postgres"))
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute('CREATE DATABASE "twin"')
    finally:
        conn.close()
    return cluster.dsn("twin")


def _check(proc: subprocess.CompletedProcess[str], what: str) -> str:
    if proc.returncode != 0:
        raise pbsctl.PbsError(f"{what} -> {proc.returncode}: {proc.stderr or proc.stdout}")
    return proc.stdout


@contextmanager
def site(factor: float, rank: str = "key-mean") -> Iterator[Site]:
    """A database migrated by ``db upgrade`` and the hook installed by ``hooks install
    --rank`` reading it, with this checkout's modules in pbs_server's interpreter; the
    hook (and its resources), python_restart_* and the database gone afterwards. Inside
    :func:`twin.server` (the caller purges its jobs before leaving)."""
    workdir = Path(tempfile.mkdtemp(prefix="swt-twin-"))
    pgdir = tempfile.mkdtemp(prefix="swt-twin-pg-")  # LocalCluster gives it to postgres
    cluster = LocalCluster(pgdir)
    saved = {name: pbsctl.server_attribute(name) for name in RESTART}
    installed = False
    try:
        cluster.start()
        dsn = _database(cluster)
        config = workdir / "softwalltime.json"
        config.write_text(json.dumps(settings(dsn, factor, rank)))
        _check(run_cli(config, "db", "upgrade"), "db upgrade")
        installed = True
        _check(
            run_cli(config, "hooks", "install", "--name", HOOK, "--rank", "--operator", ""),
            "hooks install",
        )
        probe: list[str] = []
        try:
            pbsctl.reload_hook_modules(probe)
        finally:
            pbsctl.purge(probe)
            for name, value in saved.items():
                pbsctl.set_attribute("server", name, value)
        yield Site(dsn, config, workdir)
    finally:
        if installed:
            pbsctl.run(softwalltime(), "hooks", "uninstall", "--name", HOOK, check=False)
        for name, value in saved.items():
            pbsctl.set_attribute("server", name, value)
        cluster.destroy()
        shutil.rmtree(pgdir, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# The timers


class Timer:
    """A command run every ``period`` s in a thread from :meth:`start` to :meth:`stop`
    (the next run is due a period after the last one began, as a systemd timer's
    ``OnUnitActiveSec``); each run's (end time, exit status, stdout, stderr)."""

    def __init__(self, name: str, config: Path, args: Sequence[str], period: int) -> None:
        self.name, self.config, self.args, self.period = name, config, list(args), period
        self.runs: list[tuple[float, int, str, str]] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def run_once(self) -> tuple[float, int, str, str]:
        proc = run_cli(self.config, *self.args, timeout=max(60, 4 * self.period))
        run = (time.time(), proc.returncode, proc.stdout, proc.stderr)
        self.runs.append(run)
        return run

    def _loop(self) -> None:
        while not self.stopping.wait(self.period):  # the timer's period, not a sync
            try:
                self.run_once()
            except subprocess.TimeoutExpired as err:
                self.runs.append((time.time(), -1, "", f"timed out: {err}"))

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=600)

    def failures(self) -> list[str]:
        return [
            f"{self.name}: exit {rc}: {(err or out).strip()[-300:]}"
            for _, rc, out, err in self.runs
            if rc != 0
        ]

    def summary(self) -> str:
        ok = sum(rc == 0 for _, rc, _, _ in self.runs)
        return f"{self.name} every {self.period} s: ran {len(self.runs)} times, {ok} succeeded"


# ---------------------------------------------------------------------------------------
# The replay


@contextmanager
def unix_users(names: Sequence[str]) -> Iterator[list[str]]:
    """The Unix users ``names`` for the replay; those made here deleted afterwards.

    :raises ValueError: more than :data:`MAX_USERS` names, before any is made
    """
    segment_users(names)
    created: list[str] = []
    try:
        create_users(names, created)
        yield created
    finally:
        failed = delete_users(created)
        if failed:
            raise pbsctl.PbsError("; ".join(failed[:5]))


def ingest_history(s: Site, past: Sequence[PastJob]) -> str:
    """The history written as an accounting file and ingested, then the server's
    accounting directory once (the timers then read only what the replay adds); the
    ingester's summary lines."""
    path = s.workdir / "history"
    path.write_text(accounting(past))
    one = _check(run_cli(s.config, "ingest", "--no-progress", str(path)), "ingest (history)")
    two = _check(run_cli(s.config, "ingest", "--no-progress"), "ingest (accounting)")
    return one + two


def qsub_line(job: twin.TwinJob, name: str) -> str:
    """Submit ``job`` as ``name`` (runuser: no login shell); prints its id, or FAIL."""
    return (
        f"echo 'sleep {job.run}' | runuser -u {name} -- /opt/pbs/bin/qsub -N twin"
        f" -o /dev/null -e /dev/null -l select=1:ncpus={job.procs} -l walltime={job.wall}"
        " || echo FAIL"
    )


def batch_script(qsubs: Sequence[str]) -> str:
    """The qsubs of jobs due in the same second, with scheduling off around them when
    there are several: each qsub kicks a cycle, which could start the first job before
    the next is queued, where the simulator (whole seconds) sees them in one cycle. The
    held jobs of the other sources are released together for the same reason."""
    if len(qsubs) == 1:
        return qsubs[0]
    off, on = (f"qmgr -c 'set server scheduling = {v}' >/dev/null" for v in ("False", "True"))
    return "\n".join([off, *qsubs, on])


def _seconds(value: Any) -> int | None:
    if value is None:
        return None
    return int(value) if isinstance(value, (int, float)) else parse_duration(str(value))


def _values(info: dict[str, Any], names: Sequence[str]) -> list[int | None]:
    res = info.get("Resource_List", {})
    return [_seconds(res.get(n)) for n in names]


def submit_live(
    jobs: Sequence[twin.TwinJob],
    names: Sequence[str],
    ids: list[str],
    queued: dict[str, dict[str, Any]],
) -> list[float]:
    """Each job by its user at its scaled submit time (jobs due together in one batch);
    ids go to ``ids`` as known, each batch's ``qstat -f`` right after it to ``queued``.
    Returns each job's qsub latency (its batch's time over its jobs, s)."""
    root, stat = twin.Shell(), twin.Shell()
    latency: list[float] = []
    try:
        root.lines("cd /tmp; echo OK", 1)
        for k, batch in twin.due_batches(jobs):
            began = time.monotonic()
            got = root.lines(
                batch_script([qsub_line(jobs[j], names[j]) for j in batch]), len(batch)
            )
            latency += [(time.monotonic() - began) / len(batch)] * len(batch)
            ids += [g for g in got if "." in g]
            if len(ids) != k + len(batch):
                raise pbsctl.PbsError(f"qsub failed: {got}")
            (line,) = stat.lines(f"qstat -f -F json {' '.join(got)} | tr -d '\\n'; echo", 1)
            queued.update(json.loads(line or "{}").get("Jobs", {}))
    finally:
        root.close()
        stat.close()
    return latency


def wait_finished(ids: Sequence[str], timeout: float) -> None:
    """Wait (at most ``timeout`` s) until every job of ``ids`` has finished."""
    deadline = time.monotonic() + timeout
    while True:
        done = set(pbsctl.run("qselect", "-x", "-s", "F", timeout=300).stdout.split())
        left = set(ids) - done
        if not left:
            return
        if time.monotonic() > deadline:
            raise pbsctl.PbsError(f"{len(left)} jobs not finished in {timeout:.0f} s")
        time.sleep(1)  # polling, bounded by the deadline


def outputs(
    ids: Sequence[str],
    queued: dict[str, dict[str, Any]],
    final: dict[str, dict[str, Any]],
    refreshes: Sequence[tuple[float, int, str, str]],
    t0: int,
) -> Outputs:
    """What the product gave each job, from the ``qstat`` after its qsub (``queued``), the
    ``qstat -x`` after it ended (``final``) and refresh's passes (end time, exit status,
    ``--verbose --json`` output)."""
    index = {i: k for k, i in enumerate(ids)}
    q = [_values(queued.get(i, {}), ("soft_walltime", "softwalltime_rank")) for i in ids]
    f = [_values(final[i], ("soft_walltime", "softwalltime_set", "softwalltime_rank")) for i in ids]
    moves: list[tuple[int, int, int]] = []
    soft_moves = 0
    for end, rc, out, _ in refreshes:
        if rc != 0 or not out.strip():
            continue
        ranks, softs = refresh_moves(json.loads(out).get("jobs") or [])
        soft_moves += sum(i in index for i in softs)
        moves += [(math.ceil(end) - t0, index[i], r) for i, r in ranks.items() if i in index]
    return Outputs(
        queued_soft=[v[0] for v in q],
        queued_rank=[v[1] for v in q],
        soft=[v[0] for v in f],
        soft_mark=[v[1] for v in f],
        rank=[v[2] for v in f],
        rank_moves=moves,
        soft_moves=soft_moves,
    )


def _compare(
    jobs: Sequence[twin.TwinJob],
    ids: Sequence[str],
    queued: dict[str, dict[str, Any]],
    refreshes: Sequence[tuple[float, int, str, str]],
    procs: int,
    policy: pbsched.Policy,
) -> tuple[twin.Replay, Outputs]:
    """The real times and the product's outputs from ``qstat -x``; the simulations."""
    info = twin.finished_info(ids)
    eligible, starts, ends = (
        [twin._epoch(info[i], i, name) for i in ids] for name in ("etime", "stime", "obittime")
    )
    t0 = min(eligible)
    submit = [e - t0 for e in eligible]
    out = outputs(ids, queued, info, refreshes, t0)
    simulated = simulate(jobs, submit, out, procs, policy, t0)
    measured = simulate(twin.measured_runs(jobs, starts, ends), submit, out, procs, policy, t0)
    runs = [e - s for s, e in zip(starts, ends)]
    real = [s - t0 for s in starts]
    return twin.Replay(t0, list(ids), submit, real, simulated, measured, runs), out


class LiveRun(NamedTuple):
    replay: twin.Replay
    out: Outputs
    latency: list[float]  # s per qsub
    timers: list[Timer]
    by_timers: int  # finished jobs the timers' ingest had stored when the last ended
    final_ingest: str  # the summary of one more ingest then


def replay(
    s: Site,
    jobs: Sequence[twin.TwinJob],
    names: Sequence[str],
    procs: int,
    policy: pbsched.Policy,
    factor: float,
) -> LiveRun:
    """Run ``jobs`` on the server by their users with the hook, ingest and refresh live,
    and simulate them with what the product gave each job. Inside :func:`site`; the jobs
    stay (for the caller to purge with :func:`twin.purge_all`). Raises if a timer failed."""
    every_ingest, every_refresh = timer_periods(factor)
    lock = str(s.workdir / "refresh.lock")
    timers = [
        Timer("ingest", s.config, ["ingest", "--no-progress"], every_ingest),
        Timer(
            "refresh",
            s.config,
            ["refresh", "--hook", HOOK, "--lock-file", lock, "--verbose", "--json"],
            every_refresh,
        ),
    ]
    twin.apply_policy(policy, rank=True)
    ids: list[str] = []
    queued: dict[str, dict[str, Any]] = {}
    try:
        for t in timers:
            t.start()
        try:
            latency = submit_live(jobs, names, ids, queued)
            planned = sum(j.run for j in jobs) + max(j.submit for j in jobs)
            wait_finished(ids, planned + 120)
        finally:
            for t in timers:
                t.stop()
        failed = [line for t in timers for line in t.failures()]
        if failed:
            raise pbsctl.PbsError("timers failed: " + "; ".join(failed[:5]))
        by_timers = len(ingested(s.dsn, ids))
        final_ingest = _check(run_cli(s.config, "ingest", "--no-progress"), "ingest (final)")
        run, out = _compare(jobs, ids, queued, timers[1].runs, procs, policy)
        return LiveRun(run, out, latency, timers, by_timers, final_ingest)
    except BaseException:
        twin.purge_all(ids)
        raise


# ---------------------------------------------------------------------------------------
# Afterwards: the database and the report


def ingested(dsn: str, ids: Sequence[str]) -> dict[str, str]:
    """{job id: user} of the history rows of ``ids``."""
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            cur.execute(
                "SELECT job_id, username FROM finished_jobs WHERE job_id = ANY(%s)", (list(ids),)
            )
            return {str(i): str(u) for i, u in cur.fetchall()}
    finally:
        conn.close()


def report(s: Site, since: int, out: Path) -> dict[str, Any]:
    """``softwalltime report`` of the jobs that ended since ``since`` (epoch s): the page
    written to ``out``, its figures (``--json``) returned."""
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since))
    _check(run_cli(s.config, "report", "--since", when, "--out", str(out)), "report")
    text = _check(run_cli(s.config, "report", "--since", when, "--json"), "report --json")
    return dict(json.loads(text))


def hook_counts(jobs: Sequence[twin.TwinJob], out: Outputs) -> dict[str, int]:
    """How many jobs ran with the hook's soft walltime (its mark equal to the value, at
    most the walltime), got one at queuejob, and carry a rank."""
    walls = [j.wall for j in jobs]
    soft = [-1 if v is None else v for v in out.soft]  # -1: none
    return {
        "soft walltime from the hook": sum(
            0 <= v <= w and v == m for v, m, w in zip(soft, out.soft_mark, walls)
        ),
        "soft walltime at queuejob": sum(v is not None for v in out.queued_soft),
        "rank": sum(v is not None for v in out.rank),
        "rank at queuejob": sum(v is not None for v in out.queued_rank),
        "soft walltime below the walltime": sum(0 <= v < w for v, w in zip(soft, walls)),
        "ranks moved by refresh": len(out.rank_moves),
        "soft walltimes moved by refresh": out.soft_moves,
    }


def report_users(fig: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The users the report names: in its per-user figure (``users``, every user; the
    page draws it without names) and among its worst users (on the page: those with at
    least ``MIN_JOBS_FOR_WORST`` jobs some of whose soft walltimes were under-estimated)."""
    per_user = (fig.get("users") or {}).get("per_user") or []
    worst = fig.get("worst_users") or []
    return [str(r["username"]) for r in per_user], [str(r["username"]) for r in worst]


def report_figures(fig: dict[str, Any]) -> str:
    """The report's totals (its JSON's ``totals``: jobs, before and after the deployment)."""
    totals = fig.get("totals", {})
    return ", ".join(f"{k} {v}" for k, v in totals.items() if isinstance(v, (int, float, str)))
