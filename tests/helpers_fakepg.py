"""A PostgreSQL impostor for tests: a thread speaking just enough of the protocol on a socket
of its own (a unix socket in a fresh directory, or 127.0.0.1 where TCP matters), with the
messages a misbehaving server sends. Used by tests/test_pgwire_hostile.py (the client) and
tests/test_hook_hostile.py (the whole hook)."""

import os
import socket
import struct
import tempfile
import threading

SSL_REQUEST = 80877103
PASSWORD = "s3cret-pw"


# -- the protocol, server side ------------------------------------------------------------


def msg(kind, payload=b""):
    return kind + struct.pack("!i", len(payload) + 4) + payload


def auth(code, data=b""):
    return msg(b"R", struct.pack("!i", code) + data)


def notice(text="x"):
    return msg(b"N", b"SNOTICE\0C00000\0M" + text.encode() + b"\0\0")


def notification(channel="softwalltime_history"):
    return msg(b"A", struct.pack("!i", 4242) + channel.encode() + b"\0\0")


def parameter(name="application_name", value="x"):
    return msg(b"S", name.encode() + b"\0" + value.encode() + b"\0")


def error(code="28P01", text="password authentication failed"):
    return msg(b"E", f"SFATAL\0C{code}\0M{text}\0\0".encode())


def row_description(oid=23):
    column = b"c\0" + struct.pack("!ihihih", 0, 0, oid, 4, -1, 0)
    return msg(b"T", struct.pack("!h", 1) + column)


def data_row(*values):
    body = struct.pack("!h", len(values))
    for value in values:
        body += struct.pack("!i", -1) if value is None else struct.pack("!i", len(value)) + value
    return msg(b"D", body)


READY = auth(0) + parameter("server_version", "16.0") + msg(b"K", b"\0\0\0\x07\0\0\0\x08")
READY += msg(b"Z", b"I")
SELECT_1 = msg(b"1") + msg(b"2") + row_description() + data_row(b"1")
SELECT_1 += msg(b"C", b"SELECT 1\0") + msg(b"Z", b"I")


class Peer:
    """The server's side of one client connection."""

    def __init__(self, sock):
        self.sock = sock
        self.received = []  # (kind, payload) of every message read from the client
        self.startup = None  # the startup packet's body, once read

    def _exactly(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def read_startup(self, tls_answer=b"N"):
        """The startup packet, answering an SSLRequest before it with ``tls_answer``."""
        while True:
            length = struct.unpack("!i", self._exactly(4))[0]
            body = self._exactly(length - 4)
            if struct.unpack("!i", body[:4])[0] != SSL_REQUEST:
                self.startup = body
                return body
            self.sock.sendall(tls_answer)

    def read(self):
        kind = self._exactly(1)
        payload = self._exactly(struct.unpack("!i", self._exactly(4))[0] - 4)
        self.received.append((kind, payload))
        return kind, payload

    def read_until_sync(self):
        while self.read()[0] != b"S":
            pass

    def send(self, data):
        self.sock.sendall(data)

    def stream(self, data):
        """Send ``data`` again and again until the client goes away."""
        while True:
            self.sock.sendall(data)


class FakeServer:
    """A PostgreSQL impostor: each connection's startup packet is read, then ``script(peer)``
    runs in the server's thread until it returns or the client goes away."""

    def __init__(self, script, tcp=False, tls_answer=b"N"):
        self.script = script
        self.tls_answer = tls_answer
        self.peers = []
        self.done = threading.Event()  # the last connection's script ended
        self.tcp = tcp
        if tcp:
            self.sock = socket.socket()
            self.sock.bind(("127.0.0.1", 0))
            self.host, self.port = "127.0.0.1", self.sock.getsockname()[1]
        else:
            # a short path of our own: a unix socket's path has at most 107 bytes
            self.host, self.port = tempfile.mkdtemp(prefix="swt-fake-"), 5432
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.bind(os.path.join(self.host, f".s.PGSQL.{self.port}"))
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def dsn(self, extra=""):
        return f"host={self.host} port={self.port} user=u dbname=d password={PASSWORD} {extra}"

    def _serve(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return  # closed
            peer = Peer(client)
            self.peers.append(peer)
            self.done.clear()
            try:
                peer.read_startup(self.tls_answer)
                self.script(peer)
                peer.read()  # then wait for the client to leave (Terminate or EOF)
            except (OSError, EOFError):
                pass
            finally:
                client.close()
                self.done.set()

    def close(self):
        # shutdown, not only close: it wakes the thread blocked in accept() or recv()
        for sock in [self.sock] + [peer.sock for peer in self.peers]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # not connected, or already closed
            sock.close()
        self.thread.join(timeout=5)
        if not self.tcp:
            os.unlink(os.path.join(self.host, f".s.PGSQL.{self.port}"))
            os.rmdir(self.host)
        assert not self.thread.is_alive()
