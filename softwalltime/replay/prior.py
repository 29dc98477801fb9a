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

The predictor ``learned`` has its own, ``softwalltime/data/learned_prior.json`` (its whole
table of the same three traces, scaled by ``LEARNED_SCALE``), built with ``--learned``
first.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..core import calibrated as cal
from ..core import learned
from ..errors import SoftwalltimeError
from .evaluate import ReplayColumns, replay_calibrated, replay_learned
from .learned_native import new_learner

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
        return prior_table(_read(path))
    except PriorError as err:
        raise PriorError(f"{path}: {err}; rebuild it (python -m {__name__})") from err


def _read(path: Path) -> Any:
    """The JSON document at ``path``; a PriorError (without the path) if unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as err:
        raise PriorError(f"cannot read the prior: {err}") from err


def main(argv: Optional[List[str]] = None) -> int:
    """Build the prior from SWF traces given on the command line; print it as JSON."""
    from .evaluate import columns
    from .trace_readers import read_sources

    paths = sys.argv[1:] if argv is None else argv
    build = build_prior
    if paths and paths[0] == "--learned":
        paths = paths[1:]
        build = build_learned_prior
    if not paths:
        print(f"usage: python -m {__name__} [--learned] TRACE... > prior.json", file=sys.stderr)
        return 2
    workloads = [columns(read_sources([p]).jobs)[0] for p in paths]
    doc = build(workloads, [os.path.basename(p) for p in paths])
    json.dump(doc, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


# --- the prior of the predictor ``learned`` (issue 31)

LEARNED_PRIOR_PATH = PRIOR_PATH.parent / "learned_prior.json"
# The learned table of the traces counts as this share of their jobs: enough to choose
# well from a site's first job, few enough that the site's own jobs soon outweigh it
# (x 1, the full counts, gave CERIT-SC 0.36 points over its target; x 0.2 within 0.25).
LEARNED_SCALE = 0.2
LEARNED_FORMAT = 1


def build_learned_prior(
    workloads: Sequence[ReplayColumns], sources: Sequence[str]
) -> Dict[str, Any]:
    """The ``learned`` table after replaying ``workloads`` into one table, scaled by
    :data:`LEARNED_SCALE`, as stored (the cells count every rule on every job, so they do
    not depend on the order or the target)."""
    table = new_learner()
    for cols in workloads:
        replay_learned(cols, None, table)
    scale = LEARNED_SCALE

    def cells(counts: List[float], under: List[List[float]], acc: List[List[float]]) -> List[Any]:
        out = []
        for bin_, n in enumerate(counts):
            if n:
                out.append(
                    [
                        bin_,
                        round(n * scale, 3),
                        [round(u * scale, 3) for u in under[bin_]],
                        [round(a * scale, 3) for a in acc[bin_]],
                    ]
                )
        return out

    return {
        "format": LEARNED_FORMAT,
        "rules": list(learned.RULES),
        "bins": [learned.COARSE, learned.FINE],
        "scale": scale,
        "sources": list(sources),
        "site": cells([table.n_site], [table.u_site], [table.a_site]),
        "coarse": cells(table.n_coarse, table.u_coarse, table.a_coarse),
        "fine": cells(table.n_fine, table.u_fine, table.a_fine),
    }


def learned_prior_table(doc: Dict[str, Any]) -> learned.Learner:
    """A ``learned`` table starting from the stored prior.

    :raises PriorError: built for other rules or bins, or malformed
    """
    if doc.get("format") != LEARNED_FORMAT:
        raise PriorError(f"format {doc.get('format')!r}, expected {LEARNED_FORMAT}")
    if doc.get("rules") != list(learned.RULES) or doc.get("bins") != [
        learned.COARSE,
        learned.FINE,
    ]:
        raise PriorError("built for other rules or bins of the predictor learned")
    table = new_learner()
    k = learned.N_RULES
    site = [table.n_site]
    site_u = [table.u_site]
    site_a = [table.a_site]
    levels = (
        ("site", site, site_u, site_a),
        ("coarse", table.n_coarse, table.u_coarse, table.a_coarse),
        ("fine", table.n_fine, table.u_fine, table.a_fine),
    )
    for name, counts, under, acc in levels:
        for bin_, n, u, a in doc.get(name, []):
            if not 0 <= bin_ < len(counts) or len(u) != k or len(a) != k:
                raise PriorError(f"malformed {name} cell {bin_!r}")
            counts[bin_] = float(n)
            under[bin_] = [float(x) for x in u]
            acc[bin_] = [float(x) for x in a]
    table.n_site = site[0]
    table.u_site = site_u[0]
    table.a_site = site_a[0]
    return table


def load_learned_prior(path: Optional[Path] = None) -> learned.Learner:
    """The shipped ``learned`` prior as a starting table.

    :raises PriorError: the file is missing, unreadable or for another predictor version
    """
    path = LEARNED_PRIOR_PATH if path is None else path
    try:
        return learned_prior_table(_read(path))
    except PriorError as err:
        raise PriorError(f"{path}: {err}; rebuild it (python -m {__name__} --learned)") from err


if __name__ == "__main__":
    sys.exit(main())
