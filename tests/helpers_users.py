"""Code run as another Unix user: what an ordinary user meets (a file root keeps to itself).

A forked child of the test process drops to user nobody and runs a function there: the
interpreter may sit where nobody cannot exec it (a pyenv under /root), so nothing is
exec'd; the modules the function needs must be imported before the fork.
"""

from __future__ import annotations

import os
import pwd
import sys
import tempfile
from collections.abc import Callable

from helpers_runtime import skip_or_fail


def need_root() -> None:
    """Skip locally, fail in CI, unless this process may become another user."""
    if os.geteuid() != 0:
        skip_or_fail("needs root, to run code as user nobody", "CI runs as root")


def as_nobody(work: Callable[[], int], env: dict[str, str]) -> tuple[int, str, str]:
    """``work()`` run by user nobody with ``env`` as its whole environment, in a forked child
    of this process; (its return value as the exit code, stdout, stderr)."""
    nobody = pwd.getpwnam("nobody")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 70
            try:
                os.setgroups([])
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
                os.environ.clear()
                os.environ.update(env)
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = open(1, "w", closefd=False)  # not pytest's capture
                sys.stderr = open(2, "w", closefd=False)
                code = work()
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return os.waitstatus_to_exitcode(status), out.read().decode(), err.read().decode()


def public_dir(prefix: str) -> str:
    """A new folder everyone may enter and read (pytest's tmp_path is root's alone)."""
    path = tempfile.mkdtemp(prefix=prefix)
    os.chmod(path, 0o755)
    return path
