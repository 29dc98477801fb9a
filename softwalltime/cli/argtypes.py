"""Argument types shared by the command front ends: one error wording for every option."""

from __future__ import annotations

import argparse
from typing import Callable, List, Optional, Sequence

from ..errors import ConfigError, ParseError
from ..units import parse_duration


def whole_number(minimum: int, maximum: Optional[int] = None) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``minimum`` (and <= ``maximum``, if given)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum:,}, got {value:,}")
        return value

    return parse


def positive_number(text: str) -> float:
    """An argparse type: a number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text!r}")
    return value


def bounded_number(minimum: float, maximum: float) -> Callable[[str], float]:
    """An argparse type: a finite number from ``minimum`` to ``maximum``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not minimum <= value <= maximum:  # also refuses nan
            raise argparse.ArgumentTypeError(
                f"must be from {minimum:g} to {maximum:g}, got {text!r}"
            )
        return value

    return parse


def positive_duration(text: str) -> int:
    """An argparse type: a PBS duration (``[[H:]M:]S``) > 0, in seconds."""
    try:
        seconds = parse_duration(text)
    except ParseError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return seconds


def name_list(option: str, text: str, known: Sequence[str]) -> List[str]:
    """A comma list of names from ``known``, in the given order, without repeats.

    :raises ConfigError: an unknown name, or no name (naming ``option`` and the choices)
    """
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ConfigError(
            "{}: unknown {}; choose from {}".format(
                option, ",".join(unknown) or "(empty list)", ",".join(known)
            )
        )
    return list(dict.fromkeys(names))


def backfill_fuzzy(text: str) -> int:
    """An argparse type: an ``opt_backfill_fuzzy`` value (off, low, medium, high or whole
    seconds), in seconds."""
    from ..replay import pbsched

    try:
        seconds: int = pbsched.parse_fuzzy(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return seconds
