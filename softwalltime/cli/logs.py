"""How the commands log: ``PROG: level: message`` on standard error, warnings and errors only
unless asked (``--verbose``, ``--debug``), errors only with ``--quiet``.

Run by systemd (``INVOCATION_ID`` or ``JOURNAL_STREAM`` in the environment), the lines name
the command too (``softwalltime-refresh: warning: ...``), so the journal tells the timers
apart; when standard error is the journal's stream itself (``JOURNAL_STREAM`` names its
device and inode, as systemd documents), each line starts with its syslog priority
(``<4>``), which journald reads as the entry's priority (``journalctl -p warning``).
Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import sys
from typing import IO, Any, Iterator, Mapping, Optional

# syslog priorities (RFC 5424) of the logging levels: what journald reads from "<N>".
_PRIORITY = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}
# The subcommand words the parsers record (cli.build_parser), in order.
_COMMAND_DESTS = ("command", "db_command", "hooks_command")


def level_of(flags: set[str]) -> int:
    """The logging level the words ``--debug``, ``--verbose``, ``--quiet`` ask for (in this
    order of precedence); warnings and errors when none is given."""
    if "--debug" in flags:
        return logging.DEBUG
    if "--verbose" in flags:
        return logging.INFO
    if "--quiet" in flags:
        return logging.ERROR
    return logging.WARNING


def under_systemd(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether systemd started this process (a service: ``INVOCATION_ID``; its output
    connected to the journal: ``JOURNAL_STREAM``)."""
    env = os.environ if environ is None else environ
    return bool(env.get("INVOCATION_ID") or env.get("JOURNAL_STREAM"))


def is_journal(stream: IO[Any], environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether ``stream`` is the journal's stream: ``JOURNAL_STREAM`` is ``DEVICE:INODE`` of
    the stream systemd connected, which a redirected stream no longer is."""
    env = os.environ if environ is None else environ
    device, _, inode = env.get("JOURNAL_STREAM", "").partition(":")
    if not (device.isdigit() and inode.isdigit()):
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False
    return (st.st_dev, st.st_ino) == (int(device), int(inode))


def identifier(
    prog: str, args: argparse.Namespace, environ: Optional[Mapping[str, str]] = None
) -> str:
    """``prog``; under systemd ``prog-command[-subcommand]`` (``softwalltime-db-prune``)."""
    if not under_systemd(environ):
        return prog
    words = [getattr(args, dest, None) for dest in _COMMAND_DESTS]
    return "-".join([prog, *(w for w in words if isinstance(w, str) and w)])


class LineFormatter(logging.Formatter):
    """``IDENT: level: message`` (with ``--debug`` the logger's name after the level); each
    line of a multi-line record is prefixed, with ``<N>`` first on the journal."""

    def __init__(self, ident: str, journal: bool, debug: bool) -> None:
        super().__init__()
        self.ident, self.journal, self.debug = ident, journal, debug

    def line(self, levelno: int, text: str) -> str:
        """``text`` (one or more lines) as this formatter writes a record of ``levelno``."""
        head = f"<{_PRIORITY.get(levelno, 6)}>" if self.journal else ""
        return "\n".join(f"{head}{self.ident}: {part}" for part in text.splitlines() or [""])

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        name = f"{record.name}: " if self.debug else ""
        return self.line(record.levelno, f"{record.levelname.lower()}: {name}{text}")


class Lines:
    """The handler :func:`setup` installed (None when logging was configured already, as
    under pytest) and how the command's own lines (``error: ...``) are written."""

    def __init__(self, handler: Optional[logging.Handler], formatter: LineFormatter) -> None:
        self.handler, self.formatter = handler, formatter

    def reset(self, level: int, ident: str) -> None:
        """The level and the identifier, once the options are parsed."""
        self.formatter.ident = ident
        self.formatter.debug = level <= logging.DEBUG
        if self.handler is not None:
            logging.getLogger().setLevel(level)

    def say(self, levelno: int, text: str) -> None:
        """Print ``text`` on standard error as a line of this command (not a log record:
        the one-line error of a failed command is printed at any level)."""
        print(self.formatter.line(levelno, text), file=sys.stderr)


def setup(prog: str, level: int) -> Lines:
    """Log to standard error in :class:`LineFormatter`'s form at ``level``, unless the
    root logger has a handler already (then it is left as it is)."""
    formatter = LineFormatter(prog, is_journal(sys.stderr), level <= logging.DEBUG)
    root = logging.getLogger()
    if root.handlers:
        return Lines(None, formatter)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root.addHandler(handler)
    root.setLevel(level)
    return Lines(handler, formatter)


class _Discard(io.TextIOBase):
    def write(self, text: str) -> int:
        return len(text)


def asked_for_stdout(args: argparse.Namespace) -> bool:
    """Whether the command's standard output is what was asked for (``--json``,
    ``--nagios``, a file option given as ``-``, ``--print``, ``--print-cron``), which
    ``--quiet`` does not silence."""
    if any(getattr(args, name, False) for name in ("json", "nagios", "print_sql", "print_cron")):
        return True
    return any(getattr(args, name, None) == "-" for name in ("out", "prometheus"))


@contextlib.contextmanager
def quieted(args: argparse.Namespace) -> Iterator[None]:
    """With ``--quiet``, the command's summary on standard output is discarded (unless it
    is what was asked for: :func:`asked_for_stdout`)."""
    if not getattr(args, "quiet", False) or asked_for_stdout(args):
        yield
        return
    with contextlib.redirect_stdout(_Discard()):
        yield
