"""One loader: defaults < file < environment < flags; errors name the file and key."""

import json

import pytest

from softwalltime.errors import ConfigError
from softwalltime.hookpath.config import libpq_dsn, load_settings, redact_dsn, require_dsn


def _write(tmp_path, data):
    path = tmp_path / "softwalltime.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


def test_defaults_without_file_or_env():
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
        ({"v1_jobs": 0}, "v1_jobs", "at least 1"),
        ({"reserve_s": "lots"}, "reserve_s", "expected an integer"),
        ({"dry_run": "maybe"}, "dry_run", "expected true or false"),
        ({"connect_timeout_s": 0}, "connect_timeout_s", "greater than 0"),
        ({"users_allow": [1, 2]}, "users_allow", "list of strings"),
        ({"typo_key": 1}, "typo_key", "unknown key"),
    ],
)
def test_bad_values_name_file_and_key(tmp_path, data, key, why):
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as err:
        load_settings(path, environ={})
    assert path in str(err.value) and repr(key) in str(err.value) and why in str(err.value)


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


def test_require_dsn_says_how():
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
