# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables are for the scripts that source this file
# env.sh -- the facts every harness script shares (sourced, not run).
#
# The test server: OpenPBS 23.06.06 in /opt/pbs, PBS_HOME /var/spool/pbs, configured by
# /etc/pbs.conf for one host "pbshost" that exists only inside the network namespace "pbs"
# (only lo: 127.0.0.1/8 and 10.77.0.1/32) and a UTS namespace whose host name is pbshost.

OPENPBS_VERSION=23.06.06
OPENPBS_TARBALL_NAME=openpbs-$OPENPBS_VERSION.tar.gz
# The archive GitHub serves for the v23.06.06 tag, as cached beside the project's first
# checkouts (shared/openpbs/openpbs-23.06.06.tar.gz). A fresh download could not be checked
# against this pin here: the machine the harness was written on reaches no GitHub.
OPENPBS_SHA256=9ac9e5297248121aef1c151688f4093567efcd2494d6641c8c110e26d763ef76
OPENPBS_DEFAULT_URL=https://github.com/openpbs/openpbs/archive/refs/tags/v$OPENPBS_VERSION.tar.gz

PBS_PREFIX=/opt/pbs
PBS_HOME_DIR=/var/spool/pbs
PBS_HOST=pbshost
PBS_NETNS=pbs
PBS_ADDR=10.77.0.1
PBS_UTS_FILE=/run/pbsns/uts
PBS_TEST_USER=alice
# Written by build.sh once /opt/pbs holds this version with these patches.
PBS_INSTALL_STAMP=$PBS_PREFIX/.softwalltime-harness-stamp

# A clean PATH for building and starting daemons: no pyenv shim or venv may decide which
# Python PBS embeds or runs under (Debian's /usr/bin/python3, 3.11).
PBS_CLEAN_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

need_root() { # the calling script's name
	if [ "$(id -u)" -ne 0 ]; then
		echo "$1: must run as root (namespaces, /opt/pbs, /etc/pbs.conf)" >&2
		exit 1
	fi
}
