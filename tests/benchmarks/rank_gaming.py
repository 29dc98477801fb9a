"""What it costs a user to game the sort rank (issue 31), before and after paid evidence.

    python tests/benchmarks/rank_gaming.py

A 24 h x 128-cpu job (3,072 core-hours if it runs to its walltime). The user submits cheap
jobs with the same walltime (1 s to 1 h each, 1 or 128 processors) before it; printed: the
fewest core-hours of cheap jobs that bring its rank to 1 s, and to 1 h, with the key mean
alone (``unpaid_mean``, the rank until issue 31) and with the published rank
(``paid_key_mean``, the rank key-mean-paid), for a new user and for a user whose 10 newest jobs are
honest 20 h x 128-cpu runs of the same walltime. "never" means not within 100 cheap jobs
(the hook reads 100 rows).

    python tests/benchmarks/rank_gaming.py honest TRACE...

What paid evidence costs honest users on a trace: each job ranked at submit from the
user's jobs ended by then (trace times, as ``rank_gap.py order``), before and after; printed:
the share of jobs whose rank the floor raises, and of the jobs that ran <= 10 min, the share
ranked above 1 h (a short job ranked long waits behind longer ones under a ``.rank`` sort).
"""

import sys

from softwalltime.core import rank as hook_rank
from softwalltime.replay import rank

H = 3600
WALL = 24 * H
CPUS = 128
SCENARIOS = (("new user", []), ("10 honest 20 h jobs", [(20 * H, WALL, CPUS)] * 10))
RANKERS = (
    ("before (key mean)", hook_rank.unpaid_mean),
    ("after (paid evidence)", hook_rank.paid_key_mean),
)


def main() -> None:
    print(f"job: {WALL // H} h x {CPUS} cpus = {WALL * CPUS / H:.0f} core-hours")
    for who, honest in SCENARIOS:
        for name, ranker in RANKERS:
            cells = []
            for target in (1, H):
                got = rank.gaming_cost(ranker, WALL, CPUS, honest, target, widths=(1, CPUS))
                if got is None:
                    cells.append(f"rank<={target} s: never")
                else:
                    cost, n, run_s, width = got
                    cells.append(
                        f"rank<={target} s: {cost:.4g} core-h ({n} jobs of {run_s} s x {width})"
                    )
            print(f"{who:<22}{name:<24}" + "; ".join(cells))


def honest(path: str) -> None:
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    import rank_gap  # the benchmark's trace reader (the simulator's jobs, end times)

    work, end, _procs = rank_gap.read(path)
    n = len(work.user)
    order = sorted(range(n), key=lambda k: (end[k], k))
    hist = rank.UserHistory()
    raised = short = short_long_before = short_long_after = 0
    e = 0
    for j in range(n):
        while e < n and end[order[e]] <= work.submit[j]:
            k = order[e]
            hist.add(work.user[k], (work.run[k], work.wall[k], work.procs[k]))
            e += 1
        rows = hist.of(work.user[j])
        before = hook_rank.unpaid_mean(work.wall[j], work.procs[j], rows)
        after = hook_rank.paid_key_mean(work.wall[j], work.procs[j], rows)
        raised += after > before
        if work.run[j] <= 600:
            short += 1
            short_long_before += before > H
            short_long_after += after > H
    print(
        f"{path.rsplit('/', 1)[-1]}: {n} jobs, rank raised by the floor {100 * raised / n:.1f} %;"
        f" jobs <= 10 min ranked > 1 h: {100 * short_long_before / short:.1f} % before,"
        f" {100 * short_long_after / short:.1f} % after"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["honest"]:
        for trace in sys.argv[2:]:
            honest(trace)
    else:
        main()
