"""The ingester keeps live job states (issue 20): Q, S, R, D and A records into
``live_jobs`` on a real PostgreSQL, exactly once, incrementally, bounded."""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path

import psycopg2
import pytest
from helpers_live import d_line, e_line, q_line, r_line, s_line
from helpers_wait import ingest_lock_released
from hypothesis import given, settings
from hypothesis import strategies as st
from softwalltime_ingest import run as run_module
from softwalltime_ingest.parse import _parse_lines, parse_chunk

from softwalltime import cli

NOW = int(time.time())


def ingest(capsys, dsn: str, *args: str) -> tuple[int, str, str]:
    code = cli.main(["--dsn", dsn, "ingest", "--no-progress", *args])
    out, err = capsys.readouterr()
    return code, out, err


def states(dsn: str) -> dict[str, tuple]:
    """job id -> (state, user, ncpus, walltime_s, soft_walltime_s, started_at epoch)."""
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT job_id, state, username, ncpus, walltime_s, soft_walltime_s,"
                " extract(epoch FROM started_at)::bigint FROM live_jobs"
            )
            return {r[0]: tuple(r[1:]) for r in cur.fetchall()}
    finally:
        conn.close()


def write(path: Path, *lines: str) -> Path:
    path.write_text("".join(lines))
    return path


def append(path: Path, *lines: str) -> None:
    with open(path, "a") as fh:
        fh.write("".join(lines))


def test_a_jobs_life_queued_running_finished(capsys, fresh_dsn, tmp_path):
    log = write(tmp_path / "20261125", q_line(1, NOW - 600, ncpus=2, soft="00:20:00"))
    assert ingest(capsys, fresh_dsn, str(log))[0] == 0
    assert states(fresh_dsn) == {"1.pbshost": ("queued", "alice", 2, 3600, 1200, None)}

    append(log, s_line(1, NOW - 600, NOW - 300, ncpus=2, soft="00:20:00"))
    code, out, _ = ingest(capsys, fresh_dsn, str(log))
    assert code == 0
    assert states(fresh_dsn) == {"1.pbshost": ("running", "alice", 2, 3600, 1200, NOW - 300)}
    assert "live job states: 0 queued, 1 running now (1 written, 0 stale dropped)" in out

    append(log, e_line(1, NOW - 600, NOW - 300, NOW - 10, ncpus=2))
    assert ingest(capsys, fresh_dsn, str(log))[0] == 0
    assert states(fresh_dsn) == {}  # finished_jobs has it now


def test_deleted_requeued_and_an_e_before_its_q(capsys, fresh_dsn, tmp_path):
    log = write(
        tmp_path / "20261125",
        q_line(1, NOW - 900),
        q_line(2, NOW - 800),
        d_line(1, NOW - 700),  # deleted while queued: no E ever
        s_line(2, NOW - 800, NOW - 600),
        r_line(2, NOW - 800, NOW - 600, NOW - 500),  # requeued: queued again
        e_line(3, NOW - 900, NOW - 850, NOW - 400),  # its Q was in a file never read
    )
    assert ingest(capsys, fresh_dsn, str(log))[0] == 0
    # job 1, queued and deleted in one chunk, leaves nothing (a re-read reads both)
    assert states(fresh_dsn) == {"2.pbshost": ("queued", "alice", 1, 3600, None, None)}
    # the older file with job 3's Q turns up (a backfill): 3 finished, it stays out
    old = write(tmp_path / "20261124", q_line(3, NOW - 900))
    assert ingest(capsys, fresh_dsn, str(old))[0] == 0
    assert "3.pbshost" not in states(fresh_dsn)


def test_a_rotated_file_read_again_brings_nothing_back(capsys, fresh_dsn, tmp_path):
    day1 = write(tmp_path / "20261124", q_line(1, NOW - 900), q_line(2, NOW - 800))
    first = ingest(capsys, fresh_dsn, "--dir", str(tmp_path))
    assert first[0] == 0, first
    day2 = write(
        tmp_path / "20261125",
        d_line(1, NOW - 700),
        s_line(2, NOW - 800, NOW - 600),
    )
    second = ingest(capsys, fresh_dsn, "--dir", str(tmp_path))
    assert second[0] == 0, second
    expected = {
        "1.pbshost": ("deleted", "alice", 1, 3600, None, None),
        "2.pbshost": ("running", "alice", 1, 3600, None, NOW - 600),
    }
    assert states(fresh_dsn) == expected, (first, second)
    # logrotate compresses yesterday's file: a new file, read from its start
    with open(day1, "rb") as src, gzip.open(tmp_path / "20261124.gz", "wb") as dst:
        dst.write(src.read())
    day1.unlink()
    code, out, _ = ingest(capsys, fresh_dsn, "--dir", str(tmp_path))
    assert code == 0 and "1 new" in out
    assert states(fresh_dsn) == expected  # neither undeleted nor back in the queue
    assert day2.exists()


def test_impossible_state_records_are_refused_with_file_and_line(
    capsys, caplog, fresh_dsn, tmp_path
):
    bad_start = s_line(2, NOW - 800, NOW - 900)  # started before it was created
    no_cpus = q_line(3, NOW - 700).replace("Resource_List.ncpus=1", "Resource_List.ncpus=0")
    log = write(tmp_path / "20261125", q_line(1, NOW - 900), bad_start, no_cpus)
    code, out, _ = ingest(capsys, fresh_dsn, str(log))
    assert code == 0
    assert f"{log}:2: start={NOW - 900} is before ctime={NOW - 800}: impossible" in caplog.text
    assert f"{log}:3: Resource_List.ncpus=0 is out of range: below 1 or over 10^8" in caplog.text
    assert "1 start before ctime" in out and "1 Resource_List.ncpus below 1 or over 10^8" in out
    read, stored, skipped, bad = (int(x) for x in _row(out, "S"))
    assert (read, bad) == (1, 1)
    assert states(fresh_dsn) == {"1.pbshost": ("queued", "alice", 1, 3600, None, None)}


def _row(out: str, rtype: str) -> list[str]:
    for line in out.splitlines():
        fields = line.split()
        if fields and fields[0] == rtype:
            return [f.replace(",", "") for f in fields[-4:]]
    raise AssertionError(out)


def test_stale_states_and_old_tombstones_are_dropped(capsys, fresh_dsn, tmp_path, monkeypatch):
    stale = run_module.LIVE_STALE_S
    log = write(
        tmp_path / "20261125",
        q_line(1, NOW - stale - 60),  # its E or D never came: stale
        q_line(2, NOW - 60),
    )
    code, out, _ = ingest(capsys, fresh_dsn, str(log))
    assert code == 0
    assert set(states(fresh_dsn)) == {"2.pbshost"}
    assert "(2 written, 1 stale dropped)" in out
    append(log, d_line(2, NOW - 30))
    assert ingest(capsys, fresh_dsn, str(log))[0] == 0
    assert states(fresh_dsn)["2.pbshost"][0] == "deleted"
    monkeypatch.setattr(run_module, "LIVE_TOMBSTONE_S", 0)
    code, out, _ = ingest(capsys, fresh_dsn, str(log))
    assert code == 0 and states(fresh_dsn) == {}
    assert "0 queued, 0 running now (0 written, 1 stale dropped)" in out


def test_a_job_across_batches_and_chunks(capsys, fresh_dsn, tmp_path, monkeypatch):
    """Batches of 1 row: every record's effect lands in its own transaction, in order."""
    monkeypatch.setattr("softwalltime_ingest.files.CHUNK_BYTES", 512)
    lines = [q_line(n, NOW - 900 + n) for n in range(1, 6)]
    lines += [s_line(n, NOW - 900 + n, NOW - 500 + n) for n in (1, 2)]
    lines += [d_line(3, NOW - 400), e_line(1, NOW - 899, NOW - 499, NOW - 100)]
    log = write(tmp_path / "20261125", *lines)
    code, _out, err = ingest(capsys, fresh_dsn, "--batch-size", "1", str(log))
    assert code == 0, err
    assert {k: v[0] for k, v in states(fresh_dsn).items()} == {
        "2.pbshost": "running",
        "3.pbshost": "deleted",  # its Q was in an earlier chunk: a tombstone
        "4.pbshost": "queued",
        "5.pbshost": "queued",
    }


_LIFE = st.lists(st.sampled_from("QSRDE"), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), _LIFE), min_size=1, max_size=6))
def test_the_clean_path_and_the_line_path_fold_alike(lives):
    lines = []
    for n, kinds in lives:
        for kind in kinds:
            ctime = NOW - 1000 + n
            lines.append(
                {
                    "Q": q_line(n, ctime),
                    "S": s_line(n, ctime, ctime + 10),
                    "R": r_line(n, ctime, ctime + 10, ctime + 20),
                    "D": d_line(n, ctime + 30),
                    "E": e_line(n, ctime, ctime + 10, ctime + 40),
                }[kind]
            )
    data = "".join(lines).encode()
    fast = parse_chunk(data, 0, 0, "f", None)
    slow = _parse_lines(data, 0, 0, "f", None, False)
    assert fast.live == slow.live
    # one op per job whose last record is not E; a D or A marks the stored row gone
    every: dict[int, str] = {}
    for n, kinds in lives:
        every[n] = every.get(n, "") + "".join(kinds)
    assert sorted(op.key[1] for op in fast.live) == sorted(
        f"{n}.pbshost" for n, kinds in every.items() if kinds[-1] != "E"
    )
    for op in fast.live:
        kinds = every[int(op.key[1].split(".")[0])]
        assert op.gone == ("D" in kinds)
        assert (op.row is None) == (kinds[-1] == "D")


@pytest.mark.parametrize("record", ["Q", "S"])
def test_a_q_or_s_without_user_and_ctime_is_skipped_not_refused(record):
    # PBS before v20 wrote only queue=NAME in a Q record
    line = f"11/25/2026 10:00:00;{record};7.pbshost;queue=workq\n".encode()
    chunk = parse_chunk(line, 0, 0, "f", None)
    assert chunk.live == [] and chunk.malformed_total == 0


def _busy_log(path: Path, jobs: int) -> Path:
    """Jobs whose lives overlap: each queued 30 s after the previous, started 300 s after
    its submit, ended 600 s after; every 7th deleted while queued, every 11th requeued once.
    The last ones are still queued or running at the end of the log."""
    events = []
    for n in range(1, jobs + 1):
        c = NOW - 30 * (jobs - n) - 300
        events.append((c, q_line(n, c)))
        if n % 7 == 0:
            events.append((c + 200, d_line(n, c + 200)))
            continue
        if n % 11 == 0:
            events.append((c + 100, s_line(n, c, c + 100)))
            events.append((c + 150, r_line(n, c, c + 100, c + 150)))
        events.append((c + 300, s_line(n, c, c + 300)))
        events.append((c + 600, e_line(n, c, c + 300, c + 600)))
    events.sort(key=lambda e: e[0])
    path.write_text("".join(line for t, line in events if t < NOW))  # the log ends now
    return path


def _live_rows(dsn: str) -> list[tuple]:
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT server, job_id, ctime, job_seq, state, username, queue, ncpus,"
                " walltime_s, soft_walltime_s, qtime, started_at, event_at, source_file,"
                " source_offset FROM live_jobs ORDER BY job_seq"
            )
            return cur.fetchall()
    finally:
        conn.close()


@pytest.mark.slow
def test_killed_mid_run_then_run_again_gives_the_live_states_of_one_run(
    capsys, fresh_dsn, pg_server, template_db, tmp_path
):
    import signal
    import subprocess
    import sys

    log = _busy_log(tmp_path / "20261125", 30_000)
    name = f"swt_live_clean_{os.getpid()}"
    other = pg_server.create_database(name, template=template_db)
    try:
        assert ingest(capsys, other, str(log))[0] == 0  # one run, undisturbed
        clean = _live_rows(other)
    finally:
        pg_server.drop_database(name)
    assert {r[4] for r in clean} == {"queued", "running", "deleted"}

    proc = subprocess.Popen(
        [sys.executable, "-m", "softwalltime_ingest", "--dsn", fresh_dsn, "--no-progress"]
        + ["--batch-size", "50", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if _count(fresh_dsn) >= 2000:
                break
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert 2000 <= _count(fresh_dsn) < 30_000 * 6 // 7
    # CI once ran the second run while the killed one's backend still held the lock: it did
    # nothing, and the killed run's states were compared
    assert ingest_lock_released(fresh_dsn), "the killed run's session still holds the lock"
    code, out, _err = ingest(capsys, fresh_dsn, str(log))
    assert code == 0 and "another ingest is running" not in out, out
    # the same jobs queued and running, from the same records; tombstones depend on where
    # chunks began (a job queued and deleted within one leaves none), so not compared
    live = [r for r in _live_rows(fresh_dsn) if r[4] != "deleted"]
    assert live == [r for r in clean if r[4] != "deleted"]
    assert {r[4] for r in live} == {"queued", "running"}


def _count(dsn: str) -> int:
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM finished_jobs")
            return int(cur.fetchone()[0])
    finally:
        conn.close()
