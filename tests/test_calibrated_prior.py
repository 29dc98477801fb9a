"""The prior shipped for the predictor ``calibrated``: its format, how it is built, and
that ``calibrate`` (by default) and ``evaluate --prior`` start from it."""

import json
from pathlib import Path

import psycopg2
import pytest

from softwalltime import cli
from softwalltime.core import calibrated as cal
from softwalltime.replay.evaluate import columns, replay, replay_calibrated
from softwalltime.replay.prior import (
    PRIOR_JOBS,
    PRIOR_PATH,
    PriorError,
    build_prior,
    load_prior,
    prior_table,
)
from softwalltime.replay.trace import TraceJob
from softwalltime.replay.trace_readers import read_pbs

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "softwalltime" / "data" / "cesnet-openpbs-testserver.log"
H = 3600


def test_the_shipped_prior_fits_this_predictor():
    doc = json.loads(PRIOR_PATH.read_text())
    assert doc["sources"] == [
        "CERIT-SC-wagap-2013.alea.swf.gz",
        "HPC2N-2002-2.2-cln.swf.gz",
        "CTC-SP2-1996-3.1-cln.swf.gz",
    ]  # the tuning traces only: KTH-SP2 and SDSC-SP2 stay validation
    table = load_prior()
    covered = [b for b in range(cal.BINS) if table.jobs[b]]
    assert len(covered) >= cal.BINS // 2
    assert all(table.jobs[b] == PRIOR_JOBS for b in covered)
    for _bin, under, acc in doc["cells"]:
        assert all(0.0 <= x <= 1.0 for x in under + acc)
    # a covered bin chooses from the prior at once, not v3 by default
    assert any(table.choose(b) != cal.R_V3 for b in covered)


def _workload(run_of, n=200):
    """One user, 1 h walltime, 1 cpu, jobs one after the other."""
    jobs, t = [], 0
    for k in range(n):
        run = run_of(k)
        jobs.append(TraceJob("u", t, t, t + run, H, run, 1))
        t += run + 10
    return columns(jobs)[0]


def test_the_prior_is_the_mean_of_each_traces_rates():
    short = _workload(lambda k: 600)
    mixed = _workload(lambda k: 600 if k % 2 else 3000)
    doc = build_prior([short, mixed], ["short", "mixed"])
    assert doc["rules"] == list(cal.RULES) and doc["sources"] == ["short", "mixed"]
    cells = {b: (u, a) for b, u, a in doc["cells"]}
    _s, t1 = replay_calibrated(short, 12.0)
    _s, t2 = replay_calibrated(mixed, 12.0)
    rules = len(cal.RULES)
    for b, (under, acc) in cells.items():
        rates = [t.under[b * rules + cal.R_WALLTIME] / t.jobs[b] for t in (t1, t2) if t.jobs[b]]
        assert under[cal.R_WALLTIME] == pytest.approx(sum(rates) / len(rates), abs=1e-6)
        accs = [t.acc[b * rules + cal.R_V3] / t.jobs[b] for t in (t1, t2) if t.jobs[b]]
        assert acc[cal.R_V3] == pytest.approx(sum(accs) / len(accs), abs=1e-6)
    # as a table: PRIOR_JOBS pseudo-jobs per covered bin, the rates kept
    table = prior_table(doc)
    b, (under, _acc) = next(iter(cells.items()))
    assert table.jobs[b] == PRIOR_JOBS
    assert table.under[b * rules + 3] == round(PRIOR_JOBS * under[3])


def test_a_prior_for_other_rules_is_a_clear_error(tmp_path):
    doc = json.loads(PRIOR_PATH.read_text())
    doc["rules"] = doc["rules"][:-1]
    bad = tmp_path / "prior.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(PriorError, match="other rules or bins.*rebuild it"):
        load_prior(bad)
    bad.write_text("{")
    with pytest.raises(PriorError, match="cannot read the prior"):
        load_prior(bad)


def _stored(dsn):
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT choices FROM calibration_state")
            return json.loads(cur.fetchone()[0])["rules"]
    finally:
        conn.close()


def test_calibrate_starts_from_the_prior(fresh_dsn, capsys):
    """A site without history gets the prior's choices; --no-prior: v3 everywhere."""
    assert cli.main(["--dsn", fresh_dsn, "calibrate", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["prior"] is True and doc["jobs"] == 0
    assert _stored(fresh_dsn) == load_prior().choices()
    assert cli.main(["--dsn", fresh_dsn, "calibrate", "--no-prior", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["prior"] is False
    assert _stored(fresh_dsn) == [cal.R_V3] * cal.BINS


def test_evaluate_prior_starts_the_replay_from_it(capsys):
    assert cli.main(["evaluate", "--prior", "--predictors", "calibrated", "--json",
                     str(SAMPLE)]) == 0  # fmt: skip
    got = json.loads(capsys.readouterr().out)["predictors"]["calibrated"]
    jobs = read_pbs([str(SAMPLE)]).jobs
    with_prior = replay(jobs, ["calibrated"], start=load_prior()).soft_s["calibrated"]
    runs = columns(jobs)[0].runs
    under = 100.0 * sum(s < r for s, r in zip(with_prior, runs)) / len(runs)
    assert got["under_pct"] == pytest.approx(under)
