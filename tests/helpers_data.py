"""The real data the tests read, carried in the repository (tests/data, see its SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
TRACES = DATA / "traces"  # the SWF traces, gzipped
PBS_SAMPLES = TRACES / "pbs_accounting"  # real PBS / Torque accounting-log samples
EXAMPLES = DATA / "pbs-accounting-examples.log"  # one line of each record type
