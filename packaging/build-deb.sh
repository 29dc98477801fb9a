#!/bin/sh
# build-deb.sh [OUTDIR]: the .deb of this checkout with dpkg-deb, into OUTDIR (default dist/).
# `make deb` runs it. Needs python3-venv, libpq-dev, gcc and python3-dev (build-wheels.sh);
# pip fetches the dependencies' wheels (its cache makes later builds offline-fast).
# Environment: PIP (default .venv/bin/pip), PKG_PYTHON (default python3.11, Debian 12's),
# DEBFULLNAME and DEBEMAIL (the maintainer; default: the checkout's git identity).
set -eu
# the packaged code only: never a checkout put first by the caller's PYTHONPATH
unset PYTHONPATH
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
out=$(realpath -m "${1:-$repo/dist}")
pip=${PIP:-$repo/.venv/bin/pip}
python=${PKG_PYTHON:-python3.11}
build=$repo/build/deb
root=$build/root
wheels=$build/wheelhouse

version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/softwalltime/__init__.py")
arch=$(dpkg --print-architecture)
[ -n "$version" ] || { echo "build-deb.sh: no __version__ in softwalltime/__init__.py" >&2; exit 1; }

rm -rf "$build"
mkdir -p "$root/DEBIAN" "$out"
PIP=$pip "$here/build-wheels.sh" "$wheels" "$python"
"$here/build-venv.sh" "$root" "$wheels" "$python"
# no bytecode in the .deb: postinst compiles it, prerm removes it (softwalltime-maint
# pyc-compile, pyc-remove; lintian: package-installs-python-pycache-dir). The RPM ships it.
find "$root/opt" -name __pycache__ -type d -prune -exec rm -rf {} +

install -d "$root/lib/systemd/system" "$root/etc/default" "$root/usr/bin" \
	"$root/usr/share/doc/softwalltime/examples" "$root/usr/share/doc/softwalltime/docs"
install -m 0644 "$here"/systemd/*.service "$here"/systemd/*.timer "$root/lib/systemd/system/"
install -D -m 0644 "$here/sysusers.d/softwalltime.conf" "$root/usr/lib/sysusers.d/softwalltime.conf"
install -D -m 0644 "$here/tmpfiles.d/softwalltime.conf" "$root/usr/lib/tmpfiles.d/softwalltime.conf"
install -m 0640 "$here/softwalltime.json" "$root/etc/softwalltime.json"
install -m 0640 "$here/softwalltime.env" "$root/etc/default/softwalltime"
ln -s /opt/softwalltime/bin/softwalltime "$root/usr/bin/softwalltime"
ln -s /opt/softwalltime/bin/softwalltime-ingest "$root/usr/bin/softwalltime-ingest"
install -m 0644 "$repo/README.md" "$root/usr/share/doc/softwalltime/"
install -m 0644 "$repo"/docs/*.md "$repo"/docs/*.png "$root/usr/share/doc/softwalltime/docs/"
# a man page per command and softwalltime.json(5), from the argparse definitions of the code just packaged (-B: the
# venv gets no new .pyc)
"$root/opt/softwalltime/bin/python" -I -B -m softwalltime.cli.manpage --gzip \
	"$root/usr/share/man/man1" --config-page "$root/usr/share/man/man5" >/dev/null
install -m 0644 "$here/softwalltime.cron" "$root/usr/share/doc/softwalltime/examples/"
# shell completion, from the same argparse definitions
install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions"
"$root/opt/softwalltime/bin/python" -I -B -m softwalltime.cli.completion bash \
	>"$root/usr/share/bash-completion/completions/softwalltime"
ln -s softwalltime "$root/usr/share/bash-completion/completions/softwalltime-ingest"
"$root/opt/softwalltime/bin/python" -I -B -m softwalltime.cli.completion zsh \
	>"$root/usr/share/zsh/vendor-completions/_softwalltime"
install -m 0644 "$here/copyright" "$root/usr/share/doc/softwalltime/copyright"
install -m 0644 "$repo/docs/changelog.md" "$root/usr/share/doc/softwalltime/"
python3 "$here/changelog.py" debian | gzip -9n >"$root/usr/share/doc/softwalltime/changelog.gz"
maintainer=$(python3 "$here/changelog.py" maintainer)
# Depends on the shared libraries the venv's extensions link (libc6, libpq5), as
# dpkg-shlibdeps finds them
mkdir -p "$build/shlibs/debian"
printf 'Source: softwalltime\n\nPackage: softwalltime\nArchitecture: any\n' >"$build/shlibs/debian/control"
shlibs=$(cd "$build/shlibs" && find "$root/opt" -name '*.so' -type f -print0 |
	xargs -0 dpkg-shlibdeps -O --warnings=0 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "build-deb.sh: dpkg-shlibdeps found no dependency" >&2; exit 1; }

install -m 0755 "$here"/debian/postinst "$here"/debian/prerm "$here"/debian/postrm "$root/DEBIAN/"
install -m 0644 "$here/debian/conffiles" "$root/DEBIAN/"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
	-e "s/@PYTHON@/$python/" -e "s|@SHLIBS@|$shlibs|" -e "s|@MAINTAINER@|$maintainer|" \
	"$here/debian/control.in" >"$root/DEBIAN/control"

deb=$out/softwalltime_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
