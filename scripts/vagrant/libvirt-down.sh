#!/usr/bin/env bash
# Stop what libvirt-up.sh started and delete its network namespace: VMs still
# running are powered off (run `vagrant destroy` first to keep Vagrant's state
# consistent), libvirt's networks are stopped, libvirtd and virtlogd are
# stopped, and any process left in the namespace (dnsmasq, qemu) is ended.
# Safe to run more than once, and after a failed start.
#
#   scripts/vagrant/libvirt-down.sh
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" = 0 ] || vg_die "libvirt-down.sh needs root"

# wait_gone PID SECONDS: 0 once the process is gone
wait_gone() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  return 1
}
stop_pid() { # PID NAME: TERM, then KILL after 20 s
  kill -0 "$1" 2>/dev/null || return 0
  kill -TERM "$1" 2>/dev/null
  wait_gone "$1" 20 || { vg_log "$2 ($1) did not stop; killing it"; kill -KILL "$1" 2>/dev/null; wait_gone "$1" 5; }
}

if [ -f "$LV_STATE/libvirtd.pid" ] && lv_running; then
  for dom in $(virsh -c "$LV_URI" list --name 2>/dev/null); do
    vg_log "powering off the running VM $dom"
    timeout 60 virsh -c "$LV_URI" destroy "$dom" >/dev/null 2>&1 || true
  done
  for net in $(virsh -c "$LV_URI" net-list --name 2>/dev/null); do
    timeout 60 virsh -c "$LV_URI" net-destroy "$net" >/dev/null 2>&1 || true
  done
fi
for d in libvirtd virtlogd; do
  [ -f "$LV_STATE/$d.pid" ] || continue
  stop_pid "$(cat "$LV_STATE/$d.pid")" "$d"
  rm -f "$LV_STATE/$d.pid"
done

if [ -e "/run/netns/$LV_NETNS" ]; then
  # Whatever is left in the namespace was started by the daemons above.
  for pid in $(ip netns pids "$LV_NETNS" 2>/dev/null); do
    vg_log "ending $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80) ($pid), left in $LV_NETNS"
    stop_pid "$pid" "process $pid"
  done
  ip netns del "$LV_NETNS" || vg_die "could not delete namespace $LV_NETNS"
fi
vg_log "libvirt stopped; namespace $LV_NETNS removed"
