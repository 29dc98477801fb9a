"""Every relative link and ``#anchor`` between README.md and docs/*.md resolves (issue 21).

A link is ``[text](target)`` or an image ``![alt](target)`` outside code (fenced blocks and
inline code spans). ``http(s):`` and ``mailto:`` targets are not fetched. A relative target
must name a file or folder of the repository; an anchor must be the GitHub slug of a heading
of the page it points into. Every page of docs/ must be reachable from README.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
_LINK_RE = re.compile(r"!?\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
_CODE_SPAN_RE = re.compile(r"(`+).*?\1")
_HEADING_RE = re.compile(r"^(#{1,6})\s+(?P<title>.+?)\s*#*\s*$")
_EXTERNAL = ("http://", "https://", "mailto:")


class Link(NamedTuple):
    page: Path
    line: int
    target: str

    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def _prose_lines(text: str, keep_code: bool = False) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, inline code spans removed unless
    ``keep_code`` (a heading's anchor keeps their text)."""
    out = []
    fence = ""
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence):
                fence = ""
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            continue
        out.append((n, line if keep_code else _CODE_SPAN_RE.sub("", line)))
    return out


def links(page: Path, text: str) -> list[Link]:
    return [
        Link(page, n, m.group("target"))
        for n, line in _prose_lines(text)
        for m in _LINK_RE.finditer(line)
    ]


def slug(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link: its text
    title = title.lower().replace("`", "")
    title = re.sub(r"[^\w\- ]", "", title)
    return title.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a page's headings (a repeated one gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in _prose_lines(text, keep_code=True):
        m = _HEADING_RE.match(line)
        if not m:
            continue
        base = slug(m.group("title"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken(link: Link, read=lambda p: p.read_text(encoding="utf-8")) -> str | None:
    """Why ``link`` does not resolve, or None when it does."""
    if link.target.startswith(_EXTERNAL):
        return None
    path, _, anchor = link.target.partition("#")
    dest = (link.page.parent / path).resolve() if path else link.page
    if path and not dest.exists():
        return f"{link.where()}: {link.target}: no such file"
    if path and REPO not in dest.parents and dest != REPO:
        return f"{link.where()}: {link.target}: outside the repository"
    if anchor:
        if dest.suffix != ".md" or dest.is_dir():
            return f"{link.where()}: {link.target}: an anchor into a file that is not a page"
        if anchor not in anchors(read(dest)):
            return f"{link.where()}: {link.target}: no heading with the anchor #{anchor}"
    return None


ALL_LINKS = [link for page in PAGES for link in links(page, page.read_text(encoding="utf-8"))]


def test_the_pages_have_links():
    assert len(PAGES) > 5 and len(ALL_LINKS) > 20, (PAGES, len(ALL_LINKS))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(page):
    problems = [b for link in ALL_LINKS if link.page == page and (b := broken(link))]
    assert not problems, "\n".join(problems)


def test_every_docs_page_is_reached_from_the_readme():
    seen = {README}
    todo = [README]
    while todo:
        page = todo.pop()
        for link in links(page, page.read_text(encoding="utf-8")):
            path = link.target.partition("#")[0]
            if link.target.startswith(_EXTERNAL) or not path.endswith(".md"):
                continue
            dest = (page.parent / path).resolve()
            if dest.exists() and dest not in seen:
                seen.add(dest)
                todo.append(dest)
    assert set(PAGES) <= seen, sorted(str(p.relative_to(REPO)) for p in set(PAGES) - seen)


def test_slugs_as_github_makes_them():
    assert slug("Is it working? `softwalltime status`") == "is-it-working-softwalltime-status"
    assert slug("The predictor `calibrated`") == "the-predictor-calibrated"
    assert slug("When will my job start? `softwalltime eval-wait`") == (
        "when-will-my-job-start-softwalltime-eval-wait"
    )
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}


def test_a_broken_link_or_anchor_is_found(tmp_path):
    page = REPO / "docs" / "x.md"
    text = (
        "[ok](../README.md) [ok](#here) ![img](report.png) [web](https://example.org/nothing)\n"
        "`[code](nowhere.md)`\n## Here\n[gone](nowhere.md) [bad anchor](install.md#nowhere)\n"
        "[bad local](#there)\n```\n[in a fence](nowhere.md)\n```\n"
    )
    pages = {page: text}

    def read(p: Path) -> str:
        return pages.get(p) or p.read_text(encoding="utf-8")

    found = [b for link in links(page, text) if (b := broken(link, read))]
    assert found == [
        "docs/x.md:4: nowhere.md: no such file",
        "docs/x.md:4: install.md#nowhere: no heading with the anchor #nowhere",
        "docs/x.md:5: #there: no heading with the anchor #there",
    ]
