"""The band of simulations under the twin's whole-second uncertainty
(``tests/pbs/twin_band.py``), without a PBS server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "pbs"))

import twin  # noqa: E402
import twin_band  # noqa: E402

from softwalltime.replay import pbsched  # noqa: E402

J = twin.TwinJob
FCFS = pbsched.parse_policy("fcfs-bf1")


def test_overruns_are_the_measured_excess_never_negative() -> None:
    jobs = [J(0, 5, 9, 1), J(0, 3, 9, 1), J(0, 4, 9, 1)]
    assert twin_band.overruns(jobs, [6, 3, 2]) == [1, 0, 0]


def test_spread_is_p5_median_p95_by_nearest_rank() -> None:
    assert twin_band.spread([3.0]) == (3.0, 3.0, 3.0)
    values = [float(x) for x in range(100, -1, -1)]  # 0..100, shuffled order
    assert twin_band.spread(values) == (5.0, 50.0, 95.0)


def test_without_overruns_every_draw_is_the_planned_simulation() -> None:
    # one processor: a runs 4 s from 0, b waits for it
    jobs = [J(0, 4, 9, 1), J(1, 2, 9, 1)]
    b = twin_band.band(jobs, [0, 1], [0, 4], [4, 2], [None, None], 1, FCFS, 0, 1.0, draws=5)
    assert b.wait == (1.5, 1.5, 1.5)  # (0 + 3) / 2, as twin.simulate gives
    assert b.overruns == {0: 2}
    assert b.outside == []
    assert (b.wait_real, b.bsld_real) == (1.5, 1.75)  # bsld: (1, (3 + 2) / 2) averaged


def test_overruns_widen_the_band_and_a_start_outside_every_draw_is_named() -> None:
    # a's end falls 0 or 1 s late (measured overruns 0 and 1): b starts at 4 or 5
    jobs = [J(0, 4, 9, 1), J(1, 2, 9, 1)]
    b = twin_band.band(jobs, [0, 1], [0, 5], [5, 2], [None, None], 1, FCFS, 0, 1.0, draws=40)
    low, _, high = b.wait
    assert (low, high) == (1.5, 2.0)
    assert b.overruns == {0: 1, 1: 1}
    assert b.outside == []  # b's real start, 5, is one of the draws'
    late = twin_band.band(jobs, [0, 1], [0, 7], [5, 2], [None, None], 1, FCFS, 0, 1.0, 40)
    assert late.outside == [(1, 7, 4, 5)]
    text = twin_band.report(late, jobs, [0, 1], ["1.pbs", "2.pbs"])
    assert "jobs started outside every draw's start: 1 of 2" in text
    assert "#1 (2.pbs)" in text and "4-5" in text
    assert "real outside" in text  # mean wait 3.0 against draws of 1.5-2.0
    assert late.starts[1] == sorted(late.starts[1]) and set(late.starts[1]) == {4, 5}
    line = twin_band.job_line(late, 1, [0, 9])
    assert line.startswith("#1: real start 9; simulated min 4,") and "in 0 of 40 draws" in line
    assert "in 40 of 40 draws" in twin_band.job_line(late, 1, [0, 5])


def test_draws_must_be_positive() -> None:
    with pytest.raises(ValueError, match="draws"):
        twin_band.band([J(0, 1, 2, 1)], [0], [0], [1], [None], 1, FCFS, 0, 1.0, draws=0)


def test_bench_twin_compares_a_dumped_replay_again_without_a_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(Path(__file__).parent / "benchmarks"))
    import bench_twin

    jobs = [J(0, 4, 9, 1), J(1, 2, 9, 1)]
    run = twin.Replay(0, ["1.pbs", "2.pbs"], [0, 1], [0, 7], [0, 4], [0, 4], [5, 2])
    dump = tmp_path / "fcfs-bf1.users.json"
    data = {"factor": 100.0, "fuzzy": 0, "jobs": [j._asdict() for j in jobs], **run._asdict()}
    dump.write_text(json.dumps(data))
    args = bench_twin.parse_args(["--from-dump", str(dump), "--draws", "40"])
    bench_twin.from_dump(dump, 1, args)
    out = capsys.readouterr().out
    assert "## fcfs-bf1, users" in out
    assert out.count("mean wait   real      3.0 s  simulated      1.5 s") == 2  # planned, measured
    assert "p5-p95 1.5-2.0: real outside" in out  # the band: b starts at 4 or 5, not 7
    assert "#1 (2.pbs)      1     1    2      7  4-5" in out


def test_a_replay_with_its_own_simulation_draws_through_it() -> None:
    jobs = [J(0, 4, 9, 1), J(1, 2, 9, 1)]
    seen: list[list[int]] = []

    def simulate(drawn: list[twin.TwinJob]) -> list[int]:
        seen.append([j.run for j in drawn])
        return [0, drawn[0].run + 10]  # b always 10 s after a's end

    b = twin_band.band(jobs, [0, 1], [0, 5], [5, 2], [None, None], 1, FCFS, 0, 1.0, 20, 0, simulate)
    assert len(seen) == 20 and {r[0] for r in seen} == {4, 5} and {r[1] for r in seen} == {2, 3}
    assert set(b.starts[1]) == {14, 15}
    assert b.outside == [(1, 5, 14, 15)]


def test_bench_twin_compares_a_dumped_live_replay_through_the_products_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(Path(__file__).parent / "benchmarks"))
    import bench_twin
    import twin_live

    jobs = [J(0, 4, 9, 1), J(1, 2, 9, 1)]
    run = twin.Replay(0, ["1.pbs", "2.pbs"], [0, 1], [0, 5], [0, 4], [0, 4], [5, 2])
    # the product gave b a soft walltime of 1 s and a: 4; nothing moved
    out = twin_live.Outputs([4, 1], [None, None], [4, 1], [4, 1], [None, None], [], 0)
    policy = twin.policy("fcfs-bf1", 1, 100.0)
    bench_twin.dump(tmp_path, "fcfs-bf1.live", 100.0, policy, jobs, run, {"out": out._asdict()})
    dump = tmp_path / "fcfs-bf1.live.json"
    assert json.loads(dump.read_text())["out"]["soft"] == [4, 1]
    bench_twin.from_dump(dump, 1, bench_twin.parse_args(["--from-dump", str(dump)]))
    text = capsys.readouterr().out
    assert "## fcfs-bf1, live" in text
    assert "p5-p95 1.5-2.0: real inside" in text  # b starts at a's end, 4 or 5 s


def test_bench_twin_caps_the_draws() -> None:
    sys.path.insert(0, str(Path(__file__).parent / "benchmarks"))
    import bench_twin

    assert bench_twin.parse_args(["--draws", "0"]).draws == 0
    for bad in ("-1", str(bench_twin.MAX_DRAWS + 1)):
        with pytest.raises(SystemExit):
            bench_twin.parse_args(["--draws", bad])


@pytest.mark.slow  # reads KTH-SP2 and simulates candidate segments
def test_bench_twin_caps_the_factor_from_minutes_at_the_formulas_limit() -> None:
    """KTH-SP2's segment in 10 minutes asks for factor 724; a formula's 600-s bound would
    then be below 1 s and formula.expression refused it (the bench failed)."""
    sys.path.insert(0, str(Path(__file__).parent / "benchmarks"))
    import bench_twin

    from softwalltime.replay import formula as fm

    seg = bench_twin.load(bench_twin.parse_args(["--trace", "KTH", "--minutes", "10"]))
    assert seg.factor == fm.SMOOTH_S
    assert "(eligible_time + 1)" in fm.expression(fm.parse_label("xf2+len1"), seg.procs, seg.factor)
    explicit = bench_twin.load(bench_twin.parse_args(["--trace", "KTH", "--factor", "724"]))
    assert explicit.factor == 724  # what was asked for, as before
