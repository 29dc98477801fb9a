"""Write finished-job history rows into a test database with psycopg2 (parameterized)."""

import datetime as dt
import socket
import threading

import psycopg2
from psycopg2.extras import execute_values

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def add_jobs(dsn, user, jobs, server="pbs01", start_seq=1):
    """Insert jobs for ``user``; ``jobs`` is [(runtime_s, walltime_s, end_offset_s), ...].

    ``job_seq`` increases along the list from ``start_seq``; ``ended_at`` is EPOCH + offset.
    """
    rows = []
    for i, (runtime_s, walltime_s, end_s) in enumerate(jobs):
        seq = start_seq + i
        ended = EPOCH + dt.timedelta(seconds=end_s)
        rows.append(
            (
                server,
                f"{seq}.{server}",
                ended - dt.timedelta(seconds=(runtime_s or 0) + 60),
                seq,
                user,
                "q'; x",
                walltime_s,
                runtime_s,
                ended,
            )
        )
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            execute_values(
                cur,
                "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username, job_name,"
                " walltime_s, runtime_s, ended_at) VALUES %s",
                rows,
            )
    finally:
        conn.close()


class HangingServer:
    """A TCP listener on 127.0.0.1 that accepts connections and never answers.

    Models a database host that is up at the TCP level but stuck (overloaded, frozen VM).
    """

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = []
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.sock.settimeout(0.1)
        while not self._stop:
            try:
                client, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(client)  # keep it open, say nothing

    @property
    def dsn(self):
        return f"postgresql://hook:s3cret@127.0.0.1:{self.port}/softwalltime"

    def close(self):
        self._stop = True
        self.thread.join(timeout=2)
        for client in self.accepted:
            client.close()
        self.sock.close()


def closed_port():
    """A 127.0.0.1 port with nothing listening (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FreezableProxy:
    """A TCP proxy to a real PostgreSQL that can be frozen: it then stops forwarding.

    Models a database that answered before and now hangs mid-session (network partition,
    stalled server) while the client's TCP connection stays open.
    """

    def __init__(self, host, port):
        # a socket directory (our local clusters) or a TCP host
        self.upstream = (host, int(port))
        if str(host).startswith("/"):
            self.upstream = f"{host}/.s.PGSQL.{int(port)}"
        self.frozen = threading.Event()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self._stop = False
        self._conns = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self.sock.settimeout(0.1)
        while not self._stop:
            try:
                client, _ = self.sock.accept()
            except OSError:
                continue
            self._conns.append(client)
            if self.frozen.is_set():
                continue  # accept, never answer
            if isinstance(self.upstream, str):
                server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                server.connect(self.upstream)
            else:
                server = socket.create_connection(self.upstream)
            self._conns.append(server)
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, a, b):
        import select

        peers = {a: b, b: a}
        while not self._stop:
            if self.frozen.is_set():
                return
            ready, _, _ = select.select(list(peers), [], [], 0.05)
            for src in ready:
                try:
                    data = src.recv(65536)
                except OSError:
                    return
                if not data or self.frozen.is_set():
                    return
                peers[src].sendall(data)

    def close(self):
        self._stop = True
        for s in self._conns:
            s.close()
        self.sock.close()
