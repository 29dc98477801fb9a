"""The hook inside a real OpenPBS 23.06 pbs_server (issue 8): qsub, qalter, runjob,
interpreter restarts, database failures, lists, arrays, queue defaults.

Each check reads what PBS itself shows (``qstat -f -F json``, ``qalter``'s exit status,
the server log), never the hook's own view.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time

import pbsctl
import psycopg2
import pytest
from conftest import HOOK, SOFTWALLTIME, seed, v3

from softwalltime.units import parse_duration

H = 3600


def soft(jobid: str) -> int | None:
    value = pbsctl.resource(jobid, "soft_walltime")
    return None if value is None else parse_duration(value)


def test_queuejob_sets_the_prediction(install, hook_db, jobs):
    out = install(dsn=hook_db)
    assert "modifyjob" in out.stdout
    listed = pbsctl.qmgr(f"list hook {HOOK}").stdout
    assert "event = queuejob,modifyjob,runjob" in listed and "enabled = true" in listed
    log = pbsctl.ServerLog()
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00"))
    assert soft(jobs[0]) == v3(10 * H)  # 02:45:00
    (line,) = log.hook_lines("queuejob user='alice'")
    assert "set v3 soft_walltime=9900 s" in line


def test_user_qalter_of_walltime_down_and_up(install, hook_db, jobs):
    install(dsn=hook_db)
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00"))
    assert soft(jobs[0]) == v3(10 * H)
    # without modifyjob handling the server refuses this: walltime below soft_walltime
    proc = pbsctl.as_user(f"qalter -l walltime=00:30:00 {jobs[0]}", check=False)
    assert proc.returncode == 0, proc.stderr
    assert pbsctl.resource(jobs[0], "walltime") == "00:30:00"
    assert soft(jobs[0]) == v3(30 * 60) <= 30 * 60
    pbsctl.as_user(f"qalter -l walltime=20:00:00 {jobs[0]}")
    assert soft(jobs[0]) == v3(20 * H)
    # other alterations change nothing
    pbsctl.as_user(f"qalter -N renamed {jobs[0]}")
    assert soft(jobs[0]) == v3(20 * H)


def test_managers_soft_walltime_is_kept(install, hook_db, jobs):
    install(dsn=hook_db)
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00"))
    pbsctl.run("qalter", "-l", "soft_walltime=05:00:00", jobs[0])
    pbsctl.as_user(f"qalter -l walltime=12:00:00 {jobs[0]}")
    assert soft(jobs[0]) == 5 * H
    # released and run: runjob keeps it too
    pbsctl.run("qrls", jobs[0])
    pbsctl.wait_state(jobs[0], "RF")
    assert soft(jobs[0]) == 5 * H


def test_a_job_that_runs_is_predicted_again_and_its_record_ingested(
    install, hook_db, hook_cluster, jobs, tmp_path
):
    install(dsn=hook_db)
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00", script="sleep 2"))
    assert soft(jobs[0]) == v3(10 * H)
    # newer history while it waits: alice's last job used half its walltime
    seed(hook_db, "alice", [(5 * H, 10 * H)], start=100)
    log = pbsctl.ServerLog()
    pbsctl.run("qrls", jobs[0])
    pbsctl.wait_state(jobs[0], "F", timeout=90)
    assert soft(jobs[0]) == 10 * H // 2 + 900
    assert any("runjob user='alice'" in line for line in log.hook_lines())
    # the E record carries it; the ingester stores it (a separate database)
    ingest_db = hook_cluster.dsn("postgres").replace("/postgres?", "/ingestcheck?")
    conn = psycopg2.connect(hook_cluster.dsn("postgres"))
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("DROP DATABASE IF EXISTS ingestcheck WITH (FORCE)")
        cur.execute("CREATE DATABASE ingestcheck")
    conn.close()
    env = dict(os.environ, SOFTWALLTIME_DSN=ingest_db)
    import subprocess

    subprocess.run([SOFTWALLTIME, "db", "upgrade"], env=env, check=True, capture_output=True)
    deadline = time.monotonic() + 30
    row = None
    while row is None and time.monotonic() < deadline:
        proc = subprocess.run(
            [SOFTWALLTIME, "ingest", "--no-progress", "--dir", str(pbsctl.ACCOUNTING)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        with psycopg2.connect(ingest_db) as check, check.cursor() as cur:
            cur.execute(
                "SELECT soft_walltime_s, walltime_s FROM finished_jobs WHERE job_id = %s",
                (jobs[0],),
            )
            row = cur.fetchone()
        time.sleep(0.5)
    assert row == (10 * H // 2 + 900, 10 * H)


def test_twenty_jobs_predicted_across_forced_interpreter_restarts(install, hook_db, jobs):
    """pbs_server restarts its Python after every hook run here; psycopg2 stopped
    predicting after the first restart, the pure-Python client must not."""
    install(dsn=hook_db)
    pbsctl.qmgr("set server python_restart_max_hooks = 1")
    pbsctl.qmgr("set server python_restart_min_interval = 1")
    log = pbsctl.ServerLog()
    for _ in range(20):
        jobs.append(pbsctl.qsub("-h -l walltime=10:00:00"))
        time.sleep(1.1)  # min_interval: one restart per second at most
    restarts = [line for line in log.lines() if "Restarting Python interpreter" in line]
    predicted = [j for j in jobs if soft(j) == v3(10 * H)]
    assert len(restarts) >= 10, f"only {len(restarts)} interpreter restarts"
    assert len(predicted) == 20, (len(predicted), log.hook_lines("left unchanged")[:3])


class SilentSocketServer:
    """A unix socket in its own directory that accepts connections and never answers."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="swt-silent-")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(os.path.join(self.dir, ".s.PGSQL.5432"))
        self.sock.listen(64)
        self.accepted: list[socket.socket] = []
        self._stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop:
            try:
                self.accepted.append(self.sock.accept()[0])
            except OSError:
                continue

    def close(self) -> None:
        self._stop = True
        for conn in self.accepted:
            conn.close()
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.mark.parametrize("failure", ["down", "silent"])
def test_database_failure_leaves_the_job_unchanged_within_the_bound(install, jobs, failure):
    silent = SilentSocketServer() if failure == "silent" else None
    socket_dir = silent.dir if silent else tempfile.mkdtemp(prefix="swt-nodb-")
    try:
        install(dsn=f"postgresql://hook@/softwalltime?host={socket_dir}&port=5432")
        log = pbsctl.ServerLog()
        jobid, elapsed = pbsctl.qsub_timed("-h -l walltime=10:00:00")
        jobs.append(jobid)
        assert pbsctl.resource(jobid, "soft_walltime") is None
        bound = 1.0 + 0.250 + 0.1  # connect_timeout_s + statement_timeout_ms + grace
        assert elapsed <= bound + 0.5, elapsed
        (line,) = log.hook_lines("job left unchanged")
        if silent:
            assert silent.accepted, "the hook never reached the silent server"
            assert "timed out" in line
    finally:
        if silent:
            silent.close()
        else:
            shutil.rmtree(socket_dir, ignore_errors=True)


def test_dry_run_logs_and_sets_nothing(install, hook_db, jobs):
    install(dsn=hook_db, dry_run=True)
    log = pbsctl.ServerLog()
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00"))
    assert pbsctl.resource(jobs[0], "soft_walltime") is None
    (line,) = log.hook_lines("queuejob user='alice'")
    assert "dry run, would set v3 soft_walltime=9900 s" in line


@pytest.mark.parametrize(
    ("lists", "predicted"),
    [
        ({"users_deny": ["alice"]}, False),
        ({"users_allow": ["bob"]}, False),
        ({"users_allow": ["alice"], "queues_deny": ["other"]}, True),
    ],
)
def test_allow_and_deny_lists(install, hook_db, jobs, lists, predicted):
    install(dsn=hook_db, **lists)
    jobs.append(pbsctl.qsub("-h -q workq -l walltime=10:00:00"))
    assert soft(jobs[0]) == (v3(10 * H) if predicted else None)


def test_job_array(install, hook_db, jobs):
    install(dsn=hook_db)
    jobs.append(pbsctl.qsub("-h -J 1-3 -l walltime=10:00:00"))
    assert "[]" in jobs[0]
    assert soft(jobs[0]) == v3(10 * H)
    subjob = jobs[0].replace("[]", "[2]")
    assert soft(subjob) == v3(10 * H)


def test_queue_default_walltime_is_predicted_at_runjob(install, hook_db, jobs):
    install(dsn=hook_db)
    queue = "swtdefault"
    pbsctl.qmgr(f"create queue {queue} queue_type = execution")
    try:
        pbsctl.qmgr(f"set queue {queue} resources_default.walltime = 04:00:00")
        pbsctl.qmgr(f"set queue {queue} enabled = true")
        pbsctl.qmgr(f"set queue {queue} started = true")
        log = pbsctl.ServerLog()
        jobs.append(pbsctl.qsub(f"-q {queue}", script="sleep 1"))
        pbsctl.wait_state(jobs[0], "F", timeout=90)
        assert pbsctl.resource(jobs[0], "walltime") == "04:00:00"
        assert soft(jobs[0]) == v3(4 * H)
        lines = log.hook_lines("user='alice'")
        assert any("queuejob" in x and "no walltime requested yet" in x for x in lines), lines
        assert any("runjob" in x and "set v3 soft_walltime=4500 s" in x for x in lines), lines
    finally:
        pbsctl.qdel(*jobs)
        pbsctl.wait_state(jobs[0], "F", timeout=30)
        pbsctl.qmgr(f"delete queue {queue}", check=False)


def _hook_backend(dsn: str) -> tuple[int, object]:
    """The hook's database session: its pid and when its last statement ended."""
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT pid, state_change FROM pg_stat_activity WHERE application_name ="
                " 'softwalltime-hook' AND datname = current_database()"
            )
            (row,) = cur.fetchall()
            return row
    finally:
        conn.close()


def test_a_burst_of_one_users_jobs_reads_the_history_once(install, hook_db, jobs):
    """The hook keeps a lookup while the database notifies no change to the history: a
    user's burst of qsub costs one query; a commit to the history is seen by the next job."""
    # no interpreter restart in the burst: it would connect (and read) afresh
    for name in ("python_restart_max_hooks", "python_restart_max_objects"):
        pbsctl.qmgr(f"set server {name} = 1000000")
    pbsctl.qmgr("set server python_restart_min_interval = 86400")
    install(dsn=hook_db)
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00"))
    first = _hook_backend(hook_db)
    for _ in range(5):
        jobs.append(pbsctl.qsub("-h -l walltime=10:00:00"))
    assert [soft(j) for j in jobs] == [v3(10 * H)] * 6
    assert _hook_backend(hook_db) == first  # no statement since the first job
    seed(hook_db, "alice", [(5 * H, 10 * H)], start=100)  # its commit notifies the hook
    time.sleep(0.2)
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00"))
    assert soft(jobs[-1]) == 10 * H // 2 + 900
    pid, when = _hook_backend(hook_db)
    assert pid == first[0] and when != first[1]  # read again, on the same connection
