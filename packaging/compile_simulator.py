"""Compile the simulator's hot modules with mypyc, in place: ``make compile``.

    python packaging/compile_simulator.py [--if-needed] [--clean]
    python packaging/compile_simulator.py --wheel DIST/softwalltime-V-py3-none-any.whl

Builds softwalltime/replay/{corrections,profile,easy} (:data:`softwalltime.replay.native.MODULES`)
and learned's table loops (``_learned_kernel.c``, :data:`~softwalltime.replay.native.KERNEL`)
as C extensions beside their sources, with the intermediate files in build/mypyc; ``--clean``
removes the extensions (the modules then run as plain Python); ``--if-needed`` builds only
when an extension is missing or older than a source (:func:`~softwalltime.replay.native.built`).
Needs mypy (the dev extra), a C compiler and the Python headers. Where the build fails, the
exit status is 1 with ``CI`` set and 0 otherwise, after a warning: the modules then run as
plain Python.

``--wheel PURE``: the platform wheel of the packages (black and mypy ship theirs the same
way): PURE's files plus the extensions, tagged for this interpreter
(``softwalltime-V-cp311-cp311-linux_x86_64.whl`` beside PURE), so pip prefers it where it
runs; the sources stay inside, and PURE stays the pure-Python fallback for any other
interpreter. A failed build is exit 1 then (the packages must not ship without it).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import sys
import sysconfig
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from softwalltime.replay import native  # noqa: E402

FOLDER = REPO / "softwalltime" / "replay"
BUILD = REPO / "build" / "mypyc"


def clean() -> None:
    for name in native.MODULES + (native.LIBRARY, native.KERNEL):
        for ext in native.extensions(str(FOLDER), name):
            os.remove(ext)
            print(f"removed {os.path.relpath(ext, REPO)}")


def build(into: Path = FOLDER, force: bool = False) -> list[Path]:
    """Build the extensions from the checkout's sources; copy them into ``into``. ``force``:
    link them again even when build/mypyc holds them already (another LDSHARED)."""
    from mypyc.build import mypycify
    from setuptools import Extension, setup

    BUILD.mkdir(parents=True, exist_ok=True)
    os.chdir(BUILD)  # not the repository: setup() would read its pyproject.toml
    lib = BUILD / "lib"
    paths = [str(FOLDER / f"{name}.py") for name in native.MODULES]
    # -ffp-contract=off: no fused multiply-add, so the kernel's floats are Python's
    kernel = Extension(
        f"{native.PACKAGE}.{native.KERNEL}",
        [str(FOLDER / f"{native.KERNEL}.c")],
        extra_compile_args=["-O2", "-ffp-contract=off"],
    )
    setup(
        name="softwalltime-simulator",
        ext_modules=mypycify(paths, group_name=native.GROUP, target_dir=str(BUILD)) + [kernel],
        script_args=["--quiet", "build_ext", "--build-lib", str(lib), "--build-temp", "temp"]
        + (["--force"] if force else []),
    )
    os.chdir(REPO)
    built = []
    for ext in sorted((lib / "softwalltime" / "replay").iterdir()):
        shutil.copy(ext, into / ext.name)  # now: newer than the sources
        built.append(into / ext.name)
        print(f"built {os.path.relpath(into / ext.name, REPO)}")
    return built


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def platform_wheel(pure: Path) -> Path:
    """PURE plus this interpreter's extensions, as a platform wheel beside it."""
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    name, version = pure.name.split("-")[:2]
    target = pure.with_name(f"{name}-{version}-{tag}-{tag}-{plat}.whl")
    staging = BUILD / "wheel-ext"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    extensions = build(staging, force=True)
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(pure) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        records = []
        for item in src.infolist():
            if item.filename == f"{info}/RECORD":
                continue
            data = src.read(item)
            if item.filename == f"{info}/WHEEL":
                lines = [
                    ln
                    for ln in data.decode().splitlines()
                    if not ln.startswith(("Tag:", "Root-Is-Purelib:"))
                ]
                lines += ["Root-Is-Purelib: false", f"Tag: {tag}-{tag}-{plat}"]
                data = ("\n".join(lines) + "\n").encode()
            out.writestr(item, data)
            records.append(_record_line(item.filename, data))
        for ext in extensions:
            arcname = f"softwalltime/replay/{ext.name}"
            data = ext.read_bytes()
            info_ = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info_.external_attr = 0o644 << 16
            out.writestr(info_, data, zipfile.ZIP_DEFLATED)
            records.append(_record_line(arcname, data))
        records.append(f"{info}/RECORD,,")
        out.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
    print(target)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", action="store_true", help="remove the extensions")
    parser.add_argument("--if-needed", action="store_true", help="only if missing or stale")
    parser.add_argument("--wheel", type=Path, metavar="PURE", help="make the platform wheel")
    args = parser.parse_args()
    if args.wheel:
        try:
            platform_wheel(args.wheel.resolve())
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - setuptools exits on errors
            sys.exit(f"compile_simulator: the platform wheel failed ({exc!r})")
        return
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
