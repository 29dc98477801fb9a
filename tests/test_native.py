"""The simulator's compiled modules (:mod:`softwalltime.replay.native`, ``make compile``):
in use where they were built, never stale, and equal to plain Python, which the packages
run, configuration for configuration."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_runtime import skip_or_fail
from test_simulate_reference import KTH

from softwalltime.replay import native
from softwalltime.replay import simulate as sim

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "softwalltime" / "replay"

# One process simulates the first JOBS jobs of KTH-SP2 in each configuration and prints
# which modules ran compiled and a digest of every result.
JOBS = 12000
RUN = """
import hashlib, json, sys
from softwalltime.replay import native
from softwalltime.replay import simulate as sim
path, jobs = sys.argv[1], int(sys.argv[2])
work = sim.read_workload(path)
procs = work.machine_procs
cut = {f: getattr(work, f)[:jobs] for f in ("user", "submit", "run", "wall", "procs")}
work = sim.fit_machine(work._replace(**cut), procs)
out = {"compiled": native.compiled(), "results": {}}
for name, source, kw in json.loads(sys.argv[3]):
    if "refresh" in kw:
        kw["refresh"] = sim.Refresh(*kw["refresh"])
    r = sim.simulate(work, sim.make_source(source), procs, **kw)
    blob = json.dumps([r.start, r.corrections, r.reservation, r.passes, r.refresh_changes])
    out["results"][name] = hashlib.sha256(blob.encode()).hexdigest()
print(json.dumps(out))
"""
CONFIGS = [(f"{s}-pbs", s, {"correction": "pbs"}) for s in sim.SOURCE_NAMES] + [
    ("v1-simple", "v1", {"correction": "simple"}),
    ("fixed10-power", "fixed10", {"correction": "power"}),
    ("v2-walltime", "v2", {"correction": "walltime"}),
    ("v3-depth3", "v3", {"correction": "pbs", "backfill_depth": 3}),
    ("v1-sjbf", "v1", {"correction": "pbs", "sjbf": True}),
    ("fixed10-lazy", "fixed10", {"correction": "pbs", "lazy_corrections": True}),
    ("calibrated-refresh", "calibrated", {"correction": "pbs", "refresh": [900, 10.0, 300]}),
]


def _run(pythonpath: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(KTH), str(JOBS), json.dumps(CONFIGS)],
        env=env,
        cwd=str(pythonpath),
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    return json.loads(done.stdout)


def _need_compiled() -> None:
    if native.compiled() != list(native.MODULES):
        skip_or_fail(
            f"the simulator runs as plain Python (compiled: {native.compiled()})",
            "make compile: gcc and python3-dev",
        )


def test_the_simulator_runs_compiled_where_it_was_built() -> None:
    _need_compiled()
    assert native.built(str(FOLDER))
    assert native.stale(str(FOLDER)) == []


def test_a_source_newer_than_its_extension_makes_it_stale(tmp_path: Path) -> None:
    for name in native.INPUTS:
        (tmp_path / f"{name}.py").write_text("")
    (tmp_path / f"{native.KERNEL}.c").write_text("")
    assert not native.built(str(tmp_path))  # nothing built
    for name in native.MODULES + (native.LIBRARY,):
        (tmp_path / f"{name}.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert not native.built(str(tmp_path))  # the kernel is missing
    (tmp_path / f"{native.KERNEL}.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert native.built(str(tmp_path)) and native.stale(str(tmp_path)) == []
    later = os.stat(tmp_path / "easy.py").st_mtime_ns + 10**9
    os.utime(tmp_path / "sources.py", ns=(later, later))  # an input, not compiled itself
    assert len(native.stale(str(tmp_path))) == len(native.MODULES) + 1
    assert not native.built(str(tmp_path))
    os.utime(tmp_path / f"{native.KERNEL}.c", ns=(later, later))  # the kernel's C source
    assert len(native.stale(str(tmp_path))) == len(native.MODULES) + 2


@pytest.mark.slow  # plain Python simulations of a whole trace
def test_plain_python_gives_the_compiled_results(tmp_path: Path) -> None:
    _need_compiled()
    # The package as the wheel has it: the same sources, no extension.
    plain = tmp_path / "plain"
    shutil.copytree(
        REPO / "softwalltime", plain / "softwalltime", ignore=shutil.ignore_patterns("*.so")
    )
    compiled = _run(REPO)
    python = _run(plain)
    assert compiled["compiled"] == list(native.MODULES)
    assert python["compiled"] == []
    assert set(python["results"]) == {name for name, _, _ in CONFIGS}
    differ = [k for k in python["results"] if python["results"][k] != compiled["results"][k]]
    assert differ == []
