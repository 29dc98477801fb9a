#!/usr/bin/env bash
# tarball.sh -- print the path of a checked OpenPBS 23.06.06 source tarball.
#
# Looked for in this order:
#   1. $OPENPBS_TARBALL (a file; an error if set to anything else);
#   2. the cache: $SOFTWALLTIME_CACHE_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/softwalltime,
#      file openpbs-23.06.06.tar.gz;
#   3. a download of $OPENPBS_URL (default: the v23.06.06 tag archive on GitHub) into the cache.
# Every tarball is checked against the sha256 pinned in env.sh before its path is printed.
# Any failure is one line on stderr and exit status 1.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/env.sh
. "$HERE/env.sh"

me=tarball.sh
cache_dir=${SOFTWALLTIME_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/softwalltime}
cached=$cache_dir/$OPENPBS_TARBALL_NAME
url=${OPENPBS_URL:-$OPENPBS_DEFAULT_URL}

fail() {
	echo "$me: $*" >&2
	exit 1
}

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

checked() { # path: print it if its sha256 is the pinned one, else fail
	local got
	got=$(sha_of "$1")
	[ "$got" = "$OPENPBS_SHA256" ] ||
		fail "$1 has sha256 $got, not the pinned $OPENPBS_SHA256 of $OPENPBS_TARBALL_NAME; use the v$OPENPBS_VERSION tag archive"
	printf '%s\n' "$1"
}

if [ -n "${OPENPBS_TARBALL:-}" ]; then
	[ -f "$OPENPBS_TARBALL" ] || fail "OPENPBS_TARBALL=$OPENPBS_TARBALL is not a file"
	checked "$OPENPBS_TARBALL"
	exit 0
fi

if [ -f "$cached" ]; then
	checked "$cached"
	exit 0
fi

how="provide the tarball: OPENPBS_TARBALL=/path/to/$OPENPBS_TARBALL_NAME, or copy it to $cached"
mkdir -p "$cache_dir" 2>/dev/null || fail "cannot create the cache $cache_dir; $how"
part=$(mktemp "$cache_dir/.$OPENPBS_TARBALL_NAME.XXXXXX")
trap 'rm -f "$part"' EXIT
fetch() { # url file
	if command -v curl >/dev/null 2>&1; then
		curl --fail --silent --location --connect-timeout 20 --max-time 900 --output "$2" "$1"
	else
		wget --quiet --timeout=20 --output-document="$2" "$1"
	fi
}
if ! fetch "$url" "$part" 2>/dev/null; then
	fail "no OpenPBS tarball and the download of $url failed; $how"
fi
got=$(sha_of "$part")
[ "$got" = "$OPENPBS_SHA256" ] ||
	fail "the download of $url has sha256 $got, not the pinned $OPENPBS_SHA256; $how"
mv "$part" "$cached"
printf '%s\n' "$cached"
