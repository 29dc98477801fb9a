"""The RPM built with rpmbuild from packaging/softwalltime.spec (issue 21): its file list,
config files, requirements and scriptlets, and a payload that runs on EL8's glibc.

Built once per session (``packaging/build-rpm.sh``, about 40 s; ``SOFTWALLTIME_TEST_RPM=FILE``
uses a file built already). What this cannot test without an EL machine: ``dnf install`` and
the scriptlets running there (shadow-utils' useradd, EL's setfacl, SELinux labels of
/opt/softwalltime), and ``python3.11`` of EL8.8+/EL9.2+ running the venv.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers_packaging import build_package
from helpers_runtime import need_runtime

from softwalltime.cli import manpage

pytestmark = pytest.mark.slow  # see pyproject's markers: not in make test-fast

REPO = Path(__file__).resolve().parents[1]
VENV = "/opt/softwalltime"
SITE = f"{VENV}/lib/python3.11/site-packages"
DOC = "/usr/share/doc/softwalltime"
OUTSIDE_VENV = {
    "/etc/softwalltime.json",
    "/etc/sysconfig/softwalltime",
    "/usr/bin/softwalltime",
    "/usr/bin/softwalltime-ingest",
    # every unit of packaging/systemd/, at least the three timers of issue 21
    *(f"/usr/lib/systemd/system/{p.name}" for p in (REPO / "packaging" / "systemd").iterdir()),
    DOC,
    f"{DOC}/README.md",
    f"{DOC}/changelog.md",
    f"{DOC}/docs",
    # the pages by task, and the picture the report page shows
    *(f"{DOC}/docs/{p.name}" for p in (REPO / "docs").iterdir() if p.suffix in (".md", ".png")),
    f"{DOC}/examples",
    f"{DOC}/examples/softwalltime.cron",
    # a man page per command and subcommand (tests/test_manpages.py checks that list)
    *(f"/usr/share/man/man1/{name}.1.gz" for name in manpage.pages()),
    "/usr/share/man/man5/softwalltime.json.5.gz",
    # issue 33: the user and its folders the distributions' way, shell completion
    "/usr/lib/sysusers.d/softwalltime.conf",
    "/usr/lib/tmpfiles.d/softwalltime.conf",
    "/usr/share/bash-completion/completions/softwalltime",
    "/usr/share/bash-completion/completions/softwalltime-ingest",
    "/usr/share/zsh/site-functions/_softwalltime",
}
UNITS = {"ingest", "refresh", "status", "prune", "calibrate", "wait-publish"}
EL8_GLIBC = (2, 28)


def rpm(*args: str) -> str:
    return subprocess.run(["rpm", *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="session")
def rpm_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("SOFTWALLTIME_TEST_RPM")
    if given:
        return Path(given)
    need_runtime("/usr/bin/rpmbuild", "the RPM (apt-get install rpm)")
    out = tmp_path_factory.mktemp("rpm")
    return build_package("build-rpm.sh", out)


def test_file_list(rpm_file):
    files = set(rpm("-qlp", str(rpm_file)).split())
    assert {f for f in files if not f.startswith(VENV)} == OUTSIDE_VENV
    for job in UNITS:
        assert f"/usr/lib/systemd/system/softwalltime-{job}.timer" in files
    assert "/usr/share/man/man1/softwalltime-db-upgrade.1.gz" in files
    for needed in (
        f"{VENV}/bin/softwalltime",
        f"{VENV}/bin/softwalltime-ingest",
        f"{VENV}/libexec/softwalltime-maint",
        f"{SITE}/softwalltime/hookfiles/softwalltime_hook.py",
        f"{SITE}/softwalltime_migrations/versions/0006_history_version.py",
        f"{SITE}/psycopg2/__init__.py",
    ):
        assert needed in files
    assert not any("/pip/" in f or "/setuptools/" in f for f in files)
    # every module of ours is compiled in the package: nothing is written at run time
    # (the hook's imports inside pbs_server included), so erasing leaves nothing
    ours = [f for f in files if f.startswith(f"{SITE}/softwalltime") and f.endswith(".py")]
    for source in ours:
        folder, name = source.rsplit("/", 1)
        assert f"{folder}/__pycache__/{name[:-3]}.cpython-311.pyc" in files, source


def test_config_files_are_never_replaced(rpm_file):
    assert set(rpm("-qp", "--configfiles", str(rpm_file)).split()) == {
        "/etc/softwalltime.json",
        "/etc/sysconfig/softwalltime",
    }
    dump = rpm(
        "-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags} %{FILEMODES:perms}\n]", str(rpm_file)
    )
    flags = {line.split()[0]: line.split()[1:] for line in dump.splitlines()}
    for conf in ("/etc/softwalltime.json", "/etc/sysconfig/softwalltime"):
        assert flags[conf] == ["cn", "-rw-r-----"]  # config(noreplace), 0640


def test_requirements_and_metadata(rpm_file):
    requires = {r.split()[0] for r in rpm("-qp", "--requires", str(rpm_file)).splitlines()}
    assert {"python3.11", "acl", "shadow-utils", "systemd"} <= requires
    # issue 33: automatic requirements on; psycopg2 built against the system's libpq
    assert "libpq.so.5()(64bit)" in requires, requires
    assert not any("/opt/softwalltime" in r for r in requires), requires
    # ... and nothing of the private venv offered to other packages
    provides = rpm("-qp", "--provides", str(rpm_file)).split("\n")
    assert all(re.match(r"(config\()?softwalltime\b", p) for p in provides if p), provides
    meta = rpm("-qp", "--qf", "%{URL}|%{PACKAGER}|%{GROUP}|%{VERSION}", str(rpm_file))
    url, packager, group, version = meta.split("|")
    assert url == "(none)"  # never another project's page
    assert "@" in packager and "localhost" not in packager and group == "Applications/System"
    changelog = rpm("-qp", "--changelog", str(rpm_file))
    assert changelog.startswith("* ") and f"- {version}-1\n" in changelog.splitlines()[0] + "\n"
    links = rpm("-qp", "--qf", "[%{FILENAMES} %{FILELINKTOS}\n]", str(rpm_file))
    assert "/usr/bin/softwalltime ../../opt/softwalltime/bin/softwalltime\n" in links


def test_scriptlets(rpm_file):
    text = rpm("-qp", "--scripts", str(rpm_file))
    parts = dict(
        re.findall(
            r"^(\w+) scriptlet \(using /bin/sh\):\n(.*?)(?=^\w+ scriptlet|\Z)", text, re.M | re.S
        )
    )
    assert set(parts) == {"postinstall", "preuninstall", "postuninstall"}
    maint = f"{VENV}/libexec/softwalltime-maint"
    post = parts["postinstall"]
    assert f"{maint} user-add || exit 1" in post
    assert post.index("user-add") < post.index("perms") < post.index("acl-add")
    assert re.search(r'if \[ "\$1" -gt 1 \]; then\s+\S+ hook-update', post)  # upgrades only
    preun = parts["preuninstall"]
    assert re.search(
        r'if \[ "\$1" -eq 0 \]; then\s+\S+ units-stop\s+\S+ hook-del\s+\S+ acl-del\s+fi', preun
    )  # an erase only, never an upgrade: the hook stays when a new version replaces this one
    postun = parts["postuninstall"]
    assert re.search(r'if \[ "\$1" -eq 0 \]; then\s+rm -rf /opt/softwalltime', postun)
    assert "rm -rf /opt/softwalltime /var/lib/softwalltime /run/softwalltime" in postun
    assert not re.search(r"^\s*(userdel|groupdel) ", postun, re.M)  # the user stays
    # the systemd scriptlet macros (or their fallbacks where the build host lacks them)
    timers = "softwalltime-ingest.timer softwalltime-refresh.timer"
    assert "preset" in post and timers in post
    assert "disable --now" in preun and timers in preun
    for body in parts.values():
        assert body.rstrip().endswith("exit 0")  # a failed step never blocks rpm -e


def test_payload_runs_on_el8_glibc(rpm_file, tmp_path):
    """Unpacked with rpm itself: every shared object needs at most EL8's glibc 2.28."""
    need_runtime("/usr/bin/readelf", "the glibc versions of the bundled libraries")
    root = tmp_path / "root"
    subprocess.run(
        ["rpm", "-i", "--root", str(root), "--dbpath", str(tmp_path / "db"), "--nodeps",
         "--noscripts", "--notriggers", "--ignorearch", "--ignoreos", str(rpm_file)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    libs = [p for p in (root / VENV.lstrip("/")).rglob("*.so*") if p.is_file()]
    assert libs
    newest = (0, 0)
    for lib in libs:
        out = subprocess.run(
            ["readelf", "-V", "--wide", str(lib)], capture_output=True, text=True, check=True
        ).stdout
        for major, minor in re.findall(r"GLIBC_(\d+)\.(\d+)", out):
            newest = max(newest, (int(major), int(minor)))
    assert (2, 0) < newest <= EL8_GLIBC, newest
    assert (root / VENV.lstrip("/") / "bin" / "python3").readlink() == Path("/usr/bin/python3.11")
