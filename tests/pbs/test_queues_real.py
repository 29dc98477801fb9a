"""Queues and run limits against the real PBS server (``make test-pbs``, issue 46).

Each test configures the server from a :class:`~softwalltime.site_file.Site` (queues,
their limits and node pool, the server's limits), submits a few ``sleep`` jobs while
``scheduling`` is off, lets the real scheduler run them, and checks that the site model
(:mod:`softwalltime.replay.queues`, :mod:`softwalltime.replay.limits`) predicts what PBS
did where the one-pool model (:func:`softwalltime.replay.pbsched.simulate_pbs`) does not.

A second user: the harness makes one ordinary user (alice) and has no hook for another, so
the other user's jobs are root's, which PBS runs once the server's ``acl_roots`` names
root (without it: "qsub: Bad UID for job execution"). Everything a test creates or
changes (queues, server and node attributes, jobs) is put back by :class:`ServerChanges`,
also when the test fails.
"""

from __future__ import annotations

from collections.abc import Iterator

import pbsctl
import pytest
from test_simulate_real import _wrong_order
from test_site_queues_simulate import site_starts

from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim
from softwalltime.replay.queues import route, vnodes_for
from softwalltime.site_file import Queue, Scheduler, Site, Vnode

NODE = pbsctl.NODE
NODE_CPUS = 2
ROOT = "root"
FCFS = pbsched.parse_policy("fcfs-greedy")  # PBS's defaults: no formula, no strict order


class ServerChanges:
    """What a test changes on the server, undone in reverse order by :meth:`undo`: jobs
    purged first (a queue with jobs cannot be deleted), then the node's queue, the
    queues, the attributes."""

    def __init__(self) -> None:
        self.jobs: list[str] = []
        self.queues: list[str] = []
        self.attributes: list[tuple[str, str, str | None]] = []  # (object, name, before)
        self.node_queue = False

    def set(self, obj: str, name: str, value: str) -> None:
        """``qmgr set obj name = value``, its value before noted once."""
        if not any(o == obj and n == name for o, n, _ in self.attributes):
            listing = pbsctl.run("qmgr", "-c", f"list {obj} {name}").stdout
            before = pbsctl.parse_qmgr_list(listing).get(name)
            self.attributes.append((obj, name, before))
        pbsctl.qmgr(f'set {obj} {name} = "{value}"')

    def queue(self, q: Queue) -> None:
        """Create queue ``q`` as the site file describes it."""
        pbsctl.qmgr(f"create queue {q.name}")
        self.queues.append(q.name)
        obj = f"queue {q.name}"
        kind = "Execution" if q.kind == "execution" else "Route"
        pbsctl.qmgr(f"set {obj} queue_type = {kind}")
        pbsctl.qmgr(f"set {obj} priority = {q.priority}")
        for name, value in (
            ("resources_min.walltime", q.walltime_min),
            ("resources_max.walltime", q.walltime_max),
            ("max_run", q.max_run),
            ("max_run_res.ncpus", q.max_run_res.get("ncpus")),
        ):
            if value is not None:
                pbsctl.qmgr(f'set {obj} {name} = "{value}"')
        if q.destinations:
            pbsctl.qmgr(f'set {obj} route_destinations = "{",".join(q.destinations)}"')
        pbsctl.qmgr(f"set {obj} enabled = {q.enabled}")
        pbsctl.qmgr(f"set {obj} started = {q.started}")

    def site(self, site: Site) -> None:
        """Configure the server as ``site``: its new queues, its limits, the node's queue."""
        for q in site.queues:
            if q.name != "workq":
                self.queue(q)
        if site.max_run is not None:
            self.set("server", "max_run", site.max_run)
        for res, value in site.max_run_res.items():
            self.set("server", f"max_run_res.{res}", value)
        workq = site.queue("workq")
        if workq is not None and workq.max_run is not None:
            self.set("queue workq", "max_run", workq.max_run)
        if site.vnodes[0].queue is not None:
            pbsctl.qmgr(f"set node {NODE} queue = {site.vnodes[0].queue}")
            self.node_queue = True

    def undo(self) -> None:
        pbsctl.purge(self.jobs)
        if self.node_queue:
            pbsctl.qmgr(f"unset node {NODE} queue", check=False)
        for name in reversed(self.queues):
            pbsctl.qmgr(f"delete queue {name}", check=False)
        for obj, name, before in reversed(self.attributes):
            pbsctl.set_attribute(obj, name, before)


@pytest.fixture()
def server(pbs_server: None) -> Iterator[ServerChanges]:
    """Scheduling off while a test submits; root may run jobs (the second user)."""
    changes = ServerChanges()
    try:
        changes.set("server", "acl_roots", ROOT)
        changes.set("server", "scheduling", "False")
        yield changes
    finally:
        changes.undo()


def submit(changes: ServerChanges, options: str, script: str, user: str = pbsctl.USER) -> str:
    """A job as ``user`` (alice, or root for the second user), noted for the purge."""
    if user == ROOT:
        # root's job would copy its output back to this process's directory: none
        quiet = ["-o", "/dev/null", "-e", "/dev/null"]
        out = pbsctl.run("qsub", *quiet, *options.split(), stdin=script + "\n").stdout.strip()
    else:
        out = pbsctl.qsub(options, script)
    changes.jobs.append(out)
    return out


def starts(jobs: list[str]) -> list[int]:
    """The jobs' real start times, once all have finished, relative to the first."""
    return pbsctl.finished_starts(jobs)


def pool_starts(jobs: list[tuple[str, int, int, int]]) -> list[int]:
    """The one-pool model's starts of ``(user, ncpus, sleep s, walltime s)``, all submitted
    at 0, on the node's cpus."""
    rows = [(user, 0, wall, run, cpus) for user, cpus, run, wall in jobs]
    work = sim.make_workload("real", rows, NODE_CPUS)
    return pbsched.simulate_pbs(work, sim.WalltimeSource(), NODE_CPUS, FCFS).start


def _queue_of(jobid: str) -> str:
    return str(pbsctl.job(jobid)["queue"])


# ---------------------------------------------------------------------------------------
# Routing by walltime

M = 60
ROUTED = Site(
    "routed",
    (Vnode(NODE, NODE, NODE_CPUS),),
    (
        Queue("workq"),
        Queue("swt_short", walltime_max=10 * M),
        Queue("swt_long", walltime_min=10 * M + 1, walltime_max=60 * M),
        Queue("swt_off", enabled=False),
        Queue("swt_route", kind="route", destinations=("swt_short", "swt_long")),
        Queue("swt_route_off", kind="route", destinations=("swt_off", "swt_long")),
    ),
)


def test_a_routing_queue_places_jobs_by_walltime_where_the_model_says(
    server: ServerChanges,
) -> None:
    server.site(ROUTED)
    walltimes = [5 * M, 10 * M, 10 * M + 1, 60 * M, None]
    expected = [route(ROUTED, "swt_route", w) for w in walltimes]
    assert expected == ["swt_short", "swt_short", "swt_long", "swt_long", "swt_short"]
    for w, queue in zip(walltimes, expected):
        options = "-q swt_route" + ("" if w is None else f" -l walltime={w}")
        assert _queue_of(submit(server, options, "sleep 1")) == queue, w
    # beyond every destination: the job is purged at once (PBSE_ROUTEREJ), though qsub,
    # already answered, printed its id
    assert route(ROUTED, "swt_route", 2 * 60 * M) is None
    log = pbsctl.ServerLog()
    gone = submit(server, "-q swt_route -l walltime=7200", "sleep 1")
    assert pbsctl.run("qstat", "-x", gone, check=False).returncode != 0
    assert any(gone in ln and "rejected by all possible destinations" in ln for ln in log.lines())
    # a disabled destination is retried: the job waits in the routing queue
    assert route(ROUTED, "swt_route_off", 5 * M) is None
    assert (
        _queue_of(submit(server, "-q swt_route_off -l walltime=300", "sleep 1")) == "swt_route_off"
    )


# ---------------------------------------------------------------------------------------
# A queue's node pool

POOLED = Site(
    "pooled",
    (Vnode(NODE, NODE, NODE_CPUS, queue="swt_pool"),),
    (Queue("workq"), Queue("swt_pool")),
)


def test_a_queue_without_vnodes_cannot_run_while_the_only_node_is_another_queues(
    server: ServerChanges,
) -> None:
    assert vnodes_for(POOLED, "workq") == [] and vnodes_for(POOLED, "swt_pool") == [0]
    assert pool_starts([(pbsctl.USER, 1, 2, 60), (pbsctl.USER, 1, 2, 60)]) == [0, 0]
    server.site(POOLED)
    first = submit(server, "-q workq -l walltime=60", "sleep 2")  # first in FCFS order
    pooled = submit(server, "-q swt_pool -l walltime=60", "sleep 2")
    pbsctl.qmgr("set server scheduling = True")
    pbsctl.wait_state(pooled, "F")
    # a cycle after that one: a job submitted to the pool starts and ends, while the
    # earlier workq job, considered first in every cycle, still waits
    sentinel = submit(server, "-q swt_pool -l walltime=60", "sleep 0")
    pbsctl.wait_state(sentinel, "F")
    info = pbsctl.job(first)
    assert info["job_state"] == "Q", info.get("comment")


# ---------------------------------------------------------------------------------------
# Run limits: a user's second job waits while another user's starts

# (user, ncpus, sleep s, walltime s), in FCFS order
LIMITED_JOBS = [(pbsctl.USER, 1, 4, 60), (pbsctl.USER, 1, 4, 60), (ROOT, 1, 4, 60)]
PER_USER = "[u:PBS_GENERIC=1]"
LIMIT_SITES = {
    "server max_run": Site(
        "s", (Vnode(NODE, NODE, NODE_CPUS),), (Queue("workq"),), max_run=PER_USER
    ),
    "queue max_run": Site(
        "q", (Vnode(NODE, NODE, NODE_CPUS),), (Queue("workq", max_run=PER_USER),)
    ),
    "server max_run_res.ncpus": Site(
        "r", (Vnode(NODE, NODE, NODE_CPUS),), (Queue("workq"),), max_run_res={"ncpus": PER_USER}
    ),
}


def _site_jobs(jobs: list[tuple[str, int, int, int]]) -> list[tuple[str, str, int, int, int]]:
    # (user, queue, ncpus, run s, walltime s) as the site model takes them: workq
    return [(u, "workq", c, r, w) for u, c, r, w in jobs]


def _assert_site_order(real: list[int], site: list[int], other: list[int]) -> None:
    """The real order is the site model's, and one the alternative (the pool model's
    starts, mostly) gets wrong."""
    assert not _wrong_order(site, real), f"site model {site}, real {real}"
    assert _wrong_order(other, real), f"the alternative {other} fits the real {real} as well"


@pytest.mark.parametrize("where", sorted(LIMIT_SITES))
def test_a_run_limit_holds_a_users_second_job_and_lets_another_user_start(
    server: ServerChanges, where: str
) -> None:
    site = LIMIT_SITES[where]
    expected = site_starts(site, _site_jobs(LIMITED_JOBS), FCFS)
    assert expected == [0, 4, 0]
    assert pool_starts(LIMITED_JOBS) == [0, 0, 4]  # the pool starts alice's two first
    server.site(site)
    ids = [submit(server, f"-l select=1:ncpus={c} -l walltime={w}", f"sleep {r}", u)
           for u, c, r, w in LIMITED_JOBS]  # fmt: skip
    pbsctl.qmgr("set server scheduling = True")
    _assert_site_order(starts(ids), expected, pool_starts(LIMITED_JOBS))


# ---------------------------------------------------------------------------------------
# Queue priority with by_queue

PRIORITIES = Site(
    "prio",
    (Vnode(NODE, NODE, NODE_CPUS),),
    (Queue("workq"), Queue("swt_low", priority=10), Queue("swt_high", priority=100)),
)


@pytest.mark.parametrize("by_queue", [True, False])
def test_by_queue_starts_the_high_priority_queues_job_before_an_earlier_low_one(
    server: ServerChanges, by_queue: bool
) -> None:
    # two 2-cpu jobs, the low queue's first in FCFS order; without by_queue (and no
    # express queue) the queues' priorities do not order jobs: the control
    site = PRIORITIES._replace(scheduler=Scheduler(by_queue=by_queue))
    jobs = [(pbsctl.USER, "swt_low", 2, 3, 60), (pbsctl.USER, "swt_high", 2, 3, 60)]
    expected = site_starts(site, jobs, FCFS)
    assert expected == ([3, 0] if by_queue else [0, 3])
    server.site(site)
    line = f"by_queue: {by_queue}\tALL"
    with pbsctl.sched_config({"by_queue": line}):
        ids = [submit(server, f"-q {q} -l select=1:ncpus={c} -l walltime={w}", f"sleep {r}")
               for _u, q, c, r, w in jobs]  # fmt: skip
        pbsctl.qmgr("set server scheduling = True")
        real = starts(ids)
    if by_queue:
        _assert_site_order(real, expected, site_starts(site, jobs, FCFS, limits=False))
    else:
        assert not _wrong_order(expected, real), f"site model {expected}, real {real}"


# by_queue with queues of equal priority: the queues in the server's order (the order they
# were created in, not their names'), all of one queue's jobs before the next's, whatever
# their submit order (the queues sorted by priority only, sort.cpp:232-235; a few queues
# sort stably).
EQUAL = Site(
    "equal",
    (Vnode(NODE, NODE, NODE_CPUS),),
    (Queue("workq"), Queue("swt_zeta", priority=10), Queue("swt_alpha", priority=10)),
)


def test_by_queue_takes_queues_of_equal_priority_in_the_servers_order(
    server: ServerChanges,
) -> None:
    jobs = [(pbsctl.USER, "swt_alpha", 2, 3, 60), (pbsctl.USER, "swt_zeta", 2, 3, 60)]
    expected = site_starts(EQUAL, jobs, FCFS)
    assert expected == [3, 0]
    server.site(EQUAL)
    ids = [submit(server, f"-q {q} -l select=1:ncpus={c} -l walltime={w}", f"sleep {r}")
           for _u, q, c, r, w in jobs]  # fmt: skip
    pbsctl.qmgr("set server scheduling = True")
    _assert_site_order(starts(ids), expected, site_starts(EQUAL, jobs, FCFS, limits=False))


# An express queue (priority >= preempt_queue_prio, 150) goes first even without by_queue:
# its jobs' preempt priority is the sort's first key (job_info.cpp:3606-3643, sort.cpp:
# 729-732), with sched_config's default preemptive_sched: true.
EXPRESS = Site(
    "express",
    (Vnode(NODE, NODE, NODE_CPUS),),
    (Queue("workq"), Queue("swt_low", priority=10), Queue("swt_express", priority=200)),
    scheduler=Scheduler(by_queue=False),
)


def test_an_express_queues_job_goes_first_without_by_queue(server: ServerChanges) -> None:
    jobs = [(pbsctl.USER, "swt_low", 2, 3, 60), (pbsctl.USER, "swt_express", 2, 3, 60)]
    expected = site_starts(EXPRESS, jobs, FCFS)
    assert expected == [3, 0]
    server.site(EXPRESS)
    with pbsctl.sched_config({"by_queue": "by_queue: False\tALL"}):
        ids = [submit(server, f"-q {q} -l select=1:ncpus={c} -l walltime={w}", f"sleep {r}")
               for _u, q, c, r, w in jobs]  # fmt: skip
        pbsctl.qmgr("set server scheduling = True")
        real = starts(ids)
    _assert_site_order(real, expected, site_starts(EXPRESS, jobs, FCFS, limits=False))


# Two queues of one priority, three 1-cpu jobs on the 2 cpus: A and B in the first queue,
# C in the second, in FCFS order A, B, C. The turns are within a cycle (``next_job``
# starts again from the first queue at each cycle's INITIALIZE, fifo.cpp:2005-2010): in
# the first cycle round_robin starts A and C, by_queue (and the pool) A and B.
TURNS = Site(
    "turns",
    (Vnode(NODE, NODE, NODE_CPUS),),
    (Queue("workq"), Queue("swt_a", priority=10), Queue("swt_b", priority=10)),
    scheduler=Scheduler(by_queue=False, round_robin=True),
)


def test_round_robin_takes_one_job_of_each_queue_in_turn(server: ServerChanges) -> None:
    jobs = [(pbsctl.USER, q, 1, 3, 60) for q in ("swt_a", "swt_a", "swt_b")]
    expected = site_starts(TURNS, jobs, FCFS)
    assert expected == [0, 3, 0]
    server.site(TURNS)
    lines = {"round_robin": "round_robin: True\tALL", "by_queue": "by_queue: False\tALL"}
    with pbsctl.sched_config(lines):
        ids = [submit(server, f"-q {q} -l select=1:ncpus={c} -l walltime={w}", f"sleep {r}")
               for _u, q, c, r, w in jobs]  # fmt: skip
        pbsctl.qmgr("set server scheduling = True")
        real = starts(ids)
    _assert_site_order(real, expected, site_starts(TURNS, jobs, FCFS, limits=False))


# ---------------------------------------------------------------------------------------
# A job held by a limit is a top job (strict_ordering): its reservation keeps another
# user's job from starting

# (user, ncpus, sleep s, walltime s) on 3 cpus, FCFS: alice's second job (2 cpus) fits
# now but is held by max_run; as the top job it is reserved at her first job's end (10 s
# by walltime), which root's 2-cpu job (to 600 s) would delay: root's waits. Were a held
# job no top job, root's would start at once.
TOP_JOBS = [(pbsctl.USER, 1, 5, 10), (pbsctl.USER, 2, 2, 60), (ROOT, 2, 2, 600)]
STRICT = pbsched.parse_policy("fcfs-bf1")  # strict_ordering, backfill_depth 1


def test_a_job_held_by_a_run_limit_is_a_top_job_under_strict_ordering(
    server: ServerChanges,
) -> None:
    site = LIMIT_SITES["server max_run"]._replace(vnodes=(Vnode(NODE, NODE, 3),))
    expected = site_starts(site, _site_jobs(TOP_JOBS), STRICT)
    assert expected == [0, 5, 7]
    server.set(f"node {NODE}", "resources_available.ncpus", "3")
    server.set("server", "backfill_depth", "1")
    server.site(site)
    with pbsctl.sched_config({"strict_ordering": "strict_ordering: True\tALL"}):
        ids = [submit(server, f"-l select=1:ncpus={c} -l walltime={w}", f"sleep {r}", u)
               for u, c, r, w in TOP_JOBS]  # fmt: skip
        pbsctl.qmgr("set server scheduling = True")
        real = starts(ids)
    # The alternative here is not the pool (it starts alice's second job at once, and
    # root's after it, as PBS does, for another reason) but a held job that is no top
    # job: root's would start at once, alice's second at her first's end.
    assert site_starts(site, _site_jobs(TOP_JOBS), STRICT, False) == [0, 0, 2]
    _assert_site_order(real, expected, [0, 5, 0])
