"""Building this checkout's packages for the tests (packaging/build-deb.sh, build-rpm.sh)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build_package(script: str, out: Path) -> Path:
    """Run ``packaging/SCRIPT OUT`` with this virtualenv's pip; the package file it made
    (the last line it prints). Fails the test with the script's stderr if it fails."""
    proc = subprocess.run(
        [str(REPO / "packaging" / script), str(out)],
        env=dict(os.environ, PIP=str(Path(sys.executable).with_name("pip"))),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(proc.stdout.strip().splitlines()[-1])
