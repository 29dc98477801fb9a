"""The predictor ``learned`` and its rank inside the real OpenPBS server: the user's rows
from the database, the stored table's rules for their bin, the values PBS shows."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pbsctl
import pytest
from helpers_learned import store_choices

from softwalltime.core import learned
from softwalltime.core import learned_site as ls
from softwalltime.core import rank as hook_rank
from softwalltime.hook import lookup
from softwalltime.units import parse_duration

H = 3600
RANK = "softwalltime_rank"


@pytest.fixture()
def learned_server(install: Any, jobs: list[str]) -> Iterator[list[str]]:
    """Job ids; the hook uninstalled afterwards, which deletes the rank's resource."""
    try:
        yield jobs
    finally:
        pbsctl.purge(jobs)
        jobs.clear()
        install.uninstall()


def test_learned_sets_the_tables_rules_for_the_users_bin(learned_server, install, hook_db):
    # alice's seeded history (conftest): a 4 h job that ran 1 h and a 10 h job that ran
    # 2 h, the newer ended about a day ago. Her fine bin for a 10 h job gets "last" (the
    # newest same-walltime run time, 2 h) for the soft walltime and "last*2+60" for the
    # rank; every other bin v3, as a table that never chose otherwise.
    jobs = learned_server
    rows, _classes = lookup.learned_jobs(hook_db, pbsctl.USER, ls.HISTORY_ROWS, reuse=False)
    fine = learned.outcome(10 * H, ls.history_of(rows), int(time.time())).fine
    soft = [learned.R_V3] * learned.FINE
    rank = [learned.R_V3] * learned.FINE
    soft[fine] = learned.RULES.index("last")
    rank[fine] = learned.RULES.index("last*2+60")
    store_choices(hook_db, {"rule_set": ls.RULE_SET, "soft": soft, "rank": rank})
    table = ls.LearnedChoices(soft, rank, 1.0, 500, 50, 500.0)
    expected = ls.predict(table, 10 * H, rows, int(time.time()))
    assert (expected.soft_walltime_s, expected.rank_s) == (2 * H, 4 * H + 60)
    v3 = ls.predict(ls.LearnedChoices.empty(), 20 * H, rows, int(time.time())).soft_walltime_s

    proc = install(dsn=hook_db, predictor="learned", rank="learned")
    assert f"rank learned in {RANK}" in proc.stdout, proc.stdout
    pbsctl.reload_hook_modules(jobs)
    log = pbsctl.ServerLog()
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00 -l select=1:ncpus=1"))
    value = pbsctl.resource(jobs[-1], "soft_walltime")
    assert value is not None, log.hook_lines("")
    assert parse_duration(value) == 2 * H
    assert pbsctl.resource(jobs[-1], RANK) == 4 * H + 60  # qstat -F json: a number
    (line,) = log.hook_lines("queuejob user='alice'")
    assert "learned soft_walltime=" in line and "rule last in fine bin" in line, line
    # another walltime: no same-walltime job, another bin: v3 there
    jobs.append(pbsctl.qsub("-h -l walltime=20:00:00 -l select=1:ncpus=1"))
    value = pbsctl.resource(jobs[-1], "soft_walltime")
    assert value is not None and parse_duration(value) == v3 != 2 * H


def test_learned_paid_floors_the_tables_rank_by_the_users_paid_evidence(
    learned_server, install, hook_db
):
    # The same history and bin; the rank's rule is "last" (2 h, her 10 h job's run). Her
    # evidence for 2 h is 3 core-hours, paid for a 10 h x 2-cpu job only in part: with rank
    # learned-paid the hook sets walltime - cost / ncpus = 8.5 h, above the rule's 2 h,
    # where rank learned would set 2 h.
    jobs = learned_server
    rows, classes = lookup.learned_jobs(hook_db, pbsctl.USER, ls.HISTORY_ROWS, reuse=False)
    fine = learned.outcome(10 * H, ls.history_of(rows), int(time.time())).fine
    soft = [learned.R_V3] * learned.FINE
    rank = [learned.R_V3] * learned.FINE
    soft[fine] = rank[fine] = learned.RULES.index("last")
    store_choices(hook_db, {"rule_set": ls.RULE_SET, "soft": soft, "rank": rank})
    table = ls.LearnedChoices(soft, rank, 1.0, 500, 50, 500.0)
    assert ls.predict(table, 10 * H, rows, int(time.time())).rank_s == 2 * H
    floored = hook_rank.paid_floor(10 * H, 2, classes, 2 * H)
    assert floored == 10 * H - 3 * H // 2 > 2 * H  # the floor bites: not the rule's value

    install(dsn=hook_db, predictor="learned", rank="learned-paid")
    pbsctl.reload_hook_modules(jobs)
    log = pbsctl.ServerLog()
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00 -l select=1:ncpus=2"))
    assert pbsctl.resource(jobs[-1], RANK) == floored, log.hook_lines("")
    value = pbsctl.resource(jobs[-1], "soft_walltime")
    assert value is not None and parse_duration(value) == 2 * H  # the soft walltime's rule
