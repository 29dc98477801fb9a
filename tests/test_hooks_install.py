"""``softwalltime hooks install|uninstall`` and ``predict``; the generated config under PBS's
isolated interpreter."""

import ast
import compileall
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib
from helpers_history import add_jobs
from helpers_runtime import need_runtime

import softwalltime
from softwalltime import cli
from softwalltime.cli import hooks as cli_hooks
from softwalltime.core.config import load_settings
from softwalltime.hook import lookup

REPO = Path(__file__).resolve().parents[1]
FAKE_PBS = REPO / "tests" / "fakes" / "pbs.py"
DSN = "postgresql://hook:s3cret@db.example.org/softwalltime"


@pytest.fixture(autouse=True)
def _no_cached_connection():
    yield
    lookup.close_cached()


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_install_dry_run_prints_the_complete_sequence(capsys):
    code, out, err = run(
        capsys, "--dsn", DSN, "hooks", "install", "--dry-run", "--order", "7", "--alarm", "20"
    )
    assert code == 0, err
    assert "s3cret" not in out + err
    lines = out.splitlines()
    # the config goes to a private temporary file whose name the shell holds in $config
    qmgr_lines = [
        shlex.split(line.replace('\'"$config"', '"$config"\''))
        for line in lines
        if line.startswith("qmgr ")
    ]
    assert all(words[:2] == ["qmgr", "-c"] and len(words) == 3 for words in qmgr_lines)
    script = str(cli_hooks.hook_script())
    assert [words[2] for words in qmgr_lines] == [
        "create resource softwalltime_set type=long, flag=r",
        "create hook softwalltime",
        "set hook softwalltime enabled = false",
        "set hook softwalltime user = pbsadmin",
        'set hook softwalltime event = "queuejob,runjob,modifyjob"',
        "set hook softwalltime order = 7",
        "set hook softwalltime alarm = 20",
        f"import hook softwalltime application/x-python default {script}",
        'import hook softwalltime application/x-config default "$config"',
        "set hook softwalltime enabled = true",
    ]
    # the config file is a private temporary file (mktemp: mode 0600), made before import
    start = lines.index("cat > \"$config\" <<'EOF'")
    assert lines[start - 1] == "config=$(mktemp)" and lines[-1] == 'rm -f "$config"'
    end = lines.index("EOF", start)
    assert end < next(i for i, line in enumerate(lines) if line.startswith("qmgr "))
    config = json.loads("\n".join(lines[start + 1 : end]))
    assert config["dsn"] == "postgresql://hook:***@db.example.org/softwalltime"
    assert config["predictor"] == "v3" and config["connect_timeout_s"] == 1.0
    assert set(config) == set(cli_hooks.HOOK_KEYS)
    # pure Python hook path: only softwalltime's own directory is needed
    assert config["sys_path"] == [str(Path(softwalltime.__file__).resolve().parents[1])]
    # every file key the generated config uses is one load_settings accepts
    assert load_settings(environ={}, overrides=dict(config, dsn=DSN)).dsn == DSN


def test_install_keeps_configured_sys_path_and_settings(capsys, tmp_path):
    cfg = tmp_path / "sw.json"
    cfg.write_text(
        json.dumps({"dsn": DSN, "sys_path": ["/opt/extra"], "predictor": "v2", "dry_run": True})
    )
    code, out, _ = run(capsys, "--config", str(cfg), "hooks", "install", "--dry-run")
    assert code == 0
    config = cli_hooks.hook_config(load_settings(str(cfg), environ={}))
    assert config["sys_path"][0] == "/opt/extra" and len(config["sys_path"]) == 2
    assert config["predictor"] == "v2" and config["dry_run"] is True
    assert '"/opt/extra"' in out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--name", "bad name;"], "invalid hook name"),
        (["--order", "0"], "--order must be 1-1000"),
        (["--alarm", "0"], "--alarm must be at least 1"),
    ],
)
def test_install_rejects_bad_arguments(capsys, argv, message):
    code, out, err = run(capsys, "--dsn", DSN, "hooks", "install", "--dry-run", *argv)
    assert code == 1 and message in err and out == ""


def test_install_keeps_the_database_bound_well_under_the_alarm(capsys, tmp_path, monkeypatch):
    """Issue 9 item 10: a hook that waits past its alarm is killed and the job REJECTED."""
    monkeypatch.delenv("SOFTWALLTIME_CONNECT_TIMEOUT_S", raising=False)
    cfg = tmp_path / "sw.json"
    cfg.write_text(json.dumps({"dsn": DSN, "connect_timeout_s": 5, "statement_timeout_ms": 5000}))
    code, out, err = run(capsys, "--config", str(cfg), "hooks", "install", "--dry-run")
    assert code == 0, err  # 10.1 s under half the default alarm of 30 s
    code, out, err = run(
        capsys, "--config", str(cfg), "hooks", "install", "--dry-run", "--alarm", "20"
    )
    assert code == 1 and out == ""
    assert "= 10.1 s, more than half the hook alarm (20 s)" in err


def test_install_needs_a_dsn(capsys, monkeypatch):
    monkeypatch.delenv("SOFTWALLTIME_DSN", raising=False)
    monkeypatch.delenv("SOFTWALLTIME_CONFIG", raising=False)
    monkeypatch.setattr("softwalltime.core.config.DEFAULT_CONFIG_FILE", "/nonexistent/sw.json")
    code, _, err = run(capsys, "hooks", "install", "--dry-run")
    assert code == 1 and "no database given" in err


def test_uninstall_dry_run(capsys):
    code, out, _ = run(
        capsys, "hooks", "uninstall", "--dry-run", "--name", "swt2", "--operator", ""
    )
    assert code == 0
    # the complete list (issue 50 item 8): what an unreachable server's uninstall prints too
    assert out.splitlines() == cli_hooks.removal_commands(
        ["qmgr"], "swt2", "", None, "softwalltime"
    )
    assert [ln for ln in out.splitlines() if ln.startswith("qmgr ")] == [
        "qmgr -c 'delete hook swt2'",
        "qmgr -c 'unset sched default job_sort_formula'",
        "qmgr -c 'delete resource softwalltime_set'",
        "qmgr -c 'delete resource softwalltime_rank'",
        "qmgr -c 'delete resource softwalltime_wait'",
    ]


def _dry_run_install(capsys, *argv, options=()):
    code, out, err = run(capsys, *argv, "hooks", "install", "--dry-run", *options)
    assert code == 0, err
    lines = out.splitlines()
    start = lines.index("cat > \"$config\" <<'EOF'")
    config = json.loads("\n".join(lines[start + 1 : lines.index("EOF", start)]))
    return config, [line for line in lines if line.startswith("qmgr ")]


def test_install_rank_creates_the_resource_and_turns_the_rank_on(capsys, tmp_path):
    config, qmgr = _dry_run_install(capsys, "--dsn", DSN)
    assert config["rank"] == "off"
    assert not any("softwalltime_rank" in line for line in qmgr)

    code, out, err = run(capsys, "--dsn", DSN, "hooks", "install", "--dry-run", "--rank")
    assert code == 0, err
    lines = out.splitlines()
    start = lines.index("cat > \"$config\" <<'EOF'")
    # issue 52: the paid rank, not key-mean (which cheap jobs game)
    assert json.loads("\n".join(lines[start + 1 : lines.index("EOF", start)]))["rank"] == (
        "key-mean-paid"
    )
    # both resources before the hook, each skipped when 'list resource' finds it
    creates = [line for line in lines if "create " in line and line.startswith("qmgr ")]
    assert creates[:3] == [
        "qmgr -c 'create resource softwalltime_set type=long, flag=r'",
        "qmgr -c 'create resource softwalltime_rank type=long, flag=r'",
        "qmgr -c 'create hook softwalltime'",
    ]
    # one number per step (issue 50 item 9: both resources were "2.")
    steps = [line.split(".")[0] for line in lines if re.match(r"# \d+\. ", line)]
    assert steps == ["# 2", "# 3", "# 4"] and "server. Run as root on the server host. 1." in out
    assert "# 3. the sort rank (skipped if 'list resource softwalltime_rank' finds it)" in lines
    assert "# 4. the hook" in lines

    # the setting does what the option does
    cfg = tmp_path / "sw.json"
    cfg.write_text(json.dumps({"dsn": DSN, "rank": "key-mean"}))
    config, qmgr = _dry_run_install(capsys, "--config", str(cfg))
    assert config["rank"] == "key-mean"
    assert "qmgr -c 'create resource softwalltime_rank type=long, flag=r'" in qmgr


def test_install_rank_names_the_rank_or_keeps_the_settings(capsys, tmp_path):
    # --rank RANK writes that rank (the resource with it)
    config, qmgr = _dry_run_install(capsys, "--dsn", DSN, options=("--rank", "key-mean-paid"))
    assert config["rank"] == "key-mean-paid"
    assert "qmgr -c 'create resource softwalltime_rank type=long, flag=r'" in qmgr
    # --rank alone keeps a rank the settings turned on, where it used to write key-mean
    cfg = tmp_path / "sw.json"
    cfg.write_text(json.dumps({"dsn": DSN, "rank": "key-mean-paid"}))
    code, out, err = run(capsys, "--config", str(cfg), "hooks", "install", "--dry-run", "--rank")
    assert code == 0, err
    assert '"rank": "key-mean-paid"' in out
    # a learned rank needs the predictor learned: refused, naming the option
    code, out, err = run(capsys, "--dsn", DSN, "hooks", "install", "--dry-run", "--rank", "learned")
    assert code == 1 and "--rank: rank learned needs predictor learned" in err, err
    cfg.write_text(json.dumps({"dsn": DSN, "predictor": "learned"}))
    config, _ = _dry_run_install(capsys, "--config", str(cfg), options=("--rank", "learned-paid"))
    assert config["rank"] == "learned-paid"
    # anything else is a usage error
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--dsn", DSN, "hooks", "install", "--dry-run", "--rank", "v3"])
    assert exit_.value.code == 2
    assert "invalid choice: 'v3'" in capsys.readouterr().err


FAKE_QMGR = textwrap.dedent(
    """\
    #!{python}
    # Fake qmgr: records each -c directive; keeps imported files; knows hooks and resources it
    # created; refuses to delete a resource while the file "busy-NAME" exists (jobs have it).
    import json, shutil, sys
    state_dir = {state!r}
    directive = sys.argv[2]
    with open(state_dir + "/log", "a") as fh:
        fh.write(directive + "\\n")
    words = directive.split()
    if words[:2] == ["list", "hook"]:
        try:
            open(state_dir + "/hook-" + words[2]).close()
        except OSError:
            print("qmgr obj=" + words[2] + " svr=default: Unknown Hook", file=sys.stderr)
            sys.exit(1)
    elif words[:2] == ["create", "hook"]:
        open(state_dir + "/hook-" + words[2], "w").close()
    elif words[:2] == ["import", "hook"]:
        shutil.copy(words[5], state_dir + "/" + words[3].split("/")[1])
    elif words[:2] == ["delete", "hook"]:
        import os
        os.unlink(state_dir + "/hook-" + words[2])
    elif words[:2] == ["list", "resource"]:
        try:
            open(state_dir + "/resource-" + words[2]).close()
        except OSError:
            print("qmgr obj=" + words[2] + " svr=default: Unknown resource", file=sys.stderr)
            sys.exit(1)
    elif words[:2] == ["create", "resource"]:
        open(state_dir + "/resource-" + words[2], "w").close()
    elif words[:2] == ["delete", "resource"]:
        import os
        if os.path.exists(state_dir + "/busy-" + words[2]):
            print("qmgr obj=" + words[2] + " svr=default: Resource busy on job", file=sys.stderr)
            sys.exit(1)
        os.unlink(state_dir + "/resource-" + words[2])
    """
)


@pytest.fixture()
def fake_qmgr(tmp_path):
    state = tmp_path / "qmgr-state"
    state.mkdir()
    path = tmp_path / "qmgr"
    path.write_text(FAKE_QMGR.format(python=sys.executable, state=str(state)))
    path.chmod(0o755)
    return path, state


@pytest.mark.slow
def test_install_and_uninstall_run_qmgr(capsys, fake_qmgr):
    qmgr, state = fake_qmgr
    code, out, err = run(capsys, "--dsn", DSN, "hooks", "install", "--qmgr", str(qmgr))
    assert code == 0, err
    log = (state / "log").read_text().splitlines()
    assert log[:4] == [
        "list hook softwalltime",
        "list resource softwalltime_set",
        "create resource softwalltime_set type=long, flag=r",
        "create hook softwalltime",
    ]
    assert log[-1] == "set hook softwalltime enabled = true"
    # the imported config has the real DSN; the temporary file is gone again
    imported = json.loads((state / "x-config").read_text())
    assert imported["dsn"] == DSN
    config_tmp = next(line.split()[-1] for line in log if "x-config" in line)
    assert not os.path.exists(config_tmp)
    assert (state / "x-python").read_bytes() == cli_hooks.hook_script().read_bytes()
    assert "s3cret" not in out + err

    # installing again updates the existing hook instead of failing on "create"
    code, out, _ = run(capsys, "--dsn", DSN, "hooks", "install", "--qmgr", str(qmgr))
    assert code == 0 and "exists; updating" in out
    assert (state / "log").read_text().count("create hook") == 1
    assert (state / "log").read_text().count("create resource") == 1

    (state / "busy-softwalltime_set").touch()  # queued jobs still carry the mark: kept
    code, out, err = run(capsys, "hooks", "uninstall", "--qmgr", str(qmgr))
    assert code == 0 and not (state / "hook-softwalltime").exists()
    assert "resource softwalltime_set kept" in err and "Resource busy" in err
    assert (state / "resource-softwalltime_set").exists()
    (state / "busy-softwalltime_set").unlink()
    run(capsys, "--dsn", DSN, "hooks", "install", "--qmgr", str(qmgr))
    code, out, err = run(capsys, "hooks", "uninstall", "--qmgr", str(qmgr))
    assert code == 0 and "resource softwalltime_set deleted" in out
    assert not (state / "resource-softwalltime_set").exists()
    code, out, err = run(capsys, "hooks", "uninstall", "--qmgr", str(qmgr))
    assert code == 0 and "hook softwalltime not installed" in out, err  # nothing left: says so


def test_hook_script_is_packaged():
    """pip install . (non-editable) ships hooks/ as softwalltime/hookfiles/."""
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert meta["package-dir"]["softwalltime.hookfiles"] == "hooks"
    assert "softwalltime.hookfiles" in meta["packages"]
    assert (
        cli_hooks.hook_script().read_bytes()
        == (REPO / "hooks" / "softwalltime_hook.py").read_bytes()
    )


DRIVER = textwrap.dedent(
    """\
    import json, sys
    # pbs_server puts its own pbs package on the path; here: the fake, and nothing else.
    sys.path.insert(0, sys.argv[1])
    import pbs
    pbs.hook_config_filename = sys.argv[2]
    job = pbs.job(resources={"walltime": "24:00:00"})
    pbs.new_event(pbs.QUEUEJOB, "alice", job)
    out = pbs.run_hook(sys.argv[3])
    out["logged"] = pbs.logged
    out["site_packages_visible"] = any("site-packages" in p for p in sys.path[:1])
    print(json.dumps(out))
    """
)


# The Pythons pbs_server embeds: this one; Debian's /usr/bin/python3 (what OpenPBS here
# links); pyenv's 3.6 (EL8) and 3.9 (EL9).
HOOK_PYTHONS = {
    "this": sys.executable,
    "debian": "/usr/bin/python3",
    "el8-py3.6": "~/.pyenv/versions/3.6*/bin/python",
    "el9-py3.9": "~/.pyenv/versions/3.9*/bin/python",
}


def _hook_python(pattern):
    """The newest interpreter matching ``pattern``, or the pattern itself if none does."""
    found = sorted(glob.glob(os.path.expanduser(pattern)))
    return found[-1] if found else pattern


def _run_isolated(tmp_path, config, python=sys.executable):
    pbs_dir = tmp_path / "altair"
    pbs_dir.mkdir(exist_ok=True)
    shutil.copy(FAKE_PBS, pbs_dir / "pbs.py")
    cfg = tmp_path / "softwalltime.CF"
    cfg.write_text(json.dumps(config))
    proc = subprocess.run(
        # -I: ignore PYTHON* variables and the script's directory; -S: no site-packages.
        # That is how pbs_server's embedded interpreter is set up (pbs_python_external.c).
        [
            python,
            "-I",
            "-S",
            "-c",
            DRIVER,
            str(pbs_dir),
            str(cfg),
            str(cli_hooks.hook_script()),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(tmp_path),
        env={"PATH": os.environ.get("PATH", "/usr/bin")},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("runtime", sorted(HOOK_PYTHONS))
def test_generated_config_makes_the_hook_importable_in_isolation(tmp_path, fresh_dsn, runtime):
    """The hook and its database access run under -I -S (as inside pbs_server) on every
    Python that PBS embeds somewhere: nothing compiled, standard library only."""
    python = _hook_python(HOOK_PYTHONS[runtime])
    need_runtime(python, f"the hook under -I -S on the {runtime} Python pbs_server embeds")
    add_jobs(fresh_dsn, "alice", [(3600, 4 * 3600, 10)])
    settings = load_settings(environ={}, overrides={"dsn": fresh_dsn})
    config = cli_hooks.hook_config(settings)
    out = _run_isolated(tmp_path, config, python)
    assert out["accepted"] is True
    assert out["soft_walltime"] == 86400 // 4 + 900, out["logged"]

    # the control: without the generated sys_path nothing is importable, and the hook
    # still accepts the job unchanged, saying why
    out = _run_isolated(tmp_path, dict(config, sys_path=[]), python)
    assert out["accepted"] is True and out["soft_walltime"] is None
    (line,) = [msg for level, msg in out["logged"] if level == 6]
    assert "No module named 'softwalltime'" in line and "check sys_path" in line


def test_predict_command(capsys, fresh_dsn):
    add_jobs(fresh_dsn, "alice", [(3600, 4 * 3600, 10), (1800, None, 20)])
    code, out, err = run(
        capsys, "--dsn", fresh_dsn, "predict", "--user", "alice", "--walltime", "24:00:00"
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "soft_walltime: 06:15:00 (22500 s)"
    assert (
        lines[1].startswith("why: queuejob user='alice'") and "v3 soft_walltime=22500 s" in lines[1]
    )
    assert lines[2] == "history: 1 of at most 15 jobs with walltime > 0, most recent first"
    assert lines[3] == "  runtime 01:00:00  walltime 04:00:00"

    code, out, _ = run(
        capsys,
        "--dsn",
        fresh_dsn,
        "predict",
        "--user",
        "alice",
        "--walltime",
        "86400",
        "--predictor",
        "v2",
    )
    # v2: mean(3600, 1800) + 900
    assert code == 0 and out.splitlines()[0] == "soft_walltime: 01:00:00 (3600 s)"


def test_predict_command_errors(capsys):
    code, _, err = run(
        capsys,
        "--dsn",
        "postgresql://u:s3cret@127.0.0.1:1/x",
        "predict",
        "--user",
        "a",
        "--walltime",
        "1:00:00",
    )
    assert code == 1 and "cannot connect" in err and "s3cret" not in err
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--dsn", DSN, "predict", "--user", "a", "--walltime", "tomorrow"])
    assert exit_.value.code == 2
    assert "not a duration" in capsys.readouterr().err


def _settings_read_by(paths):
    names = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "settings"
            ):
                names.add(node.attr)
    return names


def test_the_hook_config_has_every_setting_the_hook_reads():
    """history_scope was read by the hook and not copied by hooks install: a site's
    'server' scope was silently 'all' inside pbs_server."""
    hook = REPO / "hooks" / cli_hooks.HOOK_FILE
    hook_path = [*(REPO / "softwalltime" / "core").glob("*.py")]
    hook_path += (REPO / "softwalltime" / "hook").glob("*.py")
    read = _settings_read_by([*hook_path, hook])
    assert {"history_scope", "dsn", "predictor", "history_cache_entries"} <= read
    assert read - set(cli_hooks.HOOK_KEYS) == set()
    settings = load_settings(environ={}, overrides={"dsn": DSN, "history_scope": "server"})
    config = cli_hooks.hook_config(settings)
    assert config["history_scope"] == "server"
    assert load_settings(environ={}, overrides=dict(config, dsn=DSN)).history_scope == "server"


def test_example_hook_config_is_valid():
    settings = load_settings(str(REPO / "hooks" / "softwalltime_hook.json"), environ={})
    assert settings.predictor == "v3" and settings.dsn and settings.sys_path
    assert settings.connect_timeout_s == 1.0 and settings.statement_timeout_ms == 250


UPGRADE_DRIVER = textwrap.dedent(
    """\
    import json, os, sys
    sys.path.insert(0, sys.argv[1])
    import pbs
    cfg, hook, first, second = sys.argv[2:6]
    pbs.hook_config_filename = cfg

    def event(sys_path):
        with open(cfg) as fh:
            config = json.load(fh)
        config["sys_path"] = [sys_path]
        with open(cfg, "w") as fh:
            json.dump(config, fh)
        pbs.new_event(pbs.QUEUEJOB, "alice", pbs.job(resources={"walltime": "24:00:00"}))
        out = pbs.run_hook(hook)
        lookup = sys.modules["softwalltime.hook.lookup"]
        return out["soft_walltime"], id(lookup), lookup.__file__, pbs.logged[:]

    results = [event(first), event(first)]
    # an upgrade in place, as pip does it: a new file renamed over the old one
    path = os.path.join(first, "softwalltime", "hook", "lookup.py")
    with open(path) as fh, open(path + ".new", "w") as out:
        out.write(fh.read())
    os.rename(path + ".new", path)
    results.append(event(first))
    # a reinstall elsewhere: the hook config's sys_path now names another copy
    results.append(event(second))
    print(json.dumps(results))
    """
)


UPGRADE_IN_PLACE_DRIVER = textwrap.dedent(
    """\
    import json, os, sys, time
    sys.path.insert(0, sys.argv[1])
    import pbs
    cfg, hook, root = sys.argv[2:5]
    pbs.hook_config_filename = cfg
    # the hook's clock (time.monotonic(), read as each event starts), moved by hand: the
    # window of the folders' look is tested on its edge, with no sleep
    start = time.monotonic()
    clock = [start]
    time.monotonic = lambda: clock[0]

    def event():
        pbs.new_event(pbs.QUEUEJOB, "alice", pbs.job(resources={"walltime": "24:00:00"}))
        out = pbs.run_hook(hook)
        return out["soft_walltime"], id(sys.modules["softwalltime.hook.lookup"])

    results = [event(), event()]  # the second event looks at the folders
    # pip upgrades the package, the hook and its config stay as they are
    path = os.path.join(root, "softwalltime", "hook", "lookup.py")
    with open(path) as fh, open(path + ".new", "w") as out:
        out.write(fh.read())
    os.rename(path + ".new", path)
    clock[0] = start + 0.999  # the folders are looked at once a second: not yet
    results.append(event())
    clock[0] = start + 1.0  # a second after the last look
    results.append(event())
    results.append(event())
    print(json.dumps(results))
    """
)


@pytest.mark.slow
def test_an_upgrade_with_the_same_config_is_noticed_within_a_second(tmp_path, fresh_dsn):
    add_jobs(fresh_dsn, "alice", [(3600, 4 * 3600, 10)])
    root = tmp_path / "install"
    shutil.copytree(
        REPO / "softwalltime",
        root / "softwalltime",
        ignore=shutil.ignore_patterns("data", "__pycache__"),
    )
    # compiled as the package's postinst does: else the first import's __pycache__ folders
    # change the folders' times, and the next look takes them for an upgrade
    assert compileall.compile_dir(str(root / "softwalltime"), quiet=1)
    pbs_dir = tmp_path / "altair"
    pbs_dir.mkdir()
    shutil.copy(FAKE_PBS, pbs_dir / "pbs.py")
    cfg = tmp_path / "softwalltime.CF"
    cfg.write_text(json.dumps({"dsn": fresh_dsn, "sys_path": [str(root)]}))
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", UPGRADE_IN_PLACE_DRIVER, str(pbs_dir), str(cfg),
         str(cli_hooks.hook_script()), str(root)],
        capture_output=True, text=True, timeout=60, cwd=str(tmp_path), check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (soft1, id1), (soft2, id2), (early, id_early), (soft3, id3), (soft4, id4) = json.loads(
        proc.stdout
    )
    assert soft1 == soft2 == early == soft3 == soft4 == 86400 // 4 + 900
    # 0.999 s after the last look: the old modules still; at 1 s: the new ones, kept
    assert id1 == id2 == id_early and id3 != id2 and id4 == id3


@pytest.mark.slow
def test_hook_imports_again_after_an_upgrade_instead_of_running_stale_modules(tmp_path, fresh_dsn):
    """pbs_server keeps imported modules until its interpreter restarts: after an upgrade
    the new hook script met the old modules ('module softwalltime.core.config has no
    attribute hook_settings', seen on the real server) and every job went unpredicted."""
    add_jobs(fresh_dsn, "alice", [(3600, 4 * 3600, 10)])
    copies = []
    for name in ("first", "second"):
        root = tmp_path / name
        shutil.copytree(
            REPO / "softwalltime", root / "softwalltime", ignore=shutil.ignore_patterns("data")
        )
        copies.append(str(root))
    pbs_dir = tmp_path / "altair"
    pbs_dir.mkdir()
    shutil.copy(FAKE_PBS, pbs_dir / "pbs.py")
    cfg = tmp_path / "softwalltime.CF"
    cfg.write_text(json.dumps({"dsn": fresh_dsn}))
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", UPGRADE_DRIVER, str(pbs_dir), str(cfg),
         str(cli_hooks.hook_script()), *copies],
        capture_output=True, text=True, timeout=60, cwd=str(tmp_path), check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (soft1, id1, file1, _), (soft2, id2, _, _), (soft3, id3, _, log3), (soft4, _, file4, _) = (
        json.loads(proc.stdout)
    )
    expected = 86400 // 4 + 900
    assert soft1 == soft2 == soft3 == soft4 == expected, log3
    assert id1 == id2  # nothing changed: the modules are kept between events
    assert id3 != id2  # a file changed on disk: imported again
    assert file1.startswith(copies[0]) and file4.startswith(copies[1])


def test_install_and_uninstall_json(capsys, fake_qmgr):
    """Issue 33: --json on hooks install/uninstall (and their dry runs); the password never."""
    qmgr, state = fake_qmgr
    code, out, err = run(capsys, "--dsn", DSN, "hooks", "install", "--dry-run", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert list(found) == [k for k, _ in cli_hooks.INSTALL_KEYS]
    assert found["dry_run"] is True and found["updated"] is None
    assert found["commands"][-1] == 'rm -f "$config"' and "s3cret" not in out
    for updated in (False, True):
        code, out, err = run(
            capsys, "--dsn", DSN, "hooks", "install", "--qmgr", str(qmgr), "--json"
        )
        assert code == 0, err
        found = json.loads(out)
        assert (found["hook"], found["dry_run"], found["updated"]) == (
            "softwalltime",
            False,
            updated,
        )
        assert found["dsn"] == "postgresql://hook:***@db.example.org/softwalltime"
        assert found["commands"][-1] == "set hook softwalltime enabled = true"
        assert ("create hook softwalltime" in found["commands"]) is not updated
    code, out, err = run(capsys, "hooks", "uninstall", "--qmgr", str(qmgr), "--json")
    assert code == 0, err
    found = json.loads(out)
    assert list(found) == [k for k, _ in cli_hooks.UNINSTALL_KEYS]
    assert found["commands"][:2] == ["delete hook softwalltime", "delete resource softwalltime_set"]
    assert found["resources_deleted"] == ["softwalltime_set"] and found["resources_kept"] == {}
    assert not (state / "hook-softwalltime").exists()
