"""TCP keepalives on the ingester's (and the CLI's) database connections (issue 21): a dead
server or network is noticed in about 2 minutes, not after Linux's 2 hours of silence.

Checked on real connections to the test PostgreSQL over TCP (through a local TCP proxy: the
test clusters listen on a socket directory only): the kernel's socket options are what the
defaults say, and a DSN's own values win. Not tested: the death itself. Any peer this test
can run (the proxy, the server) is on this host, whose kernel answers probes and
acknowledges data for it; only a dropped route or a powered-off host shows it."""

from __future__ import annotations

import argparse
import os
import socket

import pytest
from helpers_history import FreezableProxy
from psycopg2.extensions import make_dsn, parse_dsn
from softwalltime_ingest import cli as ingest_cli
from softwalltime_ingest import load

from softwalltime.core.config import load_settings
from softwalltime.db import engine as db
from softwalltime.db.keepalive import KEEPALIVES, with_keepalives


def test_defaults_are_added_and_the_dsns_own_values_win():
    got = parse_dsn(with_keepalives("postgresql://u:p@db.example:5433/swt?keepalives_idle=30"))
    assert got == {
        "user": "u",
        "password": "p",
        "host": "db.example",
        "port": "5433",
        "dbname": "swt",
        **KEEPALIVES,
        "keepalives_idle": "30",
    }
    assert parse_dsn(with_keepalives("postgresql+psycopg2://u@h/d"))["keepalives_count"] == "6"
    assert with_keepalives("service=swt") == "service=swt"  # pg_service.conf decides
    assert parse_dsn(with_keepalives("host=h keepalives=0"))["keepalives"] == "0"


def _tcp(sock_fd: int) -> dict[str, int]:
    sock = socket.socket(fileno=os.dup(sock_fd))
    try:
        assert sock.family in (socket.AF_INET, socket.AF_INET6)
        tcp = socket.IPPROTO_TCP
        return {
            "keepalives": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "keepalives_idle": sock.getsockopt(tcp, socket.TCP_KEEPIDLE),
            "keepalives_interval": sock.getsockopt(tcp, socket.TCP_KEEPINTVL),
            "keepalives_count": sock.getsockopt(tcp, socket.TCP_KEEPCNT),
            "tcp_user_timeout": sock.getsockopt(tcp, socket.TCP_USER_TIMEOUT),
        }
    finally:
        sock.close()


@pytest.fixture()
def tcp_dsn(fresh_dsn):
    params = parse_dsn(fresh_dsn)
    proxy = FreezableProxy(params.get("host", "127.0.0.1"), params.get("port", 5432))
    try:
        yield make_dsn(fresh_dsn, host="127.0.0.1", port=proxy.port)
    finally:
        proxy.close()


def _ingest_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    ingest_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_ingesters_connection_has_them(tcp_dsn, tmp_path):
    settings = load_settings(None, environ={}, overrides={"dsn": tcp_dsn})
    opts = ingest_cli.options(_ingest_args("--dir", str(tmp_path)), settings)
    conn = load.connect(opts.dsn)
    try:
        assert _tcp(conn.fileno()) == {k: int(v) for k, v in KEEPALIVES.items()}
    finally:
        conn.close()
    own = make_dsn(tcp_dsn, keepalives_idle=17, tcp_user_timeout=5000)
    opts = ingest_cli.options(_ingest_args(), settings._replace(dsn=own))
    conn = load.connect(opts.dsn)
    try:
        got = _tcp(conn.fileno())
        assert (got["keepalives_idle"], got["tcp_user_timeout"]) == (17, 5000)
        assert got["keepalives_count"] == 6
    finally:
        conn.close()


def test_the_clis_connections_have_them(tcp_dsn):
    engine = db.make_engine(tcp_dsn)
    try:
        with engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert _tcp(raw.fileno()) == {k: int(v) for k, v in KEEPALIVES.items()}
    finally:
        engine.dispose()
