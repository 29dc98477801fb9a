"""The pure decision of the predictor ``learned`` (issue 31): p50 and p99 per job.

    python tests/benchmarks/bench_learned.py [N]

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
from softwalltime.replay.prior import load_learned_prior


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rng = random.Random(31)
    table = load_learned_prior()
    walls = [600, 3600, 4 * 3600, 86400]
    times = []
    cpu = []
    for _ in range(n):
        wall = rng.choice(walls)
        now = 10**6
        rows = []
        end = now - rng.randint(0, 100000)
        for _k in range(100):
            w = rng.choice(walls)
            rows.append((rng.randint(0, w), w, end))
            end -= rng.randint(0, 5000)
        started = time.perf_counter()
        started_cpu = time.thread_time()
        out = learned.outcome(wall, rows, now)
        soft = out.softs[table.choose(out)]
        rank = out.softs[table.rank_rule(out)]
        cpu.append(time.thread_time() - started_cpu)
        times.append(time.perf_counter() - started)
        assert 1 <= soft <= wall and 1 <= rank <= wall
    for name, values in (("wall clock", times), ("thread CPU", cpu)):
        values.sort()
        p50 = values[len(values) // 2] * 1000
        p99 = values[int(len(values) * 0.99)] * 1000
        print(f"learned decision, {n} jobs of 100 rows, {name}: p50 {p50:.3f} ms, p99 {p99:.3f} ms")


if __name__ == "__main__":
    main()
