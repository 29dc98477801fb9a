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
    from softwalltime.core import calibrated, decide
    from softwalltime.core import config as swconfig
    from softwalltime.hook import hooklog, lookup

    settings = swconfig.hook_settings(config, stamp)
    hooklog.forward_logging(pbs.logmsg, pbs.EVENT_DEBUG, pbs.LOG_WARNING, pbs.LOG_ERROR)
    job, old, wait_s = e.job, e.job, None  # modifyjob: e.job = the changes, e.job_o = the job
    if e.type == pbs.QUEUEJOB:
        kind, user = "queuejob", e.requestor
    elif e.type == pbs.RUNJOB:
        kind, user = "runjob", job.euser or str(job.Job_Owner or "").split("@")[0]
        wait_s = time.time() - int(job.ctime) if job.ctime else None
    elif e.type == pbs.MODIFYJOB and job.Resource_List["walltime"] is not None:
        old = e.job_o
        kind, user = "modifyjob", old.euser or str(old.Job_Owner or "").split("@")[0]
    else:
        return
    res, old_res = job.Resource_List, old.Resource_List  # each PBS attribute read costs µs
    walltime, soft = res["walltime"], res["soft_walltime"]
    altered = old is not job and soft is not None  # modifyjob: soft_walltime altered just now
    soft = soft if soft is not None or old is job else old_res["soft_walltime"]
    queue = getattr(old.queue, "name", None) or str(old.queue or "")
    shrink = old is not job and old_res["min_walltime"] is not None
    shrink = shrink or res["min_walltime"] is not None
    server = str(old.id or "").partition(".")[2]  # the job's server (no id yet at queuejob)
    if not server and settings.history_scope == "server":
        server = pbs.server().name
    ranking = settings.rank != "off"  # the sort rank too, from the same history read
    by_key = ranking or settings.predictor == calibrated.NAME  # both compare ncpus
    ncpus = calibrated.ncpus_of(old_res) if by_key else None
    this = decide.JobEvent(kind, user, queue, None if walltime is None else int(walltime),
        None if soft is None else int(soft), not altered and decide.marked(old_res, soft),
        shrink, wait_s, ncpus, server, decide.rank_of(old_res) if ranking else None)  # fmt: skip
    bound_s, recheck_s = swconfig.hook_bound_s(settings), settings.history_recheck_ms / 1000.0
    with lookup.event(_start + bound_s, recheck_s):  # one deadline for every read
        decision = lookup.decided(settings, this if kind == "queuejob" else None, lambda: (
            decide.decide(this, settings, lookup.fetcher(settings, server))))  # fmt: skip
    decide.publish(decision, res, pbs.duration, lambda line: pbs.logmsg(pbs.LOG_WARNING, line))
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
