"""What the policy did, on the real server (issue 48): a KTH-SP2 segment runs under
fcfs-bf1, ``softwalltime policy apply`` sets a formula that runs the widest jobs first, the
next segment runs under it; the jobs' E records are ingested, and ``report --procs`` replays
the second segment under both policies: its "current policy" figures are what the server
did (the twin's agreement), and ``status``'s guard stays OK with the site's tolerances and
turns WARNING, naming the revert, when the test forces one to break.

Times are compressed as in ``test_twin_real.py`` (waits of seconds), which is why the forced
case sets ``status_guard_noise_s`` to 0.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pbsctl
import pytest
import twin
from conftest import SOFTWALLTIME

from softwalltime.replay import pbsched
from softwalltime.replay import simulate as sim

pytestmark = pytest.mark.pbs

TRACE = pbsctl.REPO / "tests" / "data" / "traces" / "KTH-SP2-1996-2.1-cln.swf.gz"
PROCS = 100
JOBS = 36  # the first segment (fcfs-bf1), as test_twin_real's
JOBS_AFTER = 60  # the second (the formula): at least counterfactual.MIN_JOBS
TARGET_S = 150
MARGIN_S = 2
TOLERANCE_S = 2
MIN_SAME_ORDER = 0.90  # the twin's bar: pairs the server starts in the model's order


@pytest.fixture()
def twin_server(pbs_server: None) -> Iterator[None]:
    with twin.server(PROCS):
        yield


def sw(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SOFTWALLTIME_DSN"}
    return subprocess.run(
        [SOFTWALLTIME, "--config", str(cfg), *args],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def segments() -> tuple[list[twin.TwinJob], list[twin.TwinJob], float]:
    work = sim.fit_machine(sim.read_workload(str(TRACE)), PROCS)
    first, _wait, span = twin.choose_segment(
        work, PROCS, JOBS, 16, pbsched.parse_policy("fcfs-bf1")
    )
    factor = math.ceil(span / TARGET_S)
    a = twin.scale(work, first, JOBS, factor, MARGIN_S)
    b = twin.scale(work, first + JOBS, JOBS_AFTER, factor, MARGIN_S)
    return a, b, factor


def ingest_records(ids: list[str], tmp_path: Path, cfg: Path) -> None:
    """The E records of ``ids`` only (the server's log holds every test's jobs), ingested."""
    wanted = {f";E;{i};" for i in ids}
    lines = [
        line
        for path in sorted(pbsctl.ACCOUNTING.iterdir())
        for line in path.read_text(errors="replace").splitlines()
        if any(w in line for w in wanted)
    ]
    assert len(lines) == len(ids), (len(lines), len(ids))
    folder = tmp_path / "accounting"
    folder.mkdir()
    (folder / "20261207").write_text("\n".join(lines) + "\n")
    ok(sw(cfg, "ingest", "--no-progress", "--dir", str(folder)))


def guard(cfg: Path, **settings: object) -> dict:
    base = json.loads(cfg.read_text())
    forced = cfg.with_name("guard.json")
    forced.write_text(json.dumps({**base, "status_guard_procs": PROCS, **settings}))
    proc = sw(forced, "status", "--hook", "swt_guard_no_hook", "--json")
    return next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "policy guard")


def test_report_and_guard_across_a_policy_change(twin_server, hook_db, tmp_path) -> None:
    a, b, factor = segments()
    cfg = tmp_path / "softwalltime.json"
    cfg.write_text(json.dumps({"pbs_command_prefix": [str(pbsctl.PBSX)], "dsn": hook_db}))
    ids: list[str] = []
    try:
        first = twin.replay(a, twin.PERFECT, PROCS, twin.policy("fcfs-bf1", PROCS, factor))
        ids += first.ids
        ok(sw(cfg, "policy", "apply", "--formula", "ncpus", "--backfill-depth", "1", "--yes"))
        widest = twin.policy("ncpus-bf1", PROCS, factor)  # what policy apply set
        second = twin.run_jobs(b, twin.PERFECT, PROCS, widest)
        ids += second.ids
        c = twin.compare(b, second.submit, second.real, second.measured, TOLERANCE_S, 600 / factor)
        text = twin.report(c, b, second.submit, second.real, second.measured, second.ids)
        print(text)
        # the server ran the formula as the model does (a job released in the same second
        # as a wider one may start in a cycle before it: the twin's jitter, seconds here)
        assert c.pairs > 100 and twin.agreement(c) >= MIN_SAME_ORDER, text
        ingest_records(ids, tmp_path, cfg)

        report = json.loads(ok(sw(cfg, "report", "--procs", str(PROCS), "--json")))
        effect = report["policy_effect"]
        print(json.dumps(effect, indent=1))
        assert (effect["current_policy"], effect["previous_policy"]) == ("ncpus-bf1", "fcfs-bf1")
        assert effect["jobs"] == len(b) and effect["wider_than_machine"] == 0
        assert "note" not in effect
        everyone = effect["rows"][0]
        assert everyone["group"] == "all jobs" and everyone["jobs"] == len(b)
        # "real" is what the server did; "current" the model's replay from the history,
        # which is the twin's own simulation of the same jobs (the run times the server
        # measured, the release times), up to the warm-up's jobs and whole seconds
        real_s = everyone["real"]["mean_wait_h"] * 3600
        model_s = everyone["current"]["mean_wait_h"] * 3600
        assert abs(real_s - sum(x - s for x, s in zip(second.real, second.submit)) / len(b)) < 1
        twin_s = sum(x - s for x, s in zip(second.measured, second.submit)) / len(b)
        assert abs(model_s - twin_s) <= 1.0 + 0.2 * twin_s, (model_s, twin_s)
        assert effect["fit"]["within_10min_pct"] == 100.0
        # the widest-first formula made this segment wait longer than fcfs would have
        assert everyone["current"]["p95_wait_h"] > everyone["previous"]["p95_wait_h"]

        held = guard(cfg)  # the site's tolerances: waits of seconds are within the noise
        assert held["state"] == "OK" and "ncpus-bf1 holds" in held["summary"], held
        broken = guard(cfg, status_guard_noise_s=0)
        assert broken["state"] == "WARNING", broken
        assert "p95 wait" in broken["summary"]
        assert broken["summary"].endswith("to go back: softwalltime policy revert --yes")
        history = json.loads(ok(sw(cfg, "policy", "history", "--json")))
        assert history[0]["action"] == "apply"  # the guard reverted nothing
    finally:
        twin.purge_all(ids)
