"""Whether a command may colour its output: only on a terminal, never with ``NO_COLOR``."""

from __future__ import annotations

import os
from typing import IO, Any, Mapping, Optional


def use_color(stream: IO[Any], environ: Optional[Mapping[str, str]] = None) -> bool:
    """True when ``stream`` is a terminal, ``NO_COLOR`` is unset or empty (https://no-color.org:
    any non-empty value turns colour off) and ``TERM`` is not ``dumb``."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())
