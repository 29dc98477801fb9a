"""A family of ``job_sort_formula`` expressions PBS can run, and the admin's tolerances (pure).

**The family** (:class:`Params`): a bounded expansion factor, an aging term and a width
term, highest first::

    (eligible_time + S) / (E + S) + eligible_time / A + L * E / 86400 + W * ncpus / P
        + F * fairshare_factor

or, with the power 2 (:attr:`Params.power`), the first term ``3600 * (eligible_time + S) /
((E + S) * (E + S))``: the expansion factor per hour of estimate, nearer to shortest
first (KTH-SP2's first half, users' walltimes, with an age of 24 h: mean bsld 4.12 against
4.66 with the power 1 and 4.17 for shortest first, whose longest wait is twice as long).

- ``E``, the estimate: ``(soft_walltime or walltime)``, or with the rank key
  ``(softwalltime_rank or soft_walltime or walltime)``;
- ``S`` (:attr:`Params.smooth_s`): the expansion factor's bound, 600 s as the bounded
  slowdown's, so that jobs under 10 minutes are not ordered by a few seconds;
- ``A`` (:attr:`Params.age_h`, hours; 0: no term): one unit of priority per ``A`` waited,
  whatever the job's length. The expansion factor of a 2-day job grows by 1/48 an hour; the
  age term lets it catch up with shorter jobs, and bounds how long anything waits;
- ``L`` (:attr:`Params.length`; 0: no term): ``L`` units per day of estimate, a head start
  for long jobs, whose expansion factor grows slowly and whose p95 wait a sort by it
  pushes up (KTH-SP2's first half: long jobs' p95 33.4 h under the expansion factor by
  the rank, 15.1 h with ``L`` 4, against 22.5 h under FCFS);
- ``W`` (:attr:`Params.width`; 0: no term): ``W`` units for a job as wide as the machine
  (``P`` its processors), so that wide jobs, which rarely fit, are not starved;
- ``F`` (:attr:`Params.fairshare`; 0: no term; only on a site with fairshare): a term
  ``+ F * fairshare_factor``, the user's ``2 ** -(usage / share)`` in (0, 1]: the lighter
  user's job first by up to ``F`` units. Without it fairshare only breaks the formula's
  ties, which a formula of waited time rarely has. ``F`` 4 was chosen on KTH-SP2's first
  half (docs/simulate.md, Fairshare): against 0, more candidates within the tolerances
  (5 of 72 against 2) and a lower best score; 16 and 64 push wide jobs' p95 wait up.

**What PBS accepts.** OpenPBS 23.06.06 checks a formula at ``qmgr`` time in a Python
sub-interpreter (``src/server/sched_func.c:120-300``, ``validate_job_formula``): it must be a
Python expression (else ``PBSE_BAD_FORMULA``) over the names of resources and the keywords
``eligible_time``, ``queue_priority``, ``job_priority``, ``fair_share_perc``... (else
``PBSE_BAD_FORMULA_KW``), the resources numeric (long, size, float: else
``PBSE_BAD_FORMULA_TYPE``, ``:197-207``); ``from math import *`` is in scope there
(``:237``). The scheduler evaluates it per job with ``eval("<formula>", globals_dict,
locals())`` (``src/scheduler/job_info.cpp:4049``), the formula pasted between double
quotes, and uses 0 when it raises (``:4057-4071``). So :func:`expression` emits only
``+ - * /``, parentheses, ``or``, decimal numbers and the names of
:data:`~.pbsched.NAMES` (no quotes, no backslash; no math function, which the scheduler
has, ``fifo.cpp:174-180``, but the simulator does not evaluate), and
:func:`check_pbs_form` holds any formula to that form.
"""

from __future__ import annotations

import itertools
import re
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from . import pbsched

ESTIMATE = "estimate"  # the key E: the soft walltime, else the walltime
RANK = "rank"  # the key E: softwalltime_rank, else the soft walltime, else the walltime
KEYS = (ESTIMATE, RANK)
_E = {ESTIMATE: "(soft_walltime or walltime)", RANK: pbsched._RANK}
SMOOTH_S = 600  # the bounded slowdown's bound
FAIRSHARE_FACTOR = "fairshare_factor"
"""The fairshare term ``F`` weighs: ``2 ** -(usage / fairshare_perc)``, in (0, 1] (0 for
an entity without shares), the keyword PBS's formula reads (``FORMULA_FSFACTOR``,
``src/include/pbs_share.h:60``; accepted by qmgr, ``src/server/sched_func.c:214``;
evaluated, ``src/scheduler/job_info.cpp:4034``)."""

# The grid the search runs (per key and estimate source): 2 powers x 3 ages x 2 lengths x
# 2 widths. The width matters where wide jobs' p95 wait is the bound that binds (CTC-SP2,
# SDSC-SP2); each value a dimension gets doubles the search's time.
POWERS = (1, 2)
AGES_H = (0.0, 72.0, 24.0)
LENGTHS = (0.0, 1.0)
WIDTHS = (0.0, 8.0)
FAIRSHARES = (0.0, 4.0)
"""The fairshare weights ``F`` the grid tries when the site has fairshare
(:func:`candidates`); without it, 0 only."""


class Params(NamedTuple):
    """One formula of the family (see the module)."""

    key: str = ESTIMATE
    smooth_s: int = SMOOTH_S
    age_h: float = 0.0
    width: float = 0.0
    length: float = 0.0
    power: int = 1
    fairshare: float = 0.0

    @property
    def label(self) -> str:
        """A short name: ``xf``, ``xf2``, ``.rank``, ``+age24h``, ``+len1``, ``+w8``,
        ``+fs4``."""
        text = ("xf" if self.power == 1 else "xf2") + (".rank" if self.key == RANK else "")
        if self.age_h:
            text += f"+age{_num(self.age_h)}h"
        if self.length:
            text += f"+len{_num(self.length)}"
        if self.width:
            text += f"+w{_num(self.width)}"
        if self.fairshare:
            text += f"+fs{_num(self.fairshare)}"
        return text


_LABEL = re.compile(
    r"^xf(?P<power>2?)(?P<rank>\.rank)?(?:\+age(?P<age>\d+(?:\.\d+)?)h)?"
    r"(?:\+len(?P<len>\d+(?:\.\d+)?))?(?:\+w(?P<w>\d+(?:\.\d+)?))?"
    r"(?:\+fs(?P<fs>\d+(?:\.\d+)?))?$"
)


def parse_label(text: str) -> Params:
    """The formula a :attr:`Params.label` names (``xf2.rank+age72h+len1+w8+fs4``).

    :raises ValueError: not a label of this family
    """
    m = _LABEL.match(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a formula label (e.g. xf, xf2.rank+age72h+len1+w8)")
    return Params(
        key=RANK if m.group("rank") else ESTIMATE,
        age_h=float(m.group("age") or 0),
        width=float(m.group("w") or 0),
        length=float(m.group("len") or 0),
        power=2 if m.group("power") else 1,
        fairshare=float(m.group("fs") or 0),
    )


def _num(x: float) -> str:
    # A decimal literal PBS's Python reads back as the same number: no exponent, no
    # trailing zeros ("24", "0.5").
    text = f"{x:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def expression(p: Params, procs_total: int, time_scale: float = 1.0) -> str:
    """The ``job_sort_formula`` of ``p`` on a machine of ``procs_total`` processors.
    ``time_scale``: every time the formula reads is that many times shorter (a twin replay
    compresses time); its constants in seconds shrink with them, so that it orders jobs as
    at full time.

    :raises ValueError: unknown key, negative parameter, no processors or a scale that
        leaves the smoothing under a second
    """
    if p.key not in KEYS:
        raise ValueError(f"formula key must be one of {KEYS}, not {p.key!r}")
    if p.smooth_s < 1 or min(p.age_h, p.width, p.length, p.fairshare) < 0 or procs_total < 1:
        raise ValueError("smooth_s >= 1, age_h, length, width, fairshare >= 0 and procs_total >= 1")
    if p.power not in (1, 2):
        raise ValueError(f"formula power must be 1 or 2, not {p.power!r}")
    if time_scale <= 0 or p.smooth_s / time_scale < 1:
        raise ValueError(f"time_scale must be in (0, {p.smooth_s}], not {time_scale!r}")
    e, s = _E[p.key], _num(p.smooth_s / time_scale)
    if p.power == 1:
        text = f"(eligible_time + {s}) / ({e} + {s})"
    else:
        hour = _num(3600.0 / time_scale)
        text = f"{hour} * (eligible_time + {s}) / (({e} + {s}) * ({e} + {s}))"
    if p.age_h:
        text += f" + eligible_time / {_num(p.age_h * 3600.0 / time_scale)}"
    if p.length:
        text += f" + {_num(p.length)} * {e} / {_num(86400.0 / time_scale)}"
    if p.width:
        text += f" + {_num(p.width)} * ncpus / {procs_total}"
    if p.fairshare:
        text += f" + {_num(p.fairshare)} * {FAIRSHARE_FACTOR}"
    return text


_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<name>[A-Za-z_]\w*)|(?P<op>[-+*/()]))")


_DEPTH = re.compile(r"^(?P<label>.+)-bf(?P<depth>\d+)$")


def policy_text(name: str, procs_total: int, time_scale: float = 1.0) -> str:
    """``name`` as :func:`.pbsched.parse_policy` reads it: a label of the family, with
    ``-bfK`` for a backfill_depth K (``xf2.rank+len1-bf3``), becomes its :func:`expression`
    on ``procs_total`` processors and ``time_scale`` with ``-bfK`` (else ``-bf1``), as the
    search runs its candidates; anything else (``fcfs-bf1``) is returned as it is."""
    label, depth = name, "1"
    deep = _DEPTH.match(name)
    if deep:
        label, depth = deep.group("label"), deep.group("depth")
    try:
        params = parse_label(label)
    except ValueError:
        return name
    return f"{expression(params, procs_total, time_scale)}-bf{int(depth)}"


def check_pbs_form(text: str) -> None:
    """Check that ``text`` is in the form :func:`expression` emits (see the module).

    :raises ValueError: another character, name or construct
    """
    pos, names = 0, set(pbsched.NAMES) | set(pbsched.FAIRSHARE_NAMES) | {"or"}
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"job_sort_formula {text!r}: unexpected {text[pos:].strip()[:10]!r}")
        if m.group("name") and m.group("name") not in names:
            raise ValueError(f"job_sort_formula {text!r}: unknown name {m.group('name')!r}")
        pos = m.end()
    pbsched.sort_formula(text)  # a Python expression over known names


DEEPER_DEPTH = 3
"""The backfill_depth of the search's second look at the first half's best (1 otherwise)."""
DEEPER_TOP = 12
"""How many of the first half's best (by mean bsld, whatever the tolerances) run again with
DEEPER_DEPTH top jobs: more reservations protect the wide and long jobs a formula passes
over, at some cost in backfilling (on KTH-SP2 ``xf2.rank+len1`` with v3 breaks a tolerance
on the first half at depth 1 and keeps them all at 3)."""


class Candidate(NamedTuple):
    """A formula with the estimates the hook sets as soft walltimes, and the server's
    backfill_depth it runs with."""

    source: str
    params: Params
    depth: int = 1

    @property
    def label(self) -> str:
        """The formula's label, with ``-bfK`` for a backfill_depth K other than 1."""
        return self.params.label + ("" if self.depth == 1 else f"-bf{self.depth}")


def candidates(sources: Sequence[str], fairshare: bool = False) -> List[Candidate]:
    """The grid (:data:`POWERS` x :data:`AGES_H` x :data:`LENGTHS` x :data:`WIDTHS`, and
    x :data:`FAIRSHARES` when the site has ``fairshare``) per estimate source, with the
    rank key for every source but the users' walltimes (the hook that publishes the rank
    sets soft walltimes too) and ``perfect`` (no site has it)."""
    out = []
    weights = FAIRSHARES if fairshare else (0.0,)
    for source in sources:
        keys = [ESTIMATE] + ([RANK] if source not in ("users", "perfect") else [])
        grid = itertools.product(keys, POWERS, AGES_H, LENGTHS, WIDTHS, weights)
        for key, power, age, length, width, f in grid:
            params = Params(key, SMOOTH_S, age, width, length, power, f)
            out.append(Candidate(source, params))
    return out


# ---------------------------------------------------------------------------------------
# Tolerances

SLACK_H = 0.1
"""A bound is broken only by more than this (6 minutes, a tenth of an hour: less than
PBS's 600-s scheduler_iteration, the pace at which a waiting job is looked at again), never
by seconds."""
CLASSES = ("short", "long", "wide")


class Tolerances(NamedTuple):
    """What a formula may cost against the baseline (fcfs-bf1, the users' walltimes)."""

    p95_pct: float = 10.0
    """The p95 wait of short, long and wide jobs may be this much worse (%)."""
    max_factor: float = 2.0
    """The longest wait of any job may be this many times the baseline's."""


class Waits(NamedTuple):
    """One simulation's figures (hours; a class without jobs: None)."""

    bsld: float
    """Mean bounded slowdown (10-minute bound)."""
    wait_mean_h: float
    p95: Dict[str, Optional[float]]
    """The p95 wait of each class of :data:`CLASSES`."""
    max_h: float
    """The longest wait of any job."""
    wide_max_h: Optional[float]
    """The longest wait of a wide job."""


def limits(base: Waits, tol: Tolerances) -> Dict[str, float]:
    """The most each figure may be (hours), by name: ``short_p95``, ``long_p95``,
    ``wide_p95``, ``max`` (a class the baseline lacks has none)."""
    out = {}
    for c in CLASSES:
        b = base.p95[c]
        if b is not None:
            out[f"{c}_p95"] = b * (1.0 + tol.p95_pct / 100.0) + SLACK_H
    out["max"] = base.max_h * tol.max_factor + SLACK_H
    return out


def _value(w: Waits, name: str) -> Optional[float]:
    return w.max_h if name == "max" else w.p95[name[: -len("_p95")]]


def breaches(row: Waits, base: Waits, tol: Tolerances) -> List[Tuple[str, float, float]]:
    """The tolerances ``row`` breaks: ``(figure, its value, the baseline's)`` (hours)."""
    out = []
    for name, most in limits(base, tol).items():
        v = _value(row, name)
        if v is not None and v > most:
            b = _value(base, name)
            out.append((name, v, b if b is not None else 0.0))
    return out


def used(row: Waits, base: Waits, tol: Tolerances) -> float:
    """The largest share of its bound (:func:`limits`) a figure of ``row`` uses: above 1, a
    breach (0 when ``row`` has none of the figures)."""
    out = 0.0
    for name, most in limits(base, tol).items():
        v = _value(row, name)
        if v is not None:
            out = max(out, v / most)
    return out


def hours(h: float) -> str:
    """A wait to read and compare: two decimals of hours, with minutes and seconds under 10
    hours (``0.05 h`` and ``0.05 h`` a second apart print as ``2:58`` and ``2:59``)."""
    if h >= 10.0:
        return f"{h:.1f} h"
    s = int(round(h * 3600.0))
    return f"{h:.2f} h ({s // 3600}:{s // 60 % 60:02d}:{s % 60:02d})"


def gives_up(row: Waits, base: Waits, tol: Tolerances) -> str:
    """What ``row`` costs against the baseline, in words (``nothing`` within tolerances)."""
    parts = []
    for name, v, b in breaches(row, base, tol):
        change = f"{100.0 * (v - b) / b:+.0f} %" if b > 0 else "from 0"
        what = name.replace("_p95", " p95").replace("max", "longest wait")
        parts.append(f"{what} {change} ({b:.1f} -> {v:.1f} h)")
    return "; ".join(parts) or "nothing"


def front(points: Sequence[Tuple[float, ...]]) -> List[int]:
    """The indices of the Pareto-optimal points (every coordinate: lower is better), in
    their order; a point equal to another one on the front is left off."""
    out: List[int] = []
    for i, p in enumerate(points):
        dominated = False
        for k, q in enumerate(points):
            if k == i:
                continue
            if all(a <= b for a, b in zip(q, p)) and (q != p or k < i):
                dominated = True
                break
        if not dominated:
            out.append(i)
    return out
