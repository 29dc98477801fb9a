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
    message = f"{path} is missing, so this cannot check {why}"
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{message}; CI must have it (pyenv install)")
    pytest.skip(message)
