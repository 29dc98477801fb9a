"""The real-server benchmarks run, print their figures and leave the server as they found
it (``make bench-classes`` on a small queue: its sched_config line, its resource, its jobs
and the server's settings all restored)."""

from __future__ import annotations

import sys

import pbsctl
import pytest

from softwalltime.replay import pbsched

sys.path.insert(0, str(pbsctl.REPO / "tests" / "benchmarks"))
import bench_classes  # noqa: E402

pytestmark = pytest.mark.pbs


def test_bench_classes_prints_its_figures_and_restores_the_server(pbs_server, capsys):
    config = pbsctl.SCHED_CONFIG.read_text()
    settings = {n: pbsctl.server_attribute(n) for n in ("scheduling", "backfill_depth")}
    formula = pbsctl.sched_attribute("job_sort_formula")
    args = bench_classes.parse_args(["--jobs", "12", "--walltimes", "2", "--rounds", "1"])
    assert bench_classes.run(args) == 0
    out = capsys.readouterr().out
    assert "classes without the line 2, with it 12" in out, out
    assert "CPU ratio with/without: median " in out, out
    assert pbsctl.SCHED_CONFIG.read_text() == config
    assert {n: pbsctl.server_attribute(n) for n in settings} == settings
    assert pbsctl.sched_attribute("job_sort_formula") == formula
    assert pbsctl.qmgr(f"list resource {pbsched.RANK}", check=False).returncode != 0
    assert pbsctl.run("qselect").stdout.split() == []
