"""``softwalltime db grant`` against a real PostgreSQL: the hook's role reads and can never
write; the ingester's role ingests and can never delete; the pruner's role deletes old
history and can write nothing else (issue 21, least privilege)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import psycopg2
import pytest
from psycopg2 import errors, sql
from psycopg2.extensions import make_dsn

from softwalltime import cli
from softwalltime.cli import dbgrant
from softwalltime.pbsserver import policy

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "softwalltime" / "data" / "openpbs-23.06-local.log"
BIN = Path(sys.executable).parent
PASSWORD = "grant-test"  # the test server may authenticate by password (testcontainers)
PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
_names = itertools.count()


class Roles(NamedTuple):
    hook: str
    ingest: str
    prune: str
    admin_dsn: str
    hook_dsn: str
    ingest_dsn: str
    prune_dsn: str


def _admin(dsn: str, statement: sql.Composable | str) -> None:
    conn = psycopg2.connect(dsn)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(statement)
    finally:
        conn.close()


@pytest.fixture()
def roles(fresh_dsn: str) -> Iterator[Roles]:
    """Role names of this test only (roles are cluster-wide); dropped afterwards."""
    n = next(_names)
    hook, ingest = f"swt_hook_{os.getpid()}_{n}", f"swt_ingest_{os.getpid()}_{n}"
    prune = f"swt_prune_{os.getpid()}_{n}"
    try:
        yield Roles(
            hook,
            ingest,
            prune,
            fresh_dsn,
            make_dsn(fresh_dsn, user=hook, password=PASSWORD),
            make_dsn(fresh_dsn, user=ingest, password=PASSWORD),
            make_dsn(fresh_dsn, user=prune, password=PASSWORD),
        )
    finally:
        for role in (hook, ingest, prune):
            exists = psycopg2.connect(fresh_dsn)
            try:
                with exists.cursor() as cur:
                    cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
                    found = cur.fetchone() is not None
            finally:
                exists.close()
            if found:  # privileges in this database (and on it), then the role
                _admin(fresh_dsn, sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                _admin(fresh_dsn, sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def grant(r: Roles, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    argv = ["--dsn", r.admin_dsn, "db", "grant", "--hook-role", r.hook, "--ingest-role", r.ingest]
    code = cli.main([*argv, "--prune-role", r.prune, *extra])
    out, err = capsys.readouterr()
    if code == 0 and "--print" not in extra:
        for role in (r.hook, r.ingest, r.prune):
            _admin(
                r.admin_dsn,
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(PASSWORD)
                ),
            )
    return code, out, err


def table_privileges(dsn: str, role: str) -> set[tuple[str, str]]:
    """(table or view, privilege) the role holds in the schema, by has_table_privilege."""
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT c.relname, p FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " CROSS JOIN unnest(%s::text[]) AS p"
                " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v', 'm', 'p', 'S')"
                " AND has_table_privilege(%s, c.oid, p)",
                (list(PRIVILEGES), role),
            )
            return {(str(t), str(p)) for t, p in cur.fetchall()}
    finally:
        conn.close()


def run_sql(dsn: str, statement: str) -> list[tuple[object, ...]]:
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            cur.execute(statement)
            return list(cur.fetchall()) if cur.description else []
    finally:
        conn.close()


def test_the_hooks_role_reads_the_history_and_cannot_write_it(roles, capsys):
    code, out, err = grant(roles, capsys)
    assert code == 0, err
    assert f"{roles.hook} " in out and "created (LOGIN, no password)" in out
    run_sql(
        roles.admin_dsn,
        "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username, walltime_s,"
        " runtime_s, ended_at) VALUES ('s', '1.s', now(), 1, 'alice', 7200, 1800, now())",
    )
    assert run_sql(roles.hook_dsn, "SELECT username, runtime_s FROM finished_jobs") == [
        ("alice", 1800)
    ]
    assert run_sql(roles.hook_dsn, "SELECT count(*) FROM calibration_state") == [(0,)]
    assert run_sql(roles.hook_dsn, "SELECT count(*) FROM learned_state") == [(0,)]
    assert len(run_sql(roles.hook_dsn, "SELECT version FROM history_version")) == 1
    with pytest.raises(errors.InsufficientPrivilege):
        run_sql(
            roles.hook_dsn,
            "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username, ended_at)"
            " VALUES ('s', '2.s', now(), 2, 'mallory', now())",
        )
    for statement in (
        "UPDATE finished_jobs SET runtime_s = 1",
        "DELETE FROM finished_jobs",
        "UPDATE history_version SET version = version + 1",
        "SELECT * FROM ingest_checkpoints",
        "SELECT * FROM job_reruns",
        "SELECT * FROM learned_cells",
        "UPDATE learned_state SET lam = 0",
    ):
        with pytest.raises(errors.InsufficientPrivilege):
            run_sql(roles.hook_dsn, statement)
    # nothing else on any table or view of the schema
    assert table_privileges(roles.admin_dsn, roles.hook) == {
        ("finished_jobs", "SELECT"),
        ("history_version", "SELECT"),
        ("calibration_state", "SELECT"),
        ("learned_state", "SELECT"),
    }


def test_the_hooks_own_lookup_works_with_its_role(roles, capsys):
    """``predict`` runs the hook's lookup code (pgwire, the change counter, calibration)."""
    assert grant(roles, capsys)[0] == 0
    run_sql(
        roles.admin_dsn,
        "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username, walltime_s,"
        " runtime_s, ended_at) VALUES ('s', '1.s', now(), 1, 'alice', 7200, 1800, now())",
    )
    for predictor in ("v3", "calibrated"):
        code = cli.main(
            [
                "--dsn",
                roles.hook_dsn,
                "predict",
                "--user",
                "alice",
                "--walltime",
                "02:00:00",
                "--predictor",
                predictor,
            ]
        )
        out, err = capsys.readouterr()
        assert code == 0, err
        if predictor == "v3":  # 1800/7200 x 7200 + 900
            assert "soft_walltime: 00:45:00 (2700 s)" in out


@pytest.mark.slow
def test_the_ingesters_role_ingests_and_cannot_delete(roles, capsys):
    assert grant(roles, capsys)[0] == 0
    before = run_sql(roles.admin_dsn, "SELECT version FROM history_version")
    proc = subprocess.run(
        [str(BIN / "softwalltime-ingest"), "--dsn", roles.ingest_dsn, "--no-progress", SAMPLE],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert run_sql(roles.admin_dsn, "SELECT count(*) FROM finished_jobs") == [(13,)]
    assert run_sql(roles.admin_dsn, "SELECT count(*) FROM ingest_checkpoints") == [(1,)]
    assert run_sql(roles.admin_dsn, "SELECT version FROM history_version") != before
    for statement in (
        "DELETE FROM finished_jobs",
        "TRUNCATE finished_jobs",
        "UPDATE finished_jobs SET runtime_s = 1",
        "DROP TABLE finished_jobs",
        "UPDATE calibration_state SET lam = 0",
        "DELETE FROM ingest_checkpoints",
        "DELETE FROM policy_changes",
        "UPDATE policy_changes SET label = 'x'",
    ):
        with pytest.raises((errors.InsufficientPrivilege, errors.DependentObjectsStillExist)):
            run_sql(roles.ingest_dsn, statement)
    # status, run with this role, records a policy change it sees (issue 48)
    conn = policy.connect(roles.ingest_dsn)
    try:
        seen = policy.observe(conn, {"backfill_depth": "3"})
    finally:
        conn.close()
    assert seen is not None and seen.after == {"backfill_depth": "3"}
    assert table_privileges(roles.admin_dsn, roles.ingest) == {
        ("finished_jobs", "SELECT"),
        ("finished_jobs", "INSERT"),
        ("job_reruns", "SELECT"),
        ("job_reruns", "INSERT"),
        ("ingest_checkpoints", "SELECT"),
        ("ingest_checkpoints", "INSERT"),
        ("ingest_checkpoints", "UPDATE"),
        ("history_version", "SELECT"),
        ("history_version", "UPDATE"),
        ("live_jobs", "SELECT"),
        ("live_jobs", "INSERT"),
        ("live_jobs", "UPDATE"),
        ("live_jobs", "DELETE"),
        ("policy_changes", "SELECT"),
        ("policy_changes", "INSERT"),
    }


@pytest.mark.slow
def test_the_pruners_role_deletes_old_history_and_nothing_else(roles, capsys):
    assert grant(roles, capsys)[0] == 0
    # alice's one old job and her 100 newer ones (a prune keeps each user's newest 100)
    run_sql(
        roles.admin_dsn,
        "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username, walltime_s,"
        " runtime_s, ended_at) SELECT 's', n || '.s', now() - interval '2 days', n, 'alice',"
        " 7200, 1800, now() - (CASE n WHEN 1 THEN 800 ELSE 1 END) * interval '1 day'"
        " FROM generate_series(1, 101) AS n",
    )
    before = run_sql(roles.admin_dsn, "SELECT version FROM history_version")
    code = cli.main(["--dsn", roles.prune_dsn, "db", "prune", "--keep-days", "365"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "deleted 1 finished jobs and 0 reruns" in out
    left = run_sql(roles.admin_dsn, "SELECT min(job_seq), count(*) FROM finished_jobs")
    assert left == [(2, 100)]
    assert run_sql(roles.admin_dsn, "SELECT version FROM history_version") != before
    for statement in (
        "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username, ended_at)"
        " VALUES ('s', '3.s', now(), 3, 'mallory', now())",
        "UPDATE finished_jobs SET runtime_s = 1",
        "TRUNCATE finished_jobs",
        "DELETE FROM ingest_checkpoints",
        "UPDATE calibration_state SET lam = 0",
    ):
        with pytest.raises(errors.InsufficientPrivilege):
            run_sql(roles.prune_dsn, statement)
    assert table_privileges(roles.admin_dsn, roles.prune) == {
        ("finished_jobs", "SELECT"),
        ("finished_jobs", "DELETE"),
        ("job_reruns", "SELECT"),
        ("job_reruns", "DELETE"),
        ("history_version", "SELECT"),
        ("history_version", "UPDATE"),
    }


@pytest.mark.slow
def test_running_it_again_takes_back_what_was_added(roles, capsys):
    assert grant(roles, capsys)[0] == 0
    _admin(
        roles.admin_dsn,
        sql.SQL("GRANT DELETE ON finished_jobs, job_reruns TO {}").format(
            sql.Identifier(roles.hook)
        ),
    )
    assert ("finished_jobs", "DELETE") in table_privileges(roles.admin_dsn, roles.hook)
    code, out, err = grant(roles, capsys)
    assert code == 0, err
    assert "exists, privileges reset" in out
    assert table_privileges(roles.admin_dsn, roles.hook) == {
        ("finished_jobs", "SELECT"),
        ("history_version", "SELECT"),
        ("calibration_state", "SELECT"),
        ("learned_state", "SELECT"),
    }


def test_print_is_the_same_grants_for_psql(roles, capsys):
    code, out, err = grant(roles, capsys, "--print")
    assert code == 0, err
    assert out.startswith("-- softwalltime db grant") and "BEGIN;" in out and "COMMIT;" in out
    run_sql(roles.admin_dsn, out)  # the printed script, as psql would send it
    assert table_privileges(roles.admin_dsn, roles.hook) == {
        ("finished_jobs", "SELECT"),
        ("history_version", "SELECT"),
        ("calibration_state", "SELECT"),
        ("learned_state", "SELECT"),
    }


def test_print_needs_no_database(capsys, monkeypatch):
    monkeypatch.delenv("SOFTWALLTIME_DSN", raising=False)
    assert cli.main(["db", "grant", "--print"]) == 0
    out = capsys.readouterr().out
    assert 'CREATE ROLE "softwalltime_hook" LOGIN' in out
    assert (
        "GRANT SELECT ON TABLE finished_jobs, history_version, calibration_state,"
        ' learned_state TO "softwalltime_hook"'
    ) in out


def test_a_schema_behind_head_is_refused_in_one_line(empty_dsn, capsys):
    code = cli.main(["--dsn", empty_dsn, "db", "grant"])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "run 'softwalltime db upgrade' first" in err


@pytest.mark.parametrize(
    "flags",
    [
        ["--hook-role", "Robert'); DROP"],
        ["--hook-role", "same", "--ingest-role", "same"],
        ["--ingest-role", "same", "--prune-role", "same"],
    ],
)
def test_bad_role_names_are_refused(flags, capsys):
    assert cli.main(["db", "grant", "--print", *flags]) == 1
    assert "softwalltime: error: " in capsys.readouterr().err


def test_the_hooks_grants_are_what_the_hook_queries():
    """Every table the hook path's SQL reads is granted to the hook's role, and no other."""
    from softwalltime.hook import lookup

    texts = " ".join(
        v for k, v in vars(lookup).items() if k.endswith("_SQL") and isinstance(v, str)
    )
    tables = ("finished_jobs", "history_version", "calibration_state", "learned_state")
    read = {t for t in tables if t in texts}
    others = {"job_reruns", "ingest_checkpoints", "calibration_cells", "learned_cells"}
    assert read == set(dbgrant.HOOK_GRANTS[0][1])
    assert not any(t in texts for t in others)


def test_only_the_ingesters_role_creates_temporary_tables(roles, capsys):
    """Issue 32, item 9: REVOKE TEMPORARY from the hook's role did nothing while PUBLIC held
    TEMPORARY (every role has what PUBLIC has). db grant revokes it from PUBLIC."""
    code, out, err = grant(roles, capsys)
    assert code == 0, err
    assert "PUBLIC: TEMPORARY on database " in out and " revoked" in out
    for dsn in (roles.hook_dsn, roles.prune_dsn):
        with pytest.raises(errors.InsufficientPrivilege):
            run_sql(dsn, "CREATE TEMP TABLE scratch (x int)")
    run_sql(roles.ingest_dsn, "CREATE TEMP TABLE scratch (x int)")  # its COPY staging
    public = run_sql(
        roles.admin_dsn,
        "SELECT count(*) FROM pg_database d, aclexplode(coalesce(d.datacl, acldefault('d',"
        " d.datdba))) AS a WHERE d.datname = current_database() AND a.grantee = 0"
        " AND a.privilege_type = 'TEMPORARY'",
    )
    assert public == [(0,)]


def test_a_role_that_does_not_own_the_database_says_public_keeps_temporary(roles, capsys):
    """The tables' owner (CREATEROLE, not a superuser) may grant on them but not revoke
    PUBLIC's TEMPORARY on a database it does not own: db grant says so, and does the rest."""
    owner = f"swt_tables_{os.getpid()}_{next(_names)}"
    _admin(
        roles.admin_dsn,
        sql.SQL("CREATE ROLE {} LOGIN CREATEROLE PASSWORD {}").format(
            sql.Identifier(owner), sql.Literal(PASSWORD)
        ),
    )
    try:
        tables = run_sql(
            roles.admin_dsn,
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm')",
        )
        for (table,) in tables:
            _admin(
                roles.admin_dsn,
                sql.SQL("ALTER TABLE {} OWNER TO {}").format(
                    sql.Identifier(str(table)), sql.Identifier(owner)
                ),
            )
        as_owner = roles._replace(
            admin_dsn=make_dsn(roles.admin_dsn, user=owner, password=PASSWORD)
        )
        argv = ["--dsn", as_owner.admin_dsn, "db", "grant", "--hook-role", roles.hook]
        code = cli.main([*argv, "--ingest-role", roles.ingest, "--prune-role", roles.prune])
        out, err = capsys.readouterr()
        assert code == 0, err
        line = [ln for ln in out.splitlines() if ln.startswith("PUBLIC:")]
        assert len(line) == 1 and line[0].startswith("PUBLIC: keeps TEMPORARY on database ")
        assert f"{owner} neither owns it" in line[0]
        assert "REVOKE TEMPORARY ON DATABASE " in line[0]
    finally:
        _admin(
            roles.admin_dsn,
            sql.SQL("REASSIGN OWNED BY {} TO CURRENT_USER").format(sql.Identifier(owner)),
        )
        _admin(roles.admin_dsn, sql.SQL("DROP OWNED BY {}").format(sql.Identifier(owner)))
        _admin(roles.admin_dsn, sql.SQL("DROP ROLE {}").format(sql.Identifier(owner)))


def test_json_says_what_each_role_got(roles, capsys):
    """Issue 33: --json on db grant."""
    from softwalltime.cli import dbgrant

    code, out, err = grant(roles, capsys, "--json")
    assert code == 0, err
    found = json.loads(out)
    assert list(found) == [k for k, _ in dbgrant.JSON_KEYS]
    assert [r["name"] for r in found["roles"]] == [roles.hook, roles.ingest, roles.prune]
    assert [r["created"] for r in found["roles"]] == [True, True, True]
    assert [r["temporary"] for r in found["roles"]] == [False, True, False]
    hook = found["roles"][0]["grants"]
    assert hook == [{"privileges": p, "tables": list(t)} for p, t in dbgrant.HOOK_GRANTS]
    code, out, _ = grant(roles, capsys, "--json")
    assert [r["created"] for r in json.loads(out)["roles"]] == [False, False, False]
    with pytest.raises(SystemExit) as usage:  # one or the other
        grant(roles, capsys, "--json", "--print")
    assert usage.value.code == 2
    assert "--print: not allowed with argument --json" in capsys.readouterr().err


def test_report_with_the_hooks_role_is_one_line_naming_the_role_to_use(roles, capsys, tmp_path):
    """Issue 50 item 4: with the hook's DSN, report printed a 60-line traceback ending in
    InsufficientPrivilege (temporary tables); now one line naming the ingester's role."""
    code, out, err = grant(roles, capsys)
    assert code == 0, err
    page = tmp_path / "report.html"
    for dsn, role in ((roles.hook_dsn, roles.hook), (roles.prune_dsn, roles.prune)):
        code = cli.main(["--dsn", dsn, "report", "--out", str(page)])
        out, err = capsys.readouterr()
        assert (code, out) == (1, "")
        assert err == (
            f"softwalltime: error: role {role} may not create temporary tables, which"
            f" the report needs: run it with the ingester's role ({dbgrant.INGEST_ROLE} by"
            " default) or the database owner's (--dsn or SOFTWALLTIME_DSN)\n"
        )
        assert not page.exists()
    # the ingester's role gets past it: to the empty history's own one line
    code = cli.main(["--dsn", roles.ingest_dsn, "report", "--out", str(page)])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "") and "no finished jobs" in err and err.count("\n") == 1
