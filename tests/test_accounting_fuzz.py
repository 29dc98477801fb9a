"""Property tests: the accounting parser never raises anything but ParseError, and the
tokenizer follows pbs-reference.md 1.5 exactly (round trip of PBS's own quoting)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from softwalltime import accounting as acct
from softwalltime.errors import ParseError
from softwalltime.units import format_duration, parse_duration, parse_size

PREFIX = "04/02/2025 14:03:11;E;5012.pbs01;"
KEYS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,20}", fullmatch=True)
KNOWN_KEYS = st.sampled_from(
    [
        "user",
        "group",
        "account",
        "project",
        "jobname",
        "queue",
        "ctime",
        "start",
        "end",
        "Exit_status",
        "run_count",
        "Resource_List.walltime",
        "Resource_List.soft_walltime",
        "Resource_List.mem",
        "Resource_List.ncpus",
        "Resource_List.ngpus",
        "Resource_List.nodect",
        "resources_used.walltime",
    ]
)
# Characters that matter to the tokenizer, plus ordinary ones and a few hostile ones.
NASTY = st.text(
    alphabet=st.sampled_from(list("ab1:=;\"' .-[]/\t\\\x00\r") + ["é", "\u2028", "9"]),
    max_size=40,
)
VALUES = st.one_of(
    NASTY,
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.from_regex(r"-?\d{1,12}(:\d{1,4}){0,3}(\.\d{1,3})?", fullmatch=True),
    st.from_regex(r"\d{1,25}[kKmMgGtTpP]?[bBwW]?", fullmatch=True),
)


def _reference_tokenize(message: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """The tokenizer as the regex of pbs-reference.md 1.5; first occurrence wins."""
    attrs: dict[str, str] = {}
    dups: list[str] = []
    for key, dq, sq, raw in acct._TOKEN_RE.findall(message):
        if key in attrs:
            if key not in dups:
                dups.append(key)
        else:
            attrs[key] = dq or sq or raw
    return attrs, tuple(dups)


def _all_paths(line: str) -> None:
    """Everything a consumer does with a line; only ParseError may escape."""
    try:
        rec = acct.parse_line(line)
    except ParseError:
        return
    for fn in (acct.finished_job, acct.rerun, acct.finished_job_row, acct.rerun_row):
        for server in (None, "s"):
            try:
                fn(rec, server)
            except ParseError:
                pass


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_random_text_never_raises_other_than_parse_error(text):
    _all_paths(text)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    rtype=st.sampled_from(list(acct.RECORD_TYPES) + ["X", "", "EE"]),
    ident=st.one_of(
        st.sampled_from(["5012.pbs01", "5040[].s", "5040[3].s", "R5.s", "license", "7", "x"]),
        st.text(alphabet="0123456789[].ab", max_size=12),
    ),
    pairs=st.lists(st.tuples(st.one_of(KNOWN_KEYS, KEYS), VALUES), max_size=25),
    sep=st.sampled_from([" ", "  ", " \t"]),
)
@example(rtype="E", ident="1.s", pairs=[("ctime", "1"), ("end", "2"), ("user", '"a')], sep=" ")
@example(rtype="E", ident="1.s", pairs=[("user", "u"), ("ctime", "0"), ("end", "3")], sep=" ")
def test_adversarial_records_never_raise_other_than_parse_error(rtype, ident, pairs, sep):
    message = sep.join(f"{k}={v}" for k, v in pairs)
    line = f"04/02/2025 14:03:11;{rtype};{ident};{message}"
    _all_paths(line)
    _all_paths(line + "\n")
    _all_paths(PREFIX + message + PREFIX + message)  # torn


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.one_of(KNOWN_KEYS, KEYS), VALUES), max_size=20), st.text(max_size=30))
def test_tokenizer_matches_the_reference_regex(pairs, noise):
    message = " ".join(f"{k}={v}" for k, v in pairs)
    for text in (message, noise + " " + message, message + " " + noise):
        assert acct.tokenize(text) == _reference_tokenize(text)


def _pbs_quote(value: str) -> str:
    """cpy_quote_value(): raw without a space; "..." with one; '...' if it also has a '"'."""
    if " " not in value:
        return value
    return f"'{value}'" if '"' in value else f'"{value}"'


def _round_trips(value: str) -> bool:
    """Values PBS's own quoting can carry unambiguously (nothing is escaped)."""
    if "\n" in value or value[:1] in ("'", '"'):
        return False
    if " " not in value:
        return True
    q = "'" if '"' in value else '"'
    return f"{q} " not in value and not value.endswith(q)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.dictionaries(KEYS, NASTY.filter(_round_trips), max_size=15))
def test_tokenizer_round_trips_pbs_quoting(attrs):
    message = " ".join(f"{k}={_pbs_quote(v)}" for k, v in attrs.items())
    got, dups = acct.tokenize(message)
    assert got == attrs
    assert dups == ()
    if message == message.rstrip():  # parse_line strips trailing whitespace (PBS adds a space)
        assert acct.parse_line(PREFIX + message).attrs == attrs


@settings(max_examples=100, deadline=None)
@given(
    user=st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True),
    ctime=st.integers(1, 4 * 10**9),  # end = ctime + 1 + run stays before 2100
    run=st.integers(0, 10**6),
    wall=st.integers(0, 10**7),
    seq=st.integers(0, 10**12),
    status=st.integers(-30, 300),
)
def test_e_record_values_round_trip(user, ctime, run, wall, seq, status):
    if wall == 0 and run > 60:  # impossible: refused (issue 52), never stored
        run = run % 61
    line = (
        f"04/02/2025 14:03:11;E;{seq}.srv;user={user} ctime={ctime} start={ctime + 1} "
        f"end={ctime + 1 + run} Exit_status={status} Resource_List.walltime="
        f"{format_duration(wall)} resources_used.walltime={format_duration(run)} run_count=1"
    )
    row = acct.finished_job(acct.parse_line(line))
    assert row is not None
    assert (row["username"], row["job_seq"], row["exit_status"]) == (user, seq, status)
    assert (row["walltime_s"], row["runtime_s"]) == (wall, run)
    assert row["ended_at"] - row["started_at"] == dt.timedelta(seconds=run)
    checked = acct._finished_job_row_checked(acct.parse_line(line), None)
    assert acct.finished_job_row(acct.parse_line(line)) == checked


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=30))
def test_value_parsers_raise_only_parse_error(text):
    for fn in (parse_duration, parse_size):
        try:
            fn(text)
        except ParseError:
            pass


@given(st.integers(0, 10**9))
def test_duration_round_trip(seconds):
    assert parse_duration(format_duration(seconds)) == seconds


def _near(bound: acct.FieldBound, duration: bool) -> st.SearchStrategy[str]:
    """Values at, inside and just beyond a bound, as PBS (or a broken writer) logs them."""
    numbers = st.sampled_from([bound.low - 1, bound.low, bound.low + 1, bound.high, bound.high + 1])
    if not duration:
        return numbers.map(str)
    as_hms = numbers.map(lambda n: format_duration(n) if n >= 0 else "-" + format_duration(-n))
    return st.one_of(numbers.map(str), as_hms)


_DURATION_KEYS = {k for k, b in acct.BOUNDS.items() if b.low == 0 and "walltime" in k} | {
    "resources_used.cput"
}
_NUMERIC = [
    (key, _near(bound, key in _DURATION_KEYS))
    for key, bound in acct.BOUNDS.items()
    if key != "Resource_List.mem"
]
# Times around one another: each of the three before, at or after the others.
_TIMES = st.sampled_from(["1743598799", "1743598800", "1743598801", "1743602591", "0", ""])


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    changes=st.lists(st.one_of(*(st.tuples(st.just(k), s) for k, s in _NUMERIC)), max_size=3),
    times=st.tuples(_TIMES, _TIMES, _TIMES),
)
def test_fast_and_checked_paths_agree_at_the_bounds(changes, times):
    """Issue 16 case 6: both paths refuse a record beyond FIELD_BOUNDS or TIME_ORDER with
    the same error, and store the same row otherwise."""
    attrs = {
        "user": "u",
        "ctime": "1743598800",
        "start": "1743598862",
        "end": "1743602591",
        "Resource_List.ncpus": "8",
        "resources_used.walltime": "01:02:09",
    }
    attrs.update(zip(("ctime", "start", "end"), times))
    attrs.update(changes)
    message = " ".join(f"{k}={v}" for k, v in attrs.items() if v)
    rec = acct.parse_line(f"04/02/2025 14:03:11;E;5012.pbs01;{message}")
    outcomes = []
    for fn in (acct.finished_job_row, acct._finished_job_row_checked):
        try:
            outcomes.append(fn(rec, None))
        except ParseError as err:
            outcomes.append((type(err), str(err)))
    assert outcomes[0] == outcomes[1]
    row = outcomes[0]
    if isinstance(row, tuple) and len(row) == len(acct.FINISHED_JOB_COLUMNS):
        values = dict(zip(acct.FINISHED_JOB_COLUMNS, row))
        for bound in acct.FIELD_BOUNDS:
            value = values.get(bound.column) if bound.column else None
            assert value is None or bound.low <= value <= bound.high, bound
        assert values["ctime"] <= (values["started_at"] or values["ctime"]) <= values["ended_at"]
