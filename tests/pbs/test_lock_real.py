"""The lock on the one shared server leaves it as its holder found it, even when the holder
dies holding it: an interrupted run once left strict_ordering on, a job_sort_formula set
and a job queued, and the next CI run on the machine failed on them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pbsctl
import pytest

HERE = Path(__file__).resolve().parent
RESOURCE = "swt_lock_test"

# A holder that changes the server the ways the suites do, then is killed holding the lock.
DIES_HOLDING = f"""
import os, signal, sys
from pathlib import Path
import pbsctl
lock, journal = sys.argv[1], Path(sys.argv[2])
with pbsctl.exclusive(lock, journal):
    pbsctl.qmgr("set server backfill_depth = 7")
    pbsctl.qmgr("set sched job_sort_formula = 'ncpus + walltime'")
    pbsctl.qmgr("create resource {RESOURCE} type=long")
    text = pbsctl.SCHED_CONFIG.read_text()
    pbsctl.SCHED_CONFIG.write_text(
        pbsctl.sched_config_line(text, "strict_ordering", "strict_ordering: True\\tALL")
    )
    print(pbsctl.qsub("-h -l {RESOURCE}=3"), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _changed(before: dict[str, Any]) -> list[str]:
    return pbsctl.changes(before, pbsctl.snapshot())


def test_a_holder_killed_holding_the_lock_is_undone_by_the_next(
    pbs_server: None, tmp_path: Path
) -> None:
    lock, journal = str(tmp_path / "lock"), tmp_path / "journal.json"
    before = pbsctl.snapshot()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parents[1]), str(HERE)]))
    proc = subprocess.run(
        [sys.executable, "-c", DIES_HOLDING, lock, str(journal)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    jobid = proc.stdout.strip()
    assert jobid in pbsctl.run("qselect").stdout.split()
    assert journal.exists()
    assert sorted(_changed(before)) == [
        f"resource {RESOURCE} added",
        "sched job_sort_formula: None -> 'ncpus + walltime'",
        "sched_config",
        f"server backfill_depth: {before['server']['backfill_depth']!r} -> '7'",
    ]

    with pbsctl.exclusive(lock, journal):
        assert _changed(before) == []
        assert pbsctl.run("qselect", "-x").stdout.split() == []
        assert "\nstrict_ordering: false\tALL\n" in pbsctl.SCHED_CONFIG.read_text()
    assert not journal.exists()


def test_a_holder_that_leaves_a_change_is_told_and_it_is_undone(
    pbs_server: None, tmp_path: Path
) -> None:
    lock, journal = str(tmp_path / "lock"), tmp_path / "journal.json"
    before = pbsctl.snapshot()
    with pytest.raises(pbsctl.PbsError, match=r"backfill_depth: .* -> '5'; job \S+ left"):
        with pbsctl.exclusive(lock, journal):
            pbsctl.qmgr("set server backfill_depth = 5")
            pbsctl.qsub("-h")
    assert _changed(before) == []
    assert pbsctl.run("qselect").stdout.split() == []
    assert not journal.exists()
