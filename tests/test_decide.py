"""decide(): every rule of the issue, with a recording history fetch (pure, no database)."""

import pytest

from softwalltime.core.config import load_settings
from softwalltime.core.decide import JobEvent, decide

DAY = 86400
HISTORY = [(3600, 4 * 3600)]  # ratio 0.25
V3_DAY = DAY // 4 + 900  # what v3 predicts for a 24 h job with HISTORY


class Fetch:
    """Records calls; returns a fixed history."""

    def __init__(self, rows=HISTORY):
        self.rows = rows
        self.calls = []

    def __call__(self, user, limit, with_walltime_only):
        self.calls.append((user, limit, with_walltime_only))
        return self.rows


def run(event="queuejob", user="alice", queue="workq", walltime=DAY, existing=None, stf=False,
        wait=None, ours=False, fetch=None, **overrides):  # fmt: skip
    fetch = fetch or Fetch()
    settings = load_settings(environ={}, overrides=overrides)
    job = JobEvent(event, user, queue, walltime, existing, ours, stf, wait)
    return decide(job, settings, fetch), fetch


@pytest.mark.parametrize("event", ["queuejob", "runjob"])
def test_sets_prediction_and_logs_basis(event):
    d, fetch = run(event=event)
    assert d.soft_walltime_s == V3_DAY
    assert fetch.calls == [("alice", 15, True)]
    assert "user='alice'" in d.reason and "walltime=86400 s" in d.reason
    assert f"v3 soft_walltime={V3_DAY} s" in d.reason and "over 1 jobs" in d.reason


@pytest.mark.parametrize("predictor,limit,only", [("v1", 2, False), ("v2", 2, False)])
def test_predictor_and_counts_from_settings(predictor, limit, only):
    d, fetch = run(predictor=predictor)
    assert fetch.calls == [("alice", limit, only)]
    assert d.prediction.predictor == predictor
    assert d.soft_walltime_s == 3600 + (900 if predictor == "v2" else 0)


def test_queuejob_without_walltime_is_left_for_runjob():
    d, fetch = run(walltime=None)
    assert d.soft_walltime_s is None and "runjob decides" in d.reason
    assert fetch.calls == []  # no database round trip for nothing


def test_runjob_without_walltime_left_alone():
    d, fetch = run(event="runjob", walltime=None)
    assert d.soft_walltime_s is None and fetch.calls == []


def test_shrink_to_fit_left_alone():
    d, fetch = run(stf=True)
    assert d.soft_walltime_s is None and "shrink-to-fit" in d.reason and fetch.calls == []


def test_existing_soft_walltime_kept_by_default():
    d, fetch = run(existing=1234)
    assert d.soft_walltime_s is None and "already set to 1234 s" in d.reason
    assert fetch.calls == []


def test_existing_soft_walltime_overridden_when_configured():
    d, _ = run(existing=1234, override_existing=True)
    assert d.soft_walltime_s == V3_DAY


def test_runjob_repredicts_over_our_own_queuejob_value():
    d, _ = run(event="runjob", existing=5000, ours=True)
    assert d.soft_walltime_s == V3_DAY


def test_runjob_min_wait_keeps_value_of_short_waits():
    d, fetch = run(event="runjob", existing=5000, ours=True, wait=600, runjob_min_wait_s=3600)
    assert d.soft_walltime_s is None and "waited 600 s" in d.reason and fetch.calls == []
    d, _ = run(event="runjob", existing=5000, ours=True, wait=7200, runjob_min_wait_s=3600)
    assert d.soft_walltime_s == V3_DAY
    # no value yet (queuejob had no walltime): predict regardless of the wait
    d, _ = run(event="runjob", existing=None, wait=10, runjob_min_wait_s=3600)
    assert d.soft_walltime_s == V3_DAY


def test_unchanged_value_not_rewritten():
    d, _ = run(event="runjob", existing=V3_DAY, ours=True)
    assert d.soft_walltime_s is None and "unchanged" in d.reason


def test_dry_run_sets_nothing_but_says_what():
    d, fetch = run(dry_run=True)
    assert d.soft_walltime_s is None
    assert d.prediction.soft_walltime_s == V3_DAY
    assert f"dry run, would set v3 soft_walltime={V3_DAY} s" in d.reason
    assert fetch.calls


def test_never_above_walltime():
    d, _ = run(walltime=600, fetch=Fetch([(10**6, 10)]))
    assert d.soft_walltime_s == 600


@pytest.mark.parametrize(
    "overrides,user,queue,allowed",
    [
        ({"users_deny": "alice"}, "alice", "workq", False),
        ({"users_deny": "alice"}, "bob", "workq", True),
        ({"users_allow": "bob,carol"}, "alice", "workq", False),
        ({"users_allow": "bob,carol"}, "carol", "workq", True),
        ({"users_allow": "alice", "users_deny": "alice"}, "alice", "workq", False),
        ({"queues_deny": "gpu"}, "alice", "gpu", False),
        ({"queues_deny": "gpu"}, "alice", "workq", True),
        ({"queues_allow": "workq"}, "alice", "long", False),
        ({"queues_allow": "workq"}, "alice", "workq", True),
        ({"queues_allow": "workq"}, "alice", "", False),  # queuejob without -q: runjob decides
        ({}, "alice", "", True),
    ],
)
def test_allow_and_deny_lists(overrides, user, queue, allowed):
    d, fetch = run(user=user, queue=queue, **overrides)
    assert (d.soft_walltime_s is not None) == allowed, d.reason
    assert bool(fetch.calls) == allowed


def test_other_events_and_missing_user_left_alone():
    assert run(event="movejob")[0].soft_walltime_s is None
    assert run(event="modifyjob")[0].soft_walltime_s == 22500  # a qalter of the walltime
    assert run(user="")[0].soft_walltime_s is None
    assert run(walltime=0)[0].soft_walltime_s is None


def test_fetch_errors_propagate():
    def broken(user, limit, only):
        raise RuntimeError("db down")

    with pytest.raises(RuntimeError):
        run(fetch=broken)


def test_user_name_is_quoted_in_the_log_line():
    d, fetch = run(user="x'; DROP TABLE finished_jobs; --\n")
    assert fetch.calls[0][0] == "x'; DROP TABLE finished_jobs; --\n"
    assert "\n" not in d.reason


# ---- the sort rank (setting rank, issue 17) ----

# (runtime_s, walltime_s, ncpus), newest first: three 4-cpu 1 h jobs
CLASSES = [(600, 3600, 4), (300, 3600, 4), (1200, 3600, 4)]
RANK_1H_4 = 700  # their mean


class BothFetch(Fetch):
    """The hook's reader with the rank on: ``both`` gives the predictor's rows and the
    rank's in one call (one statement); a plain call must not happen then."""

    def __init__(self, rows=HISTORY, classes=CLASSES):
        super().__init__(rows)
        self.classes = classes

    def __call__(self, user, limit, with_walltime_only):
        raise AssertionError("rank on: the history is read with both()")

    def both(self, user, limit, with_walltime_only):
        self.calls.append((user, limit, with_walltime_only))
        return self.rows, self.classes


def ranked(event="queuejob", walltime=3600, existing=None, ours=False, ncpus=4, rank=None,
           fetch=None, stf=False, user="alice", wait=None, **overrides):  # fmt: skip
    fetch = fetch or BothFetch()
    settings = load_settings(environ={}, overrides={"rank": "key-mean", **overrides})
    job = JobEvent(event, user, "workq", walltime, existing, ours, stf, wait, ncpus, None, rank)
    return decide(job, settings, fetch), fetch


def test_rank_set_with_the_soft_walltime_from_one_read():
    d, fetch = ranked()
    assert (
        d.soft_walltime_s == 3600 // 4 + 900 and d.rank_to_set_s == d.computed_rank_s == RANK_1H_4
    )
    assert fetch.calls == [("alice", 15, True)]
    assert d.reason.endswith("; rank key-mean=700 s set")
    # another ncpus: the walltime key (the same three jobs)
    assert ranked(ncpus=8)[0].rank_to_set_s == RANK_1H_4
    # v1 reads its rows with both() as well
    d, fetch = ranked(predictor="v1")
    assert fetch.calls == [("alice", 2, False)] and d.rank_to_set_s == RANK_1H_4


def paid(ncpus, classes=CLASSES):
    settings = load_settings(environ={}, overrides={"rank": "key-mean-paid"})
    job = JobEvent("queuejob", "alice", "workq", 3600, None, False, False, None, ncpus, None, None)
    return decide(job, settings, BothFetch(classes=classes))


def test_rank_key_mean_paid_asks_the_history_to_have_paid_for_the_jump():
    # the three 4-cpu jobs cost 2,100 x 4 core-seconds, 2,100 s of this 1 h x 4 job: the
    # floor 3600 - 2100 = 1500 s is above their mean 700 s
    d = paid(4)
    assert d.rank_to_set_s == 1500 and d.reason.endswith("; rank key-mean-paid=1500 s set")
    # twice that history paid more than the job: their mean stands
    assert paid(4, CLASSES * 2).rank_to_set_s == RANK_1H_4
    # a 128-cpu job of the same walltime: they paid 65 s of it
    assert paid(128).rank_to_set_s == 3600 - 8400 // 128 == 3535
    assert ranked(ncpus=128)[0].rank_to_set_s == RANK_1H_4  # key-mean: the mean, paid or not


def test_rank_off_leaves_the_rank_alone():
    d, fetch = run()
    assert d.rank_to_set_s is None and d.computed_rank_s is None and "rank" not in d.reason


@pytest.mark.parametrize(
    "kwargs",
    [
        {"users_deny": "alice"},
        {"queues_allow": "gpu"},
        {"stf": True},
        {"walltime": None},
        {"walltime": None, "event": "runjob"},
        {"event": "movejob"},
        {"user": ""},
        # runjob_min_wait_s keeps the queuejob values, the rank with them
        {"event": "runjob", "existing": 1800, "ours": True, "wait": 60, "runjob_min_wait_s": 600},
    ],
)
def test_no_rank_where_the_job_is_left_alone(kwargs):
    d, fetch = ranked(**kwargs)
    assert d.soft_walltime_s is None and d.rank_to_set_s is None and d.computed_rank_s is None
    assert fetch.calls == [] and "rank" not in d.reason


def test_an_unchanged_soft_walltime_does_not_keep_the_rank():
    d, _ = ranked(event="runjob", existing=1800, ours=True)
    assert d.soft_walltime_s is None and d.rank_to_set_s == RANK_1H_4
    assert d.reason.endswith(": unchanged; rank key-mean=700 s set")


def test_a_managers_soft_walltime_is_kept_and_the_job_ranked():
    d, _ = ranked(existing=1234)
    assert d.soft_walltime_s is None and d.rank_to_set_s == RANK_1H_4
    assert "leave alone: soft_walltime already set to 1234 s; rank key-mean=700 s set" in d.reason


def test_the_same_rank_is_not_set_again():
    d, _ = ranked(rank=RANK_1H_4)
    assert d.soft_walltime_s == 1800 and d.rank_to_set_s is None and d.computed_rank_s == RANK_1H_4
    assert d.reason.endswith("rank key-mean=700 s unchanged")
    d, _ = ranked(event="runjob", existing=1800, ours=True, rank=RANK_1H_4)
    assert d.soft_walltime_s is None and d.rank_to_set_s is None


def test_dry_run_sets_no_rank():
    d, _ = ranked(dry_run=True)
    assert d.soft_walltime_s is None and d.rank_to_set_s is None and d.computed_rank_s == RANK_1H_4
    assert "dry run, would set v3" in d.reason and "rank key-mean=700 s would be set" in d.reason


def test_no_history_ranks_at_the_walltime():
    d, _ = ranked(fetch=BothFetch(rows=[], classes=[]))
    assert d.soft_walltime_s == 3600 and d.rank_to_set_s == 3600


def test_calibrated_ranks_from_its_own_rows():
    from softwalltime.core import calibrated as cal

    asked = []

    def history(user, limit):
        asked.append((user, limit))
        return CLASSES

    site = cal.SiteFetch(history, cal.Choices.empty)
    settings = load_settings(environ={}, overrides={"rank": "key-mean", "predictor": "calibrated"})
    job = JobEvent("queuejob", "alice", "workq", 3600, None, ncpus=4)
    d = decide(job, settings, BothFetch(), site=site)
    assert asked == [("alice", cal.HISTORY_ROWS)]  # one read, the predictor's
    assert d.rank_to_set_s == RANK_1H_4 and d.soft_walltime_s is not None
    # rank off: calibrated reads the same rows, and ranks nothing
    off = settings._replace(rank="off")
    d = decide(job, off, BothFetch(), site=site)
    assert d.rank_to_set_s is None and d.computed_rank_s is None and "rank" not in d.reason
    assert d.soft_walltime_s is not None


def test_database_errors_propagate_with_the_rank_on():
    class Down(BothFetch):
        def both(self, user, limit, with_walltime_only):
            raise RuntimeError("db down")

    with pytest.raises(RuntimeError):
        ranked(fetch=Down())


# --- the parts of decide(), alone


def _settings(**overrides):
    return load_settings(environ={}, overrides=overrides)


def test_excluded_names_rules_one_to_four_in_order():
    from softwalltime.core.decide import _excluded

    def why(event="queuejob", user="alice", queue="workq", walltime=DAY, stf=False, **kw):
        return _excluded(JobEvent(event, user, queue, walltime, None, False, stf), _settings(**kw))

    assert why() is None
    assert why(event="movejob") == "not a queuejob, runjob or modifyjob event"
    assert why(user="") == "no user name"
    assert why(users_deny=["alice"], users_allow=["alice"]) == "user in the deny list"
    assert why(users_allow=["bob"]) == "user not in the allow list"
    assert why(queue="", queues_allow=["workq"]).startswith("queue not known yet")
    assert why(queue="", walltime=None) == "no walltime requested yet; runjob decides"
    assert why(queues_deny=["workq"]) == "queue in the deny list"
    # the first rule broken is named: a denied user without a walltime is the user
    assert why(users_deny=["alice"], walltime=None) == "user in the deny list"
    assert why(stf=True, walltime=None) == "shrink-to-fit job (min_walltime set)"
    assert why(event="runjob", walltime=None) == "no walltime"
    assert why(walltime=0) == "walltime is not positive"


def test_existing_keeps_a_managers_value_and_waits_for_runjob_min_wait():
    from softwalltime.core.decide import _existing

    def rule5(existing, ours=False, event="runjob", wait=None, ranking=False, **kw):
        job = JobEvent(event, "alice", "workq", DAY, existing, ours, False, wait)
        return _existing(job, _settings(**kw), ranking)

    assert rule5(None) == (None, None)
    kept = "soft_walltime already set to 600 s"
    assert rule5(600) == (kept, kept)  # rank off: left alone at once
    assert rule5(600, ranking=True) == (kept, None)  # rank on: the rank is still decided
    assert rule5(600, override_existing=True) == (None, None)
    assert rule5(600, ours=True, wait=10, runjob_min_wait_s=60) == (
        None,
        "waited 10 s < runjob_min_wait_s 60 s; keeping 600 s",
    )
    assert rule5(600, ours=True, wait=60, runjob_min_wait_s=60) == (None, None)
    assert rule5(600, ours=True, event="queuejob", wait=10, runjob_min_wait_s=60) == (None, None)


def test_predict_reads_once_and_returns_the_ranks_rows_only_with_the_rank_on():
    from softwalltime.core.decide import _predict
    from softwalltime.core.predict import PredictorParams

    settings = _settings()
    params = PredictorParams.from_settings(settings)
    job = JobEvent("queuejob", "alice", "workq", DAY, None)
    fetch = Fetch()
    prediction, rows, own = _predict(job, settings, fetch, params, None, False)
    assert prediction.soft_walltime_s == V3_DAY and rows is None and own is None
    assert fetch.calls == [("alice", 15, True)]
    both = BothFetch()
    prediction, rows, own = _predict(job, settings, both, params, None, True)
    assert prediction.soft_walltime_s == V3_DAY and rows == CLASSES and own is None
    assert both.calls == [("alice", 15, True)]
    # calibrated without the site readers: no prediction, no read
    calibrated = _settings(predictor="calibrated")
    assert _predict(job, calibrated, Fetch(), params, None, False) == (None, None, None)
    # likewise learned without its readers
    learned = _settings(predictor="learned")
    assert _predict(job, learned, Fetch(), params, None, False) == (None, None, None)


def test_rank_is_not_set_again_nor_in_a_dry_run():
    from softwalltime.core.decide import _rank

    def rank(existing=None, rows=CLASSES, **kw):
        job = JobEvent("queuejob", "alice", "workq", 3600, None, False, False, None, 4, None,
                       existing)  # fmt: skip
        return _rank(job, _settings(rank="key-mean", **kw), rows, None)

    assert rank() == (RANK_1H_4, RANK_1H_4, "; rank key-mean=700 s set")
    assert rank(existing=RANK_1H_4) == (None, RANK_1H_4, "; rank key-mean=700 s unchanged")
    assert rank(dry_run=True) == (None, RANK_1H_4, "; rank key-mean=700 s would be set")
    assert rank(rows=None) == (None, None, "")
    job = JobEvent("queuejob", "alice", "workq", 3600, None)
    assert _rank(job, _settings(), CLASSES, None) == (None, None, "")  # rank off


def learned_decision(rank, ncpus, rows):
    """The predictor learned with a table whose rank rule is "last" in every bin (the soft
    walltime's v3), for a job of 24 h x ``ncpus`` after ``rows`` ``(runtime, walltime,
    ncpus)``, newest first, the newest ended a second before the submit."""
    from softwalltime.core import learned
    from softwalltime.core import learned_site as ls

    now = 10**9
    site_rows = [(r, w, n, now - 1 - k) for k, (r, w, n) in enumerate(rows)]
    last = learned.RULES.index("last")
    table = ls.LearnedChoices([learned.R_V3] * learned.FINE, [last] * learned.FINE, 1.0, 0, 0, 0)
    reader = ls.LearnedFetch(lambda user, limit: (site_rows, rows), lambda: table, lambda: now)
    settings = load_settings(environ={}, overrides={"rank": rank, "predictor": "learned"})
    job = JobEvent("queuejob", "alice", "workq", DAY, None, ncpus=ncpus)
    return decide(job, settings, BothFetch(), learned=reader)


def test_rank_learned_paid_asks_the_history_to_have_paid_for_the_jump():
    cheap = [(1, DAY, 1)]  # one 1-second 1-cpu job of the same walltime
    assert learned_decision("learned", 128, cheap).rank_to_set_s == 1
    d = learned_decision("learned-paid", 128, cheap)
    # it paid 1 core-second of 86,400 x 128, not one second of the job: the walltime
    assert d.rank_to_set_s == DAY
    assert d.reason.endswith(f"; rank learned-paid={d.rank_to_set_s} s set")
    # honest evidence paid for it: 2 jobs that ran 13 h of the job's 128 cpus (a cost
    # above the job's 3,072 core-h), the newest ran 12 h: the rank is learned's, 12 h
    honest = [(12 * 3600, DAY, 128), (13 * 3600, DAY, 128), (13 * 3600, DAY, 128)]
    assert learned_decision("learned", 128, honest).rank_to_set_s == 12 * 3600
    assert learned_decision("learned-paid", 128, honest).rank_to_set_s == 12 * 3600
    # no rows: learned's own (v3 without history: the walltime), no floor to apply
    assert learned_decision("learned-paid", 128, []).rank_to_set_s == DAY
