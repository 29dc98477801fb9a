"""The site files of the bundled traces, derived from the traces (issue 46).

``packaging/make_sites.py`` writes :func:`derive`'s sites into ``softwalltime/data/sites/``;
``tests/test_site_traces.py`` derives them again and compares with the committed files.

- CERIT-SC 2013: from its Alea columns and ``.machines`` (:func:`.alea.cerit_site`);
- the SWF traces: one cpu per node, as their headers say (``MaxNodes`` = ``MaxProcs``:
  KTH-SP2 100, CTC-SP2 338 (its batch partition), HPC2N 240 (the log counts Seth's
  processors; the cluster had 120 dual-cpu nodes, which the trace does not tell apart),
  SDSC-SP2 128 (the derived file's header says ``MaxNodes: -1``; the archive's log 128));
- SDSC-BLUE (Blue Horizon; no trace of it is bundled): 144 nodes of 8 cpus, whole nodes
  (the archive's header: ``MaxNodes: 144``, ``MaxProcs: 1152``; jobs were given nodes).
"""

from __future__ import annotations

import gzip
import os
from typing import Dict, Iterator, List, NamedTuple, Optional

from .. import site_file as sf
from ..errors import ParseError
from . import alea
from .trace_readers import InputLimits, SwfHeader, swf_rows

CERIT = "CERIT-SC-wagap-2013.alea.swf.gz"
MAX_HEADER_LINES = 200


class SwfMachine(NamedTuple):
    """A bundled SWF trace's machine: the site file's name, the trace, nodes x cpus."""

    site: str
    trace: str
    nodes: int
    cpus_per_node: int
    excl: bool = False


SWF_MACHINES = (
    SwfMachine("kth-sp2", "KTH-SP2-1996-2.1-cln.swf.gz", 100, 1),
    SwfMachine("ctc-sp2", "CTC-SP2-1996-3.1-cln.swf.gz", 338, 1),
    SwfMachine("hpc2n", "HPC2N-2002-2.2-cln.swf.gz", 240, 1),
    SwfMachine(
        "sdsc-sp2", "SDSC-SP2-1998-4.2-cln.DERIVED-predictsim-strongfilter-easysim.swf.gz", 128, 1
    ),
)
SDSC_BLUE = SwfMachine("sdsc-blue", "SDSC-BLUE-2000-4.2-cln.swf.gz", 144, 8, excl=True)


def header_value(path: str, key: str) -> Optional[int]:
    """An integer ``; KEY: N`` of an SWF trace's header (None: absent).

    :raises ParseError: the file cannot be read
    """
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
            for _, line in zip(range(MAX_HEADER_LINES), fh):
                name, sep, rest = line.lstrip(";").partition(":")
                if line.startswith(";") and sep and name.strip().lower() == key.lower():
                    word = rest.split()[0] if rest.split() else ""
                    return int(word) if word.lstrip("-").isdigit() else None
    except OSError as err:  # gzip's "not a gzipped file" has no strerror
        raise ParseError(f"{path}: {err.strerror or err}") from None
    return None


def _swf_site(m: SwfMachine, trace_dir: Optional[str]) -> sf.Site:
    """The machine's site; with ``trace_dir``, its header checked against the table.

    :raises ParseError: the header says another machine
    """
    if trace_dir is not None:
        path = os.path.join(trace_dir, m.trace)
        procs = header_value(path, "MaxProcs")
        if procs != m.nodes * m.cpus_per_node:
            raise ParseError(f"{path}: MaxProcs {procs}, not {m.nodes} x {m.cpus_per_node}")
    how = "whole nodes" if m.excl else "one cpu per node"
    return alea.swf_site(
        m.site, m.nodes, m.cpus_per_node, m.excl,
        f"{m.trace}: {m.nodes} nodes x {m.cpus_per_node} cpus ({how}), from its SWF header",
    )  # fmt: skip


def cerit_jobs(path: str) -> Iterator[alea.AleaJob]:
    """The Alea columns of a trace's jobs, with their users and real starts and ends.

    :raises ParseError: the trace cannot be read, or a line lacks the Alea columns
    """
    extra: List[List[str]] = []
    skipped: Dict[str, int] = {}
    rows = list(swf_rows(path, skipped, SwfHeader(), InputLimits(), extra))
    for k, (row, cols) in enumerate(zip(rows, extra)):
        user, submit, wait, run, wall = row[0], row[1], row[2], row[3], row[6]
        if len(cols) < 3:
            raise ParseError(f"{path}: job {k + 1} has no Alea columns (node list, queue, spec)")
        try:
            nodes = alea.node_ids(cols[0])
        except ValueError as err:
            raise ParseError(f"{path}: job {k + 1}: {err}") from None
        start = None if submit is None or wait is None else submit + wait
        end = None if start is None or run is None else start + run
        yield alea.AleaJob(wall, nodes, cols[1], cols[2], user, start, end)


def derive(trace_dir: str) -> Dict[str, sf.Site]:
    """Every bundled trace's site, by site file name (without ``.json``).

    :raises ParseError: a trace or the ``.machines`` file is missing or malformed
    """
    cerit = os.path.join(trace_dir, CERIT)
    machines_path = cerit.replace(".swf.gz", ".swf.machines")
    try:
        with open(machines_path, encoding="utf-8") as fh:
            machines = alea.parse_machines(fh.read(), machines_path)
    except OSError as err:
        raise ParseError(f"{machines_path}: {err.strerror}") from None
    except ValueError as err:
        raise ParseError(str(err)) from None
    out = {"cerit-sc-2013": alea.cerit_site(cerit_jobs(cerit), machines, "cerit-sc-2013")}
    for m in SWF_MACHINES:
        out[m.site] = _swf_site(m, trace_dir)
    out[SDSC_BLUE.site] = _swf_site(SDSC_BLUE, None)
    return out
