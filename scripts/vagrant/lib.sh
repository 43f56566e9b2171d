# shellcheck shell=bash
# Shared by the scripts in scripts/vagrant/ (sourced, not executed). Builds on
# scripts/vm/lib.sh: REPO_ROOT, VM_CACHE, vm_node_bin, vm_guest_dir, vm_guest_ready.

VAGRANT_SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=../vm/lib.sh
source "$VAGRANT_SCRIPTS/../vm/lib.sh"

# The network namespace that libvirtd, its bridge, dnsmasq and firewall rules,
# the VM's qemu, and vagrant itself live in (see libvirt-up.sh).
LV_NETNS="${DROVER_NETNS:-drover-vagrant}"
# shellcheck disable=SC2034  # used by the scripts that source this file
LV_STATE="${DROVER_LIBVIRT_STATE:-/run/drover-vagrant}"
LV_URI=qemu:///system

vg_die() { echo "drover-vagrant: $*" >&2; exit 1; }
vg_log() { echo "drover-vagrant: $*" >&2; }

# Print the packages of "$@" that dpkg does not have installed.
vg_missing_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}

# libvirtd answers on its system socket.
lv_running() { timeout 10 virsh -c "$LV_URI" version >/dev/null 2>&1; }

# Run a command in the namespace. nsenter switches the network namespace only;
# `ip netns exec` would also remount /sys, which libvirt does not expect.
lv_in_ns() { nsenter --net="/run/netns/$LV_NETNS" -- "$@"; }
