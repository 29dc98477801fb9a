"""``softwalltime site export`` against the real server (``make test-pbs``).

The test configures a site the export must read back: two custom node resources (a
boolean and a ``Qlist``-style string array) on the node, a routing queue in front of two
execution queues with walltime limits, a priority and run limits, server limits, the
default queue, backfill_depth, a job_sort_formula, strict_ordering in sched_config and a
resource_group; it exports with the product's own command (through pbsx, as a site with
``pbs_command_prefix``) and restores every setting, also on failure.
``tests/data/site/rich/`` holds the raw outputs of this configuration (captured with
:func:`configured` and :func:`capture`), which the parsers' unit tests read.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pbsctl

from softwalltime import site_file as sf
from softwalltime.pbsserver.commands import parse_qmgr_list

SOFTWALLTIME = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "softwalltime")
RESOURCE_GROUP = pbsctl.PBS_HOME / "sched_priv" / "resource_group"
FORMULA = "walltime"
GROUPS = "grp1\t50\troot\t10\nalice\t60\tgrp1\t5\n"
QUEUES = [  # (directive) in order; the route last, its destinations existing
    "create queue q_2h queue_type = execution",
    "set queue q_2h Priority = 50",
    "set queue q_2h resources_max.walltime = 02:00:00",
    'set queue q_2h max_run = "[u:PBS_GENERIC=2]"',
    'set queue q_2h max_run_res.ncpus = "[o:PBS_ALL=4]"',
    "set queue q_2h default_chunk.Qlist = q_2h",
    "set queue q_2h enabled = True",
    "set queue q_2h started = True",
    "create queue q_1d queue_type = execution",
    "set queue q_1d resources_min.walltime = 02:00:01",
    "set queue q_1d resources_max.walltime = 24:00:00",
    "set queue q_1d enabled = True",
    "set queue q_1d started = False",
    "create queue route queue_type = route",
    "set queue route route_destinations = q_2h",
    "set queue route route_destinations += q_1d",
    "set queue route enabled = True",
    "set queue route started = True",
]
SERVER = {
    "max_run": "[u:PBS_GENERIC=3]",
    "max_run_res.ncpus": "[u:PBS_GENERIC=2]",
    "default_queue": "route",
    "backfill_depth": "2",
}


@contextmanager
def configured() -> Iterator[None]:
    """The site above on the server; every setting as it was afterwards."""
    server = parse_qmgr_list(pbsctl.run("qmgr", "-c", "list server").stdout)
    before = {name: server.get(name) for name in SERVER}
    formula = pbsctl.sched_attribute("job_sort_formula")
    groups = RESOURCE_GROUP.read_text() if RESOURCE_GROUP.exists() else None
    node = f"node {pbsctl.NODE}"
    try:
        pbsctl.qmgr("create resource brno type = boolean, flag = h")
        pbsctl.qmgr("create resource Qlist type = string_array, flag = h")
        for directive in QUEUES:
            pbsctl.qmgr(directive)
        pbsctl.qmgr(f"set {node} resources_available.brno = True")
        pbsctl.qmgr(f'set {node} resources_available.Qlist = "q_2h,q_1d"')
        pbsctl.qmgr(f"set {node} queue = q_2h")
        for name, value in SERVER.items():
            pbsctl.set_attribute("server", name, value)
        pbsctl.set_attribute("sched", "job_sort_formula", FORMULA)
        RESOURCE_GROUP.write_text(GROUPS)
        with pbsctl.sched_config({"strict_ordering": "strict_ordering: true\tALL"}):
            yield
    finally:  # node first: a queue or resource a node refers to cannot be deleted
        for attr in ("queue", "resources_available.brno", "resources_available.Qlist"):
            pbsctl.qmgr(f"unset {node} {attr}", check=False)
        for name, value in before.items():
            pbsctl.set_attribute("server", name, value)
        pbsctl.set_attribute("sched", "job_sort_formula", formula)
        for queue in ("route", "q_2h", "q_1d"):
            pbsctl.qmgr(f"delete queue {queue}", check=False)
        for resource in ("brno", "Qlist"):
            pbsctl.qmgr(f"delete resource {resource}", check=False)
        if groups is None:
            RESOURCE_GROUP.unlink(missing_ok=True)
        else:
            RESOURCE_GROUP.write_text(groups)


def capture(directory: Path) -> None:
    """The raw texts the export reads, into ``directory`` (for the parsers' unit tests)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, argv in (
        ("pbsnodes.json", ["pbsnodes", "-a", "-F", "json"]),
        ("print_server.txt", ["qmgr", "-c", "print server"]),
        ("print_sched.txt", ["qmgr", "-c", "print sched"]),
    ):
        (directory / name).write_text(pbsctl.run(*argv).stdout)
    (directory / "sched_config").write_text(pbsctl.SCHED_CONFIG.read_text())
    (directory / "resource_group").write_text(RESOURCE_GROUP.read_text())


def export(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    cfg = tmp_path / "site.json.cfg"
    cfg.write_text(json.dumps({"pbs_command_prefix": [str(pbsctl.PBSX)]}))
    out = tmp_path / "site.json"
    proc = subprocess.run(
        [SOFTWALLTIME, "--config", str(cfg), "site", "export", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc, out


def test_export_reads_back_what_the_site_configured(pbs_server, tmp_path):
    with configured():
        proc, out = export(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "3 queues" in proc.stderr or "4 queues" in proc.stderr
    site = sf.load(str(out))
    node = next(v for v in site.vnodes if v.name == pbsctl.NODE)
    assert node.queue == "q_2h"
    assert node.resources["brno"] is True
    assert node.resources["Qlist"] == "q_2h,q_1d"
    assert node.ncpus >= 1 and node.mem_kb > 0
    route, q2h, q1d = (site.queue(n) for n in ("route", "q_2h", "q_1d"))
    assert route is not None and route.kind == "route"
    assert route.destinations == ("q_2h", "q_1d")
    assert q2h == sf.Queue(
        "q_2h",
        priority=50,
        walltime_max=7200,
        max_run="[u:PBS_GENERIC=2]",
        max_run_res={"ncpus": "[o:PBS_ALL=4]"},
        default_chunk={"Qlist": "q_2h"},
    )
    assert q1d == sf.Queue("q_1d", started=False, walltime_min=7201, walltime_max=86400)
    assert site.default_queue == "route"
    assert site.max_run == "[u:PBS_GENERIC=3]"
    assert site.max_run_res == {"ncpus": "[u:PBS_GENERIC=2]"}
    assert site.scheduler.backfill_depth == 2
    assert site.scheduler.job_sort_formula == FORMULA
    assert site.scheduler.strict_ordering is True
    assert site.scheduler.resource_group == (("grp1", 50, "root", 10), ("alice", 60, "grp1", 5))


def test_export_of_the_server_as_it_is_has_its_one_queue_and_node(pbs_server, tmp_path):
    proc, out = export(tmp_path)
    assert proc.returncode == 0, proc.stderr
    site = sf.load(str(out))
    assert [v.name for v in site.vnodes] == [pbsctl.NODE]
    assert site.queue("workq") is not None and site.default_queue == "workq"
    assert not any(q.name in ("route", "q_2h", "q_1d") for q in site.queues)


@contextmanager
def qlist_pools() -> Iterator[list[str]]:
    """Queues q_a and q_b whose chunks ask for their name in ``Qlist`` (default_chunk), the
    node in q_a's pool only, ``Qlist`` on sched_config's resources line; the jobs the block
    adds to the list, and every setting, gone afterwards."""
    node = f"node {pbsctl.NODE}"
    jobs: list[str] = []
    config = pbsctl.SCHED_CONFIG.read_text()
    resources = next(ln for ln in config.splitlines() if ln.startswith("resources:"))
    with_qlist = resources.rstrip().rstrip('"') + ', Qlist"'
    try:
        pbsctl.qmgr("create resource Qlist type = string_array, flag = h")
        for q in ("q_a", "q_b"):
            pbsctl.qmgr(f"create queue {q} queue_type = execution")
            pbsctl.qmgr(f"set queue {q} default_chunk.Qlist = {q}")
            pbsctl.qmgr(f"set queue {q} enabled = True")
            pbsctl.qmgr(f"set queue {q} started = True")
        pbsctl.qmgr(f"set {node} resources_available.Qlist = q_a")
        with pbsctl.sched_config({"resources": with_qlist}):
            yield jobs
    finally:
        pbsctl.purge(jobs)
        pbsctl.qmgr(f"unset {node} resources_available.Qlist", check=False)
        for q in ("q_a", "q_b"):
            pbsctl.qmgr(f"delete queue {q}", check=False)
        pbsctl.qmgr("delete resource Qlist", check=False)


def test_a_qlist_pool_keeps_a_queues_chunks_on_its_nodes(pbs_server):
    """What the CERIT-SC site file's pools rest on: a queue's default_chunk.Qlist sends its
    chunks only to nodes whose Qlist names the queue (the node's queue attribute could name
    one queue only)."""
    with qlist_pools() as jobs:
        outside = pbsctl.qsub("-q q_b -l select=1:ncpus=1 -l walltime=60", "sleep 30")
        jobs.append(outside)
        inside = pbsctl.qsub("-q q_a -l select=1:ncpus=1 -l walltime=60", "sleep 30")
        jobs.append(inside)
        pbsctl.wait_state(inside, "R", timeout=30)  # a cycle ran after both were queued
        info = pbsctl.job(outside)
        assert info["job_state"] == "Q"
        assert "Qlist" in info.get("comment", ""), info.get("comment")
        assert "Qlist=q_b" in info["schedselect"]  # the queue's default_chunk, per chunk
