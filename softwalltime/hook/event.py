"""The PBS event in, the decision out: :func:`job_event` reads what the kernel decides on,
:func:`publish` writes the decision onto the job (the hook's one writer of
``Resource_List``).

The kernel (:mod:`softwalltime.core.decide`) never sees a ``pbs`` object; this module gets
the event, the ``pbs`` module and ``pbs.duration`` passed in, so it imports no ``pbs``.
Hook path: Python 3.6+ syntax, standard library only.
"""

import time
from typing import Any, Callable, Optional, Tuple

from ..core import calibrated
from ..core.config import Settings
from ..core.decide import MARK_RESOURCE, Decision, JobEvent, marked, rank_of
from ..core.rank import RANK_RESOURCE
from .hooklog import unmarked_line, unranked_line


def job_event(e: Any, pbs: Any, settings: Settings) -> Optional[Tuple[JobEvent, Any]]:
    """The :class:`JobEvent` of a queuejob, runjob or modifyjob of the walltime, and the
    ``Resource_List`` to publish onto; None for any other event (left alone).

    :param e: ``pbs.event()``; at modifyjob ``e.job`` holds the changes, ``e.job_o`` the job
    :param pbs: the ``pbs`` module (its event types and ``server()``)
    """
    job, old, wait_s = e.job, e.job, None
    if e.type == pbs.QUEUEJOB:
        kind, user = "queuejob", e.requestor
    elif e.type == pbs.RUNJOB:
        kind, user = "runjob", job.euser or str(job.Job_Owner or "").split("@")[0]
        wait_s = time.time() - int(job.ctime) if job.ctime else None
    elif e.type == pbs.MODIFYJOB and job.Resource_List["walltime"] is not None:
        old = e.job_o
        kind, user = "modifyjob", old.euser or str(old.Job_Owner or "").split("@")[0]
    else:
        return None
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
    this = JobEvent(kind, user, queue, None if walltime is None else int(walltime),
        None if soft is None else int(soft), not altered and marked(old_res, soft),
        shrink, wait_s, ncpus, server, rank_of(old_res) if ranking else None)  # fmt: skip
    return this, res


def publish(
    decision: Decision, resources: Any, duration: Callable[[int], Any], warn: Callable[[str], None]
) -> None:
    """Set what ``decision`` says on a job's ``Resource_List`` (the hook's one writer).

    ``soft_walltime`` as ``duration(seconds)`` (``pbs.duration``) with the mark; the rank.
    Setting a resource the server does not define raises in PBS: the soft walltime is kept
    without its mark, or without the rank, and ``warn`` gets one line saying so.
    """
    if decision.soft_walltime_s is not None:
        resources["soft_walltime"] = duration(decision.soft_walltime_s)
        try:
            resources[MARK_RESOURCE] = decision.soft_walltime_s
        except Exception as err:  # noqa: BLE001 - not defined: the value stays, unmarked
            warn(unmarked_line(MARK_RESOURCE, err))
    if decision.rank_to_set_s is not None:
        try:
            resources[RANK_RESOURCE] = decision.rank_to_set_s
        except Exception as err:  # noqa: BLE001 - not defined: the soft walltime stays
            warn(unranked_line(RANK_RESOURCE, err))
