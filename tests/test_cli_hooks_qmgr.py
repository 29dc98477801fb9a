"""``hooks install|uninstall --qmgr`` that cannot run: one line and exit 1, never a traceback
(found on a fresh clone: FileNotFoundError from subprocess)."""

from __future__ import annotations

import pytest

from softwalltime import cli


@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_a_missing_or_broken_qmgr_is_one_line(capsys, tmp_path, command):
    def run(qmgr: str) -> tuple[int, str]:
        code = cli.main(["--dsn", "host=/nowhere", "hooks", command, "--qmgr", qmgr])
        out, err = capsys.readouterr()
        assert out == "" and "Traceback" not in err
        return code, err

    assert run("/nonexistent/qmgr") == (
        1,
        "softwalltime: error: --qmgr /nonexistent/qmgr: no such file\n",
    )
    plain = tmp_path / "qmgr.txt"
    plain.write_text("")
    assert run(str(plain)) == (1, f"softwalltime: error: --qmgr {plain}: not an executable file\n")
    broken = tmp_path / "qmgr"
    broken.write_text("#!/nonexistent/interpreter\n")
    broken.chmod(0o755)  # executable, but exec fails
    assert run(str(broken)) == (
        1,
        f"softwalltime: error: cannot run {broken}: No such file or directory\n",
    )
