"""The sort rank: a number to order queued jobs by, published beside the soft walltime.

A soft walltime must rarely be too short, since PBS plans reservations with it, so v3 takes
the user's *largest* run/walltime ratio plus 15 minutes. A sort key only has to put jobs in
the order of their run times, so it may be a *typical* value. On PBS the two are different
numbers: the hook sets the rank in a custom resource (:data:`RANK_RESOURCE`) that
``job_sort_formula`` reads, while ``soft_walltime`` stays the predictor's.

The rank ``key-mean`` (chosen in ``tests/benchmarks/rank_gap.py`` on five traces) is the
mean run time of the user's 10 newest jobs in the finest similarity key of ``calibrated``
(same walltime and ncpus, else same walltime, else all the user's jobs with their run times
scaled to this walltime; a key needs 3 jobs), rounded up and clamped to ``[1, walltime]``.
No usable history gives the walltime.

**Paid evidence** (issue 31; the rank ``key-mean-paid``, setting ``rank``): a rank below
the walltime moves the job ahead of others, so the evidence for it must have cost the user
as much as the jump. The *evidence* is the user's finished jobs (among the last
``HISTORY_ROWS``) whose run time is consistent with the claim: at most ``CONSISTENT_NUM /
CONSISTENT_DEN`` x the key mean + ``CONSISTENT_ADD_S`` (so an honest past of long jobs
cannot pay for a run of cheap ones); its cost is the sum of run time x processors (a job
without a processor count counts 1). The rank is at least the walltime minus that cost
per processor of the job (``walltime - cost / ncpus``, rounded up: each core-second of
evidence buys the job one second of rank): the walltime without evidence, 1 s only once
the evidence cost as much as the job itself (``walltime x ncpus``), and in between in
proportion (half the job's cost: half its walltime). The queue time a rank buys grows
about as fast as the rank falls, or faster (``tests/benchmarks/rank_jump.py``: on four
traces under their recommended formulas, a 24 h job ranked 1 h jumps 90 to 100 % of the
queue that rank 1 s jumps), so a jump costs about its share of the job itself. The floor
``walltime ** (1 - paid)`` (``paid`` the cost's share of ``walltime x ncpus``), until
2026-11-29, sold rank 1 h for 28 % of the job's core-seconds. A cheap job counts for what
it ran: one of seconds, or one that failed at once, buys seconds; a narrow job buys a wide
one little (its cost is divided by the wide job's processors).
``tests/benchmarks/rank_gaming.py`` measures the cost of moving a 24 h x 128-cpu job.

**The pull pays too** (issue 52): an honest past paid for the claim of cheap jobs that pull
the key mean down (ten 20 h runs of 24 h x 128, then three 1-second jobs of the same key:
the mean fell from 20 h to 14 h, and the 20 h runs, consistent with 14 h, paid for it). So
the key's jobs below its mean (the *pullers*) pay for the pull themselves: the rank is also
at least the key's upper median (``sorted(runs)[n // 2]``) minus the pullers' cost (run
time x processors, unscaled) per processor of the job, rounded up (:func:`pull_floor`).
The median moves only once the cheap jobs are more than half the key; from there on the
mean is below half the honest runs' ``H``, so they are not consistent with it (but for the
60 s margin) and the first floor holds. Three free 1-second jobs move that job's rank by 3 s (384
core-seconds / 128), not 6 h, and so does any number of them (``tests/test_hook_rank.py``);
a key without a job below its mean is not raised, nor one whose median is below its mean
(short runs with a few long ones: an honest spread, no pull). The two floors are both
kept: the first prices the jump from the walltime to the mean, the second the pull below
the median. It raises honest ranks whose key holds short runs among a majority of long
ones (failures at once) toward the median; the first version (the mean of the jobs at or
above the mean, not the median) also raised every key with a few long runs, and cost CTC
``sjf.rank`` its whole gain (docs/hook.md: the share of perfect's gain).

Hook path: Python 3.6+ syntax, standard library only, pure.
"""

from itertools import islice
from typing import Iterable, List, Optional, Sequence

from . import calibrated as cal
from . import registry

# The custom resource the hook and ``softwalltime refresh`` set (type long, flag r: users
# can see it but neither request nor alter it, so nobody sorts their own job forward).
RANK_RESOURCE = "softwalltime_rank"
NAME = registry.KEY_MEAN  # the key mean alone: cheap jobs game it (issue 52)
PAID_NAME = registry.KEY_MEAN_PAID  # key-mean with the paid-evidence floors (issues 31, 52)
DEFAULT = registry.DEFAULT_RANK  # the rank hooks install --rank sets (issue 52: key-mean before)

# Evidence consistent with a key mean m: run time <= m x 2 + 60 s.
CONSISTENT_NUM = 2
CONSISTENT_DEN = 1
CONSISTENT_ADD_S = 60


def unpaid_mean(walltime_s: int, ncpus: Optional[int], rows: List[cal.ClassRow]) -> int:
    """The key mean alone (no paid-evidence floor), in ``[1, walltime_s]``."""
    _level, runs, _n = cal.features(walltime_s, ncpus, rows)
    if not runs:
        return walltime_s
    mean = -(-sum(runs) // len(runs))
    return max(1, min(mean, walltime_s))


def evidence_cost(rows: Iterable[cal.ClassRow], mean_s: int) -> int:
    """Core-seconds of the rows whose run time is consistent with ``mean_s``."""
    limit = mean_s * CONSISTENT_NUM // CONSISTENT_DEN + CONSISTENT_ADD_S
    cost = 0
    for runtime_s, _wall, cpus in rows:
        if runtime_s <= limit:
            cost += runtime_s * (cpus if cpus and cpus > 0 else 1)
    return cost


def key_mean(walltime_s: int, ncpus: Optional[int], history: Iterable[cal.ClassRow]) -> int:
    """The rank ``key-mean``: the job's key's mean run time in seconds, in ``[1, walltime_s]``
    (the user's finished jobs ``(runtime_s, walltime_s, ncpus)``, newest end first; at most
    ``calibrated.HISTORY_ROWS`` are read)."""
    return unpaid_mean(walltime_s, ncpus, list(islice(history, cal.HISTORY_ROWS)))


def paid_key_mean(walltime_s: int, ncpus: Optional[int], history: Iterable[cal.ClassRow]) -> int:
    """The rank ``key-mean-paid``: :func:`key_mean`, no lower than the user's paid evidence
    allows (module docstring).

    :param walltime_s: the job's requested walltime, seconds (> 0)
    :param ncpus: its processors, ``None`` if unknown (then only the walltime key; counted
        as 1 processor for the cost)
    :param history: the user's finished jobs ``(runtime_s, walltime_s, ncpus)``, newest end
        first (the hook's one query; at most ``calibrated.HISTORY_ROWS`` are read)
    """
    rows = list(islice(history, cal.HISTORY_ROWS))
    rank = paid_floor(walltime_s, ncpus, rows, unpaid_mean(walltime_s, ncpus, rows))
    return max(rank, min(pull_floor(walltime_s, ncpus, rows), walltime_s))


def pull_floor(walltime_s: int, ncpus: Optional[int], rows: Sequence[cal.ClassRow]) -> int:
    """What the key's jobs that pull its mean down must pay for (issue 52): at least the
    key's upper median minus the pullers' cost per processor of the job, rounded up
    (module docstring); 1 when no job of the key is below its mean.

    :param rows: the user's finished jobs ``(runtime_s, walltime_s, ncpus)``, newest end
        first (at most ``calibrated.HISTORY_ROWS`` are read)
    """
    key = cal.key_rows(walltime_s, ncpus, rows)
    runs = cal.scaled_runs(key, walltime_s)  # features' run times, in this walltime's terms
    total, n = sum(runs), len(runs)
    pulled = False
    cost = 0
    for run_s, (runtime_s, _wall, cpus) in zip(runs, key):
        if run_s * n < total:  # below the key's exact mean: it pulls the mean down
            pulled = True
            cost += runtime_s * (cpus if cpus and cpus > 0 else 1)  # what it really cost
    if not pulled:
        return 1
    width = ncpus if ncpus and ncpus > 0 else 1
    # the upper median: no fewer than half the key's jobs move it (the mean: any one)
    return sorted(runs)[n // 2] - cost // width


def paid_floor(
    walltime_s: int, ncpus: Optional[int], rows: Sequence[cal.ClassRow], claim_s: int
) -> int:
    """``claim_s`` (a rank in ``[1, walltime_s]``: the key mean, or the rank ``learned``'s
    value), no lower than the user's paid evidence for it allows: at least ``walltime_s -
    cost / ncpus``, rounded up (module docstring).

    :param rows: the user's finished jobs ``(runtime_s, walltime_s, ncpus)``, newest end
        first (every one is read: the caller keeps at most ``calibrated.HISTORY_ROWS``)
    """
    if claim_s >= walltime_s:
        return walltime_s
    width = ncpus if ncpus and ncpus > 0 else 1
    floor = walltime_s - evidence_cost(rows, claim_s) // width
    return max(claim_s, min(floor, walltime_s))


RANKERS = {NAME: key_mean, PAID_NAME: paid_key_mean}


def rank_of(
    name: str, walltime_s: int, ncpus: Optional[int], history: Iterable[cal.ClassRow]
) -> int:
    """The rank called ``name`` (:data:`RANKERS`: the setting ``rank``)."""
    return RANKERS[name](walltime_s, ncpus, history)
