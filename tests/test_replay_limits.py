"""Issue 16 case 7: the replay readers are bounded (decompressed size, line length, directory
entries) and jobs with values beyond the plausible bounds are skipped and counted by reason.

The gzip bombs are built here, never committed: one gzip member of 1 MiB of zeros (about
1 KB compressed), repeated; gzip readers take the members as one stream.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from softwalltime import cli
from softwalltime.cli.evaluate import MAX_INPUT_DEFAULT, input_size
from softwalltime.db import schema
from softwalltime.errors import ParseError
from softwalltime.replay import bounds
from softwalltime.replay import simulate as sim
from softwalltime.replay.history import read_finished_jobs
from softwalltime.replay.trace_readers import (
    DEFAULT_MAX_INPUT_BYTES,
    MAX_LINE_BYTES,
    SKIP_MALFORMED,
    InputLimits,
    pbs_files,
    read_lines,
    read_pbs,
    read_sources,
    read_swf,
)

REPO = Path(__file__).resolve().parents[1]
MIB = 1 << 20
EPOCH0 = 1356994800  # 2012-12-31 23:00:00 UTC
YEAR = 365 * 86400


def write_bomb(path: Path, mib: int, block: bytes = b"\0" * MIB) -> None:
    """``mib`` MiB (decompressed) of ``block`` repeated, as gzip members written one by one."""
    assert len(block) == MIB
    member = gzip.compress(block, 9)
    with open(path, "wb") as fh:
        for _ in range(mib):
            fh.write(member)


# Runs a command and reports its own peak RSS (RUSAGE_CHILDREN of this middle process holds
# only that command) and wall time, as JSON.
MEASURE = textwrap.dedent(
    """
    import json, resource, subprocess, sys, time
    started = time.monotonic()
    proc = subprocess.run(sys.argv[2:], capture_output=True, text=True,
                          timeout=float(sys.argv[1]))
    print(json.dumps({
        "seconds": time.monotonic() - started,
        "rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "code": proc.returncode, "out": proc.stdout, "err": proc.stderr,
    }))
    """
)


def measured(*argv: str, timeout: float = 60.0) -> dict:
    """Run ``softwalltime ARGV`` in a fresh process: its exit code, output, seconds, RSS."""
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, str(timeout), sys.executable, "-m", "softwalltime", *argv],
        capture_output=True,
        text=True,
        timeout=timeout + 30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr  # the middle process: a timeout is a traceback
    return json.loads(proc.stdout)


# --- the gzip bomb --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    """5 GiB of zeros in 5 MB: what made evaluate and simulate grow to 10 GiB for minutes."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.swf.gz"
    write_bomb(path, 5 * 1024)
    assert path.stat().st_size < 6 * MIB
    return path


@pytest.mark.slow
@pytest.mark.parametrize("command", [["evaluate"], ["simulate", "--procs", "64"]])
def test_a_gzip_bomb_ends_in_one_line_within_5_s_and_200_mb(bomb, tmp_path, command):
    plots = tmp_path / "plots"
    got = measured(*command, "--plot", str(plots), str(bomb))
    assert got["code"] == 1 and got["out"] == ""
    assert got["err"].splitlines() == [
        f"softwalltime: error: {bomb}:1: a line longer than 16 MiB; neither an SWF trace nor"
        " a PBS accounting log (their lines are at most a few kilobytes)"
    ]
    assert got["seconds"] <= 5.0, got
    assert got["rss_mb"] <= 200.0, got
    assert not plots.exists()  # nothing written


@pytest.mark.slow
@pytest.mark.parametrize(
    ("line", "message"),
    [
        # 64-byte comment lines: the size limit stops them
        (b";" * 63 + b"\n", "more than 64 MiB of input (decompressed, all sources together)"),
        # bare newlines, one Python step each: the line limit (one per 32 bytes) stops them
        (b"\n", "more than 2,097,152 lines in all sources together"),
    ],
)
def test_a_bomb_of_short_lines_stops_at_a_limit(tmp_path, line, message):
    path = tmp_path / "short.swf.gz"
    job = gzip.compress(b"1 0 0 10 1 -1 -1 1 60 -1 1 7 1 -1 1 -1 -1 -1\n")
    write_bomb(path, 2048, line * (MIB // len(line)))
    path.write_bytes(job + path.read_bytes())  # an SWF trace, by its first line
    got = measured("evaluate", "--max-input-size", "64mb", str(path))
    assert got["code"] == 1 and got["out"] == ""
    (err,) = got["err"].splitlines()
    assert err.startswith(f"softwalltime: error: {path}:")
    assert message in err and err.endswith("raise the limit with --max-input-size")
    assert got["seconds"] <= 5.0, got
    assert got["rss_mb"] <= 200.0, got


# --- the limits, exactly --------------------------------------------------------------------


def test_the_default_limits_are_documented_as_they_are():
    assert input_size(MAX_INPUT_DEFAULT) == DEFAULT_MAX_INPUT_BYTES == 1 << 30
    assert MAX_LINE_BYTES == 16 * MIB
    limits = InputLimits()
    assert (limits.max_bytes, limits.max_line_bytes, limits.max_lines) == (
        1 << 30,
        16 * MIB,
        1 << 25,
    )
    assert (limits.used, limits.lines) == (0, 0)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([b"a", b"\xc3\xa9", b"\n", b"\r", b"\xff"]), max_size=120),
    st.integers(1, 12),
)
def test_lines_are_read_whole_or_refused_at_the_first_too_long_one(tmp_path_factory, parts, limit):
    """Against a reference: the file's lines, split at b"\\n" only; a line longer than the
    limit (newline excluded) is an error naming its line number, whatever the chunking."""
    data = b"".join(parts)
    path = tmp_path_factory.mktemp("lines") / "f"
    path.write_bytes(data)
    expected = data.split(b"\n")
    if expected[-1] == b"":
        expected.pop()
    too_long = [k for k, line in enumerate(expected, 1) if len(line) > limit]
    limits = InputLimits(max_line_bytes=limit)
    if too_long:
        with pytest.raises(ParseError, match=rf"^{path}:{too_long[0]}: a line longer than "):
            list(read_lines(str(path), limits))
    else:
        got = list(read_lines(str(path), limits))
        assert got == [(k, x.decode("utf-8", "replace")) for k, x in enumerate(expected, 1)]
    assert limits.used == len(data) if not too_long else limits.used <= len(data)


def test_a_line_of_exactly_16_mib_is_read_and_one_byte_more_is_refused(tmp_path):
    path = tmp_path / "long"
    path.write_bytes(b"x" * MAX_LINE_BYTES + b"\n" + b"y" * (MAX_LINE_BYTES + 1))
    lines = read_lines(str(path))
    assert next(lines) == (1, "x" * MAX_LINE_BYTES)
    with pytest.raises(ParseError, match=rf"^{path}:2: a line longer than 16 MiB"):
        next(lines)


def test_the_size_limit_counts_decompressed_bytes_of_all_sources_together(tmp_path):
    swf = "; UnixStartTime: 0\n" + "1 0 0 10 1 -1 -1 1 60 -1 1 7 1 -1 1 -1 -1 -1\n" * 100
    one = tmp_path / "one.swf.gz"
    one.write_bytes(gzip.compress(swf.encode()))
    two = tmp_path / "two.swf"
    two.write_text(swf)
    size = len(swf)
    assert one.stat().st_size < size / 4  # the limit is on what the file gives, decompressed
    # exactly enough for both (sniffing the format is not counted)
    trace = read_sources([str(one), str(two)], limits=InputLimits(2 * size))
    assert len(trace.jobs) == 200
    with pytest.raises(ParseError, match=rf"^{two}:1: more than .* all sources together"):
        read_sources([str(one), str(two)], limits=InputLimits(2 * size - 1))
    with pytest.raises(ParseError, match=rf"^{one}:1: more than 100 bytes of input"):
        read_swf(str(one), limits=InputLimits(100))


def test_lines_are_capped_at_one_per_32_bytes_of_the_size_limit(tmp_path):
    path = tmp_path / "blank"
    path.write_bytes(b"\n" * 11)
    limits = InputLimits(max_bytes=320)
    assert limits.max_lines == 10
    with pytest.raises(ParseError, match=rf"^{path}:11: more than 10 lines in all sources"):
        list(read_lines(str(path), limits))
    path.write_bytes(b"\n" * 9 + b"no newline at the end")
    assert list(read_lines(str(path), InputLimits(max_bytes=320)))[-1] == (
        10,
        "no newline at the end",
    )


def test_the_cli_size_limit_names_the_file_and_keeps_exact_sizes(capsys, tmp_path):
    path = tmp_path / "t.swf"
    path.write_text("1 0 0 10 1 -1 -1 1 60 -1 1 7 1 -1 1 -1 -1 -1\n")
    size = path.stat().st_size
    assert cli.main(["evaluate", "--max-input-size", str(size), str(path)]) == 0
    capsys.readouterr()
    assert cli.main(["simulate", "--procs", "4", "--max-input-size", str(size - 1), str(path)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"softwalltime: error: {path}:1: more than {size - 1} bytes of input (decompressed, all"
        " sources together); stopped reading. If the input is real, raise the limit with"
        " --max-input-size"
    ]


@pytest.mark.parametrize("text", ["0", "-1", "1zb", "lots"])
def test_a_bad_size_is_refused_by_the_option(capsys, text):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["evaluate", "--max-input-size", text, "x.swf"])
    assert exit_.value.code == 2
    assert "argument --max-input-size:" in capsys.readouterr().err


def test_a_directory_with_too_many_entries_is_no_accounting_directory(tmp_path):
    for k in range(4):
        (tmp_path / f"2013010{k}").write_text("")
    assert len(pbs_files(str(tmp_path), max_files=4)) == 4
    with pytest.raises(ParseError, match=rf"^{tmp_path}: more than 3 entries"):
        pbs_files(str(tmp_path), max_files=3)


# --- plausible bounds -----------------------------------------------------------------------


def swf_job(seq, submit=0, wait=0, run=3600, procs=4, req=7200, user=7):
    return f"{seq} {submit} {wait} {run} {procs} -1 -1 {procs} {req} -1 1 {user} 1 -1 1 -1 -1 -1"


E15 = 10**15
# One line per bound, then jobs a real trace might have (at the bounds' edges included).
SWF = "\n".join(
    [
        "; UnixStartTime: 1356994800",
        "; MaxProcs: 64",
        swf_job(1, submit=E15),
        swf_job(2, wait=E15),
        swf_job(3, run=E15),
        swf_job(4, req=E15),
        swf_job(5, procs=E15),
        swf_job(6, run=-1359980917),  # CERIT-SC: minus the submit time
        swf_job(7, submit=-5),
        swf_job(8, run=10 * YEAR + 1),
        swf_job(9, submit=10, run=100, req=10 * YEAR),
        swf_job(10, submit=20, run=1800, req=3600),
        swf_job(11, submit=30, run=-1, req=3600),  # unknown: the replay's own rule
    ]
)
REASONS = {
    bounds.SUBMIT.reason: 2,
    bounds.WAIT.reason: 1,
    bounds.RUNTIME.reason: 3,
    bounds.WALLTIME.reason: 1,
    bounds.PROCS.reason: 1,
}


def test_bounds_are_declared_once_in_check_order():
    assert [b.name for b in bounds.BOUNDS] == [
        "submit time",
        "wait time",
        "run time",
        "requested time",
        "processors",
    ]
    for b in bounds.BOUNDS:
        values = dict.fromkeys(["submit", "wait", "run", "wall", "procs"], None)
        key = ["submit", "wait", "run", "wall", "procs"][bounds.BOUNDS.index(b)]
        for value, expected in ((b.low, None), (b.high, None), (b.low - 1, b.reason)):
            values[key] = value
            assert bounds.implausible(*values.values()) == expected
        values[key] = b.high + 1
        assert bounds.implausible(*values.values()) == b.reason
    assert bounds.implausible(None, None, None, None, None, 10**9) == bounds.PROCS.reason


def test_swf_values_beyond_the_bounds_are_skipped_and_counted_by_reason(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text(SWF)
    trace = read_swf(str(path))
    assert [j.runtime_s for j in trace.jobs] == [100, 1800, None]
    assert trace.skipped == REASONS
    work = sim.read_workload(str(path))
    assert work.run == [100, 1800] and work.machine_procs == 64
    assert work.skipped == dict(REASONS, **{"no run time": 1})


def test_evaluate_prints_the_counts_and_keeps_its_columns(tmp_path, capsys):
    path = tmp_path / "t.swf"
    path.write_text(SWF)
    assert cli.main(["evaluate", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    why = ", ".join(f"{k} {v}" for k, v in sorted(dict(REASONS, **{"no run time": 1}).items()))
    assert out[1] == f"moment: submit   jobs evaluated: 2   skipped: 9 ({why})"
    (header,) = [line for line in out if line.lstrip().startswith("jobs")]
    rows = [line for line in out if line.startswith("  ") and line != header]
    assert len(rows) == 4 * 5  # 4 groups x (walltime, v1, v2, v3, calibrated)
    assert {len(row) for row in rows} == {len(header)}, "a column overflowed"


def test_simulate_prints_the_counts(tmp_path, capsys):
    path = tmp_path / "t.swf"
    path.write_text(SWF)
    assert cli.main(["simulate", "--estimates", "users", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    why = ", ".join(f"{k} {v}" for k, v in sorted(dict(REASONS, **{"no run time": 1}).items()))
    assert out[1].startswith(f"machine: 64 processors   jobs: 2   skipped: 9 ({why})   ")
    assert cli.main(["simulate", "--estimates", "users", "--json", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["skipped_by_reason"] == dict(REASONS, **{"no run time": 1})


def e_record(seq, ctime, start, run="01:00:00", wall="02:00:00", ncpus=4):
    end = start + 3600
    stamp = dt.datetime.fromtimestamp(end, dt.timezone.utc).strftime("%m/%d/%Y %H:%M:%S")
    return (
        f"{stamp};E;{seq}.pbs01;user=alice group=g queue=workq ctime={ctime} qtime={ctime}"
        f" etime={ctime} start={start} Resource_List.ncpus={ncpus}"
        f" Resource_List.walltime={wall} end={end} Exit_status=0"
        f" resources_used.walltime={run} run_count=1"
    )


def test_pbs_values_beyond_the_bounds_are_skipped_and_counted_by_reason(tmp_path):
    t = EPOCH0
    path = tmp_path / "20130101"
    path.write_text(
        "\n".join(
            [
                e_record(1, t, t + 60),
                e_record(2, t, t - 60),  # started before it was created
                e_record(3, t, t, wall="200000:00:00"),  # 22.8 years
                e_record(4, t, t, ncpus=200_000_000),
                e_record(5, 5_680_000_000, 5_680_000_000),  # ctime in 2150
                e_record(5, 5_680_000_000, 5_680_000_000),  # ... a duplicate is a duplicate
            ]
        )
        + "\n"
    )
    trace = read_pbs([str(path)])
    assert [j.submit_s for j in trace.jobs] == [t]
    # Refused by the accounting parser (each with its rule) or by the bounds here (the
    # duplicate then counts as one): never "malformed", never evaluated.
    assert sum(trace.skipped.values()) == 5 and SKIP_MALFORMED not in trace.skipped
    work = sim.read_workload(str(path))
    assert work.skipped == trace.skipped and len(work.submit) == 1


def test_db_rows_beyond_the_bounds_are_skipped_and_counted(conn):
    def row(seq, ctime):
        start = dt.datetime.fromtimestamp(ctime, dt.timezone.utc)
        return {
            "server": "pbs01",
            "job_id": f"{seq}.pbs01",
            "ctime": start,
            "job_seq": seq,
            "username": "alice",
            "walltime_s": 7200,
            "runtime_s": 3600,
            "started_at": start,
            "ended_at": start + dt.timedelta(hours=1),
            "ncpus": 4,
        }

    conn.execute(sa.insert(schema.finished_jobs), [row(1, EPOCH0), row(2, 5_680_000_000)])
    trace = read_finished_jobs(conn)
    assert [j.submit_s for j in trace.jobs] == [EPOCH0]
    assert trace.skipped == {bounds.SUBMIT.reason: 1}


def test_malformed_lines_still_count_beside_the_bounds(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text(swf_job(1) + "\n1 2 3\n" + swf_job(2, run=E15) + "\n")
    assert read_swf(str(path)).skipped == {SKIP_MALFORMED: 1, bounds.RUNTIME.reason: 1}
