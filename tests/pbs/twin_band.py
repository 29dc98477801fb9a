"""The model's figures under the twin's whole-second uncertainty (pure; issue 29).

A twin job is a ``sleep`` of whole seconds, but it lasts its sleep plus the time PBS takes
to start and end it (about 0.6 s here), and the server sees its end somewhere in the
second after. The model reads whole seconds, so it cannot know on which side of a second
each end falls, and at the twin's compressions (x100-x400) one second is minutes of the
trace: the mean wait and bounded slowdown of one simulation move with it by more than the
5 % the comparison asks (``python tests/benchmarks/bench_twin.py`` prints the band).

:func:`band` simulates the replay ``draws`` times, each job running its sleep plus an
overrun drawn from those the server measured (end - start - sleep, whole seconds, at
least 0), and gives the spread of the simulated figures with the real ones beside them.
"""

from __future__ import annotations

import random
from typing import Callable, NamedTuple, Optional, Sequence

import twin

from softwalltime.replay import pbsched

DRAWS = 100


class Band(NamedTuple):
    draws: int
    overruns: dict[int, int]  # the measured overruns (s) and how many jobs had each
    wait: tuple[float, float, float]  # simulated mean wait, s: p5, median, p95 of the draws
    bsld: tuple[float, float, float]  # simulated mean bsld: p5, median, p95
    wait_real: float
    bsld_real: float
    outside: list[tuple[int, int, int, int]]  # (job, real start, earliest, latest simulated)
    starts: list[list[int]]  # each job's simulated starts, one per draw, sorted


def overruns(jobs: Sequence[twin.TwinJob], runs: Sequence[int]) -> list[int]:
    """How much longer than its sleep each job ran, as the server measured it (>= 0)."""
    return [max(0, r - j.run) for j, r in zip(jobs, runs)]


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """p5, median and p95 (nearest rank) of ``values``."""
    s = sorted(values)
    n = len(s)

    def rank(q: float) -> float:
        return s[min(n - 1, max(0, round(q * (n - 1))))]

    return rank(0.05), rank(0.5), rank(0.95)


def band(
    jobs: Sequence[twin.TwinJob],
    submit: Sequence[int],
    real: Sequence[int],
    runs: Sequence[int],
    soft: Sequence[int | None],
    procs: int,
    policy: pbsched.Policy,
    epoch: int,
    bound: float,
    draws: int = DRAWS,
    seed: int = 0,
    simulate: Optional[Callable[[list[twin.TwinJob]], list[int]]] = None,
) -> Band:
    """The replay (``jobs`` released at ``submit``, started at ``real``, run ``runs`` s as
    measured) simulated ``draws`` times with run times of sleep + a measured overrun drawn
    at random (``seed``); bsld with the planned run times and ``bound``, as
    :func:`twin.compare`'s. ``simulate``: the starts of the jobs with their drawn run
    times, when the replay's simulation is not :func:`twin.simulate`'s (the live source's
    reads the product's outputs)."""
    if draws < 1:
        raise ValueError("draws must be at least 1")
    measured = overruns(jobs, runs)
    rng = random.Random(seed)
    waits: list[float] = []
    bslds: list[float] = []
    per_job: list[list[int]] = [[] for _ in jobs]
    c = None
    for _ in range(draws):
        drawn = [j._replace(run=j.run + rng.choice(measured)) for j in jobs]
        if simulate is None:
            starts = twin.simulate(drawn, submit, soft, procs, policy, epoch)
        else:
            starts = simulate(drawn)
        c = twin.compare(jobs, submit, real, starts, 0, bound)
        waits.append(c.wait_sim)
        bslds.append(c.bsld_sim)
        for k, s in enumerate(starts):
            per_job[k].append(s)
    assert c is not None
    counts = {x: measured.count(x) for x in sorted(set(measured))}
    for drawn_starts in per_job:
        drawn_starts.sort()
    out = [
        (k, real[k], ss[0], ss[-1])
        for k, ss in enumerate(per_job)
        if not ss[0] <= real[k] <= ss[-1]
    ]
    out.sort(key=lambda o: (min(o[1], o[2]), o[0]))
    return Band(draws, counts, spread(waits), spread(bslds), c.wait_real, c.bsld_real, out, per_job)


def job_line(b: Band, k: int, real: Sequence[int]) -> str:
    """Job ``k``'s real start against its simulated starts in the draws."""
    ss = b.starts[k]
    lo, mid, hi = spread([float(s) for s in ss])
    near = sum(abs(s - real[k]) <= 2 for s in ss)
    return (
        f"#{k}: real start {real[k]}; simulated min {ss[0]}, p5 {lo:g}, median {mid:g}, p95 {hi:g},"
        f" max {ss[-1]}; within 2 s of the real start in {near} of {len(ss)} draws"
    )


def _line(name: str, real: float, p: tuple[float, float, float], fmt: str) -> str:
    lo, mid, hi = p
    off = twin.relative(real, mid)
    inside = "inside" if lo <= real <= hi else "outside"
    return (
        f"{name}  real {real:{fmt}}  simulated median {mid:{fmt}} ({twin._pct(off)}),"
        f" p5-p95 {lo:{fmt}}-{hi:{fmt}}: real {inside}"
    )


def report(
    b: Band,
    jobs: Sequence[twin.TwinJob],
    submit: Sequence[int],
    ids: Sequence[str] = (),
    first: int = 5,
) -> str:
    """The band as text, then the first ``first`` jobs that started outside every draw."""
    over = ", ".join(f"{k} s: {n}" for k, n in b.overruns.items())
    lines = [
        f"draws {b.draws}, each job its sleep + an overrun drawn from the measured ones ({over})",
        _line("mean wait", b.wait_real, b.wait, ".1f"),
        _line("mean bsld", b.bsld_real, b.bsld, ".3f"),
        f"jobs started outside every draw's start: {len(b.outside)} of {len(jobs)}",
    ]
    if b.outside:
        lines.append("first of them: #k (pbs id) submit procs run  real  simulated earliest-latest")
    for k, real, lo, hi in b.outside[:first]:
        pid = f" ({ids[k]})" if k < len(ids) else ""
        j = jobs[k]
        lines.append(f"  #{k}{pid} {submit[k]:6d} {j.procs:5d} {j.run:4d}  {real:5d}  {lo}-{hi}")
    return "\n".join(lines)
