"""Virtual vnodes on the one MoM of the test server, each its own host, and back.

As ``/work/shared/openpbs/README.md`` ("Several hosts on one MoM") found: a Version 2
configuration file inserted with ``pbs_mom -s insert`` and picked up by a MoM restart (a
HUP does not) makes the MoM report the vnodes; each vnode given its own
``resources_available.host`` is a host of its own, so a chunk cannot span two of them.
The natural vnode ``pbshost`` gets 0 cpus (with ``qmgr``: its value set there overrides the
MoM's): jobs run on the virtual ones only.

:func:`virtual_vnodes` undoes it all, also when the test fails: the file removed, the MoM
restarted, the vnodes deleted, ``pbshost``'s cpus as they were.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pbsctl

CONFIG = "swt_test_vnodes"  # the name of the inserted configuration file
MOM_LOCK = pbsctl.PBS_HOME / "mom_priv" / "mom.lock"


def vnode_name(k: int) -> str:
    return f"{pbsctl.NODE}[{k}]"


def config_text(ncpus: Sequence[int]) -> str:
    """The Version 2 configuration: ``pbshost`` with 0 cpus, vnode k with ``ncpus[k]`` cpus
    on host ``vhostk``."""
    lines = ["$configversion 2", f"{pbsctl.NODE}: resources_available.ncpus = 0"]
    for k, n in enumerate(ncpus):
        lines.append(f"{vnode_name(k)}: resources_available.ncpus = {n}")
        lines.append(f"{vnode_name(k)}: resources_available.host = vhost{k}")
    return "\n".join(lines) + "\n"


def restart_mom(timeout: float = 60) -> None:
    """Stop pbs_mom (SIGTERM; its pid is in mom.lock), wait until it is gone, start it with
    ``up.sh`` (which waits until ``pbshost`` is up)."""
    pid = int(MOM_LOCK.read_text().split()[0])
    pbsctl.run("kill", str(pid))
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            raise pbsctl.PbsError(f"pbs_mom (pid {pid}) still running {timeout} s after kill")
        time.sleep(0.2)
    proc = subprocess.run([str(pbsctl.OPENPBS / "up.sh")], capture_output=True, text=True,
                          timeout=timeout * 2, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise pbsctl.PbsError(f"up.sh -> {proc.returncode}: {proc.stderr or proc.stdout}")


def node_states() -> dict[str, tuple[str, str | None]]:
    """Each vnode's state and ``resources_available.ncpus`` (``pbsnodes -av``)."""
    out = pbsctl.run("pbsnodes", "-av").stdout
    nodes: dict[str, tuple[str, str | None]] = {}
    name = None
    for line in out.splitlines():
        if line and not line[0].isspace():
            name = line.strip()
            nodes[name] = ("", None)
        elif name is not None and "=" in line:
            key, _, value = (x.strip() for x in line.partition("="))
            state, ncpus = nodes[name]
            if key == "state":
                nodes[name] = (value, ncpus)
            elif key == "resources_available.ncpus":
                nodes[name] = (state, value)
    return nodes


def wait_nodes(want: dict[str, str], timeout: float = 60) -> None:
    """Wait until each named vnode is free with that many cpus."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = node_states()
        if all(nodes.get(n) == ("free", c) for n, c in want.items()):
            return
        if time.monotonic() > deadline:
            raise pbsctl.PbsError(f"vnodes not as wanted after {timeout} s: {nodes}, want {want}")
        time.sleep(0.5)


@contextmanager
def virtual_vnodes(ncpus: Sequence[int]) -> Iterator[list[str]]:
    """Vnodes ``pbshost[k]`` of ``ncpus[k]`` cpus, each its own host, for the duration; their
    names. The caller holds the PBS lock (the ``pbs_server`` fixture)."""
    before = node_states()[pbsctl.NODE][1]
    names = [vnode_name(k) for k in range(len(ncpus))]
    with tempfile.NamedTemporaryFile("w", suffix=".vnodes", delete=False) as fh:
        fh.write(config_text(ncpus))
    try:
        pbsctl.run("/opt/pbs/sbin/pbs_mom", "-s", "insert", CONFIG, fh.name)
        restart_mom()
        pbsctl.qmgr(f"set node {pbsctl.NODE} resources_available.ncpus = 0")
        wait_nodes({n: str(c) for n, c in zip(names, ncpus)})
        yield names
    finally:
        Path(fh.name).unlink()
        pbsctl.run("/opt/pbs/sbin/pbs_mom", "-s", "remove", CONFIG, check=False)
        restart_mom()
        for name in names:
            pbsctl.qmgr(f"delete node {name}", check=False)
        pbsctl.set_attribute(f"node {pbsctl.NODE}", "resources_available.ncpus", before)
        if before is not None:
            wait_nodes({pbsctl.NODE: before})
