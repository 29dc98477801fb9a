"""The formula search on a site with fairshare (issue 47): the family's fairshare term, the
grid's F dimension, the baseline (the site's fairshare ordering, not FCFS) and what the
rank adds to it; the usage factor computed along a path as the whole tree's pass does."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any, Dict, List

import pytest

from softwalltime.replay import fairshare as fs
from softwalltime.replay import formula as fm
from softwalltime.replay import formula_search, pbsched, runs
from softwalltime.replay import simulate as sim

EQUAL = fs.Settings(unknown_shares=pbsched.EQUAL_SHARES)


def test_the_fairshare_term_names_its_formula_and_back() -> None:
    p = fm.Params(fm.RANK, 600, age_h=72.0, width=8.0, length=1.0, power=2, fairshare=4.0)
    assert p.label == "xf2.rank+age72h+len1+w8+fs4"
    assert fm.parse_label(p.label) == p
    assert fm.parse_label("xf+fs0.5").fairshare == 0.5
    assert fm.Params().label == "xf"  # F 0: no term, the label as before
    text = fm.expression(p, 338)
    assert text.endswith(" + 8 * ncpus / 338 + 4 * fairshare_factor")
    assert "fairshare" not in fm.expression(p._replace(fairshare=0.0), 338)
    fm.check_pbs_form(text)  # PBS's keyword (pbs_share.h:60), which qmgr accepts
    with pytest.raises(ValueError):
        fm.expression(p._replace(fairshare=-1.0), 338)
    with pytest.raises(ValueError):
        fm.check_pbs_form("xf + 4 * fairshare_fact")  # not a keyword PBS knows
    # the value PBS computes, by hand: est 3000 s, wall 7200, waited 1200, 4 cpus, rank
    # 1800, fairshare_perc 0.1, usage factor 0.05: fairshare_factor 2 ** -0.5
    full = pbsched.sort_formula(fm.expression(fm.Params(fairshare=4.0), 10)).fairshare_value
    assert full is not None
    by_hand = (1200 + 600) / (3000 + 600) + 4 * 2**-0.5
    assert full(3000, 7200, 1200, 4, 1800, 0.1, 0.05, 2**-0.5) == pytest.approx(by_hand)


def test_the_grid_gains_the_fairshare_dimension_only_with_fairshare() -> None:
    plain = fm.candidates(["users", "v3"])
    grid = len(fm.POWERS) * len(fm.AGES_H) * len(fm.LENGTHS) * len(fm.WIDTHS)
    assert len(plain) == 3 * grid  # as before: users' estimate, v3's estimate and rank
    assert {c.params.fairshare for c in plain} == {0.0}
    assert [c.params.label for c in plain][:2] == ["xf", "xf+w8"]
    fair = fm.candidates(["users", "v3"], fairshare=True)
    assert len(fair) == 2 * len(plain)
    assert {c.params.fairshare for c in fair} == set(fm.FAIRSHARES) == {0.0, 4.0}
    # each plain candidate once with F 0 and once with F 4
    without = [c._replace(params=c.params._replace(fairshare=0.0)) for c in fair]
    assert sorted(without) == sorted(plain + plain)
    for cand in fair:
        fm.check_pbs_form(fm.expression(cand.params, 100))
        assert fm.parse_label(cand.params.label) == cand.params


def _factors_whole_tree(tree: fs.Tree) -> Dict[str, float]:
    # calc_usage_factor (fairshare.cpp:1008-1021) over the whole tree, as the model did
    out: Dict[str, float] = {}

    def down(top: Any, parent_factor: float) -> None:
        for c in top.children:
            u = c.usage / tree.root.usage
            out[c.name] = u + (parent_factor - u) * c.group_perc
            down(c, out[c.name])

    for c in tree.root.children:
        out[c.name] = c.usage / tree.root.usage
        down(c, out[c.name])
    return out


def test_the_usage_factor_along_a_path_is_the_whole_trees() -> None:
    groups = (("g1", 10, "root", 30), ("g2", 11, "root", 10), ("ann", 12, "g1", 5))
    settings = fs.Settings(groups=groups + (("bob", 13, "g2", 1),), unknown_shares=2)
    tree = fs.Tree(settings)
    rnd = random.Random(5)
    names = ["ann", "bob", "carl", "dora"]  # carl and dora join unknown
    nodes = [tree.entity(n) for n in names]
    for cycle in range(6):
        for node in nodes:
            tree.accrue(node, rnd.choice([0.0, 10.0, 1000.0]))
        if cycle == 3:
            tree.decay(2)
        tree.start_cycle()
        expected = _factors_whole_tree(tree)
        for node in rnd.sample(nodes, len(nodes)):  # any order of asking
            perc, usage, factor = tree.terms(node)
            assert usage == expected[node.name]
            assert perc == node.tree_perc
            assert factor == math.pow(2, -(usage / perc))
        tree.add_temp(nodes[0], 50.0)  # temp usage: the factors stay the cycle's
        assert tree.terms(nodes[0])[1] == expected["ann"]


def _workload(jobs: int = 80, procs: int = 16) -> sim.SimWorkload:
    # A busy little machine of 5 users, one of them heavy: fairshare changes the order
    rnd = random.Random(7)
    rows, t = [], 0
    for _k in range(jobs):
        t += rnd.randrange(0, 1500)
        run = rnd.choice([60, 300, 1200, 3600, 4 * 3600, 30 * 3600])
        user = rnd.choice(["u1", "u1", "u1", "u2", "u3", "u4", "u5"])
        cpus = rnd.choice([1, 2, 4, 8, 16])
        rows.append((user, t, run * rnd.choice([1, 2, 4]), run, cpus))
    return sim.make_workload("t", rows, procs)


@pytest.fixture(scope="module")
def searched() -> List[runs.SearchResult]:
    work = _workload()
    trace = runs.Loaded("t.swf", work, 16)
    return runs.run_search([trace], ["users", "v3"], runs.SimOptions(fairshare=EQUAL))


def test_the_baseline_is_the_sites_fairshare_not_fcfs(searched: List[runs.SearchResult]) -> None:
    res = searched[0]
    assert formula_search.baseline_name(res.rules) == "fairshare-bf1"
    first, _second = formula_search.halves(_workload())
    opts = runs.SimOptions(fairshare=EQUAL)
    fair = formula_search.simulate(first, 16, None, res.rules, opts.source, 3600)
    fcfs_rules = runs.SimOptions().rules(formula_search.BASELINE_POLICY)
    fcfs = formula_search.simulate(first, 16, None, fcfs_rules, opts.source, 3600)
    assert res.report.base[0] == fair != fcfs
    text = res.format()
    assert "baseline: fairshare-bf1 with the users' walltimes (the site's ordering: " in text
    assert "fair_share True by euser, unknown_shares 10" in text
    assert "fcfs-bf1" not in text
    out = res.as_json()
    assert out["baseline_policy"] == "fairshare-bf1"
    # the grid with F (users: 24 x 2; v3: 48 x 2) and the first half's best at depth 3
    grid = len(fm.candidates(["users", "v3"], fairshare=True))
    assert len(out["candidates"]) == grid + fm.DEEPER_TOP == 144 + 12
    if out["recommended"] is not None:
        fm.check_pbs_form(out["recommended"]["job_sort_formula"])
        assert (
            "# $PBS_HOME/sched_priv/sched_config: fair_share: True ALL"
            in (out["recommended"]["pbs_settings"])
        )


def test_what_the_rank_adds_is_the_rows_own(searched: List[runs.SearchResult]) -> None:
    rep = searched[0].report
    base, tol = rep.base[0], rep.tolerances
    adds = formula_search.rank_adds(rep)
    for key, pick in ((fm.ESTIMATE, adds.no_rank), (fm.RANK, adds.rank)):
        assert pick is not None
        mine = [i for i, r in enumerate(rep.rows) if r.candidate.params.key == key]
        ok = [i for i in mine if not fm.breaches(rep.rows[i].first, base, tol)]
        pool = ok or mine  # within the tolerances if any, else all of the key
        best = min(pool, key=lambda i: formula_search.score(rep.rows[i].first, base, tol))
        assert pick == (best, bool(ok))
        assert rep.rows[best].second is not None  # run on the second half for this
    out = formula_search.adds_json(rep)
    assert out["baseline_second"] == rep.base[1]._asdict()
    a, b = out["without_rank"], out["with_rank"]
    assert a["second"] == rep.rows[a["index"]].second._asdict()  # type: ignore[union-attr]
    assert b["second"] == rep.rows[b["index"]].second._asdict()  # type: ignore[union-attr]
    assert out["bsld_points"] == pytest.approx(b["second"]["bsld"] - a["second"]["bsld"])
    assert out["bsld_pct"] == pytest.approx(100 * out["bsld_points"] / a["second"]["bsld"])
    text = searched[0].format()
    assert "What the rank adds to fairshare" in text
    assert f"the rank adds: {out['bsld_points']:+.2f} points of mean bsld" in text
    for w in (a, b):
        assert f"{w['label']}, {w['source']}" in text
        assert f"bsld {w['second']['bsld']:6.2f}" in text


def test_the_folds_name_the_sites_fairshare_as_their_baseline() -> None:
    # --folds runs the search of each step against the same baseline as --search: the
    # site's fairshare ordering, and its report and JSON say so
    trace = runs.Loaded("t.swf", _workload(90), 16)
    plan = runs.FoldPlan(3, narrow=True)
    [res] = runs.run_folds([trace], ["users"], runs.SimOptions(fairshare=EQUAL), plan)
    assert formula_search.baseline_name(res.rules) == "fairshare-bf1"
    text = res.format()
    assert "baseline: fairshare-bf1 with the users' walltimes (the site's ordering: " in text
    assert "fcfs-bf1" not in text
    assert res.as_json()["baseline_policy"] == "fairshare-bf1"
    # and its figures are fairshare's on the tuning fold, not FCFS's
    fold1 = runs._fold_pairs(trace, 3)[0][0]
    opts = runs.SimOptions(fairshare=EQUAL)
    fair = formula_search.simulate(fold1, 16, None, res.rules, opts.source, 3600)
    fcfs_rules = runs.SimOptions().rules(formula_search.BASELINE_POLICY)
    fcfs = formula_search.simulate(fold1, 16, None, fcfs_rules, opts.source, 3600)
    assert res.report.steps[0].report.base[0] == fair != fcfs


def test_without_fairshare_the_report_is_as_before() -> None:
    work = _workload(60)
    trace = runs.Loaded("t.swf", work, 16)
    res = runs.run_search([trace], ["users"], runs.SimOptions())[0]
    text = res.format()
    assert "baseline: fcfs-bf1 with the users' walltimes\n" in text
    assert "What the rank adds" not in text and "fairshare" not in text
    out = res.as_json()
    assert "rank_adds" not in out and "baseline_policy" not in out
    labels = [c["label"] for c in out["candidates"]]
    assert not any("+fs" in label for label in labels)
    grid = itertools.product(fm.POWERS, fm.AGES_H, fm.LENGTHS, fm.WIDTHS)
    assert len(out["candidates"]) == len(list(grid)) + fm.DEEPER_TOP


def test_policies_name_the_sites_fairshare_and_its_baseline_is_fairshare() -> None:
    from softwalltime.replay import policies

    trace = runs.Loaded("t.swf", _workload(60), 16)
    names = ["fcfs-bf1", "sjf-bf1", "xfactor-greedy"]
    res = runs.run_policies([trace], names, ["users"], runs.SimOptions(fairshare=EQUAL))[0]
    shown = [r.policy for r in res.rows]
    assert shown == ["fairshare-bf1", "sjf+fairshare-bf1", "xfactor+fairshare-greedy"]
    base = policies.baseline(res.rows)
    assert base is not None and base.policy == "fairshare-bf1"
    # the same rows as the sort fairshare's (flat tree, equal shares) under fcfs
    alone = runs.run_policies([trace], ["fairshare-bf1"], ["users"], runs.SimOptions())[0]
    assert alone.rows[0] == res.rows[0]
    # a row's name reads back as its policy, fairshare and all
    for name in shown:
        policy = policies._policy(name, res.rules)
        assert policy.fairshare == EQUAL and policy.name.endswith(name.rsplit("-", 1)[1])
    assert policies._policy("sjf+fairshare-bf1", res.rules).job_sort_formula == (
        pbsched.parse_policy("sjf-bf1").job_sort_formula
    )
    plain = runs.run_policies([trace], ["sjf-bf1"], ["users"], runs.SimOptions())[0]
    assert plain.rows[0].policy == "sjf-bf1"
    assert plain.rows[0].bsld_mean != res.rows[1].bsld_mean  # fairshare breaks sjf's ties


def test_a_half_without_long_jobs_prints_no_long_p95() -> None:
    base = fm.Waits(4.0, 2.0, {"short": 1.0, "long": None, "wide": 3.0}, 9.0, 9.0)
    row = base._replace(bsld=3.0)
    line = formula_search._adds_row("with rank", row, base, "xf2.rank+fs4, v3")
    assert "bsld   3.00 (-25.0 %)" in line and "long p95 -  xf2.rank+fs4, v3" in line
    with_long = row._replace(p95={"short": 1.0, "long": 5.0, "wide": 3.0})
    assert "long p95 5.00 h (-)" in formula_search._adds_row("x", with_long, base, "")
