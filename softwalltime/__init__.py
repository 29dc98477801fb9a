"""softwalltime: soft-walltime predictions for PBS Professional / OpenPBS.

This package is imported by pbs_server's embedded Python through the hook, so
everything it imports at package level must run on Python 3.6+ with only the
standard library. SQLAlchemy-based modules (db, cli, replay) are imported
explicitly by front ends only.
"""

import logging
import os
from typing import Dict

__version__ = "0.2.0"


def _folder_mtimes() -> Dict[str, int]:
    """Modification times of the package's folder and of the hook path's folders.

    An install or upgrade (pip) writes new files and renames them into place, which
    changes their folder's modification time.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    found = {}  # type: Dict[str, int]
    for folder in (here, os.path.join(here, "core"), os.path.join(here, "hook")):
        try:
            found[folder] = os.stat(folder).st_mtime_ns
        except OSError:
            pass
    return found


# The folders as they were when this package was imported. pbs_server keeps modules between
# hook events until its interpreter restarts; the hook compares these with the folders on
# disk to notice an upgrade and import again instead of running stale code.
FOLDER_MTIMES = _folder_mtimes()
# When upgraded() last looked at the folders (time.monotonic()).
_LOOKED = [float("-inf")]


def upgraded(now: float, every_s: float = 0.0) -> bool:
    """Whether this package's folders changed on disk since it was imported (an upgrade).

    The hook asks at every event; the folders are looked at only when ``every_s`` seconds
    passed since the last look (``now`` is ``time.monotonic()``; 0: look now).
    """
    if now - _LOOKED[0] < every_s:
        return False
    _LOOKED[0] = now
    return _folder_mtimes() != FOLDER_MTIMES


# Library code logs; only entry points (cli.main, the ingester, the hook) attach handlers.
logging.getLogger(__name__).addHandler(logging.NullHandler())
