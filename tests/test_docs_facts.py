"""Facts the pages state that the code decides: they are read from the code here, so a page
cannot go stale (issue 33: install.md showed revision 0006 with 0007 the head; three textfile
directories; `debug` missing from the settings page)."""

from __future__ import annotations

import re
from pathlib import Path

from softwalltime.core.config import DEFAULTS
from softwalltime.db import engine as db

REPO = Path(__file__).resolve().parents[1]


def _page(name: str) -> str:
    return (REPO / "docs" / name).read_text(encoding="utf-8")


def test_install_shows_the_head_revision_of_the_migrations():
    shown = re.findall(r"is at revision (\w+)", _page("install.md"))
    assert shown, "install.md no longer shows what 'db upgrade' prints"
    assert set(shown) == {db.head_revision()}
    # the head read from the migration files themselves, not only through alembic
    files = sorted(p.name for p in (REPO / "migrations" / "versions").glob("[0-9]*_*.py"))
    assert db.head_revision() == files[-1].split("_", 1)[0]


def test_one_prometheus_textfile_directory_everywhere():
    """The unit, the cron file and the pages write the metrics to the same folder."""
    places = {
        "docs/operate.md": _page("operate.md"),
        "docs/install.md": _page("install.md"),
        "packaging/systemd/softwalltime-status.service": (
            REPO / "packaging" / "systemd" / "softwalltime-status.service"
        ).read_text(),
        "packaging/softwalltime.cron": (REPO / "packaging" / "softwalltime.cron").read_text(),
    }
    found = {
        where: set(re.findall(r"(/[\w/.-]+)/softwalltime\.prom", text))
        for where, text in places.items()
    }
    assert all(found.values()), found
    assert set().union(*found.values()) == {"/var/lib/prometheus/node-exporter"}, found


def _settings_rows() -> dict[str, str]:
    """The settings page's table: each file key and its default's cell."""
    rows: dict[str, str] = {}
    for line in _page("settings.md").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        keys = re.findall(r"`(\w+)`", cells[0])
        defaults = [d.strip() for d in cells[2].split(",")]
        if len(defaults) != len(keys):
            defaults = [cells[2]] * len(keys)
        rows.update(zip(keys, defaults))
    return rows


def _shown(value: object) -> str | None:
    """How the page writes a default; None: the page describes it in words (unset)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "false" if value is False else "true"
    if isinstance(value, tuple):
        return "empty" if not value else None
    return str(value)


def test_the_settings_page_lists_every_setting_with_its_default():
    rows = _settings_rows()
    assert set(rows) == set(DEFAULTS), (set(DEFAULTS) - set(rows), set(rows) - set(DEFAULTS))
    for key, value in DEFAULTS.items():
        want = _shown(value)
        if want is None:
            continue
        cell = re.sub(r"\s*\(.*\)$", "", rows[key].replace("`", ""))  # "0 (off)" -> "0"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert float(cell) == float(value), (key, rows[key])
        else:
            assert cell == want, (key, rows[key])
