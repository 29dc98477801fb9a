"""The fast simulator against the naive reference, start for start, on whole traces.

``tests/simulate_reference.py`` is a naive simulator of the same model (every correction step
an event, a full EASY pass at every instant). The fast one takes shortcuts (lazy corrections
in closed form, passes skipped when nothing can start, a shadow that moves with the job it
waits for); each shortcut must change no start.

A sample runs in ``make test`` (about a minute on one core); every source x correction on
whole KTH-SP2 and CTC-SP2 runs when ``SOFTWALLTIME_SLOW_TESTS=1`` (as ``.ci/run`` sets).
"""

from __future__ import annotations

import os
from typing import Dict, List, Tuple

import pytest
from helpers_data import TRACES
from simulate_reference import reference

from softwalltime.replay import simulate as sim

pytestmark = pytest.mark.slow  # see pyproject's markers: not in make test-fast

KTH = TRACES / "KTH-SP2-1996-2.1-cln.swf.gz"
CTC = TRACES / "CTC-SP2-1996-3.1-cln.swf.gz"
SLOW = os.environ.get("SOFTWALLTIME_SLOW_TESTS", "") not in ("", "0", "false", "no")
REFERENCE_SOURCES = (sim.BASELINE, "v1", "v2", "v3", sim.CALIBRATED, sim.PERFECT, sim.FIXED10)

# Always run: the regression of issue 17 (v1 on KTH-SP2, SWF line 13527: the tracked shadow
# job's end reached the next running job's end, which adds that job to extra) and a spread
# of the other shortcuts.
SAMPLE = {
    ("kth", "v1", "pbs"),
    ("kth", "fixed10", "pbs"),
    ("kth", "v3", "simple"),
    ("kth", "calibrated", "power"),
    ("kth", "v2", "walltime"),
}

_WORKLOADS: Dict[str, sim.SimWorkload] = {}


def workload(name: str) -> sim.SimWorkload:
    if name not in _WORKLOADS:
        work = sim.read_workload(str(KTH if name == "kth" else CTC))
        assert work.machine_procs is not None
        _WORKLOADS[name] = sim.fit_machine(work, work.machine_procs)
    return _WORKLOADS[name]


def _cases() -> List[Tuple[str, str, str]]:
    return [
        (trace, source, correction)
        for trace in ("kth", "ctc")
        for source in REFERENCE_SOURCES
        for correction in sim.CORRECTIONS
    ]


def first_mismatch(work: sim.SimWorkload, got: List[int], want: List[int]) -> str:
    """The earliest differing start, described (or '' when none differs)."""
    bad = [k for k in range(len(want)) if got[k] != want[k]]
    if not bad:
        return ""
    k = min(bad, key=lambda k: min(got[k], want[k]))
    return (
        f"{len(bad)} starts differ; first job {k} (submit {work.submit[k]}, "
        f"{work.procs[k]} procs): fast {got[k]}, reference {want[k]}"
    )


@pytest.mark.parametrize("trace,source,correction", _cases())
def test_whole_trace_same_as_reference(trace: str, source: str, correction: str) -> None:
    if (trace, source, correction) not in SAMPLE and not SLOW:
        pytest.skip("whole-trace comparison: set SOFTWALLTIME_SLOW_TESTS=1 (CI does)")
    work = workload(trace)
    procs = work.machine_procs
    assert procs is not None
    got = sim.simulate(work, sim.make_source(source), procs, correction).start
    want = reference(work, sim.make_source(source), procs, correction)
    assert first_mismatch(work, got, want) == ""
