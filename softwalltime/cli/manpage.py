"""Man pages from the argparse definitions: one page per command and subcommand.

``python -m softwalltime.cli.manpage [--gzip] DIR`` (``make man``; the packages run it too)
writes ``softwalltime.1``, a page per subcommand at every level (``softwalltime-db.1``,
``softwalltime-db-upgrade.1``, ...) and one per other console script of this distribution
(``softwalltime-ingest.1``; where a subcommand has the same name, as ``softwalltime ingest``
has, that script's page serves both). The commands come from the installed distribution's
console scripts, each module's ``build_parser()``, the way the ``softwalltime`` command finds
its plugin commands, so a new command or option gets its page without an edit here. A
command whose ``--help`` is kept short gives its page more (``softwalltime.cli.helptext``):
the rest of its description, and its examples.

Our own ~200 lines instead of argparse-manpage: that tool writes one page per parser with
the subcommands inside it (no ``softwalltime-db-upgrade(1)``), and the packages are built
offline from a wheelhouse, where a build-time dependency is one more thing to fetch. The
output is plain ASCII roff (``man(7)`` macros; other characters as ``\\[uXXXX]``), so it
renders without preconv.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import os
import re
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from .. import __version__
from .helptext import DOCS, man_description, man_epilog

DISTRIBUTION = "softwalltime"
SECTION = "1"
CONFIG_PAGE = "softwalltime.json"  # section 5: the settings file
# "Exit 0: done; 1: ...; 2: ...": a command's own exit statuses, from its description
_EXIT_RE = re.compile(r"(?:^|\.\s+)(Exit (?:status )?0[^.]*(?:\.\d[^.]*)*)\.?", re.S)
EXIT_DEFAULT = (
    "0: done. 1: an error, said in one line on standard error (softwalltime: error: ...):"
    " bad input, a database or PBS that cannot be reached, a check that failed."
    " 2: the command line is wrong (a usage line and the error on standard error)."
)
ENVIRONMENT = (
    ("SOFTWALLTIME_CONFIG", "the settings file when --config is not given (default"
     " /etc/softwalltime.json; see softwalltime.json(5))"),
    ("SOFTWALLTIME_DSN", "the database when --dsn is not given (the setting dsn)"),
    ("SOFTWALLTIME_KEY", "every other setting KEY of softwalltime.json(5), upper-cased: the"
     " environment wins over the file, an option over both"),
    ("PBS_CONF_FILE", "PBS's configuration (default /etc/pbs.conf): where refresh, status and"
     " the ingester find PBS_EXEC and PBS_HOME"),
    ("PGPASSFILE", "libpq's password file when the DSN names none (default ~/.pgpass)"),
)  # fmt: skip
FILES = (
    ("/etc/softwalltime.json", "the settings (root writes it, group softwalltime reads it)"),
    ("/etc/default/softwalltime", "the timers' environment, SOFTWALLTIME_DSN of the ingester"
     " (EL: /etc/sysconfig/softwalltime); softwalltime-prune adds /etc/default/softwalltime-prune"),
    ("/var/lib/softwalltime/.pgpass", "the home of the packages' user softwalltime: the"
     " password of its database role (mode 0600)"),
    ("/run/softwalltime/", "refresh's lock file and hook.json, the hook's listing and config"
     " that the timer's root-only step hands to refresh"),
    ("/lib/systemd/system/softwalltime-*", "the timers and services of the packages"),
    ("/etc/pbs.conf", "PBS_EXEC and PBS_HOME (or PBS_CONF_FILE)"),
)  # fmt: skip
_SECTION_TITLE_RE = re.compile(r"^([a-z][a-z ]*):$")


@dataclass
class Page:
    """One man page: the command's name (``softwalltime-db-upgrade``), its parser, the
    one-line summary its parent gives it, and the pages around it."""

    name: str
    parser: argparse.ArgumentParser
    summary: str
    root: str  # the console script's page it is under (itself for a console script)
    parent: str | None = None
    children: list[str] = field(default_factory=list)
    also: str | None = None  # the same command under another name (softwalltime ingest)


def escape(text: str) -> str:
    """Roff text: backslashes and hyphens escaped, no control character at a line's start,
    every character outside ASCII as ``\\[uXXXX]``."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in text)
    return "\n".join(
        "\\&" + line if line.startswith((".", "'")) else line for line in text.split("\n")
    )


def _formatter(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    """argparse's own formatter, wide enough never to wrap: roff fills the lines."""
    return argparse.HelpFormatter(parser.prog, width=10_000)


def _is_raw(parser: argparse.ArgumentParser) -> bool:
    return isinstance(parser.formatter_class, type) and issubclass(
        parser.formatter_class, argparse.RawDescriptionHelpFormatter
    )


def _paragraphs(text: str, raw: bool) -> list[str]:
    """Roff for a description: as laid out (no fill) when the parser keeps its layout, else
    one filled paragraph per blank-line-separated block, as argparse fills them."""
    text = text.strip("\n")
    if raw:
        return [".nf", escape(text), ".fi"]
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        if out:
            out.append(".PP")
        out.append(escape(" ".join(block.split())))
    return out


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse._SubParsersAction]:  # type: ignore[type-arg]
    return [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]


def _synopsis(parser: argparse.ArgumentParser) -> list[str]:
    """Every option, even where the --help's usage says "[options]" to stay short."""
    fmt = _formatter(parser)
    fmt.add_usage(None, parser._actions, parser._mutually_exclusive_groups, prefix="")
    usage = " ".join(fmt.format_help().split())
    rest = usage[len(parser.prog) :].strip() if usage.startswith(parser.prog) else usage
    return [f".B {escape(parser.prog)}", escape(rest)] if rest else [f".B {escape(parser.prog)}"]


def _option_sections(parser: argparse.ArgumentParser) -> list[str]:
    fmt = _formatter(parser)
    out: list[str] = []
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if a.help != argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)
        ]
        if not actions:
            continue
        title = group.title or "options"
        if title in ("options", "optional arguments"):
            title = "options"
        elif title == "positional arguments":
            title = "arguments"
        out.append(f".SH {escape(title.upper())}")
        if group.description:
            out.extend(_paragraphs(group.description, raw=False))
        for action in actions:
            invocation = fmt._format_action_invocation(action)
            out += [".TP", f".B {escape(invocation)}"]
            help_text = fmt._expand_help(action) if action.help else ""
            out.append(escape(" ".join(help_text.split())) if help_text else "\\&")
    return out


def _commands_section(page: Page, pages: dict[str, Page]) -> list[str]:
    out: list[str] = []
    for action in _subparsers(page.parser):
        out.append(".SH COMMANDS")
        for choice in action._choices_actions:
            child = f"{page.name}-{choice.dest}"
            out += [".TP", f".B {escape(choice.dest)}"]
            summary = " ".join((choice.help or "").split())
            ref = f"see \\fB{escape(child)}\\fR({SECTION})" if child in pages else ""
            out.append(escape(summary) + ("; " + ref if summary and ref else ref))
    return out


def _epilog(parser: argparse.ArgumentParser) -> list[str]:
    text = man_epilog(parser).strip("\n")
    if not text:
        return []
    first, _, rest = text.partition("\n")
    m = _SECTION_TITLE_RE.match(first.strip())
    title, body = (m.group(1), rest) if m and rest.strip() else ("notes", text)
    return [f".SH {escape(title.upper())}", *_paragraphs(body, raw=_is_raw(parser))]


def _see_also(page: Page) -> list[str]:
    refs = ([page.parent] if page.parent else []) + page.children
    if page.root not in (page.name, page.parent):
        refs.insert(0, page.root)
    out = [".SH SEE ALSO"]
    if refs:
        out.append(",\n".join(f"\\fB{escape(r)}\\fR({SECTION})" for r in refs))
        out.append(".PP")
    out.append(escape(f"The documentation by task: {DOCS}/README.md and {DOCS}/docs/."))
    return out


def _exit_status(parser: argparse.ArgumentParser) -> list[str]:
    """The command's own "Exit 0: ...; 1: ..." sentence from its description, else the
    statuses every command shares."""
    m = _EXIT_RE.search(" ".join(man_description(parser).split()))
    text = m.group(1).removeprefix("Exit status ").removeprefix("Exit ") if m else EXIT_DEFAULT
    return [".SH EXIT STATUS", escape(text.rstrip(".") + ".")]


def _items(title: str, items: tuple[tuple[str, str], ...]) -> list[str]:
    out = [f".SH {title}"]
    for name, what in items:
        out += [".TP", f".B {escape(name)}", escape(what)]
    return out


def _header(name: str, section: str, date: str) -> list[str]:
    title = f'.TH "{name.upper()}" "{section}" "{date}" "softwalltime {__version__}" "softwalltime"'
    # no hyphenation, ragged right: option names are never split at a line's end
    return [title, ".nh", ".ad l"]


def render(page: Page, pages: dict[str, Page], date: str) -> str:
    """The roff source of one page."""
    parser = page.parser
    name = escape(page.name)
    lines = _header(name, SECTION, date)
    lines += [".SH NAME", f"{name} \\- {escape(page.summary)}", ".SH SYNOPSIS"]
    lines += _synopsis(parser)
    if page.also:
        lines += [".br", f".B {escape(page.also)}", escape("[same options]")]
    description = man_description(parser)
    if description:
        lines += [".SH DESCRIPTION", *_paragraphs(description, raw=_is_raw(parser))]
    if page.parent:
        lines += [
            ".PP",
            escape(f"The options every {page.root} command takes (--dsn, --config, --debug)")
            + escape(" go before the command's name: ")
            + f"see \\fB{escape(page.root)}\\fR({SECTION}).",
        ]
    lines += _commands_section(page, pages)
    lines += _option_sections(parser)
    lines += _epilog(parser)
    lines += _exit_status(parser)
    if page.parent is None:  # the console scripts' pages: what every command reads
        lines += _items("ENVIRONMENT", ENVIRONMENT) + _items("FILES", FILES)
    lines += _see_also(page)
    return "\n".join(lines) + "\n"


def render_config(date: str) -> str:
    """``softwalltime.json(5)``: every setting with its environment variable, default and
    accepted range, from the settings loader itself."""
    from ..core.config import ENV_PREFIX, RANGES, load_settings

    defaults = load_settings(None, environ={})
    lines = _header(escape(CONFIG_PAGE), "5", date)
    lines += [
        ".SH NAME",
        f"{escape(CONFIG_PAGE)} \\- softwalltime settings",
        ".SH DESCRIPTION",
        escape(
            "A JSON object of settings, read from --config FILE, else SOFTWALLTIME_CONFIG,"
            " else /etc/softwalltime.json. Precedence: defaults < this file < the SOFTWALLTIME_*"
            " environment < command-line options. An unknown key, a wrong type or a value"
            " out of its range is an error (exit 1) naming the key. In the environment, lists"
            " are comma-separated (sys_path: os.pathsep)."
        ),
        ".SH SETTINGS",
    ]
    for key in defaults._fields:
        if key == "source":
            continue
        value = getattr(defaults, key)
        shown = "none" if value in (None, "", [], ()) else json_value(value)
        bounds = f"; {_num(RANGES[key][0])} to {_num(RANGES[key][1])}" if key in RANGES else ""
        lines += [
            ".TP",
            f".B {escape(key)}",
            escape(f"{ENV_PREFIX}{key.upper()}; default {shown}{bounds}"),
        ]
    lines += _items("FILES", FILES[:1])
    lines += [
        ".SH SEE ALSO",
        f"\\fBsoftwalltime\\fR({SECTION})",
        ".PP",
        escape(f"What each setting does: {DOCS}/docs/settings.md."),
    ]
    return "\n".join(lines) + "\n"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def json_value(value: object) -> str:
    import json

    return json.dumps(list(value) if isinstance(value, tuple) else value)


def _walk(page: Page, pages: dict[str, Page]) -> None:
    if page.name in pages:  # a console script of that name documents it (softwalltime-ingest)
        pages[page.name].also = page.parser.prog
        if page.parent:
            pages[page.parent].children.append(page.name)
        return
    pages[page.name] = page
    if page.parent:
        pages[page.parent].children.append(page.name)
    for action in _subparsers(page.parser):
        for choice in action._choices_actions:
            child = action.choices[choice.dest]
            summary = " ".join((choice.help or choice.dest).split())
            name = f"{page.name}-{choice.dest}"
            _walk(Page(name, child, summary, page.root, parent=page.name), pages)


def console_scripts() -> dict[str, argparse.ArgumentParser]:
    """The distribution's console scripts and their parsers (each module's build_parser)."""
    out: dict[str, argparse.ArgumentParser] = {}
    for ep in metadata.distribution(DISTRIBUTION).entry_points:
        if ep.group != "console_scripts":
            continue
        build = getattr(importlib.import_module(ep.module), "build_parser", None)
        if build is None:
            raise SystemExit(f"manpage: {ep.value}: its module has no build_parser()")
        out[ep.name] = build()
    return out


def _summary(parser: argparse.ArgumentParser) -> str:
    """The first sentence of a top-level command's description, for NAME."""
    text = " ".join((parser.description or parser.prog).split())
    return text.split(". ")[0].rstrip(".")


def pages(scripts: dict[str, argparse.ArgumentParser] | None = None) -> dict[str, Page]:
    """Every page, by name: each console script's first (so they win a name), then the
    subcommands of each."""
    scripts = console_scripts() if scripts is None else scripts
    out = {name: Page(name, p, _summary(p), name) for name, p in sorted(scripts.items())}
    for name in sorted(scripts):
        root = out.pop(name)
        _walk(root, out)
    return out


def _date() -> str:
    """SOURCE_DATE_EPOCH (reproducible builds) or today, UTC."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    return time.strftime("%Y-%m-%d", time.gmtime(int(epoch) if epoch else None))


def _save(path: Path, text: str, compress: bool) -> Path:
    data = text.encode("ascii")
    if compress:  # mtime 0 and no name inside: the same bytes at every build
        path = path.with_name(path.name + ".gz")
        with open(path, "wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as gz:
            gz.write(data)
    else:
        path.write_bytes(data)
    return path


def write(directory: Path, compress: bool = False) -> list[Path]:
    """Write every command's page into ``directory`` (made if missing); the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    every = pages()
    date = _date()
    return [
        _save(directory / f"{name}.{SECTION}", render(every[name], every, date), compress)
        for name in sorted(every)
    ]


def write_config(directory: Path, compress: bool = False) -> Path:
    """Write ``softwalltime.json.5`` into ``directory`` (made if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    return _save(directory / f"{CONFIG_PAGE}.5", render_config(_date()), compress)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m softwalltime.cli.manpage",
        description="Write a man page per softwalltime command into DIR.",
    )
    parser.add_argument("directory", metavar="DIR", type=Path)
    parser.add_argument("--gzip", action="store_true", help="write NAME.1.gz (packages)")
    parser.add_argument(
        "--config-page",
        metavar="DIR5",
        type=Path,
        help=f"also write {CONFIG_PAGE}(5), the settings file's page, into DIR5",
    )
    args = parser.parse_args(argv)
    written = write(args.directory, compress=args.gzip)
    print(f"{len(written)} man pages in {args.directory}")
    if args.config_page:
        print(write_config(args.config_page, compress=args.gzip))
    return 0


if __name__ == "__main__":
    sys.exit(main())
