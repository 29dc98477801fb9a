"""The pure parts of the real-server suite's helper (``tests/pbs/pbsctl.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "pbs"))

import pbsctl  # noqa: E402

# qmgr 23.06's own output for a list longer than its line: folded after a comma, the rest
# on lines that start with a tab.
FOLDED = (
    "Server pbshost\n"
    "    operators = alice@pbshost,bob@pbshost,carol@pbshost,\n"
    "\tsoftwalltime@pbshost\n"
    "    scheduling = True\n"
)


def test_a_folded_list_is_read_whole_so_the_suite_restores_all_of_it() -> None:
    assert (
        pbsctl._attribute(FOLDED, "operators")
        == "alice@pbshost,bob@pbshost,carol@pbshost,softwalltime@pbshost"
    )
    assert pbsctl._attribute(FOLDED, "scheduling") == "True"
    assert pbsctl._attribute(FOLDED, "managers") is None
