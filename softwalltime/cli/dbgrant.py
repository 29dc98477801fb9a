"""``softwalltime db grant``: the database roles of least privilege (issue 21).

Three roles, each allowed what its program does and nothing more:

- the **hook's** role reads the history: ``SELECT`` on ``finished_jobs`` (the lookup),
  ``history_version`` (the kept lookups' change counter), ``calibration_state`` (the
  predictor ``calibrated``) and ``learned_state`` (the predictor ``learned``). It can
  write nothing, so a hook's DSN that leaks (it lives in
  the hook's config on the PBS server) cannot change predictions.
- the **ingester's** role writes the history: ``INSERT`` into ``finished_jobs`` and
  ``job_reruns`` (``SELECT`` for ``ON CONFLICT``), its checkpoints, ``UPDATE`` of
  ``history_version`` (the trigger of migration 0006 runs as the writer), and ``TEMPORARY``
  on the database (its ``COPY`` staging tables); all on ``live_jobs`` (live states come and
  go, issue 20); ``SELECT, INSERT`` on ``policy_changes`` (``status`` runs with this role and
  records a policy change it sees; ``policy apply`` records one). Never ``DELETE`` of history
  or of the policy's records, ``TRUNCATE`` or DDL.
- the **pruner's** role deletes history older than ``history_keep_days`` (``softwalltime db
  prune``, a daily timer): ``SELECT, DELETE`` on ``finished_jobs`` and ``job_reruns`` and
  ``UPDATE`` of ``history_version`` (the trigger moves it on every delete). Kept apart from
  the ingester's, which parses files and so never needs to delete anything.

``TEMPORARY`` is also revoked from ``PUBLIC`` on the database (every role holds what PUBLIC
holds, so revoking it from the hook's role alone did nothing, issue 32) when the running role
may (it owns the database, or is a superuser); otherwise the output says PUBLIC keeps it, and
why.

Each run first revokes every table privilege the roles hold in the schema, then grants the
list above: running it again (after a ``db upgrade`` added a table) converges. The SQL is
one text that ``--print`` shows and the command runs in one transaction, so an admin can
review it or hand it to ``psql``. Roles are created ``LOGIN`` without a password (peer or
certificate authentication, or ``ALTER ROLE ... PASSWORD``); an existing role is left as is.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

from ..core.config import Settings, require_dsn
from ..errors import SoftwalltimeError

HOOK_ROLE = "softwalltime_hook"
INGEST_ROLE = "softwalltime_ingest"
PRUNE_ROLE = "softwalltime_prune"
# (privileges, tables) per role; the hook's list is what hook/lookup.py queries.
HOOK_GRANTS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("SELECT", ("finished_jobs", "history_version", "calibration_state", "learned_state")),
)
INGEST_GRANTS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("SELECT, INSERT", ("finished_jobs", "job_reruns")),
    ("SELECT, INSERT, UPDATE", ("ingest_checkpoints",)),
    ("SELECT, UPDATE", ("history_version",)),
    # live states come and go (issue 20): the E record of a job deletes its row
    ("SELECT, INSERT, UPDATE, DELETE", ("live_jobs",)),
    # status (run with this role) and policy record the policy's changes (issue 48)
    ("SELECT, INSERT", ("policy_changes",)),
)
PRUNE_GRANTS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("SELECT, DELETE", ("finished_jobs", "job_reruns")),
    ("SELECT, UPDATE", ("history_version",)),
)
# Lower-case SQL identifiers only: the names go into SQL text and string literals unquoted
# by any driver (the same text is printed for psql).
_ROLE_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class Role(NamedTuple):
    name: str
    what: str  # for people: "the hook (read-only)"
    grants: Tuple[Tuple[str, Tuple[str, ...]], ...]
    temporary: bool  # TEMPORARY on the database (COPY staging tables)


def add_grant_command(dbsub: Any) -> None:
    """Add ``db grant`` to the ``db`` command group."""
    grant = dbsub.add_parser(
        "grant",
        help="create the roles of the hook (read-only), the ingester (writer), the pruner",
        description=(
            f"Create (if missing) the role of the hook, which may only read the history "
            f"(SELECT on {', '.join(HOOK_GRANTS[0][1])}), and the role of the ingester, which "
            "may write it (INSERT, never DELETE), and the role of 'db prune', which may "
            "DELETE old history, and grant exactly that in this database. "
            "Run with a DSN that may create roles and owns the tables (the one of 'db "
            "upgrade'), after every 'db upgrade'. Example: softwalltime db grant --print"
        ),
    )
    grant.add_argument(
        "--hook-role", default=HOOK_ROLE, metavar="NAME", help=f"default {HOOK_ROLE}"
    )
    grant.add_argument(
        "--ingest-role", default=INGEST_ROLE, metavar="NAME", help=f"default {INGEST_ROLE}"
    )
    grant.add_argument(
        "--prune-role", default=PRUNE_ROLE, metavar="NAME", help=f"default {PRUNE_ROLE}"
    )
    out = grant.add_mutually_exclusive_group()
    out.add_argument(
        "--print",
        action="store_true",
        dest="print_sql",
        help="print the SQL (for psql) instead of running it; needs no database",
    )
    out.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object instead of text: "
        + ", ".join(f"{k} ({v})" for k, v in JSON_KEYS),
    )
    grant.set_defaults(func=run)


# db grant --json: its keys, for --help and the test that parses them.
JSON_KEYS = (
    ("database", "the database's name"),
    (
        "roles",
        "one object per role: name, for (what it serves), created (true: new, LOGIN, no"
        " password; false: existed, its privileges reset), temporary (may create temporary"
        " tables), grants (privileges and tables)",
    ),
    ("public_temporary_revoked", "whether PUBLIC lost TEMPORARY on the database"),
    ("owner", "the database's owner"),
    ("user", "the role that ran the grants"),
)


def roles(hook_role: str, ingest_role: str, prune_role: str = PRUNE_ROLE) -> List[Role]:
    """The three roles, names checked.

    :raises SoftwalltimeError: a name that is not a lower-case SQL identifier, or one name
        given to two roles
    """
    names = (hook_role, ingest_role, prune_role)
    for name in names:
        if not _ROLE_RE.match(name):
            raise SoftwalltimeError(
                f"role name {name!r}: use lower-case letters, digits and _ (at most 63)"
            )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SoftwalltimeError(
            f"the hook, the ingester and the pruner need a role each, got {twice[0]!r} twice"
        )
    return [
        Role(hook_role, "the hook (read-only)", HOOK_GRANTS, False),
        Role(ingest_role, "the ingester (writer)", INGEST_GRANTS, True),
        Role(prune_role, "db prune (deletes old history)", PRUNE_GRANTS, False),
    ]


def _execute(template: str) -> str:
    """A DO block running ``template`` with the current database and schema filled in."""
    text = template.replace("{database}", "' || quote_ident(current_database()) || '").replace(
        "{schema}", "' || quote_ident(current_schema()) || '"
    )
    return f"DO $$BEGIN EXECUTE '{text}'; END$$"


def role_sql(role: Role) -> List[str]:
    """The statements for one role, in order, for this database and its current schema.

    No ``%`` and no bind parameter: the same text runs through psycopg2 and psql.
    """
    ident = f'"{role.name}"'
    out = [
        f"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role.name}')"
        f" THEN CREATE ROLE {ident} LOGIN; END IF; END$$"
    ]
    if role.temporary:
        out.append(_execute(f"GRANT CONNECT, TEMPORARY ON DATABASE {{database}} TO {ident}"))
    else:
        out.append(_execute(f"GRANT CONNECT ON DATABASE {{database}} TO {ident}"))
        out.append(_execute(f"REVOKE TEMPORARY ON DATABASE {{database}} FROM {ident}"))
    out.append(_execute(f"GRANT USAGE ON SCHEMA {{schema}} TO {ident}"))
    out.append(_execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA {{schema}} FROM {ident}"))
    out.append(_execute(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {{schema}} FROM {ident}"))
    for privileges, tables in role.grants:
        out.append(f"GRANT {privileges} ON TABLE {', '.join(tables)} TO {ident}")
    return out


# Who owns the database, and whether the running role may revoke PUBLIC's privileges on it
# (its owner's member with the owner's rights, or a superuser).
_MAY_REVOKE_SQL = (
    "SELECT current_database(), pg_get_userbyid(d.datdba), current_user,"
    " pg_has_role(current_user, d.datdba, 'USAGE')"
    " OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
    " FROM pg_database d WHERE d.datname = current_database()"
)
REVOKE_PUBLIC_TEMPORARY = _execute("REVOKE TEMPORARY ON DATABASE {database} FROM PUBLIC")


def script(selected: Sequence[Role]) -> str:
    """The statements as a psql script: one transaction, with what each part is for."""
    lines = [
        "-- softwalltime db grant: run as the owner of the history tables, with CREATEROLE,",
        "-- in the history database (psql -v ON_ERROR_STOP=1 -f FILE).",
        "BEGIN;",
    ]
    for role in selected:
        lines.append(f"-- {role.name}: {role.what}")
        lines += [statement + ";" for statement in role_sql(role)]
    lines += [
        "-- PUBLIC: no TEMPORARY (every role has what PUBLIC has); needs the database's owner",
        REVOKE_PUBLIC_TEMPORARY + ";",
        "COMMIT;",
        "-- Every role also has what PostgreSQL grants PUBLIC (CONNECT on the database;",
        "-- before PostgreSQL 15 also CREATE on schema public): revoke those from PUBLIC if",
        "-- no other role should have them.",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """``softwalltime db grant [--print]``."""
    selected = roles(args.hook_role, args.ingest_role, args.prune_role)
    if args.print_sql:
        print(script(selected))
        return 0
    import psycopg2

    from ..db import engine as db

    dsn = require_dsn(settings)
    with db.connect(db.make_engine(dsn), dsn) as conn:
        current, head = db.current_revision(conn), db.head_revision()
        if current != head:
            raise SoftwalltimeError(
                f"the schema of {db.dsn_target(dsn)} is at {current or 'base (empty)'}, not at"
                f" {head}: run 'softwalltime db upgrade' first (grants are given on its tables)"
            )
        raw: Any = conn.connection.driver_connection  # psycopg2: the same text psql runs
        existed = {}
        try:
            with raw.cursor() as cur:
                for role in selected:
                    cur.execute(
                        "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = %s)", (role.name,)
                    )
                    existed[role.name] = bool(cur.fetchone()[0])
                for role in selected:
                    for statement in role_sql(role):
                        cur.execute(statement)
                cur.execute(_MAY_REVOKE_SQL)
                database, owner, user, may = cur.fetchone()
                if may:
                    cur.execute(REVOKE_PUBLIC_TEMPORARY)
            raw.commit()
        except psycopg2.Error as err:
            raw.rollback()
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            hint = ""
            if err.pgcode == "42501":  # insufficient_privilege
                hint = (
                    ": connect as a role with CREATEROLE that owns the tables (the one that"
                    " ran 'db upgrade'), or give 'db grant --print' to a superuser's psql"
                )
            raise SoftwalltimeError(f"db grant on {db.dsn_target(dsn)}: {first}{hint}") from err
    if args.json:
        found = (database, _roles_json(selected, existed), bool(may), owner, user)
        print(json.dumps(dict(zip((k for k, _ in JSON_KEYS), found)), indent=2))
        return 0
    for role in selected:
        state = "exists, privileges reset" if existed[role.name] else "created (LOGIN, no password)"
        granted = "; ".join(f"{p} on {', '.join(t)}" for p, t in role.grants)
        print(f"{role.name:<22} {role.what}: {state}: {granted}")
    print(_public_line(bool(may), database, owner, user))
    new = [role.name for role in selected if not existed[role.name]]
    if new:
        print(
            "give them a password (psql: \\password NAME) or use peer/certificate"
            f" authentication in pg_hba.conf: {', '.join(new)}"
        )
    return 0


def _roles_json(selected: Sequence[Role], existed: Dict[str, bool]) -> List[Dict[str, Any]]:
    """The ``roles`` of ``db grant --json``."""
    return [
        {
            "name": role.name,
            "for": role.what,
            "created": not existed[role.name],
            "temporary": role.temporary,
            "grants": [{"privileges": p, "tables": list(t)} for p, t in role.grants],
        }
        for role in selected
    ]


def _public_line(revoked: bool, database: str, owner: str, user: str) -> str:
    """What became of PUBLIC's TEMPORARY on the database."""
    if revoked:
        return (
            f"PUBLIC: TEMPORARY on database {database} revoked (of the three, only the"
            " ingester's role may create temporary tables)"
        )
    return (
        f"PUBLIC: keeps TEMPORARY on database {database}: {user} neither owns it (its owner is"
        f" {owner}) nor is a superuser, so every role, the hook's included, may still create"
        f" temporary tables; as {owner}: REVOKE TEMPORARY ON DATABASE {database} FROM PUBLIC"
    )
