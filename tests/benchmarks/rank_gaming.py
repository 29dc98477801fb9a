"""What it costs a user to game the sort rank (issue 31), before and after paid evidence.

    python tests/benchmarks/rank_gaming.py

A 24 h x 128-cpu job (3,072 core-hours if it runs to its walltime). The user submits cheap
jobs with the same walltime (1 s to 1 h each, 1 or 128 processors) before it; printed: the
fewest core-hours of cheap jobs that bring its rank to 1 s, and to 1 h, with the key mean
alone (``unpaid_mean``, the rank until issue 31) and with the published rank
(``key_mean``, paid evidence), for a new user and for a user whose 10 newest jobs are
honest 20 h x 128-cpu runs of the same walltime. "never" means not within 100 cheap jobs
(the hook reads 100 rows).
"""

from softwalltime.hookpath import rank as hook_rank
from softwalltime.replay import rank

H = 3600
WALL = 24 * H
CPUS = 128
SCENARIOS = (("new user", []), ("10 honest 20 h jobs", [(20 * H, WALL, CPUS)] * 10))
RANKERS = (
    ("before (key mean)", hook_rank.unpaid_mean),
    ("after (paid evidence)", hook_rank.key_mean),
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


if __name__ == "__main__":
    main()
