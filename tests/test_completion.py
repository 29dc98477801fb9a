"""Issue 33: bash and zsh completion generated from the argparse definitions, run in the real
shells: subcommands at every level, each command's options, an option's choices, files."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers_runtime import skip_or_fail

from softwalltime.cli import build_parser, completion


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("completion") / "softwalltime"
    path.write_text(completion.script("bash"))
    return str(path)


def bash_complete(script: str, *words: str) -> list[str]:
    """COMPREPLY after typing ``words`` (the last one is being completed)."""
    quoted = " ".join(f"'{w}'" for w in words)
    proc = subprocess.run(
        ["bash", "--norc", "-c",
         f'source "$0"; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _softwalltime;'
         ' printf "%s\\n" "${COMPREPLY[@]}"', script],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return proc.stdout.split()


def test_bash_completes_commands_subcommands_options_and_choices(bash_script, tmp_path):
    assert "refresh" in bash_complete(bash_script, "softwalltime", "")
    assert bash_complete(bash_script, "softwalltime", "d") == ["db"]
    assert bash_complete(bash_script, "softwalltime", "db", "up") == ["upgrade"]
    assert bash_complete(bash_script, "softwalltime", "--dsn", "x", "hooks", "i") == ["install"]
    assert bash_complete(bash_script, "softwalltime", "predict", "--predictor", "v") == [
        "v1", "v2", "v3",
    ]  # fmt: skip
    assert "--hook-file" in bash_complete(bash_script, "softwalltime", "refresh", "--")
    assert "--no-progress" in bash_complete(bash_script, "softwalltime-ingest", "--n")
    (tmp_path / "trace.swf").write_text("")
    files = bash_complete(bash_script, "softwalltime", "--config", str(tmp_path / "tr"))
    assert files == [str(tmp_path / "trace.swf")]


def test_every_subcommand_and_option_is_in_the_tables():
    subs, opts, values = completion.tables()

    def walk(path, parser):
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag in opts[path].split(), (path, flag)
            if hasattr(action, "choices") and isinstance(action.choices, dict):
                assert sorted(action.choices) == subs[path].split(), path
                for name, child in action.choices.items():
                    walk(f"{path} {name}", child)

    walk("softwalltime", build_parser())
    assert values["softwalltime predict --predictor"] == "v1 v2 v3 calibrated learned"
    assert values["softwalltime --config"] == ""  # a file


def test_zsh_completes_the_same(tmp_path):
    if shutil.which("zsh") is None:
        skip_or_fail("zsh is missing, so its completion cannot be run", "apt-get install zsh")
    folder = tmp_path / "fpath"
    folder.mkdir()
    (folder / "_softwalltime").write_text(completion.script("zsh"))
    # zpty-free check: load the function, then call it with a stub compadd that prints
    driver = (
        f"fpath=({folder} $fpath); autoload -Uz _softwalltime;"
        ' compadd() { [[ $1 == -- ]] && shift; print -l -- "$@" }; _files() { print FILES };'
        " words=(softwalltime db up); CURRENT=3; _softwalltime;"
        " words=(softwalltime predict --predictor v); CURRENT=4; _softwalltime;"
        " words=(softwalltime --config x); CURRENT=3; _softwalltime"
    )
    proc = subprocess.run(["zsh", "-f", "-c", driver], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.split()
    assert out[:6] == ["check", "current", "downgrade", "grant", "prune", "upgrade"]
    assert out[6:11] == ["v1", "v2", "v3", "calibrated", "learned"] and out[11:] == ["FILES"]


def test_the_module_prints_a_script_per_shell(capsys):
    assert completion.main(["bash"]) == 0
    assert capsys.readouterr().out.endswith("softwalltime softwalltime-ingest\n")
    with pytest.raises(SystemExit) as exc:
        completion.main(["fish"])
    assert exc.value.code == 2
