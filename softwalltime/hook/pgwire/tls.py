"""TLS by ``sslmode`` with the standard ``ssl`` module: the SSLRequest, the handshake against
the deadline, libpq's root-certificate rules and its fallbacks between modes.

Hook path: Python 3.6+ syntax, standard library only.
"""

import os
import ssl
from typing import Any, List, Mapping

from ...errors import DatabaseError
from .wire import _I32, SSL_REQUEST_CODE, Connection


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
