"""Issue 9 item 15: a trace where no job can be evaluated is an error that says why, with
no empty figures; LLNL traces (wait = -1 everywhere) replay only when asked."""

import pytest
from helpers_data import TRACES

from softwalltime import cli


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("trace", "reason"),
    [
        ("METACENTRUM-2009-2.swf.gz", "no requested walltime: 103,656"),
        # and one request of 738,738,720 s (23 years): beyond the plausible bounds
        ("LLNL-Atlas-2006-2.1-cln.swf.gz", "no submit/start/end time: 35,516"),
        ("LLNL-Atlas-2006-2.1-cln.swf.gz", "requested time < 0 or > 10 years: 1"),
        ("LLNL-Thunder-2007-1.1-cln.swf.gz", "no submit/start/end time"),
    ],
)
def test_nothing_to_evaluate_is_an_error_and_writes_nothing(capsys, tmp_path, trace, reason):
    path = TRACES / trace
    plots = tmp_path / "plots"
    code, out, err = run(capsys, "evaluate", "--plot", str(plots), str(path))
    assert code == 1 and out == ""
    (line,) = [x for x in err.splitlines() if x.startswith("softwalltime: error:")]
    assert f"no job of {path} can be evaluated (" in line and reason in line
    assert not plots.exists()
    if "LLNL" in trace:
        assert "--start-from-submit" in line


@pytest.mark.slow
def test_start_from_submit_replays_llnl_when_asked(capsys, caplog):
    path = TRACES / "LLNL-Atlas-2006-2.1-cln.swf.gz"
    code, out, err = run(capsys, "evaluate", "--json", "--start-from-submit", str(path))
    assert code == 0, err
    import json

    report = json.loads(out)
    assert report["jobs"] > 10000
    assert "replayed with their submit time as start (--start-from-submit)" in caplog.text
