"""The connection keywords: libpq's list, the checks that refuse what would be unsafe to
ignore (``sslmode``, ``require_auth``...), the environment's defaults, the startup packet's
parameters.

Hook path: Python 3.6+ syntax, standard library only.
"""

import os
import pwd
from typing import Dict, List, Mapping, Tuple

from ...core import dsn as dsnlib
from ...errors import DatabaseError
from .wire import DEFAULT_SOCKET_DIRS

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
