"""Optional speed reference: AccaSim 1.1.3's EASY backfilling on the same SWF trace.

AccaSim is not a dependency. It does not import on Python 3.11, so it lives in its own
Python 3.9 virtual environment outside the repository; run this script with that Python:

    ~/.pyenv/versions/3.9.18/bin/python -m venv /tmp/accasim-venv
    /tmp/accasim-venv/bin/pip install accasim==1.1.3
    /tmp/accasim-venv/bin/python tests/benchmarks/bench_accasim.py TRACE.swf[.gz] PROCS

It simulates one node of PROCS cores (a processor pool) with AccaSim's FIFO dispatcher and
EASY backfilling and prints the wall time of the simulation. AccaSim's EASY computes the
head's reservation once and does not protect it, so its schedule differs from ours: this
is a speed reference, not a correctness one.
"""

import gzip
import json
import os
import shutil
import sys
import tempfile
import time


def main():
    trace, procs = sys.argv[1], int(sys.argv[2])
    from accasim.base.allocator_class import FirstFit
    from accasim.base.scheduler_class import EASYBackfilling
    from accasim.base.simulator_class import Simulator

    tmp = tempfile.mkdtemp()
    try:
        # A processor pool: memory fields (7 used, 10 requested) set to unknown, so that
        # jobs ask for cores only.
        path = os.path.join(tmp, "trace.swf")
        opener = gzip.open if trace.endswith(".gz") else open
        with opener(trace, "rt") as src, open(path, "w") as dst:
            for line in src:
                fields = line.split()
                if line.startswith(";") or len(fields) < 18:
                    dst.write(line)
                    continue
                fields[6] = fields[9] = "-1"
                dst.write(" ".join(fields) + "\n")
        config = os.path.join(tmp, "sys.config")
        with open(config, "w") as fh:
            json.dump(
                {
                    "groups": {"g0": {"core": procs}},
                    "resources": {"g0": 1},
                    "equivalence": {},
                    "start_time": 0,
                },
                fh,
            )
        dispatcher = EASYBackfilling(FirstFit())
        sim = Simulator(
            path,
            config,
            dispatcher,
            RESULTS_FOLDER_PATH=tmp,
            scheduling_output=False,
            statistics_output=False,
            show_statistics=False,
        )
        started = time.perf_counter()
        sim.start_simulation(system_status=False, system_utilization=False)
        print(f"AccaSim EASY on {os.path.basename(trace)}: {time.perf_counter() - started:.1f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
