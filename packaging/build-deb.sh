#!/bin/sh
# build-deb.sh [OUTDIR]: the .deb of this checkout with dpkg-deb, into OUTDIR (default dist/).
# `make deb` runs it. Needs python3-venv; pip fetches the dependencies' wheels (its cache
# makes later builds offline-fast). Environment: PIP (default .venv/bin/pip), PKG_PYTHON
# (default python3.11, Debian 12's).
set -eu
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
"$pip" wheel --quiet --disable-pip-version-check --wheel-dir "$wheels" "$repo"
"$here/build-venv.sh" "$root" "$wheels" "$python"

install -d "$root/lib/systemd/system" "$root/etc/default" "$root/usr/bin" \
	"$root/usr/share/doc/softwalltime/examples" "$root/usr/share/doc/softwalltime/docs"
install -m 0644 "$here"/systemd/*.service "$here"/systemd/*.timer "$root/lib/systemd/system/"
install -m 0640 "$here/softwalltime.json" "$root/etc/softwalltime.json"
install -m 0640 "$here/softwalltime.env" "$root/etc/default/softwalltime"
ln -s /opt/softwalltime/bin/softwalltime "$root/usr/bin/softwalltime"
ln -s /opt/softwalltime/bin/softwalltime-ingest "$root/usr/bin/softwalltime-ingest"
install -m 0644 "$repo/README.md" "$root/usr/share/doc/softwalltime/"
install -m 0644 "$repo"/docs/*.md "$repo"/docs/*.png "$root/usr/share/doc/softwalltime/docs/"
# a man page per command, from the argparse definitions of the code just packaged (-B: the
# venv gets no new .pyc)
"$root/opt/softwalltime/bin/python" -B -m softwalltime.cli.manpage --gzip \
	"$root/usr/share/man/man1" >/dev/null
install -m 0644 "$here/softwalltime.cron" "$root/usr/share/doc/softwalltime/examples/"
printf 'softwalltime\nLicense: MIT (see pyproject.toml). Bundled Python packages under\n/opt/softwalltime/lib keep their own licenses in their *.dist-info folders.\n' \
	>"$root/usr/share/doc/softwalltime/copyright"

install -m 0755 "$here"/debian/postinst "$here"/debian/prerm "$here"/debian/postrm "$root/DEBIAN/"
install -m 0644 "$here/debian/conffiles" "$root/DEBIAN/"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
	-e "s/@PYTHON@/$python/" "$here/debian/control.in" >"$root/DEBIAN/control"

deb=$out/softwalltime_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
