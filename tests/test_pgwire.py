"""The hook's own PostgreSQL client against a real server: every authentication method,
TLS, the password file, encodings, bounds. Reference behaviour is libpq's.

One dedicated cluster (``auth_cluster``) has its own ``pg_hba.conf``: trust for its
superuser, ``password`` / ``md5`` / ``scram-sha-256`` for roles of those names on the unix
socket, and ``hostssl`` / ``hostnossl`` rules on a 127.0.0.1 port with a self-signed
certificate made by ``openssl req``.
"""

import json
import os
import pwd
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg2
import pytest
from helpers_wait import wait_until
from psycopg2 import sql

from softwalltime.core import dsn as dsnlib
from softwalltime.db.localpg import LocalCluster
from softwalltime.errors import DatabaseError
from softwalltime.hook import lookup, pgwire

PASSWORDS = {
    "pw_user": "clear-T3xt",
    "md5_user": "md5:Pa?ss#w0rd",
    "scram_user": "scr'am \\pw",
    # SASLprep changes this one: NO-BREAK SPACE -> space, ROMAN NUMERAL NINE -> "IX",
    # SOFT HYPHEN removed. The server hashes the prepared form.
    "prep_user": "p\u00e4ss\u00a0w\u00adord\u2168",
}
HBA = """\
local all {superuser} trust
local all pw_user password
local all md5_user md5
local all scram_user scram-sha-256
local all prep_user scram-sha-256
local all all trust
hostssl all scram_user 127.0.0.1/32 scram-sha-256
hostnossl all md5_user 127.0.0.1/32 md5
host all pw_user 127.0.0.1/32 password
"""


class AuthCluster:
    def __init__(self, cluster, tcp_port, certdir):
        self.cluster = cluster
        self.dir = str(cluster.directory)
        self.port = cluster.port
        self.tcp_port = tcp_port
        self.cert = str(certdir / "server.crt")
        self.certdir = certdir

    def socket_dsn(self, user, password=None, **extra):
        parts = ["host=" + self.dir, f"port={self.port}", "dbname=postgres", "user=" + user]
        if password is not None:
            parts.append("password='{}'".format(password.replace("\\", "\\\\").replace("'", "\\'")))
        parts += [f"{k}={v}" for k, v in extra.items()]
        return " ".join(parts)

    def tcp_dsn(self, user, sslmode, host="127.0.0.1", **extra):
        extra.update(sslmode=sslmode)
        dsn = self.socket_dsn(user, PASSWORDS[user], **extra)
        return dsn.replace("host=" + self.dir, "host=" + host).replace(
            f"port={self.port}", f"port={self.tcp_port}"
        )

    def admin(self):
        conn = psycopg2.connect(self.cluster.dsn("postgres"))
        conn.autocommit = True
        return conn


def _make_cert(directory, name, owner):
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(directory / f"{name}.key"), "-out", str(directory / f"{name}.crt")],
        check=True, capture_output=True,
    )  # fmt: skip
    os.chmod(directory / f"{name}.key", 0o600)
    if owner is not None:
        for ext in ("key", "crt"):
            shutil.chown(directory / f"{name}.{ext}", user=owner)


@pytest.fixture(scope="module")
def auth_cluster():
    tmp = Path(tempfile.mkdtemp(prefix="swt-auth-"))
    os.chmod(tmp, 0o755)
    cluster = LocalCluster(tmp / "pg")
    cluster.start()
    try:
        certdir = tmp / "certs"
        certdir.mkdir()
        _make_cert(certdir, "server", cluster.user)
        _make_cert(certdir, "other", None)  # a CA that did not sign the server's cert
        admin = psycopg2.connect(cluster.dsn("postgres"))
        admin.autocommit = True
        with admin.cursor() as cur:
            for user, password in PASSWORDS.items():
                method = "md5" if user == "md5_user" else "scram-sha-256"
                cur.execute(sql.SQL("SET password_encryption = {}").format(sql.Literal(method)))
                cur.execute(
                    sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                        sql.Identifier(user), sql.Literal(password)
                    )
                )
            me = pwd.getpwuid(os.geteuid()).pw_name
            cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (me,))
            if cur.fetchone() is None:
                cur.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(me)))
            cur.execute(
                "CREATE DATABASE latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'"
                " TEMPLATE template0"
            )
        admin.close()
        hba = cluster.datadir / "pg_hba.conf"
        hba.write_text(HBA.format(superuser=cluster.superuser))
        cluster.stop()
        cluster.start(
            f"-c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file={certdir}/server.crt"
            f" -c ssl_key_file={certdir}/server.key"
        )
        # test-only: this cluster also listens on 127.0.0.1, on the socket's port number
        yield AuthCluster(cluster, cluster.port, certdir)
    finally:
        cluster.destroy()
        shutil.rmtree(tmp, ignore_errors=True)


def _deadline(seconds=5.0):
    return time.monotonic() + seconds


def _who(conn):
    return conn.query("SELECT current_user, $1::int + 1", (41,), _deadline())[0]


# -- authentication over the unix socket ------------------------------------------------


@pytest.mark.parametrize("user", ["pw_user", "md5_user", "scram_user", "prep_user"])
def test_password_methods(auth_cluster, user):
    conn = pgwire.connect(auth_cluster.socket_dsn(user, PASSWORDS[user]), _deadline())
    try:
        assert _who(conn) == (user, 42)
    finally:
        conn.close()
    assert conn.closed


def test_trust_over_the_socket(auth_cluster):
    conn = pgwire.connect(auth_cluster.cluster.dsn("postgres"), _deadline())
    try:
        assert _who(conn) == (auth_cluster.cluster.superuser, 42)
    finally:
        conn.close()


@pytest.mark.parametrize("user", ["pw_user", "md5_user", "scram_user"])
def test_wrong_password_is_a_clear_error_without_the_password(auth_cluster, user):
    dsn = auth_cluster.socket_dsn(user, "Wr0ng?pass#word")
    with pytest.raises(pgwire.PgError) as err:
        pgwire.connect(dsn, _deadline())
    assert "password authentication failed" in str(err.value)
    assert err.value.sqlstate == "28P01"
    # through the hook's connect, with the DSN named in the message
    with pytest.raises(DatabaseError) as err2:
        lookup.connect(dsn, 2.0, 250)
    text = str(err2.value)
    assert "password authentication failed" in text and "Wr0ng" not in text
    assert "***" in text and "\n" not in text


def test_no_password_given(auth_cluster, tmp_path):
    dsn = auth_cluster.socket_dsn("scram_user", passfile=str(tmp_path / "none"))
    with pytest.raises(DatabaseError, match="asks for a password and none was given"):
        pgwire.connect(dsn, _deadline())


def test_saslprep_is_applied_like_the_server_does():
    assert pgwire.saslprep(PASSWORDS["prep_user"]) == "p\u00e4ss wordIX"
    assert pgwire.saslprep("plain ASCII\t!") == "plain ASCII\t!"
    # prohibited (a control character after mapping): used as given, as libpq does
    assert pgwire.saslprep("\u00e4\u0007") == "\u00e4\u0007"
    # bidi: a right-to-left character not at both ends: as given
    assert pgwire.saslprep("\u05d0a") == "\u05d0a"


# -- the password file -------------------------------------------------------------------


def _passfile(path, text, mode=0o600):
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


def test_pgpass_rules_are_libpqs(auth_cluster, tmp_path):
    c = auth_cluster
    md5 = PASSWORDS["md5_user"].replace("\\", "\\\\").replace(":", "\\:")
    scram = PASSWORDS["scram_user"].replace("\\", "\\\\").replace(":", "\\:")
    text = (
        "# comment\n"
        f"localhost:{c.port}:postgres:md5_user:wrong\n"  # a socket dir is not localhost
        f"{c.dir}:{c.port}:postgres:md5_user:{md5}:extra fields are ignored\n"
        f"*:*:*:scram_user:{scram}\n"
    )
    passfile = _passfile(tmp_path / "pgpass", text)
    for user in ("md5_user", "scram_user"):
        conn = pgwire.connect(c.socket_dsn(user, passfile=passfile), _deadline())
        assert _who(conn)[0] == user
        conn.close()
        # an empty password counts as none (libpq), so the file is read too
        conn = pgwire.connect(c.socket_dsn(user, "", passfile=passfile), _deadline())
        conn.close()
    # PGPASSFILE only when the caller passes an environment; the hook passes {}
    dsn = c.socket_dsn("md5_user")
    conn = pgwire.connect(dsn, _deadline(), environ={"PGPASSFILE": passfile})
    conn.close()
    with pytest.raises(DatabaseError):
        pgwire.connect(dsn + " passfile=" + str(tmp_path / "missing"), _deadline(), environ={})


def test_pgpass_readable_by_others_is_ignored(auth_cluster, tmp_path):
    c = auth_cluster
    passfile = _passfile(tmp_path / "pgpass", "*:*:*:*:" + PASSWORDS["pw_user"] + "\n", 0o644)
    with pytest.raises(DatabaseError, match="none was given"):
        pgwire.connect(c.socket_dsn("pw_user", passfile=passfile), _deadline())
    os.chmod(passfile, 0o600)
    pgwire.connect(c.socket_dsn("pw_user", passfile=passfile), _deadline()).close()


def test_pgpass_matching_unit(tmp_path):
    path = _passfile(
        tmp_path / "p",
        "h\\:x:5432:d:u:one\n"  # escaped colon in the host field
        "\\*:*:*:u:two\n"  # an escaped star is a literal star, not a wildcard
        "/tmp:5432:*:u:three\\:3\n"  # the default socket directory is "localhost" only
        "localhost:*:*:u:four\n",
    )
    params = {"passfile": path, "user": "u", "dbname": "d"}
    assert pgwire.pgpass_password(params, "h:x", "5432", {}) == "one"
    assert pgwire.pgpass_password(params, "*", "5432", {}) == "two"
    assert pgwire.pgpass_password(params, "other", "5432", {}) is None
    assert pgwire.pgpass_password(params, "/tmp", "5432", {}) == "four"
    assert pgwire.pgpass_password(params, "", "", {}) == "four"


# -- startup parameters --------------------------------------------------------------------


def test_client_encoding_is_utf8_whatever_the_database(auth_cluster):
    dsn = auth_cluster.socket_dsn(auth_cluster.cluster.superuser, dbname="latin1")
    conn = pgwire.connect(dsn.replace("dbname=postgres ", ""), _deadline())
    try:
        assert conn.query("SELECT current_database()", (), _deadline()) == [("latin1",)]
        assert conn.query("SELECT $1::text, length($1)", ("josé",), _deadline()) == [("josé", 4)]
    finally:
        conn.close()


def test_dsn_options_are_kept_beside_the_hooks(auth_cluster):
    dsn = auth_cluster.socket_dsn(auth_cluster.cluster.superuser, options="'-c search_path=x'")
    conn = lookup.connect(dsn, 2.0, 321)
    try:
        d = _deadline()
        assert conn.query("SHOW search_path", (), d) == [("x",)]
        assert conn.query("SHOW statement_timeout", (), d) == [("321ms",)]
        assert conn.query("SHOW default_transaction_read_only", (), d) == [("on",)]
        assert conn.query("SHOW application_name", (), d) == [("softwalltime-hook",)]
    finally:
        conn.close()


def test_default_user_is_the_effective_uid_not_the_environment(auth_cluster, monkeypatch):
    monkeypatch.setenv("USER", "no_such_role")
    monkeypatch.setenv("LOGNAME", "no_such_role")
    dsn = f"host={auth_cluster.dir} port={auth_cluster.port} dbname=postgres"
    conn = pgwire.connect(dsn, _deadline())
    try:
        assert _who(conn)[0] == pwd.getpwuid(os.geteuid()).pw_name
    finally:
        conn.close()


# -- queries ---------------------------------------------------------------------------


def test_types_nulls_and_errors_keep_the_connection_usable(auth_cluster):
    conn = pgwire.connect(auth_cluster.cluster.dsn("postgres"), _deadline())
    try:
        d = _deadline()
        row = conn.query(
            "SELECT 1::int2, 2::int4, 9000000000::int8, 1.5::float4, 2.25::float8,"
            " true, false, NULL::int, 'x'::varchar, 'y'::text, 1.50::numeric, $1::text, $2::int",
            ("o'q\"; --", None),
            d,
        )
        assert row == [(1, 2, 9000000000, 1.5, 2.25, True, False, None, "x", "y", "1.50",
                        "o'q\"; --", None)]  # fmt: skip
        with pytest.raises(pgwire.PgError) as err:
            conn.query("SELECT 1/0", (), d)
        assert err.value.sqlstate == "22012" and not conn.closed
        conn.query("SET statement_timeout = 100", (), d)
        start = time.monotonic()
        with pytest.raises(pgwire.PgError) as err:
            conn.query("SELECT pg_sleep(5)", (), d)
        assert err.value.sqlstate == pgwire.QUERY_CANCELED
        assert time.monotonic() - start < 1.0
        assert conn.query("SELECT 7", (), d) == [(7,)]  # still usable
        conn.query("SET statement_timeout = 0", (), d)  # a loaded machine: no 100 ms race
        rows = conn.query("SELECT g FROM generate_series(1, 20000) g", (), d)
        assert len(rows) == 20000 and rows[-1] == (20000,)
    finally:
        conn.close()


def test_terminated_backend_marks_the_connection_closed(auth_cluster):
    conn = pgwire.connect(auth_cluster.cluster.dsn("postgres"), _deadline())
    admin = auth_cluster.admin()
    try:
        assert conn.quiet()
        with admin.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", (conn.backend_pid,))
        # the backend's FATAL (and end of stream) arrives while idle: no longer quiet
        assert wait_until(lambda: not conn.quiet())
        assert not conn.closed  # quiet() never reads: the next query finds out
        with pytest.raises(DatabaseError):
            conn.query("SELECT 1", (), _deadline())
        assert conn.closed and not conn.quiet()
        with pytest.raises(DatabaseError, match="closed"):
            conn.query("SELECT 1", (), _deadline())
    finally:
        admin.close()


@pytest.mark.parametrize("transport", ["socket", "tls"])
def test_quiet_until_a_notification_arrives_while_idle(
    auth_cluster, transport, tmp_path, monkeypatch
):
    """quiet(): true after a complete reply, false once the server sent something while the
    connection was idle (over TLS too, where decrypted bytes may wait inside the socket)."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.postgresql/root.crt
    if transport == "socket":
        dsn = auth_cluster.cluster.dsn("postgres")
    else:
        dsn = auth_cluster.tcp_dsn("scram_user", "require")
    conn = pgwire.connect(dsn, _deadline())
    admin = auth_cluster.admin()
    try:
        conn.query("LISTEN swt_test", (), _deadline())
        assert conn.quiet() and conn.quiet()  # asking reads nothing, changes nothing
        with admin.cursor() as cur:
            cur.execute("NOTIFY swt_test")
        assert wait_until(lambda: not conn.quiet())
        assert not conn.quiet()  # still there: quiet() did not consume it
        # the next statement reads it before its own reply; then quiet again
        assert conn.query("SELECT $1::int", (7,), _deadline()) == [(7,)]
        assert conn.quiet()
    finally:
        admin.close()
        conn.close()
    assert not conn.quiet()  # closed


# -- TLS over TCP -----------------------------------------------------------------------


def _ssl_in_use(conn):
    return conn.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", (), _deadline())[
        0
    ][0]


def test_sslmode_require_with_a_self_signed_certificate(auth_cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.postgresql/root.crt
    conn = pgwire.connect(auth_cluster.tcp_dsn("scram_user", "require"), _deadline())
    try:
        assert _who(conn)[0] == "scram_user" and _ssl_in_use(conn) is True
    finally:
        conn.close()
    # prefer (the default) takes TLS too; disable does not (md5_user: hostnossl only)
    conn = pgwire.connect(auth_cluster.tcp_dsn("scram_user", "prefer"), _deadline())
    assert _ssl_in_use(conn) is True
    conn.close()
    conn = pgwire.connect(auth_cluster.tcp_dsn("md5_user", "disable"), _deadline())
    assert _ssl_in_use(conn) is False
    conn.close()
    # libpq's fallbacks: prefer retries without TLS when the server refuses the TLS session
    # (md5_user: hostnossl only), allow retries with TLS (scram_user: hostssl only)
    conn = pgwire.connect(auth_cluster.tcp_dsn("md5_user", "prefer"), _deadline())
    assert _ssl_in_use(conn) is False
    conn.close()
    conn = pgwire.connect(auth_cluster.tcp_dsn("scram_user", "allow"), _deadline())
    assert _ssl_in_use(conn) is True
    conn.close()
    # scram_user may only come over TLS
    with pytest.raises(pgwire.PgError, match="no pg_hba.conf entry"):
        pgwire.connect(auth_cluster.tcp_dsn("scram_user", "disable"), _deadline())


def test_sslmode_verify(auth_cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    c = auth_cluster
    ours, other = c.cert, str(c.certdir / "other.crt")
    conn = pgwire.connect(c.tcp_dsn("scram_user", "verify-ca", sslrootcert=ours), _deadline())
    conn.close()
    dsn = c.tcp_dsn("scram_user", "verify-full", host="localhost", sslrootcert=ours)
    conn = pgwire.connect(dsn, _deadline())
    conn.close()
    with pytest.raises(DatabaseError, match="certificate verify failed"):
        pgwire.connect(c.tcp_dsn("scram_user", "verify-ca", sslrootcert=other), _deadline())
    # require with a root certificate file verifies the chain (libpq's rule)
    with pytest.raises(DatabaseError, match="certificate verify failed"):
        pgwire.connect(c.tcp_dsn("scram_user", "require", sslrootcert=other), _deadline())
    with pytest.raises(DatabaseError, match="root certificate file .* does not exist"):
        pgwire.connect(c.tcp_dsn("scram_user", "verify-ca"), _deadline())


@pytest.mark.parametrize(
    ("sslmode", "rule", "ok"),
    [
        ("disable", "", False),
        ("prefer", "", True),  # TLS: the password is encrypted
        ("require", "", True),
        ("disable", "require_auth=password", True),
        ("disable", "require_auth=md5,password", True),
        ("disable", "require_auth=!md5", False),  # allowed by omission only: not enough
    ],
)
def test_a_cleartext_password_over_tcp_needs_tls_or_require_auth(
    auth_cluster, tmp_path, monkeypatch, sslmode, rule, ok
):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.postgresql/root.crt
    dsn = auth_cluster.tcp_dsn("pw_user", sslmode) + (" " + rule if rule else "")
    if ok:
        conn = pgwire.connect(dsn, _deadline())
        try:
            assert _who(conn)[0] == "pw_user"
            assert _ssl_in_use(conn) is (sslmode != "disable")
        finally:
            conn.close()
        return
    with pytest.raises(DatabaseError, match="clear text over TCP without TLS") as err:
        pgwire.connect(dsn, _deadline())
    assert PASSWORDS["pw_user"] not in str(err.value)


def _without_sslmode(dsn):
    return " ".join(p for p in dsn.split(" ") if not p.startswith("sslmode="))


def test_sslrootcert_system_means_verify_full(auth_cluster, tmp_path, monkeypatch):
    """libpq 16+: sslrootcert=system makes verify-full the default and refuses a weaker
    sslmode. The system's roots are made ours with SSL_CERT_FILE (OpenSSL reads it)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SSL_CERT_FILE", auth_cluster.cert)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    c = auth_cluster
    dsn = _without_sslmode(c.tcp_dsn("scram_user", "", host="localhost", sslrootcert="system"))
    conn = pgwire.connect(dsn, _deadline())
    try:
        assert _ssl_in_use(conn) is True
    finally:
        conn.close()
    # a name the certificate does not carry, at the same address: the host name is checked
    wrong = dsn.replace("host=localhost", "host=wrong.invalid hostaddr=127.0.0.1")
    with pytest.raises(DatabaseError, match="[Hh]ostname mismatch|doesn't match"):
        pgwire.connect(wrong, _deadline())
    # ...and only the name: with the same root as a file, verify-ca accepts that server
    ca = wrong.replace("sslrootcert=system", f"sslrootcert={c.cert} sslmode=verify-ca")
    pgwire.connect(ca, _deadline()).close()
    for weaker in ("verify-ca", "require", "prefer", "allow", "disable"):
        with pytest.raises(DatabaseError, match=f'weak sslmode "{weaker}" may not be used'):
            pgwire.connect(dsn + " sslmode=" + weaker, _deadline())
    with pytest.raises(DatabaseError, match='weak sslmode "prefer"'):
        pgwire.connect(dsn, _deadline(), environ={"PGSSLMODE": "prefer"})


def test_tls_context_for_system_roots_checks_the_host_name():
    for mode in ("verify-full", "require"):  # require: never reached through connect()
        context = pgwire._tls_context({"sslrootcert": "system"}, mode)
        assert context.check_hostname is True
        assert context.verify_mode == ssl.CERT_REQUIRED


class _FakeServer:
    """A TCP listener that answers every connection with fixed bytes, then stays silent."""

    def __init__(self, answer):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.answer = answer
        self.clients = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            while True:
                client, _ = self.sock.accept()
                self.clients.append(client)
                client.recv(8)
                client.sendall(self.answer)
        except OSError:
            pass

    def close(self):
        self.sock.close()
        for client in self.clients:
            client.close()


@pytest.mark.parametrize(
    ("answer", "sslmode", "message"),
    [
        (b"N", "require", "does not support TLS"),
        (b"SXYZ", "require", "unencrypted data after the TLS response"),
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "require", "not PostgreSQL"),
        (b"S", "require", "timed out"),  # says yes, then never does the handshake
        # no TLS asked: an authentication request for GSSAPI (code 7)
        (b"R\0\0\0\x08\0\0\0\x07", "disable", "unsupported authentication method GSSAPI"),
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "disable", "not PostgreSQL"),
        # SCRAM asked, then "authenticated" without the server proving it knows the password
        (
            b"R\0\0\0\x17\0\0\0\x0aSCRAM-SHA-256\0\0R\0\0\0\x08\0\0\0\0Z\0\0\0\x05I",
            "disable",
            "ended the exchange unverified",
        ),
    ],
)
def test_protocol_violations_are_refused_clearly(answer, sslmode, message):
    server = _FakeServer(answer)
    try:
        dsn = f"host=127.0.0.1 port={server.port} user=u password=s3cret sslmode={sslmode}"
        start = time.monotonic()
        with pytest.raises(DatabaseError, match=message) as err:
            pgwire.connect(dsn, time.monotonic() + 0.3)
        assert time.monotonic() - start < 0.3 + 0.1
        assert "s3cret" not in str(err.value)
    finally:
        server.close()


# -- Python 3.6 (EL8's system Python, what pbs_server embeds there) ------------------------

PY36 = Path(os.path.expanduser("~/.pyenv/versions/3.6.15/bin/python3.6"))
REPO = Path(__file__).resolve().parents[1]


def test_runs_on_python36(auth_cluster, fresh_dsn):
    """pgwire, dsn and lookup on Python 3.6: every auth method, TLS, a history lookup."""
    from helpers_runtime import need_runtime

    need_runtime(PY36, "pgwire, dsn and lookup on Python 3.6 (EL8)")
    from helpers_history import add_jobs
    from test_dsn import CASES

    add_jobs(fresh_dsn, "alice", [(100, 1000, 10), (200, None, 20)])
    c = auth_cluster
    dsns = [c.socket_dsn(u, p) for u, p in PASSWORDS.items()]
    dsns += [c.tcp_dsn("scram_user", "require"), c.tcp_dsn("md5_user", "disable")]
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1])\n"
        "from softwalltime.hookpath import pgwire, lookup, dsn\n"
        "for d in sys.argv[3:-1]:\n"
        "    c = pgwire.connect(d, time.monotonic() + 5)\n"
        "    print(c.query('SELECT current_user, $1::int', (7,), time.monotonic() + 5))\n"
        "    assert c.quiet()\n"
        "    c.close()\n"
        "print(lookup.recent_jobs(sys.argv[2], 'alice', 5))\n"
        "import json\n"
        "for d in json.loads(sys.argv[-1]):\n"
        "    print(json.dumps([dsn.parse(d), dsn.redact(d), dsn.describe(d)], sort_keys=True))\n"
    )
    dsn_cases = [case[0] for case in CASES]
    expected_dsn = [
        json.dumps([dsnlib.parse(d), dsnlib.redact(d), dsnlib.describe(d)], sort_keys=True)
        for d in dsn_cases
    ]
    out = subprocess.run(
        [str(PY36), "-I", "-S", "-c", code, str(REPO), fresh_dsn, *dsns, json.dumps(dsn_cases)],
        capture_output=True, text=True, timeout=60, check=False,
        env={"HOME": "/nonexistent", "PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    users = list(PASSWORDS) + ["scram_user", "md5_user"]
    assert out.stdout.splitlines() == [f"[('{u}', 7)]" for u in users] + [
        "[(200, None), (100, 1000)]",
        *expected_dsn,
    ]
    assert sys.version_info >= (3, 6)


# -- keywords libpq refuses, and requirements this client cannot meet ---------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("sslmdoe=require", 'invalid connection option "sslmdoe"'),
        ("sslmode=requir", 'invalid sslmode value: "requir"'),
        ("channel_binding=require", "channel_binding=require is not supported"),
        ("gssencmode=require", "gssencmode=require is not supported"),
        ("require_auth=md5,!password", "invalid require_auth value"),
    ],
)
def test_keywords_refused_like_libpq(auth_cluster, extra, message):
    dsn = auth_cluster.socket_dsn("scram_user", PASSWORDS["scram_user"]) + " " + extra
    with pytest.raises(DatabaseError, match=message):
        pgwire.connect(dsn, _deadline())


def test_requiressl_means_sslmode_require(auth_cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    dsn = auth_cluster.tcp_dsn("scram_user", "prefer").replace("sslmode=prefer", "requiressl=1")
    conn = pgwire.connect(dsn, _deadline())
    try:
        assert _ssl_in_use(conn) is True
    finally:
        conn.close()
    server = _FakeServer(b"N")
    try:
        with pytest.raises(DatabaseError, match="does not support TLS"):
            pgwire.connect(f"host=127.0.0.1 port={server.port} requiressl=1", _deadline(0.5))
    finally:
        server.close()


@pytest.mark.parametrize(
    ("user", "rule", "ok"),
    [
        ("scram_user", "scram-sha-256", True),
        ("md5_user", "scram-sha-256", False),
        ("pw_user", "!password", False),
        ("pw_user", "!md5,!none", True),
        ("md5_user", "md5,password", True),
        ("trust", "none", True),
        ("trust", "!none", False),
        ("trust", "scram-sha-256", False),
    ],
)
def test_require_auth(auth_cluster, user, rule, ok):
    if user == "trust":
        dsn = auth_cluster.socket_dsn(auth_cluster.cluster.superuser)
    else:
        dsn = auth_cluster.socket_dsn(user, PASSWORDS[user])
    dsn += " require_auth=" + rule
    if ok:
        pgwire.connect(dsn, _deadline()).close()
    else:
        with pytest.raises(DatabaseError, match="authentication method requirement") as err:
            pgwire.connect(dsn, _deadline())
        assert all(p not in str(err.value) for p in PASSWORDS.values())


def test_hosts_share_the_deadline_and_connect_timeout_bounds_each(auth_cluster):
    """A host that accepts and never answers must not starve the next one of the list."""
    from helpers_history import HangingServer

    server = HangingServer()
    try:
        dsn = auth_cluster.tcp_dsn("md5_user", "disable").replace(
            "host=127.0.0.1", "host=127.0.0.1,127.0.0.1"
        )
        dsn = dsn.replace(f"port={auth_cluster.port}", f"port={server.port},{auth_cluster.port}")
        # by default the first host gets half of the time (two hosts), the second answers
        start = time.monotonic()
        conn = pgwire.connect(dsn, time.monotonic() + 1.0)
        elapsed = time.monotonic() - start
        try:
            assert _who(conn)[0] == "md5_user"
        finally:
            conn.close()
        assert 0.45 < elapsed < 1.0 + 0.1, elapsed
        # connect_timeout bounds each host further, at least 2 s as in libpq: 2 s here,
        # less than the first host's share (3 s of 6)
        start = time.monotonic()
        conn = pgwire.connect(dsn + " connect_timeout=1", time.monotonic() + 6.0)
        elapsed = time.monotonic() - start
        try:
            assert _who(conn)[0] == "md5_user"
        finally:
            conn.close()
        assert 1.9 < elapsed < 2.5, elapsed
        with pytest.raises(DatabaseError, match='invalid integer value "x"'):
            pgwire.connect(dsn + " connect_timeout=x", _deadline())
    finally:
        server.close()


def test_host_deadline_unit():
    # two hosts left, 1 s left: half each; the last host gets all that is left
    assert pgwire._host_deadline(10.0, 11.0, 2, 0) == pytest.approx(10.5)
    assert pgwire._host_deadline(10.0, 11.0, 1, 0) == pytest.approx(11.0)
    # connect_timeout bounds a host further, at least 2 s; never beyond its share
    assert pgwire._host_deadline(10.0, 20.0, 2, 1) == pytest.approx(12.0)
    assert pgwire._host_deadline(10.0, 20.0, 2, 3) == pytest.approx(13.0)
    assert pgwire._host_deadline(10.0, 13.0, 2, 5) == pytest.approx(11.5)
    assert pgwire._host_deadline(12.0, 11.0, 3, 0) == pytest.approx(12.0)  # none left


def test_a_stale_prepared_statement_is_prepared_again(auth_cluster):
    """DEALLOCATE (or a pooler's other session) and ALTER TABLE invalidate the hook's
    prepared lookup; the next query prepares it again instead of failing the event."""
    admin = auth_cluster.admin()
    conn = pgwire.connect(auth_cluster.cluster.dsn("postgres"), _deadline())
    try:
        with admin.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS stale; CREATE TABLE stale (a int)")
            cur.execute("INSERT INTO stale VALUES (1)")
        q = "SELECT * FROM stale WHERE a >= $1"
        for _ in range(2):
            assert conn.query(q, (0,), _deadline(), prepare=True) == [(1,)]
        conn.query("DEALLOCATE ALL", (), _deadline())
        assert conn.query(q, (0,), _deadline(), prepare=True) == [(1,)]
        with admin.cursor() as cur:
            cur.execute("ALTER TABLE stale ADD COLUMN b text DEFAULT 'x'")
        assert conn.query(q, (0,), _deadline(), prepare=True) == [(1, "x")]
        # a real error is still raised, and the connection stays usable
        with pytest.raises(pgwire.PgError) as err:
            conn.query("SELECT 1/$1", (0,), _deadline(), prepare=True)
        assert err.value.sqlstate == "22012"
        assert conn.query(q, (0,), _deadline(), prepare=True) == [(1, "x")]
    finally:
        conn.close()
        with admin.cursor() as cur:
            cur.execute("DROP TABLE stale")
        admin.close()


# -- name resolution within the deadline (issue 32, item 11) --------------------------------


class _Resolver:
    """A stand-in for getaddrinfo: answers ``names`` (name -> numeric host) at once, and
    for any other name never answers (a silent DNS server) until released."""

    def __init__(self, names):
        self.names = names
        self.asked = []
        self.release = threading.Event()

    def __call__(self, host, port, *args):
        self.asked.append(host)
        if host in self.names:
            return socket.getaddrinfo(self.names[host], port, *args)
        self.release.wait(60)  # the silent server; released at the end of the test
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")


@pytest.fixture()
def resolver(monkeypatch):
    from softwalltime.hook.state import STATE

    STATE.reset()
    fake = _Resolver({})
    monkeypatch.setattr(pgwire, "GETADDRINFO", fake)
    yield fake
    fake.release.set()
    STATE.reset()


def test_a_silent_dns_server_costs_the_deadline_not_10_s(resolver):
    """Before: getaddrinfo blocked the event 10 s per nameserver, whatever its deadline.
    Now the event waits for the resolver's thread until its deadline, then says so; the
    thread is left running, and the next event waits on it rather than starting another."""
    dsn = "host=db.example port=5432 dbname=x user=u sslmode=disable"
    start = time.monotonic()
    with pytest.raises(DatabaseError, match=r"timed out resolving db\.example after 1\.0 s"):
        pgwire.connect(dsn, time.monotonic() + 1.0)
    assert time.monotonic() - start < 5  # a 1 s deadline, against 10 s blocked before
    with pytest.raises(DatabaseError, match=r"timed out resolving db\.example"):
        pgwire.connect(dsn, time.monotonic() + 0.2)
    assert resolver.asked == ["db.example"]  # one thread for the two events


def test_the_last_address_a_name_had_is_used_when_the_dns_falls_silent(auth_cluster, resolver):
    resolver.names["db.example"] = "127.0.0.1"
    dsn = auth_cluster.tcp_dsn("md5_user", "disable", host="db.example")
    conn = pgwire.connect(dsn, _deadline())
    assert _who(conn) == ("md5_user", 42)
    conn.close()
    del resolver.names["db.example"]  # the DNS server falls silent
    conn = pgwire.connect(dsn, _deadline(1.0))
    try:
        assert _who(conn) == ("md5_user", 42)
    finally:
        conn.close()
    assert resolver.asked == ["db.example", "db.example"]


def test_a_numeric_host_asks_no_resolver(auth_cluster, resolver):
    conn = pgwire.connect(auth_cluster.tcp_dsn("md5_user", "disable"), _deadline())
    try:
        assert _who(conn) == ("md5_user", 42)
    finally:
        conn.close()
    assert resolver.asked == []
