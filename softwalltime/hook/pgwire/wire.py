"""The protocol 3.0 framing, the caps on what the server chooses, result decoding, and
:class:`Connection`: every wait a ``poll()`` against one deadline.

Hook path: Python 3.6+ syntax, standard library only.
"""

import binascii
import select
import socket
import ssl
import struct
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...errors import DatabaseError

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
    def _startup(self, params: Mapping[str, str], login: Any) -> None:
        """Send the startup packet and log in: ``login`` (an :class:`.auth.Login` made for
        this connection) answers each authentication request."""
        body = _I32.pack(PROTOCOL_3_0)
        for key, value in params.items():
            body += _cstr(key) + _cstr(value)
        body += b"\0"
        self._send(_I32.pack(len(body) + 4) + body)
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

    def _startup_message(self, kind: bytes, payload: bytes, login: Any) -> None:
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
