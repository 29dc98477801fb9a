"""Forward the library's logging to a callable such as ``pbs.logmsg`` (used by the hook).

Kept free of ``pbs``: the hook passes ``pbs.logmsg`` and the level numbers in.
Hook path: Python 3.6+ syntax, standard library only.
"""

import logging
from typing import Callable

HANDLER_NAME = "softwalltime-hook"


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
            self._logmsg(level, "softwalltime: " + " ".join(record.getMessage().split()))
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
    return logger
