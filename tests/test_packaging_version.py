"""Issue 33: one version story. ``softwalltime.__version__`` is what the command, the wheel,
the packages, the man pages and the install page show, and the newest docs/changelog.md entry;
the docs speak of no version after it as the past."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import softwalltime
from softwalltime.cli import manpage

REPO = Path(__file__).resolve().parents[1]
VERSION = softwalltime.__version__
CHANGELOG = REPO / "packaging" / "changelog.py"
# "until 0.3", "under 0.3": a version spoken of as the past (not "0.3 s" or "0.3 %")
PAST = re.compile(r"\b(?:[Uu]ntil|[Bb]efore|under|[Ss]ince) (\d+)\.(\d+)\b(?! ?[%hms])")


def changelog(what: str) -> str:
    env = {"PATH": "/usr/bin:/bin", "DEBFULLNAME": "A Packager", "DEBEMAIL": "a@example.org"}
    proc = subprocess.run(
        [sys.executable, str(CHANGELOG), what], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_changelog_the_command_and_the_wheel_say_the_same_version(capsys):
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION)
    first = re.search(r"^## (\S+) \(", (REPO / "docs" / "changelog.md").read_text(), re.M)
    assert first and first.group(1) == VERSION
    assert changelog("version").strip() == VERSION
    from softwalltime.cli import main

    try:
        main(["--version"])
    except SystemExit:
        pass
    assert capsys.readouterr().out == f"softwalltime {VERSION}\n"
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'version = { attr = "softwalltime.__version__" }' in pyproject


def test_the_packages_changelogs_and_the_man_pages_carry_it():
    debian = changelog("debian")
    assert debian.startswith(f"softwalltime ({VERSION}) unstable; urgency=medium\n")
    assert re.search(r"^ -- A Packager <a@example.org>  \w{3}, \d\d \w{3} \d{4} ", debian, re.M)
    rpm = changelog("rpm")
    assert re.match(
        rf"\* \w{{3}} \w{{3}} \d\d \d{{4}} A Packager <a@example.org> - {VERSION}-1\n", rpm
    )
    assert "%%" in rpm or "%" not in rpm  # a % would be a macro in the spec
    page = manpage.render_config("2026-01-01")
    assert f'"softwalltime {VERSION}"' in page.splitlines()[0]
    for script in ("build-deb.sh", "build-rpm.sh"):  # the packages take __version__
        assert "softwalltime/__init__.py" in (REPO / "packaging" / script).read_text()


def test_the_install_page_names_this_versions_files_and_no_doc_has_a_later_past():
    install = (REPO / "docs" / "install.md").read_text()
    assert f"softwalltime_{VERSION}_amd64.deb" in install
    assert f"softwalltime-{VERSION}-1.x86_64.rpm" in install
    current = tuple(int(x) for x in VERSION.split("."))
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        if path.name == "changelog.md":
            continue  # the history itself names earlier versions
        for m in PAST.finditer(path.read_text()):
            if int(m.group(1)) == 0:  # the project's versions are 0.x
                assert (0, int(m.group(2))) < current[:2], (path.name, m.group(0))


def test_a_maintainer_on_localhost_is_refused():
    env = {"PATH": "/usr/bin:/bin", "DEBFULLNAME": "root", "DEBEMAIL": "root@localhost"}
    proc = subprocess.run(
        [sys.executable, str(CHANGELOG), "debian"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 1
    assert proc.stderr == "changelog.py: set DEBFULLNAME and DEBEMAIL (a real address)\n"
