"""The site model's speed on ``eval-start --site`` (issue 46), and a digest to show a change
keeps every result: CERIT-SC 2013 on its site file, the ground truth on the vnodes and
``--predictions`` targets (spread as eval-start spreads them: from job ``--first`` on,
PBS's method, one median run and ``--samples`` sampled runs each, and PQStar). Prints the
wall and CPU time of each part and a SHA-256 digest of every ground-truth start and every
prediction (PBS, median, P50, P90, PQStar, IBL); two versions of the code agree when
their digests do.

    python tests/benchmarks/site_eval_speed.py [--predictions 200] [--profile out.prof]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from softwalltime import site_file  # noqa: E402
from softwalltime.replay import pbsched  # noqa: E402
from softwalltime.replay import sim_workload as wl  # noqa: E402
from softwalltime.replay.site_model import site_run  # noqa: E402
from softwalltime.replay.sources import make_source  # noqa: E402
from softwalltime.wait import starteval as se  # noqa: E402

TRACE = REPO / "softwalltime" / "data" / "CERIT-SC-wagap-2013.alea.swf.gz"
SITE = REPO / "softwalltime" / "data" / "sites" / "cerit-sc-2013.json"


def _digest(values: object) -> str:
    return hashlib.sha256(repr(values).encode()).hexdigest()[:16]


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t: tuple[float, float]) -> str:
    wall, cpu = _clock()
    return f"{wall - t[0]:7.1f} s wall {cpu - t[1]:7.1f} s CPU"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--predictions", type=int, default=200, help="targets (default 200)")
    ap.add_argument("--first", type=int, default=10_001, help="first target (default 10001)")
    ap.add_argument("--samples", type=int, default=9, help="sampled runs each (default 9)")
    ap.add_argument("--profile", help="write a cProfile of the predictions to this file")
    args = ap.parse_args(argv)
    site = site_file.load(str(SITE))
    policy = pbsched.parse_policy("fcfs-bf1")
    work = wl.read_workload(str(TRACE), site_columns=True)
    procs = site.ncpus
    work = wl.fit_machine(work, procs)
    work, model, _ = site_run(site, work)
    targets = se.target_jobs(len(work.submit), args.first, 40_000, args.predictions)
    t = _clock()
    truth = se.ground_truth(work, make_source("v3"), procs, policy, model)
    print(f"ground truth   {_since(t)}  {len(work.submit)} jobs  digest {_digest(truth.start)}")
    t = _clock()
    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    preds = se.predict_targets(work, truth, procs, policy, targets, args.samples, 1)
    if prof is not None:
        prof.disable()
        prof.dump_stats(args.profile)
    print(f"predictions    {_since(t)}  {len(preds)} targets  digest {_digest(preds)}")
    t = _clock()
    preds = se.with_pqstar(preds, work, truth, procs)
    print(f"PQStar         {_since(t)}  digest {_digest(preds)}")
    print(f"figures digest {_digest(se.figures(preds))}")
    print(f"all digest     {_digest((truth.start, preds))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
