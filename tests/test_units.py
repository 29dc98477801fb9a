"""PBS duration and size parsing (pbs-reference.md 1.5)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from softwalltime.errors import ParseError
from softwalltime.units import format_duration, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("300", 300),
        ("00:05:00", 300),
        ("5:00", 300),
        ("168:00:00", 168 * 3600),
        ("1000:00:01", 1000 * 3600 + 1),
        ("00:00:01.5", 2),
        ("00:00:01.4", 1),
        ("0", 0),
        ("-5", -5),
        (" 01:00:00 ", 3600),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1:2:3:4", "abc", "1h", "01:00:00x", ":5", "1::2"])
def test_parse_duration_rejects(text):
    with pytest.raises(ParseError):
        parse_duration(text)


@given(st.integers(min_value=0, max_value=10**8))
def test_duration_round_trip(seconds):
    assert parse_duration(format_duration(seconds)) == seconds


def test_format_duration_unbounded_hours():
    assert format_duration(96 * 3600) == "96:00:00"
    with pytest.raises(ValueError):
        format_duration(-1)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("30", 30),
        ("30b", 30),
        ("0b", 0),
        ("600mb", 600 << 20),
        ("31457280kb", 31457280 << 10),
        ("10GB", 10 << 30),
        ("2tb", 2 << 40),
        ("1pb", 1 << 50),
        ("4w", 32),
        ("1kw", 8 << 10),
    ],
)
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "mb", "1.5gb", "10xb", "-1kb"])
def test_parse_size_rejects(text):
    with pytest.raises(ParseError):
        parse_size(text)
