"""What a replayed job's values may be: the plausible bounds, declared once for every reader.

A value outside its bound is no measurement but a broken record (an SWF line with
10^15-second fields, a run time of minus the submit time, 2^31 - 1 as "unlimited"): the
readers of ``evaluate`` and ``simulate`` (SWF, PBS accounting, ``--db``) skip such a job and
count it under the bound's reason, which the commands print with the other skip counts.
Unknown values (SWF's ``-1``, a missing attribute) are not checked here: the replay's own
rules skip the jobs that need them.

Why these numbers, from the real traces in the Parallel Workloads Archive (the largest values
in the eight traces the tests read: requested time 100 days (HPC2N), run time 62 days
(CERIT-SC), wait 159 days (METACENTRUM), 9,216 processors (LLNL Atlas)):

- durations (wait, run time, requested time): 0 to 10 years. Sites without a walltime limit
  see requests such as ``9999:00:00`` (417 days), which are kept; LLNL Atlas's one request of
  23 years and PBS's 2^31 - 1 s (68 years) are not. Ten years of hours (87,600.00) still fit
  the report's columns.
- submit time: 0 (the epoch, or the start of a trace with relative times) to 2100-01-01.
- processors: 0 to 10^8, ten times the largest machine built (about 10^7 cores). Zero is
  kept: some traces record 0 requested processors (METACENTRUM-2009), and ``simulate`` skips
  jobs without processors by its own rule.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

YEAR_S = 365 * 86400


class Bound(NamedTuple):
    """The plausible range of one value, and the skip reason of a job outside it."""

    name: str
    low: int
    high: int
    reason: str


SUBMIT = Bound("submit time", 0, 4102444800, "submit time before 1970 or after 2099")
WAIT = Bound("wait time", 0, 10 * YEAR_S, "wait time < 0 or > 10 years")
RUNTIME = Bound("run time", 0, 10 * YEAR_S, "run time < 0 or > 10 years")
WALLTIME = Bound("requested time", 0, 10 * YEAR_S, "requested time < 0 or > 10 years")
PROCS = Bound("processors", 0, 10**8, "processors < 0 or > 10^8")
# In the order they are checked: a job beyond several bounds counts under the first.
BOUNDS = (SUBMIT, WAIT, RUNTIME, WALLTIME, PROCS)


def implausible(
    submit_s: Optional[int],
    wait_s: Optional[int],
    runtime_s: Optional[int],
    walltime_s: Optional[int],
    procs: Optional[int],
    other_procs: Optional[int] = None,
) -> Optional[str]:
    """The skip reason of the first value outside its bound, or ``None`` if all are plausible.

    ``None`` (unknown) passes. Written out rather than looped over :data:`BOUNDS`: readers
    call it once per line of traces with 10^5-10^6 lines.

    :param submit_s: submit time, epoch (or trace-relative) seconds
    :param wait_s: start - submit, seconds
    :param runtime_s: run time, seconds
    :param walltime_s: requested time, seconds
    :param procs: processors (SWF: allocated)
    :param other_procs: a second processor count checked the same way (SWF: requested)
    """
    if submit_s is not None and not SUBMIT.low <= submit_s <= SUBMIT.high:
        return SUBMIT.reason
    if wait_s is not None and not WAIT.low <= wait_s <= WAIT.high:
        return WAIT.reason
    if runtime_s is not None and not RUNTIME.low <= runtime_s <= RUNTIME.high:
        return RUNTIME.reason
    if walltime_s is not None and not WALLTIME.low <= walltime_s <= WALLTIME.high:
        return WALLTIME.reason
    if procs is not None and not PROCS.low <= procs <= PROCS.high:
        return PROCS.reason
    if other_procs is not None and not PROCS.low <= other_procs <= PROCS.high:
        return PROCS.reason
    return None
