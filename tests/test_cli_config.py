"""``softwalltime config`` shows what an unset pbs_exec means (issue 21: it showed
``pbs_exec (none)`` while the PBS commands used PBS_EXEC of /etc/pbs.conf)."""

from __future__ import annotations

import json

from softwalltime import cli
from softwalltime.pbsserver import commands


def _pbs_exec_line(capsys, tmp_path, config: dict) -> str:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(config))
    assert cli.main(["--config", str(cfg), "config"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("pbs_exec ")]
    return " ".join(line.split())


def test_config_shows_the_pbs_exec_the_commands_use(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(commands, "read_pbs_conf", lambda path=None: {"PBS_EXEC": "/srv/pbs"})
    line = _pbs_exec_line(capsys, tmp_path, {})
    assert line == "pbs_exec /srv/pbs (PBS_EXEC of /etc/pbs.conf) default"
    monkeypatch.setattr(commands, "read_pbs_conf", lambda path=None: {})
    line = _pbs_exec_line(capsys, tmp_path, {})
    assert line == "pbs_exec /opt/pbs (no PBS_EXEC in /etc/pbs.conf) default"
    line = _pbs_exec_line(capsys, tmp_path, {"pbs_exec": "/usr/local/pbs"})
    assert line.startswith("pbs_exec /usr/local/pbs ") and "(PBS_EXEC" not in line
