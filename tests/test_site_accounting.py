"""PBS accounting logs replayed on a site file (issue 46): each E record's
``Resource_List.select``, ``Resource_List.place``, ``queue``, ``group`` and ``account`` are
the job's site columns, so the site model places its chunks as PBS did."""

from __future__ import annotations

from pathlib import Path

from helpers_live import e_line

from softwalltime import api
from softwalltime import site_file as sf
from softwalltime.replay.sim_workload import read_workload

T0 = 1_790_000_000


def _log(tmp_path: Path) -> str:
    # two vnodes of 4 cpus: two 3-cpu jobs take one each; the 2-cpu job fits the pool's
    # 2 free cpus but no vnode: PBS ran it when the first ended, an hour later
    wall = "02:00:00"
    lines = [
        e_line(1, T0, T0, T0 + 3600, ncpus=3, walltime=wall),
        e_line(2, T0, T0, T0 + 7000, ncpus=3, walltime=wall),
        e_line(3, T0, T0 + 3600, T0 + 3700, user="bob", ncpus=2, walltime=wall).replace(
            "Resource_List.place=pack", "Resource_List.place=excl"
        ),
    ]
    path = tmp_path / "20260101"
    path.write_text("".join(lines))
    return str(path)


def test_e_records_give_the_site_columns(tmp_path) -> None:
    work = read_workload(_log(tmp_path), site_columns=True)
    assert work.site is not None
    assert work.site.select == ["1:ncpus=3", "1:ncpus=3", "1:ncpus=2"]
    assert work.site.place == ["pack", "pack", "excl"]
    assert work.site.queue == ["workq"] * 3
    assert work.site.group == ["alice", "alice", "bob"]
    assert work.site.account == ["", "", ""]
    assert read_workload(_log(tmp_path)).site is None  # a pool's workload: no columns


def test_an_accounting_log_fits_the_site_model_where_the_pool_misses(tmp_path) -> None:
    site = sf.Site(
        "two", (sf.Vnode("n0", "n0", 4), sf.Vnode("n1", "n1", 4)), (sf.Queue("workq"),), "workq",
        scheduler=sf.Scheduler(strict_ordering=True),
    )  # fmt: skip
    log = _log(tmp_path)
    [on_site] = api.fit(api.load([log], site=site), site=site)
    [on_pool] = api.fit(api.load([log], procs=8))
    assert on_site is not None and on_pool is not None
    assert on_site.model.startswith("site model: 2 vnodes")
    assert on_site.overall.within_10min_pct == 100.0  # job 3 waits for a whole vnode
    assert on_pool.overall.within_10min_pct < 100.0  # the pool starts it at once
