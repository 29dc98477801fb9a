"""Predictor ``learned`` in the hook (issue 31): its table stored by ``calibrate``, read by
the hook, and the hook's decision identical to the Learner's for the same history and table.
"""

import datetime as dt
import json
import time
from pathlib import Path

import psycopg2
import pytest
import sqlalchemy as sa
from helpers_learned import store_choices
from psycopg2.extras import execute_values

from softwalltime import cli
from softwalltime.core import learned
from softwalltime.core import learned_site as ls
from softwalltime.core.config import load_settings
from softwalltime.core.decide import JobEvent, decide
from softwalltime.db import engine as db
from softwalltime.errors import ConfigError, DatabaseError
from softwalltime.hook import lookup
from softwalltime.replay.calibrate_learned import cells_of, learner_from_rows
from softwalltime.replay.evaluate import columns, replay_learned
from softwalltime.replay.history import read_finished_jobs
from softwalltime.replay.prior import load_learned_prior
from softwalltime.replay.trace_readers import read_sources

REPO = Path(__file__).resolve().parents[1]
CERIT = REPO / "softwalltime" / "data" / "CERIT-SC-wagap-2013.alea.swf.gz"
HOOK = str(REPO / "hooks" / "softwalltime_hook.py")
JOBS = 3000  # the bundled trace's first jobs: users with more than HISTORY_ROWS jobs
GAPS = (30, 300, 2000, 50000, 200000)  # one instant in each gap bucket after the last end
H = 3600


def _insert_trace(dsn, jobs):
    """The trace's jobs as finished_jobs rows, job_seq in trace order (the replay's order
    of jobs that end at the same second, as the hook's ORDER BY ended_at, job_seq)."""
    utc = dt.timezone.utc
    rows = []
    for k, job in enumerate(jobs, 1):
        user, submit, start, end, wall, run, ncpus = job[:7]
        if end is None or submit is None:
            continue
        at = dt.datetime.fromtimestamp
        rows.append(("cerit", f"{k}.cerit", at(submit, utc), k, str(user), wall, run,
                     None if start is None else at(start, utc), at(end, utc), ncpus))  # fmt: skip
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            execute_values(
                cur,
                "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username,"
                " walltime_s, runtime_s, started_at, ended_at, ncpus) VALUES %s",
                rows,
            )
    finally:
        conn.close()
    return len(rows)


def _evaluate_learner(dsn, target_pct, prior=True):
    """The Learner ``evaluate --predictors learned [--prior]`` ends with on the history
    table, and the columns it replayed."""
    engine = db.make_engine(dsn)
    try:
        with engine.connect() as conn:
            trace = read_finished_jobs(conn)
    finally:
        engine.dispose()
    cols, _skipped = columns(trace.jobs, "submit")
    _softs, table = replay_learned(cols, target_pct, load_learned_prior() if prior else None)
    return table, cols


def _histories(cols):
    """Each user's finished jobs as the replay keeps them: (run, wall, end), newest first
    (ends in order, the later of equal ends first)."""
    out = {}
    for j in cols.by_end:
        out.setdefault(cols.users[j], []).insert(0, (cols.runs[j], cols.walls[j], cols.ends[j]))
    return out


@pytest.fixture()
def cerit(fresh_dsn):
    jobs = read_sources([str(CERIT)]).jobs[:JOBS]
    assert _insert_trace(fresh_dsn, jobs) > 2000
    yield fresh_dsn
    lookup.close_cached()
    lookup.forget_learned()


def _reader(settings, now_s):
    """The hook's own readers of predictor learned, with the clock at ``now_s``."""
    real = lookup.learned_fetcher(settings)
    return ls.LearnedFetch(real.history, real.table, lambda: now_s)


def test_hook_decisions_are_the_learners_on_a_trace(cerit, capsys):
    """The identity: after ``calibrate``, the hook's soft walltime and rank for a spread of
    jobs (users, walltimes, every gap bucket) are what Learner.choose and Learner.rank_rule
    give for the same history and the table evaluate's replay ends with."""
    assert cli.main(["--dsn", cerit, "calibrate", "--predictor", "learned",
                     "--target-under-pct", "v3"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.startswith("learned on ") and "target v3's rate" in out
    table, cols = _evaluate_learner(cerit, None)
    assert table.n_site >= learned.MIN_SITE_JOBS and table.total == len(cols.users)
    histories = _histories(cols)
    # every user's rows as the hook reads them are the replay's, in its order (the later in
    # trace order first among equal ends)
    for user, history in histories.items():
        rows, _classes = lookup.learned_jobs(cerit, user, learned.HISTORY_ROWS)
        assert ls.history_of(rows) == history[: learned.HISTORY_ROWS], user
    users = sorted(histories, key=lambda u: -len(histories[u]))[:12]
    settings = load_settings(
        environ={}, overrides={"dsn": cerit, "predictor": "learned", "rank": "learned"}
    )
    last_end = max(cols.ends)
    rules, ranks, fines, checked = set(), set(), set(), 0
    for user in users + ["nobody"]:
        history = histories.get(user, [])[: learned.HISTORY_ROWS]
        walls = sorted({w for _r, w, _e in history})[:3] + [7 * H]
        for wall in walls:
            for gap in GAPS:
                # the gap after the user's own last end: each of its buckets is met
                now = (history[0][2] if history else last_end) + gap
                out_ = learned.outcome(wall, history, now)
                rule, rank_rule = table.choose(out_), table.rank_rule(out_)
                job = JobEvent("queuejob", user, "workq", wall, None)
                got = decide(
                    job, settings, lookup.fetcher(settings), learned=_reader(settings, now)
                )
                assert got.soft_walltime_s == out_.softs[rule], (user, wall, gap, got.reason)
                assert got.computed_rank_s == out_.softs[rank_rule], (user, wall, gap)
                assert f"rule {learned.RULES[rule]} " in got.reason
                rules.add(rule)
                fines.add(out_.fine)
                ranks.add(rank_rule)
                checked += 1
    assert checked >= 200 and len(fines) >= 40  # bins of every gap bucket
    # the table decided: more than v3 and the walltime, and the rank is not the soft rule
    assert len(rules - {learned.R_V3, learned.R_WALLTIME}) >= 2 and ranks != rules


def test_calibrate_stores_the_learners_cells_and_choices(cerit, capsys):
    assert cli.main(["--dsn", cerit, "calibrate", "--predictor", "learned",
                     "--target-under-pct", "12", "--json"]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    table, cols = _evaluate_learner(cerit, 12.0)
    assert doc["predictor"] == "learned" and doc["jobs"] == len(cols.users) == table.total
    assert doc["target"] == "fixed" and doc["target_under_pct"] == 12.0 and doc["prior"] is True
    assert doc["lam"] == table.lam and doc["cells"] == len(cells_of(table))
    engine = db.make_engine(cerit)
    try:
        with engine.connect() as conn:
            cells = conn.execute(sa.text("SELECT level, bin, rule, jobs, under_jobs,"
                                         " accuracy_sum FROM learned_cells")).all()  # fmt: skip
            state = conn.execute(sa.text("SELECT * FROM learned_state")).one()
    finally:
        engine.dispose()
    assert sorted(map(tuple, cells)) == sorted(cells_of(table))
    back = learner_from_rows(cells, state)
    for name in ("n_fine", "n_coarse", "n_site", "u_fine", "a_fine", "u_site", "a_coarse",
                 "lam", "log_lam", "total", "total_under", "v3_under"):  # fmt: skip
        assert getattr(back, name) == getattr(table, name), name
    assert back.level == pytest.approx(table.level)  # not stored: from lam and the deficit
    stored = ls.LearnedChoices.from_stored(
        state.lam, state.jobs, state.under_jobs, state.site_jobs, json.loads(state.choices)
    )
    expected = ls.LearnedChoices.from_learner(table)
    assert (stored.soft, stored.rank) == (expected.soft, expected.rank)
    # the hook's reader reads the same
    got = lookup.learned_table(cerit, max_age_s=0)
    assert (got.soft, got.rank, got.lam, got.total) == (stored.soft, stored.rank, table.lam,
                                                        table.total)  # fmt: skip


def test_calibrate_no_prior_stores_the_table_of_the_sites_jobs_alone(cerit, capsys):
    # what calibrate --help advises for a long history: the prior's pseudo-jobs are gone
    assert cli.main(["--dsn", cerit, "calibrate", "--predictor", "learned", "--no-prior",
                     "--target-under-pct", "12", "--json"]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    table, cols = _evaluate_learner(cerit, 12.0, prior=False)
    with_prior, _cols = _evaluate_learner(cerit, 12.0)
    assert doc["prior"] is False and doc["jobs"] == table.total == len(cols.users)
    assert doc["lam"] == table.lam != with_prior.lam
    assert table.n_site == int(table.n_site) < with_prior.n_site  # no fractional pseudo-jobs
    engine = db.make_engine(cerit)
    try:
        with engine.connect() as conn:
            cells = conn.execute(sa.text("SELECT level, bin, rule, jobs, under_jobs,"
                                         " accuracy_sum FROM learned_cells")).all()  # fmt: skip
    finally:
        engine.dispose()
    assert sorted(map(tuple, cells)) == sorted(cells_of(table))


def test_before_the_table_and_below_min_site_jobs_it_is_v3(fresh_dsn):
    """No learned_state row, and a table with fewer than MIN_SITE_JOBS jobs: v3, as
    learned.py (an empty Learner) gives."""
    rows = [(H, 4 * H, 1, 1_000_000 + k * H) for k in range(5)][::-1]  # newest first
    history = ls.history_of(rows)
    empty = learned.Learner()
    none = lookup.learned_table(fresh_dsn, max_age_s=0)
    got = ls.predict(none, 4 * H, rows, 1_000_000 + 10 * H)
    out = learned.outcome(4 * H, history, 1_000_000 + 10 * H)
    assert got.rule == empty.choose(out) == learned.R_V3
    assert got.soft_walltime_s == out.softs[learned.R_V3] == H + 900
    few = learned.Learner()
    for _ in range(learned.MIN_SITE_JOBS - 1):
        few.update(out, 60, out.softs[learned.R_V3], 0.1)
    assert ls.LearnedChoices.from_learner(few).soft == [learned.R_V3] * learned.FINE
    few.update(out, 60, out.softs[learned.R_V3], 0.1)  # the 100th job: the table chooses
    assert few.choose(out) != learned.R_V3
    assert ls.LearnedChoices.from_learner(few).soft[out.fine] == few.choose(out)
    # no history: the walltime, whatever the table
    assert ls.predict(ls.LearnedChoices.from_learner(few), 4 * H, [], 0).soft_walltime_s == 4 * H
    lookup.close_cached()
    lookup.forget_learned()


def test_stored_choices_are_checked():
    choices = ls.LearnedChoices.empty()
    stored = choices.stored()
    assert ls.LearnedChoices.from_stored(1.0, 0, 0, 0.0, stored).soft == choices.soft
    with pytest.raises(ls.OtherRuleSet):
        ls.LearnedChoices.from_stored(1.0, 0, 0, 0.0, {**stored, "rule_set": "0" * 16})
    with pytest.raises(ls.OtherRuleSet):
        ls.LearnedChoices.from_stored(1.0, 0, 0, 0.0, [1, 2])
    for bad in ([1, 2], [learned.N_RULES] * learned.FINE, [True] * learned.FINE):
        with pytest.raises(ValueError, match="rank"):
            ls.LearnedChoices.from_stored(1.0, 0, 0, 0.0, {**stored, "rank": bad})


def test_a_table_of_another_release_is_v3_and_a_bad_shape_a_clear_error(fresh_dsn, caplog):
    try:
        stored = ls.LearnedChoices.empty().stored()
        store_choices(fresh_dsn, {**stored, "rule_set": "0123456789abcdef", "soft": [5] * 900})
        assert lookup.learned_table(fresh_dsn, max_age_s=0).soft == [learned.R_V3] * 900
        assert "another version's rules" in caplog.text
        store_choices(fresh_dsn, {**stored, "soft": [5] * learned.FINE})
        assert lookup.learned_table(fresh_dsn, max_age_s=0).soft == [5] * learned.FINE
        # cached: a change is read after LEARNED_TTL_S only
        store_choices(fresh_dsn, {**stored, "soft": [6] * learned.FINE})
        assert lookup.learned_table(fresh_dsn).soft == [5] * learned.FINE
        store_choices(fresh_dsn, {**stored, "soft": [1, 2]})
        with pytest.raises(DatabaseError, match="learned_state.choices: soft: expected a list"):
            lookup.learned_table(fresh_dsn, max_age_s=0)
    finally:
        lookup.close_cached()
        lookup.forget_learned()


def test_rank_learned_needs_predictor_learned():
    with pytest.raises(ConfigError, match="rank learned needs predictor learned"):
        load_settings(environ={}, overrides={"rank": "learned"})
    settings = load_settings(environ={}, overrides={"rank": "learned", "predictor": "learned"})
    assert settings.rank == "learned"
    with pytest.raises(ConfigError, match="rank learned-paid needs predictor learned"):
        load_settings(environ={}, overrides={"rank": "learned-paid", "predictor": "v3"})
    paid = load_settings(environ={}, overrides={"rank": "learned-paid", "predictor": "learned"})
    assert paid.rank == "learned-paid"


def _add(dsn, user, rows, base):
    """rows: (runtime_s, walltime_s, ncpus), oldest first, ending an hour apart from base
    (a fraction of a second past the hour: the hook's end times are whole seconds, cut)."""
    values = []
    for k, (run, wall, ncpus) in enumerate(rows, 1):
        end = base + dt.timedelta(hours=k, microseconds=700000)
        values.append(("pbs01", f"{k}{user}.pbs01", end - dt.timedelta(seconds=run + 60), k,
                       user, wall, run, end, ncpus))  # fmt: skip
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            execute_values(
                cur,
                "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username,"
                " walltime_s, runtime_s, ended_at, ncpus) VALUES %s",
                values,
            )
    finally:
        conn.close()


def test_learned_jobs_read_whole_second_ends_and_the_ranks_rows(fresh_dsn):
    base = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    _add(fresh_dsn, "alice", [(H, 4 * H, 4), (2 * H, 4 * H, None), (60, H, 0), (30, 0, 1)], base)
    t0 = int(base.timestamp())
    try:
        rows, classes = lookup.learned_jobs(fresh_dsn, "alice", 100)
        # newest first; walltime 0 is never read; ends cut to the second (int(timestamp()))
        assert rows == [(60, H, 0, t0 + 3 * H), (2 * H, 4 * H, None, t0 + 2 * H),
                        (H, 4 * H, 4, t0 + H)]  # fmt: skip
        assert classes == [(2 * H, 4 * H, None), (H, 4 * H, 4)]  # ncpus 0: not the rank's
        # LIMIT reached with an ncpus-0 row inside: the rank's rows are read exactly
        rows, classes = lookup.learned_jobs(fresh_dsn, "alice", 2)
        assert len(rows) == 2 and classes == lookup.class_jobs(fresh_dsn, "alice", 2)
        assert classes == [(2 * H, 4 * H, None), (H, 4 * H, 4)]
    finally:
        lookup.close_cached()


ALICE = [(H, 10 * H, 4), (2 * H, 10 * H, 4), (H + 600, 10 * H, 4), (5 * H, 10 * H, 4)]
BASE = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _hook_config(pbs, dsn, tmp_path, rank="learned"):
    _add(dsn, "alice", ALICE, BASE)
    pbs.define_resource("softwalltime_rank", int)
    config = tmp_path / "softwalltime.CF"
    config.write_text(json.dumps({"dsn": dsn, "predictor": "learned", "rank": rank,
                                  "debug": True}))  # fmt: skip
    pbs.hook_config_filename = str(config)


def test_the_hook_uses_v3_before_learned_is_calibrated(pbs, fresh_dsn, tmp_path):
    """The hook file as pbs_server runs it (fake pbs): predictor learned, rank learned,
    never calibrated: v3 (max ratio 0.5 x 10 h + 900 s), the rank v3 too."""
    _hook_config(pbs, fresh_dsn, tmp_path)
    job = pbs.job(resources={"walltime": "10:00:00", "ncpus": 4}, queue="")
    pbs.new_event(pbs.QUEUEJOB, "alice", job)
    assert pbs.run_hook(HOOK)["soft_walltime"] == 5 * H + 900
    assert job.Resource_List["softwalltime_rank"] == 5 * H + 900
    lines = [m for level, m in pbs.logged if level == pbs.EVENT_DEBUG]
    assert any(": set learned soft_walltime=18900 s (rule v3 in fine bin" in m
               and "rank learned=18900 s set" in m for m in lines)  # fmt: skip


def test_the_hook_sets_learneds_soft_walltime_and_rank(pbs, fresh_dsn, tmp_path):
    """The same with a table that chooses "last" for the soft walltime and "median" for the
    rank in alice's fine bin (v3 elsewhere)."""
    _hook_config(pbs, fresh_dsn, tmp_path)
    ends = [
        int((BASE + dt.timedelta(hours=k, microseconds=700000)).timestamp()) for k in (1, 2, 3, 4)
    ]
    rows = [(r, w, end) for (r, w, _n), end in zip(ALICE, ends)][::-1]
    fine = learned.outcome(10 * H, rows, int(time.time())).fine  # the last end: > 1 day ago
    soft = [learned.R_V3] * learned.FINE
    rank = [learned.R_V3] * learned.FINE
    soft[fine] = learned.RULES.index("last")
    rank[fine] = learned.RULES.index("median")
    store_choices(fresh_dsn, {"rule_set": ls.RULE_SET, "soft": soft, "rank": rank})
    job = pbs.job(resources={"walltime": "10:00:00", "ncpus": 4}, queue="")
    pbs.new_event(pbs.QUEUEJOB, "alice", job)
    assert pbs.run_hook(HOOK)["soft_walltime"] == 5 * H  # the newest run time
    # the median of the last five same-walltime run times (1, 1.17, 2, 5 h)
    assert job.Resource_List["softwalltime_rank"] == H + 600
    # another walltime, no same-walltime job: another bin, v3 there
    job = pbs.job(resources={"walltime": "20:00:00", "ncpus": 4}, queue="")
    pbs.new_event(pbs.QUEUEJOB, "alice", job)
    assert pbs.run_hook(HOOK)["soft_walltime"] == 10 * H + 900


def test_the_hook_floors_learneds_rank_by_the_paid_evidence(pbs, fresh_dsn, tmp_path):
    """rank learned-paid, a table whose rank rule is "last" everywhere: bob's one 1-second
    1-cpu job ranks his 10 h x 4-cpu job at its walltime (it paid 1 core-second of 144,000,
    not a second of the job), where rank learned gives 1 s; alice's honest runs (9.2 h x 4
    in all) pay for her last run's 5 h."""
    _hook_config(pbs, fresh_dsn, tmp_path, rank="learned-paid")
    _add(fresh_dsn, "bob", [(1, 10 * H, 1)], BASE)
    last = [learned.RULES.index("last")] * learned.FINE
    store_choices(fresh_dsn, {"rule_set": ls.RULE_SET, "soft": last, "rank": last})
    ranks, lines = {}, []
    for user in ("bob", "alice"):
        job = pbs.job(resources={"walltime": "10:00:00", "ncpus": 4}, queue="")
        pbs.new_event(pbs.QUEUEJOB, user, job)
        pbs.run_hook(HOOK)
        ranks[user] = job.Resource_List["softwalltime_rank"]
        lines += [m for level, m in pbs.logged if level == pbs.EVENT_DEBUG]
    assert ranks == {"bob": 10 * H, "alice": 5 * H}
    assert any(f"rank learned-paid={ranks['bob']} s set" in m for m in lines)
