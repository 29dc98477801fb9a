"""One workload, many encodings: SWF (plain, .gz, Alea 21 columns), PBS accounting lines
and the finished_jobs table must give identical numbers."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers_data import PBS_SAMPLES

from softwalltime import cli
from softwalltime.db import schema
from softwalltime.errors import DatabaseError, ParseError
from softwalltime.replay.evaluate import replay, report_dict, summarize
from softwalltime.replay.history import read_finished_jobs
from softwalltime.replay.trace import SKIP_WALLTIME, TraceJob
from softwalltime.replay.trace_readers import (
    SKIP_DUPLICATE,
    SKIP_MALFORMED,
    read_pbs,
    read_sources,
    read_swf,
    sniff_format,
)

REPO = Path(__file__).resolve().parents[1]
EPOCH0 = 1356994800  # 2012-12-31 23:00:00 UTC
H = 3600

# (seq, user, submit offset, wait, run, requested walltime or -1): several users, batches
# with equal submit times, equal end times, zero run times, a job without a walltime, and a
# run time past the walltime.
JOBS = [
    (1, "alice", 0, 0, 3600, 7200),
    (2, "alice", 0, 0, 7200, 14400),
    (3, "bob", 60, 10, 100, 3600),
    (4, "alice", 10000, 0, 18000, 36000),
    (5, "alice", 10000, 0, 18000, 36000),
    (6, "bob", 10000, 300, 90000, 100000),
    (7, "carol", 20000, 0, 0, 600),
    (8, "carol", 20000, 0, 700, 600),
    (9, "alice", 28000, 0, 5000, -1),
    (10, "alice", 28000, 600, 1000, 7200),
    (11, "bob", 28000, 0, 1500, 3600),
    (12, "bob", 28000, 0, 1500, 3600),
    (13, "alice", 40000, 0, 200000, 259200),
]
UIDS = {"alice": 7, "bob": 8, "carol": 9}


def swf_line(seq, user, submit, wait, run, wall, absolute=False, alea=False):
    fields = [
        seq,
        submit + (EPOCH0 if absolute else 0),
        wait,
        run,
        4,
        -1,
        -1,
        4,
        wall,
        -1,
        1,
        UIDS[user],
        1,
        -1,
        -1,
        1,
        -1,
        -1,
    ]
    if alea:
        fields += ["{12,12,12,12}", "q_1d", "1:ppn=4"]
    return " ".join(str(f) for f in fields)


def swf_text(alea=False):
    lines = [] if alea else ["; Version: 2.2", f"; UnixStartTime: {EPOCH0}", ";"]
    lines += [swf_line(*j, absolute=alea, alea=alea) for j in JOBS]
    return "\n".join(lines) + "\n"


def _hms(seconds):
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def pbs_e_line(seq, user, submit, wait, run, wall):
    ctime = EPOCH0 + submit
    start = ctime + wait
    end = start + run
    stamp = dt.datetime.fromtimestamp(end, dt.timezone.utc).strftime("%m/%d/%Y %H:%M:%S")
    walltime = f" Resource_List.walltime={_hms(wall)}" if wall >= 0 else ""
    return (
        f"{stamp};E;{seq}.pbs01;user={user} group=g project=_pbs_project_default jobname=job "
        f"queue=workq ctime={ctime} qtime={ctime} etime={ctime} start={start} "
        f"exec_host=n1/0*4 exec_vnode=(n1:ncpus=4) Resource_List.ncpus=4 Resource_List.nodect=1 "
        f"Resource_List.place=pack Resource_List.select=1:ncpus=4{walltime} session=42 "
        f"end={end} Exit_status=0 resources_used.cpupercent=100 resources_used.ncpus=4 "
        f"resources_used.walltime={_hms(run)} run_count=1"
    )


def pbs_text():
    # Written in end order, as PBS does; Q and S records are noise the reader must ignore.
    by_end = sorted(JOBS, key=lambda j: (j[2] + j[3] + j[4], j[0]))
    lines = []
    for j in by_end:
        lines.append(
            f"01/01/2013 00:00:00;Q;{j[0]}.pbs01;user={j[1]} group=g queue=workq "
            f"ctime={EPOCH0 + j[2]} qtime={EPOCH0 + j[2]} etime=0 "
        )
        lines.append(pbs_e_line(*j))
    return "\n".join(lines) + "\n"


def numbers(trace, moment="submit"):
    """The report without its source line, for comparing encodings."""
    result = replay(trace.jobs, moment=moment)
    rep = report_dict("-", result, summarize(result), trace.skipped, target_under_pct=12.0)
    del rep["source"]
    return rep


@pytest.fixture()
def swf_file(tmp_path):
    path = tmp_path / "jobs.swf"
    path.write_text(swf_text())
    return path


@pytest.fixture()
def pbs_file(tmp_path):
    path = tmp_path / "20130101"
    path.write_text(pbs_text())
    return path


@pytest.mark.parametrize("moment", ["submit", "start"])
def test_swf_and_pbs_accounting_give_identical_numbers(swf_file, pbs_file, moment):
    from_swf = numbers(read_sources([str(swf_file)]), moment)
    from_pbs = numbers(read_sources([str(pbs_file)]), moment)
    assert from_swf == from_pbs
    assert from_swf["jobs"] == len(JOBS) - 1
    assert from_swf["skipped_by_reason"] == {SKIP_WALLTIME: 1}
    # Not a degenerate workload: predictors differ from the walltimes and from each other.
    under = {k: v["under_pct"] for k, v in from_swf["predictors"].items()}
    assert len(set(under.values())) >= 3


def test_pbs_and_swf_read_the_same_jobs(swf_file, pbs_file):
    swf_jobs = read_swf(str(swf_file)).jobs
    pbs_jobs = read_pbs([str(pbs_file)]).jobs
    assert [(j.submit_s, j.start_s, j.end_s, j.runtime_s) for j in swf_jobs] == [
        (j.submit_s, j.start_s, j.end_s, j.runtime_s) for j in pbs_jobs
    ]
    assert swf_jobs[0] == TraceJob("7", EPOCH0, EPOCH0, EPOCH0 + 3600, 7200, 3600, 4)
    assert pbs_jobs[0] == TraceJob("alice", EPOCH0, EPOCH0, EPOCH0 + 3600, 7200, 3600, 4)
    assert pbs_jobs[8].walltime_s is None  # no Resource_List.walltime
    assert swf_jobs[8].walltime_s is None  # -1


def test_gzip_trace_reads_like_the_plain_one(swf_file, tmp_path):
    gz = tmp_path / "jobs.swf.gz"
    gz.write_bytes(gzip.compress(swf_file.read_bytes()))
    assert read_swf(str(gz)).jobs == read_swf(str(swf_file)).jobs
    assert sniff_format(str(gz)) == "swf"


def test_alea_21_columns_with_absolute_times_read_like_standard_swf(swf_file, tmp_path):
    alea = tmp_path / "jobs.alea.swf"
    alea.write_text(swf_text(alea=True))
    assert len(alea.read_text().splitlines()[0].split()) == 21
    assert read_swf(str(alea)).jobs == read_swf(str(swf_file)).jobs


def test_swf_unknowns_fractions_and_bad_lines(tmp_path, caplog):
    path = tmp_path / "odd.swf"
    path.write_text(
        "; UnixStartTime: 1000\n"
        "\n"
        "1 10 -1 -1 1 -1 -1 1 -1 -1 1 -1 1 -1 -1 1 -1 -1\n"  # everything unknown
        "2 20 5 552.5 1 552.21 -1 1 3600 -1 1 3 1 -1 -1 1 -1 -1\n"  # fractional run time
        "3 30 0 100 1\n"  # too few fields
        "4 x 0 100 1 -1 -1 1 3600 -1 1 3 1 -1 -1 1 -1 -1\n"  # not a number
    )
    trace = read_swf(str(path))
    assert trace.jobs == [
        TraceJob(None, 1010, None, None, None, None, 1),
        TraceJob("3", 1020, 1025, 1025 + 553, 3600, 553, 1),
    ]
    assert trace.skipped == {SKIP_MALFORMED: 2}
    assert f"{path}:5" in caplog.text and f"{path}:6" in caplog.text


def test_pbs_directory_is_one_workload_and_repeated_records_count_once(pbs_file, tmp_path):
    lines = pbs_text().splitlines()
    logs = tmp_path / "accounting"
    logs.mkdir()
    half = len(lines) // 2 & ~1  # even: the first file ends with an E record
    (logs / "20130101").write_text("\n".join(lines[:half]) + "\n")
    # The second file repeats the first file's last record (an overlapping copy).
    (logs / "20130102").write_text("\n".join(lines[half - 2 :]) + "\n")
    trace = read_sources([str(logs)])
    assert trace.jobs == read_pbs([str(pbs_file)]).jobs
    assert trace.skipped == {SKIP_DUPLICATE: 1}


def test_pbs_bad_records_are_counted_not_fatal(pbs_file, tmp_path):
    path = tmp_path / "broken"
    text = pbs_text().replace("end=", "end=x", 1) + "garbage line\n"
    path.write_text(text)
    trace = read_pbs([str(path)])
    assert len(trace.jobs) == len(JOBS) - 1
    assert trace.skipped == {SKIP_MALFORMED: 2}


def test_one_pbs_line_is_a_finished_job_nothing_or_an_error():
    from softwalltime.accounting import FINISHED_JOB_COLUMNS
    from softwalltime.replay.trace_readers import _finished_row

    row = _finished_row(pbs_e_line(5, "alice", 0, 60, 3600, 7200) + "\r\n")
    got = dict(zip(FINISHED_JOB_COLUMNS, row))
    assert (got["job_id"], got["username"], got["server"]) == ("5.pbs01", "alice", "pbs01")
    assert (got["ctime"], got["started_at"], got["runtime_s"]) == (EPOCH0, EPOCH0 + 60, 3600)
    # a job id without a server: the one given
    bare = pbs_e_line(6, "bob", 0, 0, 60, 600).replace(";6.pbs01;", ";6;")
    assert dict(zip(FINISHED_JOB_COLUMNS, _finished_row(bare, "torque1")))["server"] == "torque1"
    # no finished job: blank, comments, other record types
    queued = pbs_text().splitlines()[0]
    assert [_finished_row(x) for x in ("", "  \n", "# note", "; header", queued)] == [None] * 5
    with pytest.raises(ParseError, match="not an accounting record: 'garbage'") as err:
        _finished_row("garbage")
    assert getattr(err.value, "rule", None) is None
    # an impossible record: refused with the rule it breaks (counted, not malformed)
    with pytest.raises(ParseError) as err:
        _finished_row(pbs_e_line(7, "carol", 0, 60, 3600, 7200).replace(" start=", " start=9"))
    assert getattr(err.value, "rule", None)


def test_real_pbs_samples_replay():
    cesnet = read_sources([str(PBS_SAMPLES / "fairshareSim_OpenPBS_cesnet-torque1-testserver.log")])
    assert len(cesnet.jobs) == 200  # its 200 E records
    assert {j.user for j in cesnet.jobs} == {"vchlum", "klusacek"}
    assert all(j.walltime_s == 7200 for j in cesnet.jobs)
    # All 200 jobs (~30 min, 2 h walltime) are submitted in one second: at submit time
    # nobody has history, so every predictor falls back to the walltime...
    at_submit = numbers(cesnet)["predictors"]
    assert at_submit["v2"] == at_submit["walltime"]
    assert at_submit["walltime"]["mean_accuracy"] == pytest.approx(0.25, abs=0.01)
    # ...while at start time the earlier jobs have ended and the predictors are far better.
    at_start = numbers(cesnet, "start")["predictors"]
    assert at_start["v2"]["mean_accuracy"] > 0.6
    assert at_start["v2"]["under_pct"] == 0.0
    assert at_start["v1"]["under_pct"] > 0.0
    openpbs = read_sources([str(PBS_SAMPLES / "openpbs-23.06-local.log")])
    assert len(openpbs.jobs) == 13
    assert numbers(openpbs)["skipped_by_reason"] == {SKIP_WALLTIME: 1}  # 6.vm has none


@pytest.mark.parametrize(
    "content,message",
    [
        ("", "no data lines"),
        ("; only a header\n", "no data lines"),
        ("hello world\n", "neither an SWF line"),
    ],
)
def test_unrecognised_files_are_rejected_clearly(tmp_path, content, message):
    path = tmp_path / "f"
    path.write_text(content)
    with pytest.raises(ParseError, match=message):
        read_sources([str(path)])


def test_corrupt_gzip_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.swf.gz"
    path.write_bytes(gzip.compress(swf_text().encode())[:60])
    with pytest.raises(ParseError, match="bad.swf.gz"):
        read_sources([str(path)])


def test_several_swf_traces_keep_their_users_apart(swf_file, tmp_path):
    other = tmp_path / "other.swf"
    other.write_text(swf_text())
    trace = read_sources([str(swf_file), str(other)])
    assert len(trace.jobs) == 2 * len(JOBS)
    assert {j.user for j in trace.jobs} == {"1:7", "1:8", "1:9", "2:7", "2:8", "2:9"}
    # Two independent copies of one workload: the same percentages as one copy.
    one = numbers(read_sources([str(swf_file)]))
    two = numbers(trace)
    assert two["jobs"] == 2 * one["jobs"]
    assert two["predictors"]["v3"]["under_pct"] == pytest.approx(
        one["predictors"]["v3"]["under_pct"]
    )


# --- the finished_jobs table -----------------------------------------------------------


def _ts(epoch):
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc)


def db_rows():
    rows = []
    for seq, user, submit, wait, run, wall in JOBS:
        ctime = EPOCH0 + submit
        rows.append(
            {
                "server": "pbs01",
                "job_id": f"{seq}.pbs01",
                "ctime": _ts(ctime),
                "job_seq": seq,
                "username": user,
                "walltime_s": wall if wall >= 0 else None,
                "runtime_s": run,
                "started_at": _ts(ctime + wait),
                "ended_at": _ts(ctime + wait + run),
                "ncpus": 4,
            }
        )
    return rows


def test_db_source_gives_the_same_numbers(conn, swf_file):
    conn.execute(sa.insert(schema.finished_jobs), db_rows())
    trace = read_finished_jobs(conn, source="test")
    assert numbers(trace) == numbers(read_sources([str(swf_file)]))
    assert numbers(trace, "start") == numbers(read_sources([str(swf_file)]), "start")


def test_db_source_reads_only_the_latest_jobs_when_asked(conn):
    """``softwalltime wait`` asks for its --history jobs: the database sorts and limits."""
    conn.execute(sa.insert(schema.finished_jobs), db_rows())
    every = read_finished_jobs(conn, source="test").jobs
    latest = read_finished_jobs(conn, source="test", latest=3).jobs
    assert len(every) > 3 and latest == every[-3:]


def test_db_source_on_an_unmigrated_database_says_what_to_do(pg_server, empty_dsn):
    from softwalltime.db import engine as db

    engine = db.make_engine(empty_dsn)
    try:
        with engine.connect() as c, pytest.raises(DatabaseError, match="db upgrade"):
            read_finished_jobs(c)
    finally:
        engine.dispose()


def test_evaluate_db_command(fresh_dsn, swf_file, capsys):
    from softwalltime.db import engine as db

    engine = db.make_engine(fresh_dsn)
    with engine.begin() as c:
        c.execute(sa.insert(schema.finished_jobs), db_rows())
    engine.dispose()
    assert cli.main(["--dsn", fresh_dsn, "evaluate", "--db", "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["source"].startswith("database ")
    del doc["source"]
    assert doc == numbers(read_sources([str(swf_file)]))
