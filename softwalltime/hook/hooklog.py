"""Forward the library's logging to a callable such as ``pbs.logmsg`` (used by the hook).

Kept free of ``pbs``: the hook passes ``pbs.logmsg`` and the level numbers in.
Hook path: Python 3.6+ syntax, standard library only.
"""

import logging
import time
from typing import Callable

from .state import STATE

HANDLER_NAME = "softwalltime-hook"


def one_line(text: str) -> str:
    """``text`` with every run of white space (newlines too) made one space."""
    return " ".join(text.split())


def line_prefix(hook: str = "softwalltime") -> str:
    """What starts the hook's decision and failure lines: ``softwalltime: `` for the hook
    named softwalltime, ``softwalltime[NAME]: `` for a hook installed under another name
    (pbs.logmsg puts no hook name in the line; ``status --hook NAME`` counts by this)."""
    return "softwalltime: " if hook == "softwalltime" else f"softwalltime[{hook}]: "


def decision_line(reason: str, start: float, hook: str = "softwalltime") -> str:
    """The hook's debug line for one event: its decision and the time since ``start``
    (``time.monotonic()``), e.g. ``softwalltime: queuejob user='alice' ...: set ... [0.21 ms]``.
    """
    return f"{line_prefix(hook)}{one_line(reason)} [{(time.monotonic() - start) * 1000:.2f} ms]"


def unmarked_line(resource: str, err: BaseException) -> str:
    """The warning for a soft walltime set without the hook's mark (its resource missing)."""
    return (
        f"softwalltime: soft_walltime set but not marked as the hook's ({type(err).__name__}:"
        f" {one_line(str(err))}): runjob and refresh will keep it as a manager's value;"
        f" run 'softwalltime hooks install' to create resource {resource}"
    )


def unranked_line(resource: str, err: BaseException) -> str:
    """The warning for a rank that could not be set (its resource missing)."""
    return (
        f"softwalltime: sort rank not set ({type(err).__name__}: {one_line(str(err))});"
        f" the soft walltime is; run 'softwalltime hooks install --rank' to create"
        f" resource {resource}"
    )


class CallbackHandler(logging.Handler):
    """Send each record to ``logmsg(level, "softwalltime: message")``."""

    def __init__(
        self, logmsg: Callable[[int, str], None], debug: int, warning: int, error: int
    ) -> None:
        super().__init__()
        self._logmsg = logmsg
        self._levels = (debug, warning, error)

    def routes_to(self, logmsg: Callable[[int, str], None], *levels: int) -> bool:
        return self._logmsg is logmsg and self._levels == levels

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            level = self._levels[2]
        elif record.levelno >= logging.WARNING:
            level = self._levels[1]
        else:
            level = self._levels[0]
        try:
            self._logmsg(level, "softwalltime: " + one_line(record.getMessage()))
        except Exception:  # noqa: BLE001 - logging must never break the hook
            self.handleError(record)


def forward_logging(
    logmsg: Callable[[int, str], None], debug: int, warning: int, error: int
) -> logging.Logger:
    """Route the ``softwalltime`` logger (DEBUG and up) to ``logmsg``, replacing earlier routes.

    pbs_server keeps imported modules (and so this logger) across events while each hook
    run gets fresh globals, so the handler of the previous run is replaced, never stacked.

    :param logmsg: e.g. ``pbs.logmsg``
    :param debug: level passed for DEBUG/INFO records (e.g. ``pbs.EVENT_DEBUG``)
    :param warning: level passed for WARNING records (e.g. ``pbs.LOG_WARNING``)
    :param error: level passed for ERROR records (e.g. ``pbs.LOG_ERROR``)
    :returns: the ``softwalltime`` logger
    """
    route = (logmsg, debug, warning, error)
    last = STATE.log_route  # the route set last: (logmsg, levels), the logger, its handler
    if last[0] == route and last[2] in last[1].handlers:
        return last[1]  # type: ignore[no-any-return]  # the previous event's: in place
    logger = logging.getLogger("softwalltime")
    for old in [h for h in logger.handlers if h.get_name() == HANDLER_NAME]:
        if isinstance(old, CallbackHandler) and old.routes_to(logmsg, debug, warning, error):
            return logger  # the same route as the previous event: nothing to do
        logger.removeHandler(old)
    handler = CallbackHandler(logmsg, debug, warning, error)
    handler.set_name(HANDLER_NAME)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    STATE.log_route = [route, logger, handler]
    return logger
