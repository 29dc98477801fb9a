"""Issue 32 item 3: refresh runs as the service user. PBS shows a hook's listing and
configuration to root only, so the unit's root-only step (``refresh --export-hook``) writes
them to a file of its RuntimeDirectory that the unprivileged run (``--hook-file``) reads.
Here against a recorded qmgr (the real server: tests/pbs/test_package_real.py)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from softwalltime.cli import main
from softwalltime.core.config import load_settings
from softwalltime.pbsserver import refresh as r
from softwalltime.pbsserver.commands import Pbs

LISTING = """Hook softwalltime
    type = site
    enabled = {enabled}
    event = queuejob,modifyjob,runjob
    user = pbsadmin
    alarm = 30
    order = 1
"""
CONFIG = {"dsn": "postgresql://softwalltime_hook@/swt?host=/run/pg", "predictor": "v1"}


def recorded_qmgr(tmp_path, enabled: str = "true") -> Pbs:
    """A PBS_EXEC whose qmgr answers ``list hook`` and ``export hook`` as OpenPBS 23.06 does
    for root (and fails like it for anything else)."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "listing").write_text(LISTING.format(enabled=enabled))
    (tmp_path / "config").write_text(json.dumps(CONFIG))
    qmgr = tmp_path / "bin" / "qmgr"
    qmgr.write_text(
        "#!/bin/sh\n"
        f'case "$2" in\n"list hook softwalltime") cat {tmp_path / "listing"} ;;\n'
        f'"export hook softwalltime application/x-config default") cat {tmp_path / "config"} ;;\n'
        '*) echo "qmgr obj=x svr=default: Unknown Hook" >&2; exit 1 ;;\nesac\n'
    )
    qmgr.chmod(0o755)
    return Pbs(exec_dir=str(tmp_path))


def cli_settings():
    return load_settings(None, environ={}, overrides={"refresh_min_change_s": 60})


def test_export_then_read_gives_the_hooks_listing_and_settings(tmp_path):
    pbs = recorded_qmgr(tmp_path)
    folder = tmp_path / "run"
    folder.mkdir(mode=0o750)
    path = str(folder / "hook.json")
    r.export_hook(pbs, "softwalltime", path)
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o640 and st.st_gid == folder.stat().st_gid
    listing, exported = r.read_hook_file(path, "softwalltime")
    assert listing["enabled"] == "true" and "modifyjob" in listing["event"]
    used = r.settings_from_export(exported, "softwalltime", cli_settings())
    assert (used.dsn, used.predictor, used.source) == (
        CONFIG["dsn"],
        "v1",
        "hook softwalltime config",
    )
    assert used.refresh_min_change_s == 60  # refresh's own knobs stay the command's
    assert [p.name for p in folder.iterdir()] == ["hook.json"]  # no temporary file left


def test_export_replaces_a_symlink_and_never_writes_through_it(tmp_path):
    pbs = recorded_qmgr(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    folder = tmp_path / "run"
    folder.mkdir(mode=0o750)
    (folder / "hook.json").symlink_to(victim)
    r.export_hook(pbs, "softwalltime", str(folder / "hook.json"))
    assert victim.read_text() == "keep me"
    assert not (folder / "hook.json").is_symlink()


def test_export_refuses_a_folder_others_may_write(tmp_path):
    pbs = recorded_qmgr(tmp_path)
    folder = tmp_path / "run"
    folder.mkdir()
    folder.chmod(0o1777)
    with pytest.raises(r.RefreshError, match="writable by others"):
        r.export_hook(pbs, "softwalltime", str(folder / "hook.json"))
    assert list(folder.iterdir()) == []


def test_export_of_a_missing_hook_is_one_error(tmp_path):
    pbs = recorded_qmgr(tmp_path)
    with pytest.raises(r.RefreshError, match="hook 'other' is not installed"):
        r.export_hook(pbs, "other", str(tmp_path / "hook.json"))
    assert not (tmp_path / "hook.json").exists()


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "cannot read .*: No such file or directory .*--export-hook"),
        ("not json", "is not a hook file of refresh --export-hook"),
        ('{"hook": "softwalltime", "list": [], "config": ""}', "of the wrong type"),
        ('{"hook": "other", "list": {}, "config": ""}', "holds hook 'other', not 'softwalltime'"),
        (" " * (r.MAX_HOOK_FILE + 1), f"over {r.MAX_HOOK_FILE} bytes"),
    ],
)
def test_a_bad_hook_file_is_one_error(tmp_path, content, message):
    path = tmp_path / "hook.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(r.RefreshError, match=message):
        r.read_hook_file(str(path), "softwalltime")


def run_cli(capsys, tmp_path, *args):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"pbs_exec": str(tmp_path)}))
    code = main(["--config", str(cfg), "refresh", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_export_then_a_disabled_hook_stops_the_unprivileged_run(capsys, tmp_path):
    recorded_qmgr(tmp_path, enabled="false")
    path = str(tmp_path / "hook.json")
    assert run_cli(capsys, tmp_path, "--export-hook", path) == (0, "", "")
    # the unprivileged step asks no qmgr: the listing comes from the file
    (tmp_path / "bin" / "qmgr").unlink()
    code, out, err = run_cli(
        capsys, tmp_path, "--hook-file", path, "--lock-file", str(tmp_path / "lock")
    )
    assert (code, out) == (2, "")
    assert err.startswith("softwalltime refresh: error: hook 'softwalltime' is disabled")
    assert err.count("\n") == 1


def test_cli_export_hook_and_hook_file_exclude_each_other(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        run_cli(capsys, tmp_path, "--export-hook", "a", "--hook-file", "b")
    assert exc.value.code == 2
