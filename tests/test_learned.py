"""softwalltime.hookpath.learned (issue 31): rules, bins, the site table and its replay."""

import pytest

from softwalltime.hookpath import learned
from softwalltime.replay import evaluate
from softwalltime.replay.evaluate import TraceJob, columns, replay_learned

R = {name: k for k, name in enumerate(learned.RULES)}
H = 3600
# (runtime_s, walltime_s, end_s), newest end first
HISTORY = [(1000, 2 * H, 9000), (1500, 2 * H, 8000), (3000, 4 * H, 7000), (200, 2 * H, 100)]


def test_every_rule_on_a_hand_made_history():
    out = learned.outcome(2 * H, HISTORY, 9030)
    s = out.softs
    assert len(s) == learned.N_RULES == 23
    assert s[R["walltime"]] == 2 * H
    assert s[R["v3"]] == 1500 + 900  # largest ratio 1500/7200 x 7200 + 900
    assert s[R["ratio50"]] == 1500 and s[R["ratio50*1.1"]] == 1650
    # same walltime: 1000, 1500, 200 -> largest 1500
    assert s[R["same-ratio15"]] == 1500 and s[R["same-ratio15*1.1"]] == 1650
    # B: the largest of the last 5 same-walltime runs, 1500
    assert s[R["B*1+0"]] == 1500 and s[R["B*1+60"]] == 1560
    assert s[R["B*1.25+0"]] == 1875 and s[R["B*5+60"]] == 7200  # 7560 capped at the walltime
    # last same-walltime run 1000
    assert s[R["last*1.5+60"]] == 1560 and s[R["last*2+60"]] == 2060


def test_the_bins():
    out = learned.outcome(2 * H, HISTORY, 9030)
    # 3 same-walltime jobs (2-4); spread 1500/200 = 7.5 (> 4); B/walltime 0.21 (0.2-0.5)
    assert out.coarse == (2 * learned.N_SPREAD + 5) * learned.N_LEVEL + 3
    assert out.fine == out.coarse * learned.N_GAP + 0  # 30 s since the last end
    assert learned.outcome(2 * H, HISTORY, 9000 + 601).fine == out.coarse * learned.N_GAP + 2
    assert learned.outcome(2 * H, HISTORY, 9000 + 86401).fine == out.coarse * learned.N_GAP + 4
    # no same walltime: B over the user's last 5 (1000..3000), 0 same-walltime jobs
    other = learned.outcome(H, HISTORY, 9030)
    assert other.coarse // (learned.N_SPREAD * learned.N_LEVEL) == 0
    assert other.softs[R["B*1+0"]] == 3000 and other.softs[R["last*1.1+60"]] == 1160


def test_no_history_gives_the_walltime():
    out = learned.outcome(H, [], 0)
    assert out.coarse == -1 and set(out.softs) == {H}
    assert learned.Learner().choose(out) == learned.R_V3


def test_every_soft_walltime_is_within_one_second_and_the_walltime():
    out = learned.outcome(100, [(0, 10**6, 5)] + HISTORY, 10)
    assert all(1 <= s <= 100 for s in out.softs)


def _train(learner, out, runtime_s, times):
    for _ in range(times):
        learner.update(out, runtime_s, out.softs[learner.choose(out)], None)


def test_the_table_picks_the_most_accurate_rule_the_penalty_allows():
    learner = learned.Learner()
    out = learned.outcome(2 * H, HISTORY, 9030)
    # the job always runs 1500 s: B*1+0 and ratio50 are exact, never under
    _train(learner, out, 1500, learned.MIN_SITE_JOBS)
    assert learned.RULES[learner.choose(out)] in ("ratio50", "same-ratio15", "B*1+0")
    assert learned.RULES[learner.rank_rule(out)] in ("ratio50", "same-ratio15", "B*1+0")


def test_lambda_rises_while_the_choices_under_estimate_more_than_v3():
    learner = learned.Learner()
    out = learned.outcome(2 * H, HISTORY, 9030)
    before = learner.lam
    # the job's soft walltime 1000 s was short of its 1700 s; v3's 2400 s was not
    learner.update(out, 1700, 1000, None)
    assert learner.lam == pytest.approx(before * 2.718281828**learned.ETA)
    # a fixed target of 10 %: a job not under lowers lambda by ETA x 0.1
    learner.update(out, 1700, 2400, 0.10)
    assert learner.lam == pytest.approx(before * 2.718281828 ** (learned.ETA * 0.9))
    assert (learner.total, learner.total_under, learner.v3_under) == (2, 1, 0)


def test_a_sparse_fine_bin_follows_its_coarse_bin():
    learner = learned.Learner()
    seen = learned.outcome(2 * H, HISTORY, 9030)  # gap bucket 0
    unseen = learned.outcome(2 * H, HISTORY, 9000 + 86401)  # same coarse bin, gap bucket 4
    _train(learner, seen, 1500, 300)
    acc_seen, _ = learner.scores(seen)
    acc_unseen, _ = learner.scores(unseen)
    assert learner.n_fine[unseen.fine] == 0
    assert acc_unseen == pytest.approx(acc_seen, rel=0.01)  # pulled to the coarse bin's


def job(user, submit, run, wall):
    return TraceJob(user, submit, submit, submit + run, wall, run, 1)


def test_the_replay_learns_only_jobs_ended_by_the_submit():
    jobs = [job("u", 0, 100, H), job("u", 50, 100, H), job("u", 200, 100, H)]
    cols, _ = columns(jobs)
    softs, learner = replay_learned(cols, None)
    # job 1 at 50: job 0 had not ended (at 100): no history, the walltime
    assert softs[1] == H
    # job 2 at 200: both ended; the site has too few jobs: v3 (100 + 900)
    assert softs[2] == 1000
    # every job moves lambda; only job 2, which had a history, fills the table
    assert learner.total == 3 and learner.n_site == 1


def test_a_job_ending_at_its_submit_is_not_its_own_history():
    jobs = [job("u", 0, 0, H), job("u", 0, 5, H)]
    cols, _ = columns(jobs)
    softs, _ = replay_learned(cols, None)
    assert softs[0] == H  # predicted before it was learnt
    assert softs[1] == 900  # job 0 ended at 0, ends first: v3 = 0 + 900


def test_evaluate_reports_the_target_beside_the_achieved_rate():
    jobs = [job(f"u{k % 7}", 10 * k, 50 + k % 13, H) for k in range(400)]
    result = evaluate.replay(jobs, ("v3", "learned"), target_under_pct=None)
    report = evaluate.report_dict("t", result, evaluate.summarize(result), {}, None, True)
    got = report["predictors"]["learned"]
    assert got["target"] == "v3" and got["target_under_pct"] is not None
    assert "learned: target under v3's rate" in evaluate.format_table(report)
