"""A private, throwaway PostgreSQL cluster for tests, the demo and benchmarks.

Started with the server binaries (``initdb``/``pg_ctl``) found on PATH or under
``/usr/lib/postgresql/*/bin``, in a directory of our own, with fsync off. Never used for
production data.

Reachable by its owner only: it listens on no TCP address at all, only on a unix socket
in its own directory, created with mode 0700 and owned by the user the server runs as.
Authentication inside is ``trust``, which is safe only because nobody else can reach the
socket (on a TCP port any local user could log in as the superuser and run programs as
that user with ``COPY ... TO PROGRAM``). A unix socket is also how a PBS hook inside
PBS's own network namespace reaches a test database.

PostgreSQL refuses to run as root; when we are root the cluster runs as the
``postgres`` system user (or ``nobody``), which owns the data directory.

Usage from a shell (``make demo``)::

    python -m softwalltime.db.localpg ensure .demo/pg   # prints the DSN; starts it if needed
    python -m softwalltime.db.localpg stop .demo/pg
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..errors import SoftwalltimeError

INSTALL_HINT = (
    "install the PostgreSQL server binaries (Debian/Ubuntu: apt-get install postgresql; "
    "RHEL: dnf install postgresql-server), start Docker, or set SOFTWALLTIME_TEST_DSN"
)


def find_bindir() -> Path:
    """Locate the directory holding ``initdb`` and ``pg_ctl``.

    :raises SoftwalltimeError: no server binaries; the message says what to install
    """
    candidates = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent)
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates += [Path(p) for p in versions]
    candidates += [Path(p) for p in sorted(glob.glob("/usr/pgsql-*/bin"), reverse=True)]
    for bindir in candidates:
        if (bindir / "initdb").exists() and (bindir / "pg_ctl").exists():
            return bindir
    raise SoftwalltimeError("no PostgreSQL server binaries (initdb, pg_ctl) found: " + INSTALL_HINT)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _run_as() -> str | None:
    """The user to run the server as, or None to run as ourselves."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise SoftwalltimeError(
        "running as root and no 'postgres' or 'nobody' user to run PostgreSQL as"
    )


class LocalCluster:
    """A PostgreSQL cluster in ``directory`` (mode 0700), on a unix socket there only."""

    def __init__(self, directory: str | os.PathLike[str], port: int | None = None) -> None:
        self.directory = Path(directory).resolve()
        self.datadir = self.directory / "data"
        self.portfile = self.directory / "port"
        self.bindir = find_bindir()
        self.user = _run_as()
        self.port = port or (int(self.portfile.read_text()) if self.portfile.exists() else 0)

    def _cmd(self, *args: str) -> list[str]:
        if self.user is None:
            return list(args)
        return ["runuser", "-u", self.user, "--", *args]

    def _check(self, *args: str) -> None:
        proc = subprocess.run(self._cmd(*args), capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            out = (proc.stderr or proc.stdout).strip().splitlines()
            raise SoftwalltimeError(
                f"{Path(args[0]).name} failed: {out[-1] if out else proc.returncode}"
            )

    @property
    def superuser(self) -> str:
        return self.user or pwd.getpwuid(os.getuid()).pw_name

    def dsn(self, dbname: str = "postgres") -> str:
        """libpq URI for a database of this cluster (its socket directory as ``host``)."""
        return f"postgresql://{self.superuser}@/{dbname}?host={self.directory}&port={self.port}"

    @property
    def socket_path(self) -> Path:
        return self.directory / f".s.PGSQL.{self.port}"

    def is_running(self) -> bool:
        if not self.datadir.exists() or not self.port:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(0.5)
                sock.connect(str(self.socket_path))
                return (self.datadir / "postmaster.pid").exists()
        except OSError:
            return False

    def start(self, extra_options: str = "") -> None:
        """initdb (first time) and start the server; waits until it accepts connections.

        Starting a cluster that is already running (an earlier benchmark's) does nothing.

        :param extra_options: more ``-c name=value`` server options, after ours (the last
            one of a name wins). For tests only: a test of TLS over TCP opens a port here.
        """
        if self.is_running():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        # the socket lives here: nobody but the server's user (and root) may enter
        os.chmod(self.directory, 0o700)
        if self.user is not None:
            shutil.chown(self.directory, user=self.user)
            for parent in self.directory.parents:
                if not os.stat(parent).st_mode & 0o001:
                    raise SoftwalltimeError(
                        f"{parent} is not searchable by user {self.user!r}, who runs PostgreSQL "
                        "(we are root): put the cluster directory elsewhere, e.g. under /tmp"
                    )
        if not (self.datadir / "PG_VERSION").exists():
            self._check(
                str(self.bindir / "initdb"),
                "-D",
                str(self.datadir),
                "-A",
                "trust",
                "-U",
                self.superuser,
                "-E",
                "UTF8",
                "--no-sync",
                "--locale=C",
            )
        if not self.port:
            self.port = _free_port()
        self.portfile.write_text(str(self.port))
        options = (
            f"-c listen_addresses='' -c port={self.port} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off "
            f"-c unix_socket_directories='{self.directory}' -c unix_socket_permissions=0700 "
            "-c max_connections=200 "
            "-c shared_buffers=256MB"
        )
        if extra_options:
            options += " " + extra_options
        self._check(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.datadir),
            "-l",
            str(self.directory / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )
        deadline = time.monotonic() + 30
        while not self.is_running():
            if time.monotonic() > deadline:
                raise SoftwalltimeError(f"PostgreSQL in {self.directory} did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        if (self.datadir / "postmaster.pid").exists():
            self._check(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "stop")

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m softwalltime.db.localpg ensure|stop|dsn DIR``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("ensure", "stop", "dsn"):
        print("usage: python -m softwalltime.db.localpg ensure|stop|dsn DIR", file=sys.stderr)
        return 2
    try:
        cluster = LocalCluster(args[1])
        if args[0] == "ensure":
            if not cluster.is_running():
                cluster.start()
            _ensure_database(cluster, "softwalltime")
            print(cluster.dsn("softwalltime"))
        elif args[0] == "stop":
            cluster.stop()
        else:
            print(cluster.dsn("softwalltime"))
    except SoftwalltimeError as err:
        print(f"localpg: error: {err}", file=sys.stderr)
        return 1
    return 0


def _ensure_database(cluster: LocalCluster, name: str) -> None:
    import psycopg2
    from psycopg2 import sql

    conn = psycopg2.connect(cluster.dsn("postgres"))
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if cur.fetchone() is None:
                cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main())
