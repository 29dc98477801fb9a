"""The .deb's documentation (issue 21): the pages by task beside the README, with the picture
they show, and a man page per command that ``man`` renders.

Built once per session with ``packaging/build-deb.sh`` (about 40 s, more on a loaded
machine; ``SOFTWALLTIME_TEST_DEB=FILE`` uses a file built already). The package installed,
used and purged on the real OpenPBS host is tests/pbs/test_package_real.py.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers_packaging import build_package
from helpers_runtime import need_runtime

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
