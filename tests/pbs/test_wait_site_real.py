"""``wait --site`` on the real server (issue 46): the start time on the site's vnodes, the
running job held where qstat's ``exec_vnode`` says it runs.

Two virtual vnodes of 4 cpus, each its own host (:mod:`vnodes`). A job of two 2-cpu chunks
runs one chunk on each (``place=scatter``); a queued 3-cpu chunk then finds no host with 3
free cpus, though the pool of 8 has 4: on the site model it waits for the running job's
end, on the pool it starts at once. First fit (both 2-cpu chunks on one vnode) would leave
the other vnode whole, and the 3-cpu chunk would start at once there too.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pbsctl
import pytest
import vnodes
from conftest import SOFTWALLTIME, _new_database

from softwalltime import site_file as sf
from softwalltime.units import qstat_time

VNODE_CPUS = [4, 4]


@pytest.fixture(scope="module")
def two_vnodes(pbs_server: None) -> Iterator[list[str]]:
    """Two vnodes of 4 cpus, two hosts."""
    with vnodes.virtual_vnodes(VNODE_CPUS) as names:
        yield names


def _site_file(tmp_path: Any, names: list[str]) -> str:
    nodes = [sf.Vnode(pbsctl.NODE, pbsctl.NODE, 0)]
    nodes += [sf.Vnode(n, f"vhost{k}", c) for k, (n, c) in enumerate(zip(names, VNODE_CPUS))]
    path = tmp_path / "site.json"
    path.write_text(sf.dump(sf.Site("real", tuple(nodes), (sf.Queue("workq"),), "workq")))
    return str(path)


def _wait(dsn: str, tmp_path: Any, *args: str) -> dict[str, Any]:
    cfg = tmp_path / "wait.json"
    cfg.write_text(json.dumps({"pbs_command_prefix": [str(pbsctl.PBSX)]}))
    proc = subprocess.run(
        [SOFTWALLTIME, "--config", str(cfg), "wait", "--source", "qstat", "--json", *args],
        capture_output=True, text=True, timeout=300, check=False,
        env=dict(os.environ, SOFTWALLTIME_DSN=dsn),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_wait_site_holds_the_running_job_on_its_exec_vnode(
    two_vnodes: list[str], hook_cluster: Any, jobs: list[str], tmp_path: Any
) -> None:
    jobs.append(pbsctl.qsub("-l select=2:ncpus=2 -l place=scatter -l walltime=00:10:00",
                            "sleep 300"))  # fmt: skip
    running = pbsctl.wait_started(jobs[-1])
    assert running["exec_vnode"] == f"({two_vnodes[0]}:ncpus=2)+({two_vnodes[1]}:ncpus=2)"
    stime = qstat_time(running["stime"])
    assert stime is not None
    jobs.append(pbsctl.qsub("-l select=1:ncpus=3 -l walltime=00:20:00", "sleep 1"))
    mine = jobs[-1]
    assert pbsctl.job(mine)["job_state"] == "Q"  # no host has 3 cpus free

    dsn = _new_database(hook_cluster, "waitsite")
    pool = _wait(dsn, tmp_path, mine, "--machine-procs", "8")
    nodes = _wait(dsn, tmp_path, mine, "--site", _site_file(tmp_path, two_vnodes))
    assert "model" not in pool["start"]
    assert nodes["start"]["model"] == "site model: 3 vnodes, 1 queues (real, 8 cpus)"
    assert nodes["start"]["site_left"] == {}  # exec_vnode read, its vnodes known
    now = pool["starts_by_s"] - pool["predicted_wait_s"]
    assert pool["start"]["p50_s"] == pool["start"]["pbs_method_s"] == now  # 4 cpus free
    now = nodes["starts_by_s"] - nodes["predicted_wait_s"]
    # on the vnodes: not before the running job ends, by its walltime at the latest
    assert now < nodes["start"]["p50_s"] <= nodes["start"]["p90_s"] <= stime + 600
    assert now < nodes["start"]["pbs_method_s"] <= stime + 600
