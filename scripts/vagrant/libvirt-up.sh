#!/usr/bin/env bash
# Start virtlogd and libvirtd by hand (for hosts without systemd), inside their
# own network namespace, so that libvirt's bridges, dnsmasq, firewall rules and
# sysctls, and the VMs' network, never touch the host's network:
#
#   scripts/vagrant/libvirt-up.sh              start (no-op if already up)
#   scripts/vagrant/libvirt-run.sh vagrant up  run vagrant (or virsh) in the namespace
#   scripts/vagrant/libvirt-down.sh            stop everything, delete the namespace
#
# The namespace is $DROVER_NETNS (default drover-vagrant). Daemons run under
# `tini -s`, which reaps their children. Logs and pids go to
# $DROVER_LIBVIRT_STATE (default /run/drover-vagrant). VMs in the namespace
# reach the host's network not at all: anything they need must be in the box.
# Root. Sets user/group "root" in /etc/libvirt/qemu.conf (once, with a backup).
# On failure, everything started is stopped again.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" = 0 ] || vg_die "libvirt-up.sh needs root"
NEEDED=(libvirt-daemon-system libvirt-clients libvirt-daemon-driver-qemu dnsmasq-base qemu-system-x86 tini iproute2 util-linux)
mapfile -t missing < <(vg_missing_packages "${NEEDED[@]}")
[ "${#missing[@]}" = 0 ] || vg_die "missing packages: ${missing[*]}. Install them so that no service starts, e.g. on a host without systemd: apt-get install --no-install-recommends ${missing[*]}"

if [ -f "$LV_STATE/libvirtd.pid" ] && lv_running; then
  vg_log "libvirtd is already running in namespace $LV_NETNS (pid $(cat "$LV_STATE/libvirtd.pid"))"
  exit 0
fi
lv_running && vg_die "a libvirtd that this script did not start answers on $LV_URI; stop it first"
[ ! -e "/run/netns/$LV_NETNS" ] || vg_die "namespace $LV_NETNS exists but libvirtd is not up: run libvirt-down.sh first"

T0=$SECONDS
mkdir -p "$LV_STATE"
trap 'rc=$?; [ "$rc" = 0 ] || { vg_log "start failed; cleaning up"; bash "$VAGRANT_SCRIPTS/libvirt-down.sh" >&2 || true; }' EXIT

ip netns add "$LV_NETNS"
ip -n "$LV_NETNS" link set lo up

# qemu as root: the box images and the VM's disk live in root-owned paths.
QCONF=/etc/libvirt/qemu.conf
if ! grep -q '^# drover-vagrant' "$QCONF"; then
  cp -n "$QCONF" "$QCONF.drover-vagrant.orig"
  printf '\n# drover-vagrant: qemu runs as root (scripts/vagrant/libvirt-up.sh)\nuser = "root"\ngroup = "root"\n' >>"$QCONF"
fi

start_daemon() { # NAME ARGS...: start under tini in the namespace, record the pid of tini
  local name="$1"; shift
  setsid nsenter --net="/run/netns/$LV_NETNS" -- tini -s -- "$@" \
    </dev/null >>"$LV_STATE/$name.log" 2>&1 &
  echo $! >"$LV_STATE/$name.pid"
}
start_daemon virtlogd virtlogd
start_daemon libvirtd libvirtd

for _ in $(seq 1 120); do
  lv_running && break
  kill -0 "$(cat "$LV_STATE/libvirtd.pid")" 2>/dev/null || { tail -n 20 "$LV_STATE/libvirtd.log" >&2; vg_die "libvirtd exited"; }
  sleep 0.5
done
lv_running || { tail -n 20 "$LV_STATE/libvirtd.log" >&2; vg_die "libvirtd did not answer within 60 s"; }
vg_log "libvirtd up in namespace $LV_NETNS in $((SECONDS - T0))s (logs in $LV_STATE)"
vg_log "now: scripts/vagrant/libvirt-run.sh vagrant up --provider=libvirt"
