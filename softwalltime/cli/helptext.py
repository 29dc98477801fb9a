"""Short ``--help``, whole man page (issue 51).

A command's ``--help`` is its usage, one paragraph and its options: at most
:data:`MAX_HELP_LINES` lines at 80 columns (``tests/test_cli.py``). What a command's help
would say beyond that (the model, the method, the examples) is its man page's alone
(:func:`man_only`; ``softwalltime.cli.manpage`` renders it) and its docs page's, which the
paragraph names (:func:`more`).
"""

from __future__ import annotations

import argparse

MAX_HELP_LINES = 60
DOCS = "/usr/share/doc/softwalltime"  # where the packages install the docs (and SEE ALSO)
_DESCRIPTION = "_softwalltime_man_description"
_EPILOG = "_softwalltime_man_epilog"


_MORE = "The model, the method and examples: man "


def more(page: str, doc: str) -> str:
    """The sentence that ends a short description: where the rest is (two lines; the man
    page, which holds the rest, leaves it out)."""
    return f"{_MORE}{page},\nand {DOCS}/docs/{doc}.\n"


def man_only(parser: argparse.ArgumentParser, description: str, epilog: str = "") -> None:
    """Give ``parser``'s man page more than its ``--help``: ``description`` follows the
    parser's own in DESCRIPTION, ``epilog`` (the examples) stands where the parser's
    epilog would."""
    setattr(parser, _DESCRIPTION, description)
    setattr(parser, _EPILOG, epilog)


def man_description(parser: argparse.ArgumentParser) -> str:
    """The man page's DESCRIPTION: the parser's own, then its man-only part."""
    extra = getattr(parser, _DESCRIPTION, "")
    own = (parser.description or "").split(_MORE)[0]
    return f"{own.rstrip()}\n\n{extra.strip(chr(10))}" if extra else own


def man_epilog(parser: argparse.ArgumentParser) -> str:
    """The man page's epilog: the man-only one, else the parser's."""
    return getattr(parser, _EPILOG, "") or parser.epilog or ""
