"""Write a decision onto the PBS job: the hook's one writer of ``Resource_List``.

The kernel (:mod:`softwalltime.core.decide`) never sees a ``pbs`` object; this module gets
the job's resources and ``pbs.duration`` passed in, so it imports no ``pbs`` either.
Hook path: Python 3.6+ syntax, standard library only.
"""

from typing import Any, Callable

from ..core.decide import MARK_RESOURCE, Decision
from ..core.rank import RANK_RESOURCE
from .hooklog import unmarked_line, unranked_line


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
    if decision.rank_s is not None:
        try:
            resources[RANK_RESOURCE] = decision.rank_s
        except Exception as err:  # noqa: BLE001 - not defined: the soft walltime stays
            warn(unranked_line(RANK_RESOURCE, err))
