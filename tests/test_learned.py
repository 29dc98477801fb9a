"""softwalltime.core.learned (issue 31): rules, bins, the site table and its replay."""

import math

import pytest

from softwalltime.core import learned
from softwalltime.replay import evaluate
from softwalltime.replay.evaluate import columns, replay_learned
from softwalltime.replay.trace import TraceJob

R = {name: k for k, name in enumerate(learned.RULES)}
H = 3600
# (runtime_s, walltime_s, end_s), newest end first
HISTORY = [(1000, 2 * H, 9000), (1500, 2 * H, 8000), (3000, 4 * H, 7000), (200, 2 * H, 100)]


def test_every_rule_on_a_hand_made_history():
    out = learned.outcome(2 * H, HISTORY, 9030)
    s = out.softs
    assert len(s) == learned.N_RULES == 26
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
    # the last same-walltime run itself, and the median of B's window (200, 1000, 1500)
    assert s[R["last"]] == 1000 and s[R["median"]] == 1000 and s[R["median*1.5+60"]] == 1560


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
    start = learner.level
    # the job's soft walltime 1000 s was short of its 1700 s; v3's 2400 s was not: the
    # level moves by ETA_C / sqrt(1), lam by that and KAPPA x deficit 1 / band 20 jobs
    learner.update(out, 1700, 1000, None)
    level = start + learned.ETA_C
    assert learner.level == pytest.approx(level)
    assert learner.lam == pytest.approx(math.exp(level + learned.KAPPA / learned.BAND_MIN_JOBS))
    # a fixed target of 10 %: a job not under lowers the level by ETA_C / sqrt(2) x 0.1;
    # the deficit is 1 - 0.2
    learner.update(out, 1700, 2400, 0.10)
    level -= learned.ETA_C / math.sqrt(2) * 0.1
    assert learner.level == pytest.approx(level)
    push = learned.KAPPA * 0.8 / learned.BAND_MIN_JOBS
    assert learner.lam == pytest.approx(math.exp(level + push))
    assert (learner.total, learner.total_under, learner.v3_under) == (2, 1, 0)


def test_a_deficit_pushes_lambda_by_its_share_of_the_tolerance_band():
    # the same deficit pushes lam less on a site with more jobs ended: its band is
    # TOLERANCE of them; a deficit back to 0 leaves lam at the slow level
    out = learned.outcome(2 * H, HISTORY, 9030)
    pushes = []
    for jobs in (100, 40_000):
        learner = learned.Learner()
        learner.total, learner.total_under = jobs - 1, 5  # v3 under on none of them
        learner.update(out, 1700, 2400, None)  # neither under: the level stays
        band = max(learned.TOLERANCE * jobs, learned.BAND_MIN_JOBS)
        pushes.append(learner.log_lam - learner.level)
        assert learner.lam == pytest.approx(math.exp(learner.log_lam))
        assert pushes[-1] == pytest.approx(learned.KAPPA * 5 / band)
    assert pushes[0] > 4 * pushes[1] > 0
    learner = learned.Learner()
    learner.update(out, 1700, 1000, None)  # under, v3 not: deficit 1
    assert learner.log_lam > learner.level
    learner.update(out, 2500, 3000, None)  # v3's 2400 s under, ours not: deficit 0
    assert learner.log_lam == learner.level


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


# --- the shipped prior (replay/prior.py)


def test_the_prior_round_trips_scaled():
    from softwalltime.replay import prior

    jobs = [job(f"u{k % 5}", 100 * k, 60 + k % 17, H) for k in range(300)]
    cols, _ = columns(jobs)
    doc = prior.build_learned_prior([cols], ["synthetic"])
    _softs, full = replay_learned(cols, None)
    table = prior.learned_prior_table(doc)
    assert table.n_site == pytest.approx(full.n_site * prior.LEARNED_SCALE)
    assert table.a_site == pytest.approx([a * prior.LEARNED_SCALE for a in full.a_site], abs=1e-3)
    assert table.n_fine == pytest.approx([n * prior.LEARNED_SCALE for n in full.n_fine])
    # the counters of the replay it came from do not travel: lambda starts afresh
    assert table.total == 0 and table.lam == learned.LAMBDA_START


def test_a_prior_of_other_rules_is_refused():
    from softwalltime.replay import prior

    doc = prior.build_learned_prior([], [])
    doc["rules"] = doc["rules"][:-1]
    with pytest.raises(prior.PriorError, match="other rules or bins"):
        prior.learned_prior_table(doc)
    doc = prior.build_learned_prior([], [])
    doc["fine"] = [[learned.FINE, 1.0, [0.0] * learned.N_RULES, [0.0] * learned.N_RULES]]
    with pytest.raises(prior.PriorError, match="malformed fine cell"):
        prior.learned_prior_table(doc)


def test_the_shipped_prior_is_of_the_training_traces():
    import json

    from softwalltime.replay import prior

    doc = json.loads(prior.LEARNED_PRIOR_PATH.read_text())
    assert [s.split("-")[0] for s in doc["sources"]] == ["CERIT", "HPC2N", "CTC"]
    table = prior.load_learned_prior()
    assert table.n_site > 50000  # 0.2 x the three traces' jobs with a history


def test_evaluate_prior_starts_learned_from_the_shipped_table(tmp_path, capsys):
    import json

    from softwalltime import cli

    path = tmp_path / "t.swf"
    lines = [
        f"{k + 1} {100 * k} 0 {60 + k % 17} 1 -1 -1 1 3600 -1 1 {k % 5 + 1} 1 -1 -1 1 -1 -1"
        for k in range(200)
    ]
    path.write_text("\n".join(lines) + "\n")
    outs = []
    for extra in ([], ["--prior"]):
        argv = ["evaluate", "--json", "--predictors", "v3,learned", "--target-under-pct", "v3"]
        assert cli.main(argv + extra + [str(path)]) == 0
        outs.append(json.loads(capsys.readouterr().out)["predictors"]["learned"])
    # without a prior the site uses v3 for its first MIN_SITE_JOBS jobs; with it, not
    assert outs[0]["mean_accuracy"] != outs[1]["mean_accuracy"]
    assert outs[1]["target"] == "v3"


def test_the_replay_equals_a_plain_replay_of_the_pure_code():
    # the replay's shortcuts (a user's batch reuses its outcome, rows kept per walltime,
    # the last choice kept while no job ends) change nothing
    import random

    rng = random.Random(31)
    jobs = []
    t = 0
    for _ in range(700):
        t += rng.choice([0, 0, 5, 60, 900])
        wall = rng.choice([600, H, 4 * H])
        user = rng.randrange(6)
        run = int(wall * (0.05, 0.2, 0.5)[user % 3] * rng.uniform(0.8, 1.2))
        jobs.append(job(f"u{user}", t, run, wall))
    cols, _ = columns(jobs)
    got, _learner = replay_learned(cols, None)

    n = len(jobs)
    users, instants, ends, walls, runs = cols.users, cols.instants, cols.ends, cols.walls, cols.runs
    learner = learned.Learner()
    hist = {}
    outs = {}
    want = [0] * n

    def predict(i, at):
        out = learned.outcome(walls[i], hist.get(users[i], []), at)
        outs[i] = out
        want[i] = out.softs[learner.choose(out)]

    e = 0
    for i in cols.by_instant:
        while e < n and ends[cols.by_end[e]] <= instants[i]:
            j = cols.by_end[e]
            if j not in outs:
                predict(j, instants[j])
            learner.update(outs[j], runs[j], want[j], None)
            rows = hist.setdefault(users[j], [])
            rows.insert(0, (runs[j], walls[j], ends[j]))
            del rows[learned.HISTORY_ROWS :]
            e += 1
        if i not in outs:
            predict(i, instants[i])
    assert got == want
    assert learner.n_site > learned.MIN_SITE_JOBS  # the table chose, not only v3
    assert sum(want[i] != outs[i].softs[learned.R_V3] for i in range(n)) > 100


def _outcome_as_written(walltime_s, rows, now_s):
    """``(coarse, fine, softs)`` as core/learned.py first computed them (before issue 31's
    speed work): one loop per rule family, exact ratios by products."""
    same = [row for row in rows if row[1] == walltime_s]
    window = [row[0] for row in (same[:5] if same else rows[:5])]
    b, low, last = max(window), min(window), (same[0][0] if same else rows[0][0])
    best = [(0, 1), (0, 1)]  # largest run/walltime over 15 and 50 rows
    for k, (run, wall, _end) in enumerate(rows[:50]):
        for n, limit in enumerate((15, 50)):
            if k < limit and run * best[n][1] > best[n][0] * wall:
                best[n] = (run, wall)
    (v_rt, v_wt), (r_rt, r_wt) = best
    r50, r50x = -(-r_rt * walltime_s // r_wt), -(-r_rt * walltime_s * 11 // (r_wt * 10))
    s15 = max(row[0] for row in same[:15]) if same else None
    values = [walltime_s, -(-v_rt * walltime_s // v_wt) + 900, r50, r50x]
    values += [s15, -(-s15 * 11 // 10)] if same else [r50, r50x]
    for num, den in learned.B_FACTORS:
        values += [-(-b * num // den) + add for add in learned.B_ADDS]
    values += [-(-last * num // den) + 60 for num, den in learned.LAST_FACTORS]
    median = sorted(window)[(len(window) - 1) // 2]
    values += [last, median, -(-median * 3 // 2) + 60]
    spread = next((k for k, (n, d) in enumerate(learned.SPREAD_CUTS) if b * d <= n * low), 5)
    level = next((k for k, (n, d) in enumerate(learned.LEVEL_CUTS) if b * d <= n * walltime_s), 5)
    gap = next((k for k, cut in enumerate(learned.GAP_CUTS) if now_s - rows[0][2] <= cut), 4)
    count = len(same)
    same_bin = count if count < 2 else (2 if count < 5 else (3 if count < 10 else 4))
    coarse = (same_bin * learned.N_SPREAD + spread) * learned.N_LEVEL + level
    softs = tuple(min(walltime_s, max(1, v)) for v in values)
    return coarse, coarse * learned.N_GAP + gap, softs


def test_the_fast_rules_equal_the_rules_as_written():
    # ties of run/walltime that floats cannot tell apart, equal run times, run 0, runs
    # past the walltime, and the ratios the replay keeps, passed in
    import random

    rng = random.Random(7)
    walls = [1, 600, H, 10**9, 10**9 + 1]
    for _ in range(3000):
        rows = []
        for _k in range(rng.randrange(1, 120)):
            wall = rng.choice(walls)
            run = rng.choice([0, 1, wall, wall + 7, rng.randrange(0, 2 * wall + 2)])
            rows.append((run, wall, 10**6 - len(rows)))
        if rng.random() < 0.2:  # two ratios a float cannot tell apart
            rows[rng.randrange(len(rows))] = (10**9 - 1, 10**9, 5)
            rows[rng.randrange(len(rows))] = (10**9, 10**9 + 1, 5)
        wall = rng.choice(walls)
        now = 10**6 + rng.choice([0, 100, 5000, 10**5])
        want = _outcome_as_written(wall, rows[: learned.HISTORY_ROWS], now)
        got = learned.outcome(wall, rows, now)
        assert got[:3] == want and (got.low, got.high) == (min(want[2]), max(want[2]))
        ratios = learned.ratios_of(rows)
        assert learned.outcome(wall, rows, now, None, ratios)[:3] == want


def test_v3_and_ratio50_tell_float_equal_ratios_apart_inside_and_past_15_rows():
    # (1e9 - 1) / 1e9 and 1e9 / (1e9 + 1) are the same float; the second is larger exactly.
    # outcome() finds both maxima from one scan of 50 ratios: the first row of the largest
    # float is v3's unless a larger one (exactly) lies within the first 15 rows.
    low, high = (10**9 - 1, 10**9, 50), (10**9, 10**9 + 1, 50)
    wall = 10**18 + 10**9  # (1e9 - 1) x wall / 1e9 = 1e18 - 1; 1e9 x wall / (1e9 + 1) = 1e18
    small = [(1, 1000, 40)] * 30
    for rows, v3_run, ratio_run in (
        ([low] + small[:19] + [high] + small, 10**18 - 1, 10**18),  # high past 15 rows
        ([low] + small[:4] + [high] + small, 10**18, 10**18),  # both in the first 15
        ([high] + small[:4] + [low] + small, 10**18, 10**18),
        (small[:16] + [low, high] + small, wall // 1000, 10**18),  # none in the first 15
    ):
        out = learned.outcome(wall, rows, 100)
        assert out.softs[R["v3"]] == v3_run + 900 and out.softs[R["ratio50"]] == ratio_run
        assert out[:3] == _outcome_as_written(wall, rows, 100)
