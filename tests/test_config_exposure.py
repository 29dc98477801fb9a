"""Who can read a config file that holds a password: the directories on the way count.

Found on the real server: the hook's config, which PBS rewrites 0644 at every import inside
``server_priv/hooks`` (0750, root's), was reported "readable by others: chmod 600"."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from softwalltime.core import config as config_module
from softwalltime.core.config import load_settings, readable_by

SECRET = '{"dsn": "postgresql://hook:hunter2@db/h"}'


@pytest.fixture()
def public_dir() -> Iterator[Path]:
    """A directory every user can search (pytest's tmp_path is under a 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix="swt-exposure-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def _file(directory: Path, mode: int, gid: int = 0) -> str:
    path = directory / "softwalltime.CF"
    path.write_text(SECRET)
    os.chown(path, -1, gid)
    path.chmod(mode)
    return str(path)


def test_pbs_hooks_directory_keeps_others_out(public_dir):
    hooks = public_dir / "server_priv" / "hooks"
    hooks.mkdir(parents=True)
    (public_dir / "server_priv").chmod(0o750)
    hooks.chmod(0o750)
    assert readable_by(_file(hooks, 0o644)) is None  # as PBS leaves it
    config_module._warned.clear()


def test_the_file_and_every_directory_count(public_dir):
    assert readable_by(_file(public_dir, 0o644)) == "others"
    assert readable_by(_file(public_dir, 0o600)) is None
    assert readable_by(_file(public_dir, 0o640, gid=4242)) == "its group"
    assert readable_by(_file(public_dir, 0o640, gid=0)) is None  # group root: administrators
    sub = public_dir / "sub"
    sub.mkdir()
    sub.chmod(0o710)
    os.chown(sub, -1, 4242)
    # others are kept out, the group of the directory (here the file's) is let in
    assert readable_by(_file(sub, 0o644, gid=4242)) == "its group"
    # a member of the directory's group who is "other" to the file reads it
    assert readable_by(_file(sub, 0o644, gid=4343)) == "others"
    sub.chmod(0o700)
    assert readable_by(_file(sub, 0o644, gid=4242)) is None
    os.chown(sub, 4444, -1)  # another user owns the directory: that user reads the file
    assert readable_by(_file(sub, 0o644, gid=4242)) == "others"


def test_no_warning_for_the_hook_config_as_pbs_writes_it(public_dir, caplog):
    hooks = public_dir / "hooks"
    hooks.mkdir()
    hooks.chmod(0o750)
    path = _file(hooks, 0o644)
    config_module._warned.clear()
    with caplog.at_level(logging.WARNING, logger="softwalltime"):
        load_settings(path, environ={})
    assert caplog.records == []
    hooks.chmod(0o755)  # a directory that lets others in: warned
    config_module._warned.clear()
    with caplog.at_level(logging.WARNING, logger="softwalltime"):
        load_settings(path, environ={})
    assert [r.getMessage() for r in caplog.records] == [
        f"{path} holds a database password and is readable by others: chmod 600 {path}"
    ]
    config_module._warned.clear()
