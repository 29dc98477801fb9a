"""A prior for the ``calibrated`` predictor's site table, learned from public traces.

A new site's table is empty: every bin uses v3 until it has ``MIN_BIN_JOBS`` outcomes of its
own. The outcomes of the rules per bin hardly depend on the site (the cells count every
rule on every job, whatever the target), so the package ships a table learned from public
traces, ``softwalltime/data/calibrated_prior.json``: per bin, each rule's under-estimate
rate and mean accuracy (the mean over the traces that have jobs in the bin). A site starts
from it as ``PRIOR_JOBS`` pseudo-jobs per bin; its own finished jobs add to the same cells
and outweigh it as they accumulate.

The shipped file was built from CERIT-SC, HPC2N and CTC-SP2 (the traces the rules were
chosen on; KTH-SP2 and SDSC-SP2 stay validation) with::

    python -m softwalltime.replay.prior CERIT.swf.gz HPC2N.swf.gz CTC.swf.gz > prior.json
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..core import calibrated as cal
from ..errors import SoftwalltimeError
from .evaluate import ReplayColumns, replay_calibrated

PRIOR_PATH = Path(__file__).resolve().parents[1] / "data" / "calibrated_prior.json"
PRIOR_JOBS = 30  # pseudo-jobs per bin: as many as a bin needs to be used at all
FORMAT = 1


class PriorError(SoftwalltimeError, ValueError):
    """The prior file does not fit this version of the predictor (a packaging error)."""


def build_prior(workloads: Sequence[ReplayColumns], sources: Sequence[str]) -> Dict[str, Any]:
    """The prior of ``workloads`` (each replayed alone, from an empty table), as stored.

    :param sources: the names of the workloads (kept in the file)
    """
    rules = len(cal.RULES)
    under = [0.0] * (cal.BINS * rules)
    acc = [0.0] * (cal.BINS * rules)
    traces = [0] * cal.BINS
    for cols in workloads:
        # the cells do not depend on the target: every rule is counted on every job
        _softs, table = replay_calibrated(cols, cal.DEFAULT_TARGET_UNDER_PCT)
        for bin_ in range(cal.BINS):
            n = table.jobs[bin_]
            if n:
                traces[bin_] += 1
                base = bin_ * rules
                for k in range(base, base + rules):
                    under[k] += table.under[k] / n
                    acc[k] += table.acc[k] / n
    cells = []
    for bin_ in range(cal.BINS):
        if traces[bin_]:
            base = bin_ * rules
            m = traces[bin_]
            cells.append(
                [
                    bin_,
                    [round(under[k] / m, 6) for k in range(base, base + rules)],
                    [round(acc[k] / m, 6) for k in range(base, base + rules)],
                ]
            )
    return {
        "format": FORMAT,
        "rules": list(cal.RULES),
        "bins": cal.BINS,
        "sources": list(sources),
        "cells": cells,
    }


def prior_table(doc: Dict[str, Any], jobs: int = PRIOR_JOBS) -> cal.Calibration:
    """A table holding the prior as ``jobs`` pseudo-jobs per bin it covers.

    :raises PriorError: the prior was built for other rules or bins
    """
    if doc.get("format") != FORMAT:
        raise PriorError(f"format {doc.get('format')!r}, expected {FORMAT}")
    if doc.get("rules") != list(cal.RULES) or doc.get("bins") != cal.BINS:
        raise PriorError("built for other rules or bins of the predictor calibrated")
    rules = len(cal.RULES)
    table = cal.Calibration()
    for bin_, under, acc in doc["cells"]:
        if not 0 <= bin_ < cal.BINS or len(under) != rules or len(acc) != rules:
            raise PriorError(f"malformed cell of bin {bin_!r}")
        table.jobs[bin_] = jobs
        base = bin_ * rules
        for k in range(rules):
            table.under[base + k] = round(jobs * float(under[k]))
            table.acc[base + k] = jobs * float(acc[k])
    return table


def load_prior(path: Optional[Path] = None) -> cal.Calibration:
    """The shipped prior as a starting table.

    :raises PriorError: the file is missing, unreadable or for another predictor version
    """
    path = PRIOR_PATH if path is None else path
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
    except (OSError, ValueError) as err:
        raise PriorError(f"cannot read the prior {path}: {err}") from err
    try:
        return prior_table(doc)
    except PriorError as err:
        raise PriorError(f"{path}: {err}; rebuild it (python -m {__name__})") from err


def main(argv: Optional[List[str]] = None) -> int:
    """Build the prior from SWF traces given on the command line; print it as JSON."""
    from .evaluate import columns
    from .traces import read_sources

    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print(f"usage: python -m {__name__} TRACE... > prior.json", file=sys.stderr)
        return 2
    workloads = [columns(read_sources([p]).jobs)[0] for p in paths]
    doc = build_prior(workloads, [os.path.basename(p) for p in paths])
    json.dump(doc, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
