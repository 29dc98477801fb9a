"""The .deb's documentation (issue 21): the pages by task beside the README, with the picture
they show, and a man page per command that ``man`` renders.

Built once per session with ``packaging/build-deb.sh`` (about 40 s, more on a loaded
machine; ``SOFTWALLTIME_TEST_DEB=FILE`` uses a file built already). The package installed,
used and purged on the real OpenPBS host is tests/pbs/test_package_real.py.
"""

from __future__ import annotations

import gzip
import os
import subprocess
from pathlib import Path

import pytest
from helpers_packaging import build_package
from helpers_runtime import need_runtime

import softwalltime
from softwalltime.cli import manpage

pytestmark = pytest.mark.slow  # see pyproject's markers: not in make test-fast

REPO = Path(__file__).resolve().parents[1]
DOC = "/usr/share/doc/softwalltime"
MAN = "/usr/share/man/man1"


@pytest.fixture(scope="session")
def deb_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("SOFTWALLTIME_TEST_DEB")
    if given:
        return Path(given)
    need_runtime("/usr/bin/dpkg-deb", "the .deb")
    return build_package("build-deb.sh", tmp_path_factory.mktemp("deb"))


@pytest.fixture(scope="session")
def unpacked(deb_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("debroot")
    subprocess.run(["dpkg-deb", "-x", str(deb_file), str(root)], check=True)
    return root


def test_the_docs_pages_and_their_picture(unpacked):
    docs = unpacked / DOC.lstrip("/")
    wanted = {p.name for p in (REPO / "docs").iterdir() if p.suffix in (".md", ".png")}
    assert {"install.md", "report.png"} <= wanted
    assert {p.name for p in (docs / "docs").iterdir()} == wanted
    assert (docs / "README.md").read_bytes() == (REPO / "README.md").read_bytes()
    # the README's links into docs/ resolve in the installed layout too
    assert "(docs/install.md)" in (docs / "README.md").read_text()


def test_a_man_page_per_command_that_man_renders(unpacked):
    man1 = unpacked / MAN.lstrip("/")
    names = sorted(p.name for p in man1.iterdir())
    assert names == sorted(f"{name}.1.gz" for name in manpage.pages())
    need_runtime("/usr/bin/man", "that the packaged man pages render (apt-get install man-db)")
    for name in ("softwalltime.1.gz", "softwalltime-db-upgrade.1.gz", "softwalltime-ingest.1.gz"):
        proc = subprocess.run(
            ["man", "--warnings", "-l", str(man1 / name)],
            capture_output=True,
            text=True,
            env=dict(os.environ, LC_ALL="C.UTF-8", MANWIDTH="80"),
            check=False,
        )
        assert proc.returncode == 0 and proc.stderr == "", (name, proc.stderr)
        assert "SEE ALSO" in proc.stdout, name


def test_the_distributions_rules(deb_file, unpacked):
    """Issue 33: what lintian asked for besides the /opt venv's inherent findings."""
    fields = subprocess.run(
        ["dpkg-deb", "-f", str(deb_file)], capture_output=True, text=True, check=True
    ).stdout
    assert "Homepage:" not in fields  # never another project's page
    maintainer = next(ln for ln in fields.splitlines() if ln.startswith("Maintainer:"))
    assert "@" in maintainer and "localhost" not in maintainer
    depends = next(ln for ln in fields.splitlines() if ln.startswith("Depends:"))
    assert "libpq5" in depends and "libc6 (>=" in depends  # psycopg2 on the system's libpq
    site = unpacked / "opt/softwalltime/lib/python3.11/site-packages"
    assert not list(site.glob("psycopg2_binary*"))
    # issue 52: no bytecode shipped (postinst compiles it, prerm removes it)
    assert not list(unpacked.rglob("__pycache__")) and not list(unpacked.rglob("*.pyc"))
    for lib in site.rglob("*.so"):
        assert lib.stat().st_mode & 0o111 == 0, lib
    compiled = sorted(p.name.split(".")[0] for p in (site / "softwalltime/replay").glob("*.so"))
    assert compiled == ["_learned_kernel", "corrections", "easy", "native__mypyc", "profile"]
    # the unpacked venv runs them (its python links to the system's python3.11)
    code = (
        "import softwalltime.replay.native as n, softwalltime.replay.learned_native as k, "
        "psycopg2; print(n.compiled(), k.kernel is not None, psycopg2.__file__)"
    )
    ran = subprocess.run(
        [str(unpacked / "opt/softwalltime/bin/python"), "-I", "-c", code],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("['corrections', 'profile', 'easy'] True " + str(site)), ran.stdout
    doc = unpacked / DOC.lstrip("/")
    changelog = gzip.decompress((doc / "changelog.gz").read_bytes()).decode()
    assert changelog.startswith(f"softwalltime ({softwalltime.__version__}) ")
    assert "Copyright: " in (doc / "copyright").read_text()
    for path in ("usr/lib/sysusers.d/softwalltime.conf", "usr/lib/tmpfiles.d/softwalltime.conf",
                 "usr/share/man/man5/softwalltime.json.5.gz",
                 "usr/share/bash-completion/completions/softwalltime",
                 "usr/share/zsh/vendor-completions/_softwalltime"):  # fmt: skip
        assert (unpacked / path).is_file(), path
