"""The sort rank: a number to order queued jobs by, published beside the soft walltime.

A soft walltime must rarely be too short, since PBS plans reservations with it, so v3 takes
the user's *largest* run/walltime ratio plus 15 minutes. A sort key only has to put jobs in
the order of their run times, so it may be a *typical* value. On PBS the two are different
numbers: the hook sets the rank in a custom resource (:data:`RANK_RESOURCE`) that
``job_sort_formula`` reads, while ``soft_walltime`` stays the predictor's.

The rank is ``key-mean`` (chosen in ``tests/benchmarks/rank_gap.py`` on five traces): the
mean run time of the user's 10 newest jobs in the finest similarity key of ``calibrated``
(same walltime and ncpus, else same walltime, else all the user's jobs with their run times
scaled to this walltime; a key needs 3 jobs), rounded up and clamped to ``[1, walltime]``.
No usable history gives the walltime.

Hook path: Python 3.6+ syntax, standard library only, pure.
"""

from typing import Iterable, Optional

from . import calibrated as cal

# The custom resource the hook and ``softwalltime refresh`` set (type long, flag r: users
# can see it but neither request nor alter it, so nobody sorts their own job forward).
RANK_RESOURCE = "softwalltime_rank"
NAME = "key-mean"


def key_mean(walltime_s: int, ncpus: Optional[int], history: Iterable[cal.ClassRow]) -> int:
    """The job's rank in seconds: its key's mean run time, in ``[1, walltime_s]``.

    :param walltime_s: the job's requested walltime, seconds (> 0)
    :param ncpus: its processors, ``None`` if unknown (then only the walltime key)
    :param history: the user's finished jobs ``(runtime_s, walltime_s, ncpus)``, newest end
        first (the hook's one query; at most ``calibrated.HISTORY_ROWS`` are read)
    """
    _level, runs, _n = cal.features(walltime_s, ncpus, history)
    if not runs:
        return walltime_s
    mean = -(-sum(runs) // len(runs))
    return max(1, min(mean, walltime_s))
