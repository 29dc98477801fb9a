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
(host lists tried in order, ``connect_timeout`` per host), TLS by ``sslmode`` (disable,
allow, prefer, require, verify-ca, verify-full, with libpq's fallbacks and root-certificate
rules) with the standard ``ssl`` module, trust / password / MD5 / SCRAM-SHA-256 (SASLprep,
no channel binding) authentication, ``require_auth``, ``~/.pgpass`` / ``passfile`` with
libpq's matching rules, and parameterized queries through the extended protocol with text
parameters (``$1``, ``$2``...). Results are decoded for integers, floats, booleans and text;
other types come back as text. The session's client_encoding is always UTF8. Notifications
of channels the session LISTENs to are counted, also while idle, read without waiting
(:meth:`Connection.notifications`).

Where it differs from libpq it refuses rather than ignores: unknown keywords (a typo in
``sslmode`` must not quietly connect without TLS), ``channel_binding=require``,
``gssencmode=require``, ``sslnegotiation=direct``, ``service``, ``replication``.
Accepted but not acted on: keepalives, ``target_session_attrs``, ``load_balance_hosts``,
CRLs, ``sslsni``, TLS protocol bounds (the ``ssl`` module's defaults apply).
tests/test_pgwire.py checks it against a real server.

Hook path: Python 3.6+ syntax, standard library only.
"""

import base64
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
import time
import unicodedata
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import DatabaseError
from . import dsn as dsnlib

PROTOCOL_3_0 = 196608
SSL_REQUEST_CODE = 80877103
DEFAULT_SOCKET_DIRS = ("/var/run/postgresql", "/tmp")
# SQLSTATE of a statement cancelled by statement_timeout: the connection stays usable.
QUERY_CANCELED = "57014"

# Longest message accepted from the server (a hook's rows are tiny; garbage is not).
MAX_MESSAGE = 64 * 1024 * 1024
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
    fields = {}
    for part in payload.split(b"\0"):
        if part:
            fields[part[:1].decode("ascii", "replace")] = part[1:].decode("utf-8", "replace")
    return fields


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
        self._buf = b""
        self.closed = False
        self.parameters = {}  # type: Dict[str, str]
        self.backend_pid = 0
        self._prepared = {}  # type: Dict[str, bytes]
        self._statements = 0
        self._deadline = deadline
        self._notified = 0  # NotificationResponses (LISTEN) not yet reported
        self._idle_poll = None  # type: Optional[_Idle]  # for notifications()

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
            chunk = self._sock.recv(65536)
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
        while len(self._buf) < 5:
            self._fill()
        kind, length = _HDR.unpack_from(self._buf)
        if length < 4 or length > MAX_MESSAGE:
            self.close()
            raise DatabaseError(
                f"invalid message from the server (type {kind!r}, length {length}): not PostgreSQL?"
            )
        while len(self._buf) < length + 1:
            self._fill()
        payload = self._buf[5 : length + 1]
        self._buf = self._buf[length + 1 :]
        return kind, payload

    def _parameter(self, payload: bytes) -> None:
        """A ParameterStatus message: the server's value of a run-time parameter."""
        pair = payload.decode("utf-8", "replace").split("\0")
        self.parameters[pair[0]] = pair[1] if len(pair) > 1 else ""

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
        user = params.get("user", "")
        scram = None  # type: Optional[_Scram]
        asked = False  # the server asked for some authentication
        while True:
            kind, payload = self._read()
            if kind == b"R":
                code = _I32.unpack_from(payload)[0]
                # require_auth: what the server asks for (or "none" if it lets us in at once)
                method = {3: "password", 5: "md5", 10: "scram-sha-256"}.get(code)
                if code == 0 and not asked:
                    method = "none"
                if require_auth and method and not _auth_allowed(require_auth, method):
                    raise DatabaseError(
                        f'authentication method requirement "{require_auth}" failed:'
                        f" the server asks for {method}"
                    )
                asked = True
                if code == 0:
                    if scram is not None and not scram.verified:
                        # a server that skips the proof has not shown it knows the password
                        raise DatabaseError("SCRAM: the server ended the exchange unverified")
                    continue
                if code in (3, 5, 10) and password is None:
                    raise DatabaseError("the server asks for a password and none was given")
                if code == 3:
                    self._send(_message(b"p", _cstr(password or "")))
                elif code == 5:
                    inner = hashlib.md5((password or "").encode() + user.encode()).hexdigest()
                    outer = hashlib.md5(inner.encode("ascii") + payload[4:8]).hexdigest()
                    self._send(_message(b"p", _cstr("md5" + outer)))
                elif code == 10:
                    mechanisms = payload[4:].split(b"\0")
                    if b"SCRAM-SHA-256" not in mechanisms:
                        raise DatabaseError(
                            "the server offers no supported SASL mechanism ({})".format(
                                b", ".join(m for m in mechanisms if m).decode("ascii", "replace")
                            )
                        )
                    scram = _Scram(password or "")
                    first = scram.client_first()
                    self._send(
                        _message(b"p", _cstr("SCRAM-SHA-256") + _I32.pack(len(first)) + first)
                    )
                elif code == 11 and scram is not None:
                    self._send(_message(b"p", scram.client_final(payload[4:])))
                elif code == 12 and scram is not None:
                    scram.verify_server(payload[4:])
                else:
                    method = _AUTH_NAMES.get(code, f"code {code}")
                    raise DatabaseError(
                        f"unsupported authentication method {method} (this client does "
                        "trust, password, md5 and scram-sha-256)"
                    )
            elif kind == b"S":
                self._parameter(payload)
            elif kind == b"E":
                fields = _error_fields(payload)
                self.close()
                raise PgError(fields.get("M", "error"), fields.get("C", ""))
            elif kind == b"K":
                self.backend_pid = _I32.unpack_from(payload)[0]
            elif kind == b"Z":
                return
            # N (notice): nothing to do

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
        :raises DatabaseError: connection lost or deadline passed (the connection is closed)
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
        bind += _I16.pack(0)
        self._send(
            parse
            + _message(b"B", bind)
            + _message(b"D", b"P\0")
            + _message(b"E", b"\0" + _I32.pack(0))
            + _message(b"S", b"")
        )
        oids = []  # type: List[int]
        rows = []  # type: List[Tuple[Any, ...]]
        error = None  # type: Optional[PgError]
        while True:
            kind, payload = self._read()
            if kind == b"D":
                if error is None:
                    rows.append(self._row(payload, oids))
            elif kind == b"T":
                oids = self._oids(payload)
            elif kind == b"E":
                fields = _error_fields(payload)
                error = PgError(fields.get("M", "error"), fields.get("C", ""))
            elif kind == b"Z":
                break
            elif kind == b"A":
                self._notified += 1  # a NOTIFY that arrived before this statement's reply
        if error is not None:
            if parse and name:
                self._prepared.pop(sql, None)
            raise error
        if parse and name:
            self._prepared[sql] = name
        return rows

    @staticmethod
    def _oids(payload: bytes) -> List[int]:
        count = _I16.unpack_from(payload)[0]
        pos, oids = 2, []
        for _ in range(count):
            pos = payload.index(b"\0", pos) + 1
            oids.append(_I32.unpack_from(payload, pos + 6)[0])
            pos += 18
        return oids

    @staticmethod
    def _row(payload: bytes, oids: List[int]) -> Tuple[Any, ...]:
        count = _I16.unpack_from(payload)[0]
        pos, values = 2, []  # type: int, List[Any]
        for i in range(count):
            length = _I32.unpack_from(payload, pos)[0]
            pos += 4
            if length < 0:
                values.append(None)
                continue
            raw = payload[pos : pos + length]
            pos += length
            oid = oids[i] if i < len(oids) else 25
            if oid in _INT_OIDS:
                values.append(int(raw))
            elif oid in _FLOAT_OIDS:
                values.append(float(raw))
            elif oid == _BOOL_OID:
                values.append(raw == b"t")
            else:
                values.append(raw.decode("utf-8", "replace"))
        return tuple(values)

    def notifications(self) -> int:
        """The NOTIFY messages (of channels this session LISTENs to) received since the last
        call, reading what the server sent while the connection was idle without waiting.

        :raises DatabaseError: the server closed the connection or ended the session with an
            error while it was idle (the connection is closed)
        """
        if self.closed:
            raise DatabaseError("connection is closed")
        poller = self._idle_poll
        if poller is None:
            poller = self._idle_poll = _Idle(self._sock)
        while poller.readable():  # the usual case: nothing came, one poll
            try:
                if not self._recv():
                    break
            except ssl.SSLWantWriteError:
                break
        while len(self._buf) >= 5 and len(self._buf) > _HDR.unpack_from(self._buf)[1]:
            kind, payload = self._read()  # a whole message is buffered: no wait
            if kind == b"A":
                self._notified += 1
            elif kind == b"S":
                self._parameter(payload)
            elif kind == b"E":  # e.g. FATAL: terminating connection due to administrator command
                fields = _error_fields(payload)
                self.close()
                raise PgError(fields.get("M", "error"), fields.get("C", ""))
            # N (notice): nothing to do
        count, self._notified = self._notified, 0
        return count

    def close(self) -> None:
        """Say goodbye (best effort) and close the socket; never raises."""
        if self.closed:
            return
        self.closed = True
        try:
            self._sock.setblocking(False)
            self._sock.send(_message(b"X", b""))
        except Exception:  # noqa: BLE001 - closing a broken connection must never raise
            pass
        try:
            self._sock.close()
        except Exception:  # noqa: BLE001
            pass


class _Idle:
    """Whether a socket has something to read now, without waiting (a poll object made once:
    the hook asks at every event)."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._tls = isinstance(sock, ssl.SSLSocket)
        self._poll = None  # type: Any
        if hasattr(select, "poll"):
            self._poll = select.poll()
            self._poll.register(sock, select.POLLIN)

    def readable(self) -> bool:
        if self._tls and self._sock.pending():  # decrypted bytes the socket no longer shows
            return True
        if self._poll is not None:
            return bool(self._poll.poll(0))
        return wait_ready(self._sock, True, 0.0)


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
        attrs = dict(item.split("=", 1) for item in server_first.decode("ascii").split(","))
        server_nonce = attrs.get("r", "")
        if not server_nonce.startswith(self._nonce) or len(server_nonce) <= len(self._nonce):
            raise DatabaseError("SCRAM: the server's nonce does not extend ours")
        if not attrs.get("s") or not attrs.get("i", "").isdigit() or int(attrs["i"]) < 1:
            raise DatabaseError("SCRAM: malformed first message from the server")
        self._salted = hashlib.pbkdf2_hmac(
            "sha256", self._password, base64.b64decode(attrs["s"]), int(attrs["i"])
        )
        client_key = hmac.new(self._salted, b"Client Key", hashlib.sha256).digest()
        stored_key = hashlib.sha256(client_key).digest()
        without_proof = "c=biws,r=" + attrs["r"]
        self._auth_message = ",".join(
            (self._first_bare, server_first.decode("ascii"), without_proof)
        ).encode("ascii")
        signature = hmac.new(stored_key, self._auth_message, hashlib.sha256).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return (without_proof + ",p=" + base64.b64encode(proof).decode("ascii")).encode("ascii")

    def verify_server(self, server_final: bytes) -> None:
        text = server_final.decode("ascii")
        if text.startswith("e="):
            raise DatabaseError(f"SCRAM: the server reports {text[2:]!r}")
        if not text.startswith("v="):
            raise DatabaseError("SCRAM: unexpected final message from the server")
        server_key = hmac.new(self._salted, b"Server Key", hashlib.sha256).digest()
        expected = hmac.new(server_key, self._auth_message, hashlib.sha256).digest()
        if not hmac.compare_digest(base64.b64decode(text[2:]), expected):
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


def _open_socket(host: str, port: int, deadline: float) -> Any:
    """A connected non-blocking socket to a unix socket directory or a TCP host."""
    targets = []  # type: List[Tuple[Any, Any]]
    if host.startswith("/"):
        targets.append((socket.AF_UNIX, os.path.join(host, f".s.PGSQL.{port}")))
    else:
        for info in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
            targets.append((info[0], info[4]))
    last = None  # type: Optional[BaseException]
    for family, address in targets:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            code = sock.connect_ex(address)
            if code not in (0, errno.EINPROGRESS, errno.EAGAIN):
                raise OSError(code, os.strerror(code))
            if code:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not wait_ready(sock, False, remaining):
                    raise Timeout(f"timed out connecting to {_where(host, port)}")
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    raise OSError(code, os.strerror(code))
            if not host.startswith("/"):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except (OSError, DatabaseError) as err:
            sock.close()
            last = err
            if isinstance(err, Timeout):
                break
    if isinstance(last, DatabaseError):
        raise last
    reason = getattr(last, "strerror", None) or last
    raise DatabaseError(f"cannot connect to {_where(host, port)}: {reason}")


def _where(host: str, port: int) -> str:
    if host.startswith("/"):
        return f"socket {host}/.s.PGSQL.{port}"
    return f"{host}:{port}"


def _tls(sock: Any, params: Mapping[str, str], server_name: str, deadline: float) -> Any:
    """Ask for TLS; returns the wrapped socket, or the plain one if refused and allowed."""
    mode = params.get("sslmode") or "prefer"
    if mode in ("disable", "allow"):
        return sock
    conn = Connection(sock, deadline)
    conn._send(_I32.pack(8) + _I32.pack(SSL_REQUEST_CODE))
    while not conn._buf:
        conn._fill()
    answer = conn._buf[:1]
    if answer not in (b"S", b"N"):
        raise DatabaseError("invalid answer to the TLS request: not PostgreSQL?")
    if len(conn._buf) > 1:
        # bytes sent before the handshake were not encrypted: someone in the middle may
        # have injected them (CVE-2021-23222); libpq refuses too
        raise DatabaseError("received unencrypted data after the TLS response")
    if answer == b"N":
        if mode == "prefer":
            return sock
        raise DatabaseError(f"the server does not support TLS (sslmode={mode})")
    # libpq: the root certificates are sslrootcert, else ~/.postgresql/root.crt; "system"
    # means the system's; when the file exists even sslmode=require verifies the chain.
    rootcert = params.get("sslrootcert") or os.path.expanduser("~/.postgresql/root.crt")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    if rootcert == "system":
        context.load_default_certs()
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
    ``replication``, ``service``). ``requiressl=1`` means ``sslmode=require``, as in libpq.
    """
    params = dict(parsed)
    for key in params:
        if key not in KEYWORDS:
            raise DatabaseError(f'invalid connection option "{key}"')
    if params.get("requiressl") == "1" and not params.get("sslmode"):
        params["sslmode"] = "require"
    if params.get("sslmode") and params["sslmode"] not in SSLMODES:
        raise DatabaseError(f'invalid sslmode value: "{params["sslmode"]}"')
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

    :param dsn: any form :mod:`.dsn` parses
    :param deadline: ``time.monotonic()`` value bounding everything (connect, TLS, login)
    :param startup: extra startup parameters (``options``, ``application_name``)
    :param environ: where ``PGHOST``, ``PGPORT``, ``PGUSER``, ``PGDATABASE``,
        ``PGPASSWORD``, ``PGPASSFILE`` and ``HOME`` come from; the hook passes ``{}``
    :raises PgError: the last host refused us (``sqlstate`` says why: 28P01 wrong
        password, 3D000 no such database...)
    :raises DatabaseError: every host failed; the message never contains a secret
    """
    env = {} if environ is None else environ
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
    hosts = params.get("host") or ""
    if not hosts and not params.get("hostaddr"):
        found = [d for d in DEFAULT_SOCKET_DIRS if os.path.isdir(d)]
        params["host"] = found[0] if found else "localhost"
    names = (params.get("host") or "").split(",")
    per_host = _int_param(params, "connect_timeout")
    errors = []
    last = None  # type: Optional[BaseException]
    for index, (host, port_text) in enumerate(dsnlib.host_port_pairs(params)):
        host = host or "localhost"
        port = int(port_text or 5432)
        server_name = names[index] if index < len(names) else host
        # libpq: an empty password counts as none, and then the password file is read
        password = params.get("password") or env.get("PGPASSWORD") or None
        if password is None:
            pass_host = names[index] if index < len(names) and names[index] else host
            password = pgpass_password(params, pass_host, str(port), env)
        # libpq: sslmode=prefer tries TLS, then without it if the server refuses the TLS
        # session; allow tries without, then with TLS. A unix socket never uses TLS.
        mode = params.get("sslmode") or "prefer"
        modes = [mode]
        if host.startswith("/"):
            modes = ["disable"]
        elif mode == "prefer":
            modes = ["prefer", "disable"]
        elif mode == "allow":
            modes = ["disable", "require"]
        # libpq's connect_timeout bounds each host (at least 2 s), within our deadline
        host_deadline = deadline
        if per_host > 0:
            host_deadline = min(deadline, time.monotonic() + max(per_host, 2))
        for attempt, tls_mode in enumerate(modes):
            sock = None
            try:
                sock = _open_socket(host, port, host_deadline)
                sock = _tls(sock, dict(params, sslmode=tls_mode), server_name, host_deadline)
                conn = Connection(sock, host_deadline)
                conn._startup(
                    _startup_parameters(params, startup or {}),
                    password,
                    params.get("require_auth", ""),
                )
                conn.set_deadline(deadline)
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
                )
                if retry and time.monotonic() < deadline:
                    continue  # the server refused this session: try the other way
                errors.append("{}: {}".format(_where(host, port), " ".join(str(err).split())))
                last = err
                break
        if time.monotonic() >= deadline:
            break
    message = "; ".join(errors) or "no host to connect to"
    if isinstance(last, PgError):
        # the server's own refusal (authentication, unknown database...): keep its SQLSTATE
        raise PgError(message, last.sqlstate)
    raise DatabaseError(message)
