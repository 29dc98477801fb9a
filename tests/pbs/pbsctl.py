"""Driving the real OpenPBS server that ``make pbs-up`` starts from tests and benchmarks.

The harness that builds, starts and stops it is ``tests/pbs/server/``. PBS lives in its own
network namespace: every PBS command goes through ``pbsx`` (nsenter into that namespace).
Hooks inside pbs_server reach a database by unix socket only.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from softwalltime.pbsserver.commands import parse_qmgr_list

REPO = Path(__file__).resolve().parents[2]
OPENPBS = REPO / "tests" / "pbs" / "server"  # build.sh, up.sh, down.sh, pbsx
PBSX = OPENPBS / "pbsx"
PBS_HOME = Path("/var/spool/pbs")
SERVER_LOGS = PBS_HOME / "server_logs"
ACCOUNTING = PBS_HOME / "server_priv" / "accounting"
# One real server per machine, shared by every suite and benchmark that uses it.
LOCK_FILE = "/run/lock/softwalltime-pbs.lock"
USER = "alice"  # the ordinary user build.sh creates


class PbsError(RuntimeError):
    pass


def run(*args: str, timeout: float = 60, check: bool = True, stdin: str | None = None) -> Any:
    """Run a command inside PBS's namespaces; ``check`` raises with its output on failure."""
    proc = subprocess.run(
        [str(PBSX), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        raise PbsError(f"{' '.join(args)} -> {proc.returncode}: {proc.stderr or proc.stdout}")
    return proc


def as_user(command: str, user: str = USER, timeout: float = 60, check: bool = True) -> Any:
    """A shell command as an ordinary user (a login shell: PBS's bin is on its PATH)."""
    return run("su", "-", user, "-c", command, timeout=timeout, check=check)


def qmgr(directive: str, check: bool = True) -> Any:
    return run("qmgr", "-c", directive, check=check)


def qsub(options: str = "", script: str = "sleep 1", user: str = USER) -> str:
    """Submit ``script`` as ``user``; the job id."""
    out = as_user(f"echo {script!r} | /opt/pbs/bin/qsub {options}", user=user).stdout.strip()
    if not out or "." not in out:
        raise PbsError(f"qsub {options}: {out!r}")
    return str(out)


def qsub_timed(options: str = "", script: str = "sleep 1") -> tuple[str, float]:
    """Like :func:`qsub`, with the wall time of the qsub command itself (su excluded)."""
    out = as_user(
        "s=$(date +%s.%N); id=$(echo " + repr(script) + " | /opt/pbs/bin/qsub " + options + ");"
        ' e=$(date +%s.%N); echo "$id $s $e"'
    ).stdout.split()
    return out[0], float(out[2]) - float(out[1])


def job(jobid: str) -> dict[str, Any]:
    """``qstat -f -F json -x`` of one job (finished jobs too, with job history on)."""
    out = run("qstat", "-f", "-F", "json", "-x", jobid).stdout
    jobs = json.loads(out).get("Jobs", {})
    if len(jobs) != 1:
        raise PbsError(f"qstat {jobid}: {sorted(jobs)}")
    return dict(next(iter(jobs.values())))


def resource(jobid: str, name: str) -> str | None:
    return job(jobid).get("Resource_List", {}).get(name)


def qdel(*jobids: str) -> None:
    if jobids:
        run("qdel", "-Wforce", *jobids, check=False)


def wait_state(jobid: str, states: str, timeout: float = 60) -> str:
    """Wait until the job's state is one of ``states`` (e.g. "F"); the state."""
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = job(jobid).get("job_state", "")
        if state in states:
            return str(state)
        time.sleep(0.3)
    raise PbsError(f"{jobid} still in state {state!r} after {timeout} s (wanted {states})")


def wait_started(jobid: str, timeout: float = 60) -> dict[str, Any]:
    """Wait until the job runs and has its ``stime``; its ``qstat -f``. The server shows
    ``job_state`` R as soon as it sends the job to MoM and writes ``stime`` only once MoM
    has taken it (``complete_running``, src/server/req_runjob.c:1122-1166, called from
    ``post_sendmom``): between the two, a job in state R has no ``stime`` yet."""
    deadline = time.monotonic() + timeout
    info: dict[str, Any] = {}
    while time.monotonic() < deadline:
        info = job(jobid)
        if info.get("job_state") == "R" and info.get("stime"):
            return info
        time.sleep(0.3)
    raise PbsError(f"{jobid} not started after {timeout} s: state {info.get('job_state')!r}, "
                   f"stime {info.get('stime')!r}")  # fmt: skip


def finished_starts(jobids: list[str], timeout: float = 120) -> list[int]:
    """The jobs' real start times (``stime``), once all have finished, relative to the
    first to start."""
    from softwalltime.units import qstat_time

    for jobid in jobids:
        wait_state(jobid, "F", timeout=timeout)
    real = []
    for jobid in jobids:
        stime = qstat_time(job(jobid)["stime"])
        assert stime is not None, jobid
        real.append(stime)
    return [r - min(real) for r in real]


def purge(jobids: list[str], timeout: float = 60) -> None:
    """Delete jobs and their job history (``qdel -x -Wforce``), and wait until ``qstat -x``
    knows none of them: a job, even one finished in the history, keeps the resources it
    carries from being deleted ("Resource busy on job", 15174)."""
    if not jobids:
        return
    run("qdel", "-x", "-Wforce", *jobids, check=False)
    deadline = time.monotonic() + timeout
    while True:
        left = [j for j in jobids if run("qstat", "-x", j, check=False).returncode == 0]
        if not left:
            return
        if time.monotonic() > deadline:
            raise PbsError(f"jobs still there after {timeout} s: {left}")
        time.sleep(0.3)


def _attribute(listing: str, name: str) -> str | None:
    """The value of ``name`` in a ``qmgr -c "list ..."`` listing, None when unset. qmgr
    folds a long list onto lines that start with a tab; the value is the joined list."""
    return parse_qmgr_list(listing).get(name)


def server_attribute(name: str) -> str | None:
    return _attribute(run("qmgr", "-c", f"list server {name}").stdout, name)


def sched_attribute(name: str) -> str | None:
    return _attribute(run("qmgr", "-c", "list sched").stdout, name)


SCHED_CONFIG = PBS_HOME / "sched_priv" / "sched_config"
SCHED_LOCK = PBS_HOME / "sched_priv" / "sched.lock"


def sched_config_line(text: str, key: str, line: str) -> str:
    """sched_config ``text`` with its ``key:`` line replaced by ``line``.

    :raises ValueError: ``text`` has no ``key:`` line
    """
    lines = text.splitlines()
    if not any(ln.startswith(f"{key}:") for ln in lines):
        raise ValueError(f"no {key} line in sched_config")
    return "\n".join(line if ln.startswith(f"{key}:") else ln for ln in lines) + "\n"


def reload_scheduler() -> None:
    """pbs_sched re-reads sched_config on SIGHUP (its pid is in sched_priv/sched.lock)."""
    run("kill", "-HUP", SCHED_LOCK.read_text().split()[0])


@contextmanager
def sched_config(lines: dict[str, str]) -> Iterator[None]:
    """sched_config with the ``key: ...`` lines of ``lines`` replaced, the scheduler told;
    as it was afterwards."""
    before = SCHED_CONFIG.read_text()
    text = before
    for key, line in lines.items():
        text = sched_config_line(text, key, line)
    SCHED_CONFIG.write_text(text)
    reload_scheduler()
    try:
        yield
    finally:
        SCHED_CONFIG.write_text(before)
        reload_scheduler()


def reload_hook_modules(jobs: list[str]) -> None:
    """Make pbs_server import this checkout's modules at its next hook run: the one shared
    server keeps what it imported, maybe another checkout's softwalltime. It is told to
    restart its interpreter after every hook run, at most once a second (the session
    restores both settings); one held job (added to ``jobs``) runs the hook between two
    waits of that second, the restart's time limit."""
    qmgr("set server python_restart_max_hooks = 1")
    qmgr("set server python_restart_min_interval = 1")
    time.sleep(1.1)  # python_restart_min_interval: a time limit, not an event
    jobs.append(qsub("-h -l walltime=01:00:00"))
    time.sleep(1.1)


class ServerLog:
    """The server log from a mark on: what the hooks logged since."""

    def __init__(self) -> None:
        self._marks = {p: p.stat().st_size for p in SERVER_LOGS.glob("*")}

    def lines(self) -> list[str]:
        out = []
        for path in sorted(SERVER_LOGS.glob("*")):
            with open(path, "rb") as fh:
                fh.seek(self._marks.get(path, 0))
                out += fh.read().decode("utf-8", "replace").splitlines()
        return out

    def hook_lines(self, needle: str = "softwalltime") -> list[str]:
        return [line for line in self.lines() if ";Hook;" in line and needle in line]


# What a holder of the lock may change on the one server. The holder's state as it took the
# lock is written to JOURNAL; the next holder finds it there if that one died holding the lock
# (killed, or its machine stopped mid-run) and puts the server back first. An interrupted run
# once left strict_ordering on, a job_sort_formula and a job queued: the next CI run failed.
JOURNAL = PBS_HOME / "softwalltime-lock-journal.json"
NODE = "pbshost"  # the one vnode build.sh creates
SCHED_KEPT = ("job_sort_formula", "scheduler_iteration", "opt_backfill_fuzzy", "log_events")
SERVER_KEPT = (
    "scheduling",
    "backfill_depth",
    "eligible_time_enable",
    "job_history_enable",
    "python_restart_max_hooks",
    "python_restart_min_interval",
    "python_restart_max_objects",
    "operators",
    "acl_roots",  # root as a second user (test_queues_real)
    "max_run",
    "max_run_res.ncpus",
)
# ``qmgr -c "list <kind>"`` starts each object's block with "<Kind> <name>"
_NAMED = {"hook": "Hook ", "queue": "Queue ", "resource": "Resource "}


def _names(kind: str) -> list[str]:
    prefix = _NAMED[kind]
    listing = run("qmgr", "-c", f"list {kind}" + (" @default" if kind == "queue" else "")).stdout
    return sorted(ln[len(prefix) :].strip() for ln in listing.splitlines() if ln.startswith(prefix))


def snapshot() -> dict[str, Any]:
    """What :func:`restore` puts back: sched_config, the :data:`SCHED_KEPT` and
    :data:`SERVER_KEPT` attributes (None when unset), the node's ncpus and the names of the
    hooks, queues and custom resources."""
    sched = parse_qmgr_list(run("qmgr", "-c", "list sched").stdout)
    server = parse_qmgr_list(run("qmgr", "-c", "list server").stdout)
    node = parse_qmgr_list(run("qmgr", "-c", f"list node {NODE}").stdout)
    return {
        "sched_config": SCHED_CONFIG.read_text(),
        "sched": {name: sched.get(name) for name in SCHED_KEPT},
        "server": {name: server.get(name) for name in SERVER_KEPT},
        "ncpus": node.get("resources_available.ncpus"),
        "node_queue": node.get("queue"),
        **{kind: _names(kind) for kind in _NAMED},
    }


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two snapshots, one line each (sched_config as one line)."""
    out = ["sched_config"] if before["sched_config"] != after["sched_config"] else []
    for part in ("sched", "server"):
        out += [
            f"{part} {name}: {value!r} -> {after[part].get(name)!r}"
            for name, value in before[part].items()
            if after[part].get(name) != value
        ]
    if before["ncpus"] != after["ncpus"]:
        out.append(f"node {NODE} ncpus: {before['ncpus']} -> {after['ncpus']}")
    if before.get("node_queue") != after.get("node_queue"):
        out.append(f"node {NODE} queue: {before.get('node_queue')} -> {after.get('node_queue')}")
    for kind in _NAMED:
        added = sorted(set(after[kind]) - set(before[kind]))
        out += [f"{kind} {name} added" for name in added]
        out += [f"{kind} {name} gone" for name in sorted(set(before[kind]) - set(after[kind]))]
    return out


def set_attribute(kind: str, name: str, value: str | None) -> None:
    """``qmgr set`` (``unset`` for None) of ``kind``'s (``server``, ``sched``, ``node N``)
    attribute ``name``, unchecked: what restores a server must go on past one failure."""
    if value is None:
        qmgr(f"unset {kind} {name}", check=False)
    else:  # quoted: a formula's spaces and a list's commas would be a syntax error
        qmgr(f'set {kind} {name} = "{value}"', check=False)


def clear_jobs(timeout: float = 120) -> None:
    """Delete every job, finished ones in the history too: a job keeps a custom resource it
    carries from being deleted."""
    ids = run("qselect", "-x").stdout.split()
    for i in range(0, len(ids), 500):
        run("qdel", "-x", "-Wforce", *ids[i : i + 500], check=False, timeout=timeout)
    deadline = time.monotonic() + timeout
    while run("qselect", "-x").stdout.split():
        if time.monotonic() > deadline:
            raise PbsError(f"jobs still on the server {timeout} s after qdel -x -Wforce")
        time.sleep(0.3)


def restore(state: dict[str, Any]) -> None:
    """Put the server back as :func:`snapshot` found it: every job deleted, sched_config,
    the attributes and the node's ncpus as they were, hooks, queues and resources that were
    not there deleted (one that has gone cannot be made again: :func:`changes` names it)."""
    clear_jobs()
    SCHED_CONFIG.write_text(state["sched_config"])
    reload_scheduler()
    for kind in ("sched", "server"):
        for name, value in state[kind].items():
            set_attribute(kind, name, value)
    if state["ncpus"] is not None:
        set_attribute(f"node {NODE}", "resources_available.ncpus", state["ncpus"])
    # before the queues go: a queue a node names cannot be deleted
    set_attribute(f"node {NODE}", "queue", state.get("node_queue"))
    for kind in _NAMED:
        for name in sorted(set(_names(kind)) - set(state[kind])):
            qmgr(f"delete {kind} {name}", check=False)


@contextmanager
def exclusive(lock_file: str = LOCK_FILE, journal: Path = JOURNAL) -> Iterator[None]:
    """Hold the machine-wide lock on the one PBS server for the duration, and leave the
    server as it was when the lock was taken.

    :raises PbsError: on a clean exit, the holder left the server changed (the changes are
        listed, and undone)
    """
    os.makedirs(os.path.dirname(lock_file), exist_ok=True)
    with open(lock_file, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            if journal.exists():
                print(
                    f"pbsctl: the last holder of {lock_file} died holding it;"
                    " putting the server back as it found it",
                    file=sys.stderr,
                )
                restore(json.loads(journal.read_text()))
            found = snapshot()
            tmp = journal.with_suffix(".tmp")
            tmp.write_text(json.dumps(found))
            tmp.replace(journal)
            try:
                yield
            finally:  # also when the holder raised: its exception goes on, the server back
                jobs = run("qselect").stdout.split()
                left = changes(found, snapshot()) + [f"job {j} left" for j in jobs]
                if left:
                    restore(found)
                journal.unlink()  # not if restore raised: the next holder tries again
            if left:
                raise PbsError("the holder left the server changed (put back): " + "; ".join(left))
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def restart_server(timeout: float = 120) -> None:
    """Stop pbs_server (``qterm -t quick``: jobs stay), wait until its process is gone, and
    start it again with ``up.sh`` (which waits until it answers): what the server kept in
    its datastore, not in memory, is what it has afterwards."""
    pid = int((PBS_HOME / "server_priv" / "server.lock").read_text().split()[0])
    run("/opt/pbs/bin/qterm", "-t", "quick")
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            raise PbsError(f"pbs_server (pid {pid}) still running {timeout} s after qterm")
        time.sleep(0.2)
    proc = subprocess.run(
        [str(OPENPBS / "up.sh")], capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise PbsError(f"up.sh -> {proc.returncode}: {proc.stderr or proc.stdout}")


def available() -> str | None:
    """Why the real server cannot be used here, or None if it answers."""
    if os.geteuid() != 0:
        return "the real-PBS suite runs as root (pbsx uses nsenter)"
    if not PBSX.exists():
        return f"{PBSX} not found: this checkout lacks the harness of tests/pbs/server"
    if not Path("/opt/pbs/sbin/pbs_server.bin").exists():
        return "OpenPBS is not installed: run make pbs-up (root; it builds and starts it)"
    try:
        run("qstat", "-B", timeout=20)
    except (PbsError, subprocess.TimeoutExpired, OSError) as err:
        return f"the PBS server does not answer ({err}): run make pbs-up"
    return None
