"""The pure parts of the twin replay (``tests/pbs/twin.py``): scaling, the segment, the
simulated twin and the comparison, without a PBS server."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "pbs"))

import twin  # noqa: E402

from softwalltime.replay import pbsched  # noqa: E402
from softwalltime.replay import simulate as sim  # noqa: E402

J = twin.TwinJob


def test_scaled_rounds_up_to_whole_seconds_at_least_one() -> None:
    assert twin.scaled(0, 100) == 1
    assert twin.scaled(100, 100) == 1
    assert twin.scaled(101, 100) == 2
    assert twin.scaled(3600, 60) == 60


def test_scale_keeps_walltimes_over_run_times_and_counts_from_the_first_submit() -> None:
    rows = [("a", 1000, 600, 600, 4), ("b", 1099, 7200, 150, 2), ("c", 1300, 60, 10, 1)]
    work = sim.make_workload("t", rows, 8)
    jobs = twin.scale(work, 1, 5, 100, margin=2)
    assert jobs == [J(0, 2, 72, 2), J(2, 1, 3, 1)]  # c's walltime 1 s < run 1 + margin 2
    assert twin.scale(work, 0, 1, 100, 2) == [J(0, 6, 8, 4)]  # run == walltime in the trace


def test_iteration_is_compressed_but_at_least_one_second() -> None:
    assert twin.iteration_for(60) == 10
    assert twin.iteration_for(2411) == 1


def test_soft_walltimes_per_source() -> None:
    jobs = [J(0, 5, 10, 1), J(1, 9, 10, 1)]
    assert twin.soft_walltimes(jobs, twin.USERS) == [None, None]
    assert twin.soft_walltimes(jobs, twin.PERFECT) == [5, 9]
    assert twin.soft_walltimes(jobs, twin.PERFECT, soft_margin=2) == [7, 10]  # <= walltime
    with pytest.raises(ValueError, match="unknown estimate source"):
        twin.soft_walltimes(jobs, "v3")


def test_choose_segment_takes_the_window_where_jobs_wait() -> None:
    # 4 one-cpu jobs at a time on 2 cpus wait in the second half only
    rows = [("u", 100 * k, 50, 10, 1) for k in range(8)]
    rows += [("u", 1000 + k // 4, 50, 40, 1) for k in range(8)]
    work = sim.make_workload("t", rows, 2)
    first, wait, span = twin.choose_segment(work, 2, 8, 3, pbsched.parse_policy("fcfs-bf1"))
    assert first == 8 and wait > 0 and span == 160
    again = twin.choose_segment(work, 2, 8, 3, pbsched.parse_policy("fcfs-bf1"))
    assert again == (first, wait, span)


def test_simulated_twin_uses_the_soft_walltimes_it_is_given() -> None:
    # the issue-29 pair (walltime 601 for J3): J3 backfills at once by its soft walltime
    jobs = [J(0, 6, 600, 1), J(0, 3, 600, 2), J(0, 8, 600, 1), J(0, 3, 601, 1)]
    policy = pbsched.parse_policy("fcfs-bf1")
    assert twin.simulate(jobs, [0] * 4, [6, 3, 8, 3], 2, policy) == [0, 6, 9, 0]
    # without soft walltimes PBS plans with the walltimes: J3 (601 s) cannot pass J1
    users = twin.simulate(jobs, [0] * 4, [None] * 4, 2, policy)
    assert users[3] > 0
    # submit times out of the jobs' order (as the server's etimes may be): starts in it
    base = twin.simulate(jobs, [0, 1, 2, 3], [6, 3, 8, 3], 2, policy)
    assert twin.simulate(jobs[::-1], [3, 2, 1, 0], [3, 8, 3, 6], 2, policy) == base[::-1]
    assert base != twin.simulate(jobs, [0, 1, 2, 3], [6, 3, 8, 8], 2, policy)


def test_order_pairs_counts_only_pairs_beyond_the_tolerance() -> None:
    simulated = [0, 1, 10, 20]
    assert twin.order_pairs([0, 1, 10, 20], simulated, 2) == (5, 5)  # (0, 1) within
    assert twin.order_pairs([0, 1, 21, 20], simulated, 2) == (5, 4)  # 2 and 3 swapped
    assert twin.order_pairs([5, 5, 5, 5], simulated, 2) == (5, 0)  # ties are not an order


def test_compare_figures_and_first_divergences() -> None:
    jobs = [J(0, 10, 20, 1), J(0, 10, 20, 1), J(5, 1, 5, 1)]
    submit = [0, 0, 5]
    simulated = [0, 10, 5]
    real = [0, 11, 20]
    c = twin.compare(jobs, submit, real, simulated, 2, bound=5)
    assert c.jobs == 3
    assert c.wait_sim == pytest.approx(10 / 3) and c.wait_real == pytest.approx(26 / 3)
    assert c.bsld_sim == pytest.approx((1 + 2 + 1) / 3)
    assert c.bsld_real == pytest.approx((1 + 2.1 + 16 / 5) / 3)
    assert (c.pairs, c.concordant) == (3, 2)
    assert c.abs_median == 1 and c.abs_p95 == 15
    assert c.divergent == [2]
    assert twin.agreement(c) == pytest.approx(2 / 3)
    assert twin.relative(c.wait_real, c.wait_sim) == pytest.approx(1.6)
    text = twin.report(c, jobs, submit, real, simulated, ["a.pbshost", "b.pbshost", "c.pbshost"])
    assert "2/3 pairs (66.7 %)" in text and "#2 (c.pbshost)" in text
    with pytest.raises(ValueError):
        twin.compare(jobs, submit, real[:2], simulated, 2, 5)


def test_sched_config_gets_strict_ordering() -> None:
    text = "round_robin: False\tall\nstrict_ordering: false\tALL\n"
    assert "strict_ordering: True\tALL" in twin.sched_config_with(text, True)
    with pytest.raises(ValueError):
        twin.sched_config_with("round_robin: False\n", True)


def test_submission_commands() -> None:
    line = twin.qsub_line(J(3, 7, 9, 4))
    assert "qsub -h" in line and "select=1:ncpus=4" in line and "walltime=9" in line
    assert "sleep 7" in line
    assert twin.alter_script(["1.x", "2.x"], [5, None]) == "qalter -l soft_walltime=5 1.x; echo OK"
    assert twin.alter_script(["1.x"], [None]) == "echo OK"
    assert twin.release_script(["1.x", "2.x"]) == "qrls 1.x 2.x; echo OK"


def test_measured_runs_take_the_servers_durations() -> None:
    jobs = [J(0, 5, 10, 1), J(1, 1, 3, 2)]
    assert twin.measured_runs(jobs, [100, 103], [106, 103]) == [J(0, 6, 10, 1), J(1, 1, 3, 2)]


def test_start_times_at_release_are_scored_against_the_real_starts() -> None:
    # one processor: job 0 runs 10 s from 0; job 1 (released at 1) waits for it, starts at
    # 10. PBS's method with perfect soft walltimes says 10; the scaled thresholds (factor
    # 100: 1 min -> 1 s, 10 min -> 6 s, 1 h -> 36 s) count it within every one; job 1 waited
    # 9 s >= the 10-min wait / 100.
    jobs = [twin.TwinJob(0, 10, 20, 1), twin.TwinJob(1, 5, 20, 1)]
    soft = twin.soft_walltimes(jobs, twin.PERFECT)
    policy = pbsched.parse_policy("fcfs-bf1")
    fig = twin.start_times(jobs, [0, 1], [0, 10], [10, 5], soft, 1, policy, 100.0)
    assert fig["all"]["jobs"] == 2 and fig["waited_10min"]["jobs"] == 1
    assert fig["all"]["PBS"] == {"within_1s": 100.0, "within_6s": 100.0, "within_36s": 100.0}
    late = twin.start_times(jobs, [0, 1], [0, 13], [10, 5], soft, 1, policy, 100.0)
    assert late["waited_10min"]["PBS"]["within_1s"] == 0.0  # 3 s off
    assert late["waited_10min"]["PBS"]["within_6s"] == 100.0
    assert "PBS    within 1s 0.0 %" in twin.start_report(late)


def test_a_formula_label_is_replayed_with_its_constants_compressed() -> None:
    fast = twin.policy("xf2+age72h+len1", 100, 300.0)
    assert (fast.backfill_depth, fast.strict_ordering) == (1, True)
    assert fast.scheduler_iteration == twin.iteration_for(300.0)
    assert fast.job_sort_formula.startswith("12 * (eligible_time + 2)")  # 3600 s, 600 s / 300
    assert "eligible_time / 864" in fast.job_sort_formula  # 72 h / 300
    assert twin.policy("fcfs-bf1", 100, 300.0).job_sort_formula == pbsched.FCFS
    with pytest.raises(ValueError):
        twin.policy("xf9", 100, 300.0)
    deep = twin.policy("xf2+age72h+len1-bf3", 100, 300.0)  # simulate --search's -bf3
    assert deep._replace(backfill_depth=1) == fast and deep.backfill_depth == 3
    with pytest.raises(ValueError):
        twin.policy("xf9-bf3", 100, 300.0)


def test_due_batches_yield_jobs_due_together_at_their_second() -> None:
    jobs = [J(0, 1, 3, 1), J(0, 1, 3, 1), J(1, 1, 3, 1)]
    began = time.monotonic()
    got = [(k, batch, time.monotonic() - began) for k, batch in twin.due_batches(jobs)]
    assert [(k, b) for k, b, _ in got] == [(0, [0, 1]), (2, [2])]
    assert got[0][2] < 0.5 and got[1][2] >= 0.9  # the second batch waits for its second
