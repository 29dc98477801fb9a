"""``--json`` of predict, ingest, config and db current (issue 21: scripts need not parse
tables): every key each command's --help lists, in that order, with values checked against
the database and the settings they come from."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg2
import pytest
from helpers_history import add_jobs

from softwalltime import cli
from softwalltime.db import engine as db

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "softwalltime" / "data" / "openpbs-23.06-local.log"
H = 3600


def _json(capsys, *argv: str) -> tuple[int, dict]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    try:
        return code, json.loads(out)
    except json.JSONDecodeError:
        pytest.fail(f"not JSON (exit {code}): {out!r} {err!r}")


def _keys(keys: tuple[tuple[str, str], ...]) -> list[str]:
    return [k for k, _ in keys]


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit):
        cli.main([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())


def _sql(dsn: str, statement: str) -> list[tuple[object, ...]]:
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            cur.execute(statement)
            return list(cur.fetchall()) if cur.description else []
    finally:
        conn.close()


def test_the_help_of_each_command_lists_its_json_keys(capsys):
    from softwalltime_ingest import cli as ingest_cli

    from softwalltime.cli import dbgrant, dbprune, hooks, predict, refresh

    for argv, keys in (
        (["predict"], predict.JSON_KEYS),
        (["ingest"], ingest_cli.JSON_KEYS),
        (["db", "current"], cli.DB_CURRENT_KEYS),
        (["db", "prune"], dbprune.JSON_KEYS),
        (["db", "upgrade"], cli.DB_MIGRATE_KEYS),
        (["db", "downgrade"], cli.DB_MIGRATE_KEYS),
        (["db", "grant"], dbgrant.JSON_KEYS),
        (["hooks", "install"], hooks.INSTALL_KEYS),
        (["hooks", "uninstall"], hooks.UNINSTALL_KEYS),
        (["refresh"], refresh.JSON_KEYS),
    ):
        text = _help(capsys, *argv)
        for key, meaning in keys:
            assert f"{key} ({' '.join(meaning.split())})" in text, (argv, key)
    assert "when_unset" in _help(capsys, "config")


def test_predict_json(fresh_dsn, capsys, tmp_path):
    # alice: 1 h of 4 h, then (most recent) 1 h of 2 h: v3's ratio is 0.5
    add_jobs(fresh_dsn, "alice", [(H, 4 * H, 10), (H, 2 * H, 20)])
    argv = ["--dsn", fresh_dsn, "predict", "--user", "alice", "--walltime", "24:00:00", "--json"]
    code, data = _json(capsys, *argv)
    assert code == 0 and list(data) == _keys(cli.predict.JSON_KEYS)
    assert (data["user"], data["walltime_s"], data["predictor"]) == ("alice", 86400, "v3")
    assert (data["soft_walltime_s"], data["predicted_s"], data["dry_run"]) == (44100, 44100, False)
    assert (data["basis_jobs"], data["basis_value"], data["history_limit"]) == (2, 0.5, 15)
    assert data["history"] == [
        {"runtime_s": H, "walltime_s": 2 * H, "ncpus": None},
        {"runtime_s": H, "walltime_s": 4 * H, "ncpus": None},
    ]
    assert data["calibration"] is None and "set v3 soft_walltime=44100 s" in data["reason"]
    # a dry run: the hook sets nothing, the prediction is still there
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"dry_run": True}))
    code, data = _json(capsys, "--config", str(cfg), *argv, "--predictor", "v1")
    assert code == 0 and (data["soft_walltime_s"], data["predicted_s"]) == (None, H)
    assert (data["dry_run"], data["predictor"], data["history_limit"]) == (True, "v1", 2)
    # the predictor calibrated: the job's processors, its class rows and the site table
    code, data = _json(
        capsys, *argv, "--predictor", "calibrated", "--select", "2:ncpus=4+1:ncpus=2"
    )
    assert code == 0 and data["ncpus"] == 10 and data["predictor"] == "calibrated"
    assert [row["walltime_s"] for row in data["history"]] == [2 * H, 4 * H]
    assert data["calibration"] == {"jobs": 0, "lambda": data["calibration"]["lambda"]}
    assert data["history_limit"] == 100
    # the predictor learned, never calibrated: its v3 (the same 0.5 x 24 h + 900 s)
    code, data = _json(capsys, *argv, "--predictor", "learned")
    assert code == 0 and data["predictor"] == "learned" and data["soft_walltime_s"] == 44100
    assert "set learned soft_walltime=44100 s (rule v3 in fine bin" in data["reason"]
    assert [row["walltime_s"] for row in data["history"]] == [2 * H, 4 * H]
    assert data["calibration"] == {"jobs": 0, "lambda": 1.0} and data["history_limit"] == 100
    code = cli.main(argv[:-1] + ["--predictor", "learned"])
    out = capsys.readouterr().out
    assert code == 0 and "learned table: 0 finished jobs learned, lambda 1" in out
    assert "history: 2 of at most 100 jobs with walltime > 0" in out


def test_config_json(capsys, tmp_path, monkeypatch):
    for name in [n for n in __import__("os").environ if n.startswith("SOFTWALLTIME_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SOFTWALLTIME_V3_JOBS", "7")
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"predictor": "v2", "users_deny": ["root"]}))
    cfg.chmod(0o600)
    code, data = _json(
        capsys, "--config", str(cfg), "--dsn", "postgresql://u:s3cret@h/db", "config", "--json"
    )
    assert code == 0 and list(data) == ["source", "settings"]
    settings = data["settings"]
    from softwalltime.core.config import DEFAULTS

    assert list(settings) == list(DEFAULTS)
    assert settings["predictor"] == {"value": "v2", "origin": str(cfg)}
    assert settings["v3_jobs"] == {"value": 7, "origin": "SOFTWALLTIME_V3_JOBS"}
    assert settings["users_deny"] == {"value": ["root"], "origin": str(cfg)}
    assert settings["dry_run"] == {"value": False, "origin": "default"}
    assert settings["dsn"]["origin"] == "--dsn" and "s3cret" not in json.dumps(data)
    assert settings["dsn"]["value"].startswith("postgresql://u:")
    assert settings["server"] == {
        "value": None,
        "origin": "default",
        "when_unset": "(each job id's suffix)",
    }
    assert settings["pbs_exec"]["value"] is None
    assert "PBS_EXEC" in settings["pbs_exec"]["when_unset"]
    assert data["source"] == f"defaults, {cfg}, SOFTWALLTIME_V3_JOBS, --dsn"


@pytest.mark.slow
def test_db_current_json(empty_dsn, fresh_dsn, capsys):
    head = db.head_revision()
    code, data = _json(capsys, "--dsn", empty_dsn, "db", "current", "--json")
    assert list(data) == _keys(cli.DB_CURRENT_KEYS)
    assert (code, data["current"], data["head"], data["state"]) == (1, None, head, "behind")
    assert data["exit_code"] == 1 and data["database"] == db.dsn_target(empty_dsn)
    code, data = _json(capsys, "--dsn", fresh_dsn, "db", "current", "--json")
    assert (code, data["current"], data["state"], data["exit_code"]) == (0, head, "up_to_date", 0)
    _sql(fresh_dsn, "UPDATE alembic_version SET version_num = '9999'")
    code, data = _json(capsys, "--dsn", fresh_dsn, "db", "current", "--json")
    assert (code, data["current"], data["state"], data["exit_code"]) == (1, "9999", "newer", 1)


def test_ingest_json(fresh_dsn, capsys, tmp_path):
    garbage = tmp_path / "20260101"
    garbage.write_text("no accounting record\n")
    missing = tmp_path / "20260102"
    argv = ["--dsn", fresh_dsn, "ingest", "--no-progress", "--json"]
    code, data = _json(capsys, *argv, str(SAMPLE), str(garbage), str(missing))
    assert code == 1 and list(data) == [k for k, _ in cli_ingest_keys()]
    jobs, reruns = (
        _sql(fresh_dsn, f"SELECT count(*) FROM {t}")[0][0] for t in ("finished_jobs", "job_reruns")
    )
    assert (jobs, reruns) == (13, 1)
    assert data["record_types"]["E"] == {
        "meaning": "ended",
        "read": 13,
        "stored": 13,
        "skipped": 0,
        "malformed": 0,
    }
    assert data["record_types"]["R"]["stored"] == 1
    records = data["records"]
    types = data["record_types"].values()
    for key in ("read", "stored", "skipped", "malformed"):
        assert records[key] == sum(t[key] for t in types), key
    assert records["malformed"] == data["malformed_lines"] == 1
    assert data["bytes_read"] == SAMPLE.stat().st_size + garbage.stat().st_size
    assert sum(data["files"].values()) == 3 and data["locked_out"] is False
    assert len(data["failed"]) == 2 and data["failed"][0].startswith(f"{missing}: ")
    # a file with no record at all is no accounting log (issue 32): failed, no checkpoint
    refused = f"{garbage}: not an accounting log (1 line, none a record); nothing stored"
    assert data["failed"][1] == refused
    # again: nothing new to read in the sample; the garbage is refused again
    code, data = _json(capsys, *argv, str(SAMPLE), str(garbage))
    assert code == 1 and data["records"]["read"] == 1
    assert data["bytes_read"] == garbage.stat().st_size
    assert data["failed"] == [refused] and data["lock_holder"] is None


def cli_ingest_keys() -> tuple[tuple[str, str], ...]:
    from softwalltime_ingest.cli import JSON_KEYS

    return JSON_KEYS


def test_db_upgrade_and_downgrade_json(empty_dsn, capsys):
    """Issue 33: --json on every command that prints results."""
    head = db.head_revision()
    code, found = _json(capsys, "--dsn", empty_dsn, "db", "upgrade", "--json")
    assert code == 0 and list(found) == _keys(cli.DB_MIGRATE_KEYS)
    assert found["command"] == "upgrade" and found["previous"] is None
    assert found["revision"] == found["head"] == head
    assert "@" in found["database"] and ":" in found["database"]
    code, found = _json(capsys, "db", "downgrade", "base", "--json", "--dsn", empty_dsn)
    assert code == 0
    assert (found["command"], found["previous"], found["revision"]) == ("downgrade", head, None)


def test_predict_records_what_each_reader_returned():
    """predict's recorder (issue 51: a class, not attributes patched onto a function): the
    hook's fetch, its one statement for the rank, and calibrated's site history."""
    from softwalltime.cli import predict

    class Fetch:
        def __call__(self, user, limit, only):
            return [(1, 2)]

        def both(self, user, limit, only):
            return [(3, 4)], [(3, 4, 1)]

    class Site:
        def history(self, user, limit):
            return iter([(5, 6, 2)])

    record = predict._Recorder(Fetch(), Site())
    assert record("alice", 2, False) == [(1, 2)]
    assert record.both("alice", 15, True) == ([(3, 4)], [(3, 4, 1)])
    assert record.history("alice", 100) == [(5, 6, 2)]
    assert record.seen == [(1, 2), (3, 4)] and record.class_rows == [(3, 4, 1), (5, 6, 2)]
