"""The import rules of the project, checked on the source (ast), not by convention.

- softwalltime never imports the ingester, the hooks, or ``pbs``;
- the modules the hook imports use only the standard library and each other (no compiled
  driver: pbs_server re-initializes its Python and C extensions do not import again);
- migrations/versions are frozen snapshots and never import softwalltime.db.schema.
"""

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "softwalltime"
# What pbs_server's Python imports through hooks/softwalltime_hook.py (Python 3.6+): the
# package root's basics and the whole hookpath/ folder, as dotted names under softwalltime.
HOOK_BASICS = {"softwalltime", "softwalltime.errors", "softwalltime.units"}
HOOK_PACKAGE = "softwalltime.hookpath"
CORE_FILES = sorted(CORE.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Absolute dotted names imported by a file (relative imports resolved)."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
                if node.module:
                    names.add(prefix)
                else:
                    names.update(f"{prefix}.{alias.name}" for alias in node.names)
            else:
                names.add(node.module or "")
    return names


def on_hook_path(name: str) -> bool:
    return name in HOOK_BASICS or name == HOOK_PACKAGE or name.startswith(HOOK_PACKAGE + ".")


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(CORE)))
def test_core_never_imports_front_ends(path):
    for name in imports_of(path):
        root = name.split(".")[0]
        assert root not in {"ingest", "softwalltime_ingest", "hooks", "pbs"}, (path.name, name)


@pytest.mark.parametrize(
    "path",
    [p for p in CORE_FILES if on_hook_path(module_name(p))],
    ids=lambda p: str(p.relative_to(CORE)),
)
def test_hook_path_uses_only_the_stdlib_and_itself(path):
    for name in imports_of(path):
        root = name.split(".")[0]
        if root == "softwalltime":
            # "softwalltime.__version__" and the like are names from the package root
            assert on_hook_path(name) or on_hook_path(name.rpartition(".")[0]), (path, name)
            continue
        assert root in sys.stdlib_module_names, (path, name)


def test_hook_script_imports_only_the_hook_path():
    for name in imports_of(REPO / "hooks" / "softwalltime_hook.py"):
        root = name.split(".")[0]
        if root == "softwalltime":
            assert on_hook_path(name), name
        else:
            assert root in sys.stdlib_module_names or root == "pbs", name


@pytest.mark.parametrize("folder", ["replay", "db", "hookpath"])
def test_library_folders_never_import_the_command_front_end(folder):
    for path in sorted((CORE / folder).rglob("*.py")):
        for name in imports_of(path):
            assert not name.startswith("softwalltime.cli"), (path, name)


@pytest.mark.parametrize(
    "path", sorted((REPO / "migrations" / "versions").glob("*.py")), ids=lambda p: p.name
)
def test_migrations_are_frozen_snapshots(path):
    assert not any(n.startswith("softwalltime") for n in imports_of(path)), path.name


def test_every_subpackage_ships_in_the_wheel():
    """pyproject lists packages explicitly: a new folder missing there is absent from a
    plain 'pip install .' (the CLI then fails to import it)."""
    import tomllib

    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {module_name(p.parent) for p in CORE.rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)
