"""The real-PBS harness's tarball resolver (``tests/pbs/server/tarball.sh``, issue 49).

Order: ``$OPENPBS_TARBALL``, then the cache, then a download into the cache; every tarball
is checked against the pinned sha256; each failure is one line on stderr. The tests use
small fake tarballs; those that must find one accepted run a copy of the scripts whose pin
is the fake's, and the rest run the real script with the real pin. Downloads go to
127.0.0.1 only: a port that refuses, or a server started here.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HARNESS = REPO / "tests" / "pbs" / "server"
NAME = "openpbs-23.06.06.tar.gz"
# The sha256 of the v23.06.06 tag archive (the copy cached on the development machines).
PIN = "9ac9e5297248121aef1c151688f4093567efcd2494d6641c8c110e26d763ef76"
FAKE = b"not really openpbs 23.06.06\n"
FAKE_SHA = hashlib.sha256(FAKE).hexdigest()


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The caller's environment without any tarball setting of its own (CI exports
    OPENPBS_TARBALL), with the cache in ``tmp_path`` and HOME there too."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OPENPBS_") and k not in ("SOFTWALLTIME_CACHE_DIR", "XDG_CACHE_HOME")
    }
    env["HOME"] = str(tmp_path / "home")
    env["SOFTWALLTIME_CACHE_DIR"] = str(tmp_path / "cache")
    env.update(extra)
    return env


def _resolve(script_dir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(script_dir / "tarball.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def fake_pinned(tmp_path: Path) -> Path:
    """A copy of the harness's resolver whose pin is the fake tarball's sha256."""
    copy = tmp_path / "harness"
    copy.mkdir()
    shutil.copy2(HARNESS / "tarball.sh", copy / "tarball.sh")
    env_sh = (HARNESS / "env.sh").read_text()
    pinned, n = re.subn(r"(?m)^OPENPBS_SHA256=\w+$", f"OPENPBS_SHA256={FAKE_SHA}", env_sh)
    assert n == 1
    (copy / "env.sh").write_text(pinned)
    return copy


@pytest.fixture
def closed_url() -> Iterator[str]:
    """An address on 127.0.0.1 whose port is bound here but not listening: refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/{NAME}"


@pytest.fixture
def serving() -> Iterator[str]:
    """An HTTP server on 127.0.0.1 that answers every GET with the fake tarball."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
            self.send_response(200)
            self.send_header("Content-Length", str(len(FAKE)))
            self.end_headers()
            self.wfile.write(FAKE)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{NAME}"
    finally:
        server.shutdown()
        server.server_close()


def test_production_pins_the_cached_tag_archive() -> None:
    env_sh = (HARNESS / "env.sh").read_text()
    assert re.findall(r"(?m)^OPENPBS_SHA256=(\w+)$", env_sh) == [PIN]
    url = subprocess.run(
        ["bash", "-c", '. "$1" && echo "$OPENPBS_DEFAULT_URL"', "-", str(HARNESS / "env.sh")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert url == "https://github.com/openpbs/openpbs/archive/refs/tags/v23.06.06.tar.gz\n"


def test_openpbs_tarball_comes_first(tmp_path: Path, fake_pinned: Path, closed_url: str) -> None:
    given = tmp_path / "given" / NAME
    given.parent.mkdir()
    given.write_bytes(FAKE)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / NAME).write_bytes(FAKE)
    got = _resolve(fake_pinned, _env(tmp_path, OPENPBS_TARBALL=str(given), OPENPBS_URL=closed_url))
    assert (got.returncode, got.stdout, got.stderr) == (0, f"{given}\n", "")


def test_the_cache_comes_next(tmp_path: Path, fake_pinned: Path, closed_url: str) -> None:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / NAME).write_bytes(FAKE)
    got = _resolve(fake_pinned, _env(tmp_path, OPENPBS_URL=closed_url))
    assert (got.returncode, got.stdout, got.stderr) == (0, f"{tmp_path / 'cache' / NAME}\n", "")


def test_the_default_cache_is_under_xdg_cache_home(
    tmp_path: Path, fake_pinned: Path, closed_url: str
) -> None:
    env = _env(tmp_path, OPENPBS_URL=closed_url, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    del env["SOFTWALLTIME_CACHE_DIR"]
    cached = tmp_path / "xdg" / "softwalltime" / NAME
    cached.parent.mkdir(parents=True)
    cached.write_bytes(FAKE)
    got = _resolve(fake_pinned, env)
    assert (got.returncode, got.stdout) == (0, f"{cached}\n")


def test_a_download_lands_in_the_cache_once_checked(
    tmp_path: Path, fake_pinned: Path, serving: str
) -> None:
    got = _resolve(fake_pinned, _env(tmp_path, OPENPBS_URL=serving))
    cached = tmp_path / "cache" / NAME
    assert (got.returncode, got.stdout, got.stderr) == (0, f"{cached}\n", "")
    assert cached.read_bytes() == FAKE
    assert sorted(p.name for p in cached.parent.iterdir()) == [NAME]


def test_a_download_with_another_sha256_is_refused_and_not_kept(
    tmp_path: Path, serving: str
) -> None:
    got = _resolve(HARNESS, _env(tmp_path, OPENPBS_URL=serving))
    assert got.returncode != 0
    assert got.stdout == ""
    assert len(got.stderr.splitlines()) == 1
    assert f"sha256 {FAKE_SHA}, not the pinned {PIN}" in got.stderr
    assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.parametrize("where", ["OPENPBS_TARBALL", "cache"])
def test_a_wrong_sha256_is_one_line_and_a_failure(
    tmp_path: Path, closed_url: str, where: str
) -> None:
    fake = tmp_path / "cache" / NAME
    fake.parent.mkdir()
    fake.write_bytes(FAKE)
    extra = {"OPENPBS_TARBALL": str(fake)} if where == "OPENPBS_TARBALL" else {}
    got = _resolve(HARNESS, _env(tmp_path, OPENPBS_URL=closed_url, **extra))
    assert got.returncode == 1
    assert got.stdout == ""
    assert got.stderr.count("\n") == 1
    assert got.stderr.startswith(f"tarball.sh: {fake} has sha256 {FAKE_SHA}, not the pinned {PIN}")


def test_openpbs_tarball_naming_no_file_is_one_line(tmp_path: Path, closed_url: str) -> None:
    missing = tmp_path / NAME
    got = _resolve(HARNESS, _env(tmp_path, OPENPBS_TARBALL=str(missing), OPENPBS_URL=closed_url))
    assert (got.returncode, got.stdout) == (1, "")
    assert got.stderr == f"tarball.sh: OPENPBS_TARBALL={missing} is not a file\n"


def test_no_tarball_and_no_network_says_how_to_provide_one(tmp_path: Path, closed_url: str) -> None:
    got = _resolve(HARNESS, _env(tmp_path, OPENPBS_URL=closed_url))
    cached = tmp_path / "cache" / NAME
    assert got.returncode == 1
    assert got.stdout == ""
    assert got.stderr.count("\n") == 1
    assert f"the download of {closed_url} failed" in got.stderr
    assert f"OPENPBS_TARBALL=/path/to/{NAME}" in got.stderr
    assert f"copy it to {cached}" in got.stderr
    assert list(cached.parent.iterdir()) == []  # no partial file left behind


def test_make_test_pbs_starts_the_server_of_the_harness() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"(?m)^test-pbs:.*\bpbs-up\b", makefile)
    assert re.search(
        r"(?m)^pbs-up:\n\t\$\(PBS_HARNESS\)/build.sh\n\t\$\(PBS_HARNESS\)/up.sh$", makefile
    )
    assert "PBS_HARNESS := tests/pbs/server" in makefile
