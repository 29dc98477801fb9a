"""softwalltime server hook (queuejob, runjob, modifyjob): set Resource_List["soft_walltime"].

Install with ``softwalltime hooks install``. Fails open: any failure logs one line and
accepts the job unchanged. PBS's Python (3.6+) loads no site-packages: the config's
``sys_path`` is read with json alone before softwalltime is imported.
"""

import json
import os
import sys
import time

import pbs

# Variable_List entry: the value this hook set last (a manager's value is never replaced)
MARK = "SOFTWALLTIME_SET"


def _current(entries):
    """Put the config's sys_path first and forget a softwalltime that is not the one on
    disk there now: pbs_server keeps modules between events, so an upgrade or a
    reinstall elsewhere would otherwise meet stale modules until the interpreter restarts."""
    sys.path[:0] = [p for p in entries if p not in sys.path]
    loaded = [(n, m) for n, m in sys.modules.items() if n.split(".")[0] == "softwalltime"]
    then = getattr(sys.modules.get("softwalltime"), "FILE_MTIMES", {})
    roots = tuple(os.path.join(os.path.abspath(p), "") for p in entries)
    for _name, module in loaded:
        path = os.path.abspath(getattr(module, "__file__", None) or "?")
        now = os.path.getmtime(path) if os.path.exists(path) else None
        if (roots and not path.startswith(roots)) or then.get(path, now) != now:
            for name, _module in loaded:
                del sys.modules[name]
            return


def _main(e):
    config = pbs.hook_config_filename
    entries = []
    if config:
        with open(config, encoding="utf-8") as fh:
            entries = json.load(fh).get("sys_path") or []
    _current(entries.split(os.pathsep) if isinstance(entries, str) else entries)
    from softwalltime.hookpath import calibrated, decide, hooklog, lookup
    from softwalltime.hookpath import config as swconfig

    settings = swconfig.hook_settings(config)
    log = hooklog.forward_logging(pbs.logmsg, pbs.EVENT_DEBUG, pbs.LOG_WARNING, pbs.LOG_ERROR)
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
    res, old_res, marks = job.Resource_List, old.Resource_List, old.Variable_List
    walltime = res["walltime"]
    soft = res["soft_walltime"] if res["soft_walltime"] is not None else old_res["soft_walltime"]
    ours = soft is not None and marks is not None and marks.get(MARK) == str(int(soft))
    ours = ours and (old is job or res["soft_walltime"] is None)  # not altered just now
    queue = old.queue.name if hasattr(old.queue, "name") else str(old.queue or "")
    shrink = res["min_walltime"] is not None or old_res["min_walltime"] is not None
    server = str(old.id or "").partition(".")[2]  # the job's server (no id yet at queuejob)
    if not server and settings.history_scope == "server":
        server = pbs.server().name
    decision = decide.decide(
        kind, user, queue, None if walltime is None else int(walltime),
        None if soft is None else int(soft), shrink, wait_s, settings,
        lookup.fetcher(settings, server), existing_is_ours=ours, ncpus=calibrated.ncpus_of(old_res),
    )  # fmt: skip
    if decision.soft_walltime_s is not None:
        if job.Variable_List is not None:
            job.Variable_List[MARK] = str(decision.soft_walltime_s)
        res["soft_walltime"] = pbs.duration(decision.soft_walltime_s)
    log.debug("%s [%.2f ms]", decision.reason, (time.monotonic() - _start) * 1000)


_event, _start = pbs.event(), time.monotonic()
try:
    _main(_event)
except Exception as err:  # noqa: BLE001 - fail open; never BaseException: accept() raises SystemExit
    _hint = " (check sys_path in the hook config)" if isinstance(err, ImportError) else ""
    _why = "%s: %s%s" % (type(err).__name__, " ".join(str(err).split()), _hint)
    _ms = (time.monotonic() - _start) * 1000
    pbs.logmsg(pbs.LOG_WARNING, "softwalltime: job left unchanged after %.0f ms: %s" % (_ms, _why))
_event.accept()
