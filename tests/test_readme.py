"""Every ```console example of README.md and docs/*.md runs and prints what it says (issue 9
item 18; the pages by task of issue 21). A failure names the page and line (docs/ingest.md:33).

A block's lines starting with ``$ `` are commands (a trailing ``\\`` continues one); the
lines after a command, up to the next one, are its output (stdout and stderr as a terminal
shows them). In an expected line, ``…`` stands for any text (times, sizes). Each block
runs in one bash, in a scratch directory that sees the repository's ``softwalltime/``
(its bundled data), with ``SOFTWALLTIME_DSN`` naming a fresh migrated database, no other
``SOFTWALLTIME_*`` variable, and this virtualenv first on ``PATH``. A command must exit 0
unless its output shows ``error:``.

Two markers, on the line right before the fence: ``<!-- readme: not run: REASON -->``
(for examples that need root, PBS or another machine's paths; the reason is required) and
``<!-- readme: output varies -->`` (only the exit status is checked).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]
# The front page and the pages by task: every example in them is run.
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_MARKER_RE = re.compile(r"^<!-- readme: (not run: (?P<why>.+?)|output varies) -->$")
_RC = "__swt_readme_rc__"


class Command(NamedTuple):
    text: str
    expected: list[str]


class Block(NamedTuple):
    page: str  # the file's path in the repository, for file:line
    line: int
    marker: str  # "", "varies" or "not run: WHY"
    commands: list[Command]


def blocks(text: str, page: str = "README.md") -> list[Block]:
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if line.strip().startswith("<!-- readme:") and not _MARKER_RE.match(line.strip()):
            raise AssertionError(
                f"{page}:{n}: bad marker {line.strip()!r} (want '<!-- readme: not run: "
                "REASON -->' or '<!-- readme: output varies -->')"
            )
    found = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        start = i
        marker = ""
        m = _MARKER_RE.match(lines[i - 1].strip()) if i else None
        if m:
            marker = f"not run: {m.group('why')}" if m.group("why") else "varies"
        i += 1
        commands: list[Command] = []
        while i < len(lines) and lines[i].strip() != "```":
            line = lines[i]
            if line.startswith("$ "):
                text = line[2:]
                while text.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    text = text[:-1] + "\n" + lines[i]
                commands.append(Command(text, []))
            elif commands:
                commands[-1].expected.append(line.rstrip())
            else:
                raise AssertionError(f"{page}:{i + 1}: output before any '$ ' command")
            i += 1
        found.append(Block(page, start + 1, marker, commands))
        i += 1
    return found


def where(block: Block) -> str:
    return f"{block.page}:{block.line}"


BLOCKS = [
    b
    for path in PAGES
    for b in blocks(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
]
RUN = [b for b in BLOCKS if not b.marker.startswith("not run")]
NOT_RUN = [b for b in BLOCKS if b.marker.startswith("not run")]


def test_every_example_is_run_or_says_why_not():
    assert RUN, "no README example is run"
    for block in BLOCKS:
        assert block.commands, f"{where(block)}: a console block without a command"
        if block.marker.startswith("not run"):
            assert len(block.marker) > len("not run: ") + 5, where(block)


def test_the_docs_pages_are_collected():
    """The pages by task hold most examples: a glob that found none would run nothing."""
    assert len(PAGES) > 5, PAGES
    pages_with_examples = {b.page for b in RUN}
    assert {"docs/ingest.md", "docs/hook.md", "docs/evaluate.md"} <= pages_with_examples


@pytest.mark.parametrize("block", NOT_RUN, ids=[f"{where(b)} {b.marker}" for b in NOT_RUN])
def test_readme_example_not_run(block):
    # Listed with its reason in the test id, so what is not run is in every report.
    assert block.commands, f"{where(block)}: a console block without a command"
    assert len(block.marker) > len("not run: ") + 5, f"{where(block)}: reason too short"


@pytest.mark.parametrize(
    "marker",
    ["<!-- readme: not run -->", "<!-- readme: not run: -->", "<!-- readme: skip -->"],
)
def test_a_marker_without_a_reason_is_refused(marker):
    with pytest.raises(AssertionError, match="bad marker"):
        blocks(f"text\n{marker}\n```console\n$ true\n```\n")


def test_blocks_parse_commands_continuations_and_output():
    text = (
        "<!-- readme: output varies -->\n```console\n$ echo a \\\n  b\nab\n"
        "$ false\n```\n\n```sh\n$ not a console block\n```\n"
    )
    (block,) = blocks(text, "docs/x.md")
    assert (block.page, block.line, block.marker) == ("docs/x.md", 2, "varies")
    assert block.commands == [Command("echo a \n  b", ["ab"]), Command("false", [])]


def _matches(expected: str, actual: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("…"))
    return re.fullmatch(pattern, actual) is not None


def test_an_error_names_the_page_and_line():
    with pytest.raises(AssertionError, match=r"^docs/ingest\.md:3: output before"):
        blocks("text\n```console\nno command\n```\n", "docs/ingest.md")


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN, ids=[where(b) for b in RUN])
def test_readme_example(block, fresh_dsn, tmp_path):
    (tmp_path / "softwalltime").symlink_to(REPO / "softwalltime")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOFTWALLTIME_")}
    env.update(
        SOFTWALLTIME_DSN=fresh_dsn,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        PYTHONUNBUFFERED="1",  # stdout and stderr in the order a terminal shows them
        COLUMNS="100",
    )
    script = "\n".join(f"{c.text}\necho {_RC}=$?" for c in block.commands)
    proc = subprocess.run(
        ["bash", "-c", script + "\n"],
        cwd=tmp_path,
        env=env,
        capture_output=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )
    outputs = proc.stdout.split(f"{_RC}=")
    assert len(outputs) == len(block.commands) + 1, proc.stdout[-2000:]
    for i, command in enumerate(block.commands):
        text = outputs[i] if i == 0 else outputs[i].split("\n", 1)[1]
        rc = int(outputs[i + 1].split("\n", 1)[0])
        actual = [line.rstrip() for line in text.rstrip("\n").split("\n")] if text.strip() else []
        here = f"{where(block)}: $ {command.text}"
        error_shown = any("error:" in line for line in command.expected)
        assert rc == 0 or error_shown, f"{here}\nexit {rc}:\n{text}"
        if block.marker == "varies":
            continue
        assert len(actual) == len(command.expected) and all(
            _matches(e, a) for e, a in zip(command.expected, actual)
        ), f"{here}\nexpected:\n" + "\n".join(command.expected) + "\nactual:\n" + "\n".join(actual)


_SHELLS = ("sh", "bash", "shell", "zsh")
# A block another test runs names it: <!-- database: run by tests/test_install_database.py -->
_RUN_BY_RE = re.compile(r"^<!-- [\w-]+: run by (?P<test>tests/\w+\.py) -->$")


def test_every_shell_block_is_run_or_says_why_not():
    """Issue 50 item 6: the ```console blocks are run above; a ```sh block is run by the test
    its marker names (which reads that marker), or its marker says why it is not."""
    unmarked = []
    for path in PAGES:
        page = str(path.relative_to(REPO))
        lines = path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines):
            if not (line.startswith("```") and line[3:].strip() in _SHELLS):
                continue
            before = lines[n - 1].strip() if n else ""
            by = _RUN_BY_RE.match(before)
            if by:
                test = REPO / by.group("test")
                assert test.is_file(), f"{page}:{n}: {before}: no such test"
                assert before in test.read_text() and path.name in test.read_text(), (
                    f"{page}:{n}: {by.group('test')} does not read this block"
                )
            elif not before.startswith("<!-- readme: not run: "):
                unmarked.append(f"{page}:{n + 1}")
    assert unmarked == [], "shell blocks neither run nor marked 'not run: WHY'"


# A command in a page's text: `softwalltime ...` in backquotes, outside the blocks.
_INLINE_RE = re.compile(r"(?<!`)`(softwalltime [^`]+)`(?!`)")
# A synopsis rather than a command: a placeholder (N, TRACE, [--user U], ..., a|b)
_PLACEHOLDER_RE = re.compile(r"(^|[\s=,])[A-Z][A-Z0-9_]*(\b|$)|\[|\.\.\.|…|\|")


def inline_commands(text: str) -> list[tuple[int, str]]:
    """(line, command) of each inline command with an option and no placeholder."""
    outside = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    found = []
    for m in _INLINE_RE.finditer(outside):
        command = " ".join(m.group(1).split())
        if not any(w.startswith("-") for w in command.split()) or _PLACEHOLDER_RE.search(command):
            continue  # a command's name, or a synopsis
        found.append((outside[: m.start()].count("\n") + 1, command))
    return found


def test_inline_commands_are_whole():
    """Issue 50 item 6: the README named `softwalltime simulate --policies` as if it ran
    alone; run as written, --policies took the trace for its list ("the following arguments
    are required: SOURCE"). Every command in a page's text is accepted as written by the
    command's own parser (the blocks are run above)."""
    import contextlib
    import io
    import shlex

    from softwalltime.cli import build_parser

    parser = build_parser()
    checked, refused = 0, []
    for path in PAGES:
        for line, command in inline_commands(path.read_text(encoding="utf-8")):
            said = io.StringIO()
            try:
                with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
                    parser.parse_args(shlex.split(command)[1:])
            except SystemExit as stop:
                if stop.code:
                    last = said.getvalue().strip().splitlines()[-1:]
                    refused.append(f"{path.relative_to(REPO)}:{line}: `{command}`: {last}")
                    continue
            checked += 1
    assert refused == []
    assert checked >= 15  # the pages' commands were found (20 when written)


def test_inline_commands_found_and_synopses_left():
    text = (
        "`softwalltime simulate --policies` and `softwalltime wait --ncpus N`, `softwalltime"
        " report`,\n`softwalltime db prune --keep-days 730`\n```sh\n`softwalltime x --y`\n```\n"
    )
    assert inline_commands(text) == [
        (1, "softwalltime simulate --policies"),
        (2, "softwalltime db prune --keep-days 730"),
    ]


def test_the_front_page_is_short_and_shows_the_product_at_work():
    """Issue 51: a newcomer reads the README's front in two minutes: at most 80 lines before
    its docs table, with a console session of the product among them."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    table = next(n for n, line in enumerate(lines) if line.startswith("| page |"))
    front = lines[:table]
    assert len(front) <= 80, f"README.md: {len(front)} lines before the docs table"
    consoles = [b for b in BLOCKS if b.page == "README.md" and b.line <= table]
    assert consoles, "README.md: no console session before the docs table"
    assert any(b in RUN for b in consoles), "README.md: no console block before it is run"
