"""PBS value formats: durations and sizes.

Follows OpenPBS ``decode_time()`` / ``attr_fn_size.c`` (see pbs-reference.md 1.5).
Pure functions, Python 3.6+ syntax: the hook imports this module.
"""

import re
import time
from typing import Any, Optional

from .errors import ParseError

# [-]S, M:S or H:M:S, any number of digits per field, optional fraction.
# The sign is accepted because Torque logs contain negative durations; OpenPBS never writes one.
_DURATION_RE = re.compile(r"^(-?)(\d+)(?::(\d+))?(?::(\d+))?(?:\.(\d+))?$")
_SIZE_RE = re.compile(r"^(\d+)([kmgtp]?)([bw]?)$", re.IGNORECASE)
_SIZE_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}
# A PBS word is 8 bytes (pbs_share.h).
_WORD_BYTES = 8


def parse_duration(text: str) -> int:
    """Parse a PBS duration (``S``, ``M:S`` or ``H:M:S``, hours unbounded) into whole seconds.

    A fraction is rounded to the nearest second, halves up, as ``pbs.duration`` does.

    :param text: e.g. ``"168:00:00"``, ``"1:30"``, ``"300"``, ``"00:00:01.5"``
    :returns: seconds (negative only if the text had a leading ``-``)
    :raises ParseError: the text is not a duration
    """
    m = _DURATION_RE.match(text.strip())
    if m is None:
        raise ParseError(f"not a duration: {text!r}")
    sign, a, b, c, frac = m.groups()
    fields = [int(x) for x in (a, b, c) if x is not None]
    seconds = 0
    for value in fields:
        seconds = seconds * 60 + value
    if frac is not None and int(frac[0]) >= 5:
        seconds += 1
    return -seconds if sign else seconds


def duration_or_none(value: Any) -> Optional[int]:
    """Seconds of what PBS printed as a duration (``qstat``'s JSON), None when unset or not a
    duration."""
    if value is None:
        return None
    try:
        return parse_duration(str(value))
    except ParseError:
        return None


def format_duration(seconds: int) -> str:
    """Format seconds as PBS writes durations: ``HH:MM:SS`` with unbounded hours.

    :param seconds: a non-negative number of seconds
    :raises ValueError: seconds is negative
    """
    seconds = int(seconds)
    if seconds < 0:
        raise ValueError(f"negative duration: {seconds}")
    hours, rest = divmod(seconds, 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def parse_size(text: str) -> int:
    """Parse a PBS size into bytes: ``<int>[k|m|g|t|p][b|w]``, case-insensitive, binary multipliers.

    A bare number means bytes (``mem=30`` is 30 bytes); ``w`` is an 8-byte word.

    :raises ParseError: the text is not a size
    """
    m = _SIZE_RE.match(text.strip())
    if m is None:
        raise ParseError(f"not a size: {text!r}")
    number, mult, unit = m.groups()
    value = int(number) << _SIZE_SHIFT[mult.lower()]
    if unit.lower() == "w":
        value *= _WORD_BYTES
    return value


_QSTAT_TIME = "%a %b %d %H:%M:%S %Y"


def qstat_time(value: Any) -> Optional[int]:
    """Epoch seconds of a time qstat printed, or None: OpenPBS 23.06's ``-F json`` writes
    ctime, qtime and stime as local dates (``"Wed Nov 25 11:57:14 2026"``, in the zone of
    the process that ran qstat: this one's); epoch numbers are taken as they are."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.isdigit() and len(text) <= 12:
        return int(text)
    try:
        return int(time.mktime(time.strptime(text, _QSTAT_TIME)))
    except (ValueError, OverflowError):
        return None
