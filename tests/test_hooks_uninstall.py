"""Issue 50 item 8: ``hooks uninstall`` removes everything the product put on the PBS server
(the hook, a ``job_sort_formula`` naming its resources, the operator, the three resources
``softwalltime_set``, ``softwalltime_rank`` and ``softwalltime_wait``), through the configured
``pbs_command_prefix`` and ``pbs_exec``; when the server does not answer it prints the
complete list of commands, and so does the package's prerm (``softwalltime-maint hook-del``).

The real server: tests/pbs/test_package_real.py purges the .deb with a formula set.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from softwalltime import cli
from softwalltime.cli import hooks

REPO = Path(__file__).resolve().parents[1]
MAINT = REPO / "packaging" / "libexec" / "softwalltime-maint"
HOST = socket.getfqdn()

# A qmgr with a server in files: hooks, resources, the default scheduler's formula, the
# operators; each directive logged. "busy-NAME": a job has the resource.
FAKE = textwrap.dedent(
    """\
    #!{python}
    import os, sys
    state = {state!r}
    d = sys.argv[2]
    open(state + "/log", "a").write(d + "\\n")
    w = d.split()
    def has(name):
        return os.path.exists(state + "/" + name)
    def fail(text):
        print(text, file=sys.stderr)
        sys.exit(1)
    if d == "list server":
        print("Server pbshost")
    elif w[:2] == ["list", "hook"]:
        has("hook-" + w[2]) or fail("Unknown Hook")
    elif w[:2] == ["delete", "hook"]:
        os.unlink(state + "/hook-" + w[2])
    elif w[:2] == ["list", "resource"]:
        has("resource-" + w[2]) or fail("Unknown resource")
    elif w[:2] == ["delete", "resource"]:
        if has("busy-" + w[2]):
            fail("qmgr obj=" + w[2] + " svr=default: Resource busy on job")
        os.unlink(state + "/resource-" + w[2])
    elif d == "list sched":
        has("sched-down") and fail("qmgr: Error (15031) returned from server")
        print("Sched default")
        print("    sched_host = pbshost")
        if has("formula"):
            print("    job_sort_formula = " + open(state + "/formula").read())
        print("    scheduling = True")
    elif d == "unset sched default job_sort_formula":
        os.unlink(state + "/formula")
    elif d == "list server operators":
        print("Server pbshost")
        if has("ops"):
            print("    operators = " + open(state + "/ops").read())
    elif d == "unset server operators":
        os.unlink(state + "/ops")
    elif d.startswith("set server operators -= "):
        ops = open(state + "/ops").read().split(",")
        open(state + "/ops", "w").write(",".join(o for o in ops if o != w[-1]))
    else:
        fail("unexpected: " + d)
    """
)


@pytest.fixture()
def server(tmp_path: Path) -> Path:
    """The fake server's state: our hook, our three resources, refresh's user (root here:
    a user every machine has) as the only operator. Its qmgr is ``pbs_exec``/bin/qmgr."""
    state = tmp_path / "state"
    state.mkdir()
    for name in ("hook-softwalltime", *(f"resource-{r}" for r in hooks.RESOURCES)):
        (state / name).touch()
    (state / "ops").write_text(f"root@{HOST}")
    qmgr = tmp_path / "pbs" / "bin" / "qmgr"
    qmgr.parent.mkdir(parents=True)
    qmgr.write_text(FAKE.format(python=sys.executable, state=str(state)))
    qmgr.chmod(0o755)
    return state


def config(tmp_path: Path, **values: object) -> str:
    path = tmp_path / "softwalltime.json"
    path.write_text(json.dumps({"pbs_exec": str(tmp_path / "pbs"), **values}))
    return str(path)


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_names_ours_and_the_schedulers_formulas():
    assert hooks.names_ours("ncpus + 10*softwalltime_rank") == ["softwalltime_rank"]
    assert hooks.names_ours("softwalltime_wait_x + my_softwalltime_rank") == []
    assert hooks.names_ours("softwalltime_wait*softwalltime_set") == [
        "softwalltime_set",
        "softwalltime_wait",
    ]
    listing = (
        "Sched default\n    job_sort_formula = ncpus + 2 * softwalltime_rank +\n"
        "\twalltime\n    scheduling = True\n\nSched night\n    scheduling = False\n"
    )
    assert hooks.parse_sched_formulas(listing) == {
        "default": "ncpus + 2 * softwalltime_rank +walltime"
    }


def test_the_complete_list_names_every_object_and_the_database():
    qmgr = ["/usr/local/bin/pbsx", "/opt/pbs/bin/qmgr"]
    lines = hooks.removal_commands(
        qmgr,
        "softwalltime",
        "softwalltime@pbshost",
        {"default": "ncpus + softwalltime_rank", "other": "ncpus"},
        "swt",
    )
    run_ = "/usr/local/bin/pbsx /opt/pbs/bin/qmgr -c"
    assert [ln for ln in lines if not ln.startswith("#")] == [
        f"{run_} 'delete hook softwalltime'",
        f"{run_} 'unset sched default job_sort_formula'",  # not "other": it reads none of ours
        f"{run_} 'set server operators -= softwalltime@pbshost'",
        f"{run_} 'delete resource softwalltime_set'",
        f"{run_} 'delete resource softwalltime_rank'",
        f"{run_} 'delete resource softwalltime_wait'",
        "runuser -u postgres -- psql -c 'DROP DATABASE swt'",
        "runuser -u postgres -- psql -c"
        " 'DROP ROLE softwalltime_hook, softwalltime_ingest, softwalltime_prune'",
    ]
    assert "# the sort formula reads softwalltime_rank; it was: ncpus + softwalltime_rank" in lines
    # formula unknown (the server did not answer): the default scheduler's, with its condition
    unknown = hooks.removal_commands(["qmgr"], "h", "", None, "softwalltime")
    assert "qmgr -c 'unset sched default job_sort_formula'" in unknown
    assert not any("operators" in ln for ln in unknown)  # no operator asked
    assert hooks.database_name("postgresql://softwalltime_hook@/pkg?host=/run/pg") == "pkg"
    assert hooks.database_name(None) == "softwalltime"
    assert 'DROP DATABASE "Odd-Name"' in hooks.database_commands("Odd-Name")[1]


def test_uninstall_unsets_the_formula_first_and_removes_everything(capsys, tmp_path, server):
    (server / "formula").write_text("ncpus + 10 * softwalltime_rank")
    code, out, err = run(
        capsys, "--config", config(tmp_path), "hooks", "uninstall", "--operator", "root"
    )
    assert code == 0, err
    assert sorted(p.name for p in server.iterdir()) == ["log"]  # nothing of ours is left
    log = (server / "log").read_text().splitlines()
    # the formula goes before the resource it reads
    assert log.index("unset sched default job_sort_formula") < log.index(
        "delete resource softwalltime_rank"
    )
    assert "delete resource softwalltime_wait" in log
    # what it was, to restore it
    assert "job_sort_formula of scheduler default read softwalltime_rank: unset; it was" in err
    assert "ncpus + 10 * softwalltime_rank" in err
    assert "kept: the database softwalltime and the roles softwalltime_hook" in out


def test_a_formula_that_cannot_be_read_is_named_with_its_command(capsys, tmp_path, server):
    (server / "sched-down").touch()
    code, out, err = run(capsys, "--config", config(tmp_path), "hooks", "uninstall")
    assert code == 0, err
    assert "job_sort_formula not read (qmgr: Error (15031) returned from server)" in err
    assert err.rstrip().endswith(
        f"{tmp_path}/pbs/bin/qmgr -c 'unset sched default job_sort_formula'"
    )


def test_keep_formula_keeps_it_and_the_resources_it_reads(capsys, tmp_path, server):
    (server / "formula").write_text("softwalltime_wait")
    code, out, err = run(
        capsys, "--config", config(tmp_path), "hooks", "uninstall", "--keep-formula", "--json"
    )
    assert code == 0, err
    found = json.loads(out)
    assert found["formulas_kept"] == {"default": "softwalltime_wait"}
    assert found["formulas_unset"] == {}
    assert found["resources_deleted"] == ["softwalltime_set", "softwalltime_rank"]
    assert (server / "formula").exists() and (server / "resource-softwalltime_wait").exists()
    assert "kept (--keep-formula)" in err


def test_a_resource_a_job_holds_is_kept_with_the_command_for_later(capsys, tmp_path, server):
    (server / "busy-softwalltime_set").touch()
    code, out, err = run(capsys, "--config", config(tmp_path), "hooks", "uninstall")
    assert code == 0, err
    assert (server / "resource-softwalltime_set").exists()
    lines = [ln for ln in err.splitlines() if "softwalltime_set" in ln]
    assert len(lines) == 1, err  # one line, with the command
    assert "Resource busy" in lines[0] and "qdel -x -Wforce" in lines[0]
    assert lines[0].endswith(f"{tmp_path}/pbs/bin/qmgr -c 'delete resource softwalltime_set'")
    # again, once no job has it: nothing else to do, the hook is already gone
    (server / "busy-softwalltime_set").unlink()
    code, out, err = run(capsys, "--config", config(tmp_path), "hooks", "uninstall")
    assert code == 0, err
    assert "hook softwalltime not installed" in out and "resource softwalltime_set deleted" in out


def test_the_configured_prefix_is_used(capsys, tmp_path, server):
    """The prerm's bug: qmgr run outside PBS's namespace, whatever pbs_command_prefix said."""
    prefix = tmp_path / "pbsx"
    prefix.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/prefixed\nexec "$@"\n')
    prefix.chmod(0o755)
    code, out, err = run(
        capsys,
        "--config",
        config(tmp_path, pbs_command_prefix=[str(prefix)]),
        "hooks",
        "uninstall",
    )
    assert code == 0, err
    prefixed = (tmp_path / "prefixed").read_text().splitlines()
    assert f"{tmp_path}/pbs/bin/qmgr -c delete hook softwalltime" in prefixed
    assert not (server / "hook-softwalltime").exists()


def test_the_operator_goes_whatever_host_pbs_saw(capsys, tmp_path, server):
    """install runs where PBS is (a prefix: another namespace, pbshost); uninstall maybe
    here (vm): the user's entry goes on every host, others' stay."""
    (server / "ops").write_text("root@pbshost,admin@pbshost")
    code, out, err = run(
        capsys, "--config", config(tmp_path), "hooks", "uninstall", "--operator", "root"
    )
    assert code == 0, err
    assert (server / "ops").read_text() == "admin@pbshost"
    assert "qmgr -c 'set server operators -= root@pbshost'" in out


UNREACHABLE = "#!/bin/sh\necho 'qmgr: cannot connect to server pbshost (errno=15010)' >&2\nexit 1\n"


def _unreachable_config(tmp_path: Path) -> str:
    prefix = tmp_path / "down"
    prefix.write_text(UNREACHABLE)
    prefix.chmod(0o755)
    dsn = "postgresql://softwalltime_hook@/history?host=/run/postgresql"
    return config(tmp_path, pbs_command_prefix=[str(prefix)], dsn=dsn)


def _expected_list(tmp_path: Path) -> list[str]:
    qmgr = [str(tmp_path / "down"), str(tmp_path / "pbs" / "bin" / "qmgr")]
    return hooks.removal_commands(qmgr, "softwalltime", f"root@{HOST}", None, "history")


def test_an_unreachable_server_gets_the_complete_list(capsys, tmp_path):
    code, out, err = run(
        capsys,
        "--config",
        _unreachable_config(tmp_path),
        "hooks",
        "uninstall",
        "--operator",
        "root",
    )
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[:-1] == _expected_list(tmp_path)
    assert lines[-1].startswith("softwalltime: error: the PBS server does not answer (")
    assert "cannot connect to server" in lines[-1] and "nothing removed" in lines[-1]
    run_ = f"{tmp_path}/down {tmp_path}/pbs/bin/qmgr -c"
    for needed in (
        f"{run_} 'delete hook softwalltime'",
        f"{run_} 'unset sched default job_sort_formula'",
        f"{run_} 'set server operators -= root@{HOST}'",
        *(f"{run_} 'delete resource {r}'" for r in hooks.RESOURCES),
        "runuser -u postgres -- psql -c 'DROP DATABASE history'",
    ):
        assert needed in lines


def test_the_prerm_prints_the_complete_list_when_pbs_does_not_answer(tmp_path):
    """softwalltime-maint hook-del (the .deb's prerm, the RPM's %preun) with the admin's
    pbs_command_prefix: its own uninstall, which says what to run; the removal goes on."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "softwalltime").symlink_to(Path(sys.executable).parent / "softwalltime")
    env = dict(
        os.environ,
        SOFTWALLTIME_MAINT_PREFIX=str(venv),
        SOFTWALLTIME_CONFIG=_unreachable_config(tmp_path),
    )
    proc = subprocess.run(
        [str(MAINT), "hook-del"], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    # the package's user (softwalltime) does not exist here: no operator line
    expected = hooks.removal_commands(
        [str(tmp_path / "down"), str(tmp_path / "pbs" / "bin" / "qmgr")],
        "softwalltime",
        f"softwalltime@{HOST}" if _user_exists("softwalltime") else "",
        None,
        "history",
    )
    assert lines[: len(expected)] == expected
    assert "the PBS server does not answer" in proc.stderr
    assert lines[-1] == "softwalltime: the hook 'softwalltime' may still be installed: see above"


def test_the_prerm_falls_back_to_the_defaults_when_the_config_does_not_load(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "softwalltime").symlink_to(Path(sys.executable).parent / "softwalltime")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    env = dict(
        os.environ,
        SOFTWALLTIME_MAINT_PREFIX=str(venv),
        SOFTWALLTIME_CONFIG=str(broken),
        PATH=f"{tmp_path}:/usr/bin:/bin",
    )
    qmgr = tmp_path / "qmgr"  # on PATH: what the defaults find first
    qmgr.write_text(UNREACHABLE)
    qmgr.chmod(0o755)
    proc = subprocess.run(
        [str(MAINT), "hook-del"], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "the configuration does not load: removing with the default settings" in proc.stderr
    assert f"{qmgr} -c 'delete hook softwalltime'" in proc.stderr.splitlines()


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
