"""The pure decision of the predictor ``learned`` (issue 31): p50 and p99 per job.

    python tests/benchmarks/bench_learned.py [N]

Three lines each: the Learner itself (``evaluate``'s choice), the hook's pure decision
(``core/learned_site.predict`` on the table's stored choices, rows as the hook reads them)
and the hook's whole ``decide()`` with predictor and rank ``learned`` on in-memory readers
(every step of an event but the query: exclusions, rows, bins, rules, rank, log line).

What the hook would run per job once it reads the user's 100 rows and the site's table
(``core/learned.py``: every rule, the bins, the choice and the rank; the table is the
shipped prior). N random jobs (default 20,000), each with a random history of 100 rows; no
database: the hook's query and decoding cost what they cost ``calibrated`` (docs/hook.md).
Printed by the wall clock and by the thread's CPU time (on a loaded machine the wall
clock's p99 is the scheduler's preemption, not the decision).
"""

import random
import sys
import time

from softwalltime.core import learned
from softwalltime.core import learned_site as ls
from softwalltime.core.config import load_settings
from softwalltime.core.decide import JobEvent, decide
from softwalltime.replay.prior import load_learned_prior


def _report(what: str, n: int, times: list, cpu: list) -> None:
    for name, values in (("wall clock", times), ("thread CPU", cpu)):
        values.sort()
        p50 = values[len(values) // 2] * 1000
        p99 = values[int(len(values) * 0.99)] * 1000
        print(f"{what}, {n} jobs of 100 rows, {name}: p50 {p50:.3f} ms, p99 {p99:.3f} ms")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rng = random.Random(31)
    table = load_learned_prior()
    choices = ls.LearnedChoices.from_learner(table)
    settings = load_settings(environ={}, overrides={"predictor": "learned", "rank": "learned"})
    walls = [600, 3600, 4 * 3600, 86400]
    times: dict = {"learner": ([], []), "hook": ([], []), "decide": ([], [])}
    for _ in range(n):
        wall = rng.choice(walls)
        now = 10**6
        rows = []
        end = now - rng.randint(0, 100000)
        for _k in range(100):
            w = rng.choice(walls)
            rows.append((rng.randint(0, w), w, rng.choice((1, 4, None)), end))
            end -= rng.randint(0, 5000)
        history = ls.history_of(rows)
        started = time.perf_counter()
        started_cpu = time.thread_time()
        out = learned.outcome(wall, history, now)
        soft = out.softs[table.choose(out)]
        rank = out.softs[table.rank_rule(out)]
        times["learner"][1].append(time.thread_time() - started_cpu)
        times["learner"][0].append(time.perf_counter() - started)
        started = time.perf_counter()
        started_cpu = time.thread_time()
        got = ls.predict(choices, wall, rows, now)
        times["hook"][1].append(time.thread_time() - started_cpu)
        times["hook"][0].append(time.perf_counter() - started)
        assert (got.soft_walltime_s, got.rank_s) == (soft, rank) and 1 <= soft <= wall
        classes = [(r, w, c) for r, w, c, _e in rows]
        both = (rows, classes)
        reader = ls.LearnedFetch(
            lambda _u, _n, both=both: both, lambda: choices, lambda now=now: now
        )
        job = JobEvent("queuejob", "alice", "workq", wall, None)
        started = time.perf_counter()
        started_cpu = time.thread_time()
        decision = decide(job, settings, reader.history, learned=reader)  # type: ignore[arg-type]
        times["decide"][1].append(time.thread_time() - started_cpu)
        times["decide"][0].append(time.perf_counter() - started)
        assert (decision.soft_walltime_s, decision.rank_to_set_s) == (soft, rank)
    _report("learned decision (Learner)", n, *times["learner"])
    _report("hook's pure decision (learned_site.predict)", n, *times["hook"])
    _report("hook's decide(), predictor and rank learned", n, *times["decide"])


if __name__ == "__main__":
    main()
