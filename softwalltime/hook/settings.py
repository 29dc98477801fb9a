"""The hook's settings cache: its config file parsed once, kept between events.

Hook path: Python 3.6+ syntax, standard library only. The loader itself is pure
(:mod:`softwalltime.core.config`); what is kept between events lives in :data:`.state.STATE`.
"""

from typing import Any, Optional

from ..core.config import Settings, load_settings
from .state import STATE


def hook_settings(path: Optional[str], stamp: Any = None) -> Settings:
    """The hook's settings from its config file alone, parsed again only when it changed.

    pbs_server keeps imported modules between events, so the parse is kept here and
    reused while the file's bytes stay the same (reading a small file costs far less than
    parsing and checking it). Never reads the environment.

    :param stamp: the file's identity as the caller found it with ``stat`` (inode, size,
        times): while it is the one of the kept settings, the file is not even read
    :raises ConfigError: as :func:`softwalltime.core.config.load_settings`
    """
    if path is None:
        return load_settings(None, environ={})
    kept = STATE.settings  # the settings and the identity of the file they came from
    if stamp is not None and kept.get("stamp") == (path, stamp):
        same = kept["settings"]  # type: Settings
        return same
    try:
        with open(path, "rb") as fh:
            content = fh.read()  # type: Optional[bytes]
    except OSError:
        content = None  # load_settings says what is wrong
    if content is not None and kept.get("key") == (path, content):
        cached = kept["settings"]  # type: Settings
        kept["stamp"] = (path, stamp)
        return cached
    settings = load_settings(path, environ={})
    kept.update(key=(path, content), stamp=(path, stamp), settings=settings)
    return settings
