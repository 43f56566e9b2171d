#!/usr/bin/env bash
# Run a command (vagrant, virsh, ssh, ...) in the network namespace of the
# libvirtd started by libvirt-up.sh, where the VMs' addresses are reachable:
#
#   scripts/vagrant/libvirt-run.sh vagrant up --provider=libvirt
#   scripts/vagrant/libvirt-run.sh vagrant ssh -c 'cd /vagrant && sudo npm run bench'
#
# Only the network namespace changes: the working directory, files and
# environment stay the same. Exits with the command's exit code.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -gt 0 ] || { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ "$(id -u)" = 0 ] || vg_die "libvirt-run.sh needs root (nsenter)"
[ -e "/run/netns/$LV_NETNS" ] || vg_die "namespace $LV_NETNS does not exist: run scripts/vagrant/libvirt-up.sh first"
export VAGRANT_CHECKPOINT_DISABLE=1
exec nsenter --net="/run/netns/$LV_NETNS" -- "$@"
