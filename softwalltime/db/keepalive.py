"""TCP keepalives for the long-lived database sessions of the ingester and the CLI.

A session over TCP whose server or network dies without a word (a host powered off, a
firewall that drops an idle flow, a partitioned network) is not noticed by the client
until TCP gives up: with Linux's defaults, 2 hours of silence before the first keepalive
probe, and about 15 minutes of retransmission for data in flight. An ingester stuck that
way holds the ingest lock on a session nobody serves, and every later run exits with
"another ingest is running". libpq can tune both per connection; these are the defaults
added to a DSN that does not set them (the DSN's own values, and a ``service`` of
pg_service.conf, win):

========================  ==========  ==============================================
keepalives                1           probe an idle connection (libpq's default too)
keepalives_idle           60          seconds of silence before the first probe
keepalives_interval       10          seconds between unanswered probes
keepalives_count          6           unanswered probes before the connection is dead
tcp_user_timeout          120000      ms that sent data may stay unacknowledged
========================  ==========  ==============================================

So a dead peer is noticed within about 2 minutes (60 + 6 x 10 s idle; 120 s with data in
flight), and the command ends with a one-line database error. Unix-domain sockets ignore
them. Not on the hook path: the hook bounds every wait by its own deadline (pgwire).
"""

from __future__ import annotations

from typing import Dict

from ..core.config import libpq_dsn

KEEPALIVES: Dict[str, str] = {
    "keepalives": "1",
    "keepalives_idle": "60",
    "keepalives_interval": "10",
    "keepalives_count": "6",
    "tcp_user_timeout": "120000",
}


def with_keepalives(dsn: str) -> str:
    """``dsn`` as a libpq connection string with :data:`KEEPALIVES` for the keys it does not
    set; unchanged when it names a ``service`` (pg_service.conf may set them) or cannot be
    parsed (connecting then reports the error)."""
    import psycopg2
    import psycopg2.extensions

    libpq = libpq_dsn(dsn)
    try:
        given = psycopg2.extensions.parse_dsn(libpq)
    except psycopg2.ProgrammingError:
        return libpq
    if "service" in given:
        return libpq
    missing = {k: v for k, v in KEEPALIVES.items() if k not in given}
    return psycopg2.extensions.make_dsn(libpq, **missing) if missing else libpq
