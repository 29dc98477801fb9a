"""``softwalltime policy`` (issue 48): the settings' parsing and changes (pure), the records
in a real PostgreSQL, the CLI's label resolution and history. On the real server:
tests/pbs/test_policy_real.py."""

import argparse
import json
import os

import pytest

from softwalltime.pbsserver import policy as p
from softwalltime.pbsserver.commands import Pbs
from softwalltime.replay import formula as fm

# As OpenPBS 23.06's sched_config has them (a tab before the prime option).
SCHED_CONFIG = (
    "round_robin: False\tall\n"
    "# strict_ordering: true ALL\n"
    "strict_ordering: false\tALL\n"
    "fair_share: false\tALL\n"
    "fairshare_entity: euser\n"
)
LIVE = {
    "job_sort_formula": None,
    "opt_backfill_fuzzy": None,
    "backfill_depth": None,
    "eligible_time_enable": "False",
    "strict_ordering": "false ALL",
    "fair_share": "false ALL",
}


def test_sched_config_lines_are_read_and_set_comments_and_other_lines_kept():
    assert p.config_value(SCHED_CONFIG, "strict_ordering") == "false ALL"
    assert p.config_value(SCHED_CONFIG, "fair_share") == "false ALL"
    assert p.config_value(SCHED_CONFIG, "preemptive_sched") is None
    text = p.with_config_value(SCHED_CONFIG, "strict_ordering", "True ALL")
    assert text == SCHED_CONFIG.replace("strict_ordering: false\tALL", "strict_ordering: True\tALL")
    assert p.with_config_value(text, "strict_ordering", "false ALL") == SCHED_CONFIG
    added = p.with_config_value(SCHED_CONFIG, "backfill_prime", "false ALL")
    assert added == SCHED_CONFIG + "backfill_prime: false\tALL\n"


def test_a_searched_formula_sets_strict_ordering_eligible_time_and_depth():
    expr = fm.expression(fm.parse_label("xf2.rank+len1"), 1)
    target = p.target_of(LIVE, expr, 3)
    assert p.plan(LIVE, target) == [
        "job_sort_formula", "backfill_depth", "eligible_time_enable", "strict_ordering",
    ]  # fmt: skip
    pbs = Pbs(home="/var/spool/pbs")
    assert p.commands(pbs, LIVE, target) == [
        f"qmgr -c \"set sched job_sort_formula = '{expr}'\"",
        'qmgr -c "set server backfill_depth = 3"',
        'qmgr -c "set server eligible_time_enable = True"',
        "sed -i 's/^strict_ordering:.*/strict_ordering: True\\tALL/'"
        " /var/spool/pbs/sched_priv/sched_config",
        "kill -HUP $(head -n 1 /var/spool/pbs/sched_priv/sched.lock)"
        "  # pbs_sched reads sched_config again",
    ]
    # and back: unset what was unset
    back = p.commands(pbs, target, LIVE)
    assert back[:3] == [
        'qmgr -c "unset sched job_sort_formula"',
        'qmgr -c "unset server backfill_depth"',
        'qmgr -c "set server eligible_time_enable = False"',
    ]
    assert p.commands(pbs, target, target) == []
    with pytest.raises(p.PolicyError, match="quote"):
        p.target_of(LIVE, "walltime + 'x'", 1)


def test_describe_says_what_changed():
    after = dict(LIVE, backfill_depth="3")
    assert p.describe(LIVE, after) == "backfill_depth None -> 3"
    assert p.describe(None, LIVE).startswith("first seen: job_sort_formula None, ")


def test_a_large_search_is_stored_without_its_candidates():
    small = {"recommended": {"label": "xf"}, "candidates": []}
    assert p.capped_search(small) == small
    big = dict(small, candidates=[{"label": "x" * 1000}] * 100, tolerances={"p95_pct": 10})
    kept = p.capped_search(big)
    assert kept["truncated"] is True and "candidates" not in kept
    assert kept["recommended"] == {"label": "xf"} and kept["tolerances"] == {"p95_pct": 10}
    with pytest.raises(p.PolicyError, match="JSON object"):
        p.capped_search([1])


def _args(label=None, **kw):
    base = {"label": label, "formula": None, "backfill_depth": None, "procs": None}
    return argparse.Namespace(**{**base, **kw})


def test_labels_resolve_to_the_searchs_formula_and_depth():
    from softwalltime.cli.policy import resolve
    from softwalltime.errors import SoftwalltimeError

    label, expr, depth = resolve(_args("xf2.rank+len1-bf3"), None)
    assert (label, depth) == ("xf2.rank+len1-bf3", 3)
    assert expr == fm.expression(fm.parse_label("xf2.rank+len1"), 1)
    assert resolve(_args("xf"), None)[2] == 1
    with pytest.raises(SoftwalltimeError, match="--procs"):
        resolve(_args("xf+w8"), None)
    assert resolve(_args("xf+w8", procs=64), None)[1].endswith("8 * ncpus / 64")
    search = {
        "recommended": {"label": "xf+w8-bf3"},
        "candidates": [{"label": "xf+w8-bf3", "job_sort_formula": "F", "backfill_depth": 3}],
    }
    assert resolve(_args(), search) == ("xf+w8-bf3", "F", 3)
    assert resolve(_args(formula="walltime", backfill_depth=2), None) == (None, "walltime", 2)
    with pytest.raises(SoftwalltimeError, match="not a formula label"):
        resolve(_args("fcfs"), None)
    with pytest.raises(SoftwalltimeError, match="not both"):
        resolve(_args("xf", formula="walltime"), None)
    with pytest.raises(SoftwalltimeError, match="give LABEL"):
        resolve(_args(), None)


def test_records_observe_and_previous_policy_in_postgresql(fresh_dsn):
    conn = p.connect(fresh_dsn)
    try:
        assert p.history(conn) == [] and p.previous_policy([]) is None
        first = p.observe(conn, LIVE)
        assert first is not None and first.action == "outside" and first.before is None
        assert first.changed_by == p.OUTSIDE_BY and first.after == LIVE
        assert p.observe(conn, LIVE) is None  # as recorded: nothing new
        assert p.previous_policy(p.history(conn)) is None  # first seen: nothing before it
        applied = dict(LIVE, backfill_depth="3")
        search = {"recommended": {"label": "xf-bf3"}}
        rid = p.record(conn, "apply", "root (sudo: alice)", (LIVE, applied), "xf-bf3",
                       ["qmgr -c x"], search)  # fmt: skip
        rows = p.history(conn)
        assert [r.id for r in rows] == [rid, first.id] and rows[0].commands == "qmgr -c x"
        assert rows[0].label == "xf-bf3" and rows[0].changed_at.endswith(" UTC")
        assert p.previous_policy(rows) == LIVE
        assert conn.query("SELECT search::text FROM policy_changes WHERE id = $1", (rid,)) == [
            (json.dumps(search),)
        ]
        # qmgr directly: seen as an outside change from the newest record
        outside = p.observe(conn, dict(applied, backfill_depth="5"))
        assert outside is not None and outside.before == applied
        assert p.describe(outside.before, outside.after) == "backfill_depth 3 -> 5"
        assert [r.id for r in p.history(conn, 1)] == [outside.id]
    finally:
        conn.close()


def test_cli_history_lists_the_records(fresh_dsn, capsys):
    from softwalltime.cli import main

    assert main(["--dsn", fresh_dsn, "policy", "history"]) == 0
    assert capsys.readouterr().out == "no policy change recorded\n"
    conn = p.connect(fresh_dsn)
    try:
        p.record(conn, "apply", "root", (LIVE, dict(LIVE, backfill_depth="3")), "xf-bf3")
    finally:
        conn.close()
    assert main(["--dsn", fresh_dsn, "policy", "history"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("#1 ") and out[0].endswith(" apply by root [xf-bf3]")
    assert out[1] == "    backfill_depth None -> 3"
    assert main(["--dsn", fresh_dsn, "policy", "history", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["after"]["backfill_depth"] == "3" and data[0]["before"] == LIVE


def _fake_pbs(tmp_path, sched: str, server: str) -> Pbs:
    """A PBS_EXEC whose qmgr prints recorded listings, and a PBS_HOME with sched_config:
    status's policy check on inputs (the real server: tests/pbs/test_policy_real.py)."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "sched.txt").write_text(sched)
    (tmp_path / "server.txt").write_text(server)
    qmgr = tmp_path / "bin" / "qmgr"
    qmgr.write_text(f'#!/bin/sh\ncase "$2" in *sched*) cat {tmp_path}/sched.txt;;'
                    f" *) cat {tmp_path}/server.txt;; esac\n")  # fmt: skip
    qmgr.chmod(0o755)
    (tmp_path / "sched_priv").mkdir(exist_ok=True)
    (tmp_path / "sched_priv" / "sched_config").write_text(SCHED_CONFIG)
    return Pbs(exec_dir=str(tmp_path), home=str(tmp_path))


SCHED_LIST = "Sched default\n    scheduling = True\n    job_sort_formula = walltime\n"
SERVER_LIST = "Server pbshost\n    backfill_depth = 3\n    eligible_time_enable = False\n"


def test_status_records_a_change_it_did_not_make(tmp_path, fresh_dsn):
    from softwalltime.pbsserver import status as s

    pbs = _fake_pbs(tmp_path, SCHED_LIST, SERVER_LIST)
    assert p.read_live(pbs) == dict(LIVE, job_sort_formula="walltime", backfill_depth="3")
    (first,) = s.policy_check(pbs, fresh_dsn)
    assert (first.name, first.state) == ("policy", s.OK)
    assert first.summary.startswith("INFO: changed outside softwalltime, recorded as #1: first")
    (same,) = s.policy_check(pbs, fresh_dsn)
    assert same.summary == f"as recorded (#1, outside by {p.OUTSIDE_BY})"
    (tmp_path / "server.txt").write_text(SERVER_LIST.replace("= 3", "= 5"))
    (moved,) = s.policy_check(pbs, fresh_dsn)
    assert moved.summary == (
        "INFO: changed outside softwalltime, recorded as #2: backfill_depth 3 -> 5"
    )
    assert moved.details["live"]["backfill_depth"] == "5"


def test_status_without_the_table_warns_and_without_pbs_says_nothing(tmp_path, empty_dsn):
    from softwalltime.pbsserver import status as s

    (check,) = s.policy_check(_fake_pbs(tmp_path, SCHED_LIST, SERVER_LIST), empty_dsn)
    assert check.state == s.WARNING and check.summary.startswith("cannot record: ")
    assert check.summary.endswith("(run softwalltime db upgrade)")
    assert s.policy_check(Pbs(exec_dir=str(tmp_path / "nopbs")), empty_dsn) == []


def test_cli_apply_without_yes_prints_and_changes_nothing(tmp_path, fresh_dsn, capsys, monkeypatch):
    from softwalltime.cli import main

    _fake_pbs(tmp_path, SCHED_LIST, SERVER_LIST)
    monkeypatch.setenv("PBS_HOME", str(tmp_path))
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"pbs_exec": str(tmp_path), "dsn": fresh_dsn}))
    assert main(["--config", str(cfg), "policy", "apply", "xf-bf3"]) == 0
    out = capsys.readouterr().out.splitlines()
    expr = fm.expression(fm.parse_label("xf"), 1)
    assert out[0] == f"qmgr -c \"set sched job_sort_formula = '{expr}'\""
    assert out[-1] == "# nothing changed: pass --yes to run these and record them"
    assert (tmp_path / "sched_priv" / "sched_config").read_text() == SCHED_CONFIG
    assert main(["--config", str(cfg), "policy", "history"]) == 0
    assert capsys.readouterr().out == "no policy change recorded\n"
    # nothing recorded: nothing to go back to
    assert main(["--config", str(cfg), "policy", "revert"]) == 1
    assert "no previous policy recorded" in capsys.readouterr().err


def test_status_with_a_read_only_role_says_which_role_may_record(tmp_path, fresh_dsn):
    """A role that may only read (as db grant's hook role): status cannot record."""
    import psycopg2
    from psycopg2.extensions import make_dsn

    from softwalltime.pbsserver import status as s

    role = f"swt_policy_ro_{os.getpid()}"
    admin = psycopg2.connect(fresh_dsn)
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'x'")
            cur.execute(f"GRANT SELECT ON policy_changes TO {role}")
        pbs = _fake_pbs(tmp_path, SCHED_LIST, SERVER_LIST)
        (check,) = s.policy_check(pbs, make_dsn(fresh_dsn, user=role, password="x"))
        assert check.state == s.WARNING and "permission denied" in check.summary
        assert check.summary.endswith(
            "(give status a DSN that may: the ingester's role of db grant)"
        )
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP OWNED BY {role}")
            cur.execute(f"DROP ROLE {role}")
        admin.close()


def test_sched_config_is_replaced_whole_with_its_mode_and_owner(tmp_path):
    """pbs_sched must never read half a sched_config: the new text is a new file renamed
    over the old one (the old inode keeps the old text), with the old one's mode and owner."""
    path = tmp_path / "sched_config"
    path.write_text(SCHED_CONFIG)
    path.chmod(0o640)
    owner = (1, 1) if os.geteuid() == 0 else (os.getuid(), os.getgid())  # daemon's, as root
    os.chown(path, *owner)
    before = os.stat(path)
    with open(path, encoding="utf-8") as reader:  # open, as a pbs_sched reading it would be
        p._replace(str(path), "strict_ordering: True\tALL\n")
        assert reader.read() == SCHED_CONFIG
    after = os.stat(path)
    assert path.read_text() == "strict_ordering: True\tALL\n"
    assert after.st_ino != before.st_ino
    assert (after.st_mode & 0o777, after.st_uid, after.st_gid) == (0o640, *owner)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["sched_config"]
