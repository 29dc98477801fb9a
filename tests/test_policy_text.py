"""formula.policy_text runs a search label as the formula search runs it (rank_share.py's
--sorts, the twin's policies)."""

import pytest

from softwalltime.replay import formula as fm
from softwalltime.replay import formula_search, pbsched


@pytest.mark.parametrize("label", ["xf2.rank+len1-bf3", "xf2.rank+age72h+w8", "xf+age24h"])
def test_a_search_label_runs_as_the_search_runs_its_candidate(label):
    name, _, depth = label.partition("-bf")
    cand = fm.Candidate("v3", fm.parse_label(name), int(depth or 1))
    assert cand.label == label
    want = formula_search.policy_of(cand, 430, pbsched.parse_policy("fcfs-bf1"))
    got = pbsched.parse_policy(fm.policy_text(label, 430))
    assert got == want


def test_a_policy_name_is_left_as_it_is():
    assert fm.policy_text("sjf.rank-bf1", 430) == "sjf.rank-bf1"
    assert fm.policy_text("xfactor-bf4", 430) == "xfactor-bf4"
