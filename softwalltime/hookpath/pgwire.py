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
* Every wait (TCP connect, TLS handshake, authentication, query) is one ``select()``
  against a single wall-clock deadline. A socket-timeout driver bounds each read, not the
  whole event, and libpq's ``connect_timeout`` takes whole seconds (at least 2 before 17).

It implements what the hook needs and nothing more: unix-socket and TCP connections
(host lists tried in order), TLS by ``sslmode`` (disable, allow, prefer, require,
verify-ca, verify-full) with the standard ``ssl`` module, trust / password / MD5 /
SCRAM-SHA-256 authentication, ``~/.pgpass``, and parameterized queries through the
extended protocol with text parameters (``$1``, ``$2``...). Results are decoded for
integers, floats, booleans and text; other types come back as text.

Hook path: Python 3.6+ syntax, standard library only.
"""

import base64
import errno
import getpass
import hashlib
import hmac
import os
import select
import socket
import ssl
import struct
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import DatabaseError
from . import dsn as dsnlib

PROTOCOL_3_0 = 196608
SSL_REQUEST_CODE = 80877103
DEFAULT_SOCKET_DIRS = ("/var/run/postgresql", "/tmp")
# SQLSTATE of a statement cancelled by statement_timeout: the connection stays usable.
QUERY_CANCELED = "57014"

_INT_OIDS = frozenset((20, 21, 23, 26, 28))  # int8 int2 int4 oid xid
_FLOAT_OIDS = frozenset((700, 701))
_BOOL_OID = 16

_I32 = struct.Struct("!i")
_I16 = struct.Struct("!h")
_HDR = struct.Struct("!ci")


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


def pgpass_password(
    params: Mapping[str, str], host: str, port: str, environ: Mapping[str, str]
) -> Optional[str]:
    """The password for this connection from the password file, with libpq's rules.

    The file is ``passfile``, else ``$PGPASSFILE``, else ``~/.pgpass``; it is ignored when
    group or others may read it. Lines are ``host:port:database:user:password``, ``*``
    matches anything, ``\\`` escapes ``:`` and ``\\``; a socket directory matches
    ``localhost``, as in libpq.
    """
    path = params.get("passfile") or environ.get("PGPASSFILE")
    if not path:
        home = environ.get("HOME") or os.path.expanduser("~")
        path = os.path.join(home, ".pgpass")
    try:
        st = os.stat(path)
        if st.st_mode & 0o077:
            return None
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    want = [
        "localhost" if (not host or host.startswith("/")) else host,
        port,
        params.get("dbname") or params.get("user") or "",
        params.get("user") or "",
    ]
    for line in lines:
        if not line or line.startswith("#"):
            continue
        fields = []  # type: List[str]
        field = []  # type: List[str]
        escaped = False
        for ch in line:
            if escaped:
                field.append(ch)
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == ":" and len(fields) < 4:
                fields.append("".join(field))
                field = []
            else:
                field.append(ch)
        fields.append("".join(field))
        if len(fields) == 5 and all(f in ("*", w) for f, w in zip(fields[:4], want)):
            return fields[4]
    return None


class Connection:
    """One open connection. Not thread-safe; the hook uses it from one thread."""

    def __init__(self, sock: Any, deadline: float) -> None:
        self._sock = sock
        self._buf = b""
        self.closed = False
        self.parameters = {}  # type: Dict[str, str]
        self.backend_pid = 0
        self._deadline = deadline

    # -- transport ------------------------------------------------------------------
    def _wait(self, readable: bool) -> None:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            self.close()
            raise Timeout("timed out waiting for the database server")
        if readable:
            ready = select.select([self._sock], [], [], remaining)[0]
        else:
            ready = select.select([], [self._sock], [], remaining)[1]
        if not ready:
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
                chunk = self._sock.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                continue
            except ssl.SSLWantWriteError:
                self._wait(False)
                continue
            except OSError as err:
                self.close()
                raise DatabaseError(f"connection lost: {err}") from err
            if not chunk:
                self.close()
                raise DatabaseError("server closed the connection unexpectedly")
            self._buf += chunk
            return

    def _read(self) -> Tuple[bytes, bytes]:
        while len(self._buf) < 5:
            self._fill()
        kind, length = _HDR.unpack_from(self._buf)
        while len(self._buf) < length + 1:
            self._fill()
        payload = self._buf[5 : length + 1]
        self._buf = self._buf[length + 1 :]
        return kind, payload

    def set_deadline(self, deadline: float) -> None:
        """Bound the next operations by ``deadline`` (a ``time.monotonic()`` value)."""
        self._deadline = deadline

    # -- protocol -------------------------------------------------------------------
    def _startup(self, params: Mapping[str, str], password: Optional[str]) -> None:
        body = _I32.pack(PROTOCOL_3_0)
        for key, value in params.items():
            body += _cstr(key) + _cstr(value)
        body += b"\0"
        self._send(_I32.pack(len(body) + 4) + body)
        user = params.get("user", "")
        scram = None  # type: Optional[_Scram]
        while True:
            kind, payload = self._read()
            if kind == b"R":
                code = _I32.unpack_from(payload)[0]
                if code == 0:
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
                    raise DatabaseError(f"unsupported authentication method (code {code})")
            elif kind == b"S":
                pair = payload.decode("utf-8", "replace").split("\0")
                self.parameters[pair[0]] = pair[1] if len(pair) > 1 else ""
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
        self, sql: str, params: Sequence[Any] = (), deadline: Optional[float] = None
    ) -> List[Tuple[Any, ...]]:
        """Run one statement with ``$n`` parameters and return its rows.

        :param params: values sent as text (None is NULL; bool as true/false)
        :param deadline: ``time.monotonic()`` bound for the whole round trip
        :raises PgError: the server reported an error (the connection stays usable)
        :raises DatabaseError: connection lost or deadline passed (the connection is closed)
        """
        if self.closed:
            raise DatabaseError("connection is closed")
        if deadline is not None:
            self._deadline = deadline
        bind = b"\0\0" + _I16.pack(0) + _I16.pack(len(params))
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
            _message(b"P", b"\0" + _cstr(sql) + _I16.pack(0))
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
        if error is not None:
            raise error
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


class _Scram:
    """SCRAM-SHA-256 (RFC 5802, RFC 7677) without channel binding, as PostgreSQL uses it."""

    def __init__(self, password: str) -> None:
        self._password = password.encode("utf-8")
        self._nonce = base64.b64encode(os.urandom(18)).decode("ascii")
        self._first_bare = "n=,r=" + self._nonce
        self._auth_message = b""
        self._salted = b""

    def client_first(self) -> bytes:
        return ("n,," + self._first_bare).encode("ascii")

    def client_final(self, server_first: bytes) -> bytes:
        attrs = dict(item.split("=", 1) for item in server_first.decode("ascii").split(","))
        if not attrs.get("r", "").startswith(self._nonce):
            raise DatabaseError("SCRAM: the server's nonce does not extend ours")
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
        if not text.startswith("v="):
            raise DatabaseError("SCRAM: unexpected final message from the server")
        server_key = hmac.new(self._salted, b"Server Key", hashlib.sha256).digest()
        expected = hmac.new(server_key, self._auth_message, hashlib.sha256).digest()
        if not hmac.compare_digest(base64.b64decode(text[2:]), expected):
            raise DatabaseError("SCRAM: the server's signature does not match")


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
                if remaining <= 0 or not select.select([], [sock], [], remaining)[1]:
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
    if answer != b"S":
        if mode == "prefer":
            return sock
        raise DatabaseError(f"the server does not support TLS (sslmode={mode})")
    if mode in ("verify-ca", "verify-full"):
        context = ssl.create_default_context(cafile=params.get("sslrootcert") or None)
        context.check_hostname = mode == "verify-full"
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
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
    if not params.get("user"):
        params["user"] = getpass.getuser()
    hosts = params.get("host") or ""
    if not hosts and not params.get("hostaddr"):
        found = [d for d in DEFAULT_SOCKET_DIRS if os.path.isdir(d)]
        params["host"] = found[0] if found else "localhost"
    names = (params.get("host") or "").split(",")
    errors = []
    for index, (host, port_text) in enumerate(dsnlib.host_port_pairs(params)):
        host = host or "localhost"
        port = int(port_text or 5432)
        server_name = names[index] if index < len(names) else host
        password = params.get("password")
        if password is None:
            password = env.get("PGPASSWORD")
        if password is None:
            password = pgpass_password(params, server_name, str(port), env)
        sock = None
        try:
            sock = _open_socket(host, port, deadline)
            if not host.startswith("/"):
                sock = _tls(sock, params, server_name, deadline)
            conn = Connection(sock, deadline)
            startup_params = {"user": params["user"], "database": params.get("dbname") or ""}
            if not startup_params["database"]:
                startup_params["database"] = params["user"]
            for key in ("options", "application_name"):
                if params.get(key):
                    startup_params[key] = params[key]
            startup_params.update(startup or {})
            conn._startup(startup_params, password)
            return conn
        except (OSError, DatabaseError, ValueError) as err:
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
            errors.append("{}: {}".format(_where(host, port), " ".join(str(err).split())))
            if time.monotonic() >= deadline:
                break
    raise DatabaseError("; ".join(errors) or "no host to connect to")
