#!/bin/sh
# build-venv.sh ROOT WHEELHOUSE PYTHON: the package's self-contained virtual environment,
# made at ROOT/opt/softwalltime to run at /opt/softwalltime (shared by the .deb and the RPM).
#
# Offline: everything comes from WHEELHOUSE (the project's wheel and its dependencies, made
# by `pip wheel`). PYTHON (python3.11) is the interpreter the venv runs on, always the
# system's /usr/bin/PYTHON (never a pyenv or other one first on PATH); the package depends on it. pip and setuptools are removed afterwards: nothing is installed into the
# venv on the target, and every .pyc is compiled here, so nothing is written there at run
# time (the hook's imports inside pbs_server included) and removal leaves nothing behind.
set -eu
# the packaged code only: never a checkout put first by the caller's PYTHONPATH
unset PYTHONPATH
root=$(realpath -m "$1")
wheels=$(realpath "$2")
python=$3
prefix=/opt/softwalltime
venv=$root$prefix

rm -rf "$venv"
"/usr/bin/$python" -m venv "$venv"
# The dependencies, psycopg2 (built against the system's libpq, build-wheels.sh) in place of
# psycopg2-binary, then the project itself (its platform wheel: the compiled simulator).
reqs=$("$venv/bin/python" - "$wheels" <<'PY'
import glob, re, sys, zipfile
wheel = sorted(glob.glob(sys.argv[1] + "/softwalltime-*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" not in line:
            req = line.split(":", 1)[1].strip()
            print(re.sub(r"^psycopg2-binary\b", "psycopg2", req).replace(" ", ""))
PY
)
# shellcheck disable=SC2086
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
	--find-links "$wheels" --no-compile $reqs
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
	--find-links "$wheels" --no-compile --no-deps softwalltime
"$venv/bin/python" -m pip uninstall --quiet --yes pip setuptools
# The venv was made at $venv and runs at $prefix: script shebangs, pyvenv.cfg, activate.
grep -rlI --null -F "$venv" "$venv" | xargs -0 -r sed -i "s|$venv|$prefix|g"
# Its interpreter by exact version: the site-packages are lib/pythonX.Y.
ln -sfn "/usr/bin/$python" "$venv/bin/python3"
ln -sfn python3 "$venv/bin/$python"
ln -sfn python3 "$venv/bin/python"
find "$venv" -name __pycache__ -prune -exec rm -rf {} +
# Shared objects as the distributions ship them: without symbols, not executable.
find "$venv" -name '*.so' -type f -exec strip --strip-unneeded {} + -exec chmod 0644 {} +
# ... and with no run path of the build host (lintian, rpmlint: rpath)
for lib in $(find "$venv" -name '*.so' -type f); do
	if readelf -d "$lib" | grep -Eq '\((RUNPATH|RPATH)\)'; then
		echo "build-venv.sh: $lib has a run path: $(readelf -d "$lib" | grep -E 'RUNPATH|RPATH')" >&2
		exit 1
	fi
done
"$venv/bin/python" -m compileall -q -j 0 -s "$root" -p / "$venv/lib" >/dev/null
install -d "$venv/libexec"
install -m 0755 "$(dirname "$0")/libexec/softwalltime-maint" "$venv/libexec/"
if grep -rlI -F "$root" "$venv" >/dev/null; then
	echo "build-venv.sh: the build path $root is left in:" >&2
	grep -rlI -F "$root" "$venv" >&2
	exit 1
fi
