"""The benchmarks run, print their figures, and stop what they start (issue 9 item 14:
make bench-ingest used to leave its cluster running with its data in .bench/pg)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # see pyproject's markers: not in make test-fast

REPO = Path(__file__).resolve().parents[1]
BENCH_PG = REPO / ".bench" / "pg"


def _postmasters_in(directory: Path) -> list[str]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if b"postgres" in cmdline and str(directory).encode() in cmdline:
                out.append(entry)
    return out


@pytest.mark.parametrize(
    ("script", "args", "printed"),
    [
        (
            "bench_ingest.py",
            ["--jobs", "3000", "--small", "1000", "--workers", "0"],
            "E records/s",
        ),
        (
            "bench_hook.py",
            [
                "--rows",
                "3000",
                "--users",
                "30",
                "--warm",
                "200",
                "--cold",
                "20",
                "--hook-runs",
                "20",
            ],
            "learned+rank, warm (table cached)",
        ),
        ("bench_learned.py", ["200"], "hook's decide(), predictor and rank learned"),
        ("node_level.py", ["--jobs", "300"], "node level / pool"),
    ],
    ids=["bench-ingest", "bench-hook", "bench-learned", "bench-nodes"],
)
def test_benchmark_prints_figures_and_stops_its_cluster(script, args, printed):
    if BENCH_PG.exists():
        pytest.fail(f"{BENCH_PG} exists before the run: stop it (make clean) and rerun")
    env = {k: v for k, v in os.environ.items() if k != "SOFTWALLTIME_DSN"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert printed in proc.stdout
    assert not BENCH_PG.exists(), "the benchmark left its cluster's directory"
    assert _postmasters_in(BENCH_PG) == [], "the benchmark left its server running"
