"""Queues in the scheduler model: routing, node pools, queue order (replay/queues.py)."""

from __future__ import annotations

import pytest

from softwalltime.replay.queues import accepts, execution_queues, queue_order, route, vnodes_for
from softwalltime.site_file import Queue, Site, Vnode

H = 3600
SITE = Site(
    "s",
    (Vnode("n0", "n0", 4), Vnode("n1", "n1", 4, queue="long"), Vnode("n2", "n2", 4)),
    (
        Queue("route", kind="route", destinations=("short", "long", "any")),
        Queue("short", walltime_max=2 * H),
        Queue("long", walltime_min=2 * H, walltime_max=48 * H),
        Queue("any", walltime_min=72 * H),
        Queue("off", enabled=False),
        Queue("via", kind="route", destinations=("off", "short")),
    ),
    "route",
)


@pytest.mark.parametrize(
    "walltime, expected",
    [
        (H, "short"),
        (2 * H, "short"),  # both bounds included: the first destination takes it
        (2 * H + 1, "long"),
        (48 * H, "long"),
        (60 * H, None),  # between long's max and any's min: every destination refuses it
        (72 * H, "any"),
        (None, "short"),  # no walltime: compared with no bound
    ],
)
def test_a_routing_queue_sends_a_job_to_the_first_destination_that_takes_it(walltime, expected):
    assert route(SITE, "route", walltime) == expected


def test_a_disabled_destination_is_passed_and_an_execution_queue_keeps_its_job():
    assert route(SITE, "via", H) == "short"
    assert route(SITE, "via", 3 * H) is None
    assert route(SITE, "long", 3 * H) == "long"
    assert route(SITE, "long", H) is None  # below its minimum: qsub is refused
    assert route(SITE, "off", H) is None
    assert not accepts(Queue("off", enabled=False), None)


def test_routing_stops_at_a_routing_destination_and_survives_a_loop():
    site = SITE._replace(
        queues=SITE.queues
        + (
            Queue("outer", kind="route", destinations=("inner", "short")),
            Queue("inner", kind="route", destinations=("long",)),
            Queue("loop", kind="route", destinations=("loop",)),
            Queue("stopped", kind="route", started=False, destinations=("short",)),
        )
    )
    # inner takes the 1 h job but cannot place it: it is not sent back to outer's "short"
    assert route(site, "outer", H) is None
    assert route(site, "outer", 3 * H) == "long"
    assert route(site, "loop", H) is None
    assert route(site, "stopped", H) is None
    with pytest.raises(ValueError, match="nope"):
        route(site, "nope", H)


def test_a_queue_with_vnodes_uses_them_and_the_others_share_the_unassociated():
    assert vnodes_for(SITE, "long") == [1]
    assert vnodes_for(SITE, "short") == [0, 2]
    only = SITE._replace(vnodes=(Vnode("n1", "n1", 4, queue="long"),))
    assert vnodes_for(only, "short") == []  # cannot run while the only vnode is long's


PRIO = {"low": 10, "high": 50, "mid": 10, "express": 200}
# jobs 0..6, in the job sort's order below; their queues:
QUEUE = ["low", "high", "low", "mid", "express", "mid", "high"]
ORDER = [0, 1, 2, 3, 4, 5, 6]


def test_by_queue_takes_the_queues_by_priority_ties_in_server_order():
    assert queue_order(ORDER, QUEUE, PRIO) == [4, 1, 6, 0, 2, 3, 5]


def test_round_robin_takes_one_job_per_queue_of_a_priority_in_turn():
    got = queue_order(ORDER, QUEUE, PRIO, by_queue=False, round_robin=True)
    assert got == [4, 1, 6, 0, 3, 2, 5]


def test_without_by_queue_only_express_queues_come_first():
    assert queue_order(ORDER, QUEUE, PRIO, by_queue=False) == [4, 0, 1, 2, 3, 5, 6]
    assert queue_order(ORDER, QUEUE, PRIO, by_queue=False, express_priority=None) == ORDER


def test_a_job_of_an_unknown_queue_is_an_error():
    with pytest.raises(ValueError, match="nowhere"):
        queue_order([0], ["nowhere"], PRIO)


def test_execution_queues_route_each_job_from_its_queue_or_the_default():
    got = execution_queues(SITE, ["", "", "long", "via"], [H, 3 * H, 3 * H, 3 * H])
    assert got == ["short", "long", "long", None]
    with pytest.raises(ValueError, match="nope"):
        execution_queues(SITE, ["nope"], [H])
    with pytest.raises(ValueError, match="no default_queue"):
        execution_queues(SITE._replace(default_queue=None), [""], [H])
