"""Compile the simulator's hot modules with mypyc, in place: ``make compile``.

    python packaging/compile_simulator.py [--if-needed] [--clean]

Builds softwalltime/replay/{corrections,profile,easy} (:data:`softwalltime.replay.native.MODULES`)
as C extensions beside their sources, with the intermediate files in build/mypyc; ``--clean``
removes the extensions (the modules then run as plain Python); ``--if-needed`` builds only
when an extension is missing or older than a source (:func:`~softwalltime.replay.native.built`).
Needs mypy (the dev extra), a C compiler and the Python headers. Where the build fails, the
exit status is 1 with ``CI`` set and 0 otherwise, after a warning: the modules then run as
plain Python, as in the packages (the wheel never carries these files).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from softwalltime.replay import native  # noqa: E402

FOLDER = REPO / "softwalltime" / "replay"
BUILD = REPO / "build" / "mypyc"


def clean() -> None:
    for name in native.MODULES + (native.LIBRARY,):
        for ext in native.extensions(str(FOLDER), name):
            os.remove(ext)
            print(f"removed {os.path.relpath(ext, REPO)}")


def build() -> None:
    from mypyc.build import mypycify
    from setuptools import setup

    BUILD.mkdir(parents=True, exist_ok=True)
    os.chdir(BUILD)  # not the repository: setup() would read its pyproject.toml
    lib = BUILD / "lib"
    paths = [str(FOLDER / f"{name}.py") for name in native.MODULES]
    setup(
        name="softwalltime-simulator",
        ext_modules=mypycify(paths, group_name=native.GROUP, target_dir=str(BUILD)),
        script_args=["--quiet", "build_ext", "--build-lib", str(lib), "--build-temp", "temp"],
    )
    for ext in sorted((lib / "softwalltime" / "replay").iterdir()):
        shutil.copy(ext, FOLDER / ext.name)  # now: newer than the sources
        print(f"built {os.path.relpath(FOLDER / ext.name, REPO)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", action="store_true", help="remove the extensions")
    parser.add_argument("--if-needed", action="store_true", help="only if missing or stale")
    args = parser.parse_args()
    if args.if_needed and native.built(str(FOLDER)):
        return
    clean()
    if args.clean:
        return
    try:
        build()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - setuptools exits on errors
        clean()  # nothing half-built is left to import
        print(f"compile_simulator: the build failed ({exc!r})", file=sys.stderr)
        if os.environ.get("CI"):
            sys.exit(1)
        print("compile_simulator: the simulator runs as plain Python (slower)", file=sys.stderr)


if __name__ == "__main__":
    main()
