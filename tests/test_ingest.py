"""The ingester against a real PostgreSQL: exactly-once, incremental, one at a time."""

from __future__ import annotations

import gzip
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg2
import pytest
from helpers_data import EXAMPLES, PBS_SAMPLES
from helpers_wait import ingest_lock_released, wait_until
from hypothesis import given, settings
from hypothesis import strategies as st
from softwalltime_ingest import __main__ as ingest_main
from softwalltime_ingest import parse as parse_module
from softwalltime_ingest.files import FileError
from softwalltime_ingest.load import LOCK_KEY, Loader, connect
from softwalltime_ingest.parse import _parse_lines, copy_line, e_copy_line, parse_chunk

from softwalltime import accounting as acct
from softwalltime import cli
from softwalltime.errors import ParseError

REPO = Path(__file__).resolve().parents[1]
LOCAL = PBS_SAMPLES / "openpbs-23.06-local.log"


@pytest.fixture(scope="module")
def template_e() -> str:
    if not LOCAL.exists():
        pytest.fail(f"missing sample {LOCAL}")
    return next(line for line in LOCAL.read_text().splitlines() if ";E;0.vm;" in line)


def e_line(template: str, n: int) -> str:
    """A real OpenPBS E record with job number n (distinct id and ctime)."""
    ctime = 1795311697 - n  # before the template's start: distinct ids, possible times
    line = template.replace(";E;0.vm;", f";E;{n}.vm;")
    return re.sub(r"\bctime=\d+", f"ctime={ctime}", line) + "\n"


def ingest(capsys, dsn: str, *args: str) -> tuple[int, str, str]:
    code = cli.main(["--dsn", dsn, "ingest", "--no-progress", *args])
    out, err = capsys.readouterr()
    return code, out, err


def query(dsn: str, sql: str, *params: object) -> list[tuple]:
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()
    finally:
        conn.close()


def count(dsn: str, table: str = "finished_jobs") -> int:
    return query(dsn, f"SELECT count(*) FROM {table}")[0][0]


def summary_row(out: str, rtype: str) -> tuple[int, int, int, int]:
    """(read, stored, skipped, malformed) of one record type from the printed summary."""
    for line in out.splitlines():
        fields = line.split()
        if fields and fields[0] == rtype and len(fields) >= 5:
            return tuple(int(x.replace(",", "")) for x in fields[-4:])  # type: ignore[return-value]
    raise AssertionError(f"no {rtype} row in:\n{out}")


def checkpoint(dsn: str, path: Path) -> tuple[int, int]:
    rows = query(
        dsn,
        "SELECT byte_offset, line_number FROM ingest_checkpoints WHERE path = %s",
        os.path.abspath(path),  # as stored: the path as given (a symlink is never resolved)
    )
    assert len(rows) == 1, rows
    return rows[0]


# -- the real samples --------------------------------------------------------------------


def _expected_keys(paths: list[Path]) -> tuple[set, set]:
    jobs, reruns = set(), set()
    for path in paths:
        for line in path.read_text().splitlines():
            try:
                rec = acct.parse_line(line)
                job, rr = acct.finished_job(rec), acct.rerun(rec)
            except ParseError:
                continue
            if rec.duplicate_keys:
                continue
            if job:
                jobs.add((job["server"], job["job_id"], job["ctime"]))
            if rr:
                reruns.add((rr["server"], rr["job_id"], rr["ctime"], rr["run_count"]))
    return jobs, reruns


def test_real_samples_then_a_second_run_adds_nothing(capsys, fresh_dsn):
    paths = sorted(PBS_SAMPLES.glob("*.log")) + [EXAMPLES]
    code, out, err = ingest(capsys, fresh_dsn, *map(str, paths))
    assert code == 0, err
    jobs, reruns = _expected_keys(paths)
    # apel line 6 reads '20150327:03/27/2015 00:06:27;E;21430205.b0;...': a fragment and
    # then a whole record, i.e. a torn line. The fragment is reported, the record is kept.
    torn = next(
        line
        for line in (PBS_SAMPLES / "apel_test_pbs_records.log").read_text().splitlines()
        if line.startswith("20150327:")
    )
    tail = acct.finished_job(acct.parse_line(torn[len("20150327:") :]))
    assert tail is not None
    jobs.add((tail["server"], tail["job_id"], tail["ctime"]))
    got = set(query(fresh_dsn, "SELECT server, job_id, ctime FROM finished_jobs"))
    assert got == jobs and len(jobs) == count(fresh_dsn)
    got_rr = set(query(fresh_dsn, "SELECT server, job_id, ctime, run_count FROM job_reruns"))
    assert got_rr == reruns and len(reruns) == 3
    assert summary_row(out, "E")[1] == len(jobs)

    row = query(
        fresh_dsn,
        "SELECT soft_walltime_s, walltime_s, runtime_s, run_count, exit_status, source_file, "
        "source_offset FROM finished_jobs WHERE job_id = '10.vm'",
    )
    assert row[0][:5] == (None, 600, 10, 2, 271)
    assert row[0][5] == os.path.abspath(LOCAL)
    with open(LOCAL, "rb") as fh:
        fh.seek(row[0][6])
        assert fh.readline().startswith(b"11/22/2026 01:43:24;E;10.vm;")
    # Total usage across runs: the R record's run plus the E record's.
    total = query(
        fresh_dsn,
        "SELECT f.runtime_s + COALESCE(SUM(r.runtime_s), 0) FROM finished_jobs f "
        "LEFT JOIN job_reruns r USING (server, job_id, ctime) WHERE f.job_id = '10.vm' "
        "GROUP BY f.server, f.job_id, f.ctime, f.runtime_s",
    )
    assert total == [(20,)]

    code, out2, _ = ingest(capsys, fresh_dsn, *map(str, paths))
    assert code == 0
    assert count(fresh_dsn) == len(jobs) and count(fresh_dsn, "job_reruns") == 3
    assert f"{len(paths)} unchanged" in out2
    assert "0 records" in out2.splitlines()[0]


def test_summary_counts_each_record_type(capsys, fresh_dsn):
    code, out, _ = ingest(capsys, fresh_dsn, str(LOCAL))
    assert code == 0
    assert summary_row(out, "E") == (13, 13, 0, 0)
    assert summary_row(out, "R") == (1, 1, 0, 0)
    assert summary_row(out, "Q") == (13, 0, 13, 0)
    assert summary_row(out, "S") == (14, 0, 14, 0)
    assert summary_row(out, "a") == (4, 0, 4, 0)
    assert summary_row(out, "D") == (2, 0, 2, 0)
    assert "4 blank or comment line(s) ignored" in out
    assert checkpoint(fresh_dsn, LOCAL) == (LOCAL.stat().st_size, 51)


def test_malformed_lines_reported_with_file_and_line(capsys, caplog, fresh_dsn, tmp_path):
    good = [line + "\n" for line in LOCAL.read_text().splitlines() if ";E;" in line]
    bad = [f"garbage line {i}\n" for i in range(11)]
    forged = good[1].replace(" queue=workq", ' queue=workq user=root "x"', 1)
    log = tmp_path / "acct.log"
    log.write_text(good[0] + "".join(bad) + forged + good[2] + "04/02/2025 13:00:00;E;9.s;end=1\n")
    code, out, _ = ingest(capsys, fresh_dsn, str(log))
    assert code == 0  # bad lines are never fatal
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 10  # the first ten, then only a count
    assert warnings[0] == f"{log}:2: not an accounting record (expected 'date;type;id;message')"
    assert warnings[9].startswith(f"{log}:11: ")
    assert "13 malformed line(s) in all" in out
    assert summary_row(out, "?") == (11, 0, 0, 11)
    assert summary_row(out, "E") == (4, 2, 0, 2)
    assert count(fresh_dsn) == 2


def test_forged_and_torn_lines_are_reported_not_stored(capsys, caplog, fresh_dsn, tmp_path):
    lines = [line for line in LOCAL.read_text().splitlines() if ";E;" in line]
    forged = lines[1].replace(" queue=workq", ' queue=workq user=root "x"', 1)
    torn = lines[2][:120] + lines[3]  # a fragment without newline, then the next record
    log = tmp_path / "acct.log"
    log.write_text(f"{forged}\n{torn}\n")
    code, out, _ = ingest(capsys, fresh_dsn, str(log))
    assert code == 0
    text = caplog.text
    assert f"{log}:1: key(s) user appear twice" in text and "#1013" in text
    assert f"{log}:2: torn record: another record starts at column 121" in text
    # The record after the cut is whole and stored; the fragment and the forgery are not.
    assert [r[0] for r in query(fresh_dsn, "SELECT job_id FROM finished_jobs")] == ["3.vm"]
    assert summary_row(out, "E") == (3, 1, 0, 2)


# -- incremental reading ---------------------------------------------------------------


def test_torn_last_line_is_completed_later(capsys, fresh_dsn, tmp_path, template_e):
    log = tmp_path / "20261122"
    first, second, third = (e_line(template_e, n) for n in (1, 2, 3))
    log.write_text(first + second + third[:200])  # PBS wrote part of the third record
    code, out, _ = ingest(capsys, fresh_dsn, str(log))
    assert code == 0
    assert count(fresh_dsn) == 2
    assert checkpoint(fresh_dsn, log) == (len(first) + len(second), 2)
    assert (
        f"{os.path.abspath(log)}:3: incomplete last line (200 bytes) left for the next run" in out
    )
    with open(log, "a") as fh:
        fh.write(third[200:])
    code, out, _ = ingest(capsys, fresh_dsn, str(log))
    assert code == 0
    assert summary_row(out, "E") == (1, 1, 0, 0)  # only the new bytes were read
    assert count(fresh_dsn) == 3
    assert checkpoint(fresh_dsn, log) == (log.stat().st_size, 3)


def test_new_daily_files_in_the_directory(capsys, fresh_dsn, tmp_path, template_e):
    acct_dir = tmp_path / "accounting"
    acct_dir.mkdir()
    (acct_dir / "20261121").write_text("".join(e_line(template_e, n) for n in range(5)))
    (acct_dir / "README").write_text("not a log\n")
    code, out, _ = ingest(capsys, fresh_dsn, "--dir", str(acct_dir))
    assert code == 0 and count(fresh_dsn) == 5
    assert "1 file(s) in the directory ignored" in out
    (acct_dir / "20261122").write_text("".join(e_line(template_e, n) for n in range(5, 8)))
    with open(acct_dir / "20261121", "a") as fh:
        fh.write(e_line(template_e, 100))
    code, out, _ = ingest(capsys, fresh_dsn, "--dir", str(acct_dir))
    assert code == 0
    assert "(1 grown, 1 new)" in out.splitlines()[0]
    assert summary_row(out, "E") == (4, 4, 0, 0)
    assert count(fresh_dsn) == 9


def test_directory_from_pbs_conf_and_setting(monkeypatch, tmp_path):
    from softwalltime_ingest.files import default_directory

    conf = tmp_path / "pbs.conf"
    conf.write_text("PBS_EXEC=/opt/pbs\nPBS_HOME=/srv/pbs\n")
    assert default_directory({"PBS_CONF_FILE": str(conf)}) == "/srv/pbs/server_priv/accounting"
    assert default_directory({"PBS_HOME": "/x"}) == "/x/server_priv/accounting"
    missing = {"PBS_CONF_FILE": str(tmp_path / "none")}
    with pytest.raises(FileError) as caught:
        default_directory(missing)
    assert str(caught.value) == (
        f"PBS_CONF_FILE names {tmp_path}/none, which cannot be read: No such file or"
        " directory (fix it, or give --dir or accounting_dir)"
    )


def test_a_missing_pbs_conf_file_is_an_error_not_the_real_servers_logs(
    capsys, fresh_dsn, monkeypatch, tmp_path
):
    """Issue 32: with PBS_CONF_FILE naming a missing file, ingest fell back to
    /var/spool/pbs and ingested the real server's accounting into a scratch database."""
    monkeypatch.delenv("PBS_HOME", raising=False)
    monkeypatch.setenv("PBS_CONF_FILE", str(tmp_path / "none.conf"))
    code, out, err = ingest(capsys, fresh_dsn)
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"softwalltime: error: PBS_CONF_FILE names {tmp_path}/none.conf, which cannot be"
        " read: No such file or directory (fix it, or give --dir or accounting_dir)"
    ]
    assert count(fresh_dsn) == 0
    acct = tmp_path / "acct"
    acct.mkdir()
    assert ingest(capsys, fresh_dsn, "--dir", str(acct))[0] == 0  # --dir needs no pbs.conf


def test_rotation_by_rename_is_followed(capsys, fresh_dsn, tmp_path, template_e):
    live = tmp_path / "acct"
    live.write_text("".join(e_line(template_e, n) for n in range(4)))
    assert ingest(capsys, fresh_dsn, str(live))[0] == 0
    rotated = tmp_path / "acct.1"
    live.rename(rotated)
    with open(rotated, "a") as fh:  # the server wrote one more record before reopening
        fh.write(e_line(template_e, 4))
    live.write_text("".join(e_line(template_e, n) for n in range(10, 13)))
    code, out, _ = ingest(capsys, fresh_dsn, str(rotated), str(live))
    assert code == 0
    assert f"{rotated}: renamed from {live}; resuming at byte" in out
    # Only the record appended after the rename and the new file's three were read.
    assert summary_row(out, "E") == (4, 4, 0, 0)
    assert count(fresh_dsn) == 8


def test_truncated_and_replaced_files_are_read_again(capsys, fresh_dsn, tmp_path, template_e):
    log = tmp_path / "acct"
    log.write_text("".join(e_line(template_e, n) for n in range(6)))
    assert ingest(capsys, fresh_dsn, str(log))[0] == 0
    log.write_text(e_line(template_e, 0) + e_line(template_e, 50))  # same first line, shorter
    code, out, _ = ingest(capsys, fresh_dsn, str(log))
    assert code == 0
    assert "truncated to" in out and "reading it again" in out
    assert summary_row(out, "E") == (2, 1, 1, 0)
    assert count(fresh_dsn) == 7
    # Replaced: a different first line, longer than before.
    log.write_text("".join(e_line(template_e, n) for n in range(60, 70)))
    code, out, _ = ingest(capsys, fresh_dsn, str(log))
    assert code == 0
    assert "replaced (different first line or start)" in out
    assert count(fresh_dsn) == 17
    assert checkpoint(fresh_dsn, log) == (log.stat().st_size, 10)


def test_gzip_archives_and_their_plain_twins(capsys, fresh_dsn, tmp_path, template_e):
    text = "".join(e_line(template_e, n) for n in range(7))
    archive = tmp_path / "20261120.gz"
    with gzip.open(archive, "wt") as fh:
        fh.write(text.rstrip("\n"))  # an archive's last line counts even without newline
    code, out, _ = ingest(capsys, fresh_dsn, str(archive))
    assert code == 0 and count(fresh_dsn) == 7
    code, out, _ = ingest(capsys, fresh_dsn, str(archive))
    assert "1 unchanged" in out and count(fresh_dsn) == 7
    plain = tmp_path / "20261120"
    plain.write_text(text)
    code, out, _ = ingest(capsys, fresh_dsn, str(plain))
    assert summary_row(out, "E") == (7, 0, 7, 0)  # already stored from the archive
    assert count(fresh_dsn) == 7


def test_corrupt_archive_and_missing_file_exit_1_others_still_ingested(
    capsys, fresh_dsn, tmp_path, template_e
):
    bad = tmp_path / "20261119.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    good = tmp_path / "20261120"
    good.write_text(e_line(template_e, 1))
    code, out, err = ingest(capsys, fresh_dsn, str(bad), str(tmp_path / "nope"), str(good))
    assert code == 1
    assert "2 file(s) could not be read" in err
    assert count(fresh_dsn) == 1
    assert "2 unusable" in out


# -- crashes and concurrency -------------------------------------------------------------


_SPAWNED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_ingest_left_running():
    """A test that fails (or times out) waiting for its ingest must not leave it running."""
    yield
    while _SPAWNED:
        proc = _SPAWNED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _ingest_process(dsn: str, *args: str) -> subprocess.Popen:
    proc = _spawn(dsn, *args)
    _SPAWNED.append(proc)
    return proc


def _spawn(dsn: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "softwalltime_ingest", "--dsn", dsn, "--no-progress", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def big_log(tmp_path_factory, template_e) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("big") / "20261122"
    n = 20000
    with open(path, "w") as fh:
        fh.writelines(e_line(template_e, i) for i in range(n))
    return path, n


@pytest.mark.slow
def test_sigkill_mid_run_then_rerun_gives_exact_rows(fresh_dsn, big_log):
    path, n = big_log
    proc = _ingest_process(fresh_dsn, "--batch-size", "50", str(path))
    deadline = time.monotonic() + 60
    seen = 0
    while time.monotonic() < deadline and proc.poll() is None:
        seen = count(fresh_dsn)
        if seen >= 500:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert ingest_lock_released(fresh_dsn), "the killed run's session still holds the lock"
    stored = count(fresh_dsn)
    assert 500 <= stored < n
    # Rows and checkpoint were committed together: the checkpoint covers exactly the rows.
    offset, lines = checkpoint(fresh_dsn, path)
    assert lines == stored
    assert query(fresh_dsn, "SELECT max(source_offset) < %s FROM finished_jobs", offset) == [
        (True,)
    ]
    proc = _ingest_process(fresh_dsn, str(path))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert count(fresh_dsn) == n
    assert checkpoint(fresh_dsn, path) == (path.stat().st_size, n)
    assert summary_row(out, "E") == (n - stored, n - stored, 0, 0)


@pytest.mark.slow
def test_two_concurrent_runs_one_ingests_one_exits_0(fresh_dsn, big_log):
    path, n = big_log
    procs = [_ingest_process(fresh_dsn, "--batch-size", "500", str(path)) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    locked = [out for out, _ in outs if "another ingest is running" in out]
    assert len(locked) == 1, outs
    assert count(fresh_dsn) == n


@pytest.fixture(scope="module")
def parallel_log(tmp_path_factory, template_e) -> tuple[Path, int]:
    """A log big enough for --workers to start its pool (PARALLEL_MIN_BYTES)."""
    from softwalltime_ingest.run import PARALLEL_MIN_BYTES

    path = tmp_path_factory.mktemp("parallel") / "20261121"
    n = 0
    with open(path, "w") as fh:
        while fh.tell() < PARALLEL_MIN_BYTES * 1.5:
            fh.writelines(e_line(template_e, i) for i in range(n, n + 5000))
            n += 5000
    return path, n


def _live_processes_reading(path: Path) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
            with open(f"/proc/{entry}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(path).encode() in cmdline and state != "Z":
            pids.append(int(entry))
    return pids


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["KILL", "TERM"])
def test_killed_parallel_ingest_leaves_no_worker_and_no_lock(
    fresh_dsn, parallel_log, template_e, tmp_path, sig
):
    """Issue 9 item 1: workers outlived a killed parent and kept its DB session (and the
    advisory lock) alive, so every later cron run found the lock held."""
    path, n = parallel_log
    proc = _ingest_process(fresh_dsn, "--workers", "2", "--batch-size", "200", str(path))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and count(fresh_dsn) < 200:
        time.sleep(0.01)
    assert len(_live_processes_reading(path)) == 3, "parent and two workers not running"
    proc.send_signal(sig)
    proc.wait()
    assert proc.returncode == -sig, "the run finished before it could be killed"
    deadline = time.monotonic() + 10
    while _live_processes_reading(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _live_processes_reading(path) == []
    # the lock is free once the parent's backend ends (a worker kept it forever before)
    assert ingest_lock_released(fresh_dsn), "the killed run's session still holds the lock"
    # the next run gets it and completes the log exactly
    small = tmp_path / "20261123"
    small.write_text(e_line(template_e, n + 1))
    done = _ingest_process(fresh_dsn, str(small), str(path))
    out, err = done.communicate(timeout=180)
    assert done.returncode == 0, err
    assert "another ingest is running" not in out
    assert count(fresh_dsn) == n + 1


@pytest.mark.slow
def test_a_killed_worker_is_one_line_and_exit_1(fresh_dsn, parallel_log):
    """Issue 9 item 4: a 24-31 line BrokenProcessPool traceback before."""
    path, n = parallel_log
    proc = _ingest_process(fresh_dsn, "--workers", "2", "--batch-size", "200", str(path))
    # kill a worker as soon as the pool is there, while most of the log is still to parse
    # (later, the parsing may be over and nothing would notice the dead worker)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None and len(workers) < 2:
        workers = [pid for pid in _live_processes_reading(path) if pid != proc.pid]
        time.sleep(0.005)
    assert workers, "no worker to kill"
    os.kill(workers[0], signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "a parse worker died" in lines[0], err
    # what was committed is exact: a rerun completes it
    rerun = _ingest_process(fresh_dsn, str(path))
    assert rerun.wait(timeout=180) == 0
    assert count(fresh_dsn) == n


def test_lock_held_means_nothing_is_written(capsys, fresh_dsn, template_e, tmp_path):
    log = tmp_path / "acct"
    log.write_text(e_line(template_e, 1))
    holder = psycopg2.connect(fresh_dsn)
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        with holder.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()")
            pid = cur.fetchone()[0]
        code, out, _ = ingest(capsys, fresh_dsn, str(log))
        assert code == 0
        # it says who holds it (issue 9 item 2)
        assert f"another ingest is running (advisory lock held by PostgreSQL backend {pid} (" in out
        assert out.rstrip().endswith("s ago); nothing done")
        assert count(fresh_dsn) == 0
    finally:
        holder.close()
    assert ingest(capsys, fresh_dsn, str(log))[0] == 0
    assert count(fresh_dsn) == 1


NO_HOLDER = type("NoHolder", (), {"held_s": 0.0})()


@pytest.mark.slow
def test_a_lock_held_too_long_is_a_failure_naming_the_holder(
    capsys, fresh_dsn, template_e, tmp_path, monkeypatch
):
    """Issue 9 item 2: "lock held" forever is not a no-op: cron must see a non-zero exit."""
    log = tmp_path / "acct"
    log.write_text(e_line(template_e, 1))
    holder = psycopg2.connect(fresh_dsn, application_name="softwalltime-ingest pid=4242")
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
            cur.execute("SELECT pg_backend_pid()")
            pid = cur.fetchone()[0]
        # held more than 1 s by the server's clock, as the ingester reads it (no fixed sleep)
        looker = Loader(connect(fresh_dsn))
        try:
            held = wait_until(lambda: (looker.lock_holder() or NO_HOLDER).held_s > 1, 10)
        finally:
            looker.close()
        assert held
        monkeypatch.setenv("SOFTWALLTIME_INGEST_LOCK_STALE_S", "1")
        code, out, err = ingest(capsys, fresh_dsn, str(log))
    finally:
        holder.close()
    assert code == 1 and count(fresh_dsn) == 0
    assert "more than ingest_lock_stale_s (1 s): the holder looks stuck" in err
    assert f"PostgreSQL backend {pid} (softwalltime-ingest pid=4242, local socket)" in err
    assert f"pg_terminate_backend({pid})" in err


@pytest.mark.slow
def test_a_table_lock_held_elsewhere_fails_with_one_line(
    capsys, fresh_dsn, template_e, tmp_path, monkeypatch
):
    """Issue 9 item 2: the ingester used to wait forever (holding its own lock)."""
    from softwalltime_ingest import load as load_module

    monkeypatch.setattr(load_module, "LOCK_TIMEOUT_S", 1)
    log = tmp_path / "acct"
    log.write_text(e_line(template_e, 1))
    locker = psycopg2.connect(fresh_dsn)
    try:
        with locker.cursor() as cur:
            cur.execute("LOCK TABLE finished_jobs IN ACCESS EXCLUSIVE MODE")
        start = time.monotonic()
        code, out, err = ingest(capsys, fresh_dsn, str(log))
        elapsed = time.monotonic() - start
    finally:
        locker.rollback()
        locker.close()
    assert code == 1 and elapsed < 10, (code, elapsed, err)
    errors = [line for line in err.splitlines() if line.startswith("softwalltime: error:")]
    assert len(errors) == 1 and "lock timeout after 1 s: another session holds" in errors[0], err
    assert "Traceback" not in err
    assert ingest(capsys, fresh_dsn, str(log))[0] == 0 and count(fresh_dsn) == 1


def _copying_backend(dsn: str, proc: subprocess.Popen) -> int | None:
    """The backend of ``proc``'s session while it runs a COPY, else None."""
    rows = query(
        dsn,
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND state = 'active'"
        " AND query LIKE 'COPY %%'",
        f"softwalltime-ingest pid={proc.pid}",
    )
    return rows[0][0] if rows else None


@pytest.mark.slow
def test_a_session_ended_during_a_copy_is_one_line_and_the_next_run_completes(fresh_dsn, big_log):
    """Issue 16 case 10: a database stopped mid-run printed psycopg2's SystemError chain
    (its COPY reads the dead connection's next result with the first error still set)."""
    path, n = big_log
    proc = _ingest_process(fresh_dsn, "--batch-size", "4000", str(path))
    backend = wait_until(lambda: proc.poll() is None and _copying_backend(fresh_dsn, proc), 60)
    assert backend, "the run ended before a COPY was seen"
    assert query(fresh_dsn, "SELECT pg_terminate_backend(%s)", backend) == [(True,)]
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("softwalltime-ingest: error: batch rolled back (")
    rerun = _ingest_process(fresh_dsn, str(path))
    assert rerun.wait(timeout=120) == 0
    assert count(fresh_dsn) == n


def _idle_workers(proc: subprocess.Popen, path: Path) -> list[int]:
    """``proc``'s parse workers that sleep (wait for a chunk; parsing one keeps them running)."""
    idle = []
    for pid in _live_processes_reading(path):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if pid != proc.pid and state == "S":
            idle.append(pid)
    return idle


@pytest.mark.slow
def test_ctrl_c_during_a_parallel_run_is_one_line_and_exit_130(fresh_dsn, parallel_log):
    """Issue 16 case 10: Ctrl-C reaches the whole process group, and each parse worker
    printed a KeyboardInterrupt traceback after the ingester's own line."""
    path, n = parallel_log
    proc = subprocess.Popen(
        [sys.executable, "-m", "softwalltime_ingest", "--dsn", fresh_dsn, "--no-progress"]
        # one row per transaction: the workers parse ahead, then wait for the commits
        + ["--workers", "2", "--batch-size", "1", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell gives a command
    )
    _SPAWNED.append(proc)
    started = wait_until(
        lambda: proc.poll() is None and count(fresh_dsn) and len(_idle_workers(proc, path)) == 2,
        60,
    )
    assert started, "the run did not get going with its two workers waiting for work"
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends for Ctrl-C
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (130, "softwalltime-ingest: interrupted\n"), out
    assert wait_until(lambda: not _live_processes_reading(path), timeout=10)
    # what was committed is exact: the next run completes the log
    assert _ingest_process(fresh_dsn, str(path)).wait(timeout=180) == 0
    assert count(fresh_dsn) == n


# Runs the console script's two lines; the first import of the ingester's loading code
# blocks until a signal arrives, and a file says it is there. (Not signal.pause(): a SIGINT
# that lands after the file is written but before pause() starts is only flagged, and
# pause() then waits for a second signal that never comes. time.sleep returns to the
# interpreter, which raises the flagged KeyboardInterrupt, at the latest a second later.)
_SLOW_IMPORT = """
import pathlib, sys, time
class SlowImport:
    def find_spec(self, name, path=None, target=None):
        if name == "softwalltime_ingest.run":
            pathlib.Path(sys.argv[1]).write_text("importing")
            while True:
                time.sleep(1)
        return None
sys.meta_path.insert(0, SlowImport())
from softwalltime_ingest.__main__ import main
sys.exit(main(sys.argv[2:]))
"""


def test_ctrl_c_while_the_modules_load_is_one_line_and_exit_130(tmp_path, template_e):
    """Issue 16 case 10: the console script imported psycopg2 and the parser before main()
    could catch anything, so Ctrl-C in the first fifth of a second was a traceback."""
    log = tmp_path / "acct"
    log.write_text(e_line(template_e, 1))
    mark = tmp_path / "importing"
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_IMPORT, str(mark), "--dsn", "postgresql://", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _SPAWNED.append(proc)
    assert wait_until(lambda: mark.exists() or proc.poll() is not None, 60), "no import seen"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out, err) == (130, "", "softwalltime-ingest: interrupted\n")


# -- unusable database -------------------------------------------------------------------


def test_unreachable_database_exits_1_without_password(capsys, tmp_path, template_e):
    log = tmp_path / "acct"
    log.write_text(e_line(template_e, 1))
    dsn = "postgresql://swt:s3cretpw@127.0.0.1:9/nodb?connect_timeout=2"
    code = ingest_main.main(["--dsn", dsn, "--no-progress", str(log)])
    out, err = capsys.readouterr()
    assert code == 1
    assert "cannot connect to PostgreSQL at swt@127.0.0.1:9/nodb" in err
    assert "s3cretpw" not in out + err


def test_schema_missing_says_how_to_fix(capsys, empty_dsn, tmp_path, template_e):
    log = tmp_path / "acct"
    log.write_text(e_line(template_e, 1))
    code, _, err = ingest(capsys, empty_dsn, str(log))
    assert code == 1
    assert "run 'softwalltime db upgrade' first" in err


def test_progress_goes_to_stderr_only_when_asked(capsys, fresh_dsn, tmp_path, template_e):
    log = tmp_path / "acct"
    log.write_text(e_line(template_e, 1))
    code = cli.main(["--dsn", fresh_dsn, "ingest", "--progress", str(log)])
    out, err = capsys.readouterr()
    assert code == 0
    assert "records/s" in err and "records/s" not in out
    assert os.path.basename(str(log)) not in err  # progress, not a listing


def test_console_script_help_lists_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        ingest_main.main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for option in ("--dir", "--server", "--batch-size", "--progress", "--no-progress", "--dsn"):
        assert option in out


def test_server_option_names_the_server(capsys, fresh_dsn, tmp_path):
    log = tmp_path / "acct"
    log.write_text("12/21/2009 15:27:00;E;6;user=u ctime=1261424924 end=1261425023\n")
    code, out, _ = ingest(capsys, fresh_dsn, "--server", "edge", str(log))
    assert code == 0
    assert query(fresh_dsn, "SELECT server, job_id FROM finished_jobs") == [("edge", "6")]


def test_backfill_with_server_option_does_not_double_the_history(capsys, fresh_dsn, tmp_path):
    """Issue 9 item 5: cron stored 123.pbs01.example.org under its suffix, then the README's
    backfill with --server pbs01 stored every job again (6 rows for 3 jobs)."""
    log = tmp_path / "20261120"
    log.write_text(
        "".join(
            f"11/20/2026 10:0{i}:00;E;{i}.pbs01.example.org;user=u ctime={1795100000 + i}"
            f" end={1795100100 + i} resources_used.walltime=00:01:00\n"
            for i in range(3)
        )
    )
    assert ingest(capsys, fresh_dsn, str(log))[0] == 0
    archive = tmp_path / "archive" / "20261120"
    archive.parent.mkdir()
    archive.write_bytes(log.read_bytes())  # the same records, read again as a backfill
    assert ingest(capsys, fresh_dsn, "--server", "pbs01", str(archive))[0] == 0
    assert query(fresh_dsn, "SELECT server, count(*) FROM finished_jobs GROUP BY 1") == [
        ("pbs01.example.org", 3)
    ]
    # --server still names the server of ids that have no suffix
    bare = tmp_path / "20261121"
    bare.write_text("11/21/2026 10:00:00;E;9;user=u ctime=1795200000 end=1795200100\n")
    assert ingest(capsys, fresh_dsn, "--server", "pbs01", str(bare))[0] == 0
    assert query(fresh_dsn, "SELECT server FROM finished_jobs WHERE job_id = '9'") == [("pbs01",)]


@pytest.mark.slow
def test_a_long_stretch_without_newline_is_read_in_linear_time_and_bounded_memory(
    fresh_dsn, template_e, tmp_path
):
    """Issue 9 item 7: `truncate -s +256M FILE` took 4.7 s and 565 MB at every run (carry +
    block copied again per 4 MiB block); 1 GB took 76 s and 2.1 GB with the lock held."""

    log = tmp_path / "20261122"
    log.write_text("".join(e_line(template_e, i) for i in range(3)))
    stretch = 64 << 20
    with open(log, "ab") as fh:
        fh.truncate(fh.tell() + stretch)  # a hole of NULs, as truncate(1) makes

    def run() -> tuple[str, str, float]:
        # a wrapper process of its own: RUSAGE_CHILDREN then covers this ingest alone (in
        # pytest's process it would also cover every child that ran before)
        wrapper = (
            "import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "sys.stdout.write(p.stdout)\n"
            "sys.stderr.write(p.stderr)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode)\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", wrapper, sys.executable, "-m", "softwalltime_ingest",
             "--dsn", fresh_dsn, "--no-progress", str(log)],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        out, last = proc.stdout.rsplit("\n", 2)[0], proc.stdout.rsplit("\n", 2)[1]
        peak_kb, code = (int(x) for x in last.split())
        assert code == 0, proc.stderr
        return out, proc.stderr, peak_kb / 1024

    out, err, peak_mb = run()
    assert count(fresh_dsn) == 3
    assert f"incomplete last line ({stretch} bytes) left for the next run" in out
    assert peak_mb < 150, peak_mb  # the stretch is never held whole (64 MiB of it)
    # the line ends at last, records follow: it is one malformed line, the rest is stored
    with open(log, "ab") as fh:
        fh.write(b"\n" + "".join(e_line(template_e, i) for i in (10, 11)).encode())
    out, err, peak_mb = run()
    assert count(fresh_dsn) == 5
    assert (
        f"{log}:4: a line of {stretch + 1:,} bytes, newline included (over 16 MiB): skipped" in err
    )
    assert summary_row(out, "?") == (1, 0, 0, 1)
    assert checkpoint(fresh_dsn, log) == (log.stat().st_size, 6)
    assert peak_mb < 150, peak_mb


def test_a_file_name_that_is_not_utf8_is_stored_losslessly(fresh_dsn, template_e, tmp_path):
    """Issue 9 item 3: the commit thread died with UnicodeEncodeError; with one batch the run
    exited 0 having stored nothing (again at every run), with more it hung holding the lock."""
    from softwalltime_ingest.files import db_path, os_path

    raw = os.path.join(os.fsencode(tmp_path), b"2024\xff0101")
    with open(raw, "w") as fh:
        fh.write("".join(e_line(template_e, i) for i in range(5)))
    name = os.fsdecode(raw)  # as argv gives it: surrogateescape
    for extra in ([], ["--batch-size", "2"]):  # one batch, and several
        proc = _ingest_process(fresh_dsn, *extra, name)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    assert count(fresh_dsn) == 5
    stored = db_path(name)
    assert stored == "bytes:" + str(tmp_path).replace("\\", "\\x5c") + "/2024\\xff0101"
    assert os_path(stored) == name
    assert query(
        fresh_dsn, "SELECT byte_offset, line_number FROM ingest_checkpoints WHERE path = %s", stored
    ) == [(os.path.getsize(raw), 5)]
    assert query(fresh_dsn, "SELECT DISTINCT source_file FROM finished_jobs") == [(stored,)]
    assert "(1 unchanged)" in out  # the second run found the checkpoint under the same name


@given(st.binary(min_size=1, max_size=40).filter(lambda b: b"/" not in b and b"\0" not in b))
@settings(max_examples=300, deadline=None)
def test_db_path_round_trips_every_file_name(name):
    from softwalltime_ingest.files import NON_UTF8_PREFIX, db_path, os_path

    path = os.fsdecode(b"/var/spool/pbs/" + name)
    text = db_path(path)
    text.encode("utf-8")  # storable: valid UTF-8 text
    assert os_path(text) == path
    assert text.startswith("/") != text.startswith(NON_UTF8_PREFIX)


def test_a_dead_commit_thread_is_an_error_not_a_hang(capsys, fresh_dsn, template_e, tmp_path):
    """Issue 9 item 3: any failure of the commit thread reaches the main thread."""
    from softwalltime_ingest import load as load_module

    def boom(self, *args):
        raise UnicodeEncodeError("utf-8", "x", 0, 1, "surrogates not allowed")

    log = tmp_path / "20261120"
    log.write_text("".join(e_line(template_e, i) for i in range(20)))
    original = load_module.Loader.commit_batch
    load_module.Loader.commit_batch = boom
    try:
        code, out, err = ingest(capsys, fresh_dsn, "--batch-size", "2", str(log))
    finally:
        load_module.Loader.commit_batch = original
    assert code == 1
    assert "a batch could not be stored (UnicodeEncodeError" in err
    assert count(fresh_dsn) == 0


def test_a_reused_inode_with_the_same_first_line_is_not_taken_for_a_rename(
    capsys, fresh_dsn, tmp_path, template_e
):
    """Issue 9 item 6: ext4 reuses inodes at once; a new file with the old one's inode and
    first line looked renamed and was resumed at the old offset (5 of 500 rows stored)."""
    old = tmp_path / "20261120"
    old.write_text("".join(e_line(template_e, n) for n in range(500)))
    assert ingest(capsys, fresh_dsn, str(old))[0] == 0
    new = tmp_path / "20261121"
    old.rename(new)  # the same inode under a new name ...
    with open(new, "w") as fh:  # ... holding a new log that starts with the same line
        fh.write(e_line(template_e, 0) + "".join(e_line(template_e, n) for n in range(1000, 1504)))
    code, out, _ = ingest(capsys, fresh_dsn, str(new))
    assert code == 0 and "renamed from" not in out
    assert count(fresh_dsn) == 500 + 504
    assert checkpoint(fresh_dsn, new) == (new.stat().st_size, 505)
    # a real rotation (rename, then growth) is still followed
    rotated = tmp_path / "rotated"
    new.rename(rotated)
    with open(rotated, "a") as fh:
        fh.write(e_line(template_e, 2000))
    code, out, _ = ingest(capsys, fresh_dsn, str(rotated))
    assert code == 0 and "renamed from" in out
    assert summary_row(out, "E") == (1, 1, 0, 0)


def test_a_multi_member_archive_read_to_its_end_is_unchanged_next_time(
    capsys, fresh_dsn, tmp_path, template_e
):
    """Issue 9 item 8: its trailer gives the size of the last member only, so a
    multi-member .gz was reported "grown" and decompressed again at every run."""
    archive = tmp_path / "20261120.gz"
    with open(archive, "wb") as fh:
        for part in range(3):  # as `cat a.gz b.gz c.gz` makes
            fh.write(
                gzip.compress(
                    "".join(e_line(template_e, 10 * part + i) for i in range(10)).encode()
                )
            )
    code, out, _ = ingest(capsys, fresh_dsn, str(archive))
    assert code == 0 and count(fresh_dsn) == 30 and "(1 new)" in out
    code, out, _ = ingest(capsys, fresh_dsn, str(archive))
    assert code == 0 and "(1 unchanged)" in out and "0 records" in out


def test_a_truncated_archive_gives_its_readable_part_and_an_error(
    capsys, caplog, fresh_dsn, tmp_path, template_e
):
    """Issue 9 item 8: a truncated .gz was refused whole, readable part included."""
    data = gzip.compress("".join(e_line(template_e, i) for i in range(3000)).encode())
    archive = tmp_path / "20261120.gz"
    archive.write_bytes(data[: len(data) * 2 // 3])
    code, out, err = ingest(capsys, fresh_dsn, str(archive))
    assert code == 1
    assert "the archive is truncated (it ends inside a gzip member)" in caplog.text
    assert 1000 < count(fresh_dsn) < 3000  # what could be read is stored
    stored = count(fresh_dsn)
    offset, lines = checkpoint(fresh_dsn, archive)
    assert lines == stored  # and checkpointed exactly


def test_trailing_junk_after_an_archive_keeps_its_rows_and_is_reported(
    capsys, caplog, fresh_dsn, tmp_path, big_log, template_e
):
    """Issue 16 case 10: junk after the last gzip member lost the archive's valid rows (all
    of a small one: its first line could not even be read; the last 4 MiB of a big one)."""
    path, n = big_log
    data = gzip.compress(path.read_bytes())
    junk = b"appended by a broken copy\n" * 40
    archive = tmp_path / "20261122.gz"
    archive.write_bytes(data + junk)
    small = tmp_path / "20261123.gz"
    small.write_bytes(gzip.compress(e_line(template_e, n + 1).encode()) + b"x")
    code, out, err = ingest(capsys, fresh_dsn, str(archive), str(small))
    assert code == 0, err
    assert count(fresh_dsn) == n + 1
    expected = (
        f"{archive}: {len(junk):,} byte(s) at byte {len(data):,}, after the last gzip member,"
        " are not gzip data: ignored (all before them was read)"
    )
    assert expected in out and expected in caplog.text
    assert f"{small}: 1 byte(s) at byte " in out
    assert checkpoint(fresh_dsn, archive) == (path.stat().st_size, n)
    code, out, _ = ingest(capsys, fresh_dsn, str(archive), str(small))  # read to its end
    assert code == 0 and "(2 unchanged)" in out and "gzip" not in out


def test_zero_padding_after_an_archive_is_no_junk(capsys, fresh_dsn, tmp_path, template_e):
    archive = tmp_path / "20261122.gz"
    lines = "".join(e_line(template_e, i) for i in range(10))
    archive.write_bytes(gzip.compress(lines.encode()) + bytes(3 << 20))  # as tar pads
    code, out, err = ingest(capsys, fresh_dsn, str(archive))
    assert (code, count(fresh_dsn)) == (0, 10), err
    assert "gzip" not in out + err


def test_a_corrupt_member_after_a_good_one_keeps_the_good_rows(
    capsys, caplog, fresh_dsn, tmp_path, template_e
):
    archive = tmp_path / "20261122.gz"
    good = gzip.compress("".join(e_line(template_e, i) for i in range(10)).encode())
    archive.write_bytes(good + b"\x1f\x8b\x08\x00garbage that is no deflate stream")
    code, out, err = ingest(capsys, fresh_dsn, str(archive))
    assert code == 1 and "1 file(s) could not be read" in err
    assert f"{archive}: cannot read: Error -3 while decompressing" in caplog.text
    assert count(fresh_dsn) == 10


def test_odd_entries_named_like_logs_in_the_directory_are_reported(
    capsys, caplog, fresh_dsn, tmp_path, template_e
):
    """Issue 9 item 8: in --dir mode a directory, FIFO or dangling symlink named YYYYMMDD
    was skipped silently (on the command line it is reported)."""
    acct = tmp_path / "accounting"
    acct.mkdir()
    (acct / "20261120").write_text(e_line(template_e, 1))
    (acct / "20261121").mkdir()
    os.mkfifo(acct / "20261122")
    (acct / "20261123").symlink_to(tmp_path / "gone")
    code, out, err = ingest(capsys, fresh_dsn, "--dir", str(acct))
    assert code == 1 and count(fresh_dsn) == 1
    assert "3 unusable" in out and "3 file(s) could not be read" in err
    for name in ("20261121", "20261122"):
        assert f"{acct / name}: not a regular file" in caplog.text
    assert f"{acct / '20261123'}: cannot read" in caplog.text


@pytest.mark.slow
def test_worker_processes_give_the_same_result(capsys, fresh_dsn, big_log):
    path, n = big_log
    code, out, _ = ingest(capsys, fresh_dsn, "--workers", "2", "--batch-size", "3000", str(path))
    assert code == 0
    assert summary_row(out, "E") == (n, n, 0, 0)
    assert count(fresh_dsn) == n
    assert checkpoint(fresh_dsn, path) == (path.stat().st_size, n)
    offsets = query(
        fresh_dsn, "SELECT min(source_offset), count(DISTINCT source_offset) FROM finished_jobs"
    )
    assert offsets == [(0, n)]


def test_cron_entry_runs_every_five_minutes_without_secrets():
    cron = (REPO / "ingest" / "softwalltime-ingest.cron").read_text()
    entries = [
        line.split()
        for line in cron.splitlines()
        if line.strip() and not line.startswith("#") and "=" not in line.split()[0]
    ]
    assert len(entries) == 1
    fields = entries[0]
    assert fields[:6] == ["*/5", "*", "*", "*", "*", "root"]
    # errors only, no redirect: cron mails failures, not summaries (issue 33)
    assert fields[6:] == ["softwalltime-ingest", "--quiet"]
    assert not re.search(r"://[^@\s]*:[^@\s]*@|password=", cron)  # no password in the crontab
    assert "advisory lock" in cron and ".pgpass" in cron


def test_print_cron_names_this_installations_command(capsys, tmp_path):
    """Issue 9 item 17: cron's PATH does not reach a virtualenv, the install the README
    recommends; the printed file uses the absolute path of this installation's command."""
    cfg = tmp_path / "sw.json"
    cfg.write_text("{}")
    code = cli.main(["--config", str(cfg), "ingest", "--print-cron"])
    out = capsys.readouterr().out
    assert code == 0
    (line,) = [x for x in out.splitlines() if x.startswith("*/5 ")]
    fields = line.split()
    assert fields[:6] == ["*/5", "*", "*", "*", "*", "root"]
    command = Path(fields[6])
    assert command.is_absolute() and command.name == "softwalltime-ingest"
    assert os.access(command, os.X_OK)
    # errors only: cron mails a failure, never a run's summary (issue 33)
    assert fields[7:] == ["--config", str(cfg), "--quiet"]
    # the rest is the shipped file, which says how to get this
    assert "softwalltime ingest --print-cron > /etc/cron.d/softwalltime-ingest" in out


def test_text_values_survive_copy_exactly(capsys, fresh_dsn, tmp_path):
    log = tmp_path / "acct"
    log.write_text(
        "12/21/2009 15:27:00;E;1.s;user=u jobname=None queue=NoneQ "
        "ctime=1261424924 end=1261425023\n"
        "12/21/2009 15:27:00;E;2.s;user=u jobname=a\\b\tc ctime=1261424924 end=1261425023\n"
        "12/21/2009 15:27:00;E;3.s;user=u jobname=x\x00y ctime=1261424924 end=1261425023\n"
    )
    code, out, _ = ingest(capsys, fresh_dsn, str(log))
    assert code == 0
    rows = query(fresh_dsn, "SELECT job_id, job_name, queue, account FROM finished_jobs ORDER BY 1")
    assert rows == [
        ("1.s", "None", "NoneQ", None),
        ("2.s", "a\\b\tc", None, None),
        ("3.s", "xy", None, None),  # NUL cannot be stored in PostgreSQL text; it is dropped
    ]


# --- the parser's fast paths against the reference ------------------------------------

_E_BASE = {
    "user": "alice",
    "group": "phys",
    "project": "_pbs_project_default",
    "jobname": "relax",
    "queue": "workq",
    "ctime": "1743598800",
    "qtime": "1743598800",
    "etime": "1743598801",
    "start": "1743598862",
    "exec_vnode": "(n001:ncpus=8)",
    "Resource_List.mem": "4gb",
    "Resource_List.ncpus": "8",
    "Resource_List.ngpus": "0",
    "Resource_List.nodect": "1",
    "Resource_List.select": "1:ncpus=8:mem=4gb",
    "Resource_List.walltime": "04:00:00",
    "Resource_List.soft_walltime": "01:00:00",
    "end": "1743602591",
    "Exit_status": "0",
    "resources_used.walltime": "01:02:09",
    "resources_used.cput": "08:10:00",
    "run_count": "1",
    "account": "acc",
}
_FIELD_KEYS = st.sampled_from(
    sorted(_E_BASE)
    + ["session", "x", "_y.z", "accounting_id", "gridname", "Resource_List.place"]
    + ["resources_used.diag_messages"]
)
# Quoted values as PBS writes them and as it never does: spaces (also double, leading and
# trailing), the other quote inside, its own quote inside or at an end, '=' and a key-like
# word inside, unmatched opening quotes, a quote in the middle of a raw value.
_QUOTED_VALUES = st.one_of(
    st.builds(
        lambda q, body: q + body + q,
        st.sampled_from(['"', "'"]),
        st.text(alphabet="ab =\"'", max_size=8),
    ),
    st.builds(
        lambda q, body, end: q + body + end,
        st.sampled_from(['"', "'"]),
        st.text(alphabet="ab =\"'", max_size=6),
        st.sampled_from(["", '"', "'", '" ', "' ", '"x', " x=1"]),
    ),
    st.sampled_from(
        ['"SCSG0001"', '""', "''", '"', "'", '"a b"', '" a"', '"a "', '"a  b"', "'{}'"]
        + ['\'{"n": "m"}\'', '"it\'s"', '"a"b"', '"a" b"', '"a b=c"', 'a"b', "a'", '"0"']
        + ['"04:00:00"', '"4gb"', '"x queue=q"', '"a" x=1', '"8"', '"1743598800"']
    ),
)
_ODD_VALUES = st.one_of(
    _QUOTED_VALUES,
    st.sampled_from(
        ["", "0", "00", "007", "-1", "-0", "+3", "1_0", "2147483648", "99999999999", "1e3"]
        + ["4 gb", "1:2:3:4", "10:00", "-01:00", "5000000p", '"q"', "'q", "a;b", "None"]
        + ["\\N", "a\\b", "t\tb", "é", "٣", "1.5", " "]
        # at and beyond the bounds (accounting.FIELD_BOUNDS), and times around _E_BASE's
        + ["4102444800", "4102444801", "87600:00:00", "87600:00:01", "315360000", "315360001"]
        + ["100000000", "100000001", "99999999", "-00:00:01", "596523:14:07", "2147483647"]
        + ["1743598799", "1743598800", "1743598862", "1743602590", "1743602591", "1743602592"]
    ),
    st.integers(-(2**40), 2**40).map(str),
    st.text(alphabet="0123456789:=;\"' .-\\\té", max_size=12),
)


@st.composite
def _e_lines(draw):
    attrs = dict(_E_BASE)
    for key in draw(st.lists(st.sampled_from(sorted(_E_BASE)), max_size=4)):
        attrs.pop(key, None)  # a missing field
    for key, value in draw(st.lists(st.tuples(_FIELD_KEYS, _ODD_VALUES), max_size=3)):
        attrs[key] = value  # an odd value, or an extra key
    for key in draw(st.lists(st.sampled_from(sorted(attrs)), max_size=3)):
        if attrs[key] and attrs[key][0] not in "\"'":
            attrs[key] = f'"{attrs[key]}"'  # a quoted value the checked path unquotes
    words = [f"{k}={v}" for k, v in attrs.items()]
    words = draw(st.permutations(words))
    if draw(st.booleans()):
        words += draw(st.lists(st.sampled_from(["user=bob", "free", "=x", ""]), max_size=2))
    ident = draw(
        st.one_of(
            st.sampled_from(["5012.pbs01", "5012", "5012.", "0.s", "05.s", "7[3].s", "7[].s"]),
            st.sampled_from(["R5.s", "license", "5012.a b", "1234567890123456789.s"]),
            st.from_regex(r"[0-9]{1,20}(\.[a-z0-9.]{0,6})?", fullmatch=True),
        )
    )
    rtype = draw(st.sampled_from(["E", "E", "E", "R", "Q"]))
    date = draw(st.sampled_from(["04/02/2025 14:03:11", "4/02/2025 14:03:11"]))
    tail = draw(st.sampled_from(["", "\n", " \n", "\r\n"]))
    return f"{date};{rtype};{ident};{' '.join(words)}{tail}"


def _reference_copy_line(text: str, server: str | None) -> str | None:
    """What the checked path stores for a line (None: nothing, or an error)."""
    try:
        rec = acct.parse_line(text)
        if rec.duplicate_keys or rec.rtype != "E":
            return None
        row = acct.finished_job_row(rec, server)
    except ParseError:
        return None
    if row is None:
        return None
    return copy_line(row, "src", 7, "\\" in text or "\t" in text or "\r" in text)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(line=_e_lines(), server=st.sampled_from([None, "srv"]))
def test_e_fast_path_equals_the_checked_path(line, server):
    expected = _reference_copy_line(line, server)
    for _ in range(2):  # a layout gets its template on its second sighting
        got = e_copy_line(line, "src", 7, server)
        assert got is None or got == expected


def test_e_fast_path_takes_clean_real_records():
    lines = [
        line
        for path in (LOCAL, EXAMPLES)
        for line in path.read_text().splitlines()
        if ";E;" in line and '="' not in line
    ]
    taken = 0
    for line in lines * 2:
        got = e_copy_line(line, "src", 7, None)
        assert got is None or got == _reference_copy_line(line, None)
        taken += got is not None
    assert taken >= len(lines) // 2  # most clean E records skip the checked path


_QUOTABLE = st.text(
    alphabet=st.characters(blacklist_categories=["Cs", "Cc"], blacklist_characters='"'),
    max_size=12,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    account=_QUOTABLE,
    project=_QUOTABLE,
    place=_QUOTABLE,
    diag=st.text(alphabet=st.characters(blacklist_characters="'\n\r\t\\;"), max_size=8),
    server=st.sampled_from([None, "srv"]),
)
def test_e_fast_path_takes_quoted_values(account, project, place, diag, server):
    """Quoted account, project, Resource_List.* and resources_used.* values (any text
    but their own quote, spaces included) stay on the fast path and store the same."""
    attrs = dict(_E_BASE)
    attrs["account"] = f'"{account}"'
    attrs["project"] = f'"{project}"' if " " in project else project or "p"
    attrs["Resource_List.place"] = f'"{place}"'
    attrs["resources_used.diag_messages"] = f"'{diag}'"
    attrs["accounting_id"] = f'"{account}"'
    line = "04/02/2025 14:03:11;E;5012.pbs01;" + " ".join(f"{k}={v}" for k, v in attrs.items())
    expected = _reference_copy_line(line, server)
    e_copy_line(line, "src", 7, server)  # a layout gets its template on its second sighting
    got = e_copy_line(line, "src", 7, server)
    if "\\" in line or ";" in line or project.startswith("'"):
        # declined: a character COPY must escape, a ';' in the message, or a raw value
        # that starts with a quote (the checked path looks for its closing quote)
        assert got is None or got == expected
    else:
        assert expected is not None and got == expected


def test_e_fast_path_takes_real_quoted_records():
    """NCAR (account="...") and CESNET (resources_used.diag_messages='{}' on 154 of 200) E lines."""
    for name in (
        "ncar_qhist_casper-pbs_testdata.log",
        "fairshareSim_OpenPBS_cesnet-torque1-testserver.log",
    ):
        lines = [line for line in (PBS_SAMPLES / name).read_text().splitlines() if ";E;" in line]
        quoted = [line for line in lines if '="' in line or "='" in line]
        assert len(quoted) >= 4 and len(quoted) >= len(lines) * 3 // 4, name
        for line in lines:
            e_copy_line(line, "src", 7, None)  # layouts get their templates
        for line in lines:
            expected = _reference_copy_line(line, None)
            assert expected is not None
            assert e_copy_line(line, "src", 7, None) == expected, line
        data = (PBS_SAMPLES / name).read_bytes()
        assert parse_chunk(data, 0, 0, "src", None) == _parse_lines(data, 0, 0, "src", None, False)


_OTHER_LINES = st.sampled_from(
    [
        "04/02/2025 14:00:00;Q;5012.pbs01;queue=workq \n",
        "04/02/2025 14:00:01;S;5012.pbs01;user=alice start=1743598862 \n",
        "04/02/2025 14:00:02;L;license;floating license hour:0 day:0 avail:0\n",
        "04/02/2025 14:00:03;R;5013.pbs01;user=a ctime=1 end=2 run_count=1\n",
        "04/02/2025 14:00:04;X;5012.pbs01;queue=workq\n",
        "04/02/2025 14:00:05;Q;5012.pbs01;a=1;b\n",
        "04/02/2025 14:00:06;Q;5012.pbs01;queue=w04/02/2025 14:00:07;Q;5014.pbs01;queue=w\n",
        "04/02/2025 14:00:08;E;99.s;user=u ctime=10 end=2004/02/2025 14:00:09;E;98.s;user=v\n",
        "\n",
        "# comment\n",
        "   \n",
        "garbage\n",
        "04/02/2025 14:00:10;Q;;queue=workq\n",
        "04/02/2025 14:00:11;S;5012.pbs01;a=\x00b\n",
        # E or R at byte 20 but not a good prefix: with a line holding four ';' the chunk
        # still has three per line, and only the E and R lines' own checks can tell
        "# comment  14:00:12;E;5015.pbs01;user=u ctime=1743598800 end=1743598900\n",
        "04/02/2025 14:00:13;R;5016.pbs01 user=a ctime=1 end=2 run_count=1\n",
        "04/02/2025 14:00:14;E;5017.pbs01 user=u ctime=1743598800 end=1743598900\n",
        "04/02/2025 14:0x:15;E;5018.pbs01;user=u ctime=1743598800 end=1743598900\n",
    ]
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.one_of(_e_lines(), _OTHER_LINES), max_size=12),
    start=st.integers(0, 10**6),
    server=st.sampled_from([None, "srv"]),
)
def test_parse_chunk_equals_the_line_by_line_reference(lines, start, server):
    data = "".join(line if line.endswith("\n") else line + "\n" for line in lines).encode()
    for chunk in (data, data.rstrip(b"\n")):  # an archive's last line may lack its newline
        got = parse_chunk(chunk, start, 3, "src", server)
        assert got == _parse_lines(chunk, start, 3, "src", server, fast=False)


@pytest.mark.parametrize(
    "odd",
    [
        "# comment  14:00:12;E;5015.pbs01;user=u ctime=1743598800 end=1743598900\n",
        "04/02/2025 14:00:13;R;5016.pbs01 user=a ctime=1 end=2 run_count=1\n",
        "04/02/2025 14:00:14;E;5017.pbs01 user=u ctime=1743598800 end=1743598900\n",
        "04/02/2025 14:0x:15;E;5018.pbs01;user=u ctime=1743598800 end=1743598900\n",
    ],
)
def test_bad_e_or_r_prefix_in_an_otherwise_clean_chunk(template_e, odd):
    """The bulk check validates only the prefixes of other lines; an E or R line with a
    bad one (beside a Q line with a fourth ';' if it has two) must still be found."""
    fourth = ";b" if odd.count(";") == 2 else ""  # three ';' per line in the chunk
    data = (
        e_line(template_e, 1)
        + odd
        + f"04/02/2025 14:00:05;Q;5012.pbs01;a=1{fourth}\n"
        + e_line(template_e, 2)
        + e_line(template_e, 3)
    ).encode()
    expected = _parse_lines(data, 0, 0, "src", None, False)
    assert expected.malformed_total >= 1 or expected.ignored == 1
    assert parse_chunk(data, 0, 0, "src", None) == expected


def test_parse_chunk_on_real_samples_equals_the_reference():
    paths = [p for p in PBS_SAMPLES.iterdir() if p.suffix == ".log"] + [EXAMPLES]
    assert len(paths) >= 5
    for path in paths:
        data = path.read_bytes()
        for server in (None, "srv"):
            got = parse_chunk(data, 0, 0, "src", server)
            assert got == _parse_lines(data, 0, 0, "src", server, fast=False), path


def test_clean_chunk_takes_the_bulk_path(monkeypatch, template_e):
    data = "".join(
        e_line(template_e, n).replace(";E;", ";Q;") + e_line(template_e, n) for n in range(1, 5)
    ).encode()
    expected = _parse_lines(data, 0, 0, "src", None, False)
    assert expected.counts == {"Q": [4, 0], "E": [4, 0]} and len(expected.rows) == 4
    monkeypatch.setattr(parse_module, "_parse_lines", None)  # must not be needed
    assert parse_chunk(data, 0, 0, "src", None) == expected


def test_a_batch_holding_stored_rows_keeps_them_once_and_stores_the_new(
    capsys, fresh_dsn, tmp_path, template_e
):
    first = tmp_path / "20250101"
    first.write_text("".join(e_line(template_e, n) for n in range(1, 4)))
    assert ingest(capsys, fresh_dsn, str(first))[0] == 0
    # The same records again (a copy under another name) and one new: the plain INSERT
    # meets a unique violation, the batch goes again with ON CONFLICT DO NOTHING.
    again = tmp_path / "20250102"
    again.write_text(first.read_text() + e_line(template_e, 4))
    code, out, _ = ingest(capsys, fresh_dsn, str(again))
    assert code == 0
    assert summary_row(out, "E")[:2] == (4, 1)  # read 4, stored 1
    assert query(fresh_dsn, "SELECT job_id, source_file FROM finished_jobs ORDER BY 1") == [
        ("1.vm", str(first)),
        ("2.vm", str(first)),
        ("3.vm", str(first)),
        ("4.vm", str(again)),
    ]


@pytest.mark.parametrize("name", ["pbs\t01", "pbs\\01", "pbs 01", "pbs01\n", ""])
def test_server_name_must_be_a_host_name(capsys, fresh_dsn, tmp_path, name):
    """--server goes into COPY rows verbatim: anything COPY would escape is refused."""
    log = tmp_path / "20250402"
    log.write_text("")
    code = cli.main(["--dsn", fresh_dsn, "ingest", "--no-progress", "--server", name, str(log)])
    err = capsys.readouterr().err
    assert code == 1 if name else code == 0
    if name:
        assert "expected a host name" in err


@pytest.mark.parametrize("stale_first", [True, False])
def test_a_rename_is_found_among_checkpoints_that_share_inode_and_first_line(
    tmp_path, template_e, stale_first
):
    """Two checkpoints may share (inode, first line) once an inode was reused; which one the
    database returned first decided whether a real rotation was followed."""
    from softwalltime_ingest.files import Checkpoint, index_checkpoints, inspect, plan

    rotated = tmp_path / "rotated"
    rotated.write_text("".join(e_line(template_e, n) for n in range(20)))
    f = inspect(str(rotated))
    line = f.fingerprint.partition(" head=")[0]
    good = Checkpoint(str(tmp_path / "20261121"), f.inode, f.fingerprint, 1000, 3)
    stale = Checkpoint(str(tmp_path / "20261120"), f.inode, line + " head=" + "0" * 40 + ":9", 9, 1)
    found = {cp.path: cp for cp in ([stale, good] if stale_first else [good, stale])}
    p = plan(f, None, index_checkpoints(found))
    assert (p.state, p.offset, p.line_number) == ("renamed", 1000, 3)


def _takes_ingest_lock(conn) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,))
        got = bool(cur.fetchone()[0])
        if got:
            cur.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
    conn.commit()
    return got


def test_the_ingest_lock_is_free_before_the_ingesters_session_ends(fresh_dsn):
    """An ingest started right after another found the lock still held ("another ingest is
    running ... 0 s ago; nothing done"): closing the session released it only once its
    backend had exited, after the client's close returned. The loader now releases it
    itself; here while its session is still open."""
    from softwalltime_ingest.load import Loader, connect

    loader = Loader(connect(fresh_dsn))
    other = psycopg2.connect(fresh_dsn)
    try:
        assert loader.try_lock()
        assert not _takes_ingest_lock(other)
        loader.release_lock()
        assert not loader.conn.closed
        assert _takes_ingest_lock(other)
    finally:
        loader.close()
        other.close()


@pytest.mark.parametrize("step", ["try_lock", "lock_holder", "checkpoints"])
@pytest.mark.parametrize("how", ["terminated", "closed"])
def test_a_connection_lost_at_the_lock_step_is_one_clean_error(fresh_dsn, step, how):
    """Issue 32: an ingester whose backend was killed during the lock step printed a
    27-line traceback: the except blocks called rollback() on the closed connection,
    which raised again. Now it is a DatabaseError of one line (the CLI's one-line error)."""
    from softwalltime_ingest.load import Loader, connect

    from softwalltime.errors import DatabaseError

    loader = Loader(connect(fresh_dsn))
    try:
        if how == "closed":
            loader.conn.close()
        else:
            other = psycopg2.connect(fresh_dsn)
            try:
                with other.cursor() as cur:
                    cur.execute("SELECT pg_terminate_backend(%s)", (loader.conn.info.backend_pid,))
                    assert cur.fetchone() == (True,)
            finally:
                other.close()
        with pytest.raises(DatabaseError) as caught:
            getattr(loader, step)()
        message = str(caught.value)
        assert "\n" not in message and message.startswith("cannot ")
        assert message.split(": ", 1)[1]  # says why
    finally:
        loader.close()


def test_a_template_is_learnt_from_an_e_record_and_only_from_one():
    """The ingester's template search alone (issue 51 split it out of e_copy_line)."""
    from softwalltime_ingest.parse import _find_template

    line = next(x for x in LOCAL.read_text().splitlines() if e_copy_line(x, "src", 7, None))
    tpl, match = _find_template(line, False)
    assert match.group(0) == line and tpl.regex.fullmatch(line) is not None
    assert _find_template(line.replace(";E;", ";Q;", 1), False) is None
    assert _find_template("not a record", False) is None
