"""Issue 18: do job keys (job name ~ SWF executable number, queue) make ``calibrated`` better?

Offline experiment, the product is unchanged. SWF field 14 (executable / application number)
stands for the PBS job name, field 15 (queue number) for the queue. CTC-SP2 has both; the
LLNL traces have field 14 only (their queue is -1) and are not in the tuning set.

    python tests/benchmarks/jobkeys.py [TRACE ...] [--variants today,exec,...] [--track]

Per trace, in one run: v3 (checked equal to ``evaluate``'s v3), "v3 by job name" (v3 over the
user's jobs with the same executable among the last 100, plain v3 when there is none), today's
``calibrated`` (checked equal, job for job, to ``evaluate.replay_calibrated``) and the variants
below, all at target = v3's under-estimate rate on the trace (``--target-under-pct V3RATE``,
fixed; ``--track``: target v3's running rate). LLNL traces record no wait: they are read as
``evaluate --start-from-submit`` reads them. No prior (it is built for today's bins).

THE VARIANT UNDER TEST is :func:`variant_outcome` (a copy of ``calibrated.outcome_of_usable``
with the similarity keys as a parameter and an optional queue bin dimension) and
:class:`VariantTable` (``calibrated.Calibration`` with room for more bins). Keys, finest first;
a key is used when at least MIN_KEY_JOBS (3) of the user's last HISTORY_ROWS (100) jobs share
it with the job; keys with the walltime use raw run times, the others run times scaled to the
job's walltime, as today's user level does.
"""

from __future__ import annotations

import argparse
import gzip
import math
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from softwalltime.core import calibrated as cal
from softwalltime.core.predict import PredictorParams, predict
from softwalltime.replay import evaluate as ev
from softwalltime.replay import trace_readers as tr
from softwalltime.replay.bounds import implausible

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
DEFAULT = [
    TRACES / "CTC-SP2-1996-3.1-cln.swf.gz",
    TRACES / "LLNL-Atlas-2006-2.1-cln.swf.gz",
    TRACES / "LLNL-Thunder-2007-1.1-cln.swf.gz",
]

# A history row: (run time, walltime, ncpus, executable, queue); None = unknown.
Row = Tuple[int, int, Optional[int], Optional[int], Optional[int]]
RUN, WALL, NCPUS, EXEC, QUEUE = range(5)
FIELD = {"wall": WALL, "ncpus": NCPUS, "exec": EXEC, "queue": QUEUE}

# Similarity keys per variant, finest first ("user": all the user's jobs). "today" must be
# calibrated's own keys (checked against evaluate.replay_calibrated).
VARIANTS: Dict[str, Tuple[Tuple[str, ...], ...]] = {
    "today": (("wall", "ncpus"), ("wall",), ()),
    # the brief's example: (user, exec, walltime), (user, exec), then today's keys
    "exec": (("exec", "wall"), ("exec",), ("wall", "ncpus"), ("wall",), ()),
    # only (user, exec, walltime) in front of today's keys
    "exec-wall": (("exec", "wall"), ("wall", "ncpus"), ("wall",), ()),
    # exec with walltime and ncpus first
    "exec-all": (("exec", "wall", "ncpus"), ("exec", "wall"), ("wall", "ncpus"), ("wall",), ()),
    # exec as a coarser key, after (user, walltime): replaces the user level where it can
    "exec-late": (("wall", "ncpus"), ("wall",), ("exec",), ()),
    # exec in place of ncpus: as many key levels (and bins) as today
    "exec-for-ncpus": (("exec", "wall"), ("wall",), ()),
    # the brief's keys, but binned as today's levels (exec+wall with wall+ncpus, exec with
    # user): exec classes for the rules' statistics without more, emptier bins
    "exec-merged": (("exec", "wall"), ("exec",), ("wall", "ncpus"), ("wall",), ()),
}
# The bin level of each key (and of "no history", last), where it is not the key's position.
BIN_LEVELS: Dict[str, Tuple[int, ...]] = {"exec-merged": (0, 2, 0, 1, 2, 3)}
QUEUE_SUFFIX = "+queue"  # a variant name + this: the queue as a bin dimension
MAX_QUEUES = 8  # queue numbers beyond the first 7 seen share the last index


class KeyedTrace(NamedTuple):
    """An SWF trace as ``evaluate`` reads it, and each job's executable and queue."""

    trace: ev.Trace
    execs: List[Optional[int]]
    queues: List[Optional[int]]


def read_keyed(path: str, start_from_submit: bool) -> KeyedTrace:
    """Read an SWF trace as ``trace_readers.read_swf`` does, plus fields 14 and 15.

    The jobs are checked equal to ``read_sources([path])``'s, so the keys line up.
    """
    jobs: List[ev.TraceJob] = []
    execs: List[Optional[int]] = []
    queues: List[Optional[int]] = []
    unix_start = 0
    with gzip.open(path, "rt") as fh:
        for line in fh:
            if line.startswith(";"):
                if "UnixStartTime:" in line:
                    unix_start = int(line.split("UnixStartTime:")[1].split()[0])
                continue
            fields = line.split()
            if len(fields) < 18:
                continue
            try:
                submit, wait, run, alloc, req_p, req, user, exe, queue = (
                    tr._swf_int(fields[k]) for k in (1, 2, 3, 4, 7, 8, 11, 13, 14)
                )
            except ValueError:
                continue
            unknown = [None if v == -1 else v for v in (wait, run, alloc, req_p, req)]
            wait_s, run_s, alloc_p, req_procs, req_s = unknown
            submit_s = None if submit == -1 else submit + unix_start if submit >= 0 else submit
            if implausible(submit_s, wait_s, run_s, req_s, alloc_p, req_procs) is not None:
                continue
            start_s = submit_s + wait_s if submit_s is not None and wait_s is not None else None
            if start_s is None and start_from_submit and submit_s is not None:
                start_s = submit_s
            end_s = start_s + run_s if start_s is not None and run_s is not None else None
            procs = req_procs if req_procs is not None else alloc_p
            jobs.append(
                ev.TraceJob(
                    fields[11] if user >= 0 else None, submit_s, start_s, end_s, req_s, run_s, procs
                )
            )
            execs.append(None if exe < 0 else exe)
            queues.append(None if queue < 0 else queue)
    reference = tr.read_sources([path], start_from_submit=start_from_submit)
    if reference.jobs != jobs:
        raise SystemExit(f"{path}: this reader disagrees with trace_readers.read_swf")
    return KeyedTrace(reference, execs, queues)


# ---------------------------------------------------------------- the variant under test


def variant_outcome(
    keys: Tuple[Tuple[str, ...], ...],
    bin_levels: Tuple[int, ...],
    queue_index: Optional[Dict[Optional[int], int]],
    job: Row,
    usable: Sequence[Row],
) -> cal.Outcome:
    """``calibrated.outcome_of_usable`` with similarity ``keys`` (finest first) and, with
    ``queue_index``, the job's queue as the outermost bin dimension. Keys with "wall" use raw
    run times, the others run times scaled to the job's walltime. A job whose key value is
    unknown (None) skips that key."""
    walltime_s = job[WALL]
    none_level = len(keys)
    level, runs, n = none_level, [], 0
    for k, key in enumerate(keys):
        idx = [FIELD[name] for name in key]
        if any(job[i] is None for i in idx):
            continue
        rows = [row for row in usable if all(row[i] == job[i] for i in idx)]
        if len(rows) >= cal.MIN_KEY_JOBS or (not key and rows):
            head = rows[: cal.KEY_JOBS]
            if "wall" in key:
                runs = [row[RUN] for row in head]
            else:
                runs = [
                    row[RUN] if row[WALL] == walltime_s else -(-row[RUN] * walltime_s // row[WALL])
                    for row in head
                ]
            level, n = k, len(rows)
            break
    per_level = cal.N_SIZE * cal.N_SPREAD * cal.N_LEVEL
    shift = 0
    if queue_index is not None:
        shift = queue_index.get(job[QUEUE], 0) * (max(bin_levels) + 1) * per_level
    blevel = bin_levels[level]
    if not runs:
        return cal.Outcome(shift + blevel * per_level, (walltime_s,) * len(cal.RULES), level, 0)
    v3 = cal._clamp(cal._v3(walltime_s, usable), walltime_s)  # type: ignore[arg-type]
    ordered = sorted(runs)
    m = len(ordered)
    top = ordered[-1]
    low = ordered[0]
    stats = (
        top,
        ordered[max(0, -(-9 * m // 10) - 1)],
        ordered[max(0, -(-3 * m // 4) - 1)],
        ordered[(m - 1) // 2],
        runs[0],
    )
    values = [walltime_s, v3]
    values += [
        -(-value * num // den) + cal.RULE_ADD_S for value in stats for num, den in cal.FACTORS
    ]
    if values[2 + cal._MAX_RULE] > walltime_s:
        values = [v if v < walltime_s else walltime_s for v in values]
    size = 0 if n < 6 else (1 if n < 15 else 2)
    spread = cal._bucket(top, max(low, 1), cal._SPREAD_CUTS)
    lvl = cal._bucket(top, walltime_s, cal._LEVEL_CUTS)
    bin_ = ((blevel * cal.N_SIZE + size) * cal.N_SPREAD + spread) * cal.N_LEVEL + lvl
    return cal.Outcome(shift + bin_, tuple(values), level, n)


class VariantTable(cal.Calibration):
    """``calibrated.Calibration`` with ``bins`` bins (choose/update are unchanged)."""

    def __init__(self, bins: int) -> None:
        super().__init__()
        self.jobs = [0] * bins
        self.under = [0] * (bins * len(cal.RULES))
        self.acc = [0.0] * (bins * len(cal.RULES))


def bins_of(bin_levels: Tuple[int, ...], queues: int) -> int:
    return max(1, queues) * (max(bin_levels) + 1) * cal.N_SIZE * cal.N_SPREAD * cal.N_LEVEL


# ------------------------------------------------------------------ the replay (evaluate's)

OutcomeFn = Callable[[Row, Sequence[Row]], cal.Outcome]


class Result(NamedTuple):
    calibrated: Dict[str, List[int]]  # variant -> soft walltimes, job order
    v3: List[int]
    v3_exec: List[int]
    levels: Dict[str, List[int]]  # variant -> jobs per key level (the last: no history)
    seconds: Dict[str, float]
    # jobs with both a (user, walltime, ncpus) and a (user, exec, walltime) class: the error
    # |log((run + 60) / (class median + 60))| of each class's median, job by job
    class_error: Tuple[List[float], List[float]]


def replay(
    cols: ev.ReplayColumns,
    rows: List[Row],
    variants: Dict[str, Tuple[OutcomeFn, cal.Calibration, int]],
    target: Optional[float],
) -> Result:
    """``evaluate.replay_calibrated``'s event loop (ends first at equal times, a job never in
    its own history, the table learns at each end), for several variants side by side, and
    v3 and v3-by-exec from the same histories. Without its speed-ups (memo, per-walltime
    lists): each prediction scans the user's last HISTORY_ROWS rows."""
    users, instants, ends, _walls, runs, _ncpus, by_instant, by_end = cols
    n = len(users)
    keep = cal.HISTORY_ROWS
    params = PredictorParams.create()
    buffers: Dict[str, List[Row]] = {}
    own_entry: Dict[int, Row] = {}
    pending: Dict[str, Dict[int, cal.Outcome]] = {name: {} for name in variants}
    softs = {name: [0] * n for name in variants}
    levels = {name: [0] * (nlev + 1) for name, (_f, _t, nlev) in variants.items()}
    seconds = dict.fromkeys(variants, 0.0)
    v3 = [0] * n
    v3_exec = [0] * n
    err_ncpus: List[float] = []
    err_exec: List[float] = []
    empty: List[Row] = []

    def history_of(user: str, exclude: int) -> List[Row]:
        buf = buffers.get(user)
        if buf is None:
            return empty
        own = own_entry.get(exclude)
        if own is None:
            return buf[:keep]
        return [x for x in buf if x is not own][:keep]

    clock = time.perf_counter
    e = 0
    next_end = ends[by_end[0]] if n else 0
    for i in by_instant:
        t = instants[i]
        while e < n and next_end <= t:
            j = by_end[e]
            for name, (fn, table, _nlev) in variants.items():
                t0 = clock()
                got = pending[name].pop(j, None)
                if got is None:
                    out = fn(rows[j], history_of(users[j], j))
                    pending[name][j] = out
                    table.update(out, runs[j], target)
                else:
                    table.update(got, runs[j], target, softs[name][j])
                seconds[name] += clock() - t0
            buf = buffers.get(users[j])
            if buf is None:
                buf = buffers[users[j]] = []
            if ends[j] == instants[j]:
                own_entry[j] = rows[j]
            buf.insert(0, rows[j])
            if len(buf) > keep + 1:
                buf.pop()
            e += 1
            if e < n:
                next_end = ends[by_end[e]]
        hist = history_of(users[i], i)
        job = rows[i]
        for name, (fn, table, _nlev) in variants.items():
            t0 = clock()
            out = fn(job, hist)
            if pending[name].pop(i, None) is None:
                pending[name][i] = out
            softs[name][i] = out.softs[table.choose(out.bin)]
            levels[name][out.level] += 1
            seconds[name] += clock() - t0
        own_entry.pop(i, None)
        pairs = [(row[RUN], row[WALL]) for row in hist]
        v3[i] = predict("v3", job[WALL], pairs, params).soft_walltime_s or 0
        same = [
            p for p, row in zip(pairs, hist) if job[EXEC] is not None and row[EXEC] == job[EXEC]
        ]
        v3_exec[i] = predict("v3", job[WALL], same or pairs, params).soft_walltime_s or 0
        if job[EXEC] is not None:
            by_ncpus = [r[RUN] for r in hist if r[WALL] == job[WALL] and r[NCPUS] == job[NCPUS]]
            by_exec = [r[RUN] for r in hist if r[WALL] == job[WALL] and r[EXEC] == job[EXEC]]
            if len(by_ncpus) >= cal.MIN_KEY_JOBS and len(by_exec) >= cal.MIN_KEY_JOBS:
                err_ncpus.append(median_error(runs[i], by_ncpus[: cal.KEY_JOBS]))
                err_exec.append(median_error(runs[i], by_exec[: cal.KEY_JOBS]))
    while e < n:
        j = by_end[e]
        for name, (_fn, table, _nlev) in variants.items():
            table.update(pending[name].pop(j), runs[j], target, softs[name][j])
        e += 1
    return Result(softs, v3, v3_exec, levels, seconds, (err_ncpus, err_exec))


def median_error(run_s: int, class_runs: List[int]) -> float:
    """How far the class's median run time is from the job's, as |log ratio| (+60 s each)."""
    return abs(math.log((run_s + 60) / (statistics.median(class_runs) + 60)))


# ----------------------------------------------------------------------------- the report


def row_of(name: str, m: ev.Metrics) -> str:
    under, bad, mean = m.under_pct, m.bad_under_pct, m.mean_accuracy
    median, mae = m.median_accuracy, m.mae_hours
    return f"  {name:<26}{under:>9.2f}{bad:>13.2f}{mean:>10.3f}{median:>12.3f}{mae:>8.2f}"


def run_trace(path: Path, names: Sequence[str], track: bool) -> None:
    llnl = "LLNL" in path.name
    keyed = read_keyed(str(path), start_from_submit=llnl)
    cols, skipped = ev.columns(keyed.trace.jobs, "submit")
    kept = [ev.skip_reason(job, "submit") is None for job in keyed.trace.jobs]
    execs = [x for x, k in zip(keyed.execs, kept) if k]
    queues = [q for q, k in zip(keyed.queues, kept) if k]
    rows: List[Row] = list(zip(cols.runs, cols.walls, cols.ncpus, execs, queues))
    seen = sorted({q for q in queues if q is not None})
    queue_index = {q: min(k, MAX_QUEUES - 1) for k, q in enumerate(seen)}

    # v3's rate on the trace, from evaluate itself (the target, and the check of our v3)
    reference = ev.replay_columns(cols, skipped, ["v3"])
    v3_ref = ev.metrics(reference.soft_s["v3"], cols.runs)
    target = None if track else v3_ref.under_pct

    variants: Dict[str, Tuple[OutcomeFn, cal.Calibration, int]] = {}
    for name in names:
        base, _plus, _rest = name.partition(QUEUE_SUFFIX)
        keys = VARIANTS[base]
        blevels = BIN_LEVELS.get(base, tuple(range(len(keys) + 1)))
        qidx = queue_index if name.endswith(QUEUE_SUFFIX) else None
        nq = len(set(queue_index.values())) if qidx is not None else 1

        def fn(
            job: Row,
            usable: Sequence[Row],
            keys: Tuple[Tuple[str, ...], ...] = keys,
            blevels: Tuple[int, ...] = blevels,
            qidx: Optional[Dict[Optional[int], int]] = qidx,
        ) -> cal.Outcome:
            return variant_outcome(keys, blevels, qidx, job, usable)

        variants[name] = (fn, VariantTable(bins_of(blevels, nq)), len(keys))

    t0 = time.perf_counter()
    result = replay(cols, rows, variants, target)
    wall_s = time.perf_counter() - t0

    if result.v3 != reference.soft_s["v3"]:
        raise SystemExit(f"{path.name}: this replay's v3 differs from evaluate's")
    if "today" in names:
        check, _table = ev.replay_calibrated(cols, target)
        if check != result.calibrated["today"]:
            raise SystemExit(f"{path.name}: variant 'today' differs from replay_calibrated")

    distinct = len({(u, x) for u, x in zip(cols.users, execs) if x is not None})
    dropped = {**keyed.trace.skipped, **skipped}
    print(f"\n{path.name}: {len(rows):,} jobs evaluated, skipped {dropped or 'none'}")
    print(
        f"  executable known on {sum(x is not None for x in execs):,} jobs,"
        f" {distinct:,} (user, executable) pairs; queues {seen or 'none'}"
    )
    print(
        "  target: "
        + ("v3's running rate (tracking)" if track else f"v3's rate {target:.2f} % (fixed)")
    )
    print(
        "  {:<26}{:>9}{:>13}{:>10}{:>12}{:>8}".format(
            "", "under %", "bad under %", "mean acc", "median acc", "MAE h"
        )
    )
    print(row_of("v3", v3_ref))
    print(row_of("v3 by exec", ev.metrics(result.v3_exec, cols.runs)))
    for name in names:
        print(row_of(f"calibrated {name}", ev.metrics(result.calibrated[name], cols.runs)))
    e_ncpus, e_exec = result.class_error
    if e_ncpus:
        print(
            f"  {len(e_ncpus):,} jobs with both a user+wall+ncpus and a user+exec+wall class:"
            " |log((run+60)/(class median+60))| median / mean:"
            f" wall+ncpus {statistics.median(e_ncpus):.3f} / {statistics.mean(e_ncpus):.3f},"
            f" exec+wall {statistics.median(e_exec):.3f} / {statistics.mean(e_exec):.3f}"
        )
    print("  jobs per key level (finest first, last: no history):")
    for name in names:
        base = name.partition(QUEUE_SUFFIX)[0]
        labels = ["+".join(("user",) + key) for key in VARIANTS[base]] + ["none"]
        shares = ", ".join(
            f"{label} {100.0 * count / max(1, len(rows)):.1f}%"
            for label, count in zip(labels, result.levels[name])
        )
        print(f"    {name}: {shares}")
    print(
        "  CPU s in the calibrated part: "
        + ", ".join(f"{name} {s:.1f}" for name, s in result.seconds.items())
        + f" (replay in all {wall_s:.1f} s; checks not included)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("traces", nargs="*", type=Path, default=DEFAULT)
    parser.add_argument(
        "--variants",
        default="today,exec,exec-wall,exec-all,exec-late",
        help=f"comma-separated, of {', '.join(VARIANTS)}; a name + '{QUEUE_SUFFIX}' adds the"
        " queue as a bin dimension",
    )
    parser.add_argument("--track", action="store_true", help="target: v3's running rate")
    args = parser.parse_args()
    names = [v for v in args.variants.split(",") if v]
    for name in names:
        if name.partition(QUEUE_SUFFIX)[0] not in VARIANTS:
            parser.error(f"unknown variant {name!r}")
    for path in args.traces:
        run_trace(path, names, args.track)


if __name__ == "__main__":
    main()
