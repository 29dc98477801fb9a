"""The fit to real starts (softwalltime/replay/fit.py) and ``simulate --policies/--search``
printing it first, withholding the PBS settings when it is poor (issue 46)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_data import TRACES

from softwalltime import cli
from softwalltime import site_file as sf
from softwalltime.replay import fit, pbsched
from softwalltime.replay import simulate as sim
from softwalltime.replay.sim_workload import make_workload

H = 3600
SITES = Path(__file__).resolve().parents[1] / "softwalltime" / "data" / "sites"


def test_a_model_that_is_the_real_schedule_fits_good() -> None:
    submit = [0, 10, 20, 30, 40]
    real = [0, 100, 5000, 300, 9000]
    f = fit.measure("fcfs-bf1", "m", submit, real, real)
    o = f.overall
    assert (o.jobs, o.pair_order_pct, o.within_10min_pct, o.within_1h_pct) == (
        5,
        100.0,
        100.0,
        100.0,
    )
    assert o.real_mean_h == o.model_mean_h
    assert f.verdict == fit.GOOD and f.reasons == []


def test_co_queued_pairs_are_those_submitted_while_the_earlier_waited() -> None:
    submit = [0, 10, 20, 5000]
    real = [1000, 500, 20, 5000]  # job 3 arrives after every other started: no pair
    assert fit.coqueued(submit, real) == [(0, 1), (0, 2), (1, 2)]
    # job 2 starts within PAIR_TOLERANCE_S of its submit and of nothing else: still ordered
    assert fit.coqueued([0, 10], [100, 130]) == []  # 30 s apart: one cycle, no order


def test_pair_order_counts_reversals_and_ties_half() -> None:
    pairs = [(0, 1), (0, 2), (1, 2)]
    real = [1000, 500, 20]
    assert fit.order_pct(real, real, pairs) == 100.0
    assert fit.order_pct([0, 1, 2], real, pairs) == 0.0  # FCFS against a reversed reality
    assert fit.order_pct([5, 5, 0], real, pairs) == pytest.approx(100.0 * 2.5 / 3)


def test_pairs_are_sampled_above_the_cap_and_the_total_estimated() -> None:
    n = 400
    submit = list(range(0, 10 * n, 10))
    real = [10 * n + 1000 * k for k in range(n)]  # all queued together, starts far apart
    chosen, total = fit.pairs(submit, real, cap=500)
    assert len(chosen) == 500 and total == n * (n - 1) // 2
    assert all(a < b for a, b in chosen)
    assert fit.pairs(submit, real, cap=500) == (chosen, total)  # seeded
    everything, all_total = fit.pairs(submit, real, cap=10**6)
    assert len(everything) == all_total == total


def test_a_model_twice_too_short_or_out_of_order_is_poor() -> None:
    submit = [0, 10, 20, 30]
    real = [4 * H, 3 * H, 2 * H, 1 * H]  # last in, first out
    fcfs = [0, 1, 2, 3]  # starts at once, in FCFS order
    f = fit.measure("fcfs-bf1", "m", submit, real, fcfs)
    assert f.poor
    assert f.reasons[0].startswith("mean wait off by")
    assert f.reasons[1] == "0.0 % of co-queued pairs in the real order"
    # the same order, waits 1.5x too long: fair (within 2x, not within 1.25x)
    slower = [int(r * 1.5) for r in real]
    assert fit.measure("p", "m", submit, real, slower).verdict == fit.FAIR


def test_small_waits_are_not_off_by_a_factor() -> None:
    # 6 min against 1 min of mean wait: a factor of 6, but within SLACK_H
    submit, real, model = [0], [60], [360]
    assert fit.measure("p", "m", submit, real, model).verdict == fit.GOOD


def test_per_queue_figures_and_unknown_starts() -> None:
    submit = [0, 10, 20, 30]
    real = [0, -1, 7200, 40]
    model = [0, 50, 3600, 40]
    f = fit.measure("p", "m", submit, real, model, queue=["q_2h", "q_2h", "q_1d", "q_2h"])
    assert f.unknown == 1 and f.overall.jobs == 3
    assert [(q.name, q.jobs) for q in f.queues] == [("q_2h", 2), ("q_1d", 1)]
    assert f.queues[1].real_mean_h == pytest.approx(7180 / H)
    assert f.queues[1].model_mean_h == pytest.approx(3580 / H)
    assert json.loads(json.dumps(f.as_json()))["queues"][1]["name"] == "q_1d"
    with pytest.raises(ValueError, match="no job's real start"):
        fit.measure("p", "m", [0], [-1], [0])


def test_the_policy_of_a_sites_settings() -> None:
    assert fit.site_policy(None, 1, True) == "fcfs-bf1"
    assert fit.site_policy("walltime", 3, True) == "walltime-bf3"
    assert fit.site_policy(None, 0, True) == "fcfs-strict"
    assert fit.site_policy(None, 1, False) == "fcfs-greedy"  # no backfilling without strict
    for label in ("fcfs-bf1", "walltime-bf3", "fcfs-strict", "fcfs-greedy"):
        pbsched.parse_policy(label)


# ---------------------------------------------------------------------------------------
# simulate --policies / --search on synthetic traces whose fit is known

PROCS = 8
JOBS = [  # (user, submit, run, walltime, procs): a queue builds up on 8 cpus
    (1 + k % 3, 60 * k, 600 + 300 * (k % 5), 3600, 2 + 2 * (k % 3)) for k in range(60)
]


def _model_starts() -> list[int]:
    rows = [(str(u), s, w, r, p) for u, s, r, w, p in JOBS]
    work = make_workload("t", rows, PROCS)
    policy = pbsched.parse_policy("fcfs-bf1")
    return pbsched.simulate_pbs(work, sim.make_source("users"), PROCS, policy).start


def _swf(path: Path, waits: list[int]) -> Path:
    lines = [f"; MaxProcs: {PROCS}"]
    for k, ((u, s, r, w, p), wait) in enumerate(zip(JOBS, waits), 1):
        lines.append(f"{k} {s} {wait} {r} {p} -1 -1 {p} {w} -1 1 {u} 1 -1 -1 1 -1 -1")
    path.write_text("\n".join(lines) + "\n")
    return path


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_trace_the_model_reproduces_fits_good_and_gets_its_settings(tmp_path, capsys) -> None:
    starts = _model_starts()
    waits = [st - s for st, (_u, s, *_r) in zip(starts, JOBS)]
    assert max(waits) > H  # a real queue, not an idle machine
    trace = _swf(tmp_path / "same.swf", waits)
    code, out, _ = _cli(capsys, "simulate", "--policies", "fcfs-bf1,sjf-bf1", "--estimates",
                        "users", str(trace))  # fmt: skip
    assert code == 0
    assert out.startswith("fit to real starts: fcfs-bf1 with the users' walltimes on one pool of 8")
    assert "fit: GOOD" in out
    assert "  all                 60" in out and "100.0 %" in out
    assert out.index("fit: GOOD") < out.index("policy          estimates")
    assert "withheld" not in out and 'qmgr -c "set server backfill_depth = 1"' in out


def test_a_trace_the_model_misses_withholds_the_settings_unless_forced(tmp_path, capsys) -> None:
    waits = [10 * H - 60 * k for k in range(len(JOBS))]  # a day-long queue, last in first out
    trace = str(_swf(tmp_path / "far.swf", waits))
    args = ["simulate", "--policies", "fcfs-bf1,sjf-bf1", "--estimates", "users", trace]
    code, out, _ = _cli(capsys, *args)
    assert code == 0 and "fit: POOR: mean wait off by" in out
    assert "PBS settings withheld" in out and "pass --site" in out
    assert "qmgr -c" not in out
    code, out, _ = _cli(capsys, *args, "--force")
    assert code == 0 and "fit: POOR" in out and "qmgr -c" in out and "withheld" not in out
    code, out, _ = _cli(capsys, *args, "--json")
    doc = json.loads(out)
    assert doc["fit"]["verdict"] == "poor" and doc["fit"]["overall"]["jobs"] == len(JOBS)
    assert doc["recommended"]["pbs_settings"] == []
    assert "poor" in doc["recommended"]["pbs_settings_withheld"]


def test_search_withholds_its_settings_on_a_poor_fit(tmp_path, capsys) -> None:
    waits = [10 * H - 60 * k for k in range(len(JOBS))]
    trace = str(_swf(tmp_path / "far.swf", waits))
    code, out, _ = _cli(capsys, "simulate", "--search", "--estimates", "users", trace)
    assert code == 0 and "fit: POOR" in out
    assert "Pareto front" in out and "qmgr -c" not in out
    assert "PBS settings withheld" in out or "recommended: no change" in out


def test_current_names_the_replayed_policy_and_is_refused_alone(tmp_path, capsys) -> None:
    trace = str(_swf(tmp_path / "t.swf", [0] * len(JOBS)))
    code, out, _ = _cli(capsys, "simulate", "--policies", "fcfs-bf1", "--estimates", "users",
                        "--current", "sjf-greedy", trace)  # fmt: skip
    assert code == 0 and out.startswith("fit to real starts: sjf-greedy ")
    code, _out, err = _cli(capsys, "simulate", "--current", "sjf-bf1", trace)
    assert code != 0 and "--current, --force: only with --policies or --search" in err
    code, _out, err = _cli(capsys, "simulate", "--policies", "fcfs-bf1", "--current", "nope-x",
                           trace)  # fmt: skip
    assert code != 0 and "--current" in err


# ---------------------------------------------------------------------------------------
# --site: the site model in --policies and --search (tests/test_site_model.py); one pool of
# the site's cpus in the plain simulate, eval-start and wait


def _site_file(tmp_path: Path, cpus: list[int]) -> str:
    site = sf.Site(
        "tsite", tuple(sf.Vnode(f"n{k}", f"n{k}", c) for k, c in enumerate(cpus)),
        (sf.Queue("workq"),), "workq",
        scheduler=sf.Scheduler(job_sort_formula="walltime", backfill_depth=2, strict_ordering=True),
    )  # fmt: skip
    path = tmp_path / "site.json"
    path.write_text(sf.dump(site))
    return str(path)


def test_simulate_runs_a_site_model_and_says_so(tmp_path, capsys) -> None:
    trace = str(_swf(tmp_path / "t.swf", [0] * len(JOBS)))  # MaxProcs 8
    site = _site_file(tmp_path, [4, 4, 4])  # 12 cpus
    code, out, _ = _cli(capsys, "simulate", "--policies", "fcfs-bf1", "--estimates", "users",
                        "--site", site, trace)  # fmt: skip
    assert code == 0
    first, second = out.splitlines()[:2]
    assert first == (
        "site tsite: 3 vnodes, 1 queues, modelled as a site model: its vnodes, chunks, queues "
        "and limits"
    )
    # the current policy is the site's: its formula, strict_ordering, backfill_depth 2
    assert second == (
        "fit to real starts: walltime-bf2 with the users' walltimes on site model: 3 vnodes, 1 "
        "queues (tsite, 12 cpus)"
    )
    assert "machine: 12 processors" in out
    code, _out, err = _cli(capsys, "simulate", "--procs", "8", "--site", site, trace)
    assert code != 0 and "--procs 8 and the site's 12 cpus: give one" in err
    code, out, err = _cli(
        capsys, "simulate", "--estimates", "users", "--json", "--site", site, trace
    )
    assert code == 0 and "modelled as one pool of 12 cpus (EASY backfilling" in err
    assert json.loads(out)["procs"] == 12


def test_a_bad_site_file_is_refused_with_its_key(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": sf.FORMAT, "vnodes": [{"name": "n", "ncpus": -1}]}))
    trace = str(_swf(tmp_path / "t.swf", [0] * len(JOBS)))
    code, _out, err = _cli(capsys, "simulate", "--site", str(bad), trace)
    assert code != 0 and f"{bad}: site file: vnodes[0].ncpus must be an integer >= 0" in err


def test_eval_start_and_wait_take_the_site(tmp_path, capsys) -> None:
    trace = str(_swf(tmp_path / "t.swf", [0] * len(JOBS)))
    site = _site_file(tmp_path, [4, 4, 4])
    code, out, err = _cli(capsys, "eval-start", "--first", "1", "--targets", "20",
                          "--predictions", "3", "--samples", "2", "--json", "--site", site,
                          trace)  # fmt: skip
    assert code == 0 and json.loads(out)["procs"] == 12
    # the site model, said so (tests/test_starttime_site.py runs it)
    assert "site tsite: 3 vnodes, 1 queues, modelled as a site model" in err
    assert json.loads(out)["model"].startswith("site model: 3 vnodes")
    code, out, err = _cli(capsys, "wait", "--ncpus", "2", "--walltime", "1:00:00",
                          "--machine-procs", "8", "--site", site)  # fmt: skip
    assert code != 0 and "--procs 8 and the site's 12 cpus" in err
    assert "modelled as a site model" in out


@pytest.mark.slow  # the whole trace on the site model, twice (about 30 s of cpu)
def test_cerit_with_its_site_file_is_fitted_per_queue(capsys) -> None:
    """docs/simulate.md's CERIT-SC table: the site model's mean wait, overall and per
    queue, against the real one."""
    trace = str(TRACES / "CERIT-SC-wagap-2013.alea.swf.gz")
    code, out, _ = _cli(capsys, "simulate", "--policies", "fcfs-bf1", "--estimates", "users",
                        "--json", "--site", str(SITES / "cerit-sc-2013.json"), trace)  # fmt: skip
    assert code == 0
    found = json.loads(out)
    fitted = found["fit"]
    # every job a select can say has a pool (the vnodes' memory holds the mem=3gb ones)
    assert fitted["overall"]["jobs"] == 17778 and fitted["verdict"] == "poor"
    assert fitted["model"].startswith("site model: 68 vnodes, 11 queues")
    queues = {q["name"]: q for q in fitted["queues"]}
    assert {"q_1d", "q_2h", "q_1w", "q_2d"} <= set(queues)
    assert queues["q_2d"]["real_mean_h"] > 40 > queues["q_4h"]["real_mean_h"]  # the issue's
    assert sum(q["jobs"] for q in fitted["queues"]) == 17778
    # the site model with the site's fairshare and its inferred run limits waits 3.00 h
    # (without the limits 2.11 h; the pool: 0.37 h), the trace 14.27 h
    assert fitted["policy"] == "fairshare-bf1"
    assert round(fitted["overall"]["model_mean_h"], 2) == 3.00
    assert round(fitted["overall"]["real_mean_h"], 2) == 14.27
    # the per-queue ranking table: q_2d, the longest real wait, is 4th of 6 in the model
    model = {n: round(queues[n]["model_mean_h"], 2) for n in ("q_2h", "q_4d", "q_2d")}
    assert model == {"q_2h": 6.79, "q_4d": 4.52, "q_2d": 1.15}


def test_pbs_accounting_starts_are_the_real_ones() -> None:
    from softwalltime import api

    log = TRACES / "pbs_accounting" / "fairshareSim_OpenPBS_cesnet-torque1-testserver.log"
    [f] = api.fit(api.load([str(log)], procs=64))
    assert f is not None and f.overall.jobs == 200 and f.unknown == 0
    assert f.policy == "fcfs-bf1" and f.model == "one pool of 64 cpus"


def test_the_replay_plans_with_the_soft_walltimes_the_jobs_had() -> None:
    from softwalltime import api
    from softwalltime.replay import runs
    from softwalltime.replay.sources import RecordedSource

    log = TRACES / "pbs_accounting" / "openpbs-23.06-local.log"
    [f] = api.fit(api.load([str(log)], procs=2))
    assert f is not None and f.estimates == "recorded"
    assert f.format().startswith("fit to real starts: fcfs-bf1 with the soft walltimes the jobs")
    # 2 cpus: a 1-cpu job runs 1 h; a 2-cpu job waits for it; a 1-cpu job of walltime 2 h,
    # soft 10 min, backfills only if planned with its soft walltime (ends before the 1 h mark)
    rows = [("a", 0, 3600, 3600, 1), ("b", 10, 3600, 600, 2), ("c", 20, 7200, 300, 1)]
    real = [0, 3600, 20]
    plain = make_workload("t", rows, 2, starts=real)
    soft = make_workload("t", rows, 2, starts=real, softs=[None, None, 600])
    assert plain.recorded_soft is None and soft.recorded_soft == [-1, -1, 600]
    source = RecordedSource()
    source.bind(soft)
    assert [source.on_submit(j, 0) for j in range(3)] == [3600, 3600, 600]
    with_users = runs.run_fit(runs.Loaded("t", plain, 2), "fcfs-bf1", runs.SimOptions())
    with_soft = runs.run_fit(runs.Loaded("t", soft, 2), "fcfs-bf1", runs.SimOptions())
    assert with_users is not None and with_soft is not None
    assert (with_users.estimates, with_soft.estimates) == ("users", "recorded")
    assert with_soft.overall.within_10min_pct == 100.0  # c backfills at once, as it did
    assert with_users.overall.within_10min_pct < 100.0  # c waits behind b's reservation


def test_the_sites_fairshare_runs_under_every_policy_and_the_fit(tmp_path, capsys) -> None:
    # a site file with fair_share: the fit replays fairshare-bf1 and the line says why; a
    # fair_share that gives nobody a share (unknown_shares 0, no resource_group) would run
    # no job on PBS: refused
    trace = str(_swf(tmp_path / "t.swf", [0] * len(JOBS)))
    fair = sf.Scheduler(strict_ordering=True, fair_share=True, unknown_shares=10)
    path = tmp_path / "fair.json"
    site = sf.Site("fsite", (sf.Vnode("n0", "n0", 12),), (sf.Queue("workq"),), "workq")
    path.write_text(sf.dump(site._replace(scheduler=fair)))
    code, out, _ = _cli(capsys, "simulate", "--policies", "fcfs-bf1", "--estimates", "users",
                        "--site", str(path), trace)  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert lines[1] == (
        "fairshare on under every policy (the site file's sched_config): fair_share by euser, "
        "usage cput, decay x0.5 every 24 h, a flat tree of the users with equal shares"
    )
    assert lines[2].startswith("fit to real starts: fairshare-bf1 with the users' walltimes")
    path.write_text(sf.dump(site._replace(scheduler=fair._replace(unknown_shares=0))))
    code, _out, err = _cli(capsys, "simulate", "--policies", "fcfs-bf1", "--site", str(path),
                           trace)  # fmt: skip
    assert code != 0 and "--site: the site's fairshare gives no entity a share" in err


def test_a_current_fairshare_policy_keeps_fairshare_on_under_every_policy(tmp_path, capsys):
    trace = str(_swf(tmp_path / "t.swf", [0] * len(JOBS)))
    code, out, _ = _cli(capsys, "simulate", "--policies", "sjf-bf1", "--estimates", "users",
                        "--current", "fairshare-bf1", trace)  # fmt: skip
    assert code == 0
    assert out.startswith("fairshare on under every policy (--current fairshare-bf1): ")
    code, out, _ = _cli(capsys, "simulate", "--policies", "sjf-bf1", "--estimates", "users",
                        "--current", "fcfs-bf1", trace)  # fmt: skip
    assert code == 0 and "fairshare on" not in out
