"""softwalltime.accounting on the real PBS accounting samples, field by field."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from helpers_data import EXAMPLES, PBS_SAMPLES

from softwalltime import accounting as acct
from softwalltime.errors import ParseError

REPO = Path(__file__).resolve().parents[1]
LOCAL = PBS_SAMPLES / "openpbs-23.06-local.log"
UTC = dt.timezone.utc


def _lines(path: Path) -> list[str]:
    if not path.exists():
        pytest.fail(f"missing sample {path}")
    return path.read_text(encoding="utf-8").splitlines()


def _record(path: Path, rtype: str, ident: str) -> acct.Record:
    found = [
        acct.parse_line(line)
        for line in _lines(path)
        if line[:2].isdigit() and line.split(";")[1:3] == [rtype, ident]
    ]
    assert len(found) == 1, f"{rtype} {ident}: {len(found)} records"
    return found[0]


def _ts(epoch: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, UTC)


def test_e_record_every_field_openpbs_2306():
    row = acct.finished_job(_record(LOCAL, "E", "1.vm"))
    assert row == {
        "server": "vm",
        "job_id": "1.vm",
        "ctime": _ts(1795311709),
        "job_seq": 1,
        "array_index": None,
        "username": "alice",
        "groupname": "alice",
        "project": "_pbs_project_default",
        "account": None,
        "queue": "workq",
        "job_name": "swt_q",
        "walltime_s": 600,
        "soft_walltime_s": 300,  # written as Resource_List.soft_walltime=00:05:00
        "runtime_s": 3,
        "started_at": _ts(1795311709),
        "ended_at": _ts(1795311713),
        "exit_status": 0,
        "ncpus": 1,
        "ngpus": None,
        "nodect": 1,
        "mem_bytes": None,
        "select_spec": "1:ncpus=1",
        "run_count": 1,
        "qtime": _ts(1795311709),
        "etime": _ts(1795311709),
        "place": "pack",
        "exec_vnode": "(vm:ncpus=1)",
    }
    assert tuple(row) == acct.FINISHED_JOB_COLUMNS
    assert row["ctime"].tzinfo is not None and row["ctime"].utcoffset() == dt.timedelta(0)


def test_soft_walltime_as_seconds_in_a_record_matches_hh_mm_ss():
    # A runjob hook set soft_walltime=300; the server logged it as 300 in the 'a' record and
    # as 00:05:00 in the S and E records of the same job.
    alter = _record(LOCAL, "a", "2.vm")
    assert alter.attrs == {"Resource_List.soft_walltime": "300"}
    assert acct.finished_job(alter) is None
    end = acct.finished_job(_record(LOCAL, "E", "2.vm"))
    assert end is not None
    assert end["soft_walltime_s"] == 300
    assert acct.parse_duration(alter.attrs["Resource_List.soft_walltime"]) == 300
    assert _record(LOCAL, "a", "11.vm").attrs["Resource_List.soft_walltime"] == "00:02:00"


def test_job_without_walltime():
    row = acct.finished_job(_record(LOCAL, "E", "6.vm"))
    assert row is not None
    assert row["walltime_s"] is None
    assert row["soft_walltime_s"] == 300
    assert row["runtime_s"] == 1
    assert row["job_name"] == "swt_nowall"


def test_job_deleted_while_running():
    assert _record(LOCAL, "D", "9.vm").attrs == {"requestor": "alice@vm"}
    row = acct.finished_job(_record(LOCAL, "E", "9.vm"))
    assert row is not None
    assert row["exit_status"] == 271  # 256 + SIGTERM
    assert row["runtime_s"] == 12
    assert row["ended_at"] == _ts(1795311793)


def test_rerun_then_end_with_run_count_2():
    rerun = acct.rerun(_record(LOCAL, "R", "10.vm"))
    assert rerun == {
        "server": "vm",
        "job_id": "10.vm",
        "ctime": _ts(1795311780),
        "run_count": 1,
        "username": "alice",
        "runtime_s": 10,
        "started_at": _ts(1795311782),
        "ended_at": _ts(1795311793),
        "exit_status": -11,
    }
    end = acct.finished_job(_record(LOCAL, "E", "10.vm"))
    assert end is not None
    assert end["run_count"] == 2
    assert end["runtime_s"] == 10
    assert end["started_at"] == _ts(1795311793)  # start of the last run
    assert end["exit_status"] == 271
    assert acct.finished_job(_record(LOCAL, "R", "10.vm")) is None
    assert acct.rerun(_record(LOCAL, "E", "10.vm")) is None


def test_ncar_rerun_with_retry_status():
    row = acct.rerun(_record(EXAMPLES, "R", "4215033.casper-pbs"))
    assert row is not None
    assert (row["server"], row["run_count"], row["exit_status"], row["runtime_s"]) == (
        "casper-pbs",
        1,
        -3,
        0,
    )


def test_quoted_values_with_spaces():
    rec = _record(EXAMPLES, "Q", "5040[].pbs01")
    assert rec.attrs["account"] == "grant 42"
    assert rec.attrs["project"] == "my proj"
    assert rec.attrs["jobname"] == "scan"
    assert rec.attrs["array_indices"] == "1-3"
    assert rec.duplicate_keys == ()
    ncar = _record(EXAMPLES, "E", "4215265.casper-pbs")
    row = acct.finished_job(ncar)
    assert row is not None
    assert row["account"] == "SCSG0001"  # always written quoted, stored without quotes
    assert row["mem_bytes"] == 10 * 2**30
    assert row["select_spec"] == "1:ncpus=5:ompthreads=5"
    assert row["ncpus"] == 5 and row["ngpus"] == 0
    assert ncar.attrs["eligible_time"] == "00:00:08"


def test_raw_json_usage_value_single_quoted():
    rec = _record(EXAMPLES, "E", "112461.torque1.grid.cesnet.cz")
    assert rec.attrs["resources_used.diag_messages"] == "{}"
    row = acct.finished_job(rec)
    assert row is not None
    assert row["server"] == "torque1.grid.cesnet.cz"
    assert row["runtime_s"] == 30 * 60 + 1
    assert row["mem_bytes"] == 600 * 2**20


def test_walltime_kill_and_forced_delete():
    killed = acct.finished_job(_record(EXAMPLES, "E", "5030.pbs01"))
    assert killed is not None
    assert killed["exit_status"] == -29
    assert killed["runtime_s"] == 3607 > killed["walltime_s"] == 3600
    assert killed["soft_walltime_s"] == 1200
    forced = acct.finished_job(_record(EXAMPLES, "E", "5060.pbs01"))
    assert forced is not None and forced["exit_status"] == 265


def _as_end(line: str, ident: str) -> str:
    """The S record of an example job turned into its E record (same fields + end fields)."""
    stamp, _s, _ident, message = line.split(";", 3)
    end = (
        " session=4242 end=1743600605 Exit_status=0 resources_used.cpupercent=99 "
        "resources_used.cput=00:14:50 resources_used.mem=1024kb resources_used.ncpus=1 "
        "resources_used.vmem=2048kb resources_used.walltime=00:15:00 run_count=1"
    )
    return f"{stamp};E;{ident};{message.rstrip()}{end}"


def test_array_subjob_is_history_and_parent_is_not():
    sub_start = next(line for line in _lines(EXAMPLES) if ";S;5040[1].pbs01;" in line)
    parent_start = next(line for line in _lines(EXAMPLES) if ";S;5040[].pbs01;" in line)
    sub = acct.finished_job(acct.parse_line(_as_end(sub_start, "5040[1].pbs01")))
    assert sub is not None
    assert (sub["job_id"], sub["job_seq"], sub["array_index"], sub["server"]) == (
        "5040[1].pbs01",
        5040,
        1,
        "pbs01",
    )
    assert (sub["account"], sub["project"], sub["runtime_s"]) == ("grant 42", "my proj", 900)
    parent = acct.parse_line(_as_end(parent_start, "5040[].pbs01"))
    assert acct.finished_job(parent) is None
    assert acct.parse_job_id("5040[].pbs01") == (5040, None, "pbs01", True)
    assert acct.parse_job_id("5040[17].pbs01") == (5040, 17, "pbs01", False)


def test_license_reservation_and_free_text_records():
    lic = _record(EXAMPLES, "L", "license")
    assert acct.finished_job(lic) is None and acct.rerun(lic) is None
    resv = _record(EXAMPLES, "U", "R5100.pbs01")
    assert resv.attrs == {"requestor": "alice@login1"}
    assert acct.finished_job(resv) is None
    down = _record(EXAMPLES, "D", "5061.pbs01")
    assert down.attrs == {}  # "Job deleted, execution node n004 down": free text
    empty = _record(EXAMPLES, "A", "5072.pbs01")
    assert empty.attrs == {} and empty.rtype == "A"
    # A reservation's E-like line would still not be a job.
    fake = acct.parse_line("04/02/2025 14:00:00;E;R5100.pbs01;user=a ctime=1 end=2")
    assert acct.finished_job(fake) is None


def test_every_record_type_of_the_examples_is_recognised():
    types = {acct.parse_line(line).rtype for line in _lines(EXAMPLES)}
    assert types == set("QSERDAazrLMU")
    assert set(acct.RECORD_TYPES) >= set("QSsREDACTMazrucePpLUYBKkF")


def test_forged_keys_are_flagged():
    rec = acct.parse_line(
        '04/02/2025 13:00:00;Q;1.s;user=eve account="x" user=root "y" queue=q ctime=1'
    )
    assert rec.duplicate_keys == ("user",)
    assert rec.attrs["user"] == "eve"


def test_torn_line_is_an_error_naming_the_column():
    good = next(line for line in _lines(LOCAL) if ";E;0.vm;" in line)
    torn = good[:100] + good
    with pytest.raises(ParseError, match="torn record: another record starts at column 101"):
        acct.parse_line(torn)


@pytest.mark.parametrize(
    "line, reason",
    [
        ("", "not an accounting record"),
        ("; UnixStartTime: 1734800289", "not an accounting record"),
        ("2025-04-02 13:00:00;E;1.s;user=a", "bad timestamp"),
        ("04/02/2025 13:00:00;X;1.s;user=a", "unknown record type"),
        ("04/02/2025 13:00:00;E;;user=a", "empty record id"),
    ],
)
def test_malformed_lines_raise_parse_error(line, reason):
    with pytest.raises(ParseError, match=reason):
        acct.parse_line(line)


@pytest.mark.parametrize(
    "message, reason",
    [
        ("group=g ctime=5 end=6", "without user"),
        ("user=u end=6", "missing or zero ctime"),
        ("user=u ctime=5", "missing or zero end"),
        ("user=u ctime=5 end=6 Resource_List.walltime=1h", "is not a duration"),
        ("user=u ctime=5 end=6 Resource_List.mem=12.5M", "is not a size"),
        ("user=u ctime=5 end=6 Exit_status=x", "is not an integer"),
        ("user=u ctime=5 end=99999999999999 ", "out of range"),
        ("user=u ctime=5 end=6 resources_used.walltime=99999999:00:00", "out of range"),
    ],
)
def test_e_record_lacking_what_history_needs_raises(message, reason):
    rec = acct.parse_line(f"04/02/2025 13:00:00;E;7.s;{message}")
    with pytest.raises(ParseError, match=reason):
        acct.finished_job(rec)


def test_server_option_and_missing_suffix():
    rec = acct.parse_line("12/21/2009 15:27:00;E;6;user=u ctime=5 end=6")
    with pytest.raises(ParseError, match="no server suffix"):
        acct.finished_job(rec)
    row = acct.finished_job(rec, server="edge")
    assert row is not None and (row["server"], row["job_seq"]) == ("edge", 6)
    other = acct.finished_job(acct.parse_line("12/21/2009 15:27:00;E;6.a.b;user=u ctime=5 end=6"))
    assert other is not None and other["server"] == "a.b"


# Every line of every sample: how many parse, how many make rows, which fail and why.
SAMPLE_EXPECTED = {
    # file: (records parsed, E rows, R rows, lines rejected by parse_line, E/R rows rejected)
    "openpbs-23.06-local.log": (47, 13, 1, 4, 0),  # 4 '#' comment lines
    "ncar_qhist_casper-pbs_testdata.log": (18, 4, 1, 0, 0),
    "fairshareSim_OpenPBS_cesnet-torque1-testserver.log": (654, 200, 0, 2, 0),  # '; header'
    "PBS-Logs_t_acct.20050201.folded.log": (14, 0, 0, 48, 6),  # folded: E lines lose ctime
    # one line prefixed with '20150327:'; one job used 19:23:04 in a 6.7 h run (issue 32)
    "apel_test_pbs_records.log": (6, 5, 0, 1, 1),
    "epcc_safe_PBSRecordTest_validRecords.log": (6, 6, 0, 0, 0),
    "jbarber_torque-log_t_test.log": (1, 1, 0, 0, 0),
    # 4 ids without server; 2 jobs used 00:00:00 in a 156 s run (issue 32)
    "xdmod_unit_shredder_pbs_accounting-logs.log": (9, 3, 0, 0, 6),
}


@pytest.mark.parametrize("name", sorted(SAMPLE_EXPECTED))
def test_every_sample_file_parses_without_crashing(name):
    parsed = e_rows = r_rows = bad_lines = bad_rows = 0
    for line in _lines(PBS_SAMPLES / name):
        try:
            rec = acct.parse_line(line)
        except ParseError:
            bad_lines += 1
            continue
        parsed += 1
        try:
            if acct.finished_job(rec) is not None:
                e_rows += 1
            if acct.rerun(rec) is not None:
                r_rows += 1
        except ParseError:
            bad_rows += 1
    assert (parsed, e_rows, r_rows, bad_lines, bad_rows) == SAMPLE_EXPECTED[name]


def test_sample_files_all_present():
    present = {p.name for p in PBS_SAMPLES.glob("*.log")}
    assert present == set(SAMPLE_EXPECTED)


def test_fast_and_checked_rows_agree_on_every_sample_e_record():
    n = 0
    for path in [*PBS_SAMPLES.glob("*.log"), EXAMPLES]:
        for line in _lines(path):
            try:
                rec = acct.parse_line(line)
            except ParseError:
                continue
            if rec.rtype != "E":
                continue
            for server in (None, "srv"):
                try:
                    fast = acct.finished_job_row(rec, server)
                except ParseError as err:
                    with pytest.raises(ParseError, match=str(err)[:20]):
                        acct._finished_job_row_checked(rec, server)
                    continue
                if fast is not None:
                    assert fast == acct._finished_job_row_checked(rec, server)
                    n += 1
    assert n > 400


# --- records that cannot be true (issue 16 case 6) --------------------------------------

# A possible record; each case below changes one or two of its values.
_GOOD = {
    "user": "u",
    "ctime": "1743598800",
    "start": "1743598862",
    "end": "1743602591",
    "Exit_status": "0",
    "Resource_List.ncpus": "8",
    "Resource_List.walltime": "04:00:00",
    "resources_used.cput": "08:10:00",
    "resources_used.walltime": "01:02:09",
    "run_count": "1",
}
IMPOSSIBLE = [
    ({"end": "1743598861"}, "end before start"),
    ({"start": "1743598799"}, "start before ctime"),
    ({"start": "", "end": "1743598799"}, "end before ctime"),
    ({"Resource_List.walltime": "-04:00:00"}, "Resource_List.walltime negative or over 10 years"),
    ({"resources_used.walltime": "-00:00:05"}, "resources_used.walltime negative or over 10 years"),
    # 2^31 - 1 s: fits the integer column, and is no run time
    (
        {"resources_used.walltime": "596523:14:07"},
        "resources_used.walltime negative or over 10 years",
    ),
    ({"resources_used.cput": "-00:01:00"}, "resources_used.cput negative"),
    ({"Resource_List.ncpus": "0"}, "Resource_List.ncpus below 1 or over 10^8"),
    ({"Resource_List.ncpus": "-8"}, "Resource_List.ncpus below 1 or over 10^8"),
    ({"run_count": "-1"}, "run_count negative or over 2^31 - 1"),
    ({"ctime": "-5", "start": "", "end": "6"}, "ctime before 1970 or after 2099"),
    ({"end": "4102444801"}, "end before 1970 or after 2099"),
    # issue 32: 10 h used in a 30-minute run (start 1743598862); none used in a 1 h run
    (
        {"resources_used.walltime": "10:00:00", "end": "1743600662"},
        "resources_used.walltime over end - start",
    ),
    ({"resources_used.walltime": "00:00:00"}, "resources_used.walltime 0 for a run over 60 s"),
    # issue 52: walltime 0 and a run of 1,800 s (PBS kills a job at its walltime); a run
    # known by its times alone
    (
        {"Resource_List.walltime": "0", "resources_used.walltime": "00:30:00", "end": "1743600662"},
        "Resource_List.walltime 0 for a run over 60 s",
    ),
    (
        {"Resource_List.walltime": "00:00:00", "resources_used.walltime": "", "end": "1743600662"},
        "Resource_List.walltime 0 for a run over 60 s",
    ),
]
# What an R record holds of the above (no Resource_List.*).
_R_KEYS = {"user", "ctime", "start", "end", "Exit_status", "resources_used.walltime"}
_R_KEYS |= {"resources_used.cput", "run_count"}


def _line(rtype: str, changes: dict[str, str]) -> str:
    attrs = {**_GOOD, **changes}
    words = [f"{k}={v}" for k, v in attrs.items() if v and (rtype == "E" or k in _R_KEYS)]
    return f"04/02/2025 14:03:11;{rtype};5012.pbs01;{' '.join(words)}"


def _error(fn, *args) -> acct.ParseError:
    with pytest.raises(acct.ImpossibleRecord) as info:
        fn(*args)
    return info.value


@pytest.mark.parametrize("changes, rule", IMPOSSIBLE, ids=[r for _, r in IMPOSSIBLE])
def test_an_impossible_e_record_is_refused_with_its_rule_by_both_paths(changes, rule):
    rec = acct.parse_line(_line("E", changes))
    fast = _error(acct.finished_job_row, rec)
    checked = _error(acct._finished_job_row_checked, rec, None)
    assert fast.rule == checked.rule == rule
    assert str(fast) == str(checked)
    assert str(fast).startswith(rule.split()[0] + "=")  # the field, then its value as logged


_R_CASES = [(c, r) for c, r in IMPOSSIBLE if set(c) <= _R_KEYS]


def test_walltime_0_holds_a_run_within_the_slack_only():
    # issue 52: a run of 60 s or less (the MoM's sampling) fits walltime 0 and is stored
    # as walltime 0; one second more is refused (the IMPOSSIBLE case above)
    changes = {"Resource_List.walltime": "0", "resources_used.walltime": "00:01:00"}
    for end, used in (("1743598922", "00:01:00"), ("1743598862", "00:00:00")):
        rec = acct.parse_line(_line("E", {**changes, "end": end, "resources_used.walltime": used}))
        assert acct.finished_job_row(rec)[11] == 0
        assert acct._finished_job_row_checked(rec, None)[11] == 0
    rec = acct.parse_line(_line("E", {**changes, "end": "1743598923"}))
    assert _error(acct.finished_job_row, rec).rule == "Resource_List.walltime 0 for a run over 60 s"


@pytest.mark.parametrize("changes, rule", _R_CASES, ids=[r for _, r in _R_CASES])
def test_an_impossible_r_record_is_refused_with_its_rule(changes, rule):
    assert _error(acct.rerun_row, acct.parse_line(_line("R", changes))).rule == rule


def test_the_good_record_and_every_bound_itself_are_possible():
    assert acct.finished_job_row(acct.parse_line(_line("E", {}))) is not None
    assert acct.rerun_row(acct.parse_line(_line("R", {}))) is not None
    at_bounds = {
        "Resource_List.walltime": "87600:00:00",  # 10 years
        "resources_used.cput": "0",
        "Resource_List.ncpus": "1",
        "Resource_List.ngpus": "100000000",
        "run_count": "0",
        "start": "1743598800",  # = ctime
        "end": "4102444800",  # 2100-01-01
    }
    row = acct.finished_job(acct.parse_line(_line("E", at_bounds)))
    assert row is not None and row["walltime_s"] == 10 * 365 * 86400 and row["ngpus"] == 10**8
    beyond = {"Resource_List.walltime": "87600:00:01", "Resource_List.ngpus": "100000001"}
    for key, value in beyond.items():
        with pytest.raises(acct.ImpossibleRecord, match=f"{key}={value} is out of range"):
            acct.finished_job_row(acct.parse_line(_line("E", {key: value})))


def test_the_run_time_may_differ_from_end_minus_start_by_60_s():
    """resources_used.walltime (sampled by the MoM) against end - start (the server's):
    within 60 s either way, or 0 for a run of 60 s at most, the record is possible."""
    start = 1743598862
    for used, run, ok in [
        ("00:31:00", 1800, True),
        ("00:31:01", 1800, False),
        ("00:00:00", 60, True),
        ("00:00:00", 61, False),
        ("00:00:00", 0, True),
        ("00:00:01", 3600, True),  # below end - start: suspended, or killed at once
    ]:
        for rtype, row in (("E", acct.finished_job_row), ("R", acct.rerun_row)):
            line = _line(rtype, {"resources_used.walltime": used, "end": str(start + run)})
            if ok:
                assert row(acct.parse_line(line)) is not None, (used, run)
            else:
                with pytest.raises(acct.ImpossibleRecord, match="^resources_used.walltime="):
                    row(acct.parse_line(line))
    # a run time over 10 years is refused by its bound first, whatever the times say
    line = _line("E", {"resources_used.walltime": "596523:14:07"})
    assert _error(acct.finished_job_row, acct.parse_line(line)).rule == (
        "resources_used.walltime negative or over 10 years"
    )


def test_zero_times_mean_unset_not_impossible():
    """start=0 is "never started" (NULL); a zero ctime or end is missing, as before."""
    row = acct.finished_job(acct.parse_line(_line("E", {"start": "0"})))
    assert row is not None and row["started_at"] is None
    with pytest.raises(ParseError, match="missing or zero end="):
        acct.finished_job(acct.parse_line(_line("E", {"end": "0"})))


def test_every_bound_names_its_column_once():
    columns = [b.column for b in acct.FIELD_BOUNDS if b.column is not None]
    assert len(columns) == len(set(columns))
    assert set(columns) <= set(acct.FINISHED_JOB_COLUMNS)
    for rule in acct.TIME_ORDER:
        assert {rule.earlier_column, rule.later_column} <= set(acct.RERUN_COLUMNS)


def test_the_e_record_table_is_the_migrated_schema(conn):
    """accounting.E_FIELDS gives finished_jobs' columns in the migrated schema's order
    (the COPY order), each with the type its kind stores; the model (db/schema.py) agrees."""
    from softwalltime.accounting import E_FIELDS
    from softwalltime.db.schema import finished_jobs

    rows = conn.exec_driver_sql(
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_name = 'finished_jobs' ORDER BY ordinal_position"
    ).all()
    stored = [(name, kind) for name, kind in rows if name not in SOURCE_AND_STAMP]
    sql = {"server": "text", "ident": "text", "seq": "bigint", "index": "integer",
           "epoch": "timestamp with time zone", "text": "text", "duration": "integer",
           "int": "integer", "size": "bigint"}  # fmt: skip
    assert stored == [(f.column, sql[f.kind]) for f in E_FIELDS]
    model = [c.name for c in finished_jobs.columns if c.name not in SOURCE_AND_STAMP]
    assert model == [f.column for f in E_FIELDS]
    assert [f.column for f in E_FIELDS if f.required or f.kind in ("server", "ident", "seq")] == [
        name for name in model if not finished_jobs.c[name].nullable
    ]


SOURCE_AND_STAMP = ("source_file", "source_offset", "ingested_at")


def test_the_fast_path_reads_the_table_in_its_order():
    """finished_job_row's fast path unpacks _FJ_INT_KEYS into named locals: the table's
    order of its numbers must be the one those names say."""
    from softwalltime import accounting

    assert accounting._FJ_INT_KEYS == (
        "ctime", "start", "end", "Exit_status", "Resource_List.ncpus",
        "Resource_List.ngpus", "Resource_List.nodect", "run_count", "qtime", "etime",
    )  # fmt: skip
