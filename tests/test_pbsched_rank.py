"""The sort by the rank the hook publishes (``softwalltime_rank``, issue 17): the ``*.rank``
sorts, :class:`pbsched.Ranker` alone, in the loop, in the settings and in the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest
from test_simulate import _check_invariants
from test_simulate_reference import first_mismatch, workload

from softwalltime.core import rank as hook_rank
from softwalltime.replay import formula as fm
from softwalltime.replay import pbsched, policies
from softwalltime.replay import simulate as sim

CERIT = Path(__file__).resolve().parents[1] / "softwalltime" / "data"
CERIT = CERIT / "CERIT-SC-wagap-2013.alea.swf.gz"

Row = Tuple[str, int, int, int, int]  # (user, submit, walltime, run time, processors)


def _work(rows: Sequence[Row], procs: int) -> sim.SimWorkload:
    return sim.make_workload("t", list(rows), procs)


def _starts(
    work: sim.SimWorkload,
    policy: str,
    ranker: Optional[pbsched.Ranker],
    skip: bool = True,
    iteration: int = 600,
) -> List[int]:
    p = pbsched.parse_policy(policy, iteration)
    return pbsched.simulate_pbs(
        work, sim.make_source("users"), work.machine_procs or 0, p, ranker=ranker,
        skip_idle_cycles=skip,
    ).start  # fmt: skip


# --- the formulas


@pytest.mark.parametrize("name", ["sjf.rank", "xfactor.rank", "sjfage.rank"])
def test_rank_sorts_equal_their_formula(name: str) -> None:
    fast = pbsched.sort_formula(name)
    assert fast.expression is not None and fast.value is not None and fast.reads_rank
    assert "(softwalltime_rank or soft_walltime or walltime)" in fast.expression
    slow = pbsched._compiled(fast.expression)
    cases = [(60, 3600, 0, 1, 0), (0, 7200, 500, 8, 0), (3600, 3600, 99, 64, 120)]
    for est, wall, waited, ncpus, rank in cases + [(0, 7200, 500, 8, 30), (60, 600, 9, 1, 7)]:
        assert fast.value(est, wall, waited, ncpus, rank) == slow(est, wall, waited, ncpus, rank)
    plain = pbsched.sort_formula(name.split(".")[0])
    assert plain.value is not None and not plain.reads_rank
    # no rank (0, a job the hook ranked not): the plain sort's value
    assert fast.value(60, 3600, 9, 1, 0) == plain.value(60, 3600, 9, 1)
    # a rank decides over the estimate
    assert fast.value(60, 3600, 9, 1, 30) == plain.value(30, 3600, 9, 1)


def test_a_formula_may_read_the_rank() -> None:
    custom = pbsched.sort_formula("softwalltime_rank * ncpus")
    assert custom.reads_rank and not custom.time_dependent
    assert custom.value is not None and custom.value(1, 10, 0, 4, 25) == 100.0
    assert custom.value(1, 10, 0, 4) == 0.0  # a job without a rank reads 0
    assert not pbsched.sort_formula("sjf").reads_rank
    assert pbsched.RANK == hook_rank.RANK_RESOURCE == "softwalltime_rank"


def test_parse_policy_takes_the_rank_sorts() -> None:
    assert pbsched.parse_policy("sjf.rank-bf4") == pbsched.Policy("sjf.rank", 4, True)
    assert pbsched.parse_policy("xfactor.rank") == pbsched.Policy("xfactor.rank", 1, True)
    assert pbsched.parse_policy("sjfage.rank-greedy").strict_ordering is False
    assert pbsched.parse_policy("xfactor.rank-strict").backfill_depth == 0
    assert pbsched.parse_policy("xfactor.rank-bf1").name == "xfactor.rank-bf1"
    assert pbsched.parse_policy("-softwalltime_rank-bf2").job_sort_formula == "-softwalltime_rank"
    for bad in ("sjf.ranked-bf1", "rank-bf1", "sjf.rank-bfx", "sjf-rank"):
        with pytest.raises(ValueError):
            pbsched.parse_policy(bad)


def test_pbs_settings_of_a_rank_policy() -> None:
    lines = pbsched.pbs_settings(pbsched.parse_policy("xfactor.rank-bf1"))
    assert lines[0] == (
        'qmgr -c "create resource softwalltime_rank type=long, flag=r"  # skip if it exists'
    )
    assert lines[1] == (
        "qmgr -c \"set sched job_sort_formula = '(eligible_time + (softwalltime_rank or "
        "soft_walltime or walltime)) / (softwalltime_rank or soft_walltime or walltime)'\""
    )
    assert 'qmgr -c "set server eligible_time_enable = True"' in lines
    assert 'qmgr -c "set server backfill_depth = 1"' in lines
    assert '# hook config: "rank": "key-mean" (softwalltime hooks install --rank key-mean)' in lines
    assert lines[-1] == (
        "# refresh timer: softwalltime refresh every 15 min re-ranks queued jobs "
        "(systemctl enable --now softwalltime-refresh.timer)"
    )
    other = pbsched.pbs_settings(pbsched.parse_policy("sjf.rank-bf1"), 300)
    assert "every 300 s" in other[-1]
    assert "at submit only" in pbsched.pbs_settings(pbsched.parse_policy("sjf.rank"), 0)[-1]
    # the timer the settings name runs every 15 minutes, the default refresh
    timer = Path(__file__).resolve().parents[1] / "packaging" / "systemd"
    assert "OnCalendar=*:0/15\n" in (timer / "softwalltime-refresh.timer").read_text()
    assert pbsched.DEFAULT_RANK_REFRESH_S == 15 * 60
    # a policy without the rank says nothing of it
    assert not any("rank" in s for s in pbsched.pbs_settings(pbsched.parse_policy("sjf-bf1")))


# --- the ranker alone


def test_ranker_is_causal_and_refreshes_on_the_quarter_hour() -> None:
    # Users y and z; job 0 (y) ends at 100 with run 100 of walltime 1000.
    work = _work([("y", 0, 1000, 100, 1), ("y", 1, 2000, 50, 1), ("z", 2, 500, 9, 1)], 4)
    ranker = pbsched.Ranker()
    ranker.bind(work)
    for j in range(3):
        ranker.on_submit(j, j)
    # no job had ended: every rank is the walltime (the hook's "no history")
    assert ranker.rank == [1000, 2000, 500]
    ranker.on_end(0, 100)
    assert ranker.refresh([1, 2], 899) == [] and ranker.rank[1] == 2000  # not before 900
    # at 900: job 1's user had a job end: ranked again, run 100 scaled to 2000 s; z's not
    assert ranker.refresh([1, 2], 900) == [1]
    assert ranker.rank[1] == hook_rank.key_mean(2000, 1, [(100, 1000, 1)]) == 200
    assert ranker.refresh([1, 2], 1799) == []  # next one at 1800
    # without refresh (0): the submit-time rank stays
    once = pbsched.Ranker(0)
    once.bind(work)
    once.on_submit(1, 1)
    once.on_end(0, 100)
    assert once.refresh([1], 10**9) == [] and once.rank[1] == 2000
    with pytest.raises(ValueError, match="refresh_s"):
        pbsched.Ranker(-1)


# --- the loop

# 1 processor. Job 0 (x) runs 0-100: x ran 100 s of 1000. Job 1 (y) runs 100-1000. Jobs 2
# (x, walltime 5000, rank 500 = 100 s scaled to 5000) and 3 (y, walltime 2000: y has no
# ended job at its submit, rank 2000; the refresh is due at the periodic cycle at 900, an
# iteration after job 3's arrival, before job 1's end, so it stays 2000) wait for job 1; at
# 1000 the sort picks one of them.
DECIDES = [
    ("x", 0, 1000, 100, 1),
    ("y", 0, 1000, 900, 1),
    ("x", 200, 5000, 300, 1),
    ("y", 300, 2000, 1500, 1),
]


def test_the_rank_not_the_estimate_decides() -> None:
    work = _work(DECIDES, 1)
    # by the estimate (the walltime): job 3 (2000) before job 2 (5000)
    assert _starts(work, "sjf-bf1", None) == [0, 100, 2500, 1000]
    # by the rank: job 2 (500) before job 3 (2000)
    ranker = pbsched.Ranker()
    assert _starts(work, "sjf.rank-bf1", ranker) == [0, 100, 1000, 1300]
    assert ranker.rank == [1000, 1000, 500, 2000]
    # without a ranker the name reads 0: the sort falls back to the estimate
    assert _starts(work, "sjf.rank-bf1", None) == [0, 100, 2500, 1000]
    # and a sort that does not read the rank ignores a ranker
    assert _starts(work, "sjf-bf1", pbsched.Ranker()) == [0, 100, 2500, 1000]


# 2 processors. Job 0 (z) holds one until 4000; job 1 (y) runs 0-100. Job 2 (w, 2
# processors, rank 500) and job 3 (y, 1 processor, rank 1000 at submit: y had no ended job)
# wait. Strict ordering without backfilling: nothing passes the first job of the sort.
REFRESH = [
    ("z", 0, 5000, 4000, 1),
    ("y", 0, 1000, 100, 1),
    ("w", 1, 500, 10, 2),
    ("y", 2, 1000, 10, 1),
]


@pytest.mark.parametrize("skip", [True, False])
def test_refresh_reranks_a_queued_job_at_the_first_cycle_of_the_period(skip: bool) -> None:
    work = _work(REFRESH, 2)
    # at submit only: job 2 stays first, job 3 waits behind it until job 0 ends
    assert _starts(work, "sjf.rank-strict", pbsched.Ranker(0), skip) == [0, 0, 4000, 4010]
    # refreshed every 900 s: the first cycle from 900 on is the periodic one at 1300, an
    # iteration after the last cycle (job 1's end at 100; pbsd_main.c:1360); job 3 is
    # ranked 100 (job 1's run) and starts on the free processor. That cycle has no
    # arrival, end or extension: only the refresh makes the fast path run it.
    ranker = pbsched.Ranker(900)
    assert _starts(work, "sjf.rank-strict", ranker, skip) == [0, 0, 4000, 1300]
    assert ranker.rank[3] == 100
    # every 5000 s: no refresh is due before job 0 ends
    assert _starts(work, "sjf.rank-strict", pbsched.Ranker(5000), skip) == [0, 0, 4000, 4010]
    # with cycles on events only, the first cycle from 900 on is job 0's end at 4000
    assert _starts(work, "sjf.rank-strict", pbsched.Ranker(900), skip, 0) == [0, 0, 4010, 4000]


@pytest.mark.slow
def test_ranks_at_submit_come_from_jobs_ended_in_the_simulation() -> None:
    # Whole KTH-SP2: each job's rank at submit (no refresh) is key_mean over exactly its
    # user's jobs that ended in the simulation by then, newest end first.
    work = workload("kth")
    ranker = pbsched.Ranker(0)
    p = pbsched.parse_policy("sjf.rank-bf1")
    result = pbsched.simulate_pbs(work, sim.make_source("v3"), 100, p, ranker=ranker)
    _check_invariants(work, result, 100)
    end = [s + r for s, r in zip(result.start, work.run)]
    by_user: Dict[str, List[int]] = {}
    for k in sorted(range(len(end)), key=lambda k: (end[k], k)):
        by_user.setdefault(work.user[k], []).append(k)
    checked = 0
    for j in range(0, len(work.submit), 37):
        ended = [k for k in by_user[work.user[j]] if end[k] <= work.submit[j]]
        history = [(work.run[k], work.wall[k], work.procs[k]) for k in reversed(ended)]
        assert ranker.rank[j] == hook_rank.key_mean(work.wall[j], work.procs[j], history), j
        checked += bool(history)
    assert checked > 500  # most sampled jobs had a history
    # the rank is not the soft walltime: v3 sorted by itself starts jobs otherwise
    plain = pbsched.simulate_pbs(work, sim.make_source("v3"), 100, pbsched.parse_policy("sjf-bf1"))
    assert first_mismatch(work, result.start, plain.start) != ""


class _Unmemoised(pbsched.Ranker):
    # key_mean from the user's history at every call, as Ranker did before its memo
    def value(self, j: int) -> int:
        w = self.work
        return hook_rank.key_mean(w.wall[j], w.procs[j], self.history.of(w.user[j]))


def test_the_rank_memo_changes_no_rank_and_no_start(monkeypatch: pytest.MonkeyPatch) -> None:
    # KTH-SP2 under a search formula, ranks refreshed every 15 min: the memo (one key_mean
    # per user, key and version of the user's history) gives every job the rank and the
    # start that key_mean over the history at every call gives, with fewer calls.
    calls = [0]
    key_mean = hook_rank.key_mean

    def counted(*args: Any) -> int:
        calls[0] += 1
        return key_mean(*args)

    monkeypatch.setattr(hook_rank, "key_mean", counted)
    work = workload("kth")
    formula = fm.expression(fm.parse_label("xf2.rank+len1"), 100)
    p = pbsched.parse_policy(formula + "-bf1")
    got = []
    for ranker in (pbsched.Ranker(), _Unmemoised()):
        calls[0] = 0
        result = pbsched.simulate_pbs(work, sim.make_source("v3"), 100, p, ranker=ranker)
        got.append((result.start, list(ranker.rank), calls[0]))
    (start, rank, memo_calls), (start0, rank0, calls0) = got
    assert rank == rank0
    assert first_mismatch(work, start, start0) == ""
    assert memo_calls < calls0 * 0.8, (memo_calls, calls0)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["sjf.rank-bf1", "sjf.rank-strict"])
def test_skipping_idle_cycles_with_a_refreshed_rank_changes_nothing(policy: str) -> None:
    # KTH-SP2, ranks refreshed every 15 min: skipping the cycles in which nothing changed
    # starts every job when running every cycle does (so bsld is identical).
    work = workload("kth")
    p = pbsched.parse_policy(policy)
    fast = pbsched.simulate_pbs(work, sim.make_source("v3"), 100, p, ranker=pbsched.Ranker())
    slow = pbsched.simulate_pbs(
        work, sim.make_source("v3"), 100, p, skip_idle_cycles=False, ranker=pbsched.Ranker()
    )
    assert first_mismatch(work, fast.start, slow.start) == ""
    assert fast.passes < slow.passes
    assert policies.figures(policy, work, fast) == policies.figures(policy, work, slow)


def test_recommend_skips_the_rank_without_soft_walltimes() -> None:
    # users under a .rank sort is the rank alone: the hook that publishes it also sets
    # soft walltimes, so a site cannot run it; v3 under the same sort it can.
    def row(policy: str, source: str, bsld: float, rank: str = "") -> policies.Figures:
        return policies.Figures(policy, source, 1, 2, bsld, 3, 1, 9.0, 5, 2, 1, 3, rank)

    rows = [
        row("fcfs-bf1", "users", 5.0),
        row("xfactor.rank-bf1", "users", 2.0, "key-mean"),
        row("xfactor.rank-bf1", "v3", 3.0, "key-mean"),
        row("xfactor.rank-bf1", "perfect", 1.0, "perfect"),
    ]
    best = policies.recommend(rows, None)
    assert best is not None and (best.policy, best.source) == ("xfactor.rank-bf1", "v3")
    assert policies.recommend(rows[:2], None) == rows[0]


# --- the CLI


@pytest.mark.slow
def test_cli_searches_rank_policies(capsys: pytest.CaptureFixture[str]) -> None:
    from softwalltime import cli

    argv = ["simulate", "--procs", "2176", "--estimates", "users,v3,perfect", "--jobs", "2"]
    argv += ["--policies", "fcfs-bf1,xfactor-bf1,xfactor.rank-bf1", "--json", str(CERIT)]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rank"] == {"resource": "softwalltime_rank", "name": "key-mean", "refresh_s": 900}
    rows = {(c["policy"], c["source"]): c for c in out["configurations"]}
    assert {k: c["rank"] for k, c in rows.items() if c["rank"]} == {
        ("xfactor.rank-bf1", "users"): "key-mean",
        ("xfactor.rank-bf1", "v3"): "key-mean",
        ("xfactor.rank-bf1", "perfect"): "perfect",
    }
    # perfect estimates come with the perfect rank: the ideal of the plain sort
    plain, ranked = rows["xfactor-bf1", "perfect"], rows["xfactor.rank-bf1", "perfect"]
    assert {**plain, "policy": "", "rank": ""} == {**ranked, "policy": "", "rank": ""}
    # the rank moves the schedule of the sources a site can run
    assert rows["xfactor.rank-bf1", "v3"]["bsld_mean"] != rows["xfactor-bf1", "v3"]["bsld_mean"]
    # refreshed at submit only: other figures
    argv = ["simulate", "--procs", "2176", "--estimates", "v3", "--rank-refresh", "0"]
    argv += ["--policies", "xfactor-bf1,xfactor.rank-bf1", "--json", str(CERIT)]
    assert cli.main(argv) == 0
    once = json.loads(capsys.readouterr().out)
    assert once["rank"]["refresh_s"] == 0
    got = {(c["policy"], c["source"]): c["bsld_mean"] for c in once["configurations"]}
    assert got["xfactor.rank-bf1", "v3"] != rows["xfactor.rank-bf1", "v3"]["bsld_mean"]
    assert got["xfactor-bf1", "v3"] == rows["xfactor-bf1", "v3"]["bsld_mean"]


@pytest.mark.slow
def test_cli_rank_table_and_settings(capsys: pytest.CaptureFixture[str]) -> None:
    from softwalltime import cli

    argv = ["simulate", "--procs", "2176", "--estimates", "users,v3", "--policies"]
    argv += ["fcfs-bf1,sjf.rank-bf1", "--long-p95-bound", "1000", "--force", str(CERIT)]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "*.rank: sorted by softwalltime_rank = the user's key-mean (refreshed every " in text
    assert "recommended: sjf.rank-bf1 with " in text
    assert '  qmgr -c "create resource softwalltime_rank type=long, flag=r"' in text
    assert (
        '  # hook config: "rank": "key-mean" (softwalltime hooks install --rank key-mean)' in text
    )
    # no rank policy: no note
    argv = ["simulate", "--procs", "2176", "--estimates", "users", "--policies", "fcfs-bf1"]
    assert cli.main([*argv, str(CERIT)]) == 0
    assert "softwalltime_rank" not in capsys.readouterr().out
    # --rank-refresh is the policy search's
    argv = ["simulate", "--procs", "2176", "--rank-refresh", "900", str(CERIT)]
    assert cli.main(argv) == 1
    assert "--rank-refresh: only with --policies" in capsys.readouterr().err


def test_key_mean_paid_ranks_by_the_hooks_paid_floor_from_the_jobs_ended() -> None:
    """--rank-by key-mean-paid: each job's rank at submit is the hook's paid_key_mean over
    its user's jobs ended by then, newest end first; cheap evidence holds it above
    key-mean's."""
    # 1 processor; user a: three 10 s jobs of walltime 1000 s, then one asking 1000 s whose
    # rank key-mean puts at 10 s; the 30 core-seconds paid buy 30 s of it (floor 970 s).
    # User b: three 900 s jobs of walltime 1000 s pay for a key mean of 900 s in full.
    rows = [("a", 100 * k, 1000, 10, 1) for k in range(3)]
    rows += [("b", 1000 + 1000 * k, 1000, 900, 1) for k in range(3)]
    rows += [("a", 5000, 1000, 500, 1), ("b", 5000, 1000, 500, 1)]
    work = _work(rows, 1)
    got = {}
    for name in ("key-mean", "key-mean-paid"):
        ranker = pbsched.make_ranker(name, 0)
        assert ranker.name == name
        pbsched.simulate_pbs(work, sim.make_source("v3"), 1, pbsched.parse_policy(
            "sjf.rank-bf1"), ranker=ranker)  # fmt: skip
        got[name] = ranker.rank[6:]
    assert got["key-mean"] == [10, 900]
    assert got["key-mean-paid"] == [970, 900]
    assert type(pbsched.make_ranker("key-mean-paid")) is pbsched.PaidRanker
    lines = pbsched.pbs_settings(pbsched.parse_policy("sjf.rank-bf1"), 900, "key-mean-paid")
    # issue 52: the default of hooks install --rank
    assert '# hook config: "rank": "key-mean-paid" (softwalltime hooks install --rank)' in lines


# --- the rank learned


def _spaced(n: int) -> sim.SimWorkload:
    # 1 processor, job k submitted at 1000 k and run at once (the previous one has ended):
    # users a and b, walltimes 1000 and 2000, run times that vary
    rows = [("ab"[k % 2], 1000 * k, 1000 + 1000 * (k % 3 == 0), (k * 37) % 900 + 1, 1)
            for k in range(n)]  # fmt: skip
    return _work(rows, 1)


@pytest.mark.parametrize("paid", [False, True])
def test_learned_ranker_learns_online_from_the_jobs_ended(paid: bool) -> None:
    """Each job's rank at submit is what a Learner fed with every job ended by then, in end
    order, gives for its user's ended jobs and the time since the newest ended (floored by
    the paid evidence for learned-paid): no future job is read."""
    from softwalltime.core import learned

    work = _spaced(260)
    name = "learned-paid" if paid else "learned"
    ranker = pbsched.make_ranker(name, 0)
    assert isinstance(ranker, pbsched.LearnedRanker) and ranker.name == name
    result = pbsched.simulate_pbs(work, sim.make_source("v3"), 1, pbsched.parse_policy(
        "sjf.rank-bf1"), ranker=ranker)  # fmt: skip
    assert result.start == work.submit  # each ran at once, ended before the next arrived
    table = learned.Learner()
    rows: Dict[str, List[Tuple[int, int, int]]] = {}
    expected, rules = [], set()
    for k in range(len(work.submit)):
        user, wall, run = work.user[k], work.wall[k], work.run[k]
        mine = rows.setdefault(user, [])
        out = learned.outcome(wall, mine, work.submit[k])
        rule = table.rank_rule(out)
        value = out.softs[rule]
        if paid:
            evidence = [(r, w, 1) for r, w, _end in mine]
            value = hook_rank.paid_floor(wall, 1, evidence, value)
        expected.append(value)
        rules.add(rule)
        table.update(out, run, out.softs[learned.R_V3], None)
        mine.insert(0, (run, wall, work.submit[k] + run))
    assert ranker.rank == expected
    assert len(rules - {learned.R_V3}) >= 1  # past 100 jobs the table chose other rules
    assert ranker.table.n_site == len(work.submit) - 2  # each user's first had no history


def test_make_ranker_and_the_settings_of_a_learned_rank() -> None:
    assert type(pbsched.make_ranker("key-mean")) is pbsched.Ranker
    assert pbsched.make_ranker("learned").name == "learned"
    with pytest.raises(ValueError, match="unknown rank 'v3'"):
        pbsched.make_ranker("v3")
    lines = pbsched.pbs_settings(pbsched.parse_policy("sjf.rank-bf1"), 900, "learned-paid")
    assert '# hook config: "predictor": "learned", "rank": "learned-paid" (the rank needs' in (
        "\n".join(lines)
    )
    from softwalltime.cli import simulate as cli_simulate

    assert cli_simulate.RANK_BY == pbsched.RANK_BY  # the CLI's copy (it imports lazily)


@pytest.mark.slow
def test_cli_ranks_by_learned(capsys: pytest.CaptureFixture[str]) -> None:
    from softwalltime import cli

    argv = ["simulate", "--procs", "2176", "--estimates", "v3", "--rank-by", "learned"]
    argv += ["--policies", "fcfs-bf1,xfactor.rank-bf1", "--json", str(CERIT)]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rank"] == {"resource": "softwalltime_rank", "name": "learned", "refresh_s": 900}
    rows = {c["policy"]: c for c in out["configurations"]}
    assert rows["xfactor.rank-bf1"]["rank"] == "learned" and rows["fcfs-bf1"]["rank"] == ""
    argv[argv.index("learned")] = "key-mean"
    assert cli.main(argv) == 0
    keymean = json.loads(capsys.readouterr().out)["configurations"]
    got = {c["policy"]: c["bsld_mean"] for c in keymean}
    assert got["xfactor.rank-bf1"] != rows["xfactor.rank-bf1"]["bsld_mean"]  # another rank
    assert got["fcfs-bf1"] == rows["fcfs-bf1"]["bsld_mean"]  # fcfs reads no rank
    # --rank-by is the policy search's
    assert cli.main(["simulate", "--procs", "2176", "--rank-by", "learned", str(CERIT)]) == 1
    assert "--rank-by: only with --policies" in capsys.readouterr().err
