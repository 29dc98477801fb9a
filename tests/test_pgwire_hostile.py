"""The hook's PostgreSQL client against servers that misbehave: floods, malformed messages,
costs and sizes chosen to hurt, a password asked in clear, a host that hangs.

Each impostor is a thread speaking just enough of the protocol on a socket of its own (a
unix socket in a fresh directory, or 127.0.0.1 where TCP matters). Every test bounds the
client's wall time by its deadline + 0.1 s and expects DatabaseError, never another type.
"""

import base64
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from helpers_fakepg import (
    PASSWORD,
    READY,
    SELECT_1,
    auth,
    data_row,
    error,
    msg,
    notice,
    notification,
    parameter,
    row_description,
)
from helpers_runtime import need_runtime
from helpers_wait import wait_until

from softwalltime.core import dsn as dsnlib
from softwalltime.errors import DatabaseError
from softwalltime.hook import pgwire

REPO = Path(__file__).resolve().parents[1]
PY36 = Path(os.path.expanduser("~/.pyenv/versions/3.6.15/bin/python3.6"))
SLACK_S = 0.1  # what a test allows beyond the deadline it gives


def _fails_within(call, seconds, match=None):
    """Run ``call(deadline)``; it must raise DatabaseError (matching ``match``) by the
    deadline + SLACK_S. Returns the error and the elapsed seconds."""
    start = time.monotonic()
    with pytest.raises(DatabaseError, match=match) as err:
        call(start + seconds)
    elapsed = time.monotonic() - start
    assert elapsed < seconds + SLACK_S, elapsed
    return err.value, elapsed


def _connected(server, extra=""):
    return pgwire.connect(server.dsn(extra), time.monotonic() + 2.0)


def _query(conn):
    return lambda deadline: conn.query("SELECT 1", (), deadline)


def _connect(server, extra=""):
    return lambda deadline: pgwire.connect(server.dsn(extra), deadline)


# -- cases 1 and 2: floods -----------------------------------------------------------------

FLOODS = {
    "notifications": notification() * 2000,
    "notices": notice() * 2000,
    "parameter reports": parameter() * 2000,
    # one kind the client does not know, sent for ever: counted all the same
    "unknown messages": msg(b"?", b"x") * 2000,
}


@pytest.mark.parametrize("flood", sorted(FLOODS))
def test_a_flood_in_reply_to_a_query_ends_at_the_cap(fake, flood):
    def script(peer):
        peer.send(READY)
        peer.read_until_sync()
        peer.stream(FLOODS[flood])

    conn = _connected(fake(script))
    _, elapsed = _fails_within(_query(conn), 2.0, "more than 100 messages other than rows")
    assert elapsed < 0.5  # the cap ended it, not the deadline
    assert conn.closed


@pytest.mark.parametrize("flood", sorted(FLOODS))
def test_a_flood_during_startup_ends_at_the_cap(fake, flood):
    def script(peer):
        peer.send(auth(0))
        peer.stream(FLOODS[flood])

    _, elapsed = _fails_within(_connect(fake(script)), 2.0, "more than 100 messages")
    assert elapsed < 0.5


def test_endless_authentication_ok_ends_at_the_cap(fake):
    def script(peer):
        peer.stream(auth(0) * 1000)

    _fails_within(_connect(fake(script)), 2.0, "more than 100 messages")


def test_endless_rows_end_at_the_row_cap(fake):
    def script(peer):
        peer.send(READY)
        peer.read_until_sync()
        peer.send(msg(b"1") + msg(b"2") + row_description())
        peer.stream(data_row(b"1") * 5000)

    conn = _connected(fake(script))
    _fails_within(_query(conn), 5.0, f"exceeds {pgwire.MAX_ROWS} rows")
    assert conn.closed


def test_a_server_streaming_while_idle_is_not_quiet(fake):
    go = threading.Event()

    def script(peer):
        peer.send(READY)
        peer.read_until_sync()
        peer.send(SELECT_1)
        go.wait(10)
        peer.stream(notice() * 2000)

    conn = _connected(fake(script))
    assert conn.query("SELECT 1", (), time.monotonic() + 1.0) == [(1,)]
    assert conn.quiet()
    go.set()
    assert wait_until(lambda: not conn.quiet())
    # the next event's query ends at the cap, long before its deadline
    _, elapsed = _fails_within(_query(conn), 1.0, "more than 100 messages")
    assert elapsed < 0.5
    assert not conn.quiet()  # closed


# Child process: connect to the fake server, query once, print the error's type and how
# much the peak RSS grew during the query, in KiB. Linux resets the peak (VmHWM) when 5 is
# written to /proc/self/clear_refs, so the peak of the imports does not hide the query's.
_RSS_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from softwalltime.hook import pgwire

from softwalltime.errors import DatabaseError
def kib(field):
    with open("/proc/self/status") as fh:
        return int([l for l in fh if l.startswith(field + ":")][0].split()[1])
conn = pgwire.connect(sys.argv[2], time.monotonic() + 5)
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")
before = kib("VmRSS")
try:
    conn.query("SELECT 1", (), time.monotonic() + 5)
    print("no error")
except Exception as err:
    print(type(err).__name__, isinstance(err, DatabaseError))
print(kib("VmHWM") - before)
"""


def _interpreter(name):
    if name == "python3.6":
        need_runtime(PY36, "pgwire's memory bound on Python 3.6 (EL8)")
        return str(PY36)
    return sys.executable


BIG_NOTICE = notice("n" * (pgwire.MAX_MESSAGE - 40))  # a whole message just under the cap
# (sent once, then streamed for ever)
STREAMS = {
    "notices-at-the-length-cap": (b"", BIG_NOTICE),
    "small-notices": (b"", notice() * 5000),
    # a notice announced at 60 MiB (the old cap was 64 MiB), its bytes streamed
    "a-60MiB-notice": (b"N" + struct.pack("!i", 60 << 20), b"x" * (1 << 20)),
}


@pytest.mark.parametrize("python", ["current", "python3.6"])
@pytest.mark.parametrize("stream", sorted(STREAMS))
def test_memory_stays_bounded_whatever_the_server_streams(fake, python, stream):
    head, body = STREAMS[stream]

    def script(peer):
        peer.send(READY)
        peer.read_until_sync()
        peer.send(head)
        peer.stream(body)

    server = fake(script)
    start = time.monotonic()
    out = subprocess.run(
        [_interpreter(python), "-I", "-S", "-c", _RSS_CHILD, str(REPO), server.dsn()],
        capture_output=True, text=True, timeout=30, check=False,
        env={"HOME": "/nonexistent", "PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8"},
    )  # fmt: skip
    elapsed = time.monotonic() - start
    assert out.returncode == 0, out.stderr
    kind, grew_kib = out.stdout.split("\n")[:2]
    assert kind.endswith("True"), kind  # a DatabaseError
    # the receive buffer holds at most one message and one recv beyond (MAX_BUFFER, 1.06
    # MiB); with the payload's copy and the allocator's slack, 4 MiB measured at the cap
    # (0 for small messages); the 60 MiB notice would have grown it by 60 MiB before
    assert int(grew_kib) < 8 * 1024, grew_kib
    assert elapsed < 5.0  # the cap, not the child's 5 s deadline (plus its start-up)


def test_the_receive_buffer_never_exceeds_its_bound(fake, monkeypatch):
    """The same bound seen from inside: after every recv, the buffer is at most MAX_BUFFER."""
    largest = []
    recv = pgwire.Connection._recv

    def measured(self):
        got = recv(self)
        largest.append(len(self._buf))
        return got

    monkeypatch.setattr(pgwire.Connection, "_recv", measured)

    def script(peer):
        peer.send(READY)
        peer.read_until_sync()
        peer.stream(BIG_NOTICE + notice() * 3)

    conn = _connected(fake(script))
    _fails_within(_query(conn), 3.0, "more than 100 messages")
    assert len(largest) > 100  # it did read the stream
    assert max(largest) <= pgwire.MAX_BUFFER


# -- case 3: SCRAM iterations ----------------------------------------------------------------


def _scram_script(attributes, final=None, first_twice=False):
    """A SCRAM exchange up to the server-first message, ``attributes`` after our nonce:
    ``(nonce) -> str``; then ``final`` (bytes to send after the client-final), if any."""

    def script(peer):
        peer.send(auth(10, b"SCRAM-SHA-256\0\0"))
        _, payload = peer.read()
        client_first = payload[len(b"SCRAM-SHA-256\0") + 4 :].decode()
        nonce = client_first.split("r=", 1)[1]
        first = attributes(nonce)
        first = first if isinstance(first, bytes) else first.encode()
        peer.send(auth(11, first))
        if first_twice:
            peer.send(auth(11, first))
        if final is not None:
            peer.read()  # the client-final message
            peer.send(final)

    return script


SALT = base64.b64encode(b"0123456789abcdef").decode()


@pytest.mark.parametrize(
    "iterations",
    [10**8, pgwire.MAX_SCRAM_ITERATIONS + 1, 2**31 - 1, int("9" * 50)],
)
def test_scram_iterations_beyond_the_cap_fail_at_once(fake, iterations):
    server = fake(_scram_script(lambda nonce: f"r={nonce}srv,s={SALT},i={iterations}"))
    err, elapsed = _fails_within(_connect(server), 1.0, "iterations")
    assert elapsed < 0.1, elapsed  # refused before pbkdf2, not by the deadline
    assert "more than the 100000" in str(err)
    assert wait_until(server.done.is_set)
    sent = [k for k, _ in server.peers[0].received if k == b"p"]
    assert sent == [b"p"]  # the client-first only: no client-final was computed


def test_scram_iterations_at_the_cap_are_computed(fake):
    final = error("28P01", "password authentication failed for user u")
    cap = pgwire.MAX_SCRAM_ITERATIONS
    server = fake(_scram_script(lambda nonce: f"r={nonce}srv,s={SALT},i={cap}", final))
    err, elapsed = _fails_within(_connect(server), 2.0, "password authentication failed")
    assert isinstance(err, pgwire.PgError) and err.sqlstate == "28P01"
    client_final = server.peers[0].received[1][1]
    assert client_final.startswith(b"c=biws,r=") and b",p=" in client_final


def test_scram_iterations_unit():
    assert pgwire._scram_iterations("4096") == 4096
    assert pgwire._scram_iterations("0004096") == 4096
    assert pgwire._scram_iterations(str(pgwire.MAX_SCRAM_ITERATIONS)) == 100000
    for text in ("", "0", "-1", "1e6", " 4096", "4096 ", "0x10"):
        with pytest.raises(ValueError):
            pgwire._scram_iterations(text)
    for text in ("100001", "9" * 100000):
        start = time.monotonic()
        with pytest.raises(DatabaseError, match="iterations"):
            pgwire._scram_iterations(text)
        assert time.monotonic() - start < 0.05


# -- case 4: every malformed message is a DatabaseError -------------------------------------

LONG = 2**31 - 1


def _sends(data):
    """A server that sends ``data`` as soon as it has read the startup packet."""
    return lambda peer: peer.send(data)


def _then_on_query(data):
    """A server that logs us in, then answers the first query with ``data``."""

    def script(peer):
        peer.send(READY)
        peer.read_until_sync()
        peer.send(data)

    return script


def _scram_then_final(final):
    """A SCRAM exchange that is sound up to the server-final message ``final``."""
    return _scram_script(lambda nonce: f"r={nonce}srv,s={SALT},i=4096", auth(12, final))


STARTUP_CASES = [
    ("no-auth-payload", _sends(b"R\0\0\0\x04"), "malformed authentication"),
    ("auth-code-cut", _sends(b"R\0\0\0\x06\0\0"), "malformed authentication"),
    ("md5-salt-short", _sends(auth(5, b"ab")), "malformed authentication"),
    ("md5-salt-long", _sends(auth(5, b"abcdefgh")), "malformed authentication"),
    ("backend-key-short", _sends(auth(0) + msg(b"K", b"\0\x01")), "malformed backend key data"),
    ("error-unterminated", _sends(msg(b"E", b"SFATAL\0C28P01\0Mno")), "malformed error"),
    ("error-empty", _sends(msg(b"E")), "malformed error"),
    ("length-3", _sends(b"R\0\0\0\x03"), "length 3"),
    ("length-2**31-1", _sends(b"R" + struct.pack("!i", LONG)), f"length {LONG}"),
    ("length-negative", _sends(b"R\xff\xff\xff\xff"), "length -1"),
    ("length-cap+1", _sends(b"N" + struct.pack("!i", pgwire.MAX_MESSAGE + 1)), "length"),
    ("length-2MiB", _sends(b"N" + struct.pack("!i", 2 << 20)), "length 2097152"),
    ("scram-non-ascii", _scram_script(lambda n: f"r={n}x,s={SALT},i=1\xff".encode("latin-1")),
     "malformed authentication"),
    ("scram-no-equals", _scram_script(lambda n: f"r={n}x,s={SALT},garbage"),
     "malformed authentication"),
    ("scram-bad-base64", _scram_script(lambda n: f"r={n}x,s=@@notbase64@@,i=4096"),
     "malformed authentication"),
    ("scram-bad-padding", _scram_script(lambda n: f"r={n}x,s=abc,i=4096"),
     "malformed authentication"),
    ("scram-empty-salt", _scram_script(lambda n: f"r={n}x,s=,i=4096"), "malformed authentication"),
    ("scram-iterations-text", _scram_script(lambda n: f"r={n}x,s={SALT},i=many"),
     "malformed authentication"),
    ("scram-iterations-zero", _scram_script(lambda n: f"r={n}x,s={SALT},i=0"),
     "malformed authentication"),
    ("scram-no-iterations", _scram_script(lambda n: f"r={n}x,s={SALT}"),
     "malformed authentication"),
    ("scram-foreign-nonce", _scram_script(lambda n: f"r=other{n},s={SALT},i=4096"),
     "nonce does not extend ours"),
    ("scram-first-twice", _scram_script(lambda n: f"r={n}x,s={SALT},i=4096", first_twice=True),
     "first message twice"),
    ("scram-final-bad-base64", _scram_then_final(b"v=@@@"), "malformed authentication"),
    ("scram-final-non-ascii", _scram_then_final(b"v=\xff\xfe"), "malformed authentication"),
    ("scram-final-wrong", _scram_then_final(b"v=" + base64.b64encode(b"x" * 32)),
     "signature does not match"),
    ("sasl-twice", _sends(auth(10, b"SCRAM-SHA-256\0\0") * 2), "started the exchange twice"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("script", "message"), [c[1:] for c in STARTUP_CASES], ids=[c[0] for c in STARTUP_CASES]
)
def test_malformed_startup_messages_are_database_errors(fake, script, message):
    err, _ = _fails_within(_connect(fake(script)), 1.0, message)
    assert PASSWORD not in str(err)


QUERY_CASES = [
    ("row-description-cut", msg(b"T", b"\0\x01"), "malformed row description"),
    ("row-description-no-nul", msg(b"T", b"\0\x01" + b"c" * 30), "malformed row description"),
    ("row-description-extra", msg(b"T", row_description()[5:] + b"xyz"),
     "malformed row description"),
    ("data-row-cut", row_description() + msg(b"D", b"\0\x01\0\0\0\x64ab"), "malformed data row"),
    ("data-row-count-short", row_description() + msg(b"D", b"\0\x02\0\0\0\x011"),
     "malformed data row"),
    ("data-row-extra", row_description() + msg(b"D", b"\0\x01\0\0\0\x011zz"),
     "malformed data row"),
    ("data-row-no-count", row_description() + msg(b"D", b"\0"), "malformed data row"),
    ("int-not-a-number", row_description() + data_row(b"abc"), "malformed data row"),
    ("int-of-a-million-digits", row_description() + data_row(b"9" * 1000000),
     "malformed data row"),
    ("float-not-a-number", row_description(701) + data_row(b"1.2.3"), "malformed data row"),
    ("error-unterminated", msg(b"E", b"SERROR\0C22012\0Mdivision"), "malformed error"),
    ("length-3", b"D\0\0\0\x03", "length 3"),
    ("length-2**31-1", b"D" + struct.pack("!i", LONG), f"length {LONG}"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("data", "message"), [c[1:] for c in QUERY_CASES], ids=[c[0] for c in QUERY_CASES]
)
def test_malformed_replies_are_database_errors(fake, data, message):
    conn = _connected(fake(_then_on_query(msg(b"1") + msg(b"2") + data)))
    _, elapsed = _fails_within(_query(conn), 1.0, message)
    assert elapsed < 0.5  # refused as it came, not by the deadline
    assert conn.closed


# -- case 5: passwords and TLS -------------------------------------------------------------


def _asks_for_the_password_in_clear(peer):
    peer.send(auth(3))
    kind, payload = peer.read()
    if kind == b"p" and payload == PASSWORD.encode() + b"\0":
        peer.send(READY)


def test_a_cleartext_password_request_over_plain_tcp_is_refused(fake):
    server = fake(_asks_for_the_password_in_clear, tcp=True)
    for sslmode in ("disable", "prefer", "allow"):  # prefer and allow: the server says N
        extra = f"sslmode={sslmode}"
        _fails_within(_connect(server, extra), 1.0, "clear text over TCP without TLS")
        assert wait_until(server.done.is_set)
        assert not [k for k, _ in server.peers[-1].received if k == b"p"]  # nothing sent
    for rule in ("!md5", "!scram-sha-256,!none"):  # allows it only by omission
        _fails_within(_connect(server, "require_auth=" + rule), 1.0, "clear text")
    # the DSN asks for it: answered
    for rule in ("password", "scram-sha-256,password"):
        conn = pgwire.connect(server.dsn("require_auth=" + rule), time.monotonic() + 1.0)
        conn.close()
        assert server.peers[-1].received[0] == (b"p", PASSWORD.encode() + b"\0")


def test_a_cleartext_password_request_over_a_unix_socket_is_answered(fake):
    server = fake(_asks_for_the_password_in_clear)
    pgwire.connect(server.dsn(), time.monotonic() + 1.0).close()
    assert server.peers[-1].received[0] == (b"p", PASSWORD.encode() + b"\0")


def test_sslrootcert_system_never_falls_back_to_plaintext(fake):
    server = fake(lambda peer: peer.send(READY), tcp=True, tls_answer=b"N")
    _fails_within(
        _connect(server, "sslrootcert=system"), 1.0, r"does not support TLS \(sslmode=verify-full"
    )
    assert wait_until(server.done.is_set)
    assert server.peers[-1].startup is None  # no startup packet in clear
    start = time.monotonic()
    _fails_within(_connect(server, "sslrootcert=system sslmode=prefer"), 1.0, "weak sslmode")
    assert time.monotonic() - start < 0.05  # refused before connecting
    assert len(server.peers) == 1


# -- case 8: several hosts share the deadline -------------------------------------------------


class SilentSocket:
    """A unix socket that accepts connections (the kernel does, up to the backlog) and
    never reads nor answers: a hung first host."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="swt-hung-")
        self.path = os.path.join(self.dir, ".s.PGSQL.5432")
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(self.path)
        self.sock.listen(16)

    def close(self):
        self.sock.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


def _quoted(value):
    if value and not any(c in value for c in " '\\\t\n"):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _with_hosts_before(dsn, hosts):
    """The keyword DSN of ``dsn`` with unix socket directories ``hosts`` (port 5432) before
    its own host."""
    params = dsnlib.parse(dsn)
    assert "hostaddr" not in params and "," not in params.get("host", "")
    params["host"] = ",".join(hosts + [params.get("host") or "localhost"])
    params["port"] = ",".join(["5432"] * len(hosts) + [params.get("port") or "5432"])
    return " ".join(f"{k}={_quoted(v)}" for k, v in params.items())


@pytest.mark.parametrize("hung", [1, 2])
def test_a_hung_first_host_leaves_time_for_the_real_one(pg_server, hung):
    silent = [SilentSocket() for _ in range(hung)]
    dirs = [s.dir for s in silent]
    try:
        dsn = _with_hosts_before(pg_server.admin_dsn, dirs)
        start = time.monotonic()
        conn = pgwire.connect(dsn, start + 1.0)  # the hook's connect_timeout_s default
        elapsed = time.monotonic() - start
        try:
            assert conn.query("SELECT 1", (), time.monotonic() + 1.0) == [(1,)]
        finally:
            conn.close()
        # each hung host took its share: half of 1 s, or a third and a third
        expected = hung / (hung + 1)
        assert expected - 0.05 < elapsed < 1.0 + SLACK_S, elapsed
        # only hung hosts: the deadline holds, and each host is named as timed out
        only_silent = f"host={','.join(dirs)} port=5432 user=u dbname=d"
        err, _ = _fails_within(lambda d: pgwire.connect(only_silent, d), 1.0, "timed out")
        assert str(err).count("timed out") == hung
    finally:
        for s in silent:
            s.close()
