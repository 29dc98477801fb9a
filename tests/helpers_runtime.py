"""Optional interpreters the tests run code under (the Pythons pbs_server embeds)."""

import os

import pytest


def need_runtime(path, why):
    """Skip the test when the interpreter ``path`` is missing; fail instead when ``CI`` is
    set (CI=true): CI must run every Python that pbs_server embeds, never skip one silently.

    :param path: the interpreter
    :param why: what the test checks with it, for the skip or failure message
    """
    if os.access(str(path), os.X_OK):
        return
    skip_or_fail(f"{path} is missing, so this cannot check {why}", "pyenv install")


def in_ci():
    """Whether ``CI`` is set (CI=true): there nothing may be skipped for a missing tool."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def skip_or_fail(message, fix):
    """Skip with ``message`` locally; in CI fail, saying how CI gets what is missing."""
    if in_ci():
        pytest.fail(f"{message}; CI must have it ({fix})")
    pytest.skip(message)
