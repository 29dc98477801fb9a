"""The package's parts that need no package build (issue 21): the units verified by
systemd-analyze, the maintainer scripts' syntax and arguments, the shipped configuration
loaded by the product's own loader, and the ACL helper's round trip on a scratch tree.

The built .deb is tested on the real OpenPBS host (tests/pbs/test_package_real.py), the RPM
in tests/test_packaging_rpm.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_runtime import need_runtime, skip_or_fail

from softwalltime.core.config import load_settings

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "packaging"
UNITS = sorted((PKG / "systemd").iterdir())
MAINT = PKG / "libexec" / "softwalltime-maint"
SCRIPTS = [PKG / "debian" / n for n in ("postinst", "prerm", "postrm")]
SHELL = [*SCRIPTS, MAINT, *(PKG / f"build-{n}.sh" for n in ("venv", "wheels", "deb", "rpm"))]


def unit(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_the_units_verify(tmp_path):
    """``systemd-analyze verify`` with the package's executables stubbed at a scratch path
    (it checks that every ExecStart exists and every directive is known)."""
    need_runtime("/usr/bin/systemd-analyze", "the systemd units")
    stub = tmp_path / "bin"
    stub.mkdir()
    for name in ("softwalltime", "softwalltime-ingest"):
        (stub / name).write_text("#!/bin/sh\n")
        (stub / name).chmod(0o755)
    for path in UNITS:
        text = path.read_text().replace("/opt/softwalltime/bin/", f"{stub}/")
        (tmp_path / path.name).write_text(text)
    proc = subprocess.run(
        ["systemd-analyze", "verify", *(str(tmp_path / p.name) for p in UNITS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr


def test_each_service_has_its_timer_and_who_runs_it():
    names = {p.name for p in UNITS}
    for job, every in (
        ("ingest", "*:0/5"),
        ("refresh", "*:0/15"),
        ("status", "minutely"),
        ("calibrate", "*:2/10"),
        ("wait-publish", "*:1/5"),
    ):
        assert {f"softwalltime-{job}.service", f"softwalltime-{job}.timer"} <= names
        timer = unit(PKG / "systemd" / f"softwalltime-{job}.timer")
        assert timer["OnCalendar"] == [every] and timer["WantedBy"] == ["timers.target"]
    ingest = unit(PKG / "systemd" / "softwalltime-ingest.service")
    assert ingest["User"] == ["softwalltime"] and ingest["NoNewPrivileges"] == ["yes"]
    assert ingest["ExecStart"] == ["/opt/softwalltime/bin/softwalltime-ingest --no-progress"]
    # status stays root (hook data, server logs), sandboxed; refresh runs as the user, a PBS
    # operator, after a root-only step that hands it the hook's listing and config
    assert "User" not in unit(PKG / "systemd" / "softwalltime-status.service")
    assert "User" not in unit(PKG / "systemd" / "softwalltime-wait-publish.service")  # qmgr
    calibrate = unit(PKG / "systemd" / "softwalltime-calibrate.service")
    assert calibrate["User"] == ["softwalltime"]
    assert calibrate["ExecStart"] == ["/opt/softwalltime/bin/softwalltime calibrate"]
    refresh = unit(PKG / "systemd" / "softwalltime-refresh.service")
    assert refresh["User"] == ["softwalltime"]
    assert refresh["ExecStartPre"] == [
        "+/opt/softwalltime/bin/softwalltime refresh --export-hook /run/softwalltime/hook.json"
    ]
    assert refresh["ExecStart"] == [
        "/opt/softwalltime/bin/softwalltime refresh --hook-file /run/softwalltime/hook.json"
    ]
    status = unit(PKG / "systemd" / "softwalltime-status.service")
    assert "--prometheus ${SOFTWALLTIME_PROMETHEUS_FILE}" in status["ExecStart"][0]
    # the executables are the project's console scripts
    pyproject = (REPO / "pyproject.toml").read_text()
    section = pyproject.split("[project.scripts]")[1].split("\n[")[0]
    scripts = set(re.findall(r"^([\w-]+) =", section, re.M))
    for path in UNITS:
        u = unit(path)
        for command in u.get("ExecStartPre", []) + u.get("ExecStart", []):
            assert Path(command.lstrip("+").split()[0]).name in scripts


@pytest.mark.parametrize("path", SHELL, ids=lambda p: p.name)
def test_shell_scripts_parse(path):
    assert os.access(path, os.X_OK), f"{path} is not executable"
    first = path.read_text().splitlines()[0]
    assert first == "#!/bin/sh", first  # dash on Debian: no bashisms in maintainer scripts
    proc = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_maintainer_scripts_refuse_unknown_arguments(script):
    proc = subprocess.run([str(script), "bogus"], capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "unknown argument 'bogus'" in proc.stderr


def test_maintainer_scripts_call_only_actions_the_helper_has():
    actions = set(re.findall(r"^(\S+)\)", MAINT.read_text(), re.M)) - {"*"}
    called = set()
    for path in [*SCRIPTS, PKG / "softwalltime.spec"]:
        called |= set(re.findall(r"(?:\$M|%\{maint\}) ([a-z-]+)", path.read_text()))
    assert called and called <= actions, called - actions
    # every unit the package ships is one the helper stops and disables on removal
    listed = re.findall(r"^(?:TIMERS|SERVICES)=\"(.*)\"$", MAINT.read_text(), re.M)
    assert sorted(" ".join(listed).split()) == sorted(p.name for p in UNITS)
    # removal undoes installation: each step has its opposite
    assert {"user-add", "acl-add", "acl-del", "hook-del", "units-stop"} <= called


def test_the_shipped_config_loads_and_holds_no_secret():
    settings = load_settings(str(PKG / "softwalltime.json"), environ={})
    assert settings.dsn is None and settings.predictor == "v3"
    conffiles = (PKG / "debian" / "conffiles").read_text().split()
    assert conffiles == ["/etc/softwalltime.json", "/etc/default/softwalltime"]
    # the environment file: every setting commented out, only variables the units read
    env = (PKG / "softwalltime.env").read_text()
    assert all(not line or line.startswith("#") for line in env.splitlines())
    named = set(re.findall(r"^#(SOFTWALLTIME_\w+)=", env, re.M))
    assert named == {"SOFTWALLTIME_DSN", "SOFTWALLTIME_PROMETHEUS_FILE"}


@pytest.fixture()
def scratch_user() -> Iterator[str]:
    """A system user of this test only (the ACL helper's user)."""
    if os.geteuid() != 0:
        skip_or_fail("needs root (useradd, setfacl)", "CI runs as root")
    need_runtime("/usr/bin/setfacl", "the package's ACL on the accounting directory")
    name = f"swtacl{os.getpid()}"
    subprocess.run(["useradd", "--system", "--no-create-home", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False)


def _acl(paths: list[Path]) -> list[str]:
    return [
        subprocess.run(["getfacl", "-p", str(p)], capture_output=True, text=True).stdout
        for p in paths
    ]


def test_acl_add_lets_the_user_read_and_acl_del_restores_everything(tmp_path, scratch_user):
    home = tmp_path / "pbs"
    priv = home / "server_priv"
    acct = priv / "accounting"
    acct.mkdir(parents=True)
    priv.chmod(0o750)  # as PBS has it: others may not enter
    tmp_path.chmod(0o755)
    old = acct / "20261124"
    old.write_text("an old day\n")
    old.chmod(0o600)  # a site that keeps its accounting files private
    conf = tmp_path / "pbs.conf"
    conf.write_text(f"PBS_EXEC=/nonexistent\nPBS_HOME={home}\n")
    paths = [tmp_path, home, priv, acct, old]
    before = _acl(paths)
    env = dict(os.environ, PBS_CONF_FILE=str(conf), SOFTWALLTIME_MAINT_USER=scratch_user)

    def maint(action: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(MAINT), action], env=env, capture_output=True, text=True)

    def can_read(path: Path) -> bool:
        cmd = ["runuser", "-u", scratch_user, "--", "cat", str(path)]
        return subprocess.run(cmd, capture_output=True, check=False).returncode == 0

    assert not can_read(old)
    proc = maint("acl-add")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    new = acct / "20261125"
    new.write_text("today\n")  # pbs_server's next file: the default ACL lets it be read
    assert can_read(old) and can_read(new)
    ls = subprocess.run(["runuser", "-u", scratch_user, "--", "ls", str(acct)], text=True,
                        capture_output=True, check=False)  # fmt: skip
    assert ls.stdout.split() == ["20261124", "20261125"]
    proc = maint("acl-del")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert _acl(paths) == before
    assert not can_read(old)
    assert oct(new.stat().st_mode & 0o777) == oct(0o644 & ~_umask())  # as if no ACL had been


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_acl_add_without_pbs_says_so_and_succeeds(tmp_path):
    conf = tmp_path / "pbs.conf"
    conf.write_text(f"PBS_HOME={tmp_path / 'nothing'}\n")
    proc = subprocess.run(
        [str(MAINT), "acl-add"],
        env=dict(os.environ, PBS_CONF_FILE=str(conf), SOFTWALLTIME_MAINT_USER="nobody"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0
    assert "no accounting directory" in proc.stderr


def test_hook_del_without_pbs_says_so_and_succeeds(tmp_path):
    """The package's own uninstall, with the admin's pbs_exec: no qmgr there, one line."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "softwalltime").symlink_to(Path(sys.executable).parent / "softwalltime")
    cfg = tmp_path / "softwalltime.json"
    cfg.write_text('{"pbs_exec": "/nonexistent"}')
    env = dict(
        os.environ,
        PATH="/usr/bin:/bin",
        SOFTWALLTIME_MAINT_PREFIX=str(venv),
        SOFTWALLTIME_CONFIG=str(cfg),
    )
    proc = subprocess.run([str(MAINT), "hook-del"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0
    assert "qmgr of pbs_exec /nonexistent/bin/qmgr: no such file" in proc.stderr


def test_postinst_compiles_the_bytecode_and_prerm_removes_it(tmp_path):
    """Issue 52: the .deb ships no __pycache__ (lintian: package-installs-python-pycache-dir);
    postinst compiles it at configure, before the hook is updated, and prerm removes it, on
    an upgrade too, as dh_python does."""
    postinst = (PKG / "debian" / "postinst").read_text()
    configure = postinst.split("configure)", 1)[1].split(";;", 1)[0]
    assert '"$M" pyc-compile' in configure
    assert configure.index("pyc-compile") < configure.index("hook-update")
    prerm = (PKG / "debian" / "prerm").read_text()
    branches = dict(re.findall(r"^([a-z| -]+)\)\n(.*?);;", prerm, re.M | re.S))
    assert '"$M" pyc-remove' in branches["remove | deconfigure"]
    assert '"$M" pyc-remove' in branches["upgrade | failed-upgrade"]
    # the helper's actions on a venv-like prefix
    prefix = tmp_path / "opt"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    module = prefix / "lib" / "site" / "pkg" / "mod.py"
    module.parent.mkdir(parents=True)
    module.write_text("X = 1\n")
    env = {**os.environ, "SOFTWALLTIME_MAINT_PREFIX": str(prefix)}

    def maint(action: str) -> None:
        proc = subprocess.run([str(MAINT), action], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr

    maint("pyc-compile")
    assert [p.name.split(".")[0] for p in (module.parent / "__pycache__").glob("*.pyc")] == ["mod"]
    maint("pyc-remove")
    assert not list(prefix.rglob("__pycache__")) and module.is_file()
    maint("pyc-remove")  # nothing left to remove: still done


def test_hook_del_without_the_package_s_command_says_what_to_run(tmp_path):
    env = dict(os.environ, SOFTWALLTIME_MAINT_PREFIX=str(tmp_path / "gone"))
    proc = subprocess.run([str(MAINT), "hook-del"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0
    assert "qmgr -c 'delete hook softwalltime'" in proc.stderr
