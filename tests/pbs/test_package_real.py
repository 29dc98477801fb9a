"""The .deb on the real OpenPBS host (issue 21): ``dpkg -i`` of the file ``make deb`` builds,
the hook installed through it with the read-only role of ``db grant``, a job predicted, the
ingester run as the package's user on the real accounting directory, a reinstall, then
``dpkg --purge``: no hook, no file of the package, no user, the ACLs as before. Issue 50
item 8: before the purge a ``job_sort_formula`` reads ``softwalltime_rank``; ``hooks
uninstall`` where PBS cannot be reached prints every command and removes nothing; the purge,
from outside PBS's namespaces with ``pbs_command_prefix`` naming pbsx, leaves no hook,
resource, operator or formula of the product.

The package is built here, before the PBS lock is taken (``packaging/build-deb.sh``, about
a minute; ``SOFTWALLTIME_TEST_DEB=FILE`` uses a file built already). dpkg -i runs inside
PBS's namespaces (``pbsx``), as it would on a PBS server host: its scripts reach the server.

systemd: when it is not PID 1 (a container), the units are checked with ``systemd-analyze
verify`` and the ingester's unit is run by hand as its ``User=`` with its
``EnvironmentFile=``; timers firing, the sandboxing options and the journal are not tested.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pbsctl
import psycopg2
import pytest
from conftest import _new_database, seed, v3
from helpers_packaging import build_package

from softwalltime.db.localpg import LocalCluster
from softwalltime.units import parse_duration

H = 3600
REPO = Path(__file__).resolve().parents[2]
NAME = "softwalltime"
UNITS = Path("/lib/systemd/system")
TIMERS = ("softwalltime-ingest.timer", "softwalltime-refresh.timer", "softwalltime-status.timer")
# Where a package's files or its side effects could be; walked before and after.
ROOTS = ("/opt", "/etc", "/lib/systemd", "/usr/lib/systemd", "/usr/bin", "/usr/share/doc",
         "/usr/share/man", "/var/lib", "/run/lock")  # fmt: skip
SKIP = ("/var/lib/dpkg", "/var/lib/apt")  # dpkg's own database
PBS_HOME = pbsctl.PBS_HOME


def _files() -> set[str]:
    out: set[str] = set()
    for root in ROOTS:
        for here, dirs, names in os.walk(root):
            if here.startswith(SKIP):
                dirs[:] = []
                continue
            out.update(os.path.join(here, n) for n in dirs + names)
    return out


def _ours(paths: set[str], package_files: set[str]) -> list[str]:
    """The paths that belong to the package. The machine is shared: another engineer's
    ``apt-get install`` may add files meanwhile, which are not ours to judge."""
    return sorted(p for p in paths if p in package_files or NAME in p)


def _acls(paths: list[Path]) -> dict[str, str]:
    out = {}
    for path in paths:
        proc = subprocess.run(
            ["getfacl", "-p", str(path)], capture_output=True, text=True, check=False
        )
        out[str(path)] = proc.stdout
    return out


def _exists(kind: str, name: str) -> bool:
    try:
        (pwd.getpwnam if kind == "user" else grp.getgrnam)(name)
        return True
    except KeyError:
        return False


def _hooks() -> set[str]:
    out = pbsctl.qmgr("list hook").stdout
    return set(re.findall(r"^Hook (\S+)$", out, re.M))


def _mark_exists() -> bool:
    return _resource_exists("softwalltime_set")


RESOURCES = {  # each resource of the product, and how it is created
    "softwalltime_set": "type=long, flag=r",
    "softwalltime_rank": "type=long, flag=r",
    "softwalltime_wait": "type=string, flag=r",
}


def _resource_exists(name: str) -> bool:
    return bool(pbsctl.qmgr(f"list resource {name}", check=False).returncode == 0)


def _installed() -> bool:
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${db:Status-Abbrev}", NAME],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode == 0 and proc.stdout.startswith(("ii", "iF", "iU", "rc", "ic"))


@pytest.fixture(scope="session")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The .deb of this checkout. Session-scoped and first in the test's arguments, so that it
    is built before the PBS lock is taken when this file runs alone; in a whole ``make
    test-pbs`` session an earlier file holds the lock already (a minute more of it)."""
    given = os.environ.get("SOFTWALLTIME_TEST_DEB")
    if given:
        return Path(given)
    for tool in ("dpkg-deb", "setfacl", "getfacl", "systemd-analyze"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: apt-get install dpkg acl systemd", pytrace=False)
    out = tmp_path_factory.mktemp("deb")
    return build_package("build-deb.sh", out)


@pytest.fixture()
def machine(
    deb: Path, pbs_server: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, object]]:
    """What the machine looks like without the package; restored whatever happens. The
    package's commands run without this checkout's PYTHONPATH (a worktree's tests set it):
    they must import the installed code only."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    if _installed():
        pytest.fail(f"package {NAME} is installed on this host: this test would purge it")
    if _exists("user", NAME) or _exists("group", NAME):
        pytest.fail(f"user or group {NAME} exists on this host: this test would delete it")
    if NAME in _hooks():
        pytest.fail(f"a PBS hook named {NAME} is installed: this test would delete it")
    accounting = pbsctl.ACCOUNTING
    acl_paths = [PBS_HOME, PBS_HOME / "server_priv", accounting, *sorted(accounting.iterdir())]
    before = {
        "files": _files(),
        "acls": _acls(acl_paths),
        "acl_paths": acl_paths,
        "mark": _mark_exists(),
        "resources": {name for name in RESOURCES if _resource_exists(name)},
        "formula": pbsctl.sched_attribute("job_sort_formula"),
        "hooks": _hooks(),
        "operators": pbsctl.server_attribute("operators"),
    }
    try:
        yield before
    finally:
        if _installed():
            pbsctl.run("dpkg", "--purge", NAME, check=False, timeout=300)
        if NAME in _hooks():
            pbsctl.qmgr(f"delete hook {NAME}", check=False)
        resources = before["resources"]
        assert isinstance(resources, set)
        for name in sorted(resources):  # the shared server as it was: purge deletes them
            if not _resource_exists(name):
                pbsctl.qmgr(f"create resource {name} {RESOURCES[name]}", check=False)
        formula = before["formula"]
        if formula is not None and pbsctl.sched_attribute("job_sort_formula") != formula:
            pbsctl.qmgr(f"set sched job_sort_formula = '{formula}'", check=False)
        elif formula is None:
            pbsctl.qmgr("unset sched job_sort_formula", check=False)
        for tool, kind in (("userdel", "user"), ("groupdel", "group")):
            if _exists(kind, NAME):
                subprocess.run([tool, NAME], check=False)


def _unit(name: str) -> dict[str, list[str]]:
    """``Key=value`` lines of an installed unit (every value of a repeated key)."""
    out: dict[str, list[str]] = {}
    for line in (UNITS / name).read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def _unit_env(unit: dict[str, list[str]], name: str) -> dict[str, str]:
    """The variables systemd would give the unit: its Environment= and EnvironmentFile=
    (``-``: may be missing), over a bare PATH and LANG."""
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    for item in unit.get("Environment", []):
        key, _, value = item.partition("=")
        env[key] = value
    for item in unit.get("EnvironmentFile", []):
        path = Path(item.lstrip("-"))
        if not path.exists():
            assert item.startswith("-"), f"{name}: {path} missing"
            continue
        for line in path.read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                key, _, value = line.partition("=")
                env[key.strip()] = value.strip()
    return env


def _caps(unit: dict[str, list[str]], key: str) -> list[str]:
    return [c.lower().removeprefix("cap_") for c in " ".join(unit.get(key, [])).split()]


def _runtime_directory(unit: dict[str, list[str]], user: str) -> None:
    """What systemd makes before the first step: /run/NAME, owned by User=, in its mode."""
    for name in unit.get("RuntimeDirectory", []):
        path = Path("/run") / name
        path.mkdir(exist_ok=True)
        pw = pwd.getpwnam(user)
        os.chown(path, pw.pw_uid, pw.pw_gid)
        path.chmod(int(unit.get("RuntimeDirectoryMode", ["0755"])[0], 8))


def _run_service(name: str) -> list[subprocess.CompletedProcess[str]]:
    """Run a oneshot unit's ExecStartPre= and ExecStart= lines in order as systemd would
    without systemd (none runs here), inside PBS's namespaces as on a server host: a ``+``
    line as root, the others as its User= with setpriv: its group, no new privileges (so
    no setuid program works, as under the unit's sandbox), only its AmbientCapabilities=
    and CapabilityBoundingSet=, its UMask=, only the variables of its Environment= and
    EnvironmentFile=. Stops at the first line that fails."""
    unit = _unit(name)
    env = _unit_env(unit, name)
    user = unit.get("User", ["root"])[0]
    group = unit.get("Group", [user])[0]
    _runtime_directory(unit, user)
    ambient = _caps(unit, "AmbientCapabilities")
    bounding = _caps(unit, "CapabilityBoundingSet")
    umask = unit.get("UMask", ["0022"])[0]
    done = []
    for line in unit.get("ExecStartPre", []) + unit.get("ExecStart", []):
        root_step = line.startswith("+")
        argv = [
            re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], a)
            for a in shlex.split(line.lstrip("+"))
        ]
        prefix: list[str] = []
        if not root_step:
            prefix = ["setpriv", f"--reuid={user}", f"--regid={group}", "--init-groups",
                      "--no-new-privs",
                      "--bounding-set=-all" + "".join(f",+{c}" for c in bounding)]  # fmt: skip
            if ambient:
                caps = ",".join(f"+{c}" for c in ambient)
                prefix += [f"--inh-caps={caps}", f"--ambient-caps={caps}"]
        shell = f'umask {umask} && exec "$0" "$@"'
        proc = pbsctl.run(
            *prefix, "env", "-i", *(f"{k}={v}" for k, v in env.items()), "sh", "-c", shell,
            *argv, timeout=300, check=False,
        )  # fmt: skip
        done.append(proc)
        if proc.returncode != 0 and not (
            proc.returncode == 1 and "1" in " ".join(unit.get("SuccessExitStatus", []))
        ):
            break
    return done


def _soft(jobid: str) -> int | None:
    value = pbsctl.resource(jobid, "soft_walltime")
    return None if value is None else parse_duration(value)


def _count(dsn: str, table: str) -> int:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {table}")
        return int(cur.fetchone()[0])


def test_deb_install_predict_every_unit_as_its_user_purge(
    deb: Path,
    machine: dict[str, object],
    hook_cluster: LocalCluster,
    jobs: list[str],
    tmp_path: Path,
) -> None:
    admin_dsn = _new_database(hook_cluster, "pkg")
    seed(admin_dsn, pbsctl.USER, [(H, 4 * H), (2 * H, 10 * H)])
    sock_dir = hook_cluster.directory

    # install, inside PBS's namespaces as on a server host
    proc = pbsctl.run("dpkg", "-i", str(deb), timeout=300)
    assert _installed(), proc.stdout + proc.stderr
    package_files = set(pbsctl.run("dpkg", "-L", NAME).stdout.split("\n")) - {"", "/."}
    user = pwd.getpwnam(NAME)
    assert user.pw_uid < 1000 and user.pw_shell == "/usr/sbin/nologin"
    assert user.pw_dir == "/var/lib/softwalltime" and os.path.isdir(user.pw_dir)
    config = Path("/etc/softwalltime.json")
    assert (config.stat().st_mode & 0o777, grp.getgrgid(config.stat().st_gid).gr_name) == (
        0o640,
        NAME,
    )
    assert os.path.realpath("/usr/bin/softwalltime") == "/opt/softwalltime/bin/softwalltime"

    # the units: systemd-analyze verify resolves every executable and directive
    units = sorted(p.name for p in UNITS.glob("softwalltime-*"))
    shipped = sorted(p.name for p in (REPO / "packaging" / "systemd").glob("softwalltime-*"))
    assert units == shipped and len(units) >= 8, units  # ingest, refresh, status, prune
    verify = subprocess.run(
        ["systemd-analyze", "verify", *(str(UNITS / u) for u in units)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verify.returncode == 0, verify.stderr
    assert _unit("softwalltime-ingest.service")["User"] == [NAME]
    assert _unit("softwalltime-ingest.timer")["OnCalendar"] == ["*:0/5"]
    assert "User" not in _unit("softwalltime-status.service")  # root: hook data, server logs
    assert _unit("softwalltime-refresh.service")["User"] == [NAME]  # a PBS operator
    assert _unit("softwalltime-prune.service")["User"] == [NAME]
    subprocess.run(["systemctl", "enable", TIMERS[0]], capture_output=True, check=True)
    wants = Path("/etc/systemd/system/timers.target.wants") / TIMERS[0]
    assert wants.is_symlink()

    # the roles, with the package's own command; the admin's settings in the conffiles
    grant = subprocess.run(
        ["/usr/bin/softwalltime", "--dsn", admin_dsn, "db", "grant"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert grant.returncode == 0, grant.stderr
    port = hook_cluster.port
    hook_dsn = f"postgresql://softwalltime_hook@/pkg?host={sock_dir}&port={port}"
    ingest_dsn = f"postgresql://softwalltime_ingest@/pkg?host={sock_dir}&port={port}"
    settings = json.loads(config.read_text())
    config.write_text(json.dumps(dict(settings, dsn=hook_dsn), indent=2))
    env_file = Path("/etc/default/softwalltime")
    env_file.write_text(env_file.read_text() + f"SOFTWALLTIME_DSN={ingest_dsn}\n")

    # the hook, installed through the package, predicts with the read-only role
    out = pbsctl.run("/usr/bin/softwalltime", "hooks", "install", timeout=120).stdout
    assert f"hook {NAME} installed" in out and "/opt/softwalltime/lib/python3" in (
        pbsctl.qmgr(f"export hook {NAME} application/x-config default").stdout
    )
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00"))
    assert _soft(jobs[-1]) == v3(10 * H)

    # every service's steps as its unit runs them, each as its User=: the ingester reads the
    # real accounting directory through the package's ACL and the config through its group;
    # refresh, the package's user made a PBS operator by hooks install, alters a job after a
    # root-only step exported the hook's data; status (root) writes its metrics; prune keeps
    # everything (history_keep_days 0). The database socket: an ACL of the test's own.
    assert f"set server operators += {NAME}@" in out
    metrics = tmp_path / "softwalltime.prom"
    env_file.write_text(env_file.read_text() + f"SOFTWALLTIME_PROMETHEUS_FILE={metrics}\n")
    # calibrate writes calibration_state, which only the database's owner may
    calibrate_env = Path("/etc/default/softwalltime-calibrate")
    calibrate_env.write_text(f"SOFTWALLTIME_DSN={admin_dsn}\n")
    socket_path = str(hook_cluster.socket_path)
    # (root too: a sandboxed root unit without CAP_DAC_OVERRIDE, wait --publish, is held to
    # the socket's permissions like anyone; a site's /run/postgresql lets everyone connect)
    for who in (NAME, "root"):
        subprocess.run(["setfacl", "-m", f"u:{who}:x", str(sock_dir)], check=True)
        subprocess.run(["setfacl", "-m", f"u:{who}:rw", socket_path], check=True)
    services = sorted(p.name for p in UNITS.glob("softwalltime-*.service"))
    try:
        before = _count(admin_dsn, "finished_jobs")
        (ran,) = _run_service("softwalltime-ingest.service")
        assert ran.returncode == 0, ran.stderr
        assert "softwalltime ingest:" in ran.stdout
        assert _count(admin_dsn, "finished_jobs") > before
        assert _count(admin_dsn, "ingest_checkpoints") >= 1

        # alice's history moved (the ingested real accounting, a newer job seeded): refresh,
        # as the package's user, has the hook predict the job again
        seed(admin_dsn, pbsctl.USER, [(5 * H, 10 * H)], start=100)
        before_refresh = _soft(jobs[-1])
        export, ran = _run_service("softwalltime-refresh.service")
        assert export.returncode == 0, export.stderr
        handed = Path("/run/softwalltime/hook.json")
        assert (handed.stat().st_mode & 0o777, grp.getgrgid(handed.stat().st_gid).gr_name) == (
            0o640,
            NAME,
        )
        assert ran.returncode == 0, ran.stderr + ran.stdout
        assert "1 changed" in ran.stdout, ran.stdout
        after_refresh = _soft(jobs[-1])
        assert after_refresh != before_refresh
        mark = pbsctl.job(jobs[-1])["Resource_List"]["softwalltime_set"]
        assert int(mark) == after_refresh  # set through the hook: still the hook's value
        assert pwd.getpwuid(Path("/run/softwalltime/refresh.lock").stat().st_uid).pw_name == NAME

        (ran,) = _run_service("softwalltime-status.service")
        assert ran.returncode in (0, 1), ran.stderr + ran.stdout  # 1: a warning, a success
        assert "\nsoftwalltime_status " in metrics.read_text()

        # issue 50: alice asks when her queued job starts, with the package's command; she
        # may not read /etc/softwalltime.json (the database's password): the job's answer.
        # 3 processors never fit the 2 of the node: it stays queued.
        jobs.append(pbsctl.qsub("-l select=1:ncpus=3 -l walltime=01:00:00"))
        waiting = jobs[-1]
        (ran,) = _run_service("softwalltime-ingest.service")  # its Q record, into live_jobs
        assert ran.returncode == 0, ran.stderr
        (ran,) = _run_service("softwalltime-wait-publish.service")
        assert ran.returncode == 0, ran.stderr + ran.stdout
        assert "publish:" in ran.stdout, ran.stdout
        assert pbsctl.as_user("test -r /etc/softwalltime.json", check=False).returncode != 0
        asked = pbsctl.as_user(f"/usr/bin/softwalltime wait {waiting}", check=False)
        assert asked.returncode == 0, asked.stderr + asked.stdout
        assert asked.stdout.startswith(f"job {waiting} ({pbsctl.USER}): queued"), asked.stdout
        said = asked.stdout.splitlines()[1]
        assert said.startswith(("softwalltime: predicted start about 20", "softwalltime: quick")), (
            said
        )
        pbsctl.qdel(waiting)

        for name in sorted(set(services) - {
            "softwalltime-ingest.service",
            "softwalltime-refresh.service",
            "softwalltime-status.service",
            "softwalltime-wait-publish.service",
        }):  # fmt: skip
            steps = _run_service(name)
            assert steps and all(p.returncode == 0 for p in steps), (name, steps[-1].stderr)
        assert len(services) == 6, services  # calibrate and prune were the last two
    finally:
        for who in (NAME, "root"):
            subprocess.run(["setfacl", "-x", f"u:{who}", str(sock_dir), socket_path], check=False)
        calibrate_env.unlink(missing_ok=True)

    # a reinstall (the upgrade path) keeps the admin's config and re-imports the hook script
    proc = pbsctl.run("dpkg", "-i", str(deb), timeout=300)
    assert "hook 'softwalltime' updated" in proc.stderr
    assert json.loads(config.read_text())["dsn"] == hook_dsn
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00"))
    assert _soft(jobs[-1]) is not None

    # purge: jobs first (their mark would keep the resource), history too
    pbsctl.qdel(*jobs)
    pbsctl.purge(jobs)
    # issue 50 item 8: a sort formula that reads the rank (hooks install --rank's resource)
    if not _resource_exists("softwalltime_rank"):
        pbsctl.qmgr(f"create resource softwalltime_rank {RESOURCES['softwalltime_rank']}")
    pbsctl.qmgr("set sched job_sort_formula = 'ncpus + 10 * softwalltime_rank'")
    # the package's uninstall where PBS cannot be reached (outside its namespace, no
    # pbs_command_prefix): nothing removed, the complete list of commands printed
    down = subprocess.run(
        ["/usr/bin/softwalltime", "hooks", "uninstall"], capture_output=True, text=True, check=False
    )
    assert down.returncode == 1 and "the PBS server does not answer" in down.stderr, down.stderr
    wanted = [
        f"-c 'delete hook {NAME}'",
        "-c 'unset sched default job_sort_formula'",
        f"-c 'set server operators -= {NAME}@",
        "psql -c 'DROP DATABASE pkg'",
        "psql -c 'DROP ROLE softwalltime_hook, softwalltime_ingest, softwalltime_prune'",
    ]
    wanted += [f"-c 'delete resource {name}'" for name in RESOURCES]
    for line in wanted:
        assert line in down.stderr, (line, down.stderr)
    assert NAME in _hooks()
    # apt-get purge outside PBS's namespace, as an admin's shell is: the prerm reaches the
    # server through the configured pbs_command_prefix
    config.write_text(
        json.dumps(dict(json.loads(config.read_text()), pbs_command_prefix=[str(pbsctl.PBSX)]))
    )
    proc = subprocess.run(
        ["dpkg", "--purge", NAME], capture_output=True, text=True, check=False, timeout=300
    )
    assert not _installed(), proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "job_sort_formula of scheduler default read softwalltime_rank: unset; it was" in (
        proc.stderr
    )
    assert _hooks() == machine["hooks"]
    assert pbsctl.server_attribute("operators") == machine["operators"]
    assert pbsctl.sched_attribute("job_sort_formula") is None
    assert [name for name in RESOURCES if _resource_exists(name)] == [], proc.stderr
    # the user stays (sysusers.d; both distributions advise it), its home and /run folder go
    assert _exists("user", NAME) and _exists("group", NAME)
    assert not os.path.exists("/var/lib/softwalltime") and not os.path.exists("/run/softwalltime")
    assert not wants.is_symlink()
    after = _files()
    before_files = machine["files"]
    assert isinstance(before_files, set)
    assert _ours(after - before_files, package_files) == []
    assert _ours(before_files - after, package_files) == []
    acl_paths = machine["acl_paths"]
    assert isinstance(acl_paths, list)
    assert _acls(acl_paths) == machine["acls"]
