"""What a command may do on a terminal: colour its output (never with ``NO_COLOR``), show
progress on standard error (:class:`Progress`)."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import IO, Any, Mapping, Optional


def use_color(stream: IO[Any], environ: Optional[Mapping[str, str]] = None) -> bool:
    """True when ``stream`` is a terminal, ``NO_COLOR`` is unset or empty (https://no-color.org:
    any non-empty value turns colour off) and ``TERM`` is not ``dumb``."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


class Progress:
    """A one-line progress display on standard error for long work: the current stage and
    the time since the start, refreshed every second, only when the stream is a terminal
    (under cron or a pipe: nothing). Use as a context manager; :meth:`stage` names what runs
    now; leaving clears the line.
    """

    def __init__(self, stream: Optional[IO[str]] = None, every_s: float = 1.0) -> None:
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.active = bool(isatty is not None and isatty())
        self.every_s = every_s
        self.text = ""
        self.start = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> Progress:
        if self.active:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.active:
            with self._lock:
                self.stream.write("\r\033[K")
                self.stream.flush()

    def stage(self, text: str) -> None:
        """Show ``text`` as what runs now."""
        self.text = text
        self._draw()

    def line(self) -> str:
        """What the display shows: the stage and the time since the start."""
        elapsed = int(time.monotonic() - self.start)
        return f"{self.text} [{elapsed // 60}:{elapsed % 60:02d}]"

    def _draw(self) -> None:
        if not self.active:
            return
        with self._lock:
            self.stream.write("\r\033[K" + self.line())
            self.stream.flush()

    def _tick(self) -> None:
        while not self._stop.wait(self.every_s):
            self._draw()
