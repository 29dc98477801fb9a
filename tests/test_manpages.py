"""A man page per command, generated from the argparse definitions (issue 21).

The pages are checked against the parsers walked here, independently of the generator's own
walk: every command and subcommand at every level has a page that names each of its options,
and ``man`` (groff) renders each page without a warning. The packages' copies are checked in
tests/test_packaging_rpm.py (file list) and tests/test_packaging.py (the .deb).
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_runtime import need_runtime
from softwalltime_ingest.__main__ import build_parser as build_ingest_parser

from softwalltime.cli import build_parser, manpage


def _commands(name: str, parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """This parser and every subparser below it, by page name (``softwalltime-db-upgrade``)."""
    out = {name: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                out.update(_commands(f"{name}-{sub}", child))
    return out


def _expected() -> dict[str, argparse.ArgumentParser]:
    everything = _commands("softwalltime", build_parser())
    # `softwalltime ingest` and the console script softwalltime-ingest share one page,
    # written from the script's parser (which has the global options besides)
    everything["softwalltime-ingest"] = build_ingest_parser()
    return everything


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("man")
    paths = manpage.write(out)
    return {p.name: p.read_text(encoding="ascii") for p in paths}


def test_every_command_and_subcommand_has_a_page(written):
    expected = _expected()
    assert {"softwalltime-db-upgrade", "softwalltime-hooks-install", "softwalltime-ingest"} <= set(
        expected
    )
    assert set(written) == {f"{name}.1" for name in expected}


@pytest.mark.parametrize("name", sorted(_expected()))
def test_a_page_names_every_option_and_argument(written, name):
    text = written[f"{name}.1"]
    parser = _expected()[name]
    assert text.startswith(f'.TH "{manpage.escape(name.upper())}" "1" ')
    # the first word of each item of a bold line: "-h", "--help", "--dsn", "SOURCE", ...
    listed = {
        item.split(" ")[0]
        for line in text.splitlines()
        if line.startswith(".B ")
        for item in line[3:].split(", ")
    }
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        for option in action.option_strings or [str(action.metavar or action.dest)]:
            assert manpage.escape(option) in listed, (name, option)
    for action in parser._actions:  # each subcommand is listed, with a pointer to its page
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices:
                assert f".B {manpage.escape(sub)}\n" in text, (name, sub)
                assert f"\\fB{manpage.escape(f'{name}-{sub}')}\\fR(1)" in text, (name, sub)


def test_the_ingest_page_says_both_ways_to_run_it(written):
    text = written["softwalltime-ingest.1"]
    assert ".B softwalltime\\-ingest\n" in text and ".B softwalltime ingest\n" in text
    assert "\\-\\-dsn" in text  # the script's own global options


def _man_warnings(path: Path) -> str:
    """What ``man`` prints on stderr while rendering a page with groff's warnings on (as
    Debian's lintian checks pages), plus groff's own with every warning enabled."""
    env = dict(os.environ, LC_ALL="C.UTF-8", MANROFFSEQ="", MANWIDTH="80")
    man = subprocess.run(
        ["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    groff = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", "-z", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert man.returncode == 0 and groff.returncode == 0, (man.stderr, groff.stderr)
    return man.stderr + groff.stderr


@pytest.mark.slow
def test_man_renders_every_page_without_a_warning(tmp_path):
    need_runtime("/usr/bin/man", "that the man pages render (apt-get install man-db)")
    need_runtime("/usr/bin/groff", "that the man pages render (apt-get install groff-base)")
    paths = manpage.write(tmp_path)
    assert len(paths) == len(_expected())
    problems = {p.name: w for p in paths if (w := _man_warnings(p))}
    assert not problems, problems
    shown = subprocess.run(
        ["man", "-l", str(tmp_path / "softwalltime-db-upgrade.1")],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "MAN_KEEP_FORMATTING"}
        | {"MANWIDTH": "80"},
        check=True,
    ).stdout
    assert "softwalltime db upgrade [-h] [--json] [revision]" in shown.replace("\u2010", "-")


def test_a_broken_page_is_caught(tmp_path):
    """The warning check can fail: a page with an unknown macro and a bad escape."""
    need_runtime("/usr/bin/groff", "that the man pages render (apt-get install groff-base)")
    bad = tmp_path / "bad.1"
    bad.write_text('.TH "BAD" "1"\n.SH NAME\nbad \\- a page\n.XY nothing\n\\qbad escape\n')
    assert _man_warnings(bad)


def test_escape():
    assert manpage.escape("--dsn") == "\\-\\-dsn"
    assert manpage.escape(".starts with a dot\n'and a quote") == (
        "\\&.starts with a dot\n\\&'and a quote"
    )
    assert manpage.escape("a\\b") == "a\\eb"
    assert manpage.escape("≤ 5 s × 2") == "\\[u2264] 5 s \\[u00D7] 2"


def test_gzip_pages_are_the_same_bytes_every_time(tmp_path):
    first = manpage.write(tmp_path / "a", compress=True)
    second = manpage.write(tmp_path / "b", compress=True)
    assert [p.name for p in first] == [p.name for p in second]
    assert all(p.name.endswith(".1.gz") for p in first)
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes(), a.name
    plain = manpage.write(tmp_path / "c")
    assert gzip.decompress(first[0].read_bytes()) == plain[0].read_bytes()


@pytest.mark.slow
def test_the_module_runs_as_make_man_does(tmp_path):
    out = tmp_path / "man"
    proc = subprocess.run(
        [sys.executable, "-m", "softwalltime.cli.manpage", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{len(_expected())} man pages in {out}\n"
    assert (out / "softwalltime.1").is_file()


def test_pages_say_exit_status_and_the_scripts_environment_and_files(written):
    """Issue 33: EXIT STATUS on every page (the command's own statuses where its description
    gives them); ENVIRONMENT and FILES on the console scripts' pages."""
    for name, text in written.items():
        assert ".SH EXIT STATUS" in text, name
    assert "0: done; 1: some jobs failed" in written["softwalltime-refresh.1"]
    assert "0 OK, 1 warning, 2 critical, 3 unknown" in written["softwalltime-status.1"]
    assert "2: the command line is wrong" in written["softwalltime-predict.1"]
    for name in ("softwalltime.1", "softwalltime-ingest.1"):
        text = written[name]
        assert ".SH ENVIRONMENT" in text and ".SH FILES" in text, name
        assert "SOFTWALLTIME_CONFIG" in text and "/etc/softwalltime.json" in text
    assert ".SH ENVIRONMENT" not in written["softwalltime-db-upgrade.1"]


def test_the_config_page_lists_every_setting_and_renders(tmp_path):
    from softwalltime.core.config import load_settings

    path = manpage.write_config(tmp_path)
    assert path.name == "softwalltime.json.5"
    text = path.read_text(encoding="ascii")
    assert text.startswith('.TH "SOFTWALLTIME.JSON" "5"')
    for key in load_settings(None, environ={})._fields:
        if key != "source":
            assert f".B {manpage.escape(key)}\n" in text, key
    assert "SOFTWALLTIME_V3_JOBS; default 15; 1 to 1000" in text
    if os.path.exists("/usr/bin/groff") and os.path.exists("/usr/bin/man"):
        assert _man_warnings(path) == ""
    proc = subprocess.run(
        [sys.executable, "-m", "softwalltime.cli.manpage", "--gzip", str(tmp_path / "1"),
         "--config-page", str(tmp_path / "5")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert gzip.decompress((tmp_path / "5" / "softwalltime.json.5.gz").read_bytes()) == (
        text.encode()
    )


def _unroff(text: str) -> str:
    """A page's words as --help would print them (escapes undone, lines joined)."""
    return " ".join(text.replace("\\-", "-").replace("\\&", "").split())


@pytest.mark.parametrize(
    "name,said",
    [
        ("softwalltime-simulate", ["The model:", "Formula search (--search):", "--goal PCT is"]),
        ("softwalltime-evaluate", ["never in its own history", "ends come first"]),
        ("softwalltime-wait", ["--publish (cron, as a PBS manager", "'wait JOBID' answers"]),
    ],
)
def test_what_a_short_help_leaves_out_is_on_its_page(written, name, said):
    """Issue 51: --help is short; the model, the method and the examples are the man
    page's (the long description, then EXAMPLES), and the page's synopsis names every
    option even where --help's usage says [options]."""
    parser = _expected()[name]
    short = " ".join(parser.format_help().split())
    page = _unroff(written[f"{name}.1"])
    for text in said:
        assert text in page and text not in short, (name, text)
    assert ".SH EXAMPLES" in written[f"{name}.1"] and "\nexamples:" not in parser.format_help()
    assert f"man {name}," in short and f"man {name}," not in page  # the page is that
    synopsis = written[f"{name}.1"].split(".SH SYNOPSIS")[1].split(".SH")[0]
    for action in parser._actions:
        if action.option_strings and action.help != argparse.SUPPRESS:  # -h for -h, --help
            assert manpage.escape(action.option_strings[0]) in synopsis, (name, action.dest)
