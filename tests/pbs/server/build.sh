#!/usr/bin/env bash
# build.sh -- build OpenPBS 23.06.06 from its source tarball and install it in /opt/pbs
# (Debian 12, root). It starts nothing: up.sh does.
#
# Skips the build when /opt/pbs already holds this version built with these patches and
# configure flags (the stamp file named in env.sh); otherwise:
#   - installs the missing build packages (apt-get --no-upgrade: a running PostgreSQL on
#     the machine must not be upgraded under its users);
#   - takes the tarball from tarball.sh ($OPENPBS_TARBALL, the cache, or a download; all
#     checked by sha256), extracts it into $OPENPBS_BUILD_DIR (default
#     /opt/src/openpbs-23.06.06) and applies patches/*.patch (two upstream commits that
#     23.06.06 needs on Python 3.11);
#   - autogen.sh, configure, make -j$JOBS (default 2), make install, pbs_postinstall.
# Every run then makes sure of /etc/pbs.conf (one host, pbshost, running all four daemons)
# and the ordinary user alice that the tests submit jobs as.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/env.sh
. "$HERE/env.sh"
need_root build.sh

BUILD_DIR=${OPENPBS_BUILD_DIR:-/opt/src/openpbs-$OPENPBS_VERSION}
JOBS=${JOBS:-2}
# --with-python=/usr: embed Debian's Python 3.11 (libpython3.11.so), never a pyenv one.
CONFIGURE_FLAGS=(--prefix="$PBS_PREFIX" --with-python=/usr)
export PATH=$PBS_CLEAN_PATH DEBIAN_FRONTEND=noninteractive
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV

started=$SECONDS
say() { echo "build.sh [+$((SECONDS - started))s] $*"; }
run_logged() { # log-file command...: the command's output goes to the log, its tail on failure
	local log=$1
	shift
	if ! "$@" >"$log" 2>&1; then
		echo "build.sh: '$*' failed; the end of $log:" >&2
		tail -n 40 "$log" >&2
		exit 1
	fi
}

patches=("$HERE"/patches/*.patch)
stamp="openpbs $OPENPBS_VERSION sha256 $OPENPBS_SHA256 patches $(cat "${patches[@]}" | sha256sum | cut -c1-16) flags ${CONFIGURE_FLAGS[*]}"

installed() {
	[ -x "$PBS_PREFIX/sbin/pbs_server.bin" ] && [ "$(cat "$PBS_INSTALL_STAMP" 2>/dev/null)" = "$stamp" ]
}

install_packages() {
	# INSTALL's Debian list under Debian 12's names. libpq-dev is all configure needs of
	# PostgreSQL; the data service runs the server binaries of the "postgresql" package.
	local want=(gcc g++ make libtool autoconf automake perl swig patch
		libhwloc-dev libx11-dev libxt-dev libedit-dev libical-dev libncurses-dev
		python3-dev tcl-dev tk-dev libexpat1-dev libssl-dev libxext-dev libxft-dev
		libcjson-dev libpq-dev zlib1g-dev openssh-client procps)
	local missing=() p
	for p in "${want[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
	done
	compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
	if [ ${#missing[@]} -eq 0 ]; then
		return
	fi
	say "apt-get install ${missing[*]}"
	run_logged /tmp/softwalltime-pbs-apt.log apt-get update -q
	run_logged /tmp/softwalltime-pbs-apt.log apt-get install -y -q --no-upgrade "${missing[@]}"
}

if installed; then
	say "OpenPBS $OPENPBS_VERSION already installed in $PBS_PREFIX ($PBS_INSTALL_STAMP)"
else
	tarball=$("$HERE/tarball.sh")
	install_packages
	say "extracting $tarball into $BUILD_DIR"
	rm -rf "$BUILD_DIR"
	mkdir -p "$BUILD_DIR"
	tar -xzf "$tarball" -C "$BUILD_DIR" --strip-components=1
	for p in "${patches[@]}"; do
		say "patch $(basename "$p")"
		patch -d "$BUILD_DIR" -p1 --forward --batch --quiet <"$p"
	done
	cd "$BUILD_DIR"
	say "autogen.sh"
	run_logged autogen.log ./autogen.sh
	say "configure ${CONFIGURE_FLAGS[*]}"
	run_logged configure.log ./configure "${CONFIGURE_FLAGS[@]}"
	say "make -j$JOBS (log $BUILD_DIR/make.log)"
	run_logged make.log make -j"$JOBS"
	say "make install"
	run_logged install.log make install
	# pbs_iff and pbs_rcp authenticate ordinary users' clients: setuid root (INSTALL).
	chmod 4755 "$PBS_PREFIX/sbin/pbs_iff" "$PBS_PREFIX/sbin/pbs_rcp"
	echo "$stamp" >"$PBS_INSTALL_STAMP"
	cd /
fi

if [ ! -d "$PBS_HOME_DIR/server_priv" ] || [ ! -d "$PBS_HOME_DIR/mom_priv" ]; then
	say "pbs_postinstall (PBS_HOME $PBS_HOME_DIR)"
	run_logged /tmp/softwalltime-pbs-postinstall.log "$PBS_PREFIX/libexec/pbs_postinstall"
fi
# pbs_postinstall enables a systemd unit. This machine's PID 1 is not systemd; an enabled
# unit makes pbs_init.d treat its first start as a boot and run it in the background,
# where up.sh could neither see its output nor wait for it.
if command -v systemctl >/dev/null 2>&1 && systemctl is-enabled pbs >/dev/null 2>&1; then
	systemctl disable pbs >/dev/null 2>&1 || true
fi
rm -f /lib/systemd/system-preset/95-pbs.preset

conf="PBS_EXEC=$PBS_PREFIX
PBS_HOME=$PBS_HOME_DIR
PBS_SERVER=$PBS_HOST
PBS_SERVER_HOST_NAME=$PBS_HOST
PBS_MOM_NODE_NAME=$PBS_HOST
PBS_LEAF_NAME=$PBS_HOST
PBS_START_SERVER=1
PBS_START_SCHED=1
PBS_START_COMM=1
PBS_START_MOM=1
PBS_CORE_LIMIT=unlimited
PBS_SCP=/usr/bin/scp"
if [ "$(cat /etc/pbs.conf 2>/dev/null)" != "$conf" ]; then
	if [ -f /etc/pbs.conf ]; then
		cp /etc/pbs.conf "/etc/pbs.conf.before-harness.$(date +%Y%m%d%H%M%S)"
	fi
	say "writing /etc/pbs.conf (server, scheduler, comm and MoM on $PBS_HOST)"
	printf '%s\n' "$conf" >/etc/pbs.conf
	chmod 644 /etc/pbs.conf
fi

if ! id "$PBS_TEST_USER" >/dev/null 2>&1; then
	say "useradd $PBS_TEST_USER"
	useradd --create-home --shell /bin/bash "$PBS_TEST_USER"
fi

say "OK: OpenPBS $OPENPBS_VERSION in $PBS_PREFIX; next: $HERE/up.sh"
