"""The import rules of the project, checked on the source (ast), not by convention.

- softwalltime never imports the ingester, the hooks, or ``pbs``;
- the modules the hook imports use only the standard library, psycopg2 and each other;
- migrations/versions are frozen snapshots and never import softwalltime.schema.
"""

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "softwalltime"
# Modules pbs_server's Python imports through hooks/softwalltime_hook.py (Python 3.6+).
HOOK_PATH = {"__init__", "errors", "units", "config", "predict", "decide", "lookup", "hooklog"}


def imports_of(path: Path) -> set[str]:
    """Top-level names imported by a file; relative imports as '.name'."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = node.module or ""
                if base:
                    names.add("." + base.split(".")[0])
                else:
                    names.update("." + alias.name for alias in node.names)
            else:
                names.add(node.module or "")
    return names


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.name)
def test_core_never_imports_front_ends(path):
    for name in imports_of(path):
        root = name.split(".")[0]
        assert root not in {"ingest", "softwalltime_ingest", "hooks", "pbs"}, (path.name, name)


@pytest.mark.parametrize(
    "path", sorted(p for p in CORE.glob("*.py") if p.stem in HOOK_PATH), ids=lambda p: p.name
)
def test_hook_path_uses_stdlib_psycopg2_and_itself(path):
    for name in imports_of(path):
        if name.startswith("."):
            assert name[1:] in HOOK_PATH, f"{path.name} imports .{name[1:]}, not on the hook path"
            continue
        root = name.split(".")[0]
        if root == "softwalltime":
            assert name.split(".")[1] in HOOK_PATH, (path.name, name)
            continue
        assert root in sys.stdlib_module_names or root == "psycopg2", (path.name, name)


@pytest.mark.parametrize(
    "path", sorted((REPO / "migrations" / "versions").glob("*.py")), ids=lambda p: p.name
)
def test_migrations_are_frozen_snapshots(path):
    assert not any(n.startswith("softwalltime") for n in imports_of(path)), path.name
