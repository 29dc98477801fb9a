"""One loader: defaults < file < environment < flags; errors name the file and key."""

import json
import os

import pytest
from helpers_users import as_nobody, need_root

from softwalltime.core import config
from softwalltime.core.config import libpq_dsn, load_settings, redact_dsn, require_dsn
from softwalltime.errors import ConfigError
from softwalltime.hook.settings import hook_settings


def _write(tmp_path, data):
    path = tmp_path / "softwalltime.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


@pytest.fixture()
def no_system_file(tmp_path, monkeypatch):
    """No /etc/softwalltime.json, whatever this machine has (a package installed here, or
    the real-server package test running beside this suite, writes one)."""
    monkeypatch.setattr(config, "DEFAULT_CONFIG_FILE", str(tmp_path / "absent.json"))


def test_defaults_without_file_or_env(no_system_file):
    s = load_settings(environ={})
    assert (s.dsn, s.predictor, s.v1_jobs, s.v3_jobs, s.reserve_s) == (None, "v3", 2, 15, 900)
    assert s.statement_timeout_ms == 250 and s.connect_timeout_s == 1.0
    assert s.source == "defaults"


def test_precedence_defaults_file_env_flag(tmp_path):
    path = _write(tmp_path, {"dsn": "host=file", "predictor": "v1", "reserve_s": 600})
    s = load_settings(path, environ={})
    assert (s.dsn, s.predictor, s.reserve_s) == ("host=file", "v1", 600)
    env = {"SOFTWALLTIME_DSN": "host=env", "SOFTWALLTIME_PREDICTOR": "v2"}
    s = load_settings(path, environ=env)
    assert (s.dsn, s.predictor, s.reserve_s) == ("host=env", "v2", 600)
    s = load_settings(path, environ=env, overrides={"dsn": "host=flag", "predictor": None})
    assert (s.dsn, s.predictor) == ("host=flag", "v2")
    assert s.source == f"defaults, {path}, SOFTWALLTIME_DSN, SOFTWALLTIME_PREDICTOR, --dsn"


def test_config_file_from_environment_variable(tmp_path):
    path = _write(tmp_path, {"v3_jobs": 10})
    assert load_settings(environ={"SOFTWALLTIME_CONFIG": path}).v3_jobs == 10


def test_lists_from_file_and_env(tmp_path):
    path = _write(tmp_path, {"users_deny": ["root", "backup"]})
    assert load_settings(path, environ={}).users_deny == ("root", "backup")
    env = {"SOFTWALLTIME_QUEUES_ALLOW": "workq, gpu"}
    assert load_settings(environ=env).queues_allow == ("workq", "gpu")


@pytest.mark.parametrize(
    ("data", "key", "why"),
    [
        ({"predictor": "v4"}, "predictor", "must be one of v1, v2, v3"),
        (
            {"rank": "key_mean"},
            "rank",
            "must be one of off, key-mean, key-mean-paid, learned, learned-paid, got 'key_mean'",
        ),
        (
            {"rank": None},
            "rank",
            "must be one of off, key-mean, key-mean-paid, learned, learned-paid, got None",
        ),
        ({"v1_jobs": 0}, "v1_jobs", "between 1 and 1000"),
        ({"reserve_s": "lots"}, "reserve_s", "expected an integer"),
        ({"dry_run": "maybe"}, "dry_run", "expected true or false"),
        ({"connect_timeout_s": 0}, "connect_timeout_s", "between 0.01 and 5"),
        ({"users_allow": [1, 2]}, "users_allow", "list of strings"),
        ({"typo_key": 1}, "typo_key", "unknown key"),
    ],
)
def test_bad_values_name_file_and_key(tmp_path, data, key, why):
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as err:
        load_settings(path, environ={})
    assert path in str(err.value) and repr(key) in str(err.value) and why in str(err.value)


# Issue 9 item 10: values that used to be accepted and then broke the hook or a command
# (OverflowError in the hook, a wait past PBS's 30 s alarm, queries that always fail).
@pytest.mark.parametrize(
    ("raw", "key", "why"),
    [
        ('{"connect_timeout_s": 1e400}', "connect_timeout_s", "between 0.01 and 5"),
        ('{"connect_timeout_s": 40}', "connect_timeout_s", "between 0.01 and 5"),
        ('{"connect_timeout_s": NaN}', "connect_timeout_s", "expected a number"),
        ('{"v3_jobs": 1e20}', "v3_jobs", "between 1 and 1000"),
        ('{"v3_jobs": 2.5}', "v3_jobs", "expected an integer"),
        ('{"statement_timeout_ms": 1e400}', "statement_timeout_ms", "expected an integer"),
        ('{"statement_timeout_ms": 0}', "statement_timeout_ms", "between 1 and 5000"),
        ('{"long_walltime_factor": Infinity}', "long_walltime_factor", "between 0.01 and 100"),
        ('{"reserve_s": -1}', "reserve_s", "between 0 and"),
    ],
)
def test_out_of_range_settings_are_refused_at_load_time(tmp_path, raw, key, why):
    path = _write(tmp_path, raw)
    with pytest.raises(ConfigError) as err:
        load_settings(path, environ={})
    assert path in str(err.value) and repr(key) in str(err.value) and why in str(err.value)


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400", "0"])
def test_out_of_range_environment_values_are_refused(value):
    with pytest.raises(ConfigError, match="SOFTWALLTIME_CONNECT_TIMEOUT_S"):
        load_settings(environ={"SOFTWALLTIME_CONNECT_TIMEOUT_S": value})


def test_the_hooks_worst_wait_stays_under_pbs_default_alarm():
    from softwalltime.core.config import RANGES, STATEMENT_GRACE_S

    worst = RANGES["connect_timeout_s"][1] + RANGES["statement_timeout_ms"][1] / 1000
    assert worst + STATEMENT_GRACE_S < 30 / 2  # pbs default alarm 30 s; hooks install: half


def test_bad_env_value_names_the_variable():
    with pytest.raises(ConfigError, match="SOFTWALLTIME_V3_JOBS"):
        load_settings(environ={"SOFTWALLTIME_V3_JOBS": "-3"})


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(str(tmp_path / "missing.json"), environ={})
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_settings(_write(tmp_path, "{nope"), environ={})
    with pytest.raises(ConfigError, match="JSON object"):
        load_settings(_write(tmp_path, "[1]"), environ={})


def test_require_dsn_says_how(no_system_file):
    with pytest.raises(ConfigError, match="SOFTWALLTIME_DSN"):
        require_dsn(load_settings(environ={}))


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://pbs:s3cret@db:5432/hist", "postgresql://pbs:***@db:5432/hist"),
        ("postgresql+psycopg2://pbs:s3cret@db/hist", "postgresql+psycopg2://pbs:***@db/hist"),
        ("host=db user=pbs password=s3cret dbname=h", "host=db user=pbs password=*** dbname=h"),
        ("host=db password = 'se cret' dbname=h", "host=db password=*** dbname=h"),
        ("postgresql://db/h?user=x&password=s3cret", "postgresql://x:***@db/h"),
        ("postgresql://pbs@db/hist", "postgresql://pbs@db/hist"),
    ],
)
def test_redact_dsn_hides_passwords(dsn, shown):
    assert redact_dsn(dsn) == shown
    assert "s3cret" not in redact_dsn(dsn)


def test_libpq_dsn_strips_sqlalchemy_driver():
    assert libpq_dsn("postgresql+psycopg2://u@h/d") == "postgresql://u@h/d"
    assert libpq_dsn("host=h dbname=d") == "host=h dbname=d"


@pytest.fixture()
def public_dir():
    """A directory every user can search (pytest's tmp_path is under a 0700 one)."""
    import shutil
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp(prefix="swt-config-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_a_readable_config_file_with_a_password_gets_a_warning(public_dir, caplog):
    """Issue 9 item 11: once per file, naming it and the fix; never the password. (The
    directories on the way count too: tests/test_config_exposure.py.)"""
    import logging

    from softwalltime.core import config as config_module

    tmp_path = public_dir

    secret = _write(tmp_path, {"dsn": "postgresql://u:hunter2@db/h"})
    os.chmod(secret, 0o644)
    no_secret = str(tmp_path / "nosecret.json")
    with open(no_secret, "w") as fh:
        fh.write('{"dsn": "postgresql://u@db/h"}')
    os.chmod(no_secret, 0o644)
    config_module._warned.clear()
    with caplog.at_level(logging.WARNING, logger="softwalltime"):
        load_settings(secret, environ={})
        load_settings(secret, environ={})
        load_settings(no_secret, environ={})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"{secret} holds a database password and is readable by others:"
                        f" chmod 600 {secret}"]  # fmt: skip
    assert "hunter2" not in caplog.text
    os.chmod(secret, 0o600)
    config_module._warned.clear()
    caplog.clear()
    load_settings(secret, environ={})
    assert caplog.records == []


def test_dsn_option_help_warns_about_ps(capsys):
    from softwalltime import cli

    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "visible to every local user in ps" in capsys.readouterr().out


def test_config_command_shows_defaults_lists_and_a_source_per_key(capsys, tmp_path, monkeypatch):
    """Issue 9 item 18: it showed 'accounting_dir None', lists as '()' and one combined
    source line; now the documented default, JSON lists and where each key came from."""
    from softwalltime import cli

    for name in [n for n in os.environ if n.startswith("SOFTWALLTIME_")]:
        monkeypatch.delenv(name)
    cfg = _write(tmp_path, {"users_deny": ["root", "backup"], "dsn": "postgresql://u:pw@h/d"})
    os.chmod(cfg, 0o600)
    monkeypatch.setenv("SOFTWALLTIME_PREDICTOR", "v2")
    assert cli.main(["--config", cfg, "--dsn", "host=h password=pw2", "config"]) == 0
    rows = {
        line.split()[0]: line.split(None, 1)[1] for line in capsys.readouterr().out.splitlines()
    }
    assert rows["dsn"].split() == ["host=h", "password=***", "--dsn"]
    assert rows["predictor"].split() == ["v2", "SOFTWALLTIME_PREDICTOR"]
    assert rows["users_deny"].rsplit(None, 1) == ['["root", "backup"]', cfg]
    assert rows["users_allow"].split() == ["[]", "default"]
    assert rows["accounting_dir"].split() == ["$PBS_HOME/server_priv/accounting", "default"]
    assert rows["dry_run"].split() == ["false", "default"]
    assert rows["rank"].split() == ["off", "default"]
    assert "source" not in rows and "pw" not in "".join(rows.values()).replace("password", "")


def test_hook_settings_are_kept_while_the_files_stamp_is_the_same(tmp_path):
    path = _write(tmp_path, {"predictor": "v1"})
    assert hook_settings(path, ("stat", 1)).predictor == "v1"
    with open(path, "w") as fh:
        json.dump({"predictor": "v2"}, fh)
    assert hook_settings(path, ("stat", 1)).predictor == "v1"  # the same stamp: not read
    assert hook_settings(path, ("stat", 2)).predictor == "v2"
    with open(path, "w") as fh:
        json.dump({"predictor": "v3"}, fh)
    assert hook_settings(path).predictor == "v3"  # no stamp: the bytes are compared


def test_rank_from_file_and_environment(tmp_path):
    assert load_settings(environ={}).rank == "off"
    path = _write(tmp_path, {"rank": "key-mean"})
    assert load_settings(path, environ={}).rank == "key-mean"
    assert load_settings(path, environ={"SOFTWALLTIME_RANK": "off"}).rank == "off"
    with pytest.raises(ConfigError, match="SOFTWALLTIME_RANK: key 'rank': must be one of"):
        load_settings(environ={"SOFTWALLTIME_RANK": "on"})


def test_the_system_file_is_read_when_no_path_is_given(tmp_path, monkeypatch):
    system = _write(tmp_path, {"dsn": "host=system", "predictor": "v1"})
    monkeypatch.setattr(config, "DEFAULT_CONFIG_FILE", system)
    s = load_settings(environ={})
    assert (s.dsn, s.predictor, s.source) == ("host=system", "v1", f"defaults, {system}")


def test_an_environment_list_is_a_comma_list_and_json_is_refused():
    """Issue 50 item 7: SOFTWALLTIME_PBS_COMMAND_PREFIX='[]' became a command named "[]"
    ("[]: not found"); the format was written nowhere. An empty value is no prefix."""
    name = "SOFTWALLTIME_PBS_COMMAND_PREFIX"
    assert load_settings(None, environ={name: ""}).pbs_command_prefix == ()
    got = load_settings(None, environ={name: "sudo, -n"}).pbs_command_prefix
    assert got == ("sudo", "-n")
    for value in ("[]", ' ["sudo", "-n"]'):
        with pytest.raises(ConfigError) as caught:
            load_settings(None, environ={name: value})
        assert str(caught.value) == (
            f"environment variable {name}: key 'pbs_command_prefix': a list separated by ','"
            f" (empty for none), not JSON, got {value!r}"
        )
    with pytest.raises(ConfigError, match="separated by ':'"):
        load_settings(None, environ={"SOFTWALLTIME_SYS_PATH": "[]"})


def test_the_default_file_unreadable_says_who_may_read_it(public_dir, monkeypatch):
    """Issue 50 item 1: `db upgrade` run as postgres stopped at "/etc/softwalltime.json:
    Permission denied" with no way out said. Run as user nobody on a real root-only file."""
    need_root()
    path = public_dir / "softwalltime.json"
    path.write_text("{}")
    path.chmod(0o600)

    def load(name: str | None) -> int:
        try:
            load_settings(name, environ={})
        except ConfigError as err:
            print(err)
            return 1
        return 0

    monkeypatch.setattr(config, "DEFAULT_CONFIG_FILE", str(path))
    code, out, _ = as_nobody(lambda: load(None), {})
    assert (code, out.strip()) == (
        1,
        f"{path}: cannot read configuration file: Permission denied (readable by root and"
        " the group softwalltime; or give another file with --config or"
        " SOFTWALLTIME_CONFIG)",
    )
    other = public_dir / "site.json"  # another file, named: as before
    other.write_text("{}")
    other.chmod(0o600)
    code, out, _ = as_nobody(lambda: load(str(other)), {})
    assert (code, out.strip()) == (1, f"{other}: cannot read configuration file: Permission denied")
