"""Building the distribution prints no setuptools warning (issue 21: every ``pip install``
warned that the license table is deprecated and that ``softwalltime.data`` was not listed
as a package). The sources are copied to a scratch folder first: setuptools writes build/
and *.egg-info beside pyproject.toml, and other builds may run in the checkout."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # see pyproject's markers: not in make test-fast

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "softwalltime", "hooks", "ingest", "migrations")
WARNING = re.compile(
    r"BuildBackendWarning|SetuptoolsDeprecationWarning|SetuptoolsWarning|is absent from the"
    r" `packages` configuration|is deprecated",
)


def test_the_wheel_builds_without_setuptools_warnings(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=skip)
        else:
            shutil.copy2(path, src / name)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "--wheel-dir", tmp_path, src],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert not WARNING.findall(log), [ln for ln in log.splitlines() if WARNING.search(ln)]
    (wheel,) = tmp_path.glob("softwalltime-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        assert "License-Expression: MIT" in whl.read(metadata).decode().splitlines()
    data = {p.name for p in (REPO / "softwalltime" / "data").iterdir() if p.is_file()}
    assert {f"softwalltime/data/{n}" for n in data} <= names
