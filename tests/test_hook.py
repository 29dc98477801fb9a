"""The hook file run as pbs_server runs it (fake ``pbs``), against a real PostgreSQL."""

import json
import logging
import time
from pathlib import Path

import psycopg2
import pytest
from helpers_history import HangingServer, add_jobs, closed_port

from softwalltime.hook import hooklog, lookup
from softwalltime.hook.state import STATE

REPO = Path(__file__).resolve().parents[1]
HOOK = str(REPO / "hooks" / "softwalltime_hook.py")
FAKE_PBS = REPO / "tests" / "fakes" / "pbs.py"
DAY = 86400
H = 3600
# alice's history below: last 15 with walltime > 0 have max ratio 0.25
ALICE = [(H, 4 * H, 100), (2 * H, 10 * H, 200), (600, None, 300)]
ALICE_DAY = DAY // 4 + 900
MARK = "softwalltime_set"  # the hook's mark: a custom resource (hooks install creates it)


@pytest.fixture()
def db(fresh_dsn):
    add_jobs(fresh_dsn, "alice", ALICE)
    return fresh_dsn


@pytest.fixture()
def configure(pbs, tmp_path):
    """Write the hook config (as ``qmgr import ... application/x-config``) and point pbs at it."""

    def write(**values):
        path = tmp_path / "softwalltime.CF"
        path.write_text(json.dumps(values))
        pbs.hook_config_filename = str(path)
        return path

    return write


def queuejob(pbs, requestor="alice", walltime="24:00:00", queue="", **resources):
    if walltime is not None:
        resources["walltime"] = walltime
    job = pbs.job(resources=resources, queue=queue)
    return pbs.new_event(pbs.QUEUEJOB, requestor, job)


def runjob(pbs, euser="alice", walltime="24:00:00", waited_s=60, variables=None, **resources):
    if walltime is not None:
        resources["walltime"] = walltime
    job = pbs.job(
        resources=resources,
        queue="workq",
        id="1234.pbs01",
        euser=euser,
        Job_Owner="alice@login1",
        ctime=int(time.time() - waited_s),
        variables=variables,
    )
    return pbs.new_event(pbs.RUNJOB, "Scheduler", job)


def modifyjob(pbs, requestor="alice", old_walltime="10:00:00", old_soft=None, mark=None, **new):
    """A qalter of ``new`` resources on a queued job of alice (as the real server shows it)."""
    old = {"walltime": old_walltime}
    if old_soft is not None:
        old["soft_walltime"] = old_soft
    if mark is not None:
        old[MARK] = mark
    variables = {"PBS_O_HOME": "/home/alice", "MY_TOKEN": "hunter2secret"}
    job_o = pbs.job(
        resources=old, queue="workq", id="77.pbs01", euser="alice",
        Job_Owner="alice@login1", variables=variables,
    )  # fmt: skip
    job = pbs.job(resources=new, id="77.pbs01", variables=dict(variables))
    return pbs.new_event(pbs.MODIFYJOB, requestor, job, job_o=job_o)


def _delete_uncounted(dsn, user):
    """Delete ``user``'s history with triggers off (replica role), as no writer of ours
    does: the change counter does not move, so only a lookup read afresh sees it."""
    conn = psycopg2.connect(dsn)
    with conn, conn.cursor() as cur:
        cur.execute("SET LOCAL session_replication_role = replica")
        cur.execute("DELETE FROM finished_jobs WHERE username = %s", (user,))
    conn.close()


def debug_lines(pbs):
    return [msg for level, msg in pbs.logged if level == pbs.EVENT_DEBUG]


def warnings(pbs):
    return [msg for level, msg in pbs.logged if level in (pbs.LOG_WARNING, pbs.LOG_ERROR)]


def test_queuejob_sets_soft_walltime_and_logs_the_decision(pbs, db, configure):
    configure(dsn=db)
    ev = queuejob(pbs)
    out = pbs.run_hook(HOOK)
    assert out == {"accepted": True, "message": "", "soft_walltime": ALICE_DAY}
    assert ev.accepted is True  # the hook called accept() itself
    assert ev.job.Resource_List[MARK] == ALICE_DAY
    (line,) = [m for m in debug_lines(pbs) if "queuejob" in m]
    for part in ("user='alice'", "walltime=86400 s", f"v3 soft_walltime={ALICE_DAY} s", "2 jobs"):
        assert part in line, line
    assert warnings(pbs) == []


def test_queuejob_without_walltime_is_left_for_runjob(pbs, db, configure):
    configure(dsn=db)
    ev = queuejob(pbs, walltime=None)
    out = pbs.run_hook(HOOK)
    assert out["accepted"] and out["soft_walltime"] is None
    assert ev.job.Resource_List[MARK] is None
    assert any("runjob decides" in m for m in debug_lines(pbs))


def test_runjob_repredicts_from_current_history(pbs, db, configure):
    configure(dsn=db, history_recheck_ms=0)  # the counter read at every event
    queuejob(pbs)
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY
    # meanwhile a job of alice ended that used 3/4 of its walltime: the history's change
    # counter moved with that commit, so the lookup the hook kept is not used
    add_jobs(db, "alice", [(3 * H, 4 * H, 400)], start_seq=50)
    runjob(pbs, soft_walltime=ALICE_DAY, **{MARK: ALICE_DAY})
    out = pbs.run_hook(HOOK)
    assert out == {"accepted": True, "message": "", "soft_walltime": 3 * DAY // 4 + 900}


def _back_date_counter_read(seconds):
    """Make the hook's last read of the history's change counter ``seconds`` older (what
    the passing of time would do, without waiting for it)."""
    event, at, conn, value = STATE.version_read
    STATE.version_read = (event, at - seconds, conn, value)


def test_a_read_of_the_counter_is_trusted_for_history_recheck_ms(pbs, db, configure, monkeypatch):
    """A burst of qsub: after the first event, the events of the next history_recheck_ms
    send nothing to the database (bench-pbs: the counter's round trip was 40 % of the
    hook's time per event); a commit is seen by the first event after the window."""
    configure(dsn=db, history_recheck_ms=1000)
    sent = []
    real = lookup.pgwire.Connection.query

    def counting(self, sql, *args, **kwargs):
        sent.append(sql)
        return real(self, sql, *args, **kwargs)

    monkeypatch.setattr(lookup.pgwire.Connection, "query", counting)
    queuejob(pbs)
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY
    assert sent[0] == lookup.VERSION_SQL and len(sent) == 2  # the counter, the history
    add_jobs(db, "alice", [(3 * H, 4 * H, 400)], start_seq=50)  # within the window
    for walltime in ("24:00:00", "12:00:00"):  # alice's lookup kept; no round trip
        queuejob(pbs, walltime=walltime)
        assert pbs.run_hook(HOOK)["soft_walltime"] in (ALICE_DAY, DAY // 8 + 900)
    assert len(sent) == 2
    queuejob(pbs, requestor="bob")  # a lookup, but the counter trusted
    pbs.run_hook(HOOK)
    assert len(sent) == 3 and "FROM finished_jobs" in sent[2]
    _back_date_counter_read(0.9)
    queuejob(pbs)
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY  # still within 1 s of the read
    _back_date_counter_read(0.2)
    queuejob(pbs)
    assert pbs.run_hook(HOOK)["soft_walltime"] == 3 * DAY // 4 + 900  # read again: moved
    assert sent[3] == lookup.VERSION_SQL


def test_runjob_user_falls_back_to_job_owner(pbs, db, configure):
    configure(dsn=db)
    runjob(pbs, euser=None)
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY


def test_runjob_min_wait_keeps_the_queuejob_value(pbs, db, configure):
    configure(dsn=db, runjob_min_wait_s=3600)
    runjob(pbs, soft_walltime=5000, waited_s=600, **{MARK: 5000})
    assert pbs.run_hook(HOOK)["soft_walltime"] == 5000
    runjob(pbs, soft_walltime=5000, waited_s=7200, **{MARK: 5000})
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY


def test_shrink_to_fit_job_left_alone(pbs, db, configure):
    configure(dsn=db)
    queuejob(pbs, min_walltime="01:00:00")
    out = pbs.run_hook(HOOK)
    # the fake server would have rejected the qsub (15180) had the hook set soft_walltime
    assert out == {"accepted": True, "message": "", "soft_walltime": None}
    assert any("shrink-to-fit" in m for m in debug_lines(pbs))


def test_existing_soft_walltime_kept_unless_configured(pbs, db, configure):
    configure(dsn=db)
    queuejob(pbs, soft_walltime="02:00:00")  # set by a manager: no mark
    assert pbs.run_hook(HOOK)["soft_walltime"] == 2 * H
    runjob(pbs, soft_walltime="02:00:00", **{MARK: 999})
    assert pbs.run_hook(HOOK)["soft_walltime"] == 2 * H  # qalter'ed since: not ours
    # the 0.3 mark, a Variable_List entry, could be forged by the user with qsub -v
    runjob(pbs, soft_walltime="02:00:00", variables={"SOFTWALLTIME_SET": "7200"})
    assert pbs.run_hook(HOOK)["soft_walltime"] == 2 * H
    configure(dsn=db, override_existing=True)
    queuejob(pbs, soft_walltime="02:00:00")
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY


def test_never_above_walltime(pbs, db, configure):
    configure(dsn=db)
    add_jobs(db, "bob", [(5 * H, H, 100)], start_seq=80)  # overran its walltime
    queuejob(pbs, requestor="bob", walltime="00:30:00")
    out = pbs.run_hook(HOOK)
    assert out == {"accepted": True, "message": "", "soft_walltime": 1800}


def test_walltime_in_seconds_form(pbs, db, configure):
    configure(dsn=db)
    queuejob(pbs, walltime="86400")  # str(pbs.duration) is "86400": the hook must use int()
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY


def test_dry_run_logs_and_sets_nothing(pbs, db, configure):
    configure(dsn=db, dry_run=True)
    ev = queuejob(pbs)
    assert pbs.run_hook(HOOK)["soft_walltime"] is None
    assert "soft_walltime" not in ev.job.Resource_List.hook_set
    assert any(f"would set v3 soft_walltime={ALICE_DAY} s" in m for m in debug_lines(pbs))


@pytest.mark.parametrize(
    "config,requestor,queue,expected",
    [
        ({"users_deny": ["alice"]}, "alice", "workq", None),
        ({"users_allow": ["bob"]}, "alice", "workq", None),
        ({"users_allow": ["alice"]}, "alice", "workq", ALICE_DAY),
        ({"queues_deny": ["workq"]}, "alice", "workq", None),
        ({"queues_allow": ["long"]}, "alice", "workq", None),
        ({"queues_allow": ["workq"]}, "alice", "workq", ALICE_DAY),
    ],
)
def test_allow_and_deny_lists(pbs, db, configure, config, requestor, queue, expected):
    configure(dsn=db, **config)
    queuejob(pbs, requestor=requestor, queue=queue)
    out = pbs.run_hook(HOOK)
    assert out["accepted"] and out["soft_walltime"] == expected


def _fails_open(pbs, bound_s):
    """Run a queuejob; it must be accepted unchanged within bound_s with one warning line."""
    ev = queuejob(pbs)
    start = time.monotonic()
    out = pbs.run_hook(HOOK)
    elapsed = time.monotonic() - start
    assert out == {"accepted": True, "message": "", "soft_walltime": None}
    assert ev.accepted is True
    assert ev.job.Resource_List[MARK] is None
    (line,) = warnings(pbs)
    assert line.startswith("softwalltime: job left unchanged after"), line
    assert "s3cret" not in line
    assert elapsed < bound_s, elapsed
    return line


def test_database_down_fails_open(pbs, configure):
    dsn = f"postgresql://hook:s3cret@127.0.0.1:{closed_port()}/softwalltime"
    configure(dsn=dsn, connect_timeout_s=0.3, statement_timeout_ms=100)
    line = _fails_open(pbs, 0.3)
    assert "refused" in line and "***" in line


def test_database_hanging_fails_open_within_the_bound(pbs, configure):
    server = HangingServer()
    try:
        configure(dsn=server.dsn, connect_timeout_s=0.3, statement_timeout_ms=100)
        line = _fails_open(pbs, 0.3 + 0.1 + lookup.STATEMENT_GRACE_S + 0.2)
    finally:
        server.close()
    assert "timed out" in line


def test_statement_timeout_fails_open(pbs, db, configure):
    configure(dsn=db, connect_timeout_s=0.5, statement_timeout_ms=100)
    locker = psycopg2.connect(db)
    try:
        with locker.cursor() as cur:
            cur.execute("LOCK TABLE finished_jobs IN ACCESS EXCLUSIVE MODE")
            line = _fails_open(pbs, 0.5 + 0.1 + lookup.STATEMENT_GRACE_S + 0.2)
    finally:
        locker.rollback()
        locker.close()
    assert "statement timeout" in line


def test_quotes_and_semicolons_in_user_and_job_names(pbs, db, configure):
    nasty = "o'neil\";DROP TABLE finished_jobs;--"
    add_jobs(db, nasty, [(H, 2 * H, 100)], start_seq=90)
    configure(dsn=db)
    ev = queuejob(pbs, requestor=nasty)
    ev.job.Job_Name = "a'b\";c;DROP TABLE x"
    assert pbs.run_hook(HOOK)["soft_walltime"] == DAY // 2 + 900
    assert warnings(pbs) == []
    conn = psycopg2.connect(db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM finished_jobs")
            assert cur.fetchone()[0] == len(ALICE) + 1
    finally:
        conn.close()


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"predictor": "v9"}'])
def test_bad_config_fails_open(pbs, configure, content):
    path = configure()
    path.write_text(content)
    _fails_open(pbs, 1.0)


def test_no_config_and_no_dsn_fails_open(pbs, monkeypatch):
    # no x-config imported: pbs.hook_config_filename is None, and no /etc file here
    monkeypatch.setattr("softwalltime.core.config.DEFAULT_CONFIG_FILE", "/nonexistent/sw.json")
    line = _fails_open(pbs, 1.0)
    assert "no database given" in line


def test_connection_is_reused_across_events(pbs, db, configure):
    configure(dsn=db)
    queuejob(pbs)
    pbs.run_hook(HOOK)
    first = STATE.conn
    queuejob(pbs)
    pbs.run_hook(HOOK)
    assert first is not None and STATE.conn is first
    handlers = [h for h in logging.getLogger("softwalltime").handlers if h.get_name()]
    assert len(handlers) == 1  # one forwarding handler, not one per event


def test_system_exit_and_alarm_are_not_swallowed(pbs, db, configure, monkeypatch):
    configure(dsn=db)

    def reject(*args, **kwargs):
        pbs.event().reject("rejected on purpose")

    monkeypatch.setattr("softwalltime.core.decide.decide", reject)
    queuejob(pbs)
    assert pbs.run_hook(HOOK) == {
        "accepted": False,
        "message": "rejected on purpose",
        "soft_walltime": None,
    }

    def alarm(*args, **kwargs):
        raise KeyboardInterrupt  # how PBS's hook alarm surfaces in Python

    monkeypatch.setattr("softwalltime.core.decide.decide", alarm)
    queuejob(pbs)
    out = pbs.run_hook(HOOK)
    assert out["accepted"] is False and "KeyboardInterrupt" in out["message"]


def test_hook_file_is_small_and_catches_only_exception():
    text = Path(HOOK).read_text()
    # it reads the event, calls the library, and keeps its modules current (what cannot
    # live in the library: it decides whether the library itself is stale)
    assert len(text.splitlines()) <= 100
    assert "except:" not in text and "BaseException" not in text.replace("never BaseException", "")


def test_user_lowers_walltime_below_our_soft_walltime(pbs, db, configure):
    """The real server refuses a user's qalter of walltime below soft_walltime (issue 8):
    the hook predicts again for the new walltime in the same event, so the qalter passes."""
    configure(dsn=db)
    ev = modifyjob(pbs, old_soft="01:15:00", mark="4500", walltime="00:30:00")
    out = pbs.run_hook(HOOK)
    assert out["accepted"], out
    assert out["soft_walltime"] == 30 * 60 // 4 + 900  # v3: alice's ratio 0.25 x 30 min + 900
    assert ev.job.Resource_List[MARK] == out["soft_walltime"]
    assert any("modifyjob user='alice'" in line and "set v3" in line for line in debug_lines(pbs))


def test_user_raises_walltime_gets_a_fresh_prediction(pbs, db, configure):
    configure(dsn=db)
    modifyjob(pbs, old_soft="01:15:00", mark="4500", walltime="48:00:00")
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY * 2 - 900


def test_managers_soft_walltime_is_kept_at_modifyjob(pbs, db, configure):
    configure(dsn=db)
    # no mark: a manager set it (qalter -l soft_walltime as root)
    modifyjob(pbs, old_soft="02:00:00", walltime="05:00:00")
    out = pbs.run_hook(HOOK)
    assert out == {"accepted": True, "message": "", "soft_walltime": 2 * H}
    # a manager setting walltime and soft_walltime in one qalter: theirs, even with our mark
    modifyjob(pbs, requestor="root", old_soft="01:15:00", mark="4500",
              walltime="05:00:00", soft_walltime="03:00:00")  # fmt: skip
    assert pbs.run_hook(HOOK)["soft_walltime"] == 3 * H


def test_other_alterations_change_nothing(pbs, db, configure):
    configure(dsn=db)
    ev = modifyjob(pbs, old_soft="01:15:00", mark="4500")  # e.g. qalter -N newname
    out = pbs.run_hook(HOOK)
    assert out == {"accepted": True, "message": "", "soft_walltime": 4500}
    assert "soft_walltime" not in ev.job.Resource_List.hook_set
    assert pbs.logged == []


def test_a_burst_of_one_users_jobs_reads_the_history_once(pbs, db, configure):
    configure(dsn=db)
    for _ in range(3):
        queuejob(pbs)
        assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY
    # kept: a change that bypasses the counter's trigger (triggers off) is not seen...
    _delete_uncounted(db, "alice")
    queuejob(pbs)
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY
    # ...and without the cache it is
    configure(dsn=db, history_cache_entries=0)
    queuejob(pbs)
    assert pbs.run_hook(HOOK)["soft_walltime"] == DAY


def test_the_decision_line_is_one_line_with_the_time(pbs, db, configure):
    configure(dsn=db)
    queuejob(pbs, requestor="al\nice")
    pbs.run_hook(HOOK)
    (line,) = [m for m in debug_lines(pbs) if m.startswith("softwalltime: queuejob")]
    assert (
        "\n" not in line
        and line.endswith(" ms]")
        and line.startswith("softwalltime: queuejob user='al\\nice'")
    )
    assert hooklog.decision_line("a\n  b", time.monotonic()).startswith("softwalltime: a b [")


def test_forwarding_is_set_again_when_its_handler_was_removed(pbs):
    def logmsg(level, msg):
        pass

    logger = hooklog.forward_logging(logmsg, 1, 2, 3)
    (handler,) = [h for h in logger.handlers if h.get_name() == hooklog.HANDLER_NAME]
    assert hooklog.forward_logging(logmsg, 1, 2, 3) is logger and handler in logger.handlers
    logger.removeHandler(handler)
    hooklog.forward_logging(logmsg, 1, 2, 3)
    assert [h.get_name() for h in logger.handlers].count(hooklog.HANDLER_NAME) == 1
    hooklog.forward_logging(logmsg, 1, 2, 4)  # another route replaces it
    (other,) = [h for h in logger.handlers if h.get_name() == hooklog.HANDLER_NAME]
    assert other is not handler and other.routes_to(logmsg, 1, 2, 4)


def test_no_event_makes_the_server_log_the_users_environment(pbs, db, configure):
    """pbs_server logs a whole Variable_List when a hook sets any entry of it (issue 16: a
    -v value in server_logs, mode 0644); the hook's mark is a resource, logged alone."""
    configure(dsn=db, history_recheck_ms=0)
    secret = {"PBS_O_HOME": "/home/alice", "MY_TOKEN": "hunter2secret"}
    ev = pbs.new_event(pbs.QUEUEJOB, "alice", pbs.job({"walltime": "24:00:00"}, variables=secret))
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY
    assert pbs.server_log == [
        f"'softwalltime' hook set job's Resource_List.soft_walltime = {ALICE_DAY}",
        f"'softwalltime' hook set job's Resource_List.{MARK} = {ALICE_DAY}",
    ]
    assert ev.job.Variable_List == secret
    add_jobs(db, "alice", [(3 * H, 4 * H, 400)], start_seq=50)  # runjob predicts anew
    runjob(pbs, soft_walltime=ALICE_DAY, variables=dict(secret), **{MARK: ALICE_DAY})
    assert pbs.run_hook(HOOK)["soft_walltime"] == 3 * DAY // 4 + 900
    runjob_log = list(pbs.server_log)
    modifyjob(pbs, old_soft="01:15:00", mark=4500, walltime="00:30:00")  # has MY_TOKEN too
    assert pbs.run_hook(HOOK)["soft_walltime"] == 1800  # 0.75 x 30 min + 900, capped
    for lines in (runjob_log, pbs.server_log):
        assert len(lines) == 2 and all("hunter2" not in line for line in lines), lines


def test_without_the_mark_resource_the_value_is_set_with_a_warning(pbs, db, configure):
    configure(dsn=db)
    pbs.undefine_resource(MARK)  # an install older than the resource, or deleted by hand
    queuejob(pbs)
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY
    (line,) = warnings(pbs)
    assert "not marked" in line and f"resource {MARK}" in line and "hooks install" in line
    # at runjob such a value reads as a manager's: kept
    runjob(pbs, soft_walltime=ALICE_DAY)
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY


def _flood(dsn, channel, stop, counts, index):
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    with conn.cursor() as cur:
        while not stop.is_set():
            cur.execute(f"NOTIFY {channel}")
            counts[index] += 1
    conn.close()


def test_a_notify_flood_changes_nothing_for_the_hook(pbs, db, configure):
    """NOTIFY needs no privilege (issue 16: two sessions flooding the channel 0.3 listened
    to made events take 2 to 30 s and PBS rejected jobs). For 60 s two sessions flood the
    old channel while the hook's connection sits idle between events (until the flooders
    sent 30,000 more messages): each event ends within its bound, predicts, and keeps using
    its kept lookups; the history's counter (which no such role can move) is what counts."""
    import threading

    configure(dsn=db)
    queuejob(pbs)
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY
    stop, counts = threading.Event(), [0, 0]
    flooders = [
        threading.Thread(target=_flood, args=(db, "softwalltime_history", stop, counts, i))
        for i in range(2)
    ]
    for t in flooders:
        t.start()
    bound = 1.0 + 0.25 + lookup.STATEMENT_GRACE_S
    slowest, events = 0.0, 0
    end = time.monotonic() + 60
    try:
        while time.monotonic() < end:
            target = sum(counts) + 30_000
            while sum(counts) < target and time.monotonic() < end:
                stop.wait(0.01)  # idle between events while the flood goes on
            queuejob(pbs)
            start = time.monotonic()
            out = pbs.run_hook(HOOK)
            slowest = max(slowest, time.monotonic() - start)
            events += 1
            assert out == {"accepted": True, "message": "", "soft_walltime": ALICE_DAY}
            assert warnings(pbs) == []
    finally:
        stop.set()
        for t in flooders:
            t.join()
    assert events >= 3 and sum(counts) >= 90_000, (events, counts)
    assert slowest < bound, slowest
    # the lookups were kept all along: a change that bypasses the counter is not seen
    _delete_uncounted(db, "alice")
    queuejob(pbs)
    assert pbs.run_hook(HOOK)["soft_walltime"] == ALICE_DAY
