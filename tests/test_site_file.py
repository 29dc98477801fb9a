"""The site file (softwalltime/site_file.py): read back equal, bad files refused by key."""

import json

import pytest

from softwalltime import site_file as sf
from softwalltime.errors import ParseError


def _site() -> sf.Site:
    return sf.Site(
        name="t",
        vnodes=(
            sf.Vnode(
                "n1", "h1", 80, mem_kb=512 * 1024**2, resources={"brno": True, "cl": "zewura"}
            ),
            sf.Vnode("n2", "h2", 12, queue="q_2h"),
        ),
        queues=(
            sf.Queue("route", kind="route", destinations=("q_2h", "q_1d")),
            sf.Queue("q_2h", priority=50, walltime_max=7200, max_run="[u:PBS_GENERIC=2]"),
            sf.Queue(
                "q_1d",
                walltime_min=7201,
                walltime_max=86400,
                max_run_res={"ncpus": "[o:PBS_ALL=64]"},
            ),
        ),
        default_queue="route",
        scheduler=sf.Scheduler(fair_share=True, resource_group=(("alice", 10, "root", 5),)),
    )


def test_a_site_reads_back_equal(tmp_path) -> None:
    p = tmp_path / "site.json"
    p.write_text(sf.dump(_site()))
    assert sf.load(str(p)) == _site()
    assert sf.load(str(p)).ncpus == 92
    # PBS's defaults where the file says nothing (parse.cpp:99, :117)
    assert (sf.Scheduler().fairshare_enforce_no_shares, sf.Scheduler().unknown_shares) == (True, 0)


@pytest.mark.parametrize(
    "change, key",
    [
        (lambda d: d.update(format="x"), "format"),
        (lambda d: d["vnodes"][0].update(ncpus=-1), "vnodes[0].ncpus"),
        (lambda d: d["vnodes"][1].update(ncpus=True), "vnodes[1].ncpus"),
        (lambda d: d["queues"][0].update(kind="weird"), "queues[0].kind"),
        (lambda d: d["scheduler"].update(nonsense=1), "unknown keys"),
        (lambda d: d.update(vnodes=[]), "vnodes must be"),
        (lambda d: d["scheduler"].update(unknown_shares="10"), "scheduler.unknown_shares"),
        (lambda d: d["scheduler"].update(fair_share="yes"), "scheduler.fair_share"),
        (lambda d: d["scheduler"].update(resources="ncpus"), "scheduler.resources"),
        (lambda d: d["scheduler"].update(fairshare_decay_factor=None), "decay_factor"),
    ],
)
def test_a_bad_file_is_refused_by_its_key(tmp_path, change, key) -> None:
    doc = sf.to_json(_site())
    change(doc)
    p = tmp_path / "site.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ParseError, match=key.replace("[", r"\[").replace("]", r"\]")):
        sf.load(str(p))


def test_not_json_and_missing_files_name_the_file(tmp_path) -> None:
    p = tmp_path / "x.json"
    p.write_text("{")
    with pytest.raises(ParseError, match="x.json: not JSON"):
        sf.load(str(p))
    with pytest.raises(ParseError, match="nope.json"):
        sf.load(str(tmp_path / "nope.json"))
