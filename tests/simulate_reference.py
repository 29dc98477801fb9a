"""A naive reference of the simulation model: every correction step is an event and every
instant gets a full EASY pass (slow; for tests that compare the real simulator with it)."""

from __future__ import annotations

from typing import List

from softwalltime.replay import simulate as sim


def reference(
    work: sim.SimWorkload, source: sim.EstimateSource, total: int, policy: str
) -> List[int]:
    n = len(work.submit)
    source.bind(work)
    est = [0] * n
    orig = [0] * n
    start = [-1] * n
    ncorr = [0] * n
    queue: List[int] = []
    running: List[int] = []
    free = total
    a = 0
    inf = float("inf")

    def step_time(j: int) -> float:
        if est[j] >= work.wall[j]:
            return inf
        when = start[j] + est[j] - (60 if policy == "simple" else 0)
        return when if when < start[j] + work.run[j] else inf

    while a < n or running:
        t = int(
            min(
                [work.submit[a] if a < n else inf]
                + [start[j] + work.run[j] for j in running]
                + [step_time(j) for j in running]
            )
        )
        for j in sorted(j for j in running if start[j] + work.run[j] == t):  # FCFS order
            running.remove(j)
            free += work.procs[j]
            source.on_end(j, t)
        for j in running:
            if step_time(j) == t:
                ncorr[j] += 1
                if policy == "pbs":
                    est[j] = min(est[j] + max(orig[j], 1), work.wall[j])
                elif policy == "simple":
                    est[j] = min(est[j] + 3600, work.wall[j])
                elif policy == "power":
                    est[j] = min(est[j] + (450 << (ncorr[j] - 1)), work.wall[j])
                else:
                    est[j] = work.wall[j]
        while a < n and work.submit[a] == t:
            est[a] = source.on_submit(a, t)
            queue.append(a)
            a += 1

        def begin(j: int, t: int) -> None:
            nonlocal free
            start[j] = t
            orig[j] = est[j] = source.on_start(j, t)
            if policy == "simple":
                while est[j] < work.wall[j] and est[j] <= 60 and work.run[j] > est[j] - 60:
                    est[j] = min(est[j] + 3600, work.wall[j])
                    ncorr[j] += 1
            free -= work.procs[j]
            running.append(j)

        while queue and work.procs[queue[0]] <= free:
            begin(queue.pop(0), t)
        if not queue:
            continue
        head = queue[0]
        ends = sorted((max(t, start[j] + est[j]), j) for j in running)
        acc = 0
        shadow = t
        for e, j in ends:
            acc += work.procs[j]
            if free + acc >= work.procs[head]:
                shadow = e
                break
        extra = free + sum(work.procs[j] for e, j in ends if e <= shadow) - work.procs[head]
        for j in list(queue[1:]):
            p = work.procs[j]
            if p > free:
                continue
            if t + est[j] <= shadow:
                queue.remove(j)
                begin(j, t)
            elif p <= extra:
                extra -= p
                queue.remove(j)
                begin(j, t)
    return start
