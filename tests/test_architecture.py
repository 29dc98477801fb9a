"""The import rules of the project, checked on the source (ast), not by convention.

:data:`LAYERS` is the one table: every unit of the tree (a folder, or a module of the
package root) and the units of softwalltime it may import; every import of every file of
softwalltime/, ingest/, migrations/ and hooks/ is checked against it. Besides that table:

- the hook path (:data:`HOOK_PATH`: what pbs_server's Python imports, Python 3.6+) uses only
  the standard library (no compiled driver: pbs_server re-initializes its Python and C
  extensions do not import again), and only hooks/ imports ``pbs``;
- migrations/versions are frozen snapshots and import nothing of softwalltime.
"""

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "softwalltime"
TREE = sorted(p for root in ("softwalltime", "ingest", "migrations", "hooks")
              for p in (REPO / root).rglob("*.py"))  # fmt: skip

SW = "softwalltime"
ERRORS, UNITS, CORE, HOOK = f"{SW}.errors", f"{SW}.units", f"{SW}.core", f"{SW}.hook"
ACCOUNTING, DB, REPLAY, WAIT = f"{SW}.accounting", f"{SW}.db", f"{SW}.replay", f"{SW}.wait"
REPORT, PBSSERVER, CLI, OUTFILE = f"{SW}.report", f"{SW}.pbsserver", f"{SW}.cli", f"{SW}.outfile"
API, SITE = f"{SW}.api", f"{SW}.site_file"
BASICS = {SW, ERRORS, UNITS}  # the package root (its __version__, upgraded()) and two leaves
# unit -> the units of softwalltime it may import. A module's rule is the longest key that
# is the module or a folder holding it; a module missing here fails. A folder and the
# module keys inside it (pbsserver, pbsserver.refresh) are one family: they import each
# other freely, and a module key grants its module more than the folder's rule.
LAYERS = {
    # the hook path: Python 3.6+, standard library only
    SW: set(),
    ERRORS: set(),
    UNITS: {ERRORS},
    CORE: {ERRORS, UNITS},  # the kernel: settings, predictors, decisions (pure)
    HOOK: {ERRORS, UNITS, CORE},  # the hook runtime: pgwire, lookup, state, settings cache
    "hooks": BASICS | {CORE, HOOK},  # the script pbs_server runs
    # the library (Python 3.9+, any dependency)
    ACCOUNTING: {ERRORS, UNITS},
    OUTFILE: {ERRORS},
    SITE: {ERRORS},  # the site file: vnodes, queues, limits, sort (pure data)
    DB: BASICS | {CORE},
    REPLAY: BASICS | {CORE, ACCOUNTING, DB, SITE},
    WAIT: BASICS | {CORE, DB, REPLAY, SITE},
    REPORT: BASICS | {CORE, DB},
    PBSSERVER: BASICS | {CORE, SITE},
    f"{PBSSERVER}.refresh": BASICS | {CORE, HOOK},  # runs the hook's lookup and decision
    f"{PBSSERVER}.status": BASICS | {CORE, HOOK},  # checks the hook's database client
    f"{PBSSERVER}.policy": BASICS | {CORE, HOOK},  # records the policy with that client
    # the library API (plain values in, result objects out), then the front ends
    API: BASICS | {CORE, ACCOUNTING, OUTFILE, DB, REPLAY, WAIT, REPORT, PBSSERVER, SITE},
    CLI: BASICS | {CORE, ACCOUNTING, OUTFILE, DB, REPLAY, WAIT, REPORT, PBSSERVER, API, SITE},
    f"{CLI}.predict": BASICS | {CORE, HOOK, ACCOUNTING, DB},  # the hook's own lookup
    f"{SW}.__main__": {CLI},
    "ingest": BASICS | {CORE, ACCOUNTING, DB, CLI},
    "migrations": {CORE, DB},
    "migrations.versions": set(),  # frozen snapshots
}
HOOK_PATH = {SW, ERRORS, UNITS, CORE, HOOK, "hooks"}


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


def unit_of(name: str) -> str:
    """The LAYERS key whose rule applies to a module (or an imported name) of the tree."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        key = ".".join(parts[:k])
        if key in LAYERS:
            return key
    raise AssertionError(f"{name}: no rule in LAYERS (add its folder or module there)")


def family(unit: str) -> set[str]:
    """The unit's folder key and every key inside that folder (itself included)."""
    top = ".".join(unit.split(".")[:2]) if unit.startswith(SW + ".") else unit.split(".")[0]
    return {k for k in LAYERS if k == top or k.startswith(top + ".")} if top != SW else {unit}


def ours(name: str) -> bool:
    return name.split(".")[0] in {SW, "ingest", "migrations", "hooks", "softwalltime_ingest"}


def allowed_outside(unit: str, name: str) -> bool:
    """A third-party or standard library import: the hook path takes the standard library
    only (and hooks/ ``pbs``); nothing else may import ``pbs``."""
    root = name.split(".")[0]
    if unit in HOOK_PATH:
        return root in sys.stdlib_module_names or (unit == "hooks" and root == "pbs")
    return root != "pbs"


@pytest.mark.parametrize("path", TREE, ids=lambda p: str(p.relative_to(REPO)))
def test_every_import_follows_the_layers(path):
    unit = unit_of(module_name(path))
    allowed = LAYERS[unit] | family(unit)
    for name in imports_of(path):
        if ours(name):
            assert unit_of(name) in allowed, f"{unit} may not import {name}"
        else:
            assert allowed_outside(unit, name), f"{unit} may not import {name}"


def test_every_folder_and_root_module_has_a_rule():
    """softwalltime/foo would otherwise fall under the package root's rule (nothing)."""
    for path in PACKAGE.iterdir():
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists():
            assert f"{SW}.{path.stem}" in LAYERS, path.name


def test_the_rules_catch_an_upward_import():
    assert unit_of("softwalltime.hook.state") == HOOK
    assert HOOK not in LAYERS[unit_of("softwalltime.core.config")]
    assert unit_of("softwalltime.__version__") == SW
    assert unit_of("softwalltime.pbsserver.refresh") != unit_of("softwalltime.pbsserver.publish")
    assert family("softwalltime.pbsserver") >= {PBSSERVER, f"{PBSSERVER}.refresh"}
    assert family("migrations.versions") == {"migrations", "migrations.versions"}
    assert not allowed_outside(CORE, "sqlalchemy") and allowed_outside(DB, "sqlalchemy")
    assert not allowed_outside(HOOK, "pbs") and allowed_outside("hooks", "pbs")


def test_the_layers_have_no_cycle():
    """The units can be put in an order where each imports only units before it (inside a
    family, such as pbsserver and pbsserver.refresh, anything goes)."""
    done: set[str] = set()
    left = dict(LAYERS)
    while left:
        ready = [u for u, deps in left.items() if deps - family(u) <= done]
        assert ready, f"a cycle among {sorted(left)}"
        for unit in ready:
            done.add(unit)
            del left[unit]


LIBRARY = (REPLAY, WAIT, REPORT)  # what the CLI calls through their public names only


def _in_library(name: str) -> bool:
    return any(name == lib or name.startswith(lib + ".") for lib in LIBRARY)


def private_uses(path: Path, module: str = "") -> set[str]:
    """The private names (a part starting with one underscore) of replay, wait and report
    that a file imports: from-imports, a private module, or an attribute of a module of
    theirs it imported (``from ..replay import pbsched``, then ``pbsched._RANK``)."""
    module = module or module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    modules: dict[str, str] = {}  # local name -> a module of the library
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            prefix = ".".join(base + [node.module or ""]).strip(".") if node.level else node.module
            for alias in node.names if prefix and _in_library(prefix) else ():
                full = f"{prefix}.{alias.name}"
                modules[alias.asname or alias.name] = full
                found.add(full)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _in_library(alias.name):
                    found.add(alias.name)
                    if alias.asname:
                        modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in modules:
                found.add(f"{modules[node.value.id]}.{node.attr}")
    return {name for name in found if any(_private(part) for part in name.split("."))}


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


@pytest.mark.parametrize(
    "path", sorted((PACKAGE / "cli").glob("*.py")), ids=lambda p: p.name
)  # fmt: skip
def test_the_cli_uses_only_public_names_of_the_library(path):
    """Issue 51: the CLI parses, calls and prints; what it calls of replay, wait and report
    is their API, not their insides."""
    assert not private_uses(path), f"private names: {sorted(private_uses(path))}"


def test_the_private_name_rule_finds_them(tmp_path):
    cli = tmp_path / "softwalltime" / "cli"
    cli.mkdir(parents=True)
    (cli / "x.py").write_text(
        "from ..replay.pbsched import _RANK, parse_policy\n"
        "from ..replay import tune\n"
        "import softwalltime.wait._inner as inner\n"
        "from ..report import build\n"
        "tune._ok(1); tune.assess(2); build.public(); inner.run()\n"
    )
    names = private_uses(cli / "x.py", "softwalltime.cli.x")
    assert names == {
        "softwalltime.replay.pbsched._RANK", "softwalltime.replay.tune._ok",
        "softwalltime.wait._inner", "softwalltime.wait._inner.run",
    }  # fmt: skip


def test_the_makefile_checks_the_hook_path_for_python_36():
    """vermin -t=3.6- runs on the Makefile's HOOK_PATH: the hook path of this table."""
    text = (REPO / "Makefile").read_text().split("HOOK_PATH :=")[1].split("\n#")[0]
    listed = set(text.replace("\\", " ").split())
    assert listed == {
        "softwalltime/__init__.py", "softwalltime/errors.py", "softwalltime/units.py",
        "softwalltime/core", "softwalltime/hook", "hooks/softwalltime_hook.py",
    }  # fmt: skip


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
    found = {module_name(p.parent) for p in PACKAGE.rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)


# every file of these (issue 51: all of softwalltime/ and ingest/, no longer four folders)
SMALL_TREES = (PACKAGE, REPO / "ingest")


def _functions(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", [])
        for child in body if isinstance(body, list) else []:
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                owner = f"{node.name}." if isinstance(node, ast.ClassDef) else ""
                yield owner + child.name, child


def _size(node) -> tuple[int, int]:
    args = node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    if names and names[0] in ("self", "cls"):  # a method's own (not a parameter named cls)
        names = names[1:]
    return node.end_lineno - node.lineno + 1, len(names)


def _too_big(paths, root: Path = REPO) -> set[str]:
    """The functions over 80 lines or 8 parameters whose docstring does not say why."""
    found = set()
    for path in paths:
        for name, node in _functions(path):
            lines, params = _size(node)
            why = "Long because" in (ast.get_docstring(node) or "")
            if (lines > 80 or params > 8) and not why:
                found.add(f"{path.relative_to(root)}::{name}")
    return found


def test_functions_stay_small():
    """No function of softwalltime/ or ingest/ over 80 lines or with more than 8
    parameters, unless its docstring says why ("Long because ...")."""
    paths = sorted(p for tree in SMALL_TREES for p in tree.rglob("*.py"))
    assert {p.parent.name for p in paths} >= {"cli", "pbsserver", "report", "db", "ingest"}
    found = _too_big(paths)
    assert not found, f"split these, or say why in their docstring: {sorted(found)}"


def test_the_size_rule_finds_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(80))  # 81 lines with its def
    fits = "\n".join(f"    x{i} = {i}" for i in range(79))  # 80
    nine = "a, b, c, d, e, f, g, h, i"
    (tmp_path / "long.py").write_text(f"def f():\n{body}\n\n\ndef g({nine}):\n    pass\n")
    (tmp_path / "why.py").write_text(f'def f():\n    """Long because a table."""\n{body}\n')
    (tmp_path / "ok.py").write_text(f"def f(a, b, c, d, e, f, g, h):\n{fits}\n")
    found = _too_big(sorted(tmp_path.glob("*.py")), tmp_path)
    assert found == {"long.py::f", "long.py::g"}
