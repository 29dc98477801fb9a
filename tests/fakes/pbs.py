"""A faithful fake of PBS's ``pbs`` module, for running server hooks outside pbs_server.

Behaviour copied from OpenPBS 23.06 (``src/modules/python/pbs/v1/_base_types.py``,
``_svr_types.py``, ``_exc_types.py`` of the source ``make pbs-up`` builds):

* ``event()`` returns the current event: ``type``, ``hook_name``, ``requestor``,
  ``requestor_host``, ``job`` and, at ``modifyjob``, ``job_o``. As seen on OpenPBS 23.06:
  at modifyjob ``job`` holds only the attributes the ``qalter`` changes (its
  ``Variable_List`` is the job's, and entries set there are kept) and ``job_o`` the job as
  it was (with ``euser``, ``queue`` and the current resources); ``accept()``/``reject()``
  set the outcome and raise ``SystemExit``, so a hook that swallows ``SystemExit`` is
  caught out by the tests.
* ``job.Resource_List[name]``: reading an unset resource gives ``None``; reading a name the
  server does not define (or a differently-cased one) raises ``AttributeError`` (plain
  ``getattr`` in PBS); setting matches names case-insensitively and raises
  ``UnsetResourceNameError`` for an undefined name; time resources are ``duration``.
* ``duration``: an ``int`` subclass; accepts an int or ``[[H:]M:]S[.ms]``; ``int()`` gives
  seconds (fraction >= .5 rounds up); ``str()`` returns the original text.
* ``Variable_List`` is a dict (``pbs_env``); PBS-reserved names are read-only in hooks.
* Custom resources: ``softwalltime_set`` (type long, what ``softwalltime hooks install``
  creates) is defined; ``softwalltime_rank`` (what ``hooks install --rank`` adds) is not,
  as on a server installed without ``--rank``; :func:`define_resource` /
  :func:`undefine_resource` change that. As on OpenPBS 23.06, a hook may set either at
  queuejob, modifyjob and runjob (``tests/pbs/test_rank_real.py``).
* ``server_log``: the lines pbs_server itself writes when a hook sets job attributes, as
  seen on OpenPBS 23.06: one line per resource (``hook set job's Resource_List.X = v``),
  and the *whole* list for ``Variable_List`` (every variable the user passed with ``-v``).
* ``run_hook(path)`` runs a hook file the way pbs_server does (fresh globals; SystemExit
  is a normal end; any other exception or a KeyboardInterrupt rejects) and then applies
  the server's own soft_walltime checks (``resc_attr.c``), returning the outcome: at
  queuejob a soft_walltime above walltime or on a shrink-to-fit job is refused; at
  modifyjob a walltime below the soft_walltime in force afterwards is refused with
  "Illegal attribute or resource value" (what a user's ``qalter`` hits on the real server).

Standard library only and Python 3.6+ syntax: the isolated-interpreter test imports it.
"""

import re
import runpy

# Event types (module_pbs_v1.c / hook.h HOOK_EVENT_*).
QUEUEJOB = 0x01
MODIFYJOB = 0x02
RESVSUB = 0x04
MOVEJOB = 0x08
RUNJOB = 0x10
PROVISION = 0x20
PERIODIC = 0x8000

# Severities for logmsg (as the brief and pbs-reference.md 2.3 give them).
LOG_DEBUG = 5
LOG_WARNING = 6
LOG_ERROR = 7
# Event-mask classes for logmsg (log.h).
EVENT_ERROR = 0x0001
EVENT_SYSTEM = 0x0002
EVENT_ADMIN = 0x0004
EVENT_JOB = 0x0008
EVENT_JOB_USAGE = 0x0010
EVENT_SECURITY = 0x0020
EVENT_SCHED = 0x0040
EVENT_DEBUG = 0x0080
EVENT_DEBUG2 = 0x0100
EVENT_RESV = 0x0200
EVENT_DEBUG3 = 0x0400
EVENT_DEBUG4 = 0x0800
EVENT_FORCE = 0x8000

# Path of the imported application/x-config file, or None (hook_func.c).
hook_config_filename = None

# Every logmsg call, as (level, message), for tests to inspect.
logged = []


class EventIncompatibleError(AttributeError):
    """An event parameter this event type does not have."""


class UnsetAttributeNameError(Exception):
    pass


class BadAttributeValueError(Exception):
    pass


class UnsetResourceNameError(Exception):
    pass


class BadResourceValueError(Exception):
    pass


_DURATION_RE = re.compile(r"^(?:(?:(\d+):)?(\d+):)?(\d+)(?:\.(\d+))?$")


class duration(int):  # noqa: N801 - PBS's name
    """``pbs.duration``: seconds as an int, the original text as ``str()``."""

    def __new__(cls, value):
        valstr = str(value)
        if isinstance(value, bool):
            raise BadResourceValueError(f"illegal value for walltime: {value!r}")
        m = _DURATION_RE.match(valstr.strip())
        if m is None:
            raise BadResourceValueError(f"illegal value for walltime: {valstr!r}")
        hours, minutes, seconds, frac = m.groups()
        total = int(hours or 0) * 3600 + int(minutes or 0) * 60 + int(seconds)
        if frac and int(frac[0]) >= 5:
            total += 1
        obj = int.__new__(cls, total)
        obj.duration_str = valstr
        return obj

    def __str__(self):
        return self.duration_str

    __repr__ = __str__


class size(str):  # noqa: N801 - PBS's name; only carried around here
    pass


# Resources the fake server defines, with their value types (a subset of
# master_resc_def_all.xml; enough for a soft-walltime hook).
RESOURCE_TYPES = {
    "walltime": duration,
    "soft_walltime": duration,
    "min_walltime": duration,
    "max_walltime": duration,
    "cput": duration,
    "ncpus": int,
    "ngpus": int,
    "nodect": int,
    "mem": size,
    "vmem": size,
    "select": str,
    "place": str,
    "software": str,
    "softwalltime_set": int,  # custom (hooks install); see define_resource()
}


class pbs_resource:  # noqa: N801 - PBS's name
    """``Resource_List``: a fixed set of names; reads are exact, writes case-insensitive."""

    def __init__(self, values=None):
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "hook_set", {})
        for name, value in (values or {}).items():
            self._store(name, value)

    def _store(self, name, value):
        for known, kind in RESOURCE_TYPES.items():
            if known.lower() == name.lower():
                if value is None or value == "":
                    self._values.pop(known, None)
                elif isinstance(value, kind):
                    self._values[known] = value
                else:
                    self._values[known] = kind(value)
                return known
        raise UnsetResourceNameError(f"resource attribute '{name}' not found")

    def __getattr__(self, name):
        if name in RESOURCE_TYPES:
            return self._values.get(name)
        raise AttributeError(name)

    def __getitem__(self, name):
        return getattr(self, name)

    def __setitem__(self, name, value):
        known = self._store(name, value)
        self.hook_set[known] = self._values.get(known)

    def __setattr__(self, name, value):
        self[name] = value

    def __contains__(self, name):
        return hasattr(self, name)

    def keys(self):
        return [k for k in RESOURCE_TYPES if k in self._values]

    def __str__(self):
        return ",".join(f"{k}={self._values[k]}" for k in self.keys())


_READONLY_ENV = ("PBS_O_HOME", "PBS_O_HOST", "PBS_O_LOGNAME", "PBS_O_PATH", "PBS_O_WORKDIR")


class pbs_env(dict):  # noqa: N801 - PBS's name
    def __setitem__(self, name, value):
        if name in _READONLY_ENV:
            raise BadAttributeValueError(f"env variable '{name}' is readonly")
        dict.__setitem__(self, name, value)
        self.__dict__["hook_set"] = True

    def __str__(self):
        return ",".join(f"{k}={v}" for k, v in self.items())


class job:  # noqa: N801 - PBS's name
    """The job as a hook sees it; at queuejob most identity attributes are unset."""

    def __init__(
        self,
        resources=None,
        queue="",
        id="",  # noqa: A002 - PBS's attribute name
        euser=None,
        Job_Owner=None,  # noqa: N803
        Job_Name="STDIN",  # noqa: N803
        ctime=None,
        qtime=None,
        variables=None,
    ):
        self.Resource_List = pbs_resource(resources)
        self.queue = queue
        self.id = id
        self.euser = euser
        self.Job_Owner = Job_Owner
        self.Job_Name = Job_Name
        self.ctime = ctime
        self.qtime = qtime
        self.Variable_List = pbs_env(variables or {"PBS_O_HOME": "/home/u"})


class _Event:
    def __init__(self, type, requestor, job=None, hook_name="softwalltime", job_o=None):  # noqa: A002
        self.type = type
        if type == MODIFYJOB:
            self.job_o = job_o
        self.hook_name = hook_name
        self.requestor = requestor
        self.requestor_host = "login1"
        self.job = job
        self.accepted = None  # None: the hook ended without deciding (PBS: accept)
        self.reject_msg = None

    def accept(self):
        self.accepted = True
        raise SystemExit(0)

    def reject(self, msg=""):
        self.accepted = False
        self.reject_msg = msg
        raise SystemExit(0)


_current = [None]


def event():
    """The event being processed (pbs.event())."""
    if _current[0] is None:
        raise EventIncompatibleError("no event")
    return _current[0]


class _Server:
    """``pbs.server()``: the server the hook runs in (only its name here)."""

    name = "pbs01"


def server():
    return _Server()


# What pbs_server logged itself (not through logmsg) for the current event.
server_log = []


def define_resource(name, kind=int):
    """``qmgr -c "create resource NAME type=long"`` (test helper)."""
    RESOURCE_TYPES[name] = kind


def undefine_resource(name):
    """``qmgr -c "delete resource NAME"`` (test helper)."""
    RESOURCE_TYPES.pop(name, None)


def logmsg(level, msg):
    logged.append((level, msg))


def logjobmsg(jobid, msg):
    logged.append((EVENT_JOB, f"{jobid}: {msg}"))


# ---- test helpers (not part of the real module) ----


def new_event(type, requestor, job=None, job_o=None):  # noqa: A002
    """Install a new current event and clear the log; returns it."""
    ev = _Event(type, requestor, job, job_o=job_o)
    _current[0] = ev
    del logged[:]
    del server_log[:]
    return ev


Outcome = dict


def _log_hook_sets(ev):
    """What pbs_server logs of the attributes an accepted hook set (hook_func.c)."""
    if ev.job is None:
        return
    who = f"'{ev.hook_name}' hook set job's"
    for name, value in ev.job.Resource_List.hook_set.items():
        server_log.append(f"{who} Resource_List.{name} = {value}")
    env = ev.job.Variable_List
    if env is not None and env.__dict__.get("hook_set"):
        server_log.append(f"{who} Variable_List = {env}")


def run_hook(path):
    """Run a hook file as pbs_server does and return the outcome.

    :returns: ``{"accepted": bool, "message": str, "soft_walltime": int or None}``
    """
    ev = _current[0]
    try:
        runpy.run_path(path)
    except SystemExit:
        pass
    except (Exception, KeyboardInterrupt) as err:  # noqa: BLE001 - PBS rejects on any
        return {
            "accepted": False,
            "message": f"request rejected as filter hook '{ev.hook_name}' encountered an"
            f" exception: {type(err).__name__}: {err}",
            "soft_walltime": None,
        }
    if ev.accepted is False:
        return {"accepted": False, "message": ev.reject_msg or "", "soft_walltime": None}
    _log_hook_sets(ev)
    rl = ev.job.Resource_List if ev.job is not None else None
    soft = rl["soft_walltime"] if rl is not None else None
    # The server's own checks on values a queuejob hook set (resc_attr.c); runjob: none.
    if ev.type == QUEUEJOB and rl is not None and "soft_walltime" in rl.hook_set:
        if rl["min_walltime"] is not None and soft is not None:
            return {
                "accepted": False,
                "message": "soft_walltime is not supported with Shrink to Fit jobs (15180)",
                "soft_walltime": None,
            }
        wall = rl["walltime"]
        if soft is not None and wall is not None and int(soft) > int(wall):
            return {
                "accepted": False,
                "message": "Illegal attribute or resource value (15014)",
                "soft_walltime": None,
            }
    if ev.type == MODIFYJOB and rl is not None:
        old = ev.job_o.Resource_List
        wall = rl["walltime"] if rl["walltime"] is not None else old["walltime"]
        if soft is None:
            soft = old["soft_walltime"]
        if soft is not None and wall is not None and int(soft) > int(wall):
            return {
                "accepted": False,
                "message": "Illegal attribute or resource value (15014)",
                "soft_walltime": None,
            }
    return {
        "accepted": True,
        "message": "",
        "soft_walltime": None if soft is None else int(soft),
    }
