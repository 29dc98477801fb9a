#!/bin/sh
# build-rpm.sh [OUTDIR]: the RPM of this checkout with rpmbuild, into OUTDIR (default dist/).
# `make rpm` runs it. pip makes the wheelhouse first (the only step that may fetch); rpmbuild
# then builds offline from packaging/softwalltime.spec. Environment: PIP (default
# .venv/bin/pip). The venv runs on /usr/bin/python3.11 of the target (EL8.8+/EL9.2+:
# dnf install python3.11).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
out=$(realpath -m "${1:-$repo/dist}")
pip=${PIP:-$repo/.venv/bin/pip}
build=$repo/build/rpm
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/softwalltime/__init__.py")
[ -n "$version" ] || { echo "build-rpm.sh: no __version__ in softwalltime/__init__.py" >&2; exit 1; }

rm -rf "$build"
mkdir -p "$build" "$out"
"$pip" wheel --quiet --disable-pip-version-check --wheel-dir "$build/wheelhouse" "$repo"
rpmbuild -bb --quiet \
	--define "_topdir $build/top" \
	--define "_rpmdir $out" \
	--define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" \
	--define "swt_version $version" \
	--define "swt_src $repo" \
	--define "swt_wheelhouse $build/wheelhouse" \
	"$here/softwalltime.spec" >&2
ls "$out"/softwalltime-"$version"-1.*.rpm
