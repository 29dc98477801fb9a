"""Models and migrations agree; upgrade, downgrade and upgrade again from an empty database."""

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from softwalltime.db import engine as db
from softwalltime.db import schema


def _tables(conn: sa.Connection) -> set[str]:
    return set(sa.inspect(conn).get_table_names()) - {"alembic_version"}


@pytest.mark.slow
def test_upgrade_matches_models_then_downgrade_and_upgrade_again(empty_dsn):
    engine = db.make_engine(empty_dsn)
    with engine.connect() as conn:
        assert _tables(conn) == set()
        db.upgrade(conn, "head")
        conn.commit()
        assert _tables(conn) == set(schema.metadata.tables)
        assert db.current_revision(conn) == db.head_revision()

        diff = compare_metadata(MigrationContext.configure(conn), schema.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
        # alembic's own check: autogenerate would produce no new operations.
        command.check(db.alembic_config(conn))

        db.downgrade(conn, "base")
        conn.commit()
        assert _tables(conn) == set()
        assert db.current_revision(conn) is None

        db.upgrade(conn, "head")
        conn.commit()
        assert _tables(conn) == set(schema.metadata.tables)
    engine.dispose()


def test_recent_jobs_index_covers_the_predictor_columns(conn):
    indexes = {ix["name"]: ix for ix in sa.inspect(conn).get_indexes("finished_jobs")}
    ix = indexes["ix_finished_jobs_user_recent"]
    assert ix["column_names"][0] == "username"
    assert ix["dialect_options"]["postgresql_include"] == [
        "runtime_s",
        "walltime_s",
        "ncpus",
        "server",
    ]


def test_natural_key_is_server_job_id_ctime(conn):
    pk = sa.inspect(conn).get_pk_constraint("finished_jobs")
    assert pk["constrained_columns"] == ["server", "job_id", "ctime"]


def _notify_triggers(conn: sa.Connection) -> list[str]:
    return list(
        conn.execute(
            sa.text(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass('finished_jobs')"
                " AND NOT tgisinternal"
            )
        ).scalars()
    )


def _version(conn: sa.Connection) -> int:
    return int(conn.execute(sa.text("SELECT version FROM history_version")).scalar_one())


_INSERT = (
    "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username, ended_at)"
    " VALUES ('s', :job, now(), 1, 'alice', now())"
)


@pytest.mark.slow
def test_revision_0006_counts_changes_to_the_history_in_their_transaction(empty_dsn):
    engine = db.make_engine(empty_dsn)
    with engine.connect() as conn, engine.connect() as other:
        db.upgrade(conn, "head")
        conn.commit()
        assert _notify_triggers(conn) == ["softwalltime_history_version"]
        before = _version(conn)
        conn.commit()
        conn.execute(sa.text(_INSERT), {"job": "1.s"})
        assert _version(other) == before  # not before the commit
        other.commit()
        conn.commit()
        assert _version(other) == before + 1
        other.commit()
        conn.execute(sa.text(_INSERT), {"job": "2.s"})
        conn.rollback()
        assert _version(conn) == before + 1  # a rolled back change is no change
        conn.execute(sa.text("UPDATE finished_jobs SET runtime_s = 5"))
        conn.execute(sa.text("DELETE FROM finished_jobs"))
        conn.execute(sa.text("TRUNCATE finished_jobs"))
        conn.commit()
        assert _version(conn) == before + 4  # one per statement
        conn.commit()
        db.downgrade(conn, "0005")
        conn.commit()
        assert _notify_triggers(conn) == ["softwalltime_history_notify"]
        assert "history_version" not in _tables(conn)
        db.downgrade(conn, "0004")
        conn.commit()
        assert _notify_triggers(conn) == []
    engine.dispose()


@pytest.mark.slow
def test_revision_0008_adds_the_learned_tables_and_removes_them(empty_dsn):
    engine = db.make_engine(empty_dsn)
    with engine.connect() as conn:
        db.upgrade(conn, "0007")
        conn.commit()
        assert {"learned_cells", "learned_state"} & _tables(conn) == set()
        db.upgrade(conn, "0008")
        conn.commit()
        assert {"learned_cells", "learned_state"} <= _tables(conn)
        insert = (
            "INSERT INTO learned_state (id, lam, log_lam, jobs, under_jobs, v3_under_jobs,"
            " site_jobs, target, target_under_pct, prior) VALUES"
            " (:id, 1.0, 0.0, 0, 0, 0, 0.0, :target, 12.0, true)"
        )
        conn.execute(sa.text(insert), {"id": 1, "target": "v3"})
        assert conn.execute(sa.text("SELECT choices FROM learned_state")).scalar() == "{}"
        conn.commit()
        for bad in ({"id": 2, "target": "v3"}, {"id": 1, "target": "v4"}):  # one row; a target
            conn.execute(sa.text("DELETE FROM learned_state"))
            with pytest.raises(sa.exc.IntegrityError):
                conn.execute(sa.text(insert), bad)
            conn.rollback()
        conn.execute(sa.text("INSERT INTO learned_cells VALUES (0, 899, 25, 1.5, 0.5, 1.25)"))
        with pytest.raises(sa.exc.IntegrityError):  # one cell per (level, bin, rule)
            conn.execute(sa.text("INSERT INTO learned_cells VALUES (0, 899, 25, 1, 0, 1)"))
        conn.rollback()
        db.downgrade(conn, "0007")
        conn.commit()
        assert {"learned_cells", "learned_state"} & _tables(conn) == set()
        assert "calibration_state" in _tables(conn) and db.current_revision(conn) == "0007"
        db.upgrade(conn, "head")
        conn.commit()
        assert {"learned_cells", "learned_state"} <= _tables(conn)
    engine.dispose()
