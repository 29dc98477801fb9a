"""Issue 32 item 3: ``hooks install`` makes the packages' user a PBS operator (refresh's timer
runs as it: qstat of every job, qalter), once; ``hooks uninstall`` takes it back; no such
user, or ``--operator ''``: the server's operators are left alone."""

from __future__ import annotations

import socket
import sys
import textwrap

from softwalltime import cli

DSN = "postgresql://softwalltime_hook@/swt?host=/run/pg"
FAKE = textwrap.dedent(
    """\
    #!{python}
    # Fake qmgr: logs each directive; keeps the server's operators in a file; knows one hook.
    import os, sys
    state = {state!r}
    d = sys.argv[2]
    open(state + "/log", "a").write(d + "\\n")
    ops = open(state + "/ops").read().split(",") if os.path.exists(state + "/ops") else []
    ops = [o for o in ops if o]
    if d == "list server operators":
        print("Server pbshost")
        if ops:  # folded after a comma, the next lines tab-indented, as qmgr does
            print("    operators = " + ",\\n\\t".join(ops))
    elif d.startswith("set server operators += "):
        open(state + "/ops", "w").write(",".join(ops + [d.split()[-1]]))
    elif d.startswith("set server operators -= "):
        open(state + "/ops", "w").write(",".join(o for o in ops if o != d.split()[-1]))
    elif d == "unset server operators":
        open(state + "/ops", "w").write("")
    elif d.startswith("list hook") or d.startswith("list resource"):
        sys.exit(1)
    """
)


def fake(tmp_path):
    qmgr = tmp_path / "qmgr"
    qmgr.write_text(FAKE.format(python=sys.executable, state=str(tmp_path)))
    qmgr.chmod(0o755)
    return qmgr


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_install_makes_the_user_an_operator_once_and_uninstall_takes_it_back(capsys, tmp_path):
    qmgr = fake(tmp_path)
    entry = f"root@{socket.getfqdn()}"  # root: a user every machine has
    for _ in range(2):
        code, out, err = run(
            capsys, "--dsn", DSN, "hooks", "install", "--qmgr", str(qmgr), "--operator", "root"
        )
        assert code == 0, err
        assert (tmp_path / "ops").read_text() == entry
    log = (tmp_path / "log").read_text()
    assert log.count(f"set server operators += {entry}") == 1
    code, out, err = run(capsys, "hooks", "uninstall", "--qmgr", str(qmgr), "--operator", "root")
    assert code == 0, err
    assert (tmp_path / "ops").read_text() == ""
    # the only operator: unset, since PBS 23.06 brings an emptied list back at its next start
    assert "qmgr -c 'unset server operators'" in out and "-=" not in out


def test_uninstall_takes_one_of_several_operators_even_past_qmgr_s_fold(capsys, tmp_path):
    qmgr = fake(tmp_path)
    entry = f"root@{socket.getfqdn()}"
    others = ["admin@elsewhere", "ops@elsewhere"]
    (tmp_path / "ops").write_text(",".join([*others, entry]))  # listed third, on a folded line
    code, out, err = run(
        capsys, "--dsn", DSN, "hooks", "install", "--qmgr", str(qmgr), "--operator", "root"
    )
    assert code == 0, err
    assert "operators" not in out  # found on the folded line: not added twice
    code, out, err = run(capsys, "hooks", "uninstall", "--qmgr", str(qmgr), "--operator", "root")
    assert code == 0, err
    assert f"qmgr -c 'set server operators -= {entry}'" in out
    assert (tmp_path / "ops").read_text() == ",".join(others)


def test_no_such_user_or_none_asked_leaves_the_operators_alone(capsys, tmp_path):
    qmgr = fake(tmp_path)
    (tmp_path / "ops").write_text("admin@elsewhere")
    for user in ("no-such-user-swt", ""):
        code, _, err = run(
            capsys, "--dsn", DSN, "hooks", "install", "--qmgr", str(qmgr), "--operator", user
        )
        assert code == 0, err
        code, _, err = run(capsys, "hooks", "uninstall", "--qmgr", str(qmgr), "--operator", user)
        assert code == 0, err
    assert "operators" not in (tmp_path / "log").read_text()
    assert (tmp_path / "ops").read_text() == "admin@elsewhere"


def test_dry_run_shows_the_operator_step_and_a_bad_name_is_one_line(capsys):
    code, out, _ = run(capsys, "--dsn", DSN, "hooks", "install", "--dry-run", "--operator", "root")
    assert code == 0
    assert f"qmgr -c 'set server operators += root@{socket.getfqdn()}'" in out
    code, out, err = run(capsys, "--dsn", DSN, "hooks", "install", "--operator", "a b;c")
    assert (code, out) == (1, "")
    assert err == "softwalltime: error: invalid --operator 'a b;c': use letters, digits, _ and -\n"
