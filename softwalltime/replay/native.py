"""The simulator's hot modules, compiled with mypyc in a source checkout (``make compile``),
and ``learned``'s table loops in C (:data:`KERNEL`, :mod:`~softwalltime.replay.learned_native`).

:data:`MODULES` run as C extensions when ``packaging/compile_simulator.py`` has built them
next to their sources (``make test`` and ``make bench-simulate`` do), and in the .deb and the
RPM (their platform wheel, ``compile_simulator.py --wheel``); a ``pip install`` of the pure
wheel runs them as plain Python. Both give the same results (``tests/test_native.py``); compiled,
one simulation of HPC2N takes about half the time. The sources stay the reference: an
extension older than its source is *stale* and the test suite refuses to run with it.
"""

from __future__ import annotations

import importlib
import os
from typing import List

PACKAGE = "softwalltime.replay"
MODULES = ("corrections", "profile", "easy")
# The modules whose types the compiled code is built against: a change to any of them
# makes the extensions stale.
INPUTS = MODULES + ("sources", "sim_workload")
GROUP = PACKAGE + ".native"  # mypyc's shared library: native__mypyc.*.so beside them
LIBRARY = "native__mypyc"
# learned's table loops, written in C (KERNEL.c beside it), built by the same command
KERNEL = "_learned_kernel"


def compiled() -> List[str]:
    """The modules of :data:`MODULES` that this interpreter loaded as extensions."""
    found = []
    for name in MODULES:
        module = importlib.import_module(PACKAGE + "." + name)
        if not str(getattr(module, "__file__", "")).endswith(".py"):
            found.append(name)
    return found


def extensions(folder: str, name: str) -> List[str]:
    """The extension files of module ``name`` in ``folder`` (any Python's)."""
    prefix = name + "."
    return sorted(
        os.path.join(folder, f)
        for f in os.listdir(folder)
        if f.startswith(prefix) and f.endswith((".so", ".pyd"))
    )


def stale(folder: str) -> List[str]:
    """The extensions in ``folder`` (this package's) older than a source in :data:`INPUTS`,
    or (:data:`KERNEL`) than its C source."""
    newest = max(os.stat(os.path.join(folder, name + ".py")).st_mtime_ns for name in INPUTS)
    c_source = os.stat(os.path.join(folder, KERNEL + ".c")).st_mtime_ns
    return [
        ext
        for name in MODULES + (LIBRARY,)
        for ext in extensions(folder, name)
        if os.stat(ext).st_mtime_ns < newest
    ] + [ext for ext in extensions(folder, KERNEL) if os.stat(ext).st_mtime_ns < c_source]


def built(folder: str) -> bool:
    """Whether every module of :data:`MODULES` and :data:`KERNEL` has an extension in
    ``folder``, none stale."""
    names = MODULES + (LIBRARY, KERNEL)
    return all(extensions(folder, name) for name in names) and not stale(folder)
