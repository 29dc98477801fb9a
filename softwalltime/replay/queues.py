"""Queues in the scheduler model (issue 46): where a job lands, which vnodes it may use, and
in what order the cycle considers the queues' jobs (pure).

Each rule follows OpenPBS 23.06.06 (``src/server/`` for routing, ``src/scheduler/`` for the
rest; line numbers of that tree); ``tests/pbs/test_queues_real.py`` shows them on the real
server.

- **Routing** (:func:`route`). A job submitted to a routing queue is moved to the first of
  its ``route_destinations``, in order, that accepts it (``default_router``,
  job_route.c:172-223). A destination accepts a job (``svr_chkque``,
  svr_jobfunc.c:1078-1262) when it is enabled (svr_jobfunc.c:1120-1121) and the job's
  walltime is within its ``resources_min.walltime`` and ``resources_max.walltime``, both
  bounds included (``chk_resc_limits``, svr_jobfunc.c:1045-1056: a minimum above the job's
  value or a maximum below it rejects, equality passes). A job without a walltime is
  compared with neither bound: only the resources the job has are compared
  (``chk_svr_resc_limit`` walks the job's list, svr_jobfunc.c:834-864; ``comp_resc`` the
  job's list against the minimum, attr_fn_resc.c:394-409), so it goes to the first enabled
  destination. A destination that is a routing queue takes the job and routes it in turn.
  A job no destination accepts is not queued anywhere the scheduler looks:
  - when every destination refused it for good (limits, unknown queue), the job is gone:
    the server tries the route once at submission (req_quejob.c:1821-1828) and purges the
    job on ``PBSE_ROUTEREJ`` (job_route.c:190-193; on the real server qsub has printed the
    job id by then, and the server logs "Job rejected by all possible destinations"); a
    job already in the queue is aborted the same way (``queue_route``, job_route.c:357-358);
  - when a destination was only disabled (``PBSE_QUNOENB`` is a retry error,
    ``should_retry_route``, svr_movejob.c:1063), the job stays queued in the routing queue
    and is retried every ``route_retry_time``; the site file's queues do not change, so it
    stays there for the whole replay;
  - a routing queue that is not started routes nothing (job_route.c:294-295).
  Not modelled: queue and server ``resources_default.walltime`` (applied before the check,
  svr_jobfunc.c:1228-1229), the server's ``resources_max`` (used when the queue has none,
  svr_jobfunc.c:839-848), ACLs, ``max_queued``.
- **Node pool** (:func:`vnodes_for`). A queue some vnode names in its ``queue`` attribute
  (the server then sets the queue's ``hasnodes``, queue_info.cpp:305-311) places its jobs
  on those vnodes only (``node_queue_cmp``, queue_info.cpp:169-174, 850-856; check.cpp:
  1614-1617); every other queue's jobs go on the vnodes with no ``queue`` set
  (``is_unassoc_node``, server_info.cpp:258-262, 2388-2394; check.cpp:1621-1622).
- **Queue order** (:func:`queue_order`). With ``by_queue`` (sched_config's default,
  ``by_queue: True``) the cycle takes the queues in descending ``priority``
  (``cmp_queue_prio_dsc``, sort.cpp:232-235, sorted at server_info.cpp:280-281) and all of
  one queue's jobs, in the job sort, before the next queue's (``next_job``,
  fifo.cpp:2112-2130; ``sort_jobs`` sorts within each queue, sort.cpp:1165-1169). With
  ``round_robin`` the queues of one priority take turns, one job each, before the next
  lower priority (fifo.cpp:2040-2111; the queues grouped by priority at
  server_info.cpp:282-292); the turns start again from the first queue at every cycle
  (``next_job``'s INITIALIZE, fifo.cpp:2005-2010), so the order is a cycle's, of the jobs
  queued then. With neither, all jobs form one list in the job sort
  (fifo.cpp:2136-2143). In every mode the jobs of an *express* queue (priority at least the
  scheduler's ``preempt_queue_prio``, default 150, with sched_config's default
  ``preemptive_sched: true``) come first, the higher queue priority first: their preempt
  priority is the first sort key (``set_preempt_prio``, job_info.cpp:3606-3608, 3633-3643;
  ``cmp_preemption`` first in ``cmp_sort``, sort.cpp:729-732). Queues of equal priority
  keep the server's (here the site file's) order: ``std::sort`` of a few queues is an
  insertion sort, stable in practice.
"""

from __future__ import annotations

from typing import (
    Any,
    Callable,
    Dict,
    Hashable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

from ..site_file import Queue, Site
from .limits import Limits, SiteLimits, job_entities
from .sim_workload import SimWorkload, take

EXPRESS_PRIORITY = 150  # PBS_PREEMPT_QUEUE_PRIO_DEFAULT (include/pbs_sched.h:67)


def accepts(queue: Queue, walltime_s: Optional[int]) -> bool:
    """Whether ``queue`` takes a job of ``walltime_s`` (None: none requested) by
    ``svr_chkque``'s rules the model has: enabled, walltime within the queue's bounds."""
    if not queue.enabled:
        return False
    if walltime_s is None:
        return True
    if queue.walltime_min is not None and walltime_s < queue.walltime_min:
        return False
    return queue.walltime_max is None or walltime_s <= queue.walltime_max


def route(site: Site, queue: str, walltime_s: Optional[int]) -> Optional[str]:
    """The execution queue a job of ``walltime_s`` submitted to ``queue`` lands in, or None
    when it lands in none (rejected at submission, or left in a routing queue: see the
    module docstring). A job submitted to an execution queue stays there if it accepts it.

    :raises ValueError: ``queue`` is not one of the site's queues
    """
    first = site.queue(queue)
    if first is None:
        raise ValueError(f"queue {queue!r} is not a queue of site {site.name!r}")
    if not accepts(first, walltime_s):
        return None  # qsub to a queue that refuses the job fails (req_quejob.c)
    return _route_from(site, first, walltime_s, len(site.queues))


def _route_from(site: Site, queue: Queue, walltime_s: Optional[int], depth: int) -> Optional[str]:
    # depth: routing queues may name each other; a chain longer than the queues is a loop
    if queue.kind == "execution":
        return queue.name
    if not queue.started or depth <= 0:
        return None
    for name in queue.destinations:
        dest = site.queue(name)
        if dest is None or not accepts(dest, walltime_s):
            continue  # PBSE_UNKQUE / PBSE_EXCQRESC / PBSE_QUNOENB: the next destination
        # moved there (job_route.c:210-216); a routing queue routes it in turn, and a job
        # it cannot place is not sent back to try this queue's later destinations
        return _route_from(site, dest, walltime_s, depth - 1)
    return None


def vnodes_for(site: Site, queue: str) -> List[int]:
    """The indices of the vnodes ``queue``'s jobs may use: those whose ``queue`` attribute
    names it, else (no vnode names it) those with no ``queue`` set."""
    own = [k for k, v in enumerate(site.vnodes) if v.queue == queue]
    if own:
        return own
    return [k for k, v in enumerate(site.vnodes) if v.queue is None]


def queue_order(
    order: Sequence[int],
    job_queue: Sequence[str],
    queue_priority: Mapping[str, int],
    by_queue: bool = True,
    round_robin: bool = False,
    express_priority: Optional[int] = EXPRESS_PRIORITY,
) -> List[int]:
    """``order`` (queued jobs in the job sort) in the order PBS's cycle considers them.

    :param job_queue: each job's execution queue (indexed by job)
    :param queue_priority: the queues' priorities, in the server's order (ties keep it)
    :param express_priority: ``preempt_queue_prio`` (None: ``preemptive_sched`` false, no
        express queues)
    :raises ValueError: a job's queue is not in ``queue_priority``
    """
    for j in order:
        if job_queue[j] not in queue_priority:
            raise ValueError(f"job {j}'s queue {job_queue[j]!r} has no priority")
    if round_robin:
        queues = _by_priority(queue_priority)
        jobs: Dict[str, List[int]] = {q: [] for q in queues}
        for j in order:
            jobs[job_queue[j]].append(j)
        return _round_robin(queues, jobs, queue_priority)
    group = queue_groups(job_queue, queue_priority, by_queue, express_priority)
    return list(order) if group is None else sorted(order, key=group)


def _by_priority(queue_priority: Mapping[str, int]) -> List[str]:
    # The queues in descending priority, ties in the server's order.
    rank = {q: k for k, q in enumerate(queue_priority)}
    return sorted(queue_priority, key=lambda q: (-queue_priority[q], rank[q]))


def queue_groups(
    job_queue: Sequence[str],
    queue_priority: Mapping[str, int],
    by_queue: bool = True,
    express_priority: Optional[int] = EXPRESS_PRIORITY,
) -> Optional[Callable[[int], int]]:
    """Without ``round_robin``, the group of each job the cycle takes before any later
    group, the job sort ordering jobs within a group (None: one group): with ``by_queue``
    its queue's place in descending priority; else an express queue's place for its jobs
    and one group after them for all others (the module docstring). The fairshare order
    (:class:`.fairshare.CycleOrder`) sorts within these groups, as ``sort_jobs`` sorts
    within each queue with ``fair_share`` and ``by_queue`` (sort.cpp:1138-1160)."""
    queues = _by_priority(queue_priority)
    place = {q: k for k, q in enumerate(queues)}
    if not by_queue:
        if express_priority is None:
            return None
        place = {
            q: (k if queue_priority[q] >= express_priority else len(queues))
            for q, k in place.items()
        }

    def group(j: int) -> int:
        return place[job_queue[j]]

    return group


def _round_robin(
    queues: Sequence[str], jobs: Mapping[str, List[int]], priority: Mapping[str, int]
) -> List[int]:
    # One job from each queue of a priority level in turn (fifo.cpp:2066-2103), the
    # levels in descending priority.
    out: List[int] = []
    k = 0
    while k < len(queues):
        level = [q for q in queues[k:] if priority[q] == priority[queues[k]]]
        k += len(level)
        for turn in range(max(len(jobs[q]) for q in level)):
            out.extend(jobs[q][turn] for q in level if turn < len(jobs[q]))
    return out


def execution_queues(
    site: Site, queues: Sequence[str], walltimes: Sequence[Optional[int]]
) -> List[Optional[str]]:
    """Each job's execution queue: :func:`route` from the queue it was submitted to
    (``""``: the site's ``default_queue``), None for a job that lands in none.

    :raises ValueError: a job names a queue the site lacks, or names none and the site has
        no default queue
    """
    if len(queues) != len(walltimes):
        raise ValueError("one queue and one walltime per job")
    seen: Dict[Tuple[str, Optional[int]], Optional[str]] = {}
    out: List[Optional[str]] = []
    for k, (queue, wall) in enumerate(zip(queues, walltimes)):
        name = queue or site.default_queue
        if not name:
            raise ValueError(f"job {k} names no queue and site {site.name!r} has no default_queue")
        key = (name, wall)
        if key not in seen:
            seen[key] = route(site, name, wall)
        out.append(seen[key])
    return out


class SiteOrder(NamedTuple):
    """What a site's queues and limits add to the cycle (:func:`.pbsched.simulate_pbs`'s
    ``site``): the queue order of the sorted jobs, and the equivalence class key's part
    the queues and limits add (:meth:`.limits.Limits.class_key`; None: nothing)."""

    job_queue: Sequence[str]
    priority: Mapping[str, int]
    by_queue: bool = True
    round_robin: bool = False
    express_priority: Optional[int] = EXPRESS_PRIORITY
    class_key: Optional[Callable[[int], Hashable]] = None

    def order(self, order: Sequence[int]) -> List[int]:
        return queue_order(
            order, self.job_queue, self.priority, self.by_queue, self.round_robin,
            self.express_priority,
        )  # fmt: skip

    def groups(self) -> Optional[Callable[[int], int]]:
        """:func:`queue_groups` of these queues, for the fairshare order.

        :raises ValueError: ``round_robin`` (its turns under fairshare are not modelled)
        """
        if self.round_robin:
            raise ValueError("fairshare with round_robin's queue turns is not modelled")
        return queue_groups(self.job_queue, self.priority, self.by_queue, self.express_priority)


def site_order(
    site: Site, job_queue: Sequence[str], class_key: Optional[Callable[[int], Hashable]] = None
) -> SiteOrder:
    """The :class:`SiteOrder` of ``site``'s started execution queues and scheduler
    settings, for jobs in ``job_queue`` (their execution queues, :func:`execution_queues`).

    :raises ValueError: a job's queue is not a started execution queue of the site (a job
        PBS would never run: leave it out of the workload)
    """
    runs = {q.name: q.priority for q in site.queues if q.kind == "execution" and q.started}
    bad = next((q for q in job_queue if q not in runs), None)
    if bad is not None:
        raise ValueError(
            f"queue {bad!r} is not a started execution queue of {site.name!r} (stopped, a"
            " routing queue, or none of its queues)"
        )
    s = site.scheduler
    return SiteOrder(job_queue, runs, s.by_queue, s.round_robin, EXPRESS_PRIORITY, class_key)


SKIP_UNROUTED = "no started execution queue takes it"


def route_workload(site: Site, work: SimWorkload) -> Tuple[SimWorkload, List[str]]:
    """The jobs of ``work`` that land in a started execution queue of ``site`` (routed from
    the queue each names, else the default queue, by its walltime), and their queues. The
    others are counted in ``skipped`` (:data:`SKIP_UNROUTED`): PBS purges them at
    submission, or they wait forever in a routing or stopped queue (the module docstring).
    """
    names = work.site.queue if work.site is not None else [""] * len(work.submit)
    landed = execution_queues(site, names, work.wall)
    started = {q.name for q in site.queues if q.kind == "execution" and q.started}
    keep = [k for k, q in enumerate(landed) if q in started]
    queues = [str(landed[k]) for k in keep]
    if len(keep) == len(landed):
        return work, queues
    skipped = dict(work.skipped)
    skipped[SKIP_UNROUTED] = skipped.get(SKIP_UNROUTED, 0) + len(landed) - len(keep)
    return take(work, keep)._replace(skipped=skipped), queues


def site_rules(
    site: Site, work: SimWorkload, queues: Sequence[str], inner: Any
) -> Tuple[Any, SiteOrder]:
    """The machine model with ``site``'s run limits in front of ``inner`` (``inner`` as it
    is when the site has none) and the cycle's :class:`SiteOrder`, for ``work`` whose jobs
    run in ``queues`` (:func:`route_workload`): what :func:`.pbsched.simulate_pbs` takes as
    ``model`` and ``site``."""
    groups = work.site.group if work.site is not None else [""] * len(work.submit)
    lim = Limits(site, job_entities(queues, work.user, groups, work.procs))
    model = SiteLimits(inner, lim) if lim.any() else inner
    return model, site_order(site, queues, lim.class_key)
