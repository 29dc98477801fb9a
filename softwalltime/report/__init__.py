"""``softwalltime report``: what the deployed soft walltimes did, from ``finished_jobs``.

The figures follow Chlumsky and Klusacek, sections 3.2-4 (Figures 5-10): errors of the
soft walltimes against the users' walltimes per month x runtime class and per queue, per
user, the under-estimates, the workload before and after deployment, and wait time and
bounded slowdown per runtime class. Every number is aggregated in PostgreSQL
(:mod:`.queries`); :mod:`.html` only draws them (inline SVG, no network).
"""

from __future__ import annotations

from ..errors import SoftwalltimeError


class NothingToReportError(SoftwalltimeError):
    """The history holds nothing to compare (no jobs, or none with a soft walltime)."""
