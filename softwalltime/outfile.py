"""Write a command's output file safely, as root may: ``report --out``, ``status --prometheus``.

A reader never sees half a file: the text goes to a new file beside the target, then is
renamed over it. Only a regular file (or nothing) is ever replaced: a symlink, a device such
as /dev/null, a fifo or a directory at the path is refused with one line, never replaced nor
written through. An existing file keeps its mode (and, when the writer may, its owner); a
new file gets 0666 less the umask, as ``>`` would. ``-`` means standard output. A failed
write leaves no temporary file behind.
"""

from __future__ import annotations

import os
import secrets
import stat
import sys

from .errors import SoftwalltimeError

STDOUT = "-"

_KINDS = (
    (stat.S_ISLNK, "a symlink"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a fifo"),
    (stat.S_ISSOCK, "a socket"),
)


def _existing(path: str) -> os.stat_result | None:
    """The regular file at ``path`` (not followed), or None if there is none.

    :raises SoftwalltimeError: something else is there
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise SoftwalltimeError(f"cannot write {path}: {err.strerror or err}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise SoftwalltimeError(
            f"cannot write {path}: it is {kind}, not a regular file; give a file's path"
        )
    return st


def _fill(fd: int, text: str, old: os.stat_result | None) -> None:
    """Write ``text`` to the new file ``fd`` and give it the old file's mode and owner."""
    if old is not None:
        os.fchmod(fd, stat.S_IMODE(old.st_mode))
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except PermissionError:
            pass  # not root: the new file is the writer's, as an editor's save would be
    with os.fdopen(fd, "w", encoding="utf-8", closefd=False) as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (``-``: standard output).

    :raises SoftwalltimeError: the path is not a regular file, or cannot be written
    """
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    old = _existing(path)
    folder, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o666)  # the kernel applies the umask
    except OSError as err:
        raise SoftwalltimeError(f"cannot write {path}: {err.strerror or err}") from None
    try:
        try:
            _fill(fd, text, old)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as err:
        _unlink_quietly(tmp)
        raise SoftwalltimeError(f"cannot write {path}: {err.strerror or err}") from None
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
