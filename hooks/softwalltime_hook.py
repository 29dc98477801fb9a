"""softwalltime server hook (queuejob, runjob, modifyjob): set Resource_List["soft_walltime"]
(and, with the setting rank, Resource_List["softwalltime_rank"]).

Install with ``softwalltime hooks install``. Fails open: any failure logs one line and
accepts the job unchanged. PBS's Python (3.6+) loads no site-packages: the config's
``sys_path`` is read with json alone before softwalltime is imported.
"""

import json
import os
import sys
import time

import pbs


def _current(config, now):
    """Import softwalltime from the config's sys_path, afresh when it changed on disk (an
    upgrade: pbs_server keeps modules until its interpreter restarts; the package's folders
    are looked at when the config changed, else at most once a second); the config's stat."""
    package = sys.modules.get("softwalltime")
    st = os.stat(config) if config else None
    stamp = st and (config, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    same = package is not None and getattr(package, "HOOK_CONFIG", None) == stamp
    upgraded = getattr(package, "upgraded", None)  # None: a release before 0.3, stale
    moved = package is not None and (upgraded is None or upgraded(now, 1.0 if same else 0.0))
    if same and not moved:
        return stamp
    with open(config or os.devnull, encoding="utf-8") as fh:
        entries = (json.loads(fh.read() or "{}")).get("sys_path") or []
    entries = entries.split(os.pathsep) if isinstance(entries, str) else entries
    sys.path[:0] = [p for p in entries if p not in sys.path]
    roots = tuple(os.path.join(os.path.abspath(p), "") for p in entries)
    where = os.path.abspath(getattr(package, "__file__", None) or "?")
    if package is not None and (moved or (roots and not where.startswith(roots))):
        for name in [n for n in sys.modules if n.split(".")[0] == "softwalltime"]:
            del sys.modules[name]
    import softwalltime

    softwalltime.HOOK_CONFIG = stamp
    return stamp


def _main(e):
    config = pbs.hook_config_filename
    stamp = _current(config, _start)
    from softwalltime.core import config as swconfig
    from softwalltime.core import decide
    from softwalltime.hook import event, hooklog, lookup
    from softwalltime.hook.settings import hook_settings

    settings = hook_settings(config, stamp)
    hooklog.forward_logging(pbs.logmsg, pbs.EVENT_DEBUG, pbs.LOG_WARNING, pbs.LOG_ERROR)
    read = event.job_event(e, pbs, settings)
    if read is None:
        return  # another event, or a modifyjob that leaves the walltime
    this, res = read
    bound_s, recheck_s = swconfig.hook_bound_s(settings), settings.history_recheck_ms / 1000.0
    with lookup.event(_start + bound_s, recheck_s):  # one deadline for every read
        decision = lookup.decided(settings, this if this.kind == "queuejob" else None, lambda: (
            decide.decide(this, settings, lookup.fetcher(settings, this.server))))  # fmt: skip
    event.publish(decision, res, pbs.duration, lambda line: pbs.logmsg(pbs.LOG_WARNING, line))
    # straight to pbs.logmsg: a record of the logging module costs more than the lookup
    pbs.logmsg(pbs.EVENT_DEBUG, hooklog.decision_line(decision.reason, _start, _hook))


_event, _start, _hook = pbs.event(), time.monotonic(), "softwalltime"
try:
    _hook = str(_event.hook_name or _hook)  # a hook of another name tags its lines with it
    _main(_event)
except Exception as err:  # noqa: BLE001 - fail open; never BaseException: accept() raises SystemExit
    _hint = " (check sys_path in the hook config)" if isinstance(err, ImportError) else ""
    _why = "%s: %s%s" % (type(err).__name__, " ".join(str(err).split()), _hint)
    _ms = (time.monotonic() - _start) * 1000
    _tag = "softwalltime: " if _hook == "softwalltime" else "softwalltime[%s]: " % _hook
    pbs.logmsg(pbs.LOG_WARNING, "%sjob left unchanged after %.0f ms: %s" % (_tag, _ms, _why))
_event.accept()
