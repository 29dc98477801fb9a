"""A small PostgreSQL client in pure Python (protocol 3.0) for the PBS hook.

Why not psycopg2 or another driver on the hook path:

* pbs_server finalizes and re-initializes its embedded Python every
  ``python_restart_max_hooks`` hook runs (100 by default). psycopg2's C extension cannot
  be imported again in the same process after that ("cannot import name 'encodings' from
  'psycopg2._psycopg'"), so every job after the first restart went unpredicted. Pure
  Python modules import again like any other.
* Nothing is compiled, so nothing must match the Python that pbs_server embeds (3.6 on
  EL8, 3.9 on EL9, 3.11 on Debian 12); pg8000, the pure-Python driver, needs Python 3.9+
  (its current releases) and two more packages, so it cannot serve EL8.
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

The modules, by job: :mod:`.wire` (framing, the caps, decoding, :class:`Connection`),
:mod:`.auth` (SCRAM, MD5, cleartext, ``require_auth``, the password file), :mod:`.dns`
(resolution in daemon threads, sockets, the shared deadline), :mod:`.tls` (``sslmode``) and
:mod:`.dsn` (keyword checks and defaults); this module connects with them and re-exports
their names (``pgwire.connect``, ``pgwire.Connection``, ``pgwire.PgError``...).

Hook path: Python 3.6+ syntax, standard library only.
"""

import hashlib  # noqa: F401  (pgwire.hashlib: tests count SCRAM's pbkdf2_hmac calls)
import socket
import ssl
import time
from typing import List, Mapping, Optional  # noqa: F401  (List: type comments)

from ...core import dsn as dsnlib
from ...errors import DatabaseError
from .auth import Login as Login
from .auth import _scram_iterations as _scram_iterations
from .auth import pgpass_password as pgpass_password
from .auth import saslprep as saslprep
from .dns import _open_socket as _open_socket
from .dns import _resolve as _resolve
from .dns import _share as _share
from .dns import _where as _where
from .dsn import AUTH_METHODS as AUTH_METHODS
from .dsn import KEYWORDS as KEYWORDS
from .dsn import SSLMODES as SSLMODES
from .dsn import _checked as _checked
from .dsn import _connection_params as _connection_params
from .dsn import _int_param as _int_param
from .dsn import _startup_parameters as _startup_parameters
from .tls import _tls as _tls
from .tls import _tls_context as _tls_context
from .tls import _tls_modes as _tls_modes
from .wire import DEFAULT_SOCKET_DIRS as DEFAULT_SOCKET_DIRS
from .wire import MAX_BUFFER as MAX_BUFFER
from .wire import MAX_MESSAGE as MAX_MESSAGE
from .wire import MAX_MESSAGES_PER_ROUND_TRIP as MAX_MESSAGES_PER_ROUND_TRIP
from .wire import MAX_PARAMETERS as MAX_PARAMETERS
from .wire import MAX_RESULT_BYTES as MAX_RESULT_BYTES
from .wire import MAX_ROWS as MAX_ROWS
from .wire import MAX_SCRAM_ITERATIONS as MAX_SCRAM_ITERATIONS
from .wire import QUERY_CANCELED as QUERY_CANCELED
from .wire import Connection as Connection
from .wire import PgError as PgError
from .wire import Timeout as Timeout
from .wire import wait_ready as wait_ready

# The name resolver the daemon threads of .dns run (read there at each resolution): tests
# put one that never answers here.
GETADDRINFO = socket.getaddrinfo


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


def _host_deadline(now: float, deadline: float, hosts_left: int, connect_timeout: int) -> float:
    """When the attempt on one host must end: its fair part of the time left (see
    :func:`connect`), and no later than libpq's ``connect_timeout`` (at least 2 s) if given.
    """
    end = _share(now, deadline, hosts_left)
    if connect_timeout > 0:
        end = min(end, now + max(connect_timeout, 2))
    return end


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
            parameters = _startup_parameters(params, startup or {})
            required = params.get("require_auth", "")
            login = Login(parameters["user"], password, required, conn._plain_tcp())
            conn._startup(parameters, login)
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
