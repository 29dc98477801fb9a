"""The pure parts of the twin replay's source ``live`` (``tests/pbs/twin_live.py``): Unix
names, the history and its accounting records, the compressed settings and timers,
refresh's moves and the simulation with the product's outputs, without a PBS server."""

from __future__ import annotations

import pwd
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "pbs"))

import twin  # noqa: E402
import twin_live as tl  # noqa: E402

from softwalltime import accounting  # noqa: E402
from softwalltime.replay import pbsched  # noqa: E402
from softwalltime.replay import simulate as sim  # noqa: E402

J = twin.TwinJob


def test_unix_names_keep_letters_and_digits_and_refuse_none() -> None:
    assert tl.unix_name("42") == "swtw42"
    assert tl.unix_name("U-7") == "swtwu7"
    with pytest.raises(ValueError, match="no letter or digit"):
        tl.unix_name("--")


def test_segment_users_are_capped_with_a_clear_error() -> None:
    assert tl.segment_users(["3", "1", "3", "2"]) == ["3", "1", "2"]
    assert len(tl.segment_users([str(u) for u in range(tl.MAX_USERS)])) == tl.MAX_USERS
    with pytest.raises(ValueError, match="301 users: at most 300"):
        tl.segment_users([str(u) for u in range(tl.MAX_USERS + 1)])


def _work() -> sim.SimWorkload:
    rows = [
        ("1", 0, 1000, 500, 2),  # user 1, ends long before the segment
        ("9", 100, 1000, 500, 1),  # user 9 has no job in the segment
        ("2", 900, 1000, 400, 4),  # still running at the segment's start (1000)
        ("1", 950, 2000, 10, 1),  # ends at 960
        ("1", 1000, 3600, 100, 1),  # the segment: jobs 4 and 5
        ("2", 1200, 3600, 100, 1),
    ]
    return sim.make_workload("t", rows, 8)


def test_history_keeps_the_segments_users_jobs_that_ended_before_it_compressed() -> None:
    past = tl.history(_work(), 4, 2, 10, 10.0, origin=1_000_000)
    # user 1's two jobs: submit (t - 1000) / 10 from the origin, run and walltime / 10
    assert past == [
        tl.PastJob("swtw1", 1_000_000 - 100, 1_000_000 - 100, 1_000_000 - 50, 100, 2),
        tl.PastJob("swtw1", 1_000_000 - 5, 1_000_000 - 5, 1_000_000 - 4, 200, 1),
    ]
    assert tl.history(_work(), 4, 2, 1, 10.0, origin=1_000_000) == past[1:]  # the last job only
    with pytest.raises(ValueError, match="history jobs must be 0 to 10000"):
        tl.history(_work(), 4, 2, tl.MAX_HISTORY + 1, 10.0, 0)


def test_history_accounting_records_parse_as_finished_jobs() -> None:
    past = tl.history(_work(), 4, 2, 10, 10.0, origin=1_800_000_000)
    lines = tl.accounting(past).splitlines()
    assert len(lines) == 2
    rows = [accounting.finished_job(accounting.parse_line(line)) for line in lines]
    assert [r["username"] for r in rows] == ["swtw1", "swtw1"]  # type: ignore[index]
    assert [r["runtime_s"] for r in rows] == [50, 1]  # type: ignore[index]
    assert [r["walltime_s"] for r in rows] == [100, 200]  # type: ignore[index]
    assert {r["server"] for r in rows} == {tl.HISTORY_SERVER}  # type: ignore[index]


def test_settings_and_timers_compress_the_products_time_constants() -> None:
    cfg = tl.settings("postgresql:///x", 100.0, "key-mean")
    assert (cfg["reserve_s"], cfg["refresh_min_change_s"], cfg["rank"]) == (9, 3, "key-mean")
    assert tl.timer_periods(100.0) == (3, 9)
    assert tl.timer_periods(1000.0) == (tl.TIMER_FLOOR_S, tl.TIMER_FLOOR_S)
    assert tl.timer_periods(10.0) == (30, 90)


def test_refresh_moves_reads_verbose_lines() -> None:
    lines = [
        "7.pbshost user=swtw1 walltime=00:01:40: softwalltime_rank 40 s -> 12 s",
        "8.pbshost user=swtw2 walltime=00:01:40: soft_walltime 00:01:40 -> 00:00:30,"
        " softwalltime_rank unset -> 20 s",
        "9.pbshost user=swtw2 walltime=00:01:40: soft_walltime 00:01:40 -> 00:00:31",
    ]
    assert tl.refresh_moves(lines) == (
        {"7.pbshost": 12, "8.pbshost": 20},
        {"8.pbshost": 30, "9.pbshost": 31},
    )


def _outputs(n: int, **kw: object) -> tl.Outputs:
    base = dict(
        queued_soft=[None] * n, queued_rank=[None] * n, soft=[None] * n, soft_mark=[None] * n,
        rank=[None] * n, rank_moves=[], soft_moves=0,
    )  # fmt: skip
    base.update(kw)
    return tl.Outputs(**base)  # type: ignore[arg-type]


def test_simulation_sorts_by_the_given_ranks_and_follows_refreshs_moves() -> None:
    # one 2-cpu machine; a job holds it for 10 s; two 2-cpu jobs queue behind it. Ranked
    # 50 and 5 at queuejob, sjf.rank starts the second first; refresh moving the first to
    # 1 s before the machine frees swaps them.
    jobs = [J(0, 10, 20, 2), J(1, 5, 20, 2), J(1, 5, 20, 2)]
    policy = pbsched.parse_policy("sjf.rank-bf1", scheduler_iteration=1, backfill_fuzzy=0)
    out = _outputs(3, queued_rank=[None, 50, 5])
    assert tl.simulate(jobs, [0, 1, 1], out, 2, policy, 0) == [0, 15, 10]
    moved = out._replace(rank_moves=[(5, 1, 1)])
    assert tl.simulate(jobs, [0, 1, 1], moved, 2, policy, 0) == [0, 10, 15]


def test_simulation_plans_with_the_queued_soft_walltime_and_runs_with_the_started_one() -> None:
    # a 1-cpu job runs from 0 (6 s); a 2-cpu job tops the queue at 1, its reservation at
    # the running job's estimated end: its soft walltime at start (the runjob event's), not
    # at queuejob. The 1-cpu job submitted at 2 backfills beside it only if its queued soft
    # walltime ends by that reservation.
    jobs = [J(0, 6, 30, 1), J(1, 20, 30, 2), J(2, 5, 30, 1)]
    policy = pbsched.parse_policy("fcfs-bf1", scheduler_iteration=1, backfill_fuzzy=0)
    late_end = _outputs(3, queued_soft=[6, 20, 15], soft=[20, 20, 15])
    assert tl.simulate(jobs, [0, 1, 2], late_end, 2, policy, 0)[2] == 2  # 2 + 15 <= 20
    early_end = late_end._replace(queued_soft=[20, 20, 15], soft=[6, 20, 15])
    assert tl.simulate(jobs, [0, 1, 2], early_end, 2, policy, 0)[2] > 2  # 2 + 15 > 6
    long_queued = late_end._replace(queued_soft=[6, 20, 19])
    assert tl.simulate(jobs, [0, 1, 2], long_queued, 2, policy, 0)[2] > 2  # 2 + 19 > 20


def test_hook_counts_need_the_hooks_mark_and_a_value_within_the_walltime() -> None:
    jobs = [J(0, 5, 20, 1), J(0, 5, 20, 1), J(0, 5, 20, 1)]
    out = _outputs(3, soft=[10, 20, 30], soft_mark=[10, None, 30], rank=[5, None, 7])
    counts = tl.hook_counts(jobs, out)
    assert counts["soft walltime from the hook"] == 1  # 20: no mark; 30: over the walltime
    assert counts["rank"] == 2
    assert counts["soft walltime below the walltime"] == 1


def test_the_sources_without_the_hook_refuse_a_formula_that_reads_the_rank() -> None:
    # checked before anything is set on the server
    with pytest.raises(ValueError, match=r"only the hook publishes the rank \(--sources live\)"):
        twin.apply_policy(pbsched.parse_policy("sjf.rank-bf1"))
    ranked = pbsched.parse_policy("fcfs-bf1", classes=pbsched.CLASSES_RANK)
    with pytest.raises(ValueError, match="default classes only"):
        twin.apply_policy(ranked, rank=True)


def test_unix_users_refuses_too_many_before_making_any() -> None:
    names = [f"swtwnone{u}" for u in range(tl.MAX_USERS + 1)]
    with pytest.raises(ValueError, match="at most 300 Unix users"):
        with tl.unix_users(names):
            pass  # pragma: no cover: refused before
    with pytest.raises(KeyError):
        pwd.getpwnam(names[0])
