"""Live wait prediction from qstat's JSON (recorded shape, as test_refresh.py's) and
finished jobs: what PBS shows now becomes history with unknown starts and ends."""

from __future__ import annotations

from softwalltime.wait import live, pqstar
from softwalltime.wait.workload import WaitJob

NOW = 1_795_920_000

QSTAT = {
    "70.pbshost": {  # running since NOW - 500 on 4 of 16 processors: a large job
        "Job_Owner": "alice@pbshost", "euser": "alice", "job_state": "R", "queue": "workq",
        "ctime": NOW - 900, "stime": NOW - 500,
        "Resource_List": {"ncpus": 4, "walltime": "10:00:00", "soft_walltime": "02:00:00"},
    },
    "71.pbshost": {  # queued for 3000 s, 2 processors, walltime 01:00:00
        "Job_Owner": "bob@pbshost", "job_state": "Q", "queue": "workq", "ctime": NOW - 3000,
        "Resource_List": {"ncpus": 2, "walltime": "01:00:00"},
    },
    "72.pbshost": {  # held: neither queued for the scheduler nor running
        "Job_Owner": "bob@pbshost", "job_state": "H", "queue": "workq", "ctime": NOW - 100,
        "Resource_List": {"ncpus": 2, "walltime": "01:00:00"},
    },
    "73.pbshost": {"job_state": "R", "ctime": NOW - 50, "Resource_List": {"ncpus": 1}},
}  # fmt: skip


def test_jobs_from_qstat():
    rows, left = live.jobs_from_qstat(QSTAT)
    assert rows == [
        WaitJob(NOW - 3000, pqstar.UNKNOWN_S, pqstar.UNKNOWN_S, 2, 3600, "bob"),
        WaitJob(NOW - 900, NOW - 500, pqstar.UNKNOWN_S, 4, 36000, "alice"),
    ]
    assert left == {"state H": 1, "running without stime": 1}
    soft, _ = live.jobs_from_qstat(QSTAT, ert="soft")
    assert [r.ert_s for r in soft] == [3600, 7200]  # no soft walltime on 71: its walltime


def test_a_job_submitted_now():
    current, _ = live.jobs_from_qstat(QSTAT)
    finished = [
        WaitJob(NOW - 400, NOW - 390, NOW - 100, 1, 1800, "carol"),  # quick, 1 cpu, 30 min
        WaitJob(NOW - 300, NOW - 290, NOW + 100, 1, 1800, "carol"),  # ends later: not yet
    ]
    history = live.live_history(finished, current, NOW)
    assert [j.submit_s for j in history] == [NOW - 3000, NOW - 900, NOW - 400]
    # 1 cpu, 20 min: carol's job, submitted after the large job started, is similar and
    # started quickly, and the one similar queued job (bob's) is not: near-term, 1 h bound
    answer = pqstar.predict_one(history, WaitJob(NOW, 0, 0, 1, 1200, "dave"), 16)
    assert answer.rule == pqstar.NEAR and answer.predicted_s["pqstar"] == 3600
    # 2 cpus, 1 h: bob's similar job has been queued for 50 min (not yet > 1 h), and no
    # similar job has started: not marked
    answer = pqstar.predict_one(history, WaitJob(NOW, 0, 0, 2, 3600, "dave"), 16)
    assert answer.rule == pqstar.IBL


def test_finished_kept_bounds_the_history():
    finished = [
        WaitJob(NOW - 1000 + k, NOW - 999 + k, NOW - 900 + k, 1, 60, "u") for k in range(10)
    ]
    history = live.live_history(finished, [], NOW, finished_kept=3)
    assert [j.submit_s for j in history] == [NOW - 993, NOW - 992, NOW - 991]
