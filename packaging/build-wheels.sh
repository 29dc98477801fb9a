#!/bin/sh
# build-wheels.sh WHEELHOUSE PYTHON: the wheels the packages' venv is made from (shared by
# build-deb.sh and build-rpm.sh; the only step that may fetch). Environment: PIP (the pip of a
# venv on PYTHON, with the dev extra: mypy builds the compiled simulator).
#   - the project's pure wheel and its dependencies' wheels;
#   - psycopg2 built from source against the system's libpq (pg_config: libpq-dev), which the
#     packages depend on, instead of psycopg2-binary's private copies of libpq, OpenSSL and
#     krb5, which distribution security updates never reach;
#   - the platform wheel with the simulator's mypyc extensions (compile_simulator.py --wheel),
#     which pip prefers to the pure one on this interpreter.
set -eu
unset PYTHONPATH
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
wheels=$1
python=$2
pip=${PIP:-$repo/.venv/bin/pip}
build_python=$(dirname "$pip")/python
have=$("$build_python" -c 'import sys; print("python%d.%d" % sys.version_info[:2])')
if [ "$have" != "$python" ]; then
	echo "build-wheels.sh: $pip runs $have, the package runs $python: the compiled simulator" \
		"would not load (PIP= a pip of $python)" >&2
	exit 1
fi
command -v pg_config >/dev/null || {
	echo "build-wheels.sh: pg_config missing (apt-get install libpq-dev; dnf install libpq-devel)" >&2
	exit 1
}
# Extensions linked without the build interpreter's run path (a pyenv Python's LDSHARED has
# -Wl,-rpath to its own lib folder); build-venv.sh refuses any RUNPATH left.
LDSHARED="${CC:-gcc} -shared"
export LDSHARED
"$pip" wheel --quiet --disable-pip-version-check --wheel-dir "$wheels" "$repo"
# --no-cache-dir: a psycopg2 wheel cached from another build may carry another run path
"$pip" wheel --quiet --disable-pip-version-check --no-cache-dir --no-binary psycopg2 \
	--no-deps --wheel-dir "$wheels" "psycopg2>=2.9"
rm -f "$wheels"/psycopg2_binary-*.whl
"$build_python" "$here/compile_simulator.py" --wheel "$wheels"/softwalltime-*-py3-none-any.whl >/dev/null
