"""History lookup against a real PostgreSQL: order, index use, caching, wall-clock bounds."""

import os
import time
from datetime import timedelta

import psycopg2
import pytest
from helpers_history import EPOCH, FreezableProxy, HangingServer, add_jobs, closed_port
from psycopg2.extensions import make_dsn, parse_dsn

from softwalltime.core.config import load_settings
from softwalltime.core.decide import JobEvent, decide
from softwalltime.errors import ConfigError, DatabaseError
from softwalltime.hook import lookup, pgwire
from softwalltime.hook.state import STATE


@pytest.fixture(autouse=True)
def _no_cached_connection():
    lookup.close_cached()
    yield
    lookup.close_cached()


def _admin(dsn):
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    return conn


def _terminate(dsn, pid):
    """End the backend ``pid`` as an admin would, and wait (up to 5 s) until it is gone."""
    admin = _admin(dsn)
    try:
        with admin.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
            assert cur.fetchone()[0] is True
    finally:
        admin.close()


def test_last_n_by_end_time_ties_by_job_seq(fresh_dsn):
    add_jobs(
        fresh_dsn,
        "alice",
        [
            (100, 1000, 10),  # seq 1, oldest
            (200, 2000, 30),  # seq 2, tie on end time with seq 3
            (300, 3000, 30),  # seq 3: the higher id is the more recent
            (400, None, 20),  # seq 4: no walltime requested
            (None, 5000, 40),  # seq 5: no runtime recorded: never history
            (600, 0, 25),  # seq 6: walltime 0
        ],
    )
    add_jobs(fresh_dsn, "bob", [(9999, 9999, 50)], start_seq=100)
    got = lookup.recent_jobs(fresh_dsn, "alice", 10)
    assert got == [(300, 3000), (200, 2000), (600, 0), (400, None), (100, 1000)]
    assert lookup.recent_jobs(fresh_dsn, "alice", 2) == [(300, 3000), (200, 2000)]
    # v3's query keeps only walltime > 0, and LIMIT counts those
    assert lookup.recent_jobs(fresh_dsn, "alice", 3, with_walltime_only=True) == [
        (300, 3000),
        (200, 2000),
        (100, 1000),
    ]
    assert lookup.recent_jobs(fresh_dsn, "nobody", 5) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "sql",
    [
        lookup.RECENT_JOBS_SQL,
        lookup.RECENT_JOBS_WITH_WALLTIME_SQL,
        lookup.scoped(lookup.RECENT_JOBS_WITH_WALLTIME_SQL, "pbs01"),
        lookup.LEARNED_JOBS_SQL,
        lookup.scoped(lookup.LEARNED_JOBS_SQL, "pbs01"),
    ],
    ids=["all", "with-walltime", "one-server", "learned", "learned-one-server"],
)
def test_query_is_an_index_only_scan(fresh_dsn, sql):
    conn = _admin(fresh_dsn)
    try:
        with conn.cursor() as cur:
            # The test cluster runs synchronous_commit=off; VACUUM cannot mark pages of
            # asynchronously committed rows all-visible until the WAL is flushed, so commit
            # synchronously here (as a production server does by default).
            cur.execute("SET synchronous_commit TO on")
            # 20 000 rows, 400 users: enough for the planner to prefer the index on its own
            cur.execute(
                "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username,"
                " walltime_s, runtime_s, ended_at)"
                " SELECT 'pbs01', g || '.pbs01', %(t0)s, g, 'user' || (g %% 400),"
                " 3600 * (1 + g %% 24), g %% 3600, %(t0)s + g * interval '1 minute'"
                " FROM generate_series(1, 20000) g",
                {"t0": EPOCH},
            )
            cur.execute("VACUUM ANALYZE finished_jobs")
    finally:
        conn.close()
    # the plan of the statement exactly as the hook sends it (extended protocol, $1 $2)
    hook_conn = lookup.connect(fresh_dsn, 2.0, 5000)
    try:
        rows = lookup._query(
            hook_conn, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql,
            ("user7", 15, "pbs01") if "$3" in sql else ("user7", 15),
            time.monotonic() + 5,
        )  # fmt: skip
    finally:
        hook_conn.close()
    plan = "\n".join(row[0] for row in rows)
    assert "Index Only Scan using ix_finished_jobs_user_recent" in plan, plan
    assert "Sort" not in plan, plan  # the index order is the ORDER BY
    assert "Heap Fetches: 0" in plan, plan
    assert "rows=15 " in plan, plan


def test_connection_is_cached_and_session_is_bounded_and_read_only(fresh_dsn):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    lookup.recent_jobs(fresh_dsn, "alice", 2, statement_timeout_ms=321)
    first = STATE.conn
    pid = first.backend_pid
    lookup.recent_jobs(fresh_dsn, "alice", 2, statement_timeout_ms=321)
    assert STATE.conn is first and first.backend_pid == pid
    deadline = time.monotonic() + 5
    assert lookup._query(first, "SHOW statement_timeout", (), deadline) == [("321ms",)]
    assert lookup._query(first, "SHOW transaction_read_only", (), deadline) == [("on",)]
    # other parameters: a different session, not the cached one
    lookup.recent_jobs(fresh_dsn, "alice", 2, statement_timeout_ms=500)
    assert STATE.conn is not first and first.closed


def test_reconnects_when_the_cached_connection_died(fresh_dsn):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    assert lookup.recent_jobs(fresh_dsn, "alice", 2) == [(100, 1000)]
    pid = STATE.conn.backend_pid
    _terminate(fresh_dsn, pid)
    assert lookup.recent_jobs(fresh_dsn, "alice", 2) == [(100, 1000)]
    assert STATE.conn.backend_pid != pid


def test_closed_port_fails_fast_without_password():
    dsn = f"postgresql://hook:s3cret@127.0.0.1:{closed_port()}/softwalltime"
    start = time.monotonic()
    with pytest.raises(DatabaseError) as err:
        lookup.recent_jobs(dsn, "alice", 2, connect_timeout_s=0.3)
    assert time.monotonic() - start < 0.3
    assert "s3cret" not in str(err.value) and "***" in str(err.value)
    assert "refused" in str(err.value)


def test_hanging_server_is_bounded_by_wall_clock():
    server = HangingServer()
    try:
        start = time.monotonic()
        with pytest.raises(DatabaseError, match="timed out"):
            lookup.recent_jobs(server.dsn, "alice", 2, connect_timeout_s=0.3)
        elapsed = time.monotonic() - start
        assert server.accepted, "the client never reached the socket"
    finally:
        server.close()
    # libpq alone would wait 2 s at least (it rounds connect_timeout up to 2)
    assert 0.25 <= elapsed < 0.6, elapsed


def test_server_that_hangs_mid_session_is_bounded(fresh_dsn):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    params = parse_dsn(fresh_dsn)
    proxy = FreezableProxy(params.get("host", "127.0.0.1"), params.get("port", 5432))
    dsn = make_dsn(fresh_dsn, host="127.0.0.1", port=proxy.port)
    try:
        kwargs = {"connect_timeout_s": 0.3, "statement_timeout_ms": 100}
        assert lookup.recent_jobs(dsn, "alice", 2, **kwargs) == [(100, 1000)]
        proxy.frozen.set()
        start = time.monotonic()
        with pytest.raises(DatabaseError, match="timed out"):
            lookup.recent_jobs(dsn, "alice", 2, **kwargs)
        elapsed = time.monotonic() - start
    finally:
        proxy.close()
    # the whole call (stuck query, then one reconnect attempt) within connect + statement + grace
    assert elapsed < 0.3 + 0.1 + lookup.STATEMENT_GRACE_S + 0.15, elapsed
    assert STATE.conn is None


def test_statement_timeout_cancels_a_blocked_query(fresh_dsn):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    locker = psycopg2.connect(fresh_dsn)
    try:
        with locker.cursor() as cur:
            # a real reason for a slow query: an ALTER/VACUUM FULL holding the table
            cur.execute("LOCK TABLE finished_jobs IN ACCESS EXCLUSIVE MODE")
            start = time.monotonic()
            with pytest.raises(DatabaseError, match="statement timeout"):
                lookup.recent_jobs(fresh_dsn, "alice", 2, statement_timeout_ms=150)
            elapsed = time.monotonic() - start
    finally:
        locker.rollback()
        locker.close()
    assert 0.14 <= elapsed < 0.15 + lookup.STATEMENT_GRACE_S + 0.2, elapsed


def test_garbage_rows_are_dropped(fresh_dsn):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10), (-5, 1000, 20), (50, -1, 30)])
    assert lookup.recent_jobs(fresh_dsn, "alice", 10) == [(100, 1000)]


def test_the_limit_counts_usable_rows_only(fresh_dsn):
    """Impossible rows newer than the usable ones (stored by an older ingester) were dropped
    after the LIMIT, so v1 averaged 1 job instead of v1_jobs (issue 16)."""
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10), (300, 1000, 20), (-5, 1000, 30), (-7, -1, 40)])
    assert lookup.recent_jobs(fresh_dsn, "alice", 2) == [(300, 1000), (100, 1000)]
    assert lookup.recent_jobs(fresh_dsn, "alice", 2, with_walltime_only=True) == [
        (300, 1000),
        (100, 1000),
    ]
    settings = load_settings(environ={}, overrides={"dsn": fresh_dsn, "predictor": "v1"})
    job = JobEvent("queuejob", "alice", "", 1000, None)
    decision = decide(job, settings, lookup.fetcher(settings))
    assert decision.soft_walltime_s == 200  # mean of the two usable jobs, v1_jobs = 2


def test_user_names_are_bound_parameters(fresh_dsn):
    nasty = "o'brien\"; DROP TABLE finished_jobs; --"
    add_jobs(fresh_dsn, nasty, [(100, 1000, 10)])
    assert lookup.recent_jobs(fresh_dsn, "x' OR '1'='1", 5) == []
    assert lookup.recent_jobs(fresh_dsn, nasty, 5) == [(100, 1000)]
    assert lookup.recent_jobs(fresh_dsn, "%", 5) == []


def test_fetcher_needs_a_dsn_and_uses_settings(fresh_dsn):
    with pytest.raises(ConfigError):
        lookup.fetcher(load_settings(environ={}))
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10), (200, None, 20)])
    fetch = lookup.fetcher(load_settings(environ={}, overrides={"dsn": fresh_dsn}))
    assert fetch("alice", 5, True) == [(100, 1000)]
    assert fetch("alice", 5, False) == [(200, None), (100, 1000)]


def test_history_scope_server_reads_only_that_servers_jobs(fresh_dsn):
    """Issue 9 item 5: the history query's server scope is explicit."""
    conn = _admin(fresh_dsn)
    try:
        with conn.cursor() as cur:
            for server, runtime, end in (("pbs01", 100, 10), ("pbs02", 900, 20)):
                cur.execute(
                    "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username,"
                    " walltime_s, runtime_s, ended_at)"
                    " VALUES (%s, %s, %s, %s, 'alice', 1000, %s, %s)",
                    (
                        server,
                        f"{end}.{server}",
                        EPOCH,
                        end,
                        runtime,
                        EPOCH + timedelta(minutes=end),
                    ),
                )
        conn.commit()
    finally:
        conn.close()
    every = load_settings(environ={}, overrides={"dsn": fresh_dsn})
    assert lookup.fetcher(every, "pbs01")("alice", 5, True) == [(900, 1000), (100, 1000)]
    scoped = every._replace(history_scope="server")
    assert lookup.fetcher(scoped, "pbs01")("alice", 5, True) == [(100, 1000)]
    assert lookup.fetcher(scoped, "pbs02")("alice", 5, False) == [(900, 1000)]
    with pytest.raises(ConfigError, match="history_scope is 'server'"):
        lookup.fetcher(scoped, None)
    assert lookup.fetcher(scoped._replace(server="pbs02"))("alice", 5, True) == [(900, 1000)]


def test_a_socket_numbered_above_1023_works(fresh_dsn):
    """select() refuses descriptors of 1024 and more; a long-running pbs_server with many
    open connections can hand such numbers to the hook's socket."""
    import resource

    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 1100, "cannot raise the fd limit"
    held = []
    try:
        while not held or held[-1] < 1030:
            held.append(os.open(os.devnull, os.O_RDONLY))
        lookup.close_cached()
        assert lookup.recent_jobs(fresh_dsn, "alice", 2, reuse=False) == [(100, 1000)]
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# -- lookups kept while the history is unchanged (migration 0006's change counter) -------


def _add_uncounted(dsn, user, jobs, start_seq):
    """Rows the counter does not count: written with triggers off (replica role), as no
    writer of ours ever does; what a kept lookup returns then shows it was not re-read."""
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            cur.execute("SET LOCAL session_replication_role = replica")
            for i, (runtime_s, walltime_s, end_s) in enumerate(jobs, start_seq):
                cur.execute(
                    "INSERT INTO finished_jobs (server, job_id, ctime, job_seq, username,"
                    " walltime_s, runtime_s, ended_at) VALUES ('pbs01', %s, %s, %s, %s, %s, %s,"
                    " %s)",
                    (f"{i}.pbs01", EPOCH, i, user, walltime_s, runtime_s,
                     EPOCH + timedelta(seconds=end_s)),
                )  # fmt: skip
    finally:
        conn.close()


def _kept(dsn, user, entries=10):
    return lookup.recent_jobs(dsn, user, 5, cache_entries=entries)


def test_a_lookup_is_kept_until_the_history_changes(fresh_dsn):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    assert _kept(fresh_dsn, "alice") == [(100, 1000)]
    pid = STATE.conn.backend_pid
    _add_uncounted(fresh_dsn, "alice", [(200, 2000, 20)], start_seq=50)
    assert _kept(fresh_dsn, "alice") == [(100, 1000)]  # kept: not read again
    # the same connection, without the cache, sees the row
    assert lookup.recent_jobs(fresh_dsn, "alice", 5) == [(200, 2000), (100, 1000)]
    assert STATE.conn.backend_pid == pid
    # any committed change to finished_jobs (here another user's) moves the counter
    add_jobs(fresh_dsn, "bob", [(1, 1, 1)], start_seq=60)
    assert _kept(fresh_dsn, "alice") == [(200, 2000), (100, 1000)]
    # a returned list is the caller's: changing it changes nothing kept
    _kept(fresh_dsn, "alice").clear()
    assert _kept(fresh_dsn, "alice") == [(200, 2000), (100, 1000)]
    assert STATE.conn.backend_pid == pid


@pytest.mark.parametrize("change", ["delete", "update", "truncate"])
def test_every_kind_of_change_is_counted(fresh_dsn, change):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10), (200, 2000, 20)])
    assert _kept(fresh_dsn, "alice") == [(200, 2000), (100, 1000)]
    admin = _admin(fresh_dsn)
    try:
        with admin.cursor() as cur:
            cur.execute(
                {
                    "delete": "DELETE FROM finished_jobs WHERE runtime_s = 200",
                    "update": "UPDATE finished_jobs SET runtime_s = 150 WHERE runtime_s = 200",
                    "truncate": "TRUNCATE finished_jobs",
                }[change]
            )
    finally:
        admin.close()
    expected = {"delete": [(100, 1000)], "update": [(150, 2000), (100, 1000)], "truncate": []}
    assert _kept(fresh_dsn, "alice") == expected[change]


def test_nothing_is_kept_without_the_counter_or_with_zero_entries(fresh_dsn, caplog):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    assert _kept(fresh_dsn, "alice", entries=0) == [(100, 1000)]
    _add_uncounted(fresh_dsn, "alice", [(200, 2000, 20)], start_seq=50)
    assert _kept(fresh_dsn, "alice", entries=0) == [(200, 2000), (100, 1000)]
    # a database not upgraded to 0006: no counter, so nothing is kept
    lookup.close_cached()
    admin = _admin(fresh_dsn)
    try:
        with admin.cursor() as cur:
            cur.execute("DROP TRIGGER softwalltime_history_version ON finished_jobs")
            cur.execute("DROP TABLE history_version")
    finally:
        admin.close()
    caplog.set_level("DEBUG", logger="softwalltime")
    assert _kept(fresh_dsn, "alice") == [(200, 2000), (100, 1000)]
    assert "no history_version table" in caplog.text
    _add_uncounted(fresh_dsn, "alice", [(300, 3000, 30)], start_seq=51)
    assert _kept(fresh_dsn, "alice")[0] == (300, 3000)


def test_a_connection_opened_without_the_cache_keeps_lookups_once_asked(fresh_dsn):
    """The connection the calibration read (or a config with 0 entries) opened keeps lookups
    as soon as one is asked to (0.3: it never listened, so nothing was ever kept on it)."""
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    assert _kept(fresh_dsn, "alice", entries=0) == [(100, 1000)]
    pid = STATE.conn.backend_pid
    assert _kept(fresh_dsn, "alice") == [(100, 1000)]
    _add_uncounted(fresh_dsn, "alice", [(200, 2000, 20)], start_seq=50)
    assert _kept(fresh_dsn, "alice") == [(100, 1000)]
    assert STATE.conn.backend_pid == pid


def test_the_least_recently_used_lookup_goes_first(fresh_dsn):
    for seq, user in enumerate(("a", "b", "c")):
        add_jobs(fresh_dsn, user, [(100, 1000, 10)], start_seq=seq + 1)
    for user in ("a", "b", "a", "c"):  # two entries: c pushes out b, a was used after b
        _kept(fresh_dsn, user, entries=2)
    for seq, user in enumerate(("a", "b", "c")):
        _add_uncounted(fresh_dsn, user, [(200, 2000, 20)], start_seq=seq + 10)
    assert len(_kept(fresh_dsn, "a", entries=2)) == 1
    assert len(_kept(fresh_dsn, "c", entries=2)) == 1
    assert len(_kept(fresh_dsn, "b", entries=2)) == 2  # read again


def test_a_connection_lost_while_idle_is_replaced_and_what_was_kept_stays(fresh_dsn):
    """The counter lives in the database, not the connection: a new connection reads it and
    the lookups kept stay valid while it did not move (the FATAL the server sent the idle
    connection is not read: it is dropped unread)."""
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    assert _kept(fresh_dsn, "alice") == [(100, 1000)]
    pid = STATE.conn.backend_pid
    _add_uncounted(fresh_dsn, "alice", [(200, 2000, 20)], start_seq=50)
    _terminate(fresh_dsn, pid)
    assert _kept(fresh_dsn, "alice") == [(100, 1000)]
    assert STATE.conn.backend_pid != pid
    add_jobs(fresh_dsn, "bob", [(1, 1, 1)], start_seq=60)  # the counter moves
    assert _kept(fresh_dsn, "alice") == [(200, 2000), (100, 1000)]


def test_an_event_reads_the_counter_once_and_ends_by_its_deadline(fresh_dsn, monkeypatch):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    settings = load_settings(environ={}, overrides={"dsn": fresh_dsn})
    fetch = lookup.fetcher(settings)
    sent = []
    real = pgwire.Connection.query

    def counting(self, sql, *args, **kwargs):
        sent.append(sql)
        return real(self, sql, *args, **kwargs)

    monkeypatch.setattr(pgwire.Connection, "query", counting)
    with lookup.event(time.monotonic() + 5):
        assert fetch("alice", 5, True) == [(100, 1000)]
        assert fetch("alice", 3, False) == [(100, 1000)]
    assert sent.count(lookup.VERSION_SQL) == 1 and len(sent) == 3
    with lookup.event(time.monotonic() + 5):
        assert fetch("alice", 5, True) == [(100, 1000)]  # kept: the counter alone
    assert sent[3:] == [lookup.VERSION_SQL]
    # one deadline for the event, whatever it reads: a past one fails at once
    with lookup.event(time.monotonic() - 1):
        start = time.monotonic()
        with pytest.raises(DatabaseError):
            fetch("bob", 5, True)
        assert time.monotonic() - start < 0.05


def test_kept_lookups_expire(fresh_dsn, monkeypatch):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    _kept(fresh_dsn, "alice")
    _add_uncounted(fresh_dsn, "alice", [(200, 2000, 20)], start_seq=50)
    assert len(_kept(fresh_dsn, "alice")) == 1
    monkeypatch.setattr(lookup, "HISTORY_CACHE_MAX_AGE_S", 0.0)
    assert len(_kept(fresh_dsn, "alice")) == 2


def test_the_hooks_reader_keeps_lookups_by_its_setting(fresh_dsn):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    settings = load_settings(environ={}, overrides={"dsn": fresh_dsn})
    assert settings.history_cache_entries == 1000
    fetch = lookup.fetcher(settings)
    assert lookup.fetcher(settings) is fetch  # made once while the settings are the same
    assert fetch("alice", 5, True) == [(100, 1000)]
    _add_uncounted(fresh_dsn, "alice", [(200, 2000, 20)], start_seq=50)
    assert fetch("alice", 5, True) == [(100, 1000)]
    off = settings._replace(history_cache_entries=0)
    assert lookup.fetcher(off) is not fetch
    assert lookup.fetcher(off)("alice", 5, True) == [(200, 2000), (100, 1000)]


def test_a_decision_is_kept_with_the_lookups_it_came_from(fresh_dsn):
    add_jobs(fresh_dsn, "alice", [(100, 1000, 10)])
    settings = load_settings(environ={}, overrides={"dsn": fresh_dsn})
    made = []

    def decide():
        made.append(lookup.fetcher(settings)("alice", 15, True))
        return len(made)

    key = JobEvent("queuejob", "alice", "", 36000, None)
    assert lookup.decided(settings, key, decide) == 1  # no connection yet
    assert lookup.decided(settings, key, decide) == 2  # now there is: kept
    assert lookup.decided(settings, key, decide) == 2
    assert lookup.decided(settings, key._replace(walltime_s=7200), decide) == 3  # other inputs
    assert lookup.decided(settings, None, decide) == 4  # None: never kept
    add_jobs(fresh_dsn, "bob", [(1, 1, 1)], start_seq=60)  # the history changed
    assert lookup.decided(settings, key, decide) == 5
    assert made[-1] == [(100, 1000)]
    # the predictor calibrated and a zero-entry cache keep nothing
    for other in (
        settings._replace(predictor="calibrated"),
        settings._replace(history_cache_entries=0),
    ):
        before = len(made)
        lookup.decided(other, key, decide)
        lookup.decided(other, key, decide)
        assert len(made) == before + 2
    # close_cached() forgets them too
    kept = lookup.decided(settings, key, decide)
    assert lookup.decided(settings, key, decide) == kept
    lookup.close_cached()
    again = lookup.decided(settings, key, decide)
    assert again == len(made) and again > kept
