#!/usr/bin/env bash
# down.sh [--purge] -- stop the test server (pbs_init.d stop inside the namespaces: the
# server by qterm, then its data service, MoM, scheduler and comm, each by the PID in its
# PBS_HOME lock file). Idempotent.
#
#   --purge   also remove what up.sh made: the netns "pbs", the UTS namespace mount, the
#             "10.77.0.1 pbshost" line of /etc/hosts and the blackhole route (the route
#             last, so pbshost never resolves to an address the root namespace would route).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/env.sh
. "$HERE/env.sh"
need_root down.sh

purge=0
case "${1:-}" in
--purge) purge=1 ;;
"") ;;
*)
	echo "usage: down.sh [--purge]" >&2
	exit 2
	;;
esac

live() { # the daemons whose lock file names a live process, as "file:pid"
	local f pid
	for f in server_priv/server.lock datastore/postmaster.pid mom_priv/mom.lock sched_priv/sched.lock server_priv/comm.lock; do
		pid=$(head -n 1 "$PBS_HOME_DIR/$f" 2>/dev/null | tr -cd '0-9' || true)
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
			echo "$f:$pid"
		fi
	done
}

namespaces=0
[ -e "/run/netns/$PBS_NETNS" ] && findmnt --noheadings "$PBS_UTS_FILE" >/dev/null 2>&1 && namespaces=1
running=$(live)
if [ -z "$running" ]; then
	echo "down.sh: PBS is not running"
elif [ "$namespaces" = 0 ]; then
	echo "down.sh: PBS daemons run but their namespaces are gone; stop them by PID: $running" >&2
	exit 1
else
	cd /
	env -i PATH="$PBS_CLEAN_PATH" LANG=C.UTF-8 HOME=/root TERM=dumb \
		"$HERE/pbsx" "$PBS_PREFIX/libexec/pbs_init.d" stop </dev/null 2>&1 | sed 's/^/down.sh| /' || true
	running=$(live)
	if [ -n "$running" ]; then
		echo "down.sh: still running after pbs_init.d stop: $running" >&2
		exit 1
	fi
	echo "down.sh: PBS stopped"
fi

[ "$purge" = 1 ] || exit 0
if [ -e "/run/netns/$PBS_NETNS" ]; then
	ip netns delete "$PBS_NETNS"
	echo "down.sh: removed netns $PBS_NETNS"
fi
if findmnt --noheadings "$PBS_UTS_FILE" >/dev/null 2>&1; then
	umount "$PBS_UTS_FILE"
	rm -f "$PBS_UTS_FILE"
	echo "down.sh: removed UTS namespace $PBS_UTS_FILE"
fi
if awk -v a="$PBS_ADDR" '$1 == a {found = 1} END {exit !found}' /etc/hosts; then
	kept=$(awk -v a="$PBS_ADDR" '$1 != a' /etc/hosts)
	printf '%s\n' "$kept" >/etc/hosts # in place: /etc/hosts may be a bind mount
	echo "down.sh: removed $PBS_ADDR from /etc/hosts"
fi
if ip route show type blackhole | grep -q "^blackhole $PBS_ADDR "; then
	ip route delete blackhole "$PBS_ADDR/32"
	echo "down.sh: removed the blackhole route to $PBS_ADDR"
fi
