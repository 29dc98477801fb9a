"""One configuration loader for the CLI, the ingester, migrations and the hook.

Precedence: defaults < JSON file < ``SOFTWALLTIME_*`` environment < explicit overrides
(command-line flags). Every option has a file key and an environment variable:

================================  ==================================  ===========
file key                          environment variable                default
================================  ==================================  ===========
dsn                               SOFTWALLTIME_DSN                    (none)
predictor                         SOFTWALLTIME_PREDICTOR              v3
v1_jobs                           SOFTWALLTIME_V1_JOBS                2
v3_jobs                           SOFTWALLTIME_V3_JOBS                15
reserve_s                         SOFTWALLTIME_RESERVE_S              900
long_walltime_threshold_s         SOFTWALLTIME_LONG_WALLTIME_...      0 (off)
long_walltime_factor              SOFTWALLTIME_LONG_WALLTIME_FACTOR   1.0
target_under_pct                  SOFTWALLTIME_TARGET_UNDER_PCT       12.0 (calibrated; or v3)
runjob_min_wait_s                 SOFTWALLTIME_RUNJOB_MIN_WAIT_S      0 (off)
override_existing                 SOFTWALLTIME_OVERRIDE_EXISTING      false
dry_run                           SOFTWALLTIME_DRY_RUN                false
connect_timeout_s                 SOFTWALLTIME_CONNECT_TIMEOUT_S      1.0
statement_timeout_ms              SOFTWALLTIME_STATEMENT_TIMEOUT_MS   250
users_allow / users_deny          SOFTWALLTIME_USERS_ALLOW / _DENY    [] (comma list in env)
queues_allow / queues_deny        SOFTWALLTIME_QUEUES_ALLOW / _DENY   []
sys_path                          SOFTWALLTIME_SYS_PATH               [] (os.pathsep list in env)
debug                             SOFTWALLTIME_DEBUG                  false
accounting_dir                    SOFTWALLTIME_ACCOUNTING_DIR         $PBS_HOME/...
server                            SOFTWALLTIME_SERVER                 (from job ids)
refresh_min_change_pct            SOFTWALLTIME_REFRESH_MIN_CHANGE_PCT 10
refresh_min_change_s              SOFTWALLTIME_REFRESH_MIN_CHANGE_S   300
refresh_time_budget_s             SOFTWALLTIME_REFRESH_TIME_BUDGET_S  240
refresh_max_changes               SOFTWALLTIME_REFRESH_MAX_CHANGES    2000
pbs_exec                          SOFTWALLTIME_PBS_EXEC               PBS_EXEC of /etc/pbs.conf
pbs_command_prefix                SOFTWALLTIME_PBS_COMMAND_PREFIX     [] (comma list in env)
status_failure_rate_pct           SOFTWALLTIME_STATUS_FAILURE_RATE... 5
status_guard_procs                SOFTWALLTIME_STATUS_GUARD_PROCS     0 (off)
status_guard_days                 SOFTWALLTIME_STATUS_GUARD_DAYS      7
status_guard_p95_pct              SOFTWALLTIME_STATUS_GUARD_P95_PCT   10
status_guard_longest_factor       SOFTWALLTIME_STATUS_GUARD_LONGE...  2
status_guard_noise_s              SOFTWALLTIME_STATUS_GUARD_NOISE_S   600
ingest_lock_stale_s               SOFTWALLTIME_INGEST_LOCK_STALE_S    3600
history_scope                     SOFTWALLTIME_HISTORY_SCOPE          all (or: server)
history_cache_entries             SOFTWALLTIME_HISTORY_CACHE_ENTRIES  1000 (0: off)
history_keep_days                 SOFTWALLTIME_HISTORY_KEEP_DAYS      0 (keep all; db prune)
history_recheck_ms                SOFTWALLTIME_HISTORY_RECHECK_MS     1000 (0: every event)
rank                              SOFTWALLTIME_RANK                   off (or: key-mean, ...)
================================  ==================================  ===========

The ``refresh_*``, ``pbs_*`` and ``status_*`` keys are for ``softwalltime refresh`` and
``softwalltime status`` (the hook ignores them; ``hooks install`` does not copy them).

The config file is JSON (the same format PBS accepts for a hook configuration).
It is found from the explicit path, else ``SOFTWALLTIME_CONFIG``, else
``/etc/softwalltime.json`` if that exists.

Python 3.6+ syntax and stdlib only: the hook imports this module.
"""

import json
import logging
import os
import re
from typing import Any, Dict, Mapping, NamedTuple, Optional, Set, Tuple, Union

from ..errors import ConfigError
from . import dsn as dsnlib
from . import registry

PREDICTORS = registry.PREDICTORS
DEFAULT_CONFIG_FILE = "/etc/softwalltime.json"
ENV_PREFIX = "SOFTWALLTIME_"
# target_under_pct's other form: as many under-estimates as v3 makes on the same jobs (the
# calibration tracks v3's running under-estimates, computed alongside)
TARGET_V3 = "v3"


class Settings(NamedTuple):
    dsn: Optional[str]
    predictor: str
    v1_jobs: int
    v3_jobs: int
    reserve_s: int
    long_walltime_threshold_s: int
    long_walltime_factor: float
    target_under_pct: Union[float, str]  # a percentage, or TARGET_V3 (see under_target)
    runjob_min_wait_s: int
    override_existing: bool
    dry_run: bool
    connect_timeout_s: float
    statement_timeout_ms: int
    users_allow: Tuple[str, ...]
    users_deny: Tuple[str, ...]
    queues_allow: Tuple[str, ...]
    queues_deny: Tuple[str, ...]
    sys_path: Tuple[str, ...]
    debug: bool
    accounting_dir: Optional[str]
    server: Optional[str]
    refresh_min_change_pct: float
    refresh_min_change_s: int
    refresh_time_budget_s: int
    refresh_max_changes: int
    pbs_exec: Optional[str]
    pbs_command_prefix: Tuple[str, ...]
    status_failure_rate_pct: float
    status_guard_procs: int
    status_guard_days: int
    status_guard_p95_pct: float
    status_guard_longest_factor: float
    status_guard_noise_s: int
    ingest_lock_stale_s: int
    history_scope: str
    history_cache_entries: int
    history_keep_days: int
    history_recheck_ms: int
    rank: str
    source: str
    origins: Tuple[Tuple[str, str], ...]


Settings.__doc__ = """Validated, immutable settings. ``source`` lists where they came from;
``origins`` gives, key by key, ``"default"``, the file, the variable or the option."""

DEFAULTS: Dict[str, Any] = {
    "dsn": None,
    "predictor": registry.DEFAULT_PREDICTOR,
    "v1_jobs": 2,
    "v3_jobs": 15,
    "reserve_s": 900,
    "long_walltime_threshold_s": 0,
    "long_walltime_factor": 1.0,
    "target_under_pct": 12.0,
    "runjob_min_wait_s": 0,
    "override_existing": False,
    "dry_run": False,
    "connect_timeout_s": 1.0,
    "statement_timeout_ms": 250,
    "users_allow": (),
    "users_deny": (),
    "queues_allow": (),
    "queues_deny": (),
    "sys_path": (),
    "debug": False,
    "accounting_dir": None,
    "server": None,
    "refresh_min_change_pct": 10.0,
    "refresh_min_change_s": 300,
    "refresh_time_budget_s": 240,
    "refresh_max_changes": 2000,
    "pbs_exec": None,
    "pbs_command_prefix": (),
    "status_failure_rate_pct": 5.0,
    # the policy guard of `status` (issue 48): the machine's processors (0: no guard), the
    # days of the current policy it judges and its tolerances against the previous policy
    "status_guard_procs": 0,
    "status_guard_days": 7,
    "status_guard_p95_pct": 10.0,
    "status_guard_longest_factor": 2.0,
    "status_guard_noise_s": 600,
    "ingest_lock_stale_s": 3600,
    # whose finished jobs a prediction uses: every server's in the database, or only those
    # of the server the job belongs to
    "history_scope": "all",
    # lookups whose rows the hook keeps while the history's change counter does not move
    # (see softwalltime.hook.lookup); 0 queries at every event
    "history_cache_entries": 1000,
    # `softwalltime db prune` deletes finished jobs that ended more than this many days ago;
    # 0 keeps the whole history (deleting is never the default: it cannot be undone)
    "history_keep_days": 0,
    # how long the hook trusts a read of that counter, in ms: a burst of qsub costs one
    # round trip, and a job is predicted from history at most this much behind the last
    # commit to it; 0 reads the counter at every event
    "history_recheck_ms": 1000,
    # the sort rank for job_sort_formula, set by the hook in Resource_List.softwalltime_rank
    "rank": "off",
}
HISTORY_SCOPES = ("all", "server")
# The sort rank the hook publishes beside the soft walltime (core/rank.py): off, or
# key-mean in the custom resource softwalltime_rank (``hooks install --rank`` creates it);
# "learned" is the predictor learned's own rank (core/learned_site.py: that predictor only),
# "learned-paid" the same no lower than the user's paid evidence allows (core/rank.py)
RANK_OFF = registry.RANK_OFF
RANK_LEARNED = registry.LEARNED
RANK_LEARNED_PAID = registry.LEARNED_PAID
RANKS = (RANK_OFF,) + registry.RANKS

_LIST_KEYS = (
    "users_allow",
    "users_deny",
    "queues_allow",
    "queues_deny",
    "sys_path",
    "pbs_command_prefix",
)
_INT_KEYS = (
    "v1_jobs",
    "v3_jobs",
    "reserve_s",
    "long_walltime_threshold_s",
    "runjob_min_wait_s",
    "statement_timeout_ms",
    "refresh_min_change_s",
    "refresh_time_budget_s",
    "refresh_max_changes",
    "ingest_lock_stale_s",
    "history_cache_entries",
    "history_keep_days",
    "history_recheck_ms",
    "status_guard_procs",
    "status_guard_days",
    "status_guard_noise_s",
)
_FLOAT_KEYS = (
    "long_walltime_factor",
    "connect_timeout_s",
    "refresh_min_change_pct",
    "status_failure_rate_pct",
    "status_guard_p95_pct",
    "status_guard_longest_factor",
)
# Accepted ranges, inclusive. The hook's wait on the database is at most connect_timeout_s
# + statement_timeout_ms + 0.1 s: with these bounds at most 10.1 s, a third of PBS's default hook
# alarm of 30 s, so a slow database can never get a job rejected by the alarm.
RANGES = {
    "v1_jobs": (1, 1000),
    "v3_jobs": (1, 1000),
    "reserve_s": (0, 31 * 86400),
    "long_walltime_threshold_s": (0, 10 * 366 * 86400),
    "runjob_min_wait_s": (0, 366 * 86400),
    "statement_timeout_ms": (1, 5000),
    "connect_timeout_s": (0.01, 5.0),
    "long_walltime_factor": (0.01, 100.0),
    "target_under_pct": (0.01, 99.0),
    "ingest_lock_stale_s": (1, 7 * 86400),
    "history_cache_entries": (0, 100000),
    "history_keep_days": (0, 100 * 366),
    "history_recheck_ms": (0, 60000),
    "refresh_min_change_pct": (0.0, 1000.0),
    "refresh_min_change_s": (0, 366 * 86400),
    "refresh_time_budget_s": (1, 86400),
    "refresh_max_changes": (0, 10000000),
    "status_failure_rate_pct": (0.0, 100.0),
    "status_guard_procs": (0, 10**8),
    "status_guard_days": (1, 366),
    "status_guard_p95_pct": (0.0, 1000.0),
    "status_guard_longest_factor": (1.0, 100.0),
    "status_guard_noise_s": (0, 366 * 86400),
}  # type: Dict[str, Tuple[float, float]]
# Time granted beyond statement_timeout for the server's own cancellation to reach the
# hook, so a slow query normally ends with PostgreSQL's clear "canceling statement" error
# rather than the client-side deadline.
STATEMENT_GRACE_S = 0.1


def hook_bound_s(settings: "Settings") -> float:
    """The longest the hook waits for the database in one event, in seconds."""
    return settings.connect_timeout_s + settings.statement_timeout_ms / 1000.0 + STATEMENT_GRACE_S


def _check_range(where: str, key: str, number: Any) -> None:
    low, high = RANGES[key]
    if not low <= number <= high:
        raise ConfigError(f"{where}: must be between {low:g} and {high:g}, got {number!r}")


def under_target(value: Union[float, str]) -> Optional[float]:
    """The calibration target of a ``target_under_pct`` setting: the percentage, or ``None``
    for ``v3`` (what ``Calibration.update`` takes for "as many under-estimates as v3")."""
    return None if value == TARGET_V3 else float(value)


def parse_target(where: str, value: Any) -> Union[float, str]:
    """``target_under_pct`` (the setting or a command's ``--target-under-pct``): a
    percentage in its range, or :data:`TARGET_V3` (any case).

    :param where: what the value came from, for the error
    :raises ConfigError: neither
    """
    if isinstance(value, str) and value.strip().lower() == TARGET_V3:
        return TARGET_V3
    low, high = RANGES["target_under_pct"]
    real = None
    if not isinstance(value, bool):
        try:
            real = float(value)
        except (TypeError, ValueError):
            pass
    if real is None or not low <= real <= high:  # nan fails the range test too
        raise ConfigError(
            f"{where}: expected a percentage between {low:g} and {high:g}, or v3 (as many"
            f" under-estimates as v3), got {value!r}"
        )
    return real


_BOOL_KEYS = ("override_existing", "dry_run", "debug")
_STR_KEYS = ("dsn", "predictor", "accounting_dir", "server", "history_scope", "pbs_exec")


def _coerce(key: str, value: Any, origin: str) -> Any:
    """Check and convert one value; ``origin`` names the file or variable for the error."""
    where = f"{origin}: key {key!r}"
    if key == "target_under_pct":
        return parse_target(where, value)
    if key in _BOOL_KEYS:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if key in _INT_KEYS:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        try:
            number = int(value)
        except (TypeError, ValueError, OverflowError):  # OverflowError: inf, 1e400
            raise ConfigError(f"{where}: expected an integer, got {value!r}") from None
        _check_range(where, key, number)
        return number
    if key in _FLOAT_KEYS:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        try:
            real = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected a number, got {value!r}") from None
        if real != real:  # nan compares false with everything, ranges included
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        _check_range(where, key, real)
        return real
    if key in _LIST_KEYS:
        if isinstance(value, str):
            sep = os.pathsep if key == "sys_path" else ","
            if value.lstrip().startswith("["):  # '[]' was a command named "[]" (issue 50)
                raise ConfigError(
                    f"{where}: a list separated by '{sep}' (empty for none), not JSON,"
                    f" got {value!r}"
                )
            return tuple(x.strip() for x in value.split(sep) if x.strip())
        if isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
            return tuple(value)
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    if key == "rank":
        if value not in RANKS:
            raise ConfigError(
                "{}: must be one of {}, got {!r}".format(where, ", ".join(RANKS), value)
            )
        return value
    if key in _STR_KEYS:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {type(value).__name__!r}")
        if key == "predictor" and value not in PREDICTORS:
            raise ConfigError(
                "{}: must be one of {}, got {!r}".format(where, ", ".join(PREDICTORS), value)
            )
        if key == "history_scope" and value not in HISTORY_SCOPES:
            raise ConfigError(f"{where}: must be all or server, got {value!r}")
        if key in ("predictor", "history_scope"):
            return value
        return value or None
    raise ConfigError("{}: unknown key (known keys: {})".format(where, ", ".join(sorted(DEFAULTS))))


_warned: Set[str] = set()


def readable_by(path: str) -> Optional[str]:
    """Who besides its owner and root can read ``path``: "others", "its group" or None.

    The directories on the way count: one that a user can search neither as owner, group
    nor other keeps that user out, whatever the file's mode. PBS writes a hook's config
    (``server_priv/hooks/NAME.CF``) 0644 at every import, inside a 0750 directory of
    root's: nobody but root and group root reads it. Group root (gid 0) is not counted:
    its members are administrators.

    :raises OSError: the file or a directory on the way cannot be looked at
    """
    st = os.stat(path)
    others = bool(st.st_mode & 0o004)
    group = bool(st.st_mode & 0o040) and st.st_gid != 0
    directory = os.path.dirname(os.path.abspath(path))
    while others or group:
        ds = os.stat(directory)
        mode = ds.st_mode
        # who may search it besides root: anyone (o+x); its group, who may be the file's
        # group or "others" to it (g+x); its owner when not the file's (u+x)
        by_other = bool(mode & 0o001)
        by_group = bool(mode & 0o010) and ds.st_gid != 0
        by_owner = bool(mode & 0o100) and ds.st_uid not in (0, st.st_uid)
        group = group and (by_other or by_group)
        others = others and (by_other or by_owner or (by_group and ds.st_gid != st.st_gid))
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    if others:
        return "others"
    return "its group" if group else None


def _warn_if_exposed(path: str, dsn: Any) -> None:
    """Warn (once per file) when a config file holding a password is readable by others
    (:func:`readable_by`)."""
    if not isinstance(dsn, str) or path in _warned:
        return
    try:
        secret = any(dsnlib.is_secret(k) and v for k, v in dsnlib.parse(dsn).items())
        who = readable_by(path) if secret else None
    except (ConfigError, OSError):
        return
    if who:
        _warned.add(path)
        logging.getLogger(__name__).warning(
            "%s holds a database password and is readable by %s: chmod 600 %s",
            path,
            who,
            path,
        )


def _unreadable(path: str) -> bool:
    """The file exists and this process's user may not read it."""
    return os.path.exists(path) and not os.access(path, os.R_OK)


def _read_file(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read configuration file: {err.strerror}") from err
    except ValueError as err:
        raise ConfigError(f"{path}: not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object at top level")
    return data


def load_settings(
    path: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
    overrides: Optional[Mapping[str, Any]] = None,
    skip_unreadable: bool = False,
) -> Settings:
    """Build validated settings from defaults, a JSON file, the environment and overrides.

    :param path: the JSON config file; ``None`` means ``$SOFTWALLTIME_CONFIG`` or
        ``/etc/softwalltime.json`` when present
    :param environ: the environment to read ``SOFTWALLTIME_*`` from (default ``os.environ``;
        the hook passes ``{}`` so pbs_server's environment cannot change its behaviour)
    :param overrides: values from command-line flags; ``None`` values are ignored
    :param skip_unreadable: a config file this user may not read (it holds the database's
        password) is left out, and ``source`` says so, instead of an error: for a command an
        ordinary user runs that can answer without a database (``wait JOBID``)
    :raises ConfigError: naming the file or variable and the key
    """
    env = os.environ if environ is None else environ
    values = dict(DEFAULTS)
    sources = ["defaults"]
    origins = dict.fromkeys(DEFAULTS, "default")

    if path is None:
        path = env.get(ENV_PREFIX + "CONFIG") or None
        if path is None and os.path.exists(DEFAULT_CONFIG_FILE):
            path = DEFAULT_CONFIG_FILE
    if path is not None and skip_unreadable and _unreadable(path):
        sources.append(path + " (not readable by this user: left out)")
        path = None
    if path is not None:
        try:
            data = _read_file(path)
        except ConfigError as err:
            if path == DEFAULT_CONFIG_FILE and isinstance(err.__cause__, PermissionError):
                # the packages' file is root's and group softwalltime's (issue 50: postgres
                # running db upgrade); commands that need none of it can be given another
                raise ConfigError(
                    f"{err} (readable by root and the group softwalltime; or give another file"
                    " with --config or SOFTWALLTIME_CONFIG)"
                ) from err
            raise
        _warn_if_exposed(path, data.get("dsn"))
        for key, value in data.items():
            if key.startswith("_") or key == "comment":
                continue  # room for comments in a JSON file
            values[key] = _coerce(key, value, path)
            origins[key] = path
        sources.append(path)

    for key in DEFAULTS:
        name = ENV_PREFIX + key.upper()
        if name in env:
            values[key] = _coerce(key, env[name], "environment variable " + name)
            origins[key] = name
            sources.append(name)

    for key, value in (overrides or {}).items():
        if value is not None:
            values[key] = _coerce(key, value, "option --" + key.replace("_", "-"))
            origins[key] = "--" + key.replace("_", "-")
            sources.append("--" + key.replace("_", "-"))

    needs = registry.rank_predictor(values["rank"])
    if needs is not None and values["predictor"] != needs:
        raise ConfigError(
            "{}: rank {} needs predictor {} (its table and rows), not {!r}".format(
                origins["rank"], values["rank"], needs, values["predictor"]
            )
        )
    return Settings(source=", ".join(sources), origins=tuple(origins.items()), **values)


def require_dsn(settings: Settings) -> str:
    """Return the DSN or raise a ConfigError that says every way to give one."""
    if not settings.dsn:
        raise ConfigError(
            "no database given: set SOFTWALLTIME_DSN, the 'dsn' key of the config file "
            f"(SOFTWALLTIME_CONFIG or {DEFAULT_CONFIG_FILE}), or pass --dsn"
        )
    return settings.dsn


def libpq_dsn(dsn: str) -> str:
    """Turn a SQLAlchemy URL (``postgresql+psycopg2://...``) into a libpq connection string.

    libpq itself accepts ``postgresql://`` URIs and ``key=value`` strings, so only the
    driver suffix needs removing.
    """
    return re.sub(r"^postgres(?:ql)?\+\w+://", "postgresql://", dsn.strip())


def redact_dsn(dsn: Optional[str]) -> str:
    """Return the DSN with every secret replaced by ``***``; safe to print or log.

    The DSN is parsed the way libpq parses it (:mod:`.dsn`) and rendered again, so a
    password with ``?``, ``#``, quotes or spaces, or an ``sslpassword``, never shows.
    """
    return dsnlib.redact(dsn)
