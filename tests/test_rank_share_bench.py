"""rank_share.py runs a search label as the formula search runs it (issue 31's share under
the recommended sort)."""

import importlib.util
from pathlib import Path

import pytest

from softwalltime.replay import formula as fm
from softwalltime.replay import pbsched, tune

_PATH = Path(__file__).resolve().parent / "benchmarks" / "rank_share.py"
_SPEC = importlib.util.spec_from_file_location("rank_share", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
rank_share = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(rank_share)


@pytest.mark.parametrize("label", ["xf2.rank+len1-bf3", "xf2.rank+age72h+w8", "xf+age24h"])
def test_a_search_label_runs_as_the_search_runs_its_candidate(label):
    name, _, depth = label.partition("-bf")
    cand = fm.Candidate("v3", fm.parse_label(name), int(depth or 1))
    assert cand.label == label
    want = tune.policy_of(cand, 430, pbsched.parse_policy("fcfs-bf1"))
    got = pbsched.parse_policy(rank_share.policy_text(label, 430))
    assert got == want


def test_a_policy_name_is_left_as_it_is():
    assert rank_share.policy_text("sjf.rank-bf1", 430) == "sjf.rank-bf1"
    assert rank_share.policy_text("xfactor-bf4", 430) == "xfactor-bf4"
