"""What it costs a user to game the sort rank (issue 31), before and after paid evidence.

    python tests/benchmarks/rank_gaming.py

A 24 h x 128-cpu job (3,072 core-hours if it runs to its walltime). The user submits cheap
jobs with the same walltime (1 s to 1 h each, 1 or 128 processors) before it; printed: the
fewest core-hours of cheap jobs that bring its rank to 1 s, and to 1 h, with the key mean
alone (``unpaid_mean``, the rank until issue 31) and with the published rank
(``paid_key_mean``, the rank key-mean-paid), for a new user and for a user whose 10 newest jobs are
honest 20 h x 128-cpu runs of the same walltime. "never" means not within 100 cheap jobs
(the hook reads 100 rows).

The rank ``learned`` (the predictor ``learned``'s own: the rule of best accuracy in the
job's bin) depends on the site's table: by default the shipped prior
(``prior.load_learned_prior``, what ``softwalltime calibrate`` starts from), with
``--table TRACE`` the table of a Learner replayed over that trace from empty (as
``evaluate --predictors learned`` replays it). Its history is the hook's: the cheap jobs end
just before the big job's submit (the time since the last end is seconds). The rank
``learned-paid`` is it with key-mean-paid's floor (``core.rank.paid_floor``).

    python tests/benchmarks/rank_gaming.py honest TRACE...

What paid evidence costs honest users on a trace: each job ranked at submit from the
user's jobs ended by then (trace times, as ``rank_gap.py order``), before and after; printed:
the share of jobs whose rank the floor raises, and of the jobs that ran <= 10 min, the share
ranked above 1 h (a short job ranked long waits behind longer ones under a ``.rank`` sort).
"""

import argparse
import sys
from typing import Callable, List, Optional, Sequence, Tuple

from softwalltime.core import learned_site as ls
from softwalltime.core import rank as hook_rank
from softwalltime.replay import rank
from softwalltime.replay.evaluate import columns, replay_learned
from softwalltime.replay.prior import load_learned_prior
from softwalltime.replay.trace_readers import read_sources

H = 3600
WALL = 24 * H
CPUS = 128
SCENARIOS = (("new user", []), ("10 honest 20 h jobs", [(20 * H, WALL, CPUS)] * 10))
Ranker = Callable[..., int]  # a ranker of core.rank or rank.learned_ranker
RANKERS: Tuple[Tuple[str, Ranker], ...] = (
    ("key-mean (before)", hook_rank.unpaid_mean),
    ("key-mean-paid", hook_rank.paid_key_mean),
)


def learned_table(trace: Optional[str]) -> ls.LearnedChoices:
    """The decisions of the shipped prior, or of a Learner replayed over ``trace``."""
    if trace is None:
        return ls.LearnedChoices.from_learner(load_learned_prior())
    cols = columns(read_sources([trace]).jobs)[0]
    return ls.LearnedChoices.from_learner(replay_learned(cols, None)[1])


def cell(ranker: Ranker, honest: Sequence[rank.Row], target: int) -> str:
    got = rank.gaming_cost(ranker, WALL, CPUS, honest, target, widths=(1, CPUS))
    if got is None:
        return f"rank<={target} s: never"
    cost, n, run_s, width = got
    return f"rank<={target} s: {cost:.4g} core-h ({n} jobs of {run_s} s x {width})"


def main(table: Optional[str]) -> None:
    choices = learned_table(table)
    rankers: List[Tuple[str, Ranker]] = list(RANKERS)
    rankers.append(("learned", rank.learned_ranker(choices)))
    rankers.append(("learned-paid", rank.learned_ranker(choices, paid=True)))
    print(f"job: {WALL // H} h x {CPUS} cpus = {WALL * CPUS / H:.0f} core-hours")
    print(f"learned's table: {table or 'the shipped prior'}")
    for who, honest in SCENARIOS:
        for name, ranker in rankers:
            cells = [cell(ranker, honest, target) for target in (1, H)]
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
        parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
        parser.add_argument("--table", metavar="TRACE", help="learned's table from TRACE")
        main(parser.parse_args().table)
