"""Refresh's decisions without PBS: qstat JSON, the mark, thresholds, plans, lock, summary.
(The real server: tests/pbs/test_refresh_real.py.)"""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_runtime import need_runtime, skip_or_fail

from softwalltime.core.config import load_settings
from softwalltime.pbsserver import refresh as r
from softwalltime.pbsserver.commands import Pbs, PbsError, parse_qstat_json, read_pbs_conf

H = 3600

# Recorded from OpenPBS 23.06.06 (`qstat -f -F json`, trimmed): the hook's mark is the custom
# resource softwalltime_set (type long), printed as a JSON number; a -v variable of the user
# that looks like the 0.3 mark (SOFTWALLTIME_SET in Variable_List) means nothing; times are
# local dates, as qstat prints them (refresh used to read only epoch numbers, so every real
# job was "queued since 0" and the oldest predictions did not go first).
QSTAT = """{"timestamp":1795919601,"pbs_version":"23.06.06","pbs_server":"pbshost","Jobs":{
"70.pbshost":{"Job_Name":"STDIN","Job_Owner":"alice@pbshost","job_state":"Q","queue":"workq",
 "qtime":"Sun Nov 29 02:31:40 2026","ctime":"Sun Nov 29 02:31:40 2026",
 "Resource_List":{"ncpus":1,"nodect":1,"select":"1:ncpus=1","soft_walltime":"02:45:00",
  "walltime":"10:00:00","softwalltime_set":9900},
 "euser":"alice","Variable_List":{"PBS_O_HOME":"/home/alice"}},
"71.pbshost":{"Job_Owner":"alice@pbshost","job_state":"R","queue":"workq",
 "Resource_List":{"walltime":"00:10:00"}},
"72.pbshost":{"Job_Owner":"bob@pbshost","job_state":"H","queue":"workq",
 "qtime":"Sun Nov 29 02:30:00 2026",
 "Resource_List":{"soft_walltime":"05:00:00","walltime":"10:00:00","softwalltime_set":9900},
 "Variable_List":{"SOFTWALLTIME_SET":18000}}}}"""


def settings(**over):
    return load_settings(None, environ={}, overrides={"dsn": "postgresql:///x", **over})


def history(rows):
    def fetch(user, limit, with_walltime_only):
        return rows.get(user, [])[:limit]

    return fetch


def jobs():
    return {k: r.job_from_qstat(k, v) for k, v in parse_qstat_json(QSTAT).items()}


def test_job_from_recorded_qstat():
    j = jobs()
    ours = j["70.pbshost"]
    assert (ours.user, ours.queue, ours.state) == ("alice", "workq", "Q")
    assert (ours.walltime, ours.walltime_s, ours.soft_s, ours.mark) == (
        "10:00:00",
        10 * H,
        9900,
        "9900",
    )
    assert r.is_ours(ours)
    # user from Job_Owner when euser is missing; a manager's value does not match the mark
    assert j["72.pbshost"].user == "bob" and not r.is_ours(j["72.pbshost"])
    assert not r.is_ours(j["71.pbshost"])
    # qtime in this process's zone, whatever it is; none at all: 0 (sorted first)
    local = time.mktime(time.strptime("Sun Nov 29 02:31:40 2026", "%a %b %d %H:%M:%S %Y"))
    assert ours.queued_since == int(local)
    assert j["72.pbshost"].queued_since == int(local) - 100
    assert j["71.pbshost"].queued_since == 0


def test_qstat_output_that_is_not_json_is_one_error():
    with pytest.raises(PbsError, match="not JSON"):
        parse_qstat_json("qstat: Unknown Job Id")
    assert parse_qstat_json('{"pbs_version":"23.06.06"}') == {}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (9900, 18900, True),
        (9900, 10800, False),  # 900 s > 300 s but only 9 %
        (9900, 9000, False),
        (1000, 1200, False),  # 20 % but only 200 s
        (1000, 1400, True),
        (20000, 17000, True),  # shrinking counts too
    ],
)
def test_threshold_needs_both_percent_and_seconds(old, new, expected):
    assert r.significant(old, new, 10, 300) is expected


def test_plans():
    j = jobs()
    s = settings()
    fetch = history({"alice": [(5 * H, 10 * H), (H, 4 * H)], "bob": [(H, 2 * H)]})
    plan = r.plan_job(j["70.pbshost"], s, fetch)
    assert (plan.action, plan.new_s) == ("change", 5 * H + 900)
    assert r.plan_job(j["71.pbshost"], s, fetch).reason == "not queued"
    assert r.plan_job(j["72.pbshost"], s, fetch).reason == "set by a manager"
    # same history as at qsub: unchanged
    same = history({"alice": [(H, 4 * H), (2 * H, 10 * H)]})
    assert r.plan_job(j["70.pbshost"], s, same).action == "unchanged"
    # a move below the thresholds: unchanged
    small = r.plan_job(j["70.pbshost"], settings(refresh_min_change_pct=100), fetch)
    assert (small.action, small.reason) == ("unchanged", "below threshold")
    # the user's history is gone: the walltime, as the hook would set it
    assert r.plan_job(j["70.pbshost"], s, history({})).new_s == 10 * H
    assert r.plan_job(j["70.pbshost"], settings(users_deny=["alice"]), fetch).reason == (
        "user or queue lists"
    )


def test_never_above_walltime_and_never_shrink_to_fit():
    attrs = json.loads(QSTAT)["Jobs"]["70.pbshost"]
    attrs["Resource_List"]["walltime"] = "04:00:00"
    capped = r.plan_job(
        r.job_from_qstat("1.x", attrs), settings(), history({"alice": [(10 * H, 10 * H)]})
    )
    assert (capped.action, capped.new_s) == ("change", 4 * H)
    attrs["Resource_List"]["min_walltime"] = "01:00:00"
    assert r.plan_job(r.job_from_qstat("1.x", attrs), settings(), history({})).reason == (
        "shrink-to-fit"
    )


def test_summary_line():
    s = r.Summary(seen=5, changed=2, unchanged=1, errors=1, elapsed_s=0.25)
    s.skipped.update({"set by a manager": 1, "no prediction": 1})
    assert s.line() == (
        "refresh: 5 queued jobs seen, 2 changed, 1 unchanged, 2 skipped "
        "(no prediction 1, set by a manager 1), 1 errors in 0.2 s"
    )


def test_qmgr_hook_listing():
    text = textwrap.dedent("""\
        Hook softwalltime
            type = site
            enabled = true
            event = queuejob,modifyjob,runjob
            alarm = 5
            order = 1
        """)
    hook = r.parse_qmgr_hook(text)
    assert hook["enabled"] == "true" and hook["event"] == "queuejob,modifyjob,runjob"
    assert r.parse_qmgr_hook("") == {}


def test_qmgr_listing_joins_the_lines_qmgr_folds():
    # qmgr 23.06's own output for a long operators list (tab-indented continuation lines)
    text = (
        "Server pbshost\n    operators = aaaa@pbshost,\n\tbbbb@pbshost,\n\tcccc@pbshost\n"
        "    scheduling = True\n\n"
    )
    assert r.parse_qmgr_hook(text) == {
        "operators": "aaaa@pbshost,bbbb@pbshost,cccc@pbshost",
        "scheduling": "True",
    }


def test_lock_is_exclusive_across_processes(tmp_path):
    path = str(tmp_path / "lock")
    with r.RunLock(path):
        other = subprocess.run(
            [
                sys.executable,
                "-c",
                f"from softwalltime.pbsserver import refresh as r\nwith r.RunLock({path!r}): pass",
            ],  # fmt: skip
            capture_output=True,
            text=True,
            check=False,
        )
        assert other.returncode == 1 and "another refresh holds" in other.stderr
    with r.RunLock(path):  # released
        pass


def test_lock_never_follows_a_symlink_nor_truncates_its_target(tmp_path):
    """Issue 32: a user's symlink at the lock path made root's refresh truncate any file
    (a 0600 root file became "28657"). The lock is opened with O_NOFOLLOW now."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o755)
    target = tmp_path / "shadow"
    target.write_text("root's secret\n")
    target.chmod(0o600)
    lock = folder / "refresh.lock"
    lock.symlink_to(target)
    with pytest.raises(r.RefreshError) as caught:
        with r.RunLock(str(lock)):
            pass
    assert str(caught.value) == (
        f"cannot open lock file {lock}: it is a symlink or not a regular file"
    )
    assert target.read_text() == "root's secret\n" and lock.is_symlink()


def test_lock_refuses_a_folder_others_may_write(tmp_path):
    """Issue 32: in world-writable /run/lock any user could plant the lock file (and hold its
    flock to stop every refresh). A folder writable by its group or others, or owned by
    another user than root or this one, is refused before anything is opened."""
    folder = tmp_path / "lock"
    folder.mkdir()
    for mode in (0o1777, 0o775):
        folder.chmod(mode)
        with pytest.raises(r.RefreshError) as caught:
            with r.RunLock(str(folder / "refresh.lock")):
                pass
        assert str(caught.value) == (
            f"lock folder {folder} is writable by its group or others (mode {mode:04o});"
            " use a folder only root or this user may write (--lock-file)"
        )
        assert list(folder.iterdir()) == []
    folder.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(folder, 4242, 4242)
        with pytest.raises(r.RefreshError, match=f"lock folder {folder} belongs to uid 4242"):
            with r.RunLock(str(folder / "refresh.lock")):
                pass
        os.chown(folder, 0, 0)
    with r.RunLock(str(folder / "refresh.lock")) as held:
        assert os.read(held.fd, 64) == f"{os.getpid()}\n".encode()


def test_lock_folder_is_made_when_missing_and_default_is_private(tmp_path):
    """The default is in /run/softwalltime (the unit's RuntimeDirectory=), not /run/lock;
    run by hand, refresh makes the folder, 0755 at most."""
    assert r.DEFAULT_LOCK == "/run/softwalltime/refresh.lock"
    folder = tmp_path / "softwalltime"
    with r.RunLock(str(folder / "refresh.lock")):
        assert folder.stat().st_mode & 0o777 == 0o755 & ~_umask()


@pytest.fixture()
def timer_user() -> Iterator[tuple[str, Path]]:
    """A system user of this test only, standing for the packages' ``softwalltime``, and its
    lock folder as the packages make it (owned by the user, 0750), in a folder it may enter."""
    if os.geteuid() != 0:
        skip_or_fail("needs root (useradd, runuser)", "CI runs as root")
    name = f"swtlock{os.getpid()}"
    subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", name], check=True)
    top = Path(tempfile.mkdtemp(prefix="swt-lock-"))
    try:
        top.chmod(0o711)
        folder = top / "softwalltime"
        folder.mkdir(mode=0o750)
        entry = pwd.getpwnam(name)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        yield name, folder
    finally:
        subprocess.run(["rm", "-rf", str(top)], check=True)
        subprocess.run(["userdel", name], check=False)


# One run of refresh's lock, as root or as the timer's user (the packages' user named so).
HOLD = (
    "import os, sys\n"
    "from softwalltime.pbsserver import refresh as r\n"
    "r.SERVICE_USER = sys.argv[2]\n"
    "with r.RunLock(sys.argv[1]):\n"
    "    print(os.getpid())\n"
)


# The system's Python: the user may not enter root's home, where the tests' may live.
SYSTEM_PYTHON = "/usr/bin/python3"


def _lock_run(lock: Path, user: str, as_user: bool) -> tuple[int, str, str]:
    need_runtime(SYSTEM_PYTHON, "refresh's lock as another user than root")
    argv = [SYSTEM_PYTHON, "-c", HOLD, str(lock), user]
    proc = subprocess.run(
        ["runuser", "-u", user, "--", *argv] if as_user else argv,
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
        env=dict(os.environ, PYTHONPATH=str(Path(r.__file__).resolve().parents[2])),
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("root_first", [True, False])
def test_root_and_the_timers_user_share_the_lock_whoever_runs_first(timer_user, root_first):
    """Issue 50 item 3: a root refresh left /run/softwalltime/refresh.lock owned by root,
    0644, and the timer's run then failed: "cannot open lock file ...: Permission denied"."""
    user, folder = timer_user
    lock = folder / "refresh.lock"
    uid = pwd.getpwnam(user).pw_uid
    for as_user in (not root_first, root_first):
        code, out, err = _lock_run(lock, user, as_user)
        assert (code, err) == (0, ""), (as_user, err)
        assert lock.read_text() == out  # each run wrote its pid
        assert (lock.stat().st_uid, lock.stat().st_gid) == (uid, folder.stat().st_gid)


def test_a_stale_root_lock_is_still_taken_and_still_excludes(timer_user):
    """A root-owned 0644 lock (a run by hand of an older version) already there: the timer's
    run takes it read-only; while root holds it, the timer's run is refused, not let in."""
    user, folder = timer_user
    lock = folder / "refresh.lock"
    lock.write_text("12345\n")
    lock.chmod(0o644)
    assert lock.stat().st_uid == 0
    code, out, err = _lock_run(lock, user, as_user=True)
    assert (code, err) == (0, "") and out.strip().isdigit()
    assert lock.read_text() == "12345\n"  # read-only: its pid not written
    with open(lock) as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a root run holding it
        code, out, err = _lock_run(lock, user, as_user=True)
    assert (code, out) == (1, "")
    assert f"another refresh holds {lock} (pid 12345); nothing done" in err
    code, out, err = _lock_run(lock, user, as_user=False)  # root's next run gives it back
    assert (code, err) == (0, "") and lock.stat().st_uid == pwd.getpwnam(user).pw_uid
    assert _lock_run(lock, user, as_user=True)[0] == 0


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_pbs_conf_and_command_prefix(tmp_path):
    conf = tmp_path / "pbs.conf"
    conf.write_text("PBS_EXEC=/opt/pbs2\nPBS_HOME=/var/spool/pbs2\n# comment\n")
    pbs = Pbs.from_settings(settings(pbs_command_prefix=["/usr/bin/env"]), read_pbs_conf(str(conf)))
    assert pbs.argv("qstat", "-B") == ["/usr/bin/env", "/opt/pbs2/bin/qstat", "-B"]
    assert pbs.home == "/var/spool/pbs2"
    with pytest.raises(PbsError, match="No such file"):
        pbs.check("qstat", "-B")  # env: /opt/pbs2/bin/qstat: No such file or directory
    assert read_pbs_conf(str(tmp_path / "missing")) == {}


def run_cli(capsys, tmp_path, *args):
    from softwalltime.cli import main

    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"pbs_exec": str(tmp_path / "nopbs")}))
    code = main(["--config", str(cfg), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_exit_2_when_it_cannot_run(capsys, tmp_path):
    lock = str(tmp_path / "lock")
    code, out, err = run_cli(capsys, tmp_path, "refresh", "--lock-file", lock)
    assert code == 2 and out == ""
    assert err == (
        f"softwalltime refresh: error: {tmp_path}/nopbs/bin/qmgr: not found"
        " (set pbs_exec or PBS_EXEC in /etc/pbs.conf)\n"
    )
    with r.RunLock(lock):
        code, out, err = run_cli(capsys, tmp_path, "refresh", "--lock-file", lock)
    assert code == 2 and err.startswith(
        f"softwalltime refresh: error: another refresh holds {lock}"
    )


def recorded_pbs(tmp_path, jobs_json: str) -> Pbs:
    """A PBS_EXEC whose qstat prints recorded output (no server needed)."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "qstat.json").write_text(jobs_json)
    qstat = tmp_path / "bin" / "qstat"
    qstat.write_text(f"#!/bin/sh\ncat {tmp_path / 'qstat.json'}\n")
    qstat.chmod(0o755)
    return Pbs(exec_dir=str(tmp_path))


def test_a_pass_is_bounded_by_changes_and_time(tmp_path):
    data = json.loads(QSTAT)
    for n in range(3):  # three more of alice's jobs, queued earlier than 70
        job = json.loads(json.dumps(data["Jobs"]["70.pbshost"]))
        job["qtime"] = 1795919000 + n
        data["Jobs"][f"{60 + n}.pbshost"] = job
    pbs = recorded_pbs(tmp_path, json.dumps(data))
    fetch = history({"alice": [(5 * H, 10 * H)]})
    lines: list[str] = []
    summary = r.refresh(pbs, settings(), dry_run=True, max_changes=2, fetch=fetch, out=lines.append)
    assert summary.line().startswith(
        "refresh: 5 queued jobs seen, 2 would change, 0 unchanged, 3 skipped"
        " (max changes 3), 0 errors"
    )
    assert [x.split()[0] for x in lines] == ["60.pbshost", "61.pbshost"]  # the oldest first
    summary = r.refresh(pbs, settings(), dry_run=True, time_budget_s=0, fetch=fetch)
    assert (summary.changed, dict(summary.skipped)) == (0, {"time budget": 5})


def test_alter_wait_covers_the_hooks_trust_in_its_last_counter_read():
    """Issue 32 item 13: the hook trusts a read of the history counter for
    history_recheck_ms, so a modifyjob fired less than that after an ingest's commit could
    answer from the old history. Refresh waits that long after its own last read."""
    margin = r.RECHECK_MARGIN_S
    assert r.alter_wait_s(100.0, 1000, now=100.2) == pytest.approx(0.8 + margin)
    assert r.alter_wait_s(100.0, 1000, now=100.0) == pytest.approx(1.0 + margin)
    assert r.alter_wait_s(100.0, 1000, now=101.5) == 0.0  # planning took longer
    assert r.alter_wait_s(100.0, 0, now=100.0) == 0.0  # the hook reads it every event
    assert r.alter_wait_s(None, 1000, now=100.0) == 0.0  # no history read
    assert r.alter_wait_s(100.0, 60000, now=100.0) == pytest.approx(60.0 + margin)


def test_refresh_waits_out_the_recheck_window_before_its_first_qalter(tmp_path):
    pbs = recorded_pbs(tmp_path, QSTAT)
    calls = tmp_path / "qalter.calls"
    qalter = tmp_path / "bin" / "qalter"
    qalter.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    qalter.chmod(0o755)
    fetch = history({"alice": [(5 * H, 10 * H)]})
    waits: list[tuple[float, bool]] = []

    def sleep(seconds: float) -> None:  # records instead of sleeping
        waits.append((seconds, calls.exists()))

    errors: list[str] = []
    elapsed = {}
    for recheck_ms in (60000, 0):
        started = time.monotonic()
        cfg = settings(history_recheck_ms=recheck_ms)
        r.refresh(pbs, cfg, fetch=fetch, sleep=sleep, out=errors.append, err=errors.append)
        elapsed[recheck_ms] = time.monotonic() - started
        assert calls.read_text().split() == ["-l", "walltime=10:00:00", "70.pbshost"]
        calls.unlink()
    # one wait, before the qalter, of 60 s (+ the margin) less the time since the last read
    (wait, altered_first), *rest = waits
    assert rest == [] and not altered_first
    assert 60.0 + r.RECHECK_MARGIN_S - elapsed[60000] < wait <= 60.0 + r.RECHECK_MARGIN_S
    # and it never passes the time budget
    r.refresh(
        pbs, settings(history_recheck_ms=60000), time_budget_s=5, fetch=fetch, sleep=sleep,
        out=errors.append, err=errors.append,
    )  # fmt: skip
    assert waits[-1][0] <= 5


# ---- the sort rank (setting rank, issue 17) ----


class BothHistory:
    """History as the hook reads it with the rank on: ``both`` gives the predictor's rows
    and the rank's (runtime, walltime, ncpus); the plain call for the rank off."""

    def __init__(self, rows):
        self.rows = rows

    def __call__(self, user, limit, with_walltime_only):
        return [(run, wall) for run, wall, _n in self.rows.get(user, [])][:limit]

    def both(self, user, limit, with_walltime_only):
        rows = self.rows.get(user, [])
        return [(run, wall) for run, wall, _n in rows][:limit], rows[:100]


def ranked_job(rank=None, soft="02:45:00", mark=9900, ncpus=1):
    attrs = json.loads(QSTAT)["Jobs"]["70.pbshost"]
    res = attrs["Resource_List"]
    res.update(soft_walltime=soft, softwalltime_set=mark, ncpus=ncpus)
    if rank is not None:
        res["softwalltime_rank"] = rank
    return r.job_from_qstat("70.pbshost", attrs)


# alice's history as at qsub (v3: 0.25 x 10 h + 900 = 02:45:00); three 10 h 1-cpu jobs
# with these run times: rank 2 h
SAME = BothHistory(
    {"alice": [(H, 4 * H, 1), (9000, 10 * H, 1), (7200, 10 * H, 1), (5400, 10 * H, 1)]}
)


def test_job_from_qstat_reads_the_rank_and_ncpus():
    job = ranked_job(rank=5400, ncpus=8)
    assert (job.rank_s, job.ncpus) == (5400, 8)
    assert jobs()["70.pbshost"].rank_s is None
    # ncpus from the select when Resource_List.ncpus is missing
    attrs = json.loads(QSTAT)["Jobs"]["70.pbshost"]
    del attrs["Resource_List"]["ncpus"]
    attrs["Resource_List"]["select"] = "2:ncpus=4"
    assert r.job_from_qstat("70.pbshost", attrs).ncpus == 8


def test_a_missing_or_moved_rank_is_a_change_of_its_own():
    on = settings(rank="key-mean")
    # the soft walltime did not move; the rank is missing: set
    plan = r.plan_job(ranked_job(), on, SAME)
    assert (plan.action, plan.reason, plan.new_s, plan.new_rank_s) == (
        "change", "rank moved", None, 2 * H,
    )  # fmt: skip
    # the same rank: nothing to do
    assert r.plan_job(ranked_job(rank=2 * H), on, SAME).action == "unchanged"
    # moved by more than both thresholds (10 %, 300 s): set; by less: left
    assert r.plan_job(ranked_job(rank=H), on, SAME).new_rank_s == 2 * H
    small = r.plan_job(ranked_job(rank=2 * H - 299), on, SAME)
    assert (small.action, small.new_rank_s) == ("unchanged", None)
    # rank off: a missing rank is no reason for a qalter
    assert r.plan_job(ranked_job(), settings(), SAME).action == "unchanged"


def test_the_soft_walltime_and_the_rank_move_together():
    on = settings(rank="key-mean")
    newer = BothHistory({"alice": [(5 * H, 10 * H, 1)] * 3})
    plan = r.plan_job(ranked_job(rank=2 * H), on, newer)
    assert (plan.action, plan.new_s, plan.new_rank_s) == ("change", 5 * H + 900, 5 * H)
    assert (
        r._what(plan) == "soft_walltime 02:45:00 -> 05:15:00, softwalltime_rank 7200 s -> 18000 s"
    )


def test_a_managers_soft_walltime_gets_its_rank_refreshed():
    on = settings(rank="key-mean")
    managers = ranked_job(soft="05:00:00", mark=9900)  # the mark does not match: a manager's
    plan = r.plan_job(managers, on, SAME)
    assert (plan.action, plan.new_s, plan.new_rank_s) == ("change", None, 2 * H)
    assert r._what(plan) == "softwalltime_rank unset -> 7200 s"
    assert r.plan_job(ranked_job(rank=2 * H, soft="05:00:00"), on, SAME).reason == (
        "set by a manager"
    )
    assert r.plan_job(managers, settings(), SAME).reason == "set by a manager"


def test_summary_counts_rank_changes_when_the_rank_is_on():
    s = r.Summary(seen=3, changed=2, unchanged=1, ranks=1)
    assert s.line().startswith("refresh: 3 queued jobs seen, 2 changed (1 rank), 1 unchanged")
    s.ranks = 2
    assert "2 changed (2 ranks)," in s.line()


def test_a_dry_run_pass_lists_rank_changes(tmp_path):
    data = json.loads(QSTAT)
    data["Jobs"]["70.pbshost"]["Resource_List"]["softwalltime_rank"] = 600
    pbs = recorded_pbs(tmp_path, json.dumps(data))
    lines: list[str] = []
    on = settings(rank="key-mean")
    summary = r.refresh(pbs, on, dry_run=True, fetch=SAME, out=lines.append)
    # bob's job (a manager's soft walltime, kept) is ranked too: no history, its walltime
    assert lines == [
        "72.pbshost user=bob walltime=10:00:00: softwalltime_rank unset -> 36000 s (dry run)",
        "70.pbshost user=alice walltime=10:00:00: softwalltime_rank 600 s -> 7200 s (dry run)",
    ]
    assert summary.line().startswith("refresh: 2 queued jobs seen, 2 would change (2 ranks),")


@pytest.mark.parametrize(
    ("line", "label"),
    [
        ("runjob user='a' queue='q' walltime=3600 s: leave alone: v3 soft_walltime=1800 s"
         " (max runtime/walltime 0.2500 over 3 jobs; history): unchanged; rank key-mean=700 s"
         " set [0.31 ms]", "same value"),
        ("runjob user='a' queue='q' walltime=3600 s: leave alone: soft_walltime already set to"
         " 1234 s; rank key-mean=700 s unchanged", "soft_walltime set by a manager"),
        ("queuejob user='a' queue='q' walltime=3600 s: leave alone: v3 soft_walltime=1800 s"
         " (...): unchanged", "same value"),
    ],
)  # fmt: skip
def test_leave_labels_with_the_ranks_suffix(line, label):
    # status counts the hook's lines by these labels (status.parse_activity)
    assert r.leave_label(line) == label


def test_summary_json_has_the_keys_help_lists(tmp_path):
    """Issue 33: refresh --json."""
    from softwalltime.cli import refresh as cli_refresh

    data = json.loads(QSTAT)
    data["Jobs"]["70.pbshost"]["Resource_List"]["softwalltime_rank"] = 600
    pbs = recorded_pbs(tmp_path, json.dumps(data))
    lines: list[str] = []
    summary = r.refresh(pbs, settings(rank="key-mean"), dry_run=True, fetch=SAME, out=lines.append)
    found = json.loads(json.dumps(cli_refresh.summary_json(summary, lines)))
    assert list(found) == [k for k, _ in cli_refresh.JSON_KEYS]
    assert (found["seen"], found["changed"], found["ranks"], found["dry_run"]) == (2, 2, 2, True)
    assert found["errors"] == 0 and found["jobs"] == lines and len(lines) == 2


def test_planning_stops_at_its_bounds_before_reading_a_history():
    """refresh's planning part alone: no change allowed, or no time left, skips every job
    (counted by reason) without asking the history."""
    jobs = [r.job_from_qstat(i, a) for i, a in json.loads(QSTAT)["Jobs"].items()]

    def fetch_for(job):
        raise AssertionError(f"{job.job_id}: read")

    for bounds, reason in (((float("inf"), 0), "max changes"), ((0.0, 10), "time budget")):
        summary, shown, errors = r.Summary(dry_run=True), [], []
        plans = r._plan_all(
            jobs, settings(), fetch_for, summary, bounds, shown.append, errors.append
        )
        assert (plans, shown, errors) == ([], [], [])
        assert dict(summary.skipped) == {reason: len(jobs)} and len(jobs) >= 2
