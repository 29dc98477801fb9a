"""``site export``'s parsers (softwalltime/pbsserver/site.py) on outputs captured from the
real OpenPBS 23.06 server (tests/data/site/: ``plain`` as built, ``rich`` as
tests/pbs/test_site_real.py configures it), and on malformed lines."""

from pathlib import Path

import pytest

from softwalltime import site_file as sf
from softwalltime.errors import ParseError
from softwalltime.pbsserver import site as ex

DATA = Path(__file__).parent / "data" / "site"


def sources(name: str) -> ex.Sources:
    d = DATA / name
    return ex.Sources(
        (d / "pbsnodes.json").read_text(),
        (d / "print_server.txt").read_text(),
        (d / "print_sched.txt").read_text(),
        (d / "sched_config").read_text(),
        (d / "resource_group").read_text(),
    )


def test_the_rich_capture_reads_as_configured() -> None:
    found = ex.site_of(sources("rich"))
    site = found.site
    assert found.notes == []
    (node,) = site.vnodes
    assert (node.name, node.host, node.ncpus, node.mem_kb, node.queue) == (
        "pbshost", "pbshost", 2, 24683772, "q_2h"
    )  # fmt: skip
    assert node.resources == {"arch": "linux", "brno": True, "Qlist": "q_2h,q_1d"}
    assert [q.name for q in site.queues] == ["workq", "q_2h", "q_1d", "route"]
    assert site.queue("route") == sf.Queue("route", kind="route", destinations=("q_2h", "q_1d"))
    assert site.queue("q_2h") == sf.Queue(
        "q_2h", priority=50, walltime_max=7200, max_run="[u:PBS_GENERIC=2]",
        max_run_res={"ncpus": "[o:PBS_ALL=4]"}, default_chunk={"Qlist": "q_2h"},
    )  # fmt: skip
    assert site.queue("q_1d") == sf.Queue("q_1d", started=False, walltime_min=7201,
                                          walltime_max=86400)  # fmt: skip
    assert (site.default_queue, site.max_run, site.max_run_res) == (
        "route", "[u:PBS_GENERIC=3]", {"ncpus": "[u:PBS_GENERIC=2]"}
    )  # fmt: skip
    s = site.scheduler
    assert (s.backfill_depth, s.job_sort_formula, s.strict_ordering) == (2, "walltime", True)
    assert (s.by_queue, s.round_robin, s.fair_share, s.fairshare_decay_time) == (
        True, False, False, 86400
    )  # fmt: skip
    assert s.resources == ("ncpus", "mem", "arch", "host", "vnode", "aoe", "eoe")
    assert s.resource_group == (("grp1", 50, "root", 10), ("alice", 60, "grp1", 5))
    assert sf.from_json(sf.to_json(site)) == site  # a valid site file


def test_the_plain_capture_is_one_node_one_queue_pbs_defaults() -> None:
    site = ex.site_of(sources("plain")).site
    assert [q.name for q in site.queues] == ["workq"] and site.default_queue == "workq"
    assert site.ncpus == 2 and site.max_run is None
    assert site.scheduler.strict_ordering is False and site.scheduler.job_sort_formula is None
    assert site.scheduler.resource_group == ()  # every line of the stock file is a comment


def test_a_prime_time_value_that_differs_is_noted_and_the_non_prime_one_kept() -> None:
    text = "by_queue: True\tprime\nby_queue: False\tnon_prime\nstrict_ordering: true ALL\n"
    fields, notes = ex.scheduler_of(ex.parse_sched_config(text))
    assert fields == {"by_queue": False, "strict_ordering": True}
    assert notes == [
        "sched_config: by_queue is True in prime time, False outside it; the site file has False"
    ]


def test_a_plus_equals_line_appends_and_quotes_are_removed() -> None:
    printed = ex.parse_qmgr_print(
        "create queue r\nset queue r route_destinations = a\nset queue r route_destinations += b\n"
        'set server job_sort_formula = "walltime * 2"\nset sched opt_backfill_fuzzy = off\n'
    )
    assert printed.attrs[("queue", "r")]["route_destinations"] == "a,b"
    assert printed.attrs[("server", "")]["job_sort_formula"] == "walltime * 2"
    assert printed.attrs[("sched", "default")]["opt_backfill_fuzzy"] == "off"


@pytest.mark.parametrize(
    "text, message",
    [
        ("create queue q\nfoo bar\n", "qmgr print:2: not a qmgr create or set line"),
        ("set widget w a = 1\n", "qmgr print:1: not a qmgr object"),
        ('set server a = "x\n', "qmgr print:1: unbalanced quotes"),
        ("set server = 1\n", "qmgr print:1: not 'set OBJECT"),
    ],
)
def test_a_malformed_qmgr_line_is_refused_with_its_number(text, message) -> None:
    with pytest.raises(ParseError, match=message.replace("(", r"\(")):
        ex.parse_qmgr_print(text)


def test_a_bad_queue_value_names_the_queue() -> None:
    printed = ex.parse_qmgr_print("create queue q\nset queue q resources_max.walltime = soon\n")
    with pytest.raises(ParseError, match="queue q: resources_max.walltime: not a duration"):
        ex.queues_of(printed)


@pytest.mark.parametrize(
    "text, message",
    [
        ("# c\nno colon here\n", "sched_config:2: not a 'key: value' line"),
        ("strict_ordering: maybe ALL\n", "sched_config:1: strict_ordering: not a boolean"),
        ("fairshare_decay_factor: 2\n", "sched_config:1: fairshare_decay_factor: must be"),
        ("fairshare_decay_time: later\n", "sched_config:1: fairshare_decay_time: not a dur"),
        ('resources: "ncpus, mem\n', "sched_config:1: unbalanced quote"),
    ],
)
def test_a_malformed_sched_config_line_is_refused_with_its_number(text, message) -> None:
    with pytest.raises(ParseError, match=message):
        ex.scheduler_of(ex.parse_sched_config(text))


@pytest.mark.parametrize(
    "text, message",
    [
        ("grp1 50 root\n", "resource_group:1: not 'name id parent shares'"),
        ("# x\ngrp1 fifty root 10\n", "resource_group:2: id and shares must be integers"),
        ("grp1 50 root -1\n", "resource_group:1: negative shares"),
    ],
)
def test_a_malformed_resource_group_line_is_refused_with_its_number(text, message) -> None:
    with pytest.raises(ParseError, match=message):
        ex.parse_resource_group(text)


def test_resource_group_entries_are_capped(monkeypatch) -> None:
    monkeypatch.setattr(sf, "MAX_GROUPS", 2)
    with pytest.raises(ParseError, match="resource_group:3: more than 2 entries"):
        ex.parse_resource_group("a 1 root 1\nb 2 root 1\nc 3 root 1\n")


def test_pbsnodes_bad_values_name_the_key(monkeypatch) -> None:
    with pytest.raises(ParseError, match="nodes.n.resources_available.ncpus: not an integer"):
        ex.parse_pbsnodes('{"nodes": {"n": {"resources_available": {"ncpus": "x"}}}}')
    with pytest.raises(ParseError, match="nodes.n.resources_available.mem: not a size"):
        ex.parse_pbsnodes('{"nodes": {"n": {"resources_available": {"mem": "lots"}}}}')
    with pytest.raises(ParseError, match="not JSON"):
        ex.parse_pbsnodes("pbsnodes: cannot connect")
    monkeypatch.setattr(sf, "MAX_VNODES", 1)
    with pytest.raises(ParseError, match="2 vnodes, more than 1"):
        ex.parse_pbsnodes('{"nodes": {"a": {}, "b": {}}}')


def test_an_output_larger_than_the_cap_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(ex, "MAX_TEXT_BYTES", 10)
    with pytest.raises(ParseError, match="sched_config: larger than 10 bytes"):
        ex.parse_sched_config("strict_ordering: true ALL\n")
    with pytest.raises(ParseError, match="qmgr print: larger than 10 bytes"):
        ex.parse_qmgr_print("set server scheduling = True\n")
