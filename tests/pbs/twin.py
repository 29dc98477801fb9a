"""Twin replay: a segment of a real trace on the real OpenPBS server and in the simulator.

Shared by ``tests/pbs/test_twin_real.py`` (a short replay in ``make test-pbs``) and
``tests/benchmarks/bench_twin.py`` (``make bench-twin``); the pure parts (scaling, the
segment, the comparison) are unit-tested by ``tests/test_twin_compare.py`` without PBS.

A segment of N consecutive jobs is compressed by a factor F: submit times, run times and
walltimes are divided by F and rounded up to whole seconds (at least 1 s); a walltime stays
at least ``margin`` seconds over the run time, so that PBS never kills a job. Each job is a
``sleep <run>`` submitted as alice with ``-l select=1:ncpus=<procs> -l walltime=<wall>``,
held (``-h``) so that the manager can set its soft walltime (``qalter``) before the
scheduler may see it, then released (``qrls``: the job enters the queued state and the
server kicks the scheduler, svr_jobfunc.c:570-575). The release time is the submit time
both the server and the simulator see. The simulator replays the same jobs, submitted at
the real release times, with :func:`softwalltime.replay.pbsched.simulate_pbs`. The source
``live`` (``tests/pbs/twin_live.py``) submits each job as its own user with the product
running instead.
"""

from __future__ import annotations

import json
import math
import os
import select
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import pbsctl

from softwalltime.replay import formula as fm
from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim
from softwalltime.units import qstat_time
from softwalltime.wait import starteval

USERS = "users"  # no soft walltime: PBS plans with the walltime
PERFECT = "perfect"  # soft walltime = the scaled run time (+ soft margin)
SOURCES = (USERS, PERFECT)
SCHED_CONFIG = pbsctl.SCHED_CONFIG
NODE = pbsctl.NODE


class TwinJob(NamedTuple):
    """One job of a scaled segment: seconds, scaled."""

    submit: int  # since the segment's first submit
    run: int
    wall: int
    procs: int


# ---------------------------------------------------------------------------------------
# Scaling and the segment (pure)


def scaled(seconds: int, factor: float) -> int:
    """``seconds`` compressed by ``factor``, rounded up, at least 1."""
    return max(1, math.ceil(seconds / factor))


def scale(work: sim.SimWorkload, first: int, n: int, factor: float, margin: int) -> list[TwinJob]:
    """Jobs ``first`` .. ``first + n - 1`` of ``work`` compressed by ``factor``; walltimes at
    least ``margin`` s over the run times. Submit times count from the first job's
    (``math.floor``: jobs submitted together stay together)."""
    t0 = work.submit[first]
    out = []
    for j in range(first, min(first + n, len(work.submit))):
        run = scaled(work.run[j], factor)
        wall = max(scaled(work.wall[j], factor), run + margin)
        out.append(TwinJob(math.floor((work.submit[j] - t0) / factor), run, wall, work.procs[j]))
    return out


def segment_work(work: sim.SimWorkload, first: int, n: int) -> sim.SimWorkload:
    """Jobs ``first`` .. ``first + n - 1`` of ``work``, unscaled, submit times from 0."""
    end = min(first + n, len(work.submit))
    t0 = work.submit[first]
    rows = [
        (work.user[j], work.submit[j] - t0, work.wall[j], work.run[j], work.procs[j])
        for j in range(first, end)
    ]
    return sim.make_workload(work.source, rows, work.machine_procs)


def choose_segment(
    work: sim.SimWorkload, procs: int, n: int, candidates: int, policy: pbsched.Policy
) -> tuple[int, float, int]:
    """Among ``candidates`` windows of ``n`` jobs evenly spread over the trace, the one
    with the largest simulated mean wait (users' walltimes under ``policy``; first on a
    tie): (first job, mean wait s, simulated makespan s). Deterministic."""
    last = max(0, len(work.submit) - n)
    starts = sorted({last * k // max(1, candidates - 1) for k in range(candidates)})
    best = (-1.0, 0, 0)
    for first in starts:
        seg = segment_work(work, first, n)
        result = pbsched.simulate_pbs(seg, sim.WalltimeSource(), procs, policy)
        waits, _ = sim.job_outcomes(seg, result)
        span = max(s + r for s, r in zip(result.start, seg.run)) - seg.submit[0]
        mean = sum(waits) / len(waits)
        if mean > best[0]:
            best = (mean, first, span)
    return best[1], best[0], best[2]


def iteration_for(factor: float, iteration: int = pbsched.DEFAULT_ITERATION_S) -> int:
    """PBS's ``scheduler_iteration`` (600 s) compressed, at least 1 s."""
    return max(1, round(iteration / factor))


def fuzzy_for(factor: float, fuzzy: int = pbsched.DEFAULT_FUZZY_S) -> int:
    """PBS's ``opt_backfill_fuzzy`` (60 s) compressed: whole seconds, 0 (off: PBS's 1 s
    window) under a second."""
    return int(fuzzy / factor)


def policy(name: str, procs: int, factor: float, fuzzy: int | None = None) -> pbsched.Policy:
    """``name``: a policy of ``simulate --policies`` (``fcfs-bf1``), or a label of
    ``simulate --search``'s family (``xf2+age72h+len1``: backfill_depth 1, strict ordering,
    its constants in seconds divided by ``factor`` so that it orders the compressed jobs
    as the full formula orders the trace's; ``xf2.rank+len1-bf3``: backfill_depth 3).
    ``fuzzy``: the server's opt_backfill_fuzzy (default: PBS's compressed,
    :func:`fuzzy_for`)."""
    window = fuzzy_for(factor) if fuzzy is None else fuzzy
    return pbsched.parse_policy(
        fm.policy_text(name, procs, time_scale=factor),
        scheduler_iteration=iteration_for(factor),
        backfill_fuzzy=window,
    )


def soft_walltimes(jobs: Sequence[TwinJob], source: str, soft_margin: int = 0) -> list[int | None]:
    """The soft walltime each job gets (None: none, PBS plans with the walltime)."""
    if source == USERS:
        return [None] * len(jobs)
    if source == PERFECT:
        return [min(j.run + soft_margin, j.wall) for j in jobs]
    raise ValueError(f"unknown estimate source {source!r} (known: {', '.join(SOURCES)})")


# ---------------------------------------------------------------------------------------
# The simulated twin (pure)


class _Given(sim.EstimateSource):
    """The soft walltime the server saw, else the walltime (as PBS plans)."""

    def __init__(self, name: str, soft: Sequence[int | None]) -> None:
        self.name = name
        self.soft = list(soft)

    def on_submit(self, j: int, now: int) -> int:
        value = self.soft[j]
        return self.work.wall[j] if value is None else value


def simulate(
    jobs: Sequence[TwinJob],
    submit: Sequence[int],
    soft: Sequence[int | None],
    procs: int,
    policy: pbsched.Policy,
    epoch: int = 0,
) -> list[int]:
    """Simulated starts (s) of ``jobs`` submitted at ``submit`` (s; equal times keep the
    jobs' order), in the order of ``jobs``; ``epoch``: the epoch second of time 0 (where
    opt_backfill_fuzzy's windows fall)."""
    order = sorted(range(len(jobs)), key=lambda k: (submit[k], k))
    rows = [(pbsctl.USER, submit[k], jobs[k].wall, jobs[k].run, jobs[k].procs) for k in order]
    work = sim.make_workload("twin", rows, procs)
    assert len(work.submit) == len(jobs)  # nothing skipped, order kept (stable sort)
    given = _Given("twin", [soft[k] for k in order])
    start = pbsched.simulate_pbs(work, given, procs, policy, epoch=epoch).start
    out = [0] * len(jobs)
    for pos, k in enumerate(order):
        out[k] = start[pos]
    return out


def start_times(
    jobs: Sequence[TwinJob],
    submit: Sequence[int],
    real: Sequence[int],
    runs: Sequence[int],
    soft: Sequence[int | None],
    procs: int,
    policy: pbsched.Policy,
    factor: float,
    epoch: int = 0,
) -> dict[str, Any]:
    """The start-time predictions of issue 35 made at each job's release from the server's
    state then (the jobs queued and running, from the real starts and measured run times;
    the history of the jobs ended by then), scored against the real starts: ``eval-start``'s
    figures with its thresholds (1 min, 10 min, 1 h; the 10-minute wait) compressed by
    ``factor``. Times are moved to the epoch clock (``epoch``: time 0's second), where
    opt_backfill_fuzzy's windows fall."""
    order = sorted(range(len(jobs)), key=lambda k: (submit[k], k))
    rows = [
        (pbsctl.USER, epoch + submit[k], jobs[k].wall, max(1, runs[k]), jobs[k].procs)
        for k in order
    ]
    work = sim.make_workload("twin", rows, procs)
    est = [jobs[k].wall if soft[k] is None else soft[k] for k in order]
    truth = starteval.Truth([epoch + real[k] for k in order], est, list(est))
    preds = starteval.predict_targets(work, truth, procs, policy, range(len(order)))
    preds = starteval.with_pqstar(preds, work, truth, procs)
    within = [scaled(s, factor) for s in starteval.WITHIN_S]
    return starteval.figures(preds, within, scaled(starteval.LONG_WAIT_S, factor))


def start_report(fig: dict[str, Any]) -> str:
    """:func:`start_times`' figures as lines: per group, each method's shares."""

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f} %"

    lines = []
    for group, per in fig.items():
        lines.append(f"{group}: {per['jobs']} jobs, P90 covers {share(per['P90_coverage'])}")
        for method in starteval.METHODS:
            shares = ", ".join(f"{k[7:]} {share(v)}" for k, v in per[method].items())
            lines.append(f"  {method:<6} within {shares}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# The comparison (pure)


class Comparison(NamedTuple):
    jobs: int
    wait_real: float  # mean wait, s
    wait_sim: float
    bsld_real: float  # mean bounded slowdown
    bsld_sim: float
    pairs: int  # job pairs whose simulated starts differ by more than the tolerance
    concordant: int  # of those, the pairs started in the same order on the server
    abs_median: float  # |real start - simulated start|, s
    abs_p95: float
    divergent: list[int]  # jobs off by more than the tolerance, earliest first


def relative(real: float, simulated: float) -> float | None:
    """(real - simulated) / simulated; None when simulated is 0."""
    return None if simulated == 0 else (real - simulated) / simulated


def bounded_slowdowns(
    submit: Sequence[int], start: Sequence[int], run: Sequence[int], bound: float
) -> list[float]:
    return [max(1.0, (s - t + r) / max(r, bound)) for t, s, r in zip(submit, start, run)]


def order_pairs(real: Sequence[int], simulated: Sequence[int], tolerance: int) -> tuple[int, int]:
    """(pairs, concordant): pairs whose simulated starts differ by more than ``tolerance``,
    and those of them that started in the same strict order on the server."""
    pairs = concordant = 0
    n = len(simulated)
    for a in range(n):
        for b in range(a + 1, n):
            d = simulated[a] - simulated[b]
            if abs(d) <= tolerance:
                continue
            pairs += 1
            r = real[a] - real[b]
            concordant += (d > 0 and r > 0) or (d < 0 and r < 0)
    return pairs, concordant


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def compare(
    jobs: Sequence[TwinJob],
    submit: Sequence[int],
    real: Sequence[int],
    simulated: Sequence[int],
    tolerance: int,
    bound: float,
) -> Comparison:
    """Real against simulated starts (s, same origin as ``submit``)."""
    n = len(jobs)
    if not n or not (len(submit) == len(real) == len(simulated) == n):
        raise ValueError("jobs, submit, real and simulated starts must have one value per job")
    run = [j.run for j in jobs]
    diff = [abs(r - s) for r, s in zip(real, simulated)]
    pairs, concordant = order_pairs(real, simulated, tolerance)
    off = [k for k in range(n) if diff[k] > tolerance]
    off.sort(key=lambda k: (min(real[k], simulated[k]), k))
    return Comparison(
        jobs=n,
        wait_real=sum(r - t for r, t in zip(real, submit)) / n,
        wait_sim=sum(s - t for s, t in zip(simulated, submit)) / n,
        bsld_real=statistics.fmean(bounded_slowdowns(submit, real, run, bound)),
        bsld_sim=statistics.fmean(bounded_slowdowns(submit, simulated, run, bound)),
        pairs=pairs,
        concordant=concordant,
        abs_median=statistics.median(diff),
        abs_p95=_p95(diff),
        divergent=off,
    )


def agreement(c: Comparison) -> float:
    """Share of the pairs started in the simulated order (1.0 when there is no pair)."""
    return c.concordant / c.pairs if c.pairs else 1.0


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f} %"


def report(
    c: Comparison,
    jobs: Sequence[TwinJob],
    submit: Sequence[int],
    real: Sequence[int],
    simulated: Sequence[int],
    ids: Sequence[str] = (),
    first: int = 5,
) -> str:
    """The comparison as text: figures, then the first ``first`` divergent jobs."""
    lines = [
        f"jobs {c.jobs}",
        f"mean wait   real {c.wait_real:8.1f} s  simulated {c.wait_sim:8.1f} s  "
        f"({_pct(relative(c.wait_real, c.wait_sim))})",
        f"mean bsld   real {c.bsld_real:8.3f}    simulated {c.bsld_sim:8.3f}    "
        f"({_pct(relative(c.bsld_real, c.bsld_sim))})",
        f"same order  {c.concordant}/{c.pairs} pairs ({100 * agreement(c):.1f} %)",
        f"|real - simulated start|  median {c.abs_median:.1f} s  p95 {c.abs_p95:.1f} s  "
        f"({len(c.divergent)} jobs off by more than the tolerance)",
    ]
    if c.divergent:
        lines.append("first divergent jobs: #k (pbs id) submit procs run  simulated real")
    for k in c.divergent[:first]:
        pid = f" ({ids[k]})" if k < len(ids) else ""
        lines.append(
            f"  #{k}{pid} {submit[k]:5d} {jobs[k].procs:4d} {jobs[k].run:4d}"
            f"  {simulated[k]:5d} {real[k]:5d}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# The real server


class Shell:
    """A long-lived shell inside PBS's namespaces (as ``user``, or root): commands without
    a process start (nsenter, su) each; every read is bounded by a deadline."""

    def __init__(self, user: str | None = None) -> None:
        args = ["su", "-", user, "-c", "bash"] if user else ["bash"]
        self.errors = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [str(pbsctl.PBSX), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
        )
        self.buffer = b""

    def lines(self, script: str, count: int, timeout: float = 60) -> list[str]:
        """Run ``script``; the next ``count`` lines it prints."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(script.encode() + b"\n")
        self.proc.stdin.flush()
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while self.buffer.count(b"\n") < count:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                self.errors.seek(0)
                why = self.errors.read().decode(errors="replace")[-2000:]
                raise pbsctl.PbsError(f"shell: no answer to {script[:200]!r}: {why}")
            self.buffer += chunk
        *out, self.buffer = self.buffer.split(b"\n", count)
        return [line.decode().strip() for line in out]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.errors.close()


def qsub_line(job: TwinJob) -> str:
    """Submit ``job`` held; prints its id, or FAIL."""
    return (
        f"echo 'sleep {job.run}' | /opt/pbs/bin/qsub -h -N twin -o /dev/null -e /dev/null"
        f" -l select=1:ncpus={job.procs} -l walltime={job.wall} || echo FAIL"
    )


def alter_script(ids: Sequence[str], soft: Sequence[int | None]) -> str:
    """The manager's soft walltimes for the held jobs; prints OK."""
    alters = [f"qalter -l soft_walltime={s} {i}" for i, s in zip(ids, soft) if s is not None]
    return "; ".join([*alters, "echo OK"])


def release_script(ids: Sequence[str]) -> str:
    """The release of the held jobs; prints OK."""
    return f"qrls {' '.join(ids)}; echo OK"


def due_batches(jobs: Sequence[TwinJob]) -> Iterator[tuple[int, list[int]]]:
    """The submission clock: ``(first, batch)``, each batch of job indices (jobs due in
    the same second together) yielded at its scaled submit time, a monotonic clock from
    the first call; ``first`` is the number of jobs yielded before it."""
    t0 = time.monotonic()
    k = 0
    while k < len(jobs):
        wait = t0 + jobs[k].submit - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # the submission clock
        due = time.monotonic() - t0
        batch = [j for j in range(k, len(jobs)) if jobs[j].submit <= due]
        yield k, batch
        k += len(batch)


def submit_all(
    jobs: Sequence[TwinJob],
    soft: Sequence[int | None],
    ids: list[str],
    line: Callable[[int], str] | None = None,
    before_release: Callable[[list[str]], None] | None = None,
) -> list[float]:
    """Each job at its scaled submit time (a monotonic clock from now); jobs due together
    go in one batch (``line``: job k's qsub line, default :func:`qsub_line`'s). Their ids
    go to ``ids`` as they are known (for the caller to purge whatever happens); returns
    their release times (epoch s, taken just before the release, so that no job can start
    before it). ``before_release(batch ids)`` runs after the qalters, just before the
    release (:mod:`twin_start` looks at the server)."""
    alice, root = Shell(pbsctl.USER), Shell()
    released: list[float] = []
    try:
        for k, batch in due_batches(jobs):
            qsubs = [line(j) if line else qsub_line(jobs[j]) for j in batch]
            got = alice.lines("\n".join(qsubs), len(batch))
            ids += [g for g in got if "." in g]
            if len(ids) != k + len(batch):
                raise pbsctl.PbsError(f"qsub failed: {got}")
            if root.lines(alter_script(got, [soft[j] for j in batch]), 1) != ["OK"]:
                raise pbsctl.PbsError(f"qalter failed for {got}")
            if before_release is not None:
                before_release(got)
            at = time.time()  # after the qalters: a batch's take seconds
            if root.lines(release_script(got), 1) != ["OK"]:
                raise pbsctl.PbsError(f"qrls failed for {got}")
            released += [at] * len(batch)
    finally:
        alice.close()
        root.close()
    return released


def stat_jobs(ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``qstat -x -f -F json`` of ``ids`` (job history on), by id."""
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(ids), 100):
        proc = pbsctl.run(
            "qstat", "-x", "-f", "-F", "json", *ids[i : i + 100], check=False, timeout=300
        )
        out.update(json.loads(proc.stdout or "{}").get("Jobs", {}))
    return out


def known(ids: Sequence[str], finished: bool = False) -> set[str]:
    """Those of ``ids`` the server still knows (``finished``: only those finished); one
    ``qselect`` per call, much lighter on the server than ``qstat -f`` while it schedules."""
    states = ["-s", "F"] if finished else []
    out = pbsctl.run("qselect", "-x", *states, timeout=300).stdout
    return set(ids) & set(out.split())


def _epoch(info: dict[str, Any], jobid: str, name: str) -> int:
    value = qstat_time(info.get(name, ""))
    if value is None:
        raise pbsctl.PbsError(f"{jobid}: no {name} in qstat -x")
    return value


def real_times(ids: Sequence[str], timeout: float) -> tuple[list[int], list[int], list[int]]:
    """Wait (at most ``timeout`` s) until every job has finished; the times (epoch s) each
    became eligible (``etime``: the server sets it at the release of a held job,
    req_holdjob.c:318 and svr_jobfunc.c:579-580), started (``stime``) and ended
    (``obittime``). Raises if one did not run to its end (PBS killed it or failed to run it)."""
    deadline = time.monotonic() + timeout
    while left := set(ids) - known(ids, finished=True):
        if time.monotonic() > deadline:
            raise pbsctl.PbsError(f"{len(left)} jobs not finished in {timeout:.0f} s")
        time.sleep(1)  # polling, bounded by the deadline
    info = finished_info(ids)
    return tuple([_epoch(info[i], i, name) for i in ids] for name in ("etime", "stime", "obittime"))  # type: ignore[return-value]


def finished_info(ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``qstat -x -f`` of the finished jobs ``ids``; raises if one is unknown or did not
    end well (exit status not 0: PBS killed it or failed to run it)."""
    info = stat_jobs(ids)
    missing = [i for i in ids if i not in info]
    if missing:
        raise pbsctl.PbsError(f"qstat -x does not know {missing[:5]}")
    bad = [(i, info[i].get("Exit_status")) for i in ids if info[i].get("Exit_status") != 0]
    if bad:
        raise pbsctl.PbsError(f"jobs that did not end well (id, exit status): {bad[:5]}")
    return info


def purge_all(ids: Sequence[str], timeout: float = 300) -> None:
    """Delete the jobs and their history (``qdel -x -Wforce``) and wait until they are gone."""
    for i in range(0, len(ids), 100):
        pbsctl.run("qdel", "-x", "-Wforce", *ids[i : i + 100], check=False, timeout=300)
    deadline = time.monotonic() + timeout
    while known(ids):
        if time.monotonic() > deadline:
            raise pbsctl.PbsError(f"jobs still there after {timeout:.0f} s")
        time.sleep(0.5)


# ---------------------------------------------------------------------------------------
# Server settings: set for a replay, restored afterwards


def _node_ncpus() -> str | None:
    out = pbsctl.run("qmgr", "-c", f"list node {NODE} resources_available.ncpus").stdout
    for line in out.splitlines():
        key, _, value = line.strip().partition(" = ")
        if key == "resources_available.ncpus":
            return str(value)
    return None


SERVER_SAVED = ("backfill_depth", "scheduling", "eligible_time_enable", "job_history_enable")


@contextmanager
def server(procs: int) -> Iterator[None]:
    """The node with ``procs`` cpus, job history on; on exit the node's ncpus, sched_config,
    job_sort_formula, scheduler_iteration and the server's :data:`SERVER_SAVED` attributes
    as they were. The caller holds :func:`pbsctl.exclusive` and purges its jobs first.
    Refuses a server with jobs on it: they would run beside the replay (as the jobs of an
    interrupted one did once, a 128-cpu job among them)."""
    there = pbsctl.run("qselect").stdout.split()
    if there:
        raise pbsctl.PbsError(f"{len(there)} jobs on the server already: {there[:5]}")
    ncpus = _node_ncpus()
    config = SCHED_CONFIG.read_text()
    formula = pbsctl.sched_attribute("job_sort_formula")
    iteration = pbsctl.sched_attribute("scheduler_iteration")
    fuzzy = pbsctl.sched_attribute("opt_backfill_fuzzy")
    saved = {name: pbsctl.server_attribute(name) for name in SERVER_SAVED}
    try:
        pbsctl.qmgr("set server job_history_enable = True")
        pbsctl.qmgr(f"set node {NODE} resources_available.ncpus = {procs}")
        yield
    finally:
        SCHED_CONFIG.write_text(config)
        pbsctl.reload_scheduler()
        pbsctl.set_attribute("sched", "job_sort_formula", formula)
        pbsctl.set_attribute("sched", "scheduler_iteration", iteration)
        pbsctl.set_attribute("sched", "opt_backfill_fuzzy", fuzzy)
        for name, value in saved.items():
            pbsctl.set_attribute("server", name, value)
        pbsctl.set_attribute(f"node {NODE}", "resources_available.ncpus", ncpus)


def sched_config_with(text: str, strict_ordering: bool) -> str:
    """``text`` (sched_config) with its strict_ordering line set."""
    value = "True" if strict_ordering else "False"
    return pbsctl.sched_config_line(text, "strict_ordering", f"strict_ordering: {value}\tALL")


def apply_policy(policy: pbsched.Policy, rank: bool = False) -> None:
    """Set ``policy`` on the server (inside :func:`server`), as pbsched.pbs_settings says;
    a formula that reads the rank only with ``rank`` (the hook publishes it: the source
    ``live``)."""
    formula = pbsched.sort_formula(policy.job_sort_formula)
    if policy.classes != pbsched.CLASSES_PBS:
        raise ValueError(f"{policy.name}: the twin replays PBS's default classes only")
    if formula.reads_rank and not rank:
        raise ValueError(f"{policy.name}: only the hook publishes the rank (--sources live)")
    SCHED_CONFIG.write_text(sched_config_with(SCHED_CONFIG.read_text(), policy.strict_ordering))
    pbsctl.reload_scheduler()
    if formula.expression is None:
        pbsctl.qmgr("unset sched job_sort_formula", check=False)
    else:
        pbsctl.qmgr(f"set sched job_sort_formula = '{formula.expression}'")
    eligible = "True" if formula.time_dependent else "False"
    pbsctl.qmgr(f"set server eligible_time_enable = {eligible}")
    pbsctl.qmgr(f"set server backfill_depth = {policy.backfill_depth}")
    pbsctl.qmgr(f"set sched scheduler_iteration = {policy.scheduler_iteration}")
    if policy.backfill_fuzzy is None:
        raise ValueError(f"{policy.name}: no opt_backfill_fuzzy searches at every event")
    pbsctl.qmgr(f"set sched opt_backfill_fuzzy = {policy.backfill_fuzzy}")
    pbsctl.qmgr("set server scheduling = True")


class Replay(NamedTuple):
    epoch: int  # the epoch second of time 0 (the first release)
    ids: list[str]
    submit: list[int]  # eligible times (the release: etime), s since the first
    real: list[int]  # real starts, same origin
    simulated: list[int]  # simulated starts, the planned run times
    measured: list[int]  # simulated starts, the run times measured on the server
    runs: list[int]  # the run times measured on the server (obittime - stime)


def measured_runs(
    jobs: Sequence[TwinJob], start: Sequence[int], end: Sequence[int]
) -> list[TwinJob]:
    """``jobs`` with the run times the server measured (end - start, whole seconds, at
    least 1): a job lasts its ``sleep`` plus the time to start and end it."""
    return [j._replace(run=max(1, e - s)) for j, s, e in zip(jobs, start, end)]


def replay(
    jobs: Sequence[TwinJob],
    source: str,
    procs: int,
    policy: pbsched.Policy,
    soft_margin: int = 0,
    before_release: Callable[[list[str]], None] | None = None,
) -> Replay:
    """Run ``jobs`` on the server (inside :func:`server`) under ``policy`` with ``source``'s
    soft walltimes, and simulate them with the real release times. The jobs stay (for the
    caller to purge with :func:`purge_all`)."""
    apply_policy(policy)
    return run_jobs(jobs, source, procs, policy, soft_margin, before_release)


def run_jobs(
    jobs: Sequence[TwinJob],
    source: str,
    procs: int,
    policy: pbsched.Policy,
    soft_margin: int = 0,
    before_release: Callable[[list[str]], None] | None = None,
) -> Replay:
    """:func:`replay` under the policy the server has now (``policy``: what the simulation
    runs, which the caller says is the server's)."""
    soft = soft_walltimes(jobs, source, soft_margin)
    ids: list[str] = []
    try:
        submit_all(jobs, soft, ids, before_release=before_release)
        planned = sum(j.run for j in jobs) + max(j.submit for j in jobs)
        eligible, starts, ends = real_times(ids, timeout=planned + 120)
        t0 = min(eligible)
        submit = [e - t0 for e in eligible]
        simulated = simulate(jobs, submit, soft, procs, policy, t0)
        measured = simulate(measured_runs(jobs, starts, ends), submit, soft, procs, policy, t0)
    except BaseException:
        purge_all(ids)
        raise
    runs = [e - s for s, e in zip(starts, ends)]
    return Replay(t0, ids, submit, [s - t0 for s in starts], simulated, measured, runs)
