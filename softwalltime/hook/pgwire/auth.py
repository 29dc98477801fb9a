"""Authentication: trust, cleartext password, MD5 and SCRAM-SHA-256 (SASLprep, no channel
binding) with ``require_auth``, and the password file (``~/.pgpass``) by libpq's rules.

Hook path: Python 3.6+ syntax, standard library only.
"""

import base64
import hashlib
import hmac
import os
import stat
import stringprep
import unicodedata
from typing import List, Mapping, Optional  # noqa: F401  (List: type comments)

from ...errors import DatabaseError
from .dsn import _auth_allowed, _auth_named
from .wire import _AUTH_NAMES, _I32, DEFAULT_SOCKET_DIRS, MAX_SCRAM_ITERATIONS, _cstr, _message


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


class Login:
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
