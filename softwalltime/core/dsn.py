"""PostgreSQL connection strings parsed the way libpq parses them, and printed without secrets.

libpq accepts two forms, and SQLAlchemy adds a third:

* URIs, ``postgresql://`` or ``postgres://``: ``user[:password]@host[:port][,host[:port]...]
  [/dbname][?key=value&...]``. The user information runs up to the first ``@`` that comes
  before any ``/`` (libpq's ``conninfo_uri_parse_options``), so an unencoded ``?`` or ``#``
  in a password belongs to the password (``postgresql://u:Pa?ss#w0rd@host/db``). User,
  password, hosts, ports, the database name and query values are percent-decoded. A host
  may be a bracketed IPv6 address or a percent-encoded socket directory (``%2Ftmp``).
* keyword/value strings: ``host=db dbname=pbs password='a b\\'c'``, with single quotes and
  backslash escapes (``conninfo_parse``).
* SQLAlchemy URLs, ``postgresql+psycopg2://...``: a URI with a driver name.

:func:`parse` returns the keywords; :func:`redact` renders the DSN again in its own form
with every secret replaced by ``***`` (it is rebuilt from the parse, so nothing the parse
did not understand can leak); :func:`describe` gives ``user@host:port/dbname``.

Hook path: Python 3.6+ syntax, standard library only.
"""

import re
from typing import Dict, List, Optional, Tuple
from urllib.parse import quote, unquote

from ..errors import ConfigError

_URI_RE = re.compile(r"^(postgres(?:ql)?)(\+[A-Za-z0-9_]+)?://", re.IGNORECASE)
MASK = "***"


def is_secret(key: str) -> bool:
    """``password``, ``sslpassword`` and any other keyword that names a password."""
    return "password" in key.lower()


def _decode(text: str, what: str) -> str:
    if re.search(r"%(?![0-9A-Fa-f]{2})", text):
        raise ConfigError(f"invalid percent-encoded token in the {what} of the DSN")
    return unquote(text, errors="strict")


class Parsed:
    """A parsed DSN: its form (``uri`` or ``kv``), the keywords, and for URIs the scheme."""

    def __init__(self, form: str, params: Dict[str, str], scheme: str = "") -> None:
        self.form = form
        self.params = params
        self.scheme = scheme


def _parse_uri(dsn: str) -> Parsed:
    m = _URI_RE.match(dsn)
    assert m is not None
    scheme = m.group(0)[:-3]
    rest = dsn[m.end() :]
    params = {}  # type: Dict[str, str]

    # user information: up to the first '@' before any '/', as libpq does
    at = -1
    for i, ch in enumerate(rest):
        if ch == "/":
            break
        if ch == "@":
            at = i
            break
    if at >= 0:
        userinfo, rest = rest[:at], rest[at + 1 :]
        user, colon, password = userinfo.partition(":")
        if user:
            params["user"] = _decode(user, "user name")
        if colon and password:
            params["password"] = _decode(password, "password")

    # host[:port] list, up to '/' or '?'
    hosts = []  # type: List[str]
    ports = []  # type: List[str]
    while True:
        if rest.startswith("["):
            end = rest.find("]")
            if end < 0:
                raise ConfigError("end of string reached when looking for matching ']' in the DSN")
            host, rest = rest[1:end], rest[end + 1 :]
        else:
            m2 = re.match(r"[^:/?,]*", rest)
            assert m2 is not None
            host, rest = _decode(m2.group(0), "host"), rest[m2.end() :]
        port = ""
        if rest.startswith(":"):
            m3 = re.match(r"[^/?,]*", rest[1:])
            assert m3 is not None
            port, rest = _decode(m3.group(0), "port"), rest[1 + m3.end() :]
        hosts.append(host)
        ports.append(port)
        if rest.startswith(","):
            rest = rest[1:]
            continue
        break
    if any(hosts):
        params["host"] = ",".join(hosts)
    if any(ports):
        params["port"] = ",".join(ports)

    if rest.startswith("/"):
        dbname, sep, query = rest[1:].partition("?")
        if dbname:
            params["dbname"] = _decode(dbname, "database name")
        rest = "?" + query if sep else ""
    if rest.startswith("?"):
        for item in rest[1:].split("&"):
            if not item:
                continue
            key, eq, value = item.partition("=")
            if not eq:
                raise ConfigError("missing key/value separator '=' in the DSN's query string")
            key = _decode(key, "query string")
            value = _decode(value, "query string")
            if key == "ssl" and value == "true":  # libpq's JDBC-compatible spelling
                key, value = "sslmode", "require"
            params[key] = value
    elif rest:
        raise ConfigError(f"unexpected text {rest[:1]!r} in the DSN")
    return Parsed("uri", params, scheme)


def _parse_kv(dsn: str) -> Parsed:
    params = {}  # type: Dict[str, str]
    i, n = 0, len(dsn)
    while True:
        while i < n and dsn[i].isspace():
            i += 1
        if i >= n:
            break
        start = i
        while i < n and dsn[i] != "=" and not dsn[i].isspace():
            i += 1
        key = dsn[start:i]
        while i < n and dsn[i].isspace():
            i += 1
        if i >= n or dsn[i] != "=":
            raise ConfigError(f'missing "=" after {key!r} in the DSN')
        i += 1
        while i < n and dsn[i].isspace():
            i += 1
        value = []  # type: List[str]
        if i < n and dsn[i] == "'":
            i += 1
            while True:
                if i >= n:
                    raise ConfigError("unterminated quoted string in the DSN")
                ch = dsn[i]
                if ch == "\\" and i + 1 < n:
                    value.append(dsn[i + 1])
                    i += 2
                elif ch == "'":
                    i += 1
                    break
                else:
                    value.append(ch)
                    i += 1
        else:
            while i < n and not dsn[i].isspace():
                if dsn[i] == "\\" and i + 1 < n:
                    value.append(dsn[i + 1])
                    i += 2
                else:
                    value.append(dsn[i])
                    i += 1
        params[key] = "".join(value)
    return Parsed("kv", params)


def parse_full(dsn: str) -> Parsed:
    """Parse a DSN of any form.

    :raises ConfigError: the DSN is malformed (the message never contains its text)
    """
    dsn = dsn.strip()
    if _URI_RE.match(dsn):
        return _parse_uri(dsn)
    if "://" in dsn.split("=", 1)[0]:
        raise ConfigError("not a PostgreSQL DSN (expected postgresql://... or key=value pairs)")
    return _parse_kv(dsn)


def parse(dsn: str) -> Dict[str, str]:
    """The keywords of a DSN, as libpq would read them (``user``, ``host``, ``port``, ...)."""
    return parse_full(dsn).params


def _kv_value(value: str) -> str:
    if value and not re.search(r"[\s'\\]", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def redact(dsn: Optional[str]) -> str:
    """The DSN in its own form with every secret replaced by ``***``: safe to print or log.

    A DSN that does not parse is not echoed at all.
    """
    if not dsn:
        return "(none)"
    try:
        parsed = parse_full(dsn)
    except ConfigError:
        return "(unparsable DSN)"
    params = dict(parsed.params)
    for key in params:
        if is_secret(key):
            params[key] = MASK
    if parsed.form == "kv":
        return " ".join(f"{k}={_kv_value(v)}" for k, v in params.items())
    safe = "!$&'()*+,;=-._~"  # keep readable characters that are not URI delimiters here
    text = parsed.scheme + "://"
    if "user" in params or "password" in params:
        text += quote(params.pop("user", ""), safe=safe.replace("@", ""))
        if "password" in params:
            text += ":" + params.pop("password")
        text += "@"
    if params.get("host", "").startswith("/") and "," not in params["host"]:
        # a socket directory reads better as ?host=/dir than percent-encoded
        params["host"] = params.pop("host")
    hosts = [] if params.get("host", "").startswith("/") else params.pop("host", "").split(",")
    ports = [] if hosts == [] else params.pop("port", "").split(",")
    netlocs = []
    for i in range(max(len(hosts), len(ports))):
        host = hosts[i] if i < len(hosts) else ""
        port = ports[i] if i < len(ports) else ""
        if ":" in host and not host.startswith("/"):
            host = "[" + host + "]"
        else:
            host = quote(host, safe=safe)
        netlocs.append(host + (":" + quote(port, safe="") if port else ""))
    text += ",".join(netlocs)
    if "dbname" in params:
        text += "/" + quote(params.pop("dbname"), safe=safe)
    if params:
        text += "?" + "&".join(
            "{}={}".format(quote(k, safe=""), v if v == MASK else quote(v, safe="/:,"))
            for k, v in params.items()
        )
    return text


def describe(dsn: Optional[str]) -> str:
    """``user@host:port/dbname`` of a DSN, never a secret (for one-line errors)."""
    if not dsn:
        return "(none)"
    try:
        params = parse(dsn)
    except ConfigError:
        return "(unparsable DSN)"
    where = params.get("host") or params.get("hostaddr") or "local socket"
    text = where + (":" + params["port"] if params.get("port") else "")
    if params.get("user"):
        text = params["user"] + "@" + text
    if params.get("dbname"):
        text += "/" + params["dbname"]
    return text


def host_port_pairs(params: Dict[str, str]) -> List[Tuple[str, str]]:
    """The (host, port) list of parsed keywords, with libpq's pairing rules.

    One port applies to every host; otherwise the lists must have the same length.
    ``hostaddr``, when given, replaces the host names (the names stay for TLS checks).

    :raises ConfigError: host and port lists of different lengths
    """
    hosts = (params.get("hostaddr") or params.get("host") or "").split(",")
    ports = (params.get("port") or "").split(",")
    if len(ports) == 1:
        ports = ports * len(hosts)
    if len(ports) != len(hosts):
        raise ConfigError(f"the DSN gives {len(hosts)} hosts but {len(ports)} ports")
    return list(zip(hosts, ports))


def scrub(text: str, dsn: Optional[str]) -> str:
    """``text`` (an error message, say) with every secret of ``dsn`` replaced by ``***``.

    For messages that may echo parts of a connection string back (libpq can).
    """
    if not dsn:
        return text
    try:
        secrets = [v for k, v in parse(dsn).items() if is_secret(k) and v]
    except ConfigError:
        return text.replace(dsn, "(DSN)")
    for secret in sorted(secrets, key=len, reverse=True):
        for form in (secret, quote(secret, safe="")):
            text = text.replace(form, MASK)
    return text
