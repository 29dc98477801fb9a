"""Accounting files: where they are, what identifies them, and reading only new complete lines.

A file is identified by its inode and a fingerprint (SHA-1 of its first line), so a
checkpoint can tell a grown file from a truncated, replaced or renamed one. Plain files
are read from a byte offset; ``.gz`` archives are decompressed and the offset counts
uncompressed bytes. Only complete lines are consumed from a plain file: PBS writes
without fsync, so the last line of the live file may still be growing.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import stat
import struct
import zlib
from pathlib import Path
from typing import IO, Dict, Iterator, List, Mapping, NamedTuple, Optional, Tuple, cast

from softwalltime.errors import SoftwalltimeError

log = logging.getLogger(__name__)

DEFAULT_PBS_HOME = "/var/spool/pbs"
DEFAULT_PBS_CONF = "/etc/pbs.conf"
# Read size: large enough that per-chunk overhead vanishes, small enough that memory
# stays flat whatever the size of the log.
CHUNK_BYTES = 4 << 20
# A "line" longer than this without a newline is no accounting record (PBS's longest are a
# few kilobytes): it is skipped as it is read, never held in memory, and reported.
MAX_LINE_BYTES = 16 << 20
# A first line longer than this is fingerprinted by its first FINGERPRINT_MAX bytes.
FINGERPRINT_MAX = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"


class FileError(SoftwalltimeError):
    """An accounting file or directory cannot be used (missing, unreadable, corrupt)."""


class LogFile(NamedTuple):
    """One accounting file as found now."""

    path: str  # absolute path as text (db_path), the checkpoint key and what is shown
    compressed: bool  # gzip: offsets count uncompressed bytes
    inode: int
    size: int  # on-disk size (compressed size for .gz)
    # "<SHA-1 of the first complete line> head=<SHA-1 of the first bytes>:<their count>"
    # (at most HEAD_BYTES); None while there is no complete line yet
    fingerprint: Optional[str]
    gz_isize: Optional[int]  # uncompressed size mod 2**32 from the gzip trailer
    os_path: str = ""  # the name to open (differs from path only for non-UTF-8 names)

    @property
    def name(self) -> str:
        """What to open: the file system's own name."""
        return self.os_path or self.path


# A file name that is not valid UTF-8 is stored as this prefix, then its bytes with every
# byte outside printable ASCII (and the backslash) as \xNN: text PostgreSQL accepts, read
# back exactly (os_path), never equal to an absolute path (those start with '/').
NON_UTF8_PREFIX = "bytes:"


def db_path(path: str) -> str:
    """A file path as text for the database and messages, losslessly (see os_path)."""
    raw = os.fsencode(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return NON_UTF8_PREFIX + "".join(
            chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02x}" for b in raw
        )


def os_path(text: str) -> str:
    """The file system name of a path stored by :func:`db_path`."""
    if not text.startswith(NON_UTF8_PREFIX):
        return text
    body = text[len(NON_UTF8_PREFIX) :]
    raw = re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), body.encode("ascii"))
    return os.fsdecode(raw)


def pbs_home(environ: Mapping[str, str]) -> str:
    """``PBS_HOME`` from the environment, else from ``/etc/pbs.conf`` (or ``PBS_CONF_FILE``).

    Without ``PBS_CONF_FILE`` a missing ``/etc/pbs.conf`` means PBS's default home; a
    ``PBS_CONF_FILE`` that cannot be read is an error, never that default (which may be
    another server's logs).

    :param environ: the process environment
    :raises FileError: ``PBS_CONF_FILE`` names a file that cannot be read
    """
    if environ.get("PBS_HOME"):
        return environ["PBS_HOME"]
    named = environ.get("PBS_CONF_FILE")
    try:
        with open(named or DEFAULT_PBS_CONF, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.strip().partition("=")
                if key.strip() == "PBS_HOME" and value.strip():
                    return value.strip()
    except OSError as err:
        if named:
            raise FileError(
                f"PBS_CONF_FILE names {named}, which cannot be read: {err.strerror}"
                " (fix it, or give --dir or accounting_dir)"
            ) from None
    return DEFAULT_PBS_HOME


def default_directory(environ: Mapping[str, str]) -> str:
    """``$PBS_HOME/server_priv/accounting``, where pbs_server writes its accounting files.

    :raises FileError: ``PBS_CONF_FILE`` names a file that cannot be read
    """
    return os.path.join(pbs_home(environ), "server_priv", "accounting")


def find_files(directory: str) -> List[str]:
    """Entries of ``directory`` (not hidden), sorted by name (PBS names them YYYYMMDD).

    :raises FileError: the directory does not exist or cannot be listed
    """
    try:
        names = os.listdir(directory)
    except OSError as err:
        raise FileError(
            f"cannot read accounting directory {directory}: {err.strerror} "
            "(use --dir or the accounting_dir setting)"
        ) from err
    found = []
    for name in sorted(names):
        if name.startswith("."):
            continue
        path = os.path.join(directory, name)
        if os.path.lexists(path):  # else vanished between listdir and now
            # directories, FIFOs and dangling links too: the caller reports those named like
            # accounting files (inspect() says what they are), as on the command line
            found.append(os.path.abspath(path))
    return found


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


class ArchiveTruncated(EOFError):
    """A gzip archive ends inside a member: what came before it was read."""


class TrailingJunk(Exception):
    """Bytes after the last gzip member that are neither another member nor zero padding
    (gzip(1): "trailing garbage ignored"): everything before them was read."""

    def __init__(self, offset: int, size: int) -> None:
        Exception.__init__(self, f"{size} bytes of trailing junk at byte {offset}")
        self.offset = offset  # in the file as stored (compressed)
        self.size = size


def _gunzip(raw: IO[bytes]) -> Iterator[bytes]:
    """Decompressed data of every member of a gzip file, in pieces of CHUNK_BYTES at most.

    :raises ArchiveTruncated: at the end, if the archive ends inside a member
    :raises TrailingJunk: at the end, if what follows the last member is not gzip data
    :raises zlib.error: corrupt data
    """
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    in_member = False
    while True:
        buf = raw.read(1 << 20)
        if not buf:
            break
        while buf:
            out = d.decompress(buf, CHUNK_BYTES)
            in_member = True
            if out:
                yield out
            if d.eof:
                buf = _after_member(raw, d.unused_data)
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                in_member = False
            else:
                buf = d.unconsumed_tail
    if in_member:
        rest = d.flush()
        if rest:
            yield rest
        raise ArchiveTruncated("the archive is truncated (it ends inside a gzip member)")


def _after_member(raw: IO[bytes], rest: bytes) -> bytes:
    """What follows a gzip member (``rest``: read already): the start of the next member,
    or b"" at the end of the file, zero padding (which gzip allows) included.

    :raises TrailingJunk: anything else follows
    """
    while len(rest) < len(_GZIP_MAGIC):
        more = raw.read(1 << 20)
        if not more:
            break
        rest += more
    if not rest or rest.startswith(_GZIP_MAGIC):
        return rest
    offset = raw.tell() - len(rest)
    while rest:
        if rest.strip(b"\0"):
            raise TrailingJunk(offset, os.fstat(raw.fileno()).st_size - offset)
        rest = raw.read(1 << 20)
    return b""


class _Gunzip(io.RawIOBase):
    """A readable file of every member of a gzip archive (GzipFile reads them too, but
    refuses a truncated archive whole): a truncated or corrupt one gives all its readable
    data, and the error only when that is used up. Trailing junk ends the data, and is
    kept in ``junk``."""

    def __init__(self, path: str) -> None:
        self._raw = open(path, "rb")
        self._pieces = _gunzip(self._raw)
        self._buf = b""
        self._end = False
        self._error: Optional[Exception] = None
        self.junk: Optional[TrailingJunk] = None

    def readable(self) -> bool:
        return True

    def read(self, size: Optional[int] = -1) -> bytes:
        want = CHUNK_BYTES if size is None or size < 0 else size
        while len(self._buf) < want and not self._end and self._error is None:
            try:
                self._buf += next(self._pieces)
            except StopIteration:
                self._end = True
            except TrailingJunk as junk:
                self.junk, self._end = junk, True
            except (ArchiveTruncated, zlib.error) as err:
                self._error = err
        if not self._buf and self._error is not None:
            raise self._error
        out, self._buf = self._buf[:want], self._buf[want:]
        return out

    def close(self) -> None:
        self._raw.close()
        super().close()


def _open(path: str, compressed: bool) -> IO[bytes]:
    if compressed:
        return cast(IO[bytes], _Gunzip(path))
    return open(path, "rb")


def _first_line_hash(start: bytes) -> Optional[str]:
    """SHA-1 of the first line in ``start`` (the file's first bytes), at most FINGERPRINT_MAX."""
    nl = start.find(b"\n", 0, FINGERPRINT_MAX)
    if nl >= 0:
        return hashlib.sha1(start[: nl + 1]).hexdigest()
    if len(start) < FINGERPRINT_MAX:
        return None  # no complete line yet: nothing to identify, nothing to consume
    return hashlib.sha1(start[:FINGERPRINT_MAX]).hexdigest()


# Bytes of a file's start whose hash is part of its identity: an inode reused at once (ext4
# does) by a new file with the same first line must not pass for the file read before.
HEAD_BYTES = 4 << 10


def _head_hash(name: str, compressed: bool, length: int) -> Optional[str]:
    """SHA-1 of the first ``length`` bytes (uncompressed), None if the file is shorter."""
    with _open(name, compressed) as fh:
        head = fh.read(length)
    return hashlib.sha1(head).hexdigest() if len(head) == length else None


def fingerprint_parts(fingerprint: str) -> Tuple[str, str, str, Optional[int]]:
    """``(first line hash, head hash, head length, archive size)`` of a stored fingerprint.

    ``"<line sha1> head=<sha1>:<length>[ z<bytes>]"``; older checkpoints hold the line's
    hash alone. ``z``: the on-disk size of an archive that was read to its end.
    """
    line, _, rest = fingerprint.partition(" head=")
    head, _, archive = rest.partition(" z")
    digest, _, length = head.partition(":")
    return line, digest, length, int(archive) if archive.isdigit() else None


def archive_read(fingerprint: str, size: int) -> str:
    """The fingerprint of an archive read to its end at ``size`` bytes on disk."""
    return fingerprint.partition(" z")[0] + f" z{size}"


def same_start(f: LogFile, fingerprint: str) -> bool:
    """Whether ``f`` begins as the file a checkpoint's ``fingerprint`` was taken from.

    A checkpoint of an older version has the first line's hash only; then that decides.

    :raises FileError: the file cannot be read
    """
    assert f.fingerprint is not None
    line, digest, length, _size = fingerprint_parts(fingerprint)
    my_line, mine, my_length, _ = fingerprint_parts(f.fingerprint)
    if line != my_line:
        return False
    if not digest:
        return True
    if length == my_length:
        return digest == mine
    try:
        return _head_hash(f.name, f.compressed, int(length)) == digest
    except (OSError, EOFError, zlib.error, ValueError) as err:
        raise FileError(f"{f.path}: cannot read: {_reason(err)}") from err


def inspect(path: str) -> LogFile:
    """Stat a file and fingerprint its first line.

    :param path: a plain or gzip-compressed accounting file
    :raises FileError: missing, not a regular file, unreadable or a corrupt archive
    """
    path = os.path.abspath(path)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise FileError(f"{path}: not a regular file")
        compressed = _is_gzip(path)
        if not compressed and path.endswith(".gz"):
            raise FileError(f"{path}: named .gz but not gzip data; nothing read")
        isize = None
        with _open(path, compressed) as fh:
            start = fh.read(HEAD_BYTES)
            if len(start) == HEAD_BYTES and b"\n" not in start:  # a first line this long
                start += fh.read(FINGERPRINT_MAX - HEAD_BYTES)
        why = not_a_log(start[:HEAD_BYTES])
        if why:
            raise FileError(f"{path}: not an accounting log ({why}); nothing read")
        fingerprint = _first_line_hash(start)
        if fingerprint is not None:
            head = start[:HEAD_BYTES]
            fingerprint += f" head={hashlib.sha1(head).hexdigest()}:{len(head)}"
        if compressed:
            with open(path, "rb") as raw:
                raw.seek(-4, os.SEEK_END)
                isize = struct.unpack("<I", raw.read(4))[0]
    except FileError:
        raise
    except (OSError, EOFError, zlib.error) as err:
        raise FileError(f"{path}: cannot read: {_reason(err)}") from err
    return LogFile(db_path(path), compressed, st.st_ino, st.st_size, fingerprint, isize, path)


_RECORD_START = re.compile(rb"^\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;", re.MULTILINE)


def not_a_log(head: bytes) -> Optional[str]:
    """Why a file that starts with ``head`` (its first bytes, uncompressed) is no
    accounting log, or None: binary data (a NUL byte, or bytes that are not UTF-8) and not
    one line that starts like a record. A log with records first is read whatever follows
    (a crash can leave NUL bytes in one); its bad lines are reported one by one."""
    if _RECORD_START.search(head):
        return None
    nul = head.find(b"\x00")
    if nul >= 0:
        return f"binary data: a NUL byte at byte {nul}"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(head) - 3:  # not a character cut at the end of the head
            return f"binary data: not UTF-8 text at byte {err.start}"
    return None


def _reason(err: BaseException) -> str:
    return getattr(err, "strerror", None) or str(err) or type(err).__name__


class Checkpoint(NamedTuple):
    """Where the last committed run stopped in a file."""

    path: str
    inode: Optional[int]
    fingerprint: str
    byte_offset: int
    line_number: int


class Plan(NamedTuple):
    """Where to start reading a file, and why."""

    offset: int
    line_number: int
    state: str  # new, grown, unchanged, truncated, replaced, renamed
    note: Optional[str]  # said to the administrator when the file was not simply resumed


def plan(
    f: LogFile,
    checkpoint: Optional[Checkpoint],
    by_identity: Mapping[Tuple[int, str], List[Checkpoint]],
) -> Plan:
    """Decide where to resume ``f`` from its checkpoint.

    Re-reading from 0 is always safe (rows are upserted on server + job id + ctime), so
    every doubtful case restarts; resuming is only for a file known to be the same.

    :param f: the file as found now
    :param checkpoint: the checkpoint stored under the same path, if any
    :param by_identity: checkpoints by (inode, fingerprint), to follow renamed files
    """
    if f.fingerprint is None:
        return Plan(0, 0, "unchanged", None)
    if checkpoint is None:
        for moved in by_identity.get((f.inode, f.fingerprint.partition(" head=")[0]), ()):
            if moved.path == f.path or not (f.compressed or f.size >= moved.byte_offset):
                continue
            if same_start(f, moved.fingerprint):
                note = f"renamed from {moved.path}; resuming at byte {moved.byte_offset}"
                return Plan(moved.byte_offset, moved.line_number, "renamed", note)
        return Plan(0, 0, "new", None)
    if checkpoint.inode != f.inode:
        return Plan(0, 0, "replaced", "replaced (different inode); reading it again")
    if not f.compressed and f.size < checkpoint.byte_offset:
        note = (
            f"truncated to {f.size} bytes (was read to {checkpoint.byte_offset}); reading it again"
        )
        return Plan(0, 0, "truncated", note)
    if not same_start(f, checkpoint.fingerprint):
        return Plan(0, 0, "replaced", "replaced (different first line or start); reading it again")
    if f.compressed:
        assert f.gz_isize is not None
        read_to = fingerprint_parts(checkpoint.fingerprint)[3]
        # The trailer gives the size of the last member only: a multi-member archive read to
        # its end is known by its size on disk (checkpoints of older versions: the trailer).
        if read_to == f.size or (
            read_to is None and checkpoint.byte_offset % (1 << 32) == f.gz_isize
        ):
            return Plan(checkpoint.byte_offset, checkpoint.line_number, "unchanged", None)
        return Plan(checkpoint.byte_offset, checkpoint.line_number, "grown", None)
    if f.size == checkpoint.byte_offset:
        return Plan(checkpoint.byte_offset, checkpoint.line_number, "unchanged", None)
    return Plan(checkpoint.byte_offset, checkpoint.line_number, "grown", None)


class Reader:
    """Yield complete lines of a file from a byte offset, in large chunks.

    After iteration, ``pending`` is the number of bytes of an incomplete last line left
    for the next run (plain files only: an archive is final, so its last line counts even
    without a newline), and ``junk`` what followed an archive's last member, if not gzip.
    """

    def __init__(self, f: LogFile, offset: int) -> None:
        self.file = f
        self.offset = offset
        self.pending = 0
        self.junk: Optional[TrailingJunk] = None  # after the last member of an archive

    def chunks(self) -> Iterator[Tuple[int, bytes, int]]:
        """``(start_offset, data, end_offset)``: ``data`` is whole lines; each ends in ``\\n``
        except possibly the last line of an archive. A line longer than ``MAX_LINE_BYTES``
        comes as ``data=b""`` over its whole extent (its newline included): it is skipped
        while it is read, in linear time and bounded memory.

        :raises FileError: the file cannot be read, or an archive is shorter than the offset
        """
        f = self.file
        try:
            with _open(f.name, f.compressed) as fh:
                self._seek(fh)
                pos = self.offset
                carry = b""
                skipping = 0  # bytes of an overlong line read so far (0: none)
                while True:
                    block = fh.read(CHUNK_BYTES)
                    if not block:
                        break
                    if skipping:
                        nl = block.find(b"\n")
                        if nl < 0:
                            skipping += len(block)
                            continue
                        yield pos, b"", pos + skipping + nl + 1
                        pos += skipping + nl + 1
                        skipping = 0
                        block = block[nl + 1 :]
                        if not block:
                            continue
                    data = carry + block if carry else block
                    cut = data.rfind(b"\n") + 1
                    if cut == 0:
                        if len(data) > MAX_LINE_BYTES:
                            skipping, carry = len(data), b""
                        else:
                            carry = data
                        continue
                    carry = data[cut:]
                    yield pos, data[:cut], pos + cut
                    pos += cut
                if skipping:
                    if f.compressed:  # an archive's last line is final
                        yield pos, b"", pos + skipping
                    else:
                        self.pending = skipping
                elif carry:
                    if f.compressed:
                        yield pos, carry, pos + len(carry)
                    else:
                        self.pending = len(carry)
                self.junk = getattr(fh, "junk", None)
        except (OSError, EOFError, zlib.error) as err:
            raise FileError(f"{f.path}: cannot read: {_reason(err)}") from err

    def _seek(self, fh: IO[bytes]) -> None:
        if not self.file.compressed:
            fh.seek(self.offset)
            return
        left = self.offset
        while left > 0:
            skipped = len(fh.read(min(left, CHUNK_BYTES)))
            if skipped == 0:
                raise FileError(
                    f"{self.file.path}: archive is shorter than the checkpoint offset {self.offset}"
                )
            left -= skipped


def index_checkpoints(
    checkpoints: Mapping[str, Checkpoint],
) -> Dict[Tuple[int, str], List[Checkpoint]]:
    """Checkpoints by (inode, first line hash), to recognise a file renamed by rotation.

    Several may share a key (an inode reused by a file with the same first line): all are
    kept, furthest read first, and plan() takes the first the file still begins like.
    """
    out: Dict[Tuple[int, str], List[Checkpoint]] = {}
    for cp in checkpoints.values():
        if cp.inode is not None:
            out.setdefault((cp.inode, cp.fingerprint.partition(" head=")[0]), []).append(cp)
    for found in out.values():
        found.sort(key=lambda cp: (-cp.byte_offset, cp.path))
    return out


_DATE_NAME_RE = re.compile(r"^\d{8}(\.gz)?$")


def looks_like_accounting_name(path: str) -> bool:
    """True for PBS's ``YYYYMMDD`` names (and ``YYYYMMDD.gz``)."""
    return _DATE_NAME_RE.match(Path(path).name) is not None
