#!/bin/sh
# build-rpm.sh [OUTDIR]: the RPM of this checkout with rpmbuild, into OUTDIR (default dist/).
# `make rpm` runs it. pip makes the wheelhouse first (build-wheels.sh, the only step that may
# fetch); rpmbuild then builds offline from packaging/softwalltime.spec. Environment: PIP
# (default .venv/bin/pip), DEBFULLNAME and DEBEMAIL (the packager; default: the checkout's git
# identity). The venv runs on /usr/bin/python3.11 of the target (EL8.8+/EL9.2+:
# dnf install python3.11).
set -eu
# the packaged code only: never a checkout put first by the caller's PYTHONPATH
unset PYTHONPATH
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
out=$(realpath -m "${1:-$repo/dist}")
pip=${PIP:-$repo/.venv/bin/pip}
build=$repo/build/rpm
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/softwalltime/__init__.py")
[ -n "$version" ] || { echo "build-rpm.sh: no __version__ in softwalltime/__init__.py" >&2; exit 1; }

rm -rf "$build"
mkdir -p "$build" "$out"
PIP=$pip "$here/build-wheels.sh" "$build/wheelhouse" python3.11
python3 "$here/changelog.py" rpm >"$build/changelog"
packager=$(python3 "$here/changelog.py" maintainer)
rpmbuild -bb --quiet \
	--define "_topdir $build/top" \
	--define "_rpmdir $out" \
	--define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" \
	--define "swt_version $version" \
	--define "swt_src $repo" \
	--define "swt_wheelhouse $build/wheelhouse" \
	--define "swt_changelog $build/changelog" \
	--define "packager $packager" \
	"$here/softwalltime.spec" >&2
ls "$out"/softwalltime-"$version"-1.*.rpm
