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


def _file_mtimes() -> Dict[str, float]:
    """Modification time of every file of the package root and of the hook path."""
    here = os.path.dirname(os.path.abspath(__file__))
    found = {}  # type: Dict[str, float]
    for folder in (here, os.path.join(here, "hookpath")):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                try:
                    found[path] = os.path.getmtime(path)
                except OSError:
                    pass
    return found


# The files as they were when this package was imported. pbs_server keeps modules between
# hook events until its interpreter restarts; the hook compares these with the files on
# disk to notice an upgrade and import again instead of running stale code.
FILE_MTIMES = _file_mtimes()

# Library code logs; only entry points (cli.main, the ingester, the hook) attach handlers.
logging.getLogger(__name__).addHandler(logging.NullHandler())
