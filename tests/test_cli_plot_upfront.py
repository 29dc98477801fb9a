"""``simulate --plot`` and ``evaluate --plot`` check matplotlib and the directory before
the work (issue 21: simulate failed after a whole 24 s run without matplotlib)."""

from __future__ import annotations

import sys

import pytest

from softwalltime import cli
from softwalltime.replay import simulate as sim
from softwalltime.replay import trace_readers


@pytest.fixture()
def no_work(monkeypatch):
    """The work itself must not start."""

    def refuse(*args, **kwargs):
        raise AssertionError("the run started before --plot was checked")

    monkeypatch.setattr(sim, "read_workload", refuse)
    monkeypatch.setattr(trace_readers, "read_sources", refuse)


@pytest.mark.parametrize("command", ["simulate", "evaluate"])
def test_plot_without_matplotlib_fails_before_the_run(
    capsys, monkeypatch, tmp_path, no_work, command
):
    for name in [n for n in sys.modules if n == "matplotlib" or n.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    code = cli.main([command, "--plot", str(tmp_path / "plots"), str(tmp_path / "trace.swf")])
    err = capsys.readouterr().err
    assert code == 1
    assert err == (
        "softwalltime: error: --plot needs matplotlib, which is not installed:"
        " pip install 'softwalltime[plot]'\n"
    )
    assert not (tmp_path / "plots").exists()


@pytest.mark.parametrize("command", ["simulate", "evaluate"])
def test_plot_into_a_file_fails_before_the_run(capsys, tmp_path, no_work, command):
    blocker = tmp_path / "afile"
    blocker.write_text("")
    code = cli.main([command, "--plot", str(blocker / "plots"), str(tmp_path / "trace.swf")])
    assert code == 1
    assert capsys.readouterr().err == (
        f"softwalltime: error: --plot {blocker}/plots: {blocker} is not a directory\n"
    )
