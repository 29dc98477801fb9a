"""The pure parts of ``tests/pbs/twin_start.py`` (issue 47): reading qstat's finished jobs,
the release look, and the scoring of PBS's estimate and the product's P50/P90 against the
real starts, without a PBS server."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "pbs"))

import twin_start as ts  # noqa: E402

S = ts.Sample


def test_finished_jobs_reads_state_f_with_both_times_only() -> None:
    jobs = {
        "1.h": {
            "job_state": "F",
            "euser": "alice",
            "ctime": 100,
            "stime": 110,
            "obittime": 150,
            "Resource_List": {"walltime": "00:01:00", "ncpus": 4, "soft_walltime": "00:00:50"},
        },
        "2.h": {"job_state": "F", "stime": 110},  # deleted before its end: no obittime
        "3.h": {"job_state": "R", "stime": 110, "obittime": 150},
    }
    (job,) = ts.finished_jobs(jobs)
    assert (job.user, job.start_s, job.end_s, job.runtime_s) == ("alice", 110, 150, 40)
    assert (job.walltime_s, job.ncpus, job.soft_walltime_s) == (60, 4, 50)


def test_as_queued_sets_only_the_released_jobs_queued() -> None:
    jobs = {"1.h": {"job_state": "H"}, "2.h": {"job_state": "H"}, "3.h": {"job_state": "R"}}
    out = ts.as_queued(jobs, ["1.h"])
    assert [out[k]["job_state"] for k in ("1.h", "2.h", "3.h")] == ["Q", "H", "R"]
    assert jobs["1.h"]["job_state"] == "H"  # a copy


RELEASE = {"a": 0, "b": 0, "c": 0}
START = {"a": 5, "b": 100, "c": 40}


def test_at_release_takes_pbs_first_later_estimate_or_the_start_or_none() -> None:
    samples = [
        S("a", 0, True, ts.NONE, 5, 9),  # never seen queued again: PBS ran it (start)
        S("b", 0, True, ts.NONE, 50, 90),
        S("c", 0, True, ts.NONE, 30, 60),
        S("b", 1, False, ts.NONE, 50, 90),  # the cycle not run yet
        S("b", 2, False, 98, 60, 95),
        S("b", 3, False, 70, 60, 95),
        S("c", 1, False, ts.NONE, 35, 70),  # queued, never an estimate: PBS gave none
    ]
    rows = {r.job: r for r in ts.at_release(samples, RELEASE, START)}
    assert (rows["a"].pbs, rows["b"].pbs, rows["c"].pbs) == (5, 98, ts.NONE)
    assert (rows["b"].p50, rows["b"].p90) == (50, 90)  # the release look's
    assert len(ts.at_refresh(samples, RELEASE, START)) == 4


def test_figures_count_a_missing_estimate_as_a_miss_and_group_the_waited() -> None:
    rows = [
        ts.Scored("a", 0, 5, 5, 5, 9),
        ts.Scored("b", 0, 100, 98, 50, 90),
        ts.Scored("c", 0, 40, ts.NONE, 30, 60),
    ]
    fig = ts.figures(rows, 60.0)  # 1 min -> 1 s, 10 min -> 10 s, 1 h -> 60 s; waited >= 10 s
    assert fig["all"]["pbs"] == [33.3, 66.7, 66.7]
    assert fig["all"]["p50"] == [33.3, 66.7, 100.0]
    assert fig["all"]["p90_covers"] == 66.7  # b started after its P90
    assert fig["all"]["pbs_none"] == 1
    assert fig["waited"]["jobs"] == 2 and fig["waited"]["pbs"] == [0.0, 50.0, 50.0]
    text = ts.report(fig, "at the release")
    assert "| waited | 2 (2) | PBS estimated.start_time | 0.0 | 50.0 | 50.0 | 0.0 |" in text
