"""Predict queued jobs' soft walltimes again from the current history (``softwalltime refresh``).

A job queued for days keeps the prediction made at ``qsub`` from the history of that day.
Refresh looks at every queued (``Q``) or held (``H``) job whose soft walltime the hook set
(its mark, the custom resource ``softwalltime_set``, equals the value; a manager's value
never matches), predicts again with the hook's own code and configuration, and when the
prediction moved by more than ``refresh_min_change_pct`` % and ``refresh_min_change_s``
seconds, has it applied.

How a value is applied: ``qalter -l walltime=W`` as manager with the job's current walltime
``W`` (so nothing the user asked for changes). That request fires the hook's ``modifyjob``
event, and the hook predicts again and sets ``soft_walltime`` together with its mark, as it
does for a user's ``qalter``. A ``qalter -l soft_walltime=N`` would look like a manager's
value to the hook from then on (never refreshed or re-predicted at runjob again): going
through the hook keeps one writer of the mark. The value is read back afterwards with ``qstat``.

With the hook's ``rank`` on, the job's sort rank (``softwalltime_rank``) is kept fresh the
same way: a rank that moved (by the same thresholds) or is missing has the job altered, and
the hook sets the rank in that ``modifyjob``, whether or not the soft walltime moved. Jobs
whose soft walltime a manager set get their rank refreshed too (the hook keeps the value).

:func:`plan_job` and :func:`significant` are pure; :func:`refresh` talks to PBS.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import pwd
import stat
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Sequence, cast

from ..core import calibrated
from ..core.config import RANK_OFF, Settings
from ..core.decide import MARK_RESOURCE, JobEvent, decide
from ..core.predict import HistoryRow
from ..core.rank import RANK_RESOURCE
from ..errors import ConfigError, DatabaseError, SoftwalltimeError
from ..hook import lookup
from ..units import duration_or_none, format_duration, qstat_time
from .commands import Pbs, PbsError, chunks, exported_settings, parse_qmgr_list

MARK = MARK_RESOURCE  # the hook's mark: a custom resource in Resource_List
QUEUED_STATES = ("Q", "H")
# in a folder only root or the service user may write (the unit's RuntimeDirectory=)
DEFAULT_LOCK = "/run/softwalltime/refresh.lock"
# the root-only step's hand-over (the unit's ExecStartPre=+ writes it, its User= reads it)
DEFAULT_HOOK_FILE = "/run/softwalltime/hook.json"
# the packages' system user: the refresh timer runs as it, in its RuntimeDirectory
SERVICE_USER = "softwalltime"
# after this many database errors in a row the history is unreachable: stop the run
MAX_DB_ERRORS_IN_A_ROW = 5
# job ids per qalter: one alteration costs ~0.1 s on a busy server, so the time budget is
# checked every ~5 s
QALTER_IDS = 50

Fetch = Callable[[str, int, bool], Sequence[HistoryRow]]


class RefreshError(SoftwalltimeError):
    """Refresh could not run at all (exit 2)."""


@dataclass(frozen=True)
class RefreshJob:
    """What refresh needs of one job, from ``qstat -f -F json``."""

    job_id: str
    state: str
    user: str
    queue: str
    walltime: Optional[str]  # as qstat prints it: qalter gets it back unchanged
    walltime_s: Optional[int]
    soft_s: Optional[int]
    mark: Optional[str]
    shrink_to_fit: bool
    queued_since: int
    ncpus: int = 1
    rank_s: Optional[int] = None  # softwalltime_rank


def job_from_qstat(job_id: str, attrs: dict[str, Any]) -> RefreshJob:
    """Build a :class:`RefreshJob` from one entry of qstat's ``Jobs`` object.

    The mark is kept as text of what qstat printed (a number in its JSON).
    """
    res = attrs.get("Resource_List") or {}
    mark = res.get(MARK) if isinstance(res, dict) else None
    user = attrs.get("euser") or str(attrs.get("Job_Owner") or "").split("@")[0]
    walltime = res.get("walltime")
    since = qstat_time(attrs.get("qtime")) or qstat_time(attrs.get("ctime")) or 0
    rank = res.get(RANK_RESOURCE) if isinstance(res, dict) else None
    ncpus = calibrated.ncpus_of({"ncpus": res.get("ncpus"), "select": res.get("select")})
    return RefreshJob(
        job_id=job_id,
        state=str(attrs.get("job_state") or ""),
        user=str(user),
        queue=str(attrs.get("queue") or ""),
        walltime=None if walltime is None else str(walltime),
        walltime_s=duration_or_none(walltime),
        soft_s=duration_or_none(res.get("soft_walltime")),
        mark=None if mark is None else str(mark),
        shrink_to_fit=res.get("min_walltime") is not None,
        queued_since=since,
        ncpus=ncpus,
        rank_s=_long(rank),
    )


def _long(value: Any) -> Optional[int]:
    """A long resource as qstat's JSON prints it (a number), None when unset or not one."""
    try:
        return None if value is None or isinstance(value, bool) else int(str(value))
    except ValueError:
        return None


def is_ours(job: RefreshJob) -> bool:
    """The hook set this job's soft walltime (its mark equals the value)."""
    if job.soft_s is None or job.mark is None:
        return False
    try:
        return int(float(job.mark)) == job.soft_s
    except ValueError:
        return False


def significant(old_s: int, new_s: int, min_change_pct: float, min_change_s: int) -> bool:
    """Whether a move from ``old_s`` to ``new_s`` is worth a ``qalter``.

    It must exceed both thresholds: ``min_change_pct`` % of the old value and
    ``min_change_s`` seconds (for example 10 % and 5 minutes).
    """
    change = abs(new_s - old_s)
    return change > old_s * min_change_pct / 100.0 and change > min_change_s


@dataclass(frozen=True)
class Plan:
    """What to do with one job: ``action`` is ``change``, ``unchanged`` or ``skip``."""

    job: RefreshJob
    action: str
    reason: str
    new_s: Optional[int] = None
    new_rank_s: Optional[int] = None  # the rank that a change sets (None: left as it is)


def leave_label(text: str) -> str:
    """A short label for a decide() "leave alone" reason (its log line), for summaries."""
    why = text.split("leave alone: ", 1)[-1]
    if why.rstrip().endswith(": unchanged") or ": unchanged [" in why or ": unchanged;" in why:
        return "same value"
    for key, label in (
        ("deny list", "user or queue lists"),
        ("allow list", "user or queue lists"),
        ("not a queuejob", "other event"),
        ("no prediction", "no prediction"),
        ("no user", "no user"),
        ("queue not known", "queue not known yet"),
        ("shrink-to-fit", "shrink-to-fit"),
        ("no walltime", "no walltime"),
        ("walltime is not positive", "no walltime"),
        ("already set", "soft_walltime set by a manager"),
        ("runjob_min_wait_s", "waited less than runjob_min_wait_s"),
    ):
        if key in why:
            return label
    return why.split(";")[0].split("(")[0].split("[")[0].strip()


def plan_job(job: RefreshJob, settings: Settings, fetch: Fetch) -> Plan:
    """Decide what refresh does with one job (pure apart from ``fetch``).

    :param settings: the hook's settings, plus the ``refresh_*`` thresholds
    :param fetch: history, as the hook reads it (with ``fetch.both`` when the rank is on);
        its exceptions propagate
    """
    ranking = settings.rank != RANK_OFF
    if job.state not in QUEUED_STATES:
        return Plan(job, "skip", "not queued")
    if job.shrink_to_fit:
        return Plan(job, "skip", "shrink-to-fit")
    if job.soft_s is None:
        return Plan(job, "skip", "no soft_walltime")
    ours = is_ours(job)
    if not ours and not ranking:
        return Plan(job, "skip", "set by a manager")
    if job.walltime_s is None or not job.walltime:
        return Plan(job, "skip", "no walltime")
    by_key = ranking or settings.predictor == calibrated.NAME  # as the hook: ncpus then
    this = JobEvent(
        "modifyjob", job.user, job.queue, job.walltime_s, job.soft_s, ours,
        ncpus=job.ncpus if by_key else None, existing_rank_s=job.rank_s,
    )  # fmt: skip
    decision = decide(this, settings._replace(dry_run=False), fetch)
    # The rank is worth a qalter by the thresholds of the soft walltime: it orders jobs, and
    # a move below both swaps the job only with jobs of nearly the same rank, for a qalter
    # that costs PBS ~80 ms (docs/operate.md); a missing rank is always set.
    rank = decision.computed_rank_s
    new_rank = None
    if rank is not None and (
        job.rank_s is None
        or significant(
            job.rank_s, rank, settings.refresh_min_change_pct, settings.refresh_min_change_s
        )
    ):
        new_rank = rank
    new = decision.soft_walltime_s
    if new is None:
        if new_rank is not None:
            return Plan(job, "change", "rank moved", None, new_rank)
        if not ours:
            return Plan(job, "skip", "set by a manager")
        predicted = decision.prediction.soft_walltime_s if decision.prediction else None
        if predicted is not None:
            return Plan(job, "unchanged", "same prediction", min(predicted, job.walltime_s))
        return Plan(job, "skip", leave_label(decision.reason))
    new = min(new, job.walltime_s)  # decide() caps already; PBS's invariant, kept here too
    if not significant(
        job.soft_s, new, settings.refresh_min_change_pct, settings.refresh_min_change_s
    ):
        if new_rank is not None:
            return Plan(job, "change", "rank moved", None, new_rank)
        return Plan(job, "unchanged", "below threshold", new)
    return Plan(job, "change", "prediction moved", new, new_rank)


@dataclass
class Summary:
    seen: int = 0
    changed: int = 0
    unchanged: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    dry_run: bool = False
    elapsed_s: float = 0.0
    ranks: Optional[int] = None  # jobs whose rank changed (None: the rank is off)

    def line(self) -> str:
        skipped = sum(self.skipped.values())
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items()))
        verb = "would change" if self.dry_run else "changed"
        ranks = "" if self.ranks is None else f" ({self.ranks} rank{'s' * (self.ranks != 1)})"
        return (
            f"refresh: {self.seen} queued jobs seen, {self.changed} {verb}{ranks}, "
            f"{self.unchanged} unchanged, {skipped} skipped"
            + (f" ({reasons})" if reasons else "")
            + f", {self.errors} errors in {self.elapsed_s:.1f} s"
        )


class RunLock:
    """An exclusive, non-blocking ``flock`` on a file: two runs never overlap.

    A file lock rather than a PostgreSQL advisory lock: refresh runs on the PBS server host,
    where the lock must hold whatever database the hook config names, and the kernel drops
    it when the process dies (no stale lock after a crash or ``kill -9``).

    Root and the timer's user share it whoever runs first (issue 50): root gives the file to
    its folder's owner, and a lock another user created is locked read-only (flock needs no
    write access; its pid is then not written).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> RunLock:
        folder = check_lock_folder(os.path.dirname(os.path.abspath(self.path)))
        flags = os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        writable = True
        try:
            try:
                self.fd = os.open(self.path, os.O_RDWR | flags, 0o644)
            except PermissionError:
                # Another user's lock (root's, left by a run by hand or an older version,
                # issue 50): flock needs no write access; only the pid goes unwritten.
                self.fd = os.open(self.path, os.O_RDONLY | flags, 0o644)
                writable = False
        except OSError as err:
            why = "it is a symlink or not a regular file" if err.errno == errno.ELOOP else None
            raise RefreshError(
                f"cannot open lock file {self.path}: {why or err.strerror}"
            ) from None
        st = os.fstat(self.fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(self.fd)
            raise RefreshError(f"cannot open lock file {self.path}: it is not a regular file")
        if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (folder.st_uid, folder.st_gid):
            # The lock belongs to its folder's owner (the timer's user in /run/softwalltime),
            # who may replace it anyway: root's run leaves a lock the timer's run can write.
            os.fchown(self.fd, folder.st_uid, folder.st_gid)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(self.fd)
            raise RefreshError(
                f"another refresh holds {self.path} (pid {holder}); nothing done"
            ) from None
        if writable:
            os.ftruncate(self.fd, 0)  # only once the lock is held
            os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing releases the flock


def _service_uid() -> int:
    """The uid of the packages' user (:data:`SERVICE_USER`; the timer's runs), or 0."""
    try:
        return pwd.getpwnam(SERVICE_USER).pw_uid
    except KeyError:
        return 0


def check_lock_folder(folder: str) -> os.stat_result:
    """Make ``folder`` (0755) if it is missing, then refuse it unless only root, this user or
    the packages' user (whose timer runs refresh) may write it: a lock file in a folder
    others write (``/run/lock``) may be a user's symlink, or a user may hold its flock and
    stop every refresh.

    :returns: the folder's status
    :raises RefreshError: the folder cannot be made, or others may write it
    """
    try:
        os.mkdir(folder, 0o755)
    except FileExistsError:
        pass
    except OSError as err:
        raise RefreshError(f"cannot make lock folder {folder}: {err.strerror}") from None
    st = os.stat(folder)
    if st.st_uid not in (0, os.geteuid(), _service_uid()):
        raise RefreshError(
            f"lock folder {folder} belongs to uid {st.st_uid}, not root, this user or"
            f" {SERVICE_USER};"
            " use a folder only root or this user may write (--lock-file)"
        )
    if st.st_mode & 0o022:
        raise RefreshError(
            f"lock folder {folder} is writable by its group or others"
            f" (mode {stat.S_IMODE(st.st_mode):04o}); use a folder only root or this user"
            " may write (--lock-file)"
        )
    return st


def hook_settings(pbs: Pbs, hook: str, cli: Settings) -> Settings:
    """The hook's configuration as installed (``qmgr -c 'export hook ...'``), with the
    ``refresh_*`` knobs taken from the command's own settings.

    :raises RefreshError: the hook is missing, or its configuration is invalid
    """
    try:
        text = pbs.check("qmgr", "-c", f"export hook {hook} application/x-config default")
    except PbsError as err:
        raise RefreshError(f"cannot read the config of hook {hook!r}: {err}") from None
    return settings_from_export(text, hook, cli)


def settings_from_export(text: str, hook: str, cli: Settings) -> Settings:
    """:func:`hook_settings` from the exported configuration ``text``.

    :raises RefreshError: the configuration is invalid
    """
    try:
        installed = exported_settings(text, "config")
    except ConfigError as err:
        raise RefreshError(f"hook {hook!r} config is invalid: {err}") from None
    keep = {k: getattr(cli, k) for k in cli._fields if k.startswith(("refresh_", "pbs_"))}
    return installed._replace(source=f"hook {hook} config", **keep)


# The root-only step's hand-over (``refresh --export-hook``): PBS shows a hook's listing and
# configuration to root only, so the unit's ``ExecStartPre=+`` writes them to a file of its
# RuntimeDirectory that the unprivileged ``refresh --hook-file`` reads.
MAX_HOOK_FILE = 1 << 20


def export_hook(pbs: Pbs, hook: str, path: str) -> None:
    """Write hook ``hook``'s ``list`` attributes and exported configuration to ``path``
    (JSON; mode 0640, group the folder's: the unit's user reads it). Written to a new file
    in the folder and renamed over ``path``: a symlink there is replaced, never followed.

    :raises RefreshError: PBS cannot be asked, the hook is missing, or the file cannot be written
    """
    try:
        listing = parse_qmgr_hook(pbs.run("qmgr", "-c", f"list hook {hook}").stdout)
        if not listing:
            raise RefreshError(f"hook {hook!r} is not installed")
        config = pbs.check("qmgr", "-c", f"export hook {hook} application/x-config default")
    except PbsError as err:
        raise RefreshError(f"cannot read hook {hook!r}: {err}") from None
    folder = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(folder)
        if st.st_mode & 0o002:
            raise RefreshError(f"folder {folder} is writable by others; refusing to write there")
        fd, tmp = tempfile.mkstemp(prefix=".hook-", dir=folder)
        try:
            os.fchown(fd, -1, st.st_gid)
            os.fchmod(fd, 0o640)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"hook": hook, "list": listing, "config": config}, fh)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as err:
        raise RefreshError(f"cannot write {path}: {err.strerror or err}") from None


def read_hook_file(path: str, hook: str) -> tuple[dict[str, str], str]:
    """The ``list`` attributes and exported configuration :func:`export_hook` wrote.

    :raises RefreshError: the file is missing, too large, not such a file, or of another hook
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_HOOK_FILE + 1)
    except OSError as err:
        raise RefreshError(
            f"cannot read {path}: {err.strerror}"
            " (written as root by 'softwalltime refresh --export-hook')"
        ) from None
    try:
        if len(raw) > MAX_HOOK_FILE:
            raise ValueError(f"over {MAX_HOOK_FILE} bytes")
        data = json.loads(raw.decode("utf-8"))
        listing, config = data["list"], data["config"]
        if not isinstance(listing, dict) or not isinstance(config, str):
            raise ValueError("list or config of the wrong type")
        name = data["hook"]
    except (ValueError, KeyError, TypeError) as err:
        raise RefreshError(f"{path} is not a hook file of refresh --export-hook ({err})") from None
    if name != hook:
        raise RefreshError(f"{path} holds hook {name!r}, not {hook!r} (--hook)")
    return {str(k): str(v) for k, v in listing.items()}, config


def parse_qmgr_hook(text: str) -> dict[str, str]:
    """``qmgr -c 'list hook NAME'`` -> {attribute: value} (empty if the hook is unknown)."""
    return parse_qmgr_list(text)


class _Memo:
    """``fetch`` (and its ``both``, the rank's read) asked once per user and arguments;
    ``last_read``: when the last read ended (``time.monotonic()``), None before any."""

    def __init__(self, fetch: Fetch) -> None:
        self.fetch = fetch
        self.cache: dict[tuple[str, str, int, bool], Any] = {}
        self.last_read: Optional[float] = None

    def __call__(self, user: str, limit: int, with_walltime_only: bool) -> Sequence[HistoryRow]:
        return self._get("rows", user, limit, with_walltime_only)  # type: ignore[no-any-return]

    def both(self, user: str, limit: int, with_walltime_only: bool) -> Any:
        return self._get("both", user, limit, with_walltime_only)

    def _get(self, what: str, user: str, limit: int, with_walltime_only: bool) -> Any:
        key = (what, user, limit, with_walltime_only)
        if key not in self.cache:
            read = self.fetch if what == "rows" else self.fetch.both  # type: ignore[attr-defined]
            self.cache[key] = read(user, limit, with_walltime_only)
            self.last_read = time.monotonic()
        return self.cache[key]


# The hook trusts its last read of the history's change counter for history_recheck_ms
# (hook/lookup.py): a modifyjob that refresh's qalter fires less than that after an
# ingest's commit may still answer from the history before it (seen on the real server:
# 1 run in 3 with ingest and refresh in the same minute). Every commit refresh read came
# before its last read, so once history_recheck_ms (and this margin) has passed since then,
# the hook's next event reads the counter again and predicts from what refresh read.
RECHECK_MARGIN_S = 0.1


def alter_wait_s(last_read: Optional[float], recheck_ms: int, now: float) -> float:
    """Seconds refresh waits before its first qalter: until ``history_recheck_ms`` (plus
    RECHECK_MARGIN_S) after its last history read ended, ``last_read``; 0 without a read,
    with ``recheck_ms`` 0 (the hook reads the counter at every event) or once it has passed.
    Times are ``time.monotonic()`` seconds."""
    if last_read is None or recheck_ms <= 0:
        return 0.0
    return max(0.0, last_read + recheck_ms / 1000.0 + RECHECK_MARGIN_S - now)


def _fmt(seconds: Optional[int]) -> str:
    return "unset" if seconds is None else format_duration(seconds)


def _what(plan: Plan) -> str:
    """What a change does, for ``--dry-run`` and ``--verbose``: the soft walltime's move,
    the rank's (in seconds, as ``qstat`` shows it), or both."""
    parts = []
    if plan.new_s is not None:
        parts.append(f"soft_walltime {_fmt(plan.job.soft_s)} -> {_fmt(plan.new_s)}")
    if plan.new_rank_s is not None:
        old = "unset" if plan.job.rank_s is None else f"{plan.job.rank_s} s"
        parts.append(f"{RANK_RESOURCE} {old} -> {plan.new_rank_s} s")
    return ", ".join(parts)


def refresh(
    pbs: Pbs,
    settings: Settings,
    *,
    dry_run: bool = False,
    time_budget_s: Optional[float] = None,
    max_changes: Optional[int] = None,
    out: Callable[[str], None] = print,
    err: Callable[[str], None] = print,
    fetch: Optional[Fetch] = None,
    verbose: bool = False,
    sleep: Callable[[float], None] = time.sleep,
) -> Summary:
    """One refresh pass over the queued jobs. ``settings`` are the hook's (see
    :func:`hook_settings`). Each error is one line through ``err``; ``out`` gets the
    per-job lines (``--dry-run``, ``--verbose``).

    Long because of its parameters, all keyword-only: the command's options and the tests'
    seams (``out``, ``err``, ``fetch``, ``sleep``).

    :raises RefreshError: PBS cannot be asked for its jobs, or the history is unreachable
    """
    start = time.monotonic()
    budget = settings.refresh_time_budget_s if time_budget_s is None else time_budget_s
    deadline = start + budget
    limit = settings.refresh_max_changes if max_changes is None else max_changes
    summary = Summary(dry_run=dry_run, ranks=None if settings.rank == RANK_OFF else 0)
    if fetch is None:
        _probe_database(settings)
    fetchers: dict[str, _Memo] = {}

    def fetch_for(job: RefreshJob) -> Fetch:
        """History as the hook reads it for this job: with ``history_scope`` ``server``,
        only the jobs of the server in its id (123.pbs01 -> pbs01), as the hook does."""
        server = job.job_id.partition(".")[2]
        if server not in fetchers:
            fetchers[server] = _Memo(fetch or lookup.fetcher(settings, server or None))
        return cast(Fetch, fetchers[server])

    def show(plan: Plan) -> None:
        if dry_run or verbose:
            job = plan.job
            out(f"{job.job_id} user={job.user} walltime={job.walltime}: {_what(plan)}"
                + (" (dry run)" if dry_run else ""))  # fmt: skip

    jobs = _queued_jobs(pbs)
    summary.seen = len(jobs)
    changes = _plan_all(jobs, settings, fetch_for, summary, (deadline, limit), show, err)
    if dry_run:
        summary.changed = len(changes)
        if summary.ranks is not None:
            summary.ranks = sum(1 for p in changes if p.new_rank_s is not None)
    else:
        if changes:
            _wait_for_the_hook(fetchers.values(), settings, deadline, sleep)
        _apply(pbs, changes, deadline, summary, err)
    lookup.close_cached()
    summary.elapsed_s = time.monotonic() - start
    return summary


def _probe_database(settings: Settings) -> None:
    """Connect to the hook's database once, and close (the cached connection first).

    :raises RefreshError: no dsn, or the database cannot be reached
    """
    if not settings.dsn:
        raise RefreshError("the hook config has no dsn")
    try:
        lookup.close_cached()
        probe = lookup.connect(
            settings.dsn, settings.connect_timeout_s, settings.statement_timeout_ms
        )
        probe.close()
    except DatabaseError as error:
        raise RefreshError(str(error)) from None


def _queued_jobs(pbs: Pbs) -> list[RefreshJob]:
    """The queued jobs, the oldest predictions first.

    :raises RefreshError: PBS cannot be asked for its jobs
    """
    try:
        jobs = [
            job_from_qstat(job_id, attrs)
            for job_id, attrs in pbs.jobs().items()
            if isinstance(attrs, dict) and attrs.get("job_state") in QUEUED_STATES
        ]
    except PbsError as error:
        raise RefreshError(str(error)) from None
    jobs.sort(key=lambda j: (j.queued_since, j.job_id))
    return jobs


def _plan_all(
    jobs: list[RefreshJob],
    settings: Settings,
    fetch_for: Callable[[RefreshJob], Fetch],
    summary: Summary,
    bounds: tuple[float, int],
    show: Callable[[Plan], None],
    err: Callable[[str], None],
) -> list[Plan]:
    """The changes the jobs need, in order, until the deadline or the most changes
    (``bounds``); the rest counted in ``summary`` (unchanged, skipped, errors). ``show``
    gets each change as it is planned.
    """
    deadline, limit = bounds
    changes: list[Plan] = []
    db_errors = 0
    for index, job in enumerate(jobs):
        if time.monotonic() >= deadline:
            summary.skipped["time budget"] += len(jobs) - index
            break
        if len(changes) >= limit:
            summary.skipped["max changes"] += len(jobs) - index
            break
        try:
            plan = plan_job(job, settings, fetch_for(job))
        except (DatabaseError, ConfigError) as error:
            summary.errors += 1
            err(f"refresh: {job.job_id}: {error}")
            db_errors += 1
            if db_errors >= MAX_DB_ERRORS_IN_A_ROW:
                summary.skipped["database errors"] += len(jobs) - index - 1
                err(f"refresh: {db_errors} database errors in a row; stopping")
                break
            continue
        db_errors = 0
        if plan.action == "change":
            changes.append(plan)
            show(plan)
        elif plan.action == "unchanged":
            summary.unchanged += 1
        else:
            summary.skipped[plan.reason] += 1
    return changes


def _wait_for_the_hook(
    memos: Iterable[_Memo], settings: Settings, deadline: float, sleep: Callable[[float], None]
) -> None:
    """Wait (within the time budget) until the hook's modifyjob sees the history refresh
    read: :func:`alter_wait_s` after the last read."""
    last = max((m.last_read for m in memos if m.last_read is not None), default=None)
    now = time.monotonic()
    wait = min(alter_wait_s(last, settings.history_recheck_ms, now), max(0.0, deadline - now))
    if wait > 0:
        sleep(wait)


def _apply(
    pbs: Pbs, changes: list[Plan], deadline: float, summary: Summary, err: Callable[[str], None]
) -> None:
    """qalter the planned jobs (grouped by walltime, many ids per call), then read back."""
    by_walltime: dict[str, list[Plan]] = {}
    for plan in changes:
        by_walltime.setdefault(str(plan.job.walltime), []).append(plan)
    sent: list[Plan] = []
    attempted = 0
    for walltime, plans in by_walltime.items():
        for group in chunks([p.job.job_id for p in plans], QALTER_IDS):
            if time.monotonic() >= deadline:
                summary.skipped["time budget"] += len(changes) - attempted
                return _verify(pbs, sent, summary, err)
            attempted += len(group)
            try:
                proc = pbs.run("qalter", "-l", f"walltime={walltime}", *group)
            except PbsError as error:
                summary.errors += len(group)
                err(f"refresh: {error}")
                continue
            failed = _failed_ids(proc.stderr, group) if proc.returncode else set()
            if proc.returncode and not failed:
                failed = set(group)  # qalter failed as a whole
            for line in (proc.stderr or "").splitlines():
                if line.strip():
                    err(f"refresh: {' '.join(line.split())}")
            summary.errors += len(failed)
            sent.extend(p for p in plans if p.job.job_id in group and p.job.job_id not in failed)
    _verify(pbs, sent, summary, err)


def _failed_ids(stderr: str, group: Iterable[str]) -> set[str]:
    return {job_id for job_id in group if job_id in (stderr or "")}


def _verify(pbs: Pbs, sent: list[Plan], summary: Summary, err: Callable[[str], None]) -> None:
    """Read the altered jobs back: the hook must have set a new value and its mark."""
    if not sent:
        return
    try:
        # one qstat of every job: qstat with job ids asks for each id in turn (measured on
        # OpenPBS 23.06: about 0.15 s per id, against 1 s for 1,000 jobs at once)
        now = pbs.jobs()
    except PbsError as error:
        summary.errors += len(sent)
        err(f"refresh: cannot read the altered jobs back: {error}")
        return
    for plan in sent:
        attrs = now.get(plan.job.job_id)
        if attrs is None:  # ran or was deleted meanwhile: nothing left to check
            summary.skipped["left the queue"] += 1
            continue
        job = job_from_qstat(plan.job.job_id, attrs)
        # the hook predicted again in the qalter's modifyjob: what it set may differ from
        # the plan (newer history), so a change is a new value, not the planned one
        soft_moved = job.soft_s != plan.job.soft_s and is_ours(job)
        rank_moved = job.rank_s is not None and job.rank_s != plan.job.rank_s
        if (plan.new_s is None or soft_moved) and (plan.new_rank_s is None or rank_moved):
            summary.changed += 1
            if rank_moved and summary.ranks is not None:
                summary.ranks += 1
        elif plan.new_s is not None and not soft_moved:
            summary.errors += 1
            err(
                f"refresh: {plan.job.job_id}: soft_walltime is {_fmt(job.soft_s)} after qalter "
                f"(expected {_fmt(plan.new_s)} set by the hook; is its modifyjob event enabled?)"
            )
        else:
            summary.errors += 1
            err(
                f"refresh: {plan.job.job_id}: {RANK_RESOURCE} is {_fmt_rank(job.rank_s)} after"
                f" qalter (expected {plan.new_rank_s} s set by the hook; is its rank on and"
                f" the resource defined?)"
            )


def _fmt_rank(seconds: Optional[int]) -> str:
    return "unset" if seconds is None else f"{seconds} s"
