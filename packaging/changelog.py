"""docs/changelog.md in the packages' formats: ``python3 packaging/changelog.py FORMAT``.

FORMAT ``debian``: the Debian changelog of a native package (usr/share/doc/PKG/changelog.gz);
``rpm``: the ``%changelog`` section's body; ``version``: the newest entry's version;
``maintainer``: who the packages name as maintainer and packager. The
maintainer is ``$DEBFULLNAME <$DEBEMAIL>`` (Debian's variables, as ``dch`` reads them), else
the checkout's git identity. Standard library only: it runs on the build host's python3.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEADING = re.compile(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)$")


def entries(text: str) -> list[tuple[str, dt.date, list[str]]]:
    """(version, date, bullet items) per ``## X.Y.Z (YYYY-MM-DD)`` section, newest first; an
    item's continuation lines are joined to it."""
    out: list[tuple[str, dt.date, list[str]]] = []
    for line in text.splitlines():
        m = HEADING.match(line)
        if m:
            out.append((m.group(1), dt.date.fromisoformat(m.group(2)), []))
        elif out and line.startswith("- "):
            out[-1][2].append(line[2:].strip())
        elif out and out[-1][2] and line.startswith("  ") and line.strip():
            out[-1][2][-1] += " " + line.strip()
    if not out:
        raise SystemExit("changelog.py: no '## X.Y.Z (YYYY-MM-DD)' entry in docs/changelog.md")
    return out


def maintainer() -> str:
    def git(key: str) -> str:
        proc = subprocess.run(["git", "-C", str(REPO), "config", key], capture_output=True,
                              text=True, check=False)  # fmt: skip
        return proc.stdout.strip()

    name = os.environ.get("DEBFULLNAME") or git("user.name")
    email = os.environ.get("DEBEMAIL") or git("user.email")
    if not name or not email or email.endswith("@localhost"):
        raise SystemExit("changelog.py: set DEBFULLNAME and DEBEMAIL (a real address)")
    return f"{name} <{email}>"


def _wrap(item: str, first: str, rest: str, width: int = 79) -> list[str]:
    lines, line = [], first
    for word in item.split():
        if len(line) + len(word) + 1 > width and line.strip() not in ("*", "-"):
            lines.append(line)
            line = rest
        line += ("" if line.endswith(" ") else " ") + word
    return lines + [line]


def debian(text: str, who: str) -> str:
    out = []
    for version, date, items in entries(text):
        stamp = dt.datetime.combine(date, dt.time(12), dt.timezone.utc)
        out.append(f"softwalltime ({version}) unstable; urgency=medium\n")
        for item in items:
            out.extend(_wrap(item, "  *", "    "))
        out.append(f"\n -- {who}  {stamp.strftime('%a, %d %b %Y %H:%M:%S +0000')}\n")
    return "\n".join(out)


def rpm(text: str, who: str) -> str:
    out = []
    for version, date, items in entries(text):
        out.append(f"* {date.strftime('%a %b %d %Y')} {who} - {version}-1")
        for item in items:
            out.extend(_wrap(item.replace("%", "%%"), "-", "  "))
        out.append("")
    return "\n".join(out)


def main() -> int:
    what = sys.argv[1] if len(sys.argv) == 2 else ""
    text = (REPO / "docs" / "changelog.md").read_text(encoding="utf-8")
    if what == "version":
        print(entries(text)[0][0])
    elif what == "maintainer":
        print(maintainer())
    elif what in ("debian", "rpm"):
        print((debian if what == "debian" else rpm)(text, maintainer()))
    else:
        print("usage: changelog.py debian|rpm|version|maintainer", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
