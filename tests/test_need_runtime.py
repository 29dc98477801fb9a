"""tests/helpers_runtime.py's need_runtime: an optional interpreter is a skip locally, a failure in
CI, never a silent pass."""

import sys

import pytest
from helpers_runtime import need_runtime


def test_a_missing_runtime_skips_locally_and_fails_in_ci(tmp_path, monkeypatch):
    missing = tmp_path / "python3.6"
    monkeypatch.delenv("CI", raising=False)
    need_runtime(sys.executable, "nothing")  # present: no effect
    with pytest.raises(pytest.skip.Exception, match="python3.6 is missing, so this cannot check"):
        need_runtime(missing, "the hook")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must have it"):
        need_runtime(missing, "the hook")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        need_runtime(missing, "the hook")
