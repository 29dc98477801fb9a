"""Write the bundled traces' site files, derived from the traces (issue 46):

    python packaging/make_sites.py [TRACE_DIR]   # default tests/data/traces

into softwalltime/data/sites/NAME.json (softwalltime/replay/site_traces.py says how each is
derived; tests/test_site_traces.py derives them again and compares)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from softwalltime import site_file  # noqa: E402
from softwalltime.replay import site_traces  # noqa: E402

OUT = REPO / "softwalltime" / "data" / "sites"


def main(argv: list[str]) -> int:
    trace_dir = argv[0] if argv else str(REPO / "tests" / "data" / "traces")
    OUT.mkdir(exist_ok=True)
    for name, site in sorted(site_traces.derive(trace_dir).items()):
        path = OUT / f"{name}.json"
        path.write_text(site_file.dump(site))
        print(f"{path.relative_to(REPO)}: {len(site.vnodes)} vnodes, {site.ncpus} cpus, "
              f"{len(site.queues)} queues")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
