"""Twin replay on the real OpenPBS server: a segment of a real trace as ``sleep`` jobs,
against ``simulate_pbs`` of the same jobs (issue 29).

Run as root with OpenPBS up (``make pbs-up``): ``make bench-twin`` (KTH-SP2),
or ``python tests/benchmarks/bench_twin.py --trace CTC``. It takes the machine-wide PBS
lock, picks ``--jobs`` consecutive jobs where they wait (of ``--candidates`` windows spread
over the trace, the largest simulated mean wait under fcfs-bf1 with the users' walltimes),
sets the node's ``resources_available.ncpus`` to the trace's MaxProcs and compresses time
by ``--factor`` (default: the segment's simulated makespan over ``--minutes``), so that
each configuration takes about that long. For each estimate source (``users``: no soft
walltime; ``perfect``: the scaled run time, set by the manager while the job is held) and
each policy, it replays the segment (:mod:`twin`), simulates it with the real release
times and prints mean wait and bounded slowdown real against simulated, the share of job
pairs started in the simulated order (pairs more than ``--tolerance`` apart), the
median and p95 of |real - simulated start| and the first divergent jobs, then the band of
``--draws`` simulations under the run times' whole-second uncertainty (:mod:`twin_band`).
``--from-dump JSON...`` compares replays saved with ``--dump`` again, without a server. The node,
sched_config, the formula, backfill_depth, scheduling, eligible_time_enable,
scheduler_iteration and job history are restored and the jobs purged, whatever happens.
Exits non-zero if PBS fails.

``--pbs-estimates`` (:mod:`twin_start`, issue 47; the sources users and perfect) reads, at
each batch's release and every 5 minutes compressed, PBS's own ``estimated.start_time`` of
each queued job and the product's ``wait`` P50 and P90 computed from the same ``qstat``,
scores both against the real starts (within 1 min, 10 min, 1 h compressed; all jobs and
those that waited >= 10 min; the P90's coverage) and prints what the configuration cost the
scheduler (its CPU and cycles). PBS estimates every queued job only with ``backfill_depth``
over the queue: ``--policies fcfs-bf300``.

``--sources live`` (:mod:`twin_live`) runs the product as at a site instead: each trace
user of the segment becomes a Unix user ``swtw<uid>`` (at most 300; those created are
deleted afterwards), a throwaway PostgreSQL is migrated with ``softwalltime db upgrade``,
the hook is installed with ``softwalltime hooks install --rank`` (v3, the rank key-mean;
``reserve_s`` and ``refresh_min_change_s`` compressed by the factor), the segment's users'
jobs among the trace's ``--history`` jobs before it are written as accounting E records and
ingested, and each job is submitted by its own user at its scaled submit time (no hold, no
manager: the hook sets the soft walltime and the rank; scheduling is off around the qsubs
of one second, which the simulator sees in one cycle). ``softwalltime ingest`` and
``softwalltime refresh`` run every 5 and 15 minutes compressed (at least 3 s); a failure
of either fails the bench. The simulation reads what the product gave each job: the soft
walltime and rank after its qsub, the soft walltime it ran with (the runjob event predicts
again) and the ranks refresh moved, when it moved them. Besides the comparison it prints
the qsub latency, how often each timer ran and succeeded, how many jobs got the hook's soft
walltime and rank and how many refresh changed, the finished jobs ingested, and writes
``softwalltime report`` of the replay's jobs to ``--report``. A formula that reads the rank
(``sjf.rank-bf1``, ``xfactor.rank-bf1``, labels such as ``xf2.rank+len1``) needs this
source: ``python tests/benchmarks/bench_twin.py --jobs 300 --minutes 20 --sources live
--policies xf2.rank+len1``.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests" / "pbs"), str(REPO / "tests")]

import pbsctl  # noqa: E402
import twin  # noqa: E402
import twin_band  # noqa: E402
import twin_live  # noqa: E402
import twin_site  # noqa: E402
import twin_start  # noqa: E402

from softwalltime.replay import formula as fm  # noqa: E402
from softwalltime.replay import pbsched  # noqa: E402
from softwalltime.replay import simulate as sim  # noqa: E402

TRACES = REPO / "tests" / "data" / "traces"
TRACE_FILES = {
    "KTH": "KTH-SP2-1996-2.1-cln.swf.gz",
    "CTC": "CTC-SP2-1996-3.1-cln.swf.gz",
}


MAX_DRAWS = 10_000  # a draw is one simulation of the segment: about 20 ms compiled


def _draws(text: str) -> int:
    value = int(text)
    if not 0 <= value <= MAX_DRAWS:
        raise argparse.ArgumentTypeError(f"must be 0 to {MAX_DRAWS}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace", default="KTH", help="KTH, CTC or an SWF path (default KTH)")
    p.add_argument("--jobs", type=int, default=300, help="jobs in the segment (300)")
    p.add_argument("--candidates", type=int, default=16, help="windows to choose from (16)")
    p.add_argument("--minutes", type=float, default=4.0, help="target per configuration (4)")
    p.add_argument("--factor", type=float, help="time compression (default: from --minutes)")
    p.add_argument("--margin", type=int, default=2, help="walltime over the run, s (2)")
    p.add_argument("--tolerance", type=int, default=2, help="order tolerance, s (2)")
    p.add_argument("--sources", default="users,perfect", help="users,perfect,live")
    p.add_argument(
        "--history",
        type=int,
        default=2000,
        help="live: the trace's jobs before the segment whose users' jobs are ingested first"
        f" (2000, at most {twin_live.MAX_HISTORY})",
    )
    p.add_argument(
        "--report",
        type=Path,
        default=REPO / ".bench" / "twin-report.html",
        help="live: softwalltime report of the twin's database, written here"
        " (default .bench/twin-report.html in the checkout, which git ignores)",
    )
    p.add_argument(
        "--policies",
        default="fcfs-bf1,sjf-bf1",
        help="policies of simulate --policies or formula labels of --search, e.g."
        " fcfs-bf1,xf2+age72h+len1 (default fcfs-bf1,sjf-bf1)",
    )
    p.add_argument(
        "--fuzzy",
        type=pbsched.parse_fuzzy,
        help="the server's opt_backfill_fuzzy, as simulated: off, low, medium, high or seconds"
        " (default: PBS's low, 60 s, compressed by the factor: off at factors over 60)",
    )
    p.add_argument(
        "--draws",
        type=_draws,
        default=twin_band.DRAWS,
        help="simulations of the band under the run times' whole-second uncertainty (100; 0: none)",
    )
    p.add_argument(
        "--show-jobs",
        type=lambda text: [int(k) for k in text.split(",")],
        default=[],
        metavar="K,...",
        help="print these jobs' (#k) starts in the band's draws",
    )
    p.add_argument(
        "--site",
        choices=["cerit"],
        help="site-shaped (issue 46): a CERIT-SC 2013 segment on its scaled-down site file"
        " (vnodes, routing queue, Qlist pools, chunks, excl), fcfs-bf1, soft walltime perfect",
    )
    p.add_argument("--cpu-div", type=int, default=4, help="--site: cpus and ncpus divided by (4)")
    p.add_argument("--node-div", type=int, default=4, help="--site: vnodes per type divided by (4)")
    p.add_argument(
        "--pbs-estimates",
        action="store_true",
        help="users/perfect: at each release and every 5 min (compressed) read PBS's"
        " estimated.start_time and the product's wait P50/P90 from qstat, score both on the"
        " real starts and say what the policy cost the scheduler (tests/pbs/twin_start.py;"
        " PBS estimates every queued job with fcfs-bfN, N >= the jobs)",
    )
    p.add_argument("--dump", type=Path, help="write each replay (jobs, times) as JSON here")
    p.add_argument(
        "--from-dump",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="no server: compare again the replays --dump wrote (needs --trace of the replay)",
    )
    return p.parse_args(argv)


class Segment(NamedTuple):
    jobs: list[twin.TwinJob]
    procs: int
    factor: float
    about: str
    work: sim.SimWorkload
    first: int


def load(args: argparse.Namespace) -> Segment:
    path = str(TRACES / TRACE_FILES[args.trace]) if args.trace in TRACE_FILES else args.trace
    work = sim.read_workload(path)
    procs = work.machine_procs
    if procs is None:
        raise SystemExit(f"{path}: no MaxProcs header")
    work = sim.fit_machine(work, procs)
    fcfs = pbsched.parse_policy("fcfs-bf1")
    first, wait, span = twin.choose_segment(work, procs, args.jobs, args.candidates, fcfs)
    factor = args.factor or math.ceil(span / (60 * args.minutes))
    if not args.factor and factor > fm.SMOOTH_S:
        # a formula's 600-s bound compressed below 1 s means nothing (formula.expression
        # refuses it): a longer replay than --minutes asks, not a failure
        factor = fm.SMOOTH_S
    jobs = twin.scale(work, first, args.jobs, factor, args.margin)
    about = (
        f"{Path(path).name}: jobs {first}..{first + len(jobs) - 1} of {len(work.submit)}, "
        f"MaxProcs {procs}, simulated mean wait {wait / 3600:.2f} h, makespan {span / 3600:.1f} h;"
        f" factor {factor:g} (scheduler_iteration {twin.iteration_for(factor)} s, bsld bound"
        f" {600 / factor:.2f} s); runs of 1 s: {sum(j.run == 1 for j in jobs)}"
    )
    return Segment(jobs, procs, factor, about, work, first)


def one(
    jobs: list[twin.TwinJob],
    procs: int,
    factor: float,
    source: str,
    name: str,
    args: argparse.Namespace,
) -> None:
    policy = twin.policy(name, procs, factor, args.fuzzy)
    started = time.monotonic()
    if args.pbs_estimates:
        rec = twin_start.Recorder(procs, policy, max(1.0, twin_start.REFRESH_S / factor))
        cost: list[twin_start.SchedCost] = []
        with twin_start.sched_cost(cost), twin_start.polling(rec):
            run = twin.replay(jobs, source, procs, policy, before_release=rec.look)
    else:
        run = twin.replay(jobs, source, procs, policy)
    try:
        took = time.monotonic() - started
        over = sum(r - j.run for r, j in zip(run.runs, jobs)) / len(jobs)
        print(f"\n## {name}, {source} ({took:.0f} s on the server; jobs ran {over:.2f} s longer"
              " than their sleep on average, obittime - stime; opt_backfill_fuzzy"
              f" {policy.backfill_fuzzy} s)")  # fmt: skip
        soft = twin.soft_walltimes(jobs, source)
        compare(jobs, run, soft, procs, policy, factor, args)
        fig = twin.start_times(
            jobs, run.submit, run.real, run.runs, soft, procs, policy, factor, run.epoch
        )
        print(
            "### start times predicted at each release from the server's state then, against"
            " the real starts (1 min, 10 min, 1 h and the 10-min wait, compressed)"
        )
        print(twin.start_report(fig), flush=True)
        if args.dump:
            dump(args.dump, f"{name}.{source}", factor, policy, jobs, run)
        if args.pbs_estimates:
            if args.dump:
                args.dump.mkdir(parents=True, exist_ok=True)
                looks = {"samples": rec.samples, "look_s": rec.look_s, "cost": cost[0]}
                (args.dump / f"{name}.{source}.looks.json").write_text(json.dumps(looks))
            print_estimates(rec, cost[0], run, factor)
    finally:
        twin.purge_all(run.ids)


def print_estimates(
    rec: twin_start.Recorder, cost: twin_start.SchedCost, run: twin.Replay, factor: float
) -> None:
    """PBS's estimated.start_time against the product's wait, at release and refreshes."""
    release = {i: run.epoch + s for i, s in zip(run.ids, run.submit)}
    start = {i: run.epoch + s for i, s in zip(run.ids, run.real)}
    looks = rec.look_s
    print(
        f"### PBS's estimated.start_time against wait's P50 and P90, live from qstat"
        f" ({len(looks)} looks, every {rec.interval:g} s and at each release; a look took"
        f" {1000 * sum(looks) / len(looks):.0f} ms mean, {1000 * max(looks):.0f} ms max)"
    )
    print(
        f"scheduler: {cost.cycles} cycles, {cost.cpu_s:.2f} s CPU"
        f" ({1000 * cost.cpu_s / max(1, cost.cycles):.1f} ms a cycle), longest cycle"
        f" {cost.longest_s} s (log resolution 1 s)"
    )
    rows = twin_start.at_release(rec.samples, release, start)
    print(twin_start.report(twin_start.figures(rows, factor), "at the release"))
    rows = twin_start.at_refresh(rec.samples, release, start)
    print(twin_start.report(twin_start.figures(rows, factor), "at each later look"), flush=True)


def dump(
    directory: Path,
    stem: str,
    factor: float,
    policy: pbsched.Policy,
    jobs: list[twin.TwinJob],
    run: twin.Replay,
    extra: dict[str, object] | None = None,
) -> None:
    """The replay as ``directory/stem.json``, for ``--from-dump``."""
    directory.mkdir(parents=True, exist_ok=True)
    data = {
        "factor": factor,
        "fuzzy": policy.backfill_fuzzy,
        "jobs": [j._asdict() for j in jobs],
        **run._asdict(),
        **(extra or {}),
    }
    (directory / f"{stem}.json").write_text(json.dumps(data))


def compare(
    jobs: list[twin.TwinJob],
    run: twin.Replay,
    soft: list[int | None],
    procs: int,
    policy: pbsched.Policy,
    factor: float,
    args: argparse.Namespace,
    simulate: Callable[[list[twin.TwinJob]], list[int]] | None = None,
) -> None:
    """The replay against one simulation with the planned run times, one with the measured
    ones, and the band of ``args.draws`` simulations (:mod:`twin_band`; ``simulate``: the
    replay's own simulation of jobs with drawn run times, the live source's)."""
    for title, simulated in (("planned", run.simulated), ("measured", run.measured)):
        c = twin.compare(jobs, run.submit, run.real, simulated, args.tolerance, 600 / factor)
        print(f"### against simulate_pbs with the {title} run times")
        print(twin.report(c, jobs, run.submit, run.real, simulated, run.ids), flush=True)
    if args.draws > 0:
        b = twin_band.band(
            jobs, run.submit, run.real, run.runs, soft, procs, policy, run.epoch, 600 / factor,
            args.draws, simulate=simulate,
        )  # fmt: skip
        print("### against the band of simulations under the run times' whole-second uncertainty")
        print(twin_band.report(b, jobs, run.submit, run.ids), flush=True)
        for k in args.show_jobs:
            if 0 <= k < len(jobs):
                print(twin_band.job_line(b, k, run.real))


def from_dump(path: Path, procs: int, args: argparse.Namespace) -> None:
    """Compare again a replay that --dump wrote (policy and source from its name)."""
    data = json.loads(path.read_text())
    name, source = path.name.removesuffix(".json").rsplit(".", 1)
    jobs = [twin.TwinJob(**j) for j in data["jobs"]]
    fields = {f: data[f] for f in twin.Replay._fields}
    run = twin.Replay(**fields)
    factor = data["factor"]
    policy = twin.policy(name, procs, factor, data.get("fuzzy"))
    print(f"\n## {name}, {source} (from {path}; factor {factor:g})")
    if source != twin_live.LIVE:
        compare(jobs, run, twin.soft_walltimes(jobs, source), procs, policy, factor, args)
        return
    out = twin_live.Outputs(
        **{**data["out"], "rank_moves": [tuple(m) for m in data["out"]["rank_moves"]]}
    )

    def simulate(drawn: list[twin.TwinJob]) -> list[int]:
        return twin_live.simulate(drawn, run.submit, out, procs, policy, run.epoch)

    compare(jobs, run, [None] * len(jobs), procs, policy, factor, args, simulate)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def print_live(
    seg: Segment, live: twin_live.LiveRun, s: twin_live.Site, args: argparse.Namespace
) -> None:
    """The live replay's figures beside the comparison: qsub latency, timers, the hook's
    outputs, the ingested rows and the report."""
    jobs, run = seg.jobs, live.replay
    lat = live.latency
    print(
        "qsub latency (runuser + qsub, a batch's time over its jobs):"
        f" mean {1000 * sum(lat) / len(lat):.0f} ms,"
        f" p95 {1000 * _quantile(lat, 0.95):.0f} ms, max {1000 * max(lat):.0f} ms"
    )
    for t in live.timers:
        print(t.summary())
    for key, value in twin_live.hook_counts(jobs, live.out).items():
        print(f"jobs with {key}: {value}/{len(jobs)}" if "moved" not in key else f"{key}: {value}")
    rows = twin_live.ingested(s.dsn, run.ids)
    print(
        f"finished jobs ingested: {live.by_timers}/{len(run.ids)} by the timers when the last"
        f" ended, {len(rows)}/{len(run.ids)} after one more ingest"
    )
    args.report.parent.mkdir(parents=True, exist_ok=True)
    fig = twin_live.report(s, run.epoch, args.report)
    per_user, worst = twin_live.report_users(fig)
    names = set(twin_live.unix_name(u) for u in seg.work.user[seg.first : seg.first + len(jobs)])
    page = args.report.read_text()
    print(
        f"report: {args.report.resolve()}; its per-user figure names {len(per_user)} users"
        f" ({len(names & set(per_user))} of the segment's {len(names)}), the page"
        f" {sum(n in page for n in worst)} worst users"
    )
    print("report figures: " + twin_live.report_figures(fig))


def one_live(seg: Segment, name: str, args: argparse.Namespace) -> None:
    """The source ``live``: the product runs as at a site (:mod:`twin_live`)."""
    jobs, procs, factor = seg.jobs, seg.procs, seg.factor
    policy = twin.policy(name, procs, factor, args.fuzzy)
    users = seg.work.user[seg.first : seg.first + len(jobs)]
    names = [twin_live.unix_name(u) for u in users]
    twin_live.segment_users(users)
    started = time.monotonic()
    with twin_live.unix_users(sorted(set(names))), twin_live.site(factor) as s:
        past = twin_live.history(
            seg.work, seg.first, len(jobs), args.history, factor, int(time.time())
        )
        twin_live.ingest_history(s, past)
        print(
            f"\n## {name}, live: {len(set(names))} users, {len(past)} history jobs ingested",
            flush=True,
        )
        live = twin_live.replay(s, jobs, names, procs, policy, factor)
        try:
            run = live.replay
            took = time.monotonic() - started
            over = sum(r - j.run for r, j in zip(run.runs, jobs)) / len(jobs)
            print(f"({took:.0f} s with the setup; jobs ran {over:.2f} s longer than their sleep on"
                  f" average; opt_backfill_fuzzy {policy.backfill_fuzzy} s)")  # fmt: skip
            out = live.out

            def simulate(drawn: list[twin.TwinJob]) -> list[int]:
                return twin_live.simulate(drawn, run.submit, out, procs, policy, run.epoch)

            compare(jobs, run, [None] * len(jobs), procs, policy, factor, args, simulate)
            print_live(seg, live, s, args)
            if args.dump:
                extra = {"out": live.out._asdict()}
                dump(args.dump, f"{name}.{twin_live.LIVE}", factor, policy, jobs, run, extra)
        finally:
            twin.purge_all(live.replay.ids)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    print("command: " + " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]))
    if args.from_dump:
        procs = load(args).procs
        for path in args.from_dump:
            from_dump(path, procs, args)
        return 0
    why = pbsctl.available()
    if why:
        print(f"bench-twin: {why}", file=sys.stderr)
        return 2
    if not 0 <= args.history <= twin_live.MAX_HISTORY:
        print(f"bench-twin: --history must be 0 to {twin_live.MAX_HISTORY}", file=sys.stderr)
        return 2
    if args.site:
        return site_main(args, began)
    seg = load(args)
    jobs, procs, factor = seg.jobs, seg.procs, seg.factor
    print(seg.about, flush=True)
    try:
        with pbsctl.exclusive(), twin.server(procs):
            for name in args.policies.split(","):
                for source in args.sources.split(","):
                    if source == twin_live.LIVE:
                        one_live(seg, name, args)
                    else:
                        one(jobs, procs, factor, source, name, args)
    except (pbsctl.PbsError, subprocess.TimeoutExpired, ValueError) as err:
        print(f"bench-twin: PBS failed: {err}", file=sys.stderr)
        return 1
    print(f"\ntook {time.monotonic() - began:.0f} s")
    return 0


SITE_POLICY = "fcfs-bf1"


def site_main(args: argparse.Namespace, began: float) -> int:
    """``--site cerit``: the site-shaped twin (:mod:`twin_site`)."""
    from softwalltime import site_file as sf

    work = sim.read_workload(str(twin_site.CERIT_TRACE), site_columns=True)
    full = sf.load(str(twin_site.CERIT_SITE))
    fcfs = pbsched.parse_policy(SITE_POLICY)
    first, wait, span = twin_site.choose_segment(
        work, full, args.jobs, args.candidates, args.cpu_div, args.node_div, fcfs
    )
    factor = args.factor or math.ceil(span / (60 * args.minutes))
    site = twin_site.scaled_site(full, args.cpu_div, args.node_div, factor)
    jobs, dropped = twin_site.site_jobs(
        work, first, args.jobs, factor, args.margin, site, args.cpu_div
    )
    procs = sum(v.ncpus for v in site.vnodes)
    policy = twin.policy(SITE_POLICY, procs, factor, args.fuzzy)
    kinds = sorted({(v.ncpus) for v in site.vnodes}, reverse=True)
    shape = ", ".join(f"{sum(v.ncpus == c for v in site.vnodes)} x {c} cpus" for c in kinds)
    print(
        f"{twin_site.CERIT_TRACE.name}: jobs from #{first} ({len(jobs)} kept, {dropped} the"
        f" scaled site can never run left out); site {shape} = {procs} cpus (cpus and ncpus"
        f" / {args.cpu_div}, vnodes / {args.node_div}); simulated mean wait (users'"
        " walltimes, uncompressed)"
        f" {wait / 3600:.1f} h, makespan {span / 3600:.1f} h; factor {factor:g}"
        f" (scheduler_iteration {twin.iteration_for(factor)} s, opt_backfill_fuzzy"
        f" {policy.backfill_fuzzy} s); runs of 1 s: {sum(j.job.run == 1 for j in jobs)};"
        f" excl jobs {sum('excl' in j.place for j in jobs)}; multi-chunk"
        f" {sum(j.select[0] != '1' or '+' in j.select for j in jobs)}",
        flush=True,
    )
    print("queues: " + ", ".join(f"{q} {n}" for q, n in _counts(j.queue for j in jobs)))
    plain = [j.job for j in jobs]
    soft = twin.soft_walltimes(plain, twin.PERFECT)
    try:
        with pbsctl.exclusive(), twin.server(0), twin_site.configured(site, jobs):
            started = time.monotonic()
            run = twin_site.replay(jobs, site, policy)
            try:
                took = time.monotonic() - started
                print(f"\n## {SITE_POLICY}, perfect, site-shaped ({took:.0f} s on the server)")
                wrong = [
                    (i, q, j.queue)
                    for i, q, j in zip(run.ids, twin_site.queues_of(run.ids), jobs)
                    if q != j.queue
                ]
                print(
                    f"jobs in another queue than the model routed them to: {len(wrong)} {wrong[:5]}"
                )

                def simulate(drawn: list[twin.TwinJob]) -> list[int]:
                    again = [j._replace(job=d) for j, d in zip(jobs, drawn)]
                    return twin_site.simulate(again, run.submit, soft, site, policy, run.epoch)

                compare(plain, run, soft, procs, policy, factor, args, simulate)
                if args.dump:
                    dump(args.dump, f"{SITE_POLICY}.site", factor, policy, plain, run)
            finally:
                twin.purge_all(run.ids)
    except (pbsctl.PbsError, subprocess.TimeoutExpired, ValueError) as err:
        print(f"bench-twin: PBS failed: {err}", file=sys.stderr)
        return 1
    print(f"\ntook {time.monotonic() - began:.0f} s")
    return 0


def _counts(items: object) -> list[tuple[str, int]]:
    from collections import Counter

    return sorted(Counter(items).items())  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
