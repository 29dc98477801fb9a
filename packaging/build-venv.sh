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
root=$(realpath -m "$1")
wheels=$(realpath "$2")
python=$3
prefix=/opt/softwalltime
venv=$root$prefix

rm -rf "$venv"
"/usr/bin/$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
	--find-links "$wheels" --no-compile softwalltime
"$venv/bin/python" -m pip uninstall --quiet --yes pip setuptools
# The venv was made at $venv and runs at $prefix: script shebangs, pyvenv.cfg, activate.
grep -rlI --null -F "$venv" "$venv" | xargs -0 -r sed -i "s|$venv|$prefix|g"
# Its interpreter by exact version: the site-packages are lib/pythonX.Y.
ln -sfn "/usr/bin/$python" "$venv/bin/python3"
ln -sfn python3 "$venv/bin/$python"
ln -sfn python3 "$venv/bin/python"
find "$venv" -name __pycache__ -prune -exec rm -rf {} +
"$venv/bin/python" -m compileall -q -j 0 -s "$root" -p / "$venv/lib" >/dev/null
install -d "$venv/libexec"
install -m 0755 "$(dirname "$0")/libexec/softwalltime-maint" "$venv/libexec/"
if grep -rlI -F "$root" "$venv" >/dev/null; then
	echo "build-venv.sh: the build path $root is left in:" >&2
	grep -rlI -F "$root" "$venv" >&2
	exit 1
fi
