"""A small PostgreSQL client in pure Python (protocol 3.0) for the PBS hook.

Why not psycopg2 or another driver on the hook path:

* pbs_server finalizes and re-initializes its embedded Python every
  ``python_restart_max_hooks`` hook runs (100 by default). psycopg2's C extension cannot
  be imported again in the same process after that ("cannot import name 'encodings' from
  'psycopg2._psycopg'"), so every job after the first restart went unpredicted. Pure
  Python modules import again like any other.
* Nothing is compiled, so nothing must match the Python that pbs_server embeds (3.6 on
  EL8, 3.9 on EL9, 3.11 on Debian 12); pg8000, the pure-Python driver, needs Python 3.8+
  and two more packages, so it cannot serve EL8.
* Every wait (TCP connect, TLS handshake, authentication, query) is one ``poll()``
  against a single wall-clock deadline. A socket-timeout driver bounds each read, not the
  whole event, and libpq's ``connect_timeout`` takes whole seconds (at least 2 before 17).

It implements what the hook needs and nothing more: unix-socket and TCP connections
(host lists tried in order, sharing the deadline: see :func:`connect`), TLS by ``sslmode``
(disable, allow, prefer, require, verify-ca, verify-full, with libpq's fallbacks and
root-certificate rules) with the standard ``ssl`` module, trust / password / MD5 /
SCRAM-SHA-256 (SASLprep, no channel binding) authentication, ``require_auth``,
``~/.pgpass`` / ``passfile`` with libpq's matching rules, and parameterized queries through
the extended protocol with text parameters (``$1``, ``$2``...). Results are decoded for
integers, floats, booleans and text; other types come back as text. The session's
client_encoding is always UTF8. :meth:`Connection.quiet` says, without reading or waiting,
whether the server sent anything since the last reply (a notice, a notification, the FATAL
of a terminated backend).

Where it differs from libpq:

* It refuses rather than ignores: unknown keywords (a typo in ``sslmode`` must not quietly
  connect without TLS), ``channel_binding=require``, ``gssencmode=require``,
  ``sslnegotiation=direct``, ``service``, ``replication``. Accepted but not acted on:
  keepalives, ``target_session_attrs``, ``load_balance_hosts``, CRLs, ``sslsni``, TLS
  protocol bounds (the ``ssl`` module's defaults apply).
* A cleartext password request (``password`` in ``pg_hba.conf``) over TCP without TLS is
  refused unless ``require_auth`` names ``password`` (``require_auth=password``, or a list
  with it); libpq sends the password. Over a unix socket or TLS it is answered.
* ``sslrootcert=system`` as libpq 16+ does it: ``sslmode`` defaults to ``verify-full``
  (host name checked, so no plaintext fallback either) and an explicit weaker ``sslmode``
  is an error (``weak sslmode ... may not be used with sslrootcert=system``); libpq 15 and
  older read a file named ``system``.
* What the server chooses is capped (the values and why at their constants): message
  length (:data:`MAX_MESSAGE`), messages other than rows in one round trip, startup
  included (:data:`MAX_MESSAGES_PER_ROUND_TRIP`: notices, notifications, parameter
  reports), rows and bytes of a result (:data:`MAX_ROWS`, :data:`MAX_RESULT_BYTES`) and
  SCRAM iterations (:data:`MAX_SCRAM_ITERATIONS`, checked before any hashing). Beyond a cap,
  and for any malformed message, the connection is closed and :class:`DatabaseError`
  raised, never another exception.
* One deadline bounds everything, and the hosts of a list share it: each host gets the time
  left divided by the hosts not yet tried (``connect_timeout`` bounds each host further).
  libpq gives each host its whole ``connect_timeout`` and has no overall bound.

tests/test_pgwire.py checks it against a real server, tests/test_pgwire_hostile.py against
fake servers that misbehave.

Hook path: Python 3.6+ syntax, standard library only.
"""

import base64
import binascii
import errno
import hashlib
import hmac
import os
import pwd
import select
import socket
import ssl
import stat
import stringprep
import struct
import threading
import time
import unicodedata
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..core import dsn as dsnlib
from ..errors import DatabaseError
from .state import STATE

PROTOCOL_3_0 = 196608
SSL_REQUEST_CODE = 80877103
DEFAULT_SOCKET_DIRS = ("/var/run/postgresql", "/tmp")
# SQLSTATE of a statement cancelled by statement_timeout: the connection stays usable.
QUERY_CANCELED = "57014"

# -- caps on what the server chooses (a spoofed or broken server is untrusted input) ----
# Longest message accepted from the server, length field included. The biggest thing the
# hook reads is one calibration_state row (a short JSON list of choices, under 1 KiB); an
# ErrorResponse is a few hundred bytes. 1 MiB leaves three orders of magnitude and bounds
# the receive buffer (MAX_BUFFER) whatever the length field says.
MAX_MESSAGE = 1024 * 1024
# Messages other than DataRow in one round trip, the startup included: a statement's reply
# is about six (ParseComplete, BindComplete, RowDescription, CommandComplete, ErrorResponse,
# ReadyForQuery), a startup about twenty (authentication, ~15 ParameterStatus, BackendKeyData).
# NoticeResponse, NotificationResponse and ParameterStatus may come at any time and in any
# number, so a NOTIFY flood or a streaming server would otherwise keep us reading until the
# deadline (and a whole backlog after an idle time): 100 is five times the legitimate most.
MAX_MESSAGES_PER_ROUND_TRIP = 100
# Rows and DataRow bytes of one result. The hook's queries have a LIMIT (tens of rows) and
# `softwalltime status` reads one row per server; a server that ignores the LIMIT must not
# grow the process (100,000 rows of two numbers are 12 MB of Python objects).
MAX_ROWS = 100000
MAX_RESULT_BYTES = 16 * 1024 * 1024
# SCRAM iteration count the server may ask for. PostgreSQL's default is 4096; from 16 the
# administrator may raise scram_iterations (to any int). pbkdf2_hmac is C code that PBS's
# alarm cannot interrupt and that runs before any deadline check, so a server asking for
# 10^8 held an event for 107 s. Measured here (AMD EPYC, OpenSSL 3.0): 100,000 iterations
# cost 24-26 ms on Python 3.11 and 92 ms on 3.6.15, a tenth of the hook's 1 s bound at most;
# 4096 cost 1 ms and 4 ms.
MAX_SCRAM_ITERATIONS = 100000
# Distinct ParameterStatus names kept: PostgreSQL reports about 15 (the GUC_REPORT ones); a
# server inventing new names at every round trip must not grow the dict for ever.
MAX_PARAMETERS = 64
# One recv() reads at most this; the receive buffer then never holds more than one whole
# message and one read beyond it (see Connection._fill).
RECV_SIZE = 65536
MAX_BUFFER = MAX_MESSAGE + 1 + RECV_SIZE

# What a malformed message raises when it is parsed (short, garbled, not UTF-8 or ASCII,
# bad base64; the last two are ValueErrors, named for the reader): each becomes
# DatabaseError("malformed ... message from the server").
_MALFORMED = (struct.error, IndexError, ValueError, UnicodeDecodeError, binascii.Error)
_MESSAGE_NAMES = {
    b"R": "authentication",
    b"E": "error",
    b"K": "backend key data",
    b"T": "row description",
    b"D": "data row",
}
# Message types the server may send at any time, not only in reply to us.
_ASYNCHRONOUS = frozenset((b"N", b"A", b"S"))
# Authentication request codes libpq knows and this client does not do.
_AUTH_NAMES = {2: "Kerberos V5", 6: "SCM credentials", 7: "GSSAPI", 8: "GSSAPI", 9: "SSPI"}

# A cached prepared statement that no longer works as prepared: 26000 invalid statement
# name (gone), 0A000 "cached plan must not change result type".
_STALE_STATEMENT = frozenset(("26000", "0A000"))

_INT_OIDS = frozenset((20, 21, 23, 26, 28))  # int8 int2 int4 oid xid
_FLOAT_OIDS = frozenset((700, 701))
_BOOL_OID = 16

_I32 = struct.Struct("!i")
_I16 = struct.Struct("!h")
_HDR = struct.Struct("!ci")


def wait_ready(sock: Any, readable: bool, timeout_s: float) -> bool:
    """Wait until ``sock`` is readable (or writable) or ``timeout_s`` passed; True if ready.

    poll() where the platform has it: select() refuses a descriptor of 1024 or more, which a
    long-running pbs_server with many connections may hand out, and costs more per call.
    """
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN if readable else select.POLLOUT)
        return bool(poller.poll(max(0.0, timeout_s) * 1000.0))
    if readable:
        return bool(select.select([sock], [], [], timeout_s)[0])
    return bool(select.select([], [sock], [], timeout_s)[1])


class PgError(DatabaseError):
    """An ErrorResponse from the server; ``sqlstate`` is its five-character code."""

    def __init__(self, message: str, sqlstate: str = "") -> None:
        DatabaseError.__init__(self, message)
        self.sqlstate = sqlstate


class Timeout(DatabaseError):
    """The deadline passed; the connection is closed."""


def _message(kind: bytes, payload: bytes) -> bytes:
    return kind + _I32.pack(len(payload) + 4) + payload


def _cstr(text: str) -> bytes:
    return text.encode("utf-8") + b"\0"


def _error_fields(payload: bytes) -> Dict[str, str]:
    """The fields of an ErrorResponse or NoticeResponse by their one-letter type.

    :raises ValueError: the list does not end with its terminating zero byte
    """
    if not payload.endswith(b"\0"):
        raise ValueError("unterminated field list")
    fields = {}
    for part in payload.split(b"\0"):
        if part:
            fields[part[:1].decode("ascii", "replace")] = part[1:].decode("utf-8", "replace")
    return fields


# Longest server text kept in an exception: its message ends in the hook's log line.
_MAX_ERROR_TEXT = 1000


def _pg_error(payload: bytes) -> "PgError":
    fields = _error_fields(payload)
    return PgError(fields.get("M", "error")[:_MAX_ERROR_TEXT], fields.get("C", "")[:5])


def _column_oids(payload: bytes) -> List[int]:
    """The type OIDs of a RowDescription's columns (name, table OID, column number, type
    OID, size, modifier, format each)."""
    count = _I16.unpack_from(payload)[0]
    pos, oids = 2, []
    for _ in range(count):
        pos = payload.index(b"\0", pos) + 1
        oids.append(_I32.unpack_from(payload, pos + 6)[0])
        pos += 18
    if pos != len(payload):
        raise ValueError("RowDescription longer or shorter than its columns")
    return oids


# Longest text of an integer column: int8's minimum has 20 characters. Python 3.6 converts
# digits in quadratic time (3.11 caps them at 4300), so a megabyte of digits is refused.
_MAX_INT_TEXT = 20


def _row_values(payload: bytes, oids: List[int]) -> Tuple[Any, ...]:
    """The values of a DataRow, decoded by the column types of its RowDescription."""
    count = _I16.unpack_from(payload)[0]
    pos, values = 2, []  # type: int, List[Any]
    for i in range(count):
        length = _I32.unpack_from(payload, pos)[0]
        pos += 4
        if length < 0:
            values.append(None)
            continue
        if pos + length > len(payload):
            raise ValueError("value beyond the end of the DataRow")
        raw = payload[pos : pos + length]
        pos += length
        oid = oids[i] if i < len(oids) else 25
        if oid in _INT_OIDS:
            if len(raw) > _MAX_INT_TEXT:
                raise ValueError("integer too long")
            values.append(int(raw))
        elif oid in _FLOAT_OIDS:
            values.append(float(raw))
        elif oid == _BOOL_OID:
            values.append(raw == b"t")
        else:
            values.append(raw.decode("utf-8", "replace"))
    if pos != len(payload):
        raise ValueError("DataRow longer than its values")
    return tuple(values)


def _pgpass_field(line: str, pos: int, value: str) -> int:
    """libpq's ``pwdfMatchesString``: where the next field starts if this one matches
    ``value``, else -1. Only a bare ``*`` matches anything; ``\\`` escapes one character."""
    if line.startswith("*:", pos):
        return pos + 2
    i, k = pos, 0
    while i < len(line):
        escaped = line[i] == "\\" and i + 1 < len(line)
        if escaped:
            i += 1
        if line[i] == ":" and not escaped and k == len(value):
            return i + 1
        if k == len(value) or line[i] != value[k]:
            return -1
        i += 1
        k += 1
    return -1


def pgpass_password(
    params: Mapping[str, str], host: str, port: str, environ: Mapping[str, str]
) -> Optional[str]:
    """The password for this connection from the password file, with libpq's rules.

    The file is ``passfile``, else ``$PGPASSFILE``, else ``~/.pgpass``; it is ignored when
    it is not a regular file or group or others may read it. Lines are
    ``host:port:database:user:password``; a field that is exactly ``*`` matches anything;
    ``\\`` escapes the next character; the password ends at the first unescaped ``:``.
    The host field is compared with the host name (or socket directory) as given; only the
    default socket directory (or no host) matches ``localhost`` (libpq's
    ``passwordFromFile``).
    """
    path = params.get("passfile") or environ.get("PGPASSFILE")
    if not path:
        home = environ.get("HOME") or os.path.expanduser("~")
        path = os.path.join(home, ".pgpass")
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077:
            return None
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    if not host or host in DEFAULT_SOCKET_DIRS:
        host = "localhost"
    want = (
        host,
        port or "5432",
        params.get("dbname") or params.get("user") or "",
        params.get("user") or "",
    )
    for line in lines:
        if not line or line.startswith("#"):
            continue
        pos = 0
        for value in want:
            pos = _pgpass_field(line, pos, value)
            if pos < 0:
                break
        if pos < 0:
            continue
        password = []  # type: List[str]
        i = pos
        while i < len(line) and line[i] != ":":
            if line[i] == "\\" and i + 1 < len(line):
                i += 1
            password.append(line[i])
            i += 1
        return "".join(password)
    return None


class Connection:
    """One open connection. Not thread-safe; the hook uses it from one thread."""

    def __init__(self, sock: Any, deadline: float) -> None:
        self._sock = sock
        # The bytes from _pos on are unread. Reading a message moves _pos instead of slicing
        # the rest into a new bytes object, a copy per message: quadratic in a backlog (in a
        # NOTIFY flood 67,634 reads took 10.5 s of 12).
        self._buf = bytearray()
        self._pos = 0
        self.closed = False
        self.parameters = {}  # type: Dict[str, str]
        self.backend_pid = 0
        self._prepared = {}  # type: Dict[str, bytes]
        self._statements = 0
        self._deadline = deadline
        self._messages = 0  # messages other than rows in this round trip (capped)
        self._poller = None  # type: Any  # quiet()'s poll object, made at its first call

    # -- transport ------------------------------------------------------------------
    def _wait(self, readable: bool) -> None:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            self.close()
            raise Timeout("timed out waiting for the database server")
        if not wait_ready(self._sock, readable, remaining):
            self.close()
            raise Timeout("timed out waiting for the database server")

    def _send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = self._sock.send(view)
            except (ssl.SSLWantWriteError, BlockingIOError):
                self._wait(False)
                continue
            except ssl.SSLWantReadError:
                self._wait(True)
                continue
            except OSError as err:
                self.close()
                raise DatabaseError(f"connection lost: {err}") from err
            view = view[sent:]

    def _fill(self) -> None:
        """Receive more bytes, waiting for them until the deadline."""
        if self._pos:
            # What was read goes first (a copy of at most the message being read), so the
            # buffer never holds more than that message and one recv: MAX_BUFFER.
            del self._buf[: self._pos]
            self._pos = 0
        while True:
            pending = isinstance(self._sock, ssl.SSLSocket) and self._sock.pending()
            if not pending:
                self._wait(True)
            try:
                if self._recv():
                    return
            except ssl.SSLWantWriteError:
                self._wait(False)

    def _recv(self) -> bool:
        """One ``recv`` into the buffer; False if there was nothing to read after all.

        :raises ssl.SSLWantWriteError: TLS must write first
        :raises DatabaseError: the connection broke or the server closed it (closed here)
        """
        try:
            chunk = self._sock.recv(RECV_SIZE)
        except (ssl.SSLWantReadError, BlockingIOError):
            return False
        except ssl.SSLWantWriteError:
            raise
        except OSError as err:
            self.close()
            raise DatabaseError(f"connection lost: {err}") from err
        if not chunk:
            self.close()
            raise DatabaseError("server closed the connection unexpectedly")
        self._buf += chunk
        return True

    def _read(self) -> Tuple[bytes, bytes]:
        """The next message, (type, payload), waiting for it until the deadline."""
        while len(self._buf) - self._pos < 5:
            self._fill()
        kind, length = _HDR.unpack_from(self._buf, self._pos)
        if length < 4 or length > MAX_MESSAGE:
            self.close()
            raise DatabaseError(
                f"invalid message from the server (type {kind!r}, length {length}): not PostgreSQL?"
            )
        while len(self._buf) - self._pos < length + 1:
            self._fill()
        start = self._pos
        with memoryview(self._buf) as view:  # one copy; released before the buffer resizes
            payload = view[start + 5 : start + 1 + length].tobytes()
        self._pos = start + 1 + length
        if self._pos > len(self._buf) >> 1:
            # Compacting when half is read keeps the copies linear in what is received.
            del self._buf[: self._pos]
            self._pos = 0
        return kind, payload

    def _counted(self) -> None:
        """Count a message other than a row against the round trip's cap."""
        self._messages += 1
        if self._messages > MAX_MESSAGES_PER_ROUND_TRIP:
            self.close()
            raise DatabaseError(
                f"the server sent more than {MAX_MESSAGES_PER_ROUND_TRIP} messages other than"
                " rows in one round trip (a flood of notices or notifications?): connection"
                " dropped"
            )

    def _asynchronous(self, kind: bytes, payload: bytes) -> bool:
        """Take a message the server may send at any time (notice, notification, parameter
        report); False if ``kind`` is not one. Notices and notifications are dropped."""
        if kind not in _ASYNCHRONOUS:
            return False
        if kind == b"S":
            self._parameter(payload)
        return True

    def _parameter(self, payload: bytes) -> None:
        """A ParameterStatus message: the server's value of a run-time parameter."""
        pair = payload.decode("utf-8", "replace").split("\0")
        if pair[0] in self.parameters or len(self.parameters) < MAX_PARAMETERS:
            self.parameters[pair[0]] = pair[1] if len(pair) > 1 else ""

    def _malformed(self, kind: bytes) -> DatabaseError:
        """The error for a message that does not parse; the connection is closed."""
        self.close()
        name = _MESSAGE_NAMES.get(kind, f"{kind!r}")
        return DatabaseError(f"malformed {name} message from the server")

    def _plain_tcp(self) -> bool:
        """TCP without TLS: what we send crosses the network readable."""
        return self._sock.family != socket.AF_UNIX and not isinstance(self._sock, ssl.SSLSocket)

    def set_deadline(self, deadline: float) -> None:
        """Bound the next operations by ``deadline`` (a ``time.monotonic()`` value)."""
        self._deadline = deadline

    # -- protocol -------------------------------------------------------------------
    def _startup(
        self, params: Mapping[str, str], password: Optional[str], require_auth: str = ""
    ) -> None:
        body = _I32.pack(PROTOCOL_3_0)
        for key, value in params.items():
            body += _cstr(key) + _cstr(value)
        body += b"\0"
        self._send(_I32.pack(len(body) + 4) + body)
        login = _Login(params.get("user", ""), password, require_auth, self._plain_tcp())
        self._messages = 0
        while True:
            kind, payload = self._read()
            self._counted()
            if self._asynchronous(kind, payload):
                continue
            if kind == b"Z":
                return
            try:
                self._startup_message(kind, payload, login)
            except _MALFORMED:
                raise self._malformed(kind) from None
            except DatabaseError:
                self.close()
                raise

    def _startup_message(self, kind: bytes, payload: bytes, login: "_Login") -> None:
        if kind == b"R":
            reply = login.answer(payload)
            if reply:
                self._send(reply)
        elif kind == b"E":
            raise _pg_error(payload)
        elif kind == b"K":
            self.backend_pid = _I32.unpack_from(payload)[0]

    def query(
        self,
        sql: str,
        params: Sequence[Any] = (),
        deadline: Optional[float] = None,
        prepare: bool = False,
    ) -> List[Tuple[Any, ...]]:
        """Run one statement with ``$n`` parameters and return its rows.

        :param params: values sent as text (None is NULL; bool as true/false)
        :param prepare: keep the statement prepared on this connection (parsed once; after
            a few runs PostgreSQL plans it once too): for the hook's repeated lookups
        :param deadline: ``time.monotonic()`` bound for the whole round trip
        :raises PgError: the server reported an error (the connection stays usable)
        :raises DatabaseError: connection lost, deadline passed, a cap exceeded or a message
            malformed (the connection is closed)
        """
        if self.closed:
            raise DatabaseError("connection is closed")
        if deadline is not None:
            self._deadline = deadline
        try:
            return self._query(sql, params, prepare)
        except PgError as err:
            if not (prepare and err.sqlstate in _STALE_STATEMENT):
                raise
        # The prepared statement is gone (DEALLOCATE, a pooler's other session) or its
        # result type changed (ALTER TABLE): prepare it afresh, once, in the time left.
        self._prepared.pop(sql, None)
        return self._query(sql, params, prepare)

    def _query(self, sql: str, params: Sequence[Any], prepare: bool) -> List[Tuple[Any, ...]]:
        name = b""
        parse = b""
        if prepare:
            name = self._prepared.get(sql, b"")
            if not name:
                self._statements += 1  # never reuse a name: a failed run may have kept it
                name = f"swt{self._statements}".encode("ascii")
                parse = _message(b"P", name + b"\0" + _cstr(sql) + _I16.pack(0))
        else:
            parse = _message(b"P", b"\0" + _cstr(sql) + _I16.pack(0))
        self._send(
            parse
            + _message(b"B", _bind(name, params))
            + _message(b"D", b"P\0")
            + _message(b"E", b"\0" + _I32.pack(0))
            + _message(b"S", b"")
        )
        rows, error = self._reply()
        if error is not None:
            if parse and name:
                self._prepared.pop(sql, None)
            raise error
        if parse and name:
            self._prepared[sql] = name
        return rows

    def _reply(self) -> Tuple[List[Tuple[Any, ...]], Optional[PgError]]:
        """Read one statement's reply up to ReadyForQuery: its rows and its error if any."""
        self._messages = 0
        oids = []  # type: List[int]
        rows = []  # type: List[Tuple[Any, ...]]
        error = None  # type: Optional[PgError]
        count = size = 0
        while True:
            kind, payload = self._read()
            if kind == b"D":
                count += 1
                size += len(payload)
                if count > MAX_ROWS or size > MAX_RESULT_BYTES:
                    self.close()
                    raise DatabaseError(
                        f"the result exceeds {MAX_ROWS} rows or {MAX_RESULT_BYTES} bytes:"
                        " connection dropped"
                    )
            else:
                self._counted()
                if self._asynchronous(kind, payload):
                    continue
                if kind == b"Z":
                    return rows, error
            try:
                if kind == b"D" and error is None:
                    rows.append(_row_values(payload, oids))
                elif kind == b"T":
                    oids = _column_oids(payload)
                elif kind == b"E":
                    error = _pg_error(payload)
            except _MALFORMED:
                raise self._malformed(kind) from None

    def quiet(self) -> bool:
        """True if nothing arrived since the last complete reply: no byte buffered, none
        decrypted and waiting inside TLS, and one ``poll(0)`` finds the socket not readable.

        Never reads, never waits, never raises; False for a closed connection. Whatever came
        (a notice, a notification, the FATAL of a terminated backend, a server streaming)
        would be read by the next query against its cap; the hook asks at every event and
        opens a new connection instead. The poll object is made once per connection.
        """
        if self.closed:
            return False
        if self._pos < len(self._buf):
            return False
        try:
            if isinstance(self._sock, ssl.SSLSocket) and self._sock.pending():
                return False  # decrypted bytes the socket no longer shows
            if self._poller is None and hasattr(select, "poll"):
                self._poller = select.poll()
                self._poller.register(self._sock, select.POLLIN)
            if self._poller is not None:
                return not self._poller.poll(0)  # POLLHUP and POLLERR count too
            return not wait_ready(self._sock, True, 0.0)
        except (OSError, ValueError):  # ValueError: the socket was closed under us
            return False

    def close(self) -> None:
        """Say goodbye (best effort) and close the socket; never raises."""
        if self.closed:
            return
        self.closed = True
        self._buf = bytearray()  # a dropped backlog goes now, not with the object
        self._pos = 0
        try:
            self._sock.setblocking(False)
            self._sock.send(_message(b"X", b""))
        except Exception:  # noqa: BLE001 - closing a broken connection must never raise
            pass
        try:
            self._sock.close()
        except Exception:  # noqa: BLE001
            pass


def _bind(name: bytes, params: Sequence[Any]) -> bytes:
    """A Bind message's payload: the unnamed portal, statement ``name``, text parameters."""
    bind = b"\0" + name + b"\0" + _I16.pack(0) + _I16.pack(len(params))
    for value in params:
        if value is None:
            bind += _I32.pack(-1)
            continue
        if isinstance(value, bool):
            text = b"true" if value else b"false"
        else:
            text = str(value).encode("utf-8")
        bind += _I32.pack(len(text)) + text
    return bind + _I16.pack(0)


class _Login:
    """The client's side of authentication: what to answer to each request of the server."""

    def __init__(
        self, user: str, password: Optional[str], require_auth: str, plain_tcp: bool
    ) -> None:
        self._user = user
        self._password = password
        self._require = require_auth
        self._plain_tcp = plain_tcp
        self._scram = None  # type: Optional[_Scram]
        self._asked = False  # the server asked for some authentication

    def answer(self, payload: bytes) -> bytes:
        """The message to send for an AuthenticationRequest (``b""``: nothing to send).

        :raises DatabaseError: a method refused, unsupported, or no password to give
        :raises ValueError: (or another of ``_MALFORMED``) the request is malformed
        """
        code = _I32.unpack_from(payload)[0]
        self._check_required(code)
        if code == 0:
            if self._scram is not None and not self._scram.verified:
                # a server that skips the proof has not shown it knows the password
                raise DatabaseError("SCRAM: the server ended the exchange unverified")
            return b""
        if code in (3, 5, 10) and self._password is None:
            raise DatabaseError("the server asks for a password and none was given")
        if code == 3:
            return self._cleartext()
        if code == 5:
            return self._md5(payload[4:])
        if code == 10:
            return self._sasl(payload[4:])
        if code == 11 and self._scram is not None:
            return _message(b"p", self._scram.client_final(payload[4:]))
        if code == 12 and self._scram is not None:
            self._scram.verify_server(payload[4:])
            return b""
        method = _AUTH_NAMES.get(code, f"code {code}")
        raise DatabaseError(
            f"unsupported authentication method {method} (this client does "
            "trust, password, md5 and scram-sha-256)"
        )

    def _check_required(self, code: int) -> None:
        """``require_auth``: what the server asks for (or "none" if it lets us in at once)."""
        method = {3: "password", 5: "md5", 10: "scram-sha-256"}.get(code)
        if code == 0 and not self._asked:
            method = "none"
        if self._require and method and not _auth_allowed(self._require, method):
            raise DatabaseError(
                f'authentication method requirement "{self._require}" failed:'
                f" the server asks for {method}"
            )
        self._asked = True

    def _cleartext(self) -> bytes:
        # Anyone on the path (or a server spoofed under the default sslmode=prefer) would
        # read the password: over TCP without TLS only when the DSN names the method.
        if self._plain_tcp and not _auth_named(self._require, "password"):
            raise DatabaseError(
                "the server asks for the password in clear text over TCP without TLS: refused"
                " (use TLS, e.g. sslmode=verify-full, or allow it with require_auth=password)"
            )
        return _message(b"p", _cstr(self._password or ""))

    def _md5(self, salt: bytes) -> bytes:
        if len(salt) != 4:
            raise ValueError("MD5 salt is not 4 bytes")
        inner = hashlib.md5((self._password or "").encode() + self._user.encode()).hexdigest()
        outer = hashlib.md5(inner.encode("ascii") + salt).hexdigest()
        return _message(b"p", _cstr("md5" + outer))

    def _sasl(self, payload: bytes) -> bytes:
        if self._scram is not None:
            raise DatabaseError("SCRAM: the server started the exchange twice")
        mechanisms = payload.split(b"\0")
        if b"SCRAM-SHA-256" not in mechanisms:
            offered = b", ".join(m for m in mechanisms if m).decode("ascii", "replace")
            raise DatabaseError(f"the server offers no supported SASL mechanism ({offered[:200]})")
        self._scram = _Scram(self._password or "")
        first = self._scram.client_first()
        return _message(b"p", _cstr("SCRAM-SHA-256") + _I32.pack(len(first)) + first)


def _scram_iterations(text: str) -> int:
    """The server's SCRAM iteration count, refused beyond MAX_SCRAM_ITERATIONS before any
    hashing (and before converting a long digit string, quadratic on Python 3.6).

    :raises ValueError: not a positive decimal number
    :raises DatabaseError: more than the cap
    """
    digits = text.lstrip("0")
    if not text.isdigit() or not digits:  # text is ASCII: isdigit means 0-9 only
        raise ValueError("iteration count not a positive number")
    if len(digits) > len(str(MAX_SCRAM_ITERATIONS)) or int(digits) > MAX_SCRAM_ITERATIONS:
        raise DatabaseError(
            f"SCRAM: the server asks for {digits[:20]} iterations, more than the"
            f" {MAX_SCRAM_ITERATIONS} this client computes (PostgreSQL's default is 4096): refused"
        )
    return int(digits)


class _Scram:
    """SCRAM-SHA-256 (RFC 5802, RFC 7677) without channel binding, as PostgreSQL uses it."""

    def __init__(self, password: str) -> None:
        self._password = saslprep(password).encode("utf-8")
        self._nonce = base64.b64encode(os.urandom(18)).decode("ascii")
        self._first_bare = "n=,r=" + self._nonce
        self._auth_message = b""
        self._salted = b""
        self.verified = False

    def client_first(self) -> bytes:
        return ("n,," + self._first_bare).encode("ascii")

    def client_final(self, server_first: bytes) -> bytes:
        """The client-final message; ``server_first`` is checked whole before any hashing.

        :raises ValueError: (or binascii.Error, UnicodeDecodeError) malformed
        :raises DatabaseError: wrong nonce, too many iterations, out of order
        """
        if self._salted:
            raise DatabaseError("SCRAM: the server sent its first message twice")
        text = server_first.decode("ascii")
        attrs = dict(item.split("=", 1) for item in text.split(","))
        server_nonce = attrs.get("r", "")
        if not server_nonce.startswith(self._nonce) or len(server_nonce) <= len(self._nonce):
            raise DatabaseError("SCRAM: the server's nonce does not extend ours")
        iterations = _scram_iterations(attrs.get("i", ""))
        salt = base64.b64decode(attrs.get("s", ""), validate=True)
        if not salt:
            raise ValueError("no salt")
        self._salted = hashlib.pbkdf2_hmac("sha256", self._password, salt, iterations)
        client_key = hmac.new(self._salted, b"Client Key", hashlib.sha256).digest()
        stored_key = hashlib.sha256(client_key).digest()
        without_proof = "c=biws,r=" + server_nonce
        self._auth_message = ",".join((self._first_bare, text, without_proof)).encode("ascii")
        signature = hmac.new(stored_key, self._auth_message, hashlib.sha256).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return (without_proof + ",p=" + base64.b64encode(proof).decode("ascii")).encode("ascii")

    def verify_server(self, server_final: bytes) -> None:
        text = server_final.decode("ascii")
        if text.startswith("e="):
            raise DatabaseError(f"SCRAM: the server reports {text[2:200]!r}")
        if not text.startswith("v=") or not self._salted:
            raise DatabaseError("SCRAM: unexpected final message from the server")
        server_key = hmac.new(self._salted, b"Server Key", hashlib.sha256).digest()
        expected = hmac.new(server_key, self._auth_message, hashlib.sha256).digest()
        if not hmac.compare_digest(base64.b64decode(text[2:], validate=True), expected):
            raise DatabaseError("SCRAM: the server's signature does not match")
        self.verified = True


def saslprep(password: str) -> str:
    """The password as PostgreSQL hashes it for SCRAM: SASLprep (RFC 4013), else unchanged.

    The server prepares the password with SASLprep when it computes the SCRAM secret and
    uses it as given when that fails (prohibited characters, bad bidirectional text), as
    libpq's ``pg_saslprep`` does on the client side; so must we.
    """
    if all(ord(ch) < 128 for ch in password):
        return password  # ASCII: used as is (pg_saslprep's first rule)
    chars = []  # type: List[str]
    for ch in password:
        if stringprep.in_table_c12(ch):
            chars.append(" ")  # non-ASCII space -> space
        elif not stringprep.in_table_b1(ch):  # "commonly mapped to nothing" -> removed
            chars.append(ch)
    text = unicodedata.normalize("NFKC", "".join(chars))
    if not text:
        return password
    prohibited = (
        stringprep.in_table_c12,
        stringprep.in_table_c21_c22,
        stringprep.in_table_c3,
        stringprep.in_table_c4,
        stringprep.in_table_c5,
        stringprep.in_table_c6,
        stringprep.in_table_c7,
        stringprep.in_table_c8,
        stringprep.in_table_c9,
        stringprep.in_table_a1,
    )
    for ch in text:
        if any(table(ch) for table in prohibited):
            return password
    rand_al = [stringprep.in_table_d1(ch) for ch in text]
    if any(rand_al):
        if any(stringprep.in_table_d2(ch) for ch in text):
            return password
        if not (rand_al[0] and rand_al[-1]):
            return password
    return text


def _share(now: float, deadline: float, left: int) -> float:
    """The deadline of one of ``left`` attempts still to make before ``deadline``: a fair
    part of the time left, so that one that hangs cannot starve the others, and one that
    fails fast gives its time to those after it."""
    return now + max(0.0, deadline - now) / max(1, left)


# The name resolver: socket.getaddrinfo, run in a daemon thread so that an event waits for
# it only until its deadline (a silent DNS server blocks getaddrinfo 5 s per nameserver and
# try). Tests put a resolver that never answers here.
GETADDRINFO = socket.getaddrinfo


class _Resolution:
    """One ``GETADDRINFO(host, port)`` running in a daemon thread; ``result`` or ``error``
    once it is done. An event that stops waiting leaves it running, in ``STATE.resolving``."""

    def __init__(self, host: str, port: int) -> None:
        self.result = None  # type: Optional[List[Tuple[int, Any]]]
        self.error = None  # type: Optional[BaseException]
        self.thread = threading.Thread(
            target=self._run, args=(GETADDRINFO, host, port), name="softwalltime-resolve"
        )
        self.thread.daemon = True
        self.thread.start()

    def _run(self, getaddrinfo: Any, host: str, port: int) -> None:
        try:
            infos = getaddrinfo(host, port, 0, socket.SOCK_STREAM)
            self.result = [(info[0], info[4]) for info in infos]
        except Exception as err:  # noqa: BLE001  (handed to the event that waits)
            self.error = err


def _numeric(host: str, port: int) -> Optional[List[Tuple[int, Any]]]:
    """The address of a numeric host (no resolver asked), else None."""
    try:
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError):
        return None
    return [(info[0], info[4]) for info in infos]


def _resolve(host: str, port: int, deadline: float) -> List[Tuple[int, Any]]:
    """The addresses of ``host`` by ``deadline``: a numeric host at once; a name from the
    resolver, in a daemon thread this event waits on until the deadline (half of the time
    left when an earlier answer is kept, which is then used if it is late or fails).

    :raises DatabaseError: the resolver did not answer in time and no answer is kept
    :raises OSError: it failed (unknown name...) and no answer is kept
    """
    numeric = _numeric(host, port)
    if numeric:
        return numeric
    key = (host, port)
    known = STATE.addresses.get(key)
    resolution = STATE.resolving.get(key)
    if resolution is None:  # else: the one a silent resolver still holds, not another
        resolution = STATE.resolving[key] = _Resolution(host, port)
    wait = max(0.0, deadline - time.monotonic())
    resolution.thread.join(wait / 2 if known else wait)
    if resolution.thread.is_alive():
        if known:
            return known
        raise DatabaseError(
            f"timed out resolving {host} after {wait:.1f} s (the DNS server does not"
            " answer; a numeric host or a unix socket in the DSN needs none)"
        )
    del STATE.resolving[key]
    if resolution.result:
        STATE.addresses[key] = resolution.result
        return resolution.result
    if known:
        return known
    raise resolution.error or OSError(f"no address for {host}")


def _open_socket(host: str, port: int, deadline: float) -> Any:
    """A connected non-blocking socket to a unix socket directory or a TCP host.

    The addresses of a name (IPv6 and IPv4, say) share ``deadline`` as hosts do: a blackholed
    first address does not keep the next one from being tried.
    """
    targets = []  # type: List[Tuple[Any, Any]]
    if host.startswith("/"):
        targets.append((socket.AF_UNIX, os.path.join(host, f".s.PGSQL.{port}")))
    else:
        targets = _resolve(host, port, deadline)
    last = None  # type: Optional[BaseException]
    for index, (family, address) in enumerate(targets):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            _connect_socket(sock, address, _share(time.monotonic(), deadline, len(targets) - index))
            if family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as err:
            sock.close()
            last = err
        except Timeout:
            sock.close()
            last = Timeout(f"timed out connecting to {_where(host, port)}")
    if isinstance(last, DatabaseError):
        raise last
    reason = getattr(last, "strerror", None) or last
    raise DatabaseError(f"cannot connect to {_where(host, port)}: {reason}")


def _connect_socket(sock: Any, address: Any, deadline: float) -> None:
    """Connect a non-blocking socket by ``deadline``.

    :raises OSError: refused, unreachable...
    :raises Timeout: not connected in time
    """
    code = sock.connect_ex(address)
    if code not in (0, errno.EINPROGRESS, errno.EAGAIN):
        raise OSError(code, os.strerror(code))
    if code:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not wait_ready(sock, False, remaining):
            raise Timeout("timed out connecting")
        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            raise OSError(code, os.strerror(code))


def _where(host: str, port: int) -> str:
    if host.startswith("/"):
        return f"socket {host}/.s.PGSQL.{port}"
    return f"{host}:{port}"


def _tls(sock: Any, params: Mapping[str, str], server_name: str, deadline: float) -> Any:
    """Ask for TLS; returns the wrapped socket, or the plain one if refused and allowed."""
    mode = params.get("sslmode") or "prefer"
    if mode in ("disable", "allow"):
        return sock
    if not _server_accepts_tls(sock, deadline):
        if mode == "prefer":
            return sock
        raise DatabaseError(f"the server does not support TLS (sslmode={mode})")
    context = _tls_context(params, mode)
    wrapped = context.wrap_socket(
        sock, server_hostname=server_name or None, do_handshake_on_connect=False
    )
    while True:
        try:
            wrapped.do_handshake()
            return wrapped
        except ssl.SSLWantReadError:
            Connection(wrapped, deadline)._wait(True)
        except ssl.SSLWantWriteError:
            Connection(wrapped, deadline)._wait(False)


def _server_accepts_tls(sock: Any, deadline: float) -> bool:
    """Send an SSLRequest; True if the server answers S (go ahead), False if N."""
    conn = Connection(sock, deadline)
    conn._send(_I32.pack(8) + _I32.pack(SSL_REQUEST_CODE))
    conn._fill()
    answer = bytes(conn._buf[:1])
    if answer not in (b"S", b"N"):
        raise DatabaseError("invalid answer to the TLS request: not PostgreSQL?")
    if len(conn._buf) > 1:
        # bytes sent before the handshake were not encrypted: someone in the middle may
        # have injected them (CVE-2021-23222); libpq refuses too
        raise DatabaseError("received unencrypted data after the TLS response")
    return answer == b"S"


def _tls_context(params: Mapping[str, str], mode: str) -> ssl.SSLContext:
    """The TLS settings of ``sslmode`` and the root certificates, by libpq's rules.

    The roots are ``sslrootcert``, else ``~/.postgresql/root.crt``; when that file exists
    even ``sslmode=require`` verifies the chain. ``system`` means the system's roots, and
    then the host name is always checked (libpq 16+; :func:`_checked` has made sslmode
    verify-full already): anyone can get a certificate from a public CA for a name of
    their own, so a chain alone proves nothing.
    """
    rootcert = params.get("sslrootcert") or os.path.expanduser("~/.postgresql/root.crt")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    if rootcert == "system":
        context.load_default_certs()
        mode = "verify-full"
    elif os.path.exists(rootcert):
        context.load_verify_locations(cafile=rootcert)
    elif mode in ("verify-ca", "verify-full"):
        raise DatabaseError(
            f"root certificate file {rootcert!r} does not exist (sslmode={mode}): give "
            "sslrootcert, sslrootcert=system, or a weaker sslmode"
        )
    else:
        context.verify_mode = ssl.CERT_NONE
    context.check_hostname = mode == "verify-full"
    if params.get("sslcert"):
        context.load_cert_chain(params["sslcert"], params.get("sslkey") or None)
    return context


# libpq 17's connection keywords (PQconninfoOptions). Those this client does not act on are
# accepted when their value asks for nothing it would have to do (see _checked).
KEYWORDS = frozenset(
    "host hostaddr port dbname user password passfile require_auth channel_binding "
    "connect_timeout client_encoding options application_name fallback_application_name "
    "keepalives keepalives_idle keepalives_interval keepalives_count tcp_user_timeout "
    "replication sslmode sslnegotiation sslcompression sslcert sslkey sslcertmode "
    "sslpassword sslrootcert sslcrl sslcrldir sslsni requiressl requirepeer "
    "ssl_min_protocol_version ssl_max_protocol_version gssencmode krbsrvname gsslib "
    "gssdelegation service target_session_attrs load_balance_hosts".split()
)
SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
AUTH_METHODS = ("password", "md5", "scram-sha-256", "gss", "sspi", "none")


def _checked(parsed: Mapping[str, str]) -> Dict[str, str]:
    """The DSN's keywords, refused as libpq refuses them, or where ignoring them would be
    unsafe: an unknown keyword (a typo such as ``sslmdoe=require`` must not quietly connect
    without TLS), a bad ``sslmode``, and requirements this client cannot meet
    (``channel_binding=require``, ``gssencmode=require``, ``sslnegotiation=direct``,
    ``replication``, ``service``). ``requiressl=1`` means ``sslmode=require``, as in libpq;
    ``sslrootcert=system`` means ``sslmode=verify-full`` and refuses a weaker one (libpq 16+).
    """
    params = dict(parsed)
    for key in params:
        if key not in KEYWORDS:
            raise DatabaseError(f'invalid connection option "{key}"')
    if params.get("requiressl") == "1" and not params.get("sslmode"):
        params["sslmode"] = "require"
    if params.get("sslmode") and params["sslmode"] not in SSLMODES:
        raise DatabaseError(f'invalid sslmode value: "{params["sslmode"]}"')
    if params.get("sslrootcert") == "system":
        # libpq 16+ (connectOptions2): the system's roots make verify-full the default and
        # any weaker sslmode an error, so prefer cannot fall back to plaintext either
        if not params.get("sslmode"):
            params["sslmode"] = "verify-full"
        elif params["sslmode"] != "verify-full":
            raise DatabaseError(
                f'weak sslmode "{params["sslmode"]}" may not be used with sslrootcert=system'
                ' (use "verify-full")'
            )
    for key, allowed in (
        ("channel_binding", ("", "disable", "prefer")),
        ("gssencmode", ("", "disable", "prefer")),
        ("sslnegotiation", ("", "postgres")),
        ("replication", ("",)),
        ("service", ("",)),
    ):
        if params.get(key, "") not in allowed:
            raise DatabaseError(f"{key}={params[key]} is not supported by this client")
    if params.get("require_auth"):
        _auth_rule(params["require_auth"])  # check the syntax now
    return params


def _int_param(params: Mapping[str, str], key: str) -> int:
    """An integer keyword as libpq's ``parse_int_param`` reads it (0 when absent)."""
    text = (params.get(key) or "").strip()
    if not text:
        return 0
    try:
        return int(text, 10)
    except ValueError:
        raise DatabaseError(
            f'invalid integer value "{params[key]}" for connection option "{key}"'
        ) from None


def _auth_rule(text: str) -> Tuple[bool, List[str]]:
    """``require_auth``: (negated, methods). ``!md5,!password`` forbids, ``scram-sha-256``
    allows only that."""
    methods = [m.strip() for m in text.split(",")]
    negated = methods[0].startswith("!")
    for method in methods:
        if method.startswith("!") != negated or method.lstrip("!") not in AUTH_METHODS:
            raise DatabaseError(f'invalid require_auth value: "{text}"')
    return negated, [m.lstrip("!") for m in methods]


def _auth_allowed(rule: str, method: str) -> bool:
    negated, methods = _auth_rule(rule)
    return (method in methods) != negated


def _auth_named(rule: str, method: str) -> bool:
    """Whether ``require_auth`` allows ``method`` by naming it (``!md5`` allows ``password``
    only by omission: not enough to send a password in clear)."""
    if not rule:
        return False
    negated, methods = _auth_rule(rule)
    return not negated and method in methods


def _startup_parameters(params: Mapping[str, str], extra: Mapping[str, str]) -> Dict[str, str]:
    """The startup packet's parameters: the DSN's, then ``extra``.

    ``client_encoding`` is always UTF8 (we encode and decode UTF-8 whatever the database's
    encoding). ``options`` of both are joined, so the caller's ``-c`` settings add to the
    DSN's instead of dropping them (the last ``-c`` for a setting wins in the server).
    """
    out = {"user": params["user"], "database": params.get("dbname") or params["user"]}
    for key in ("options", "application_name"):
        if params.get(key):
            out[key] = params[key]
    for key, value in extra.items():
        if key == "options" and out.get("options"):
            out["options"] = out["options"] + " " + value
        else:
            out[key] = value
    out["client_encoding"] = "UTF8"
    return out


def connect(
    dsn: str,
    deadline: float,
    startup: Optional[Mapping[str, str]] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> Connection:
    """Open a connection, trying each host of the DSN in turn until ``deadline``.

    The hosts share the time: each attempt may take the time left divided by the hosts not
    yet tried (the hosts of the DSN's list; the addresses of one name share that host's part
    the same way), so a host that accepts and never answers leaves time to the next, and a
    host that fails at once gives its part to those after it. A ``connect_timeout`` bounds
    each host further (at least 2 s, as libpq rounds it).

    :param dsn: any form :mod:`.dsn` parses
    :param deadline: ``time.monotonic()`` value bounding everything (connect, TLS, login)
    :param startup: extra startup parameters (``options``, ``application_name``)
    :param environ: where ``PGHOST``, ``PGPORT``, ``PGUSER``, ``PGDATABASE``,
        ``PGSSLMODE``, ``PGPASSWORD``, ``PGPASSFILE`` and ``HOME`` come from; the hook
        passes ``{}``
    :raises PgError: the last host refused us (``sqlstate`` says why: 28P01 wrong
        password, 3D000 no such database...)
    :raises DatabaseError: every host failed; the message never contains a secret
    """
    env = {} if environ is None else environ
    params = _connection_params(dsn, env)
    names = (params.get("host") or "").split(",")
    per_host = _int_param(params, "connect_timeout")
    pairs = dsnlib.host_port_pairs(params)
    errors = []  # type: List[str]
    last = None  # type: Optional[BaseException]
    for index, (host, port_text) in enumerate(pairs):
        host = host or "localhost"
        port = int(port_text or 5432)
        name = names[index] if index < len(names) and names[index] else host
        # libpq: an empty password counts as none, and then the password file is read
        password = params.get("password") or env.get("PGPASSWORD") or None
        if password is None:
            password = pgpass_password(params, name, str(port), env)
        host_deadline = _host_deadline(time.monotonic(), deadline, len(pairs) - index, per_host)
        try:
            conn = _connect_host(params, host, port, name, password, startup, host_deadline)
        except (OSError, DatabaseError, ValueError) as err:
            errors.append("{}: {}".format(_where(host, port), " ".join(str(err).split())))
            last = err
            if time.monotonic() >= deadline:
                break
            continue
        conn.set_deadline(deadline)
        return conn
    message = "; ".join(errors) or "no host to connect to"
    if isinstance(last, PgError):
        # the server's own refusal (authentication, unknown database...): keep its SQLSTATE
        raise PgError(message, last.sqlstate)
    raise DatabaseError(message)


def _connection_params(dsn: str, env: Mapping[str, str]) -> Dict[str, str]:
    """The DSN's keywords with the environment's defaults, checked, user and host filled."""
    params = dict(dsnlib.parse(dsn))
    for key, var in (
        ("host", "PGHOST"),
        ("port", "PGPORT"),
        ("user", "PGUSER"),
        ("dbname", "PGDATABASE"),
        ("sslmode", "PGSSLMODE"),
    ):
        if not params.get(key) and env.get(var):
            params[key] = env[var]
    params = _checked(params)
    if not params.get("user"):
        # libpq: the effective uid's name, never $USER or $LOGNAME
        params["user"] = pwd.getpwuid(os.geteuid()).pw_name
    if not params.get("host") and not params.get("hostaddr"):
        found = [d for d in DEFAULT_SOCKET_DIRS if os.path.isdir(d)]
        params["host"] = found[0] if found else "localhost"
    return params


def _host_deadline(now: float, deadline: float, hosts_left: int, connect_timeout: int) -> float:
    """When the attempt on one host must end: its fair part of the time left (see
    :func:`connect`), and no later than libpq's ``connect_timeout`` (at least 2 s) if given.
    """
    end = _share(now, deadline, hosts_left)
    if connect_timeout > 0:
        end = min(end, now + max(connect_timeout, 2))
    return end


def _tls_modes(host: str, mode: str) -> List[str]:
    """The sslmodes to try in turn, as libpq does: prefer tries TLS, then without it if the
    server refuses the TLS session; allow tries without, then with TLS. A unix socket never
    uses TLS."""
    if host.startswith("/"):
        return ["disable"]
    if mode == "prefer":
        return ["prefer", "disable"]
    if mode == "allow":
        return ["disable", "require"]
    return [mode]


def _connect_host(
    params: Mapping[str, str],
    host: str,
    port: int,
    server_name: str,
    password: Optional[str],
    startup: Optional[Mapping[str, str]],
    deadline: float,
) -> Connection:
    """A connection to one host of the list, logged in, by ``deadline``.

    :raises PgError: the server refused us
    :raises DatabaseError, OSError, ValueError: it could not be reached or understood
    """
    modes = _tls_modes(host, params.get("sslmode") or "prefer")
    for attempt, tls_mode in enumerate(modes):
        sock = None
        try:
            sock = _open_socket(host, port, deadline)
            sock = _tls(sock, dict(params, sslmode=tls_mode), server_name, deadline)
            conn = Connection(sock, deadline)
            conn._startup(
                _startup_parameters(params, startup or {}), password, params.get("require_auth", "")
            )
            return conn
        except (OSError, DatabaseError, ValueError) as err:
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
            retry = (
                isinstance(err, PgError)
                and attempt + 1 < len(modes)
                and (tls_mode != "prefer" or isinstance(sock, ssl.SSLSocket))
                and time.monotonic() < deadline
            )
            if not retry:
                raise
            # the server refused this session: try the other way
    raise DatabaseError("no TLS mode to try")  # not reached: modes is never empty
