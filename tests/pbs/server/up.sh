#!/usr/bin/env bash
# up.sh -- make the namespaces and start the test server (pbs_server with its data
# service, pbs_sched, pbs_comm, pbs_mom), then wait until `qstat -B` answers and node
# pbshost is up (free, or busy with jobs that outlived a restart). Idempotent: it makes
# only what is missing and starts only daemons that are not running (pbs_init.d start
# does that), so it is also how to restart one.
#
#   network namespace "pbs": only lo, up, with 127.0.0.1/8 and 10.77.0.1/32;
#   UTS namespace bound at /run/pbsns/uts, host name pbshost;
#   /etc/hosts: "10.77.0.1 pbshost";
#   root namespace: a blackhole route to 10.77.0.1/32, so that a PBS command run outside
#   pbsx fails on the spot instead of sending pbshost's packets out of a real interface.
#
# Env: PBS_UP_TIMEOUT (seconds, default 180) bounds the wait.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/env.sh
. "$HERE/env.sh"
need_root up.sh

timeout_s=${PBS_UP_TIMEOUT:-180}
log=/var/log/softwalltime-pbs-up.log
pbsx=$HERE/pbsx

[ -x "$PBS_PREFIX/sbin/pbs_server.bin" ] ||
	{ echo "up.sh: OpenPBS is not installed in $PBS_PREFIX; run $HERE/build.sh (make pbs-up does)" >&2; exit 1; }
grep -qx "PBS_SERVER=$PBS_HOST" /etc/pbs.conf 2>/dev/null ||
	{ echo "up.sh: /etc/pbs.conf does not name $PBS_HOST as server; run $HERE/build.sh" >&2; exit 1; }

# ------------------------------------------------------------------ network namespace
[ -e "/run/netns/$PBS_NETNS" ] || { echo "up.sh: ip netns add $PBS_NETNS"; ip netns add "$PBS_NETNS"; }
ip -n "$PBS_NETNS" link set dev lo up
ip -n "$PBS_NETNS" -4 -o addr show dev lo | grep -q " $PBS_ADDR/32 " ||
	ip -n "$PBS_NETNS" addr add "$PBS_ADDR/32" dev lo
others=$(ip -n "$PBS_NETNS" -o link show | awk -F': ' '$2 != "lo" {print $2}')
[ -z "$others" ] ||
	{ echo "up.sh: namespace $PBS_NETNS has devices besides lo ($others); refusing to start PBS there" >&2; exit 1; }
ip route replace blackhole "$PBS_ADDR/32"
awk -v a="$PBS_ADDR" -v h="$PBS_HOST" '$1 == a && $2 == h {found = 1} END {exit !found}' /etc/hosts ||
	{ echo "up.sh: adding '$PBS_ADDR $PBS_HOST' to /etc/hosts"; echo "$PBS_ADDR $PBS_HOST" >>/etc/hosts; }

# ------------------------------------------------------------------ UTS namespace
if ! findmnt --noheadings "$PBS_UTS_FILE" >/dev/null 2>&1; then
	echo "up.sh: UTS namespace $PBS_UTS_FILE (host name $PBS_HOST)"
	mkdir -p "$(dirname "$PBS_UTS_FILE")"
	: >"$PBS_UTS_FILE"
	unshare --uts="$PBS_UTS_FILE" hostname "$PBS_HOST"
fi
[ "$(nsenter --uts="$PBS_UTS_FILE" hostname)" = "$PBS_HOST" ] || nsenter --uts="$PBS_UTS_FILE" hostname "$PBS_HOST"
resolved=$("$pbsx" getent hosts "$PBS_HOST" | awk '{print $1; exit}' || true)
[ "$resolved" = "$PBS_ADDR" ] ||
	{ echo "up.sh: $PBS_HOST resolves to '$resolved' inside the namespace, not $PBS_ADDR" >&2; exit 1; }

# ------------------------------------------------------------------ daemons
# pbs_init.d starts only what its lock files say is not running. The daemons get a bare
# environment (no venv, pyenv or PYTHON* variable of the caller) and no descriptor but
# stdio: one inherited from the caller, such as the lock of `flock LOCK make pbs-up`,
# would stay open, and the lock held, for as long as the daemon runs.
bare() (
	for fd in /proc/self/fd/*; do
		fd=${fd##*/}
		if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
	done
	exec env -i PATH="$PBS_CLEAN_PATH" LANG=C.UTF-8 HOME=/root TERM=dumb "$@"
)
cd /
{
	echo "--- $(date '+%F %T') pbs_init.d start"
	bare "$pbsx" "$PBS_PREFIX/libexec/pbs_init.d" start </dev/null 2>&1 || echo "(exit status $?)"
} | tee -a "$log" | sed 's/^/up.sh| /'

# ------------------------------------------------------------------ wait
deadline=$((SECONDS + timeout_s))
until "$pbsx" qstat -B >/dev/null 2>&1; do
	if [ "$SECONDS" -ge "$deadline" ]; then
		echo "up.sh: qstat -B does not answer after ${timeout_s}s; see $log and $PBS_HOME_DIR/server_logs/" >&2
		"$pbsx" "$PBS_PREFIX/libexec/pbs_init.d" status >&2 || true
		exit 1
	fi
	sleep 0.5
done
# Up means free, or busy with jobs that outlived a server restart: any state but these.
node_state() { "$pbsx" pbsnodes "$PBS_HOST" 2>/dev/null | awk '$1 == "state" {print $3}' || true; }
node_up() { [ -n "$1" ] && ! [[ $1 =~ down|unknown|offline|stale ]]; }
state=$(node_state)
until node_up "$state"; do
	if [ "$SECONDS" -ge "$deadline" ]; then
		echo "up.sh: the server answers but node $PBS_HOST is '${state:-unknown}' after ${timeout_s}s; see $PBS_HOME_DIR/mom_logs/" >&2
		exit 1
	fi
	sleep 0.5
	state=$(node_state)
done
echo "up.sh: OK, server $PBS_HOST answers, node $PBS_HOST is $state"
"$pbsx" "$PBS_PREFIX/libexec/pbs_init.d" status | sed 's/^/  /'
