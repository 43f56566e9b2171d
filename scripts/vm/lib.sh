# shellcheck shell=bash
# Shared by build-guest.sh, run.sh and test.sh (sourced, not executed).
# Defines where the guest artifacts live and the cache key that names them.

VM_SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_ROOT="$(cd "$VM_SCRIPTS/../.." && pwd -P)"
VM_CACHE="${DROVER_VM_DIR:-/var/cache/drover-vm}"

vm_die() { echo "drover-vm: $*" >&2; exit 1; }
vm_log() { echo "drover-vm: $*" >&2; }

# The host's node binary, symlinks resolved; it is copied into the guest.
vm_node_bin() {
  local n
  n="$(command -v node)" || vm_die "node is not installed on the host (the guest gets a copy of the host's node)"
  readlink -f "$n"
}

# Cache key: the files that go into the image (build script, this file, the
# initramfs init) and the identity of the host's node and npm. Changing any of
# them builds a new guest; an unchanged recipe reuses the cached one, also from
# a fresh clone. stage2.sh is not part of the key: run.sh hands it to the
# guest on every boot through the job share.
vm_key() {
  local node
  node="$(vm_node_bin)"
  {
    cat "$VM_SCRIPTS/build-guest.sh" "$VM_SCRIPTS/lib.sh" "$VM_SCRIPTS/guest/initramfs-init"
    echo "node $("$node" -v) $(stat -c %s "$node")"
    echo "npm $(sha256sum <"$(dirname "$node")/../lib/node_modules/npm/package.json" 2>/dev/null)"
  } | sha256sum | cut -c1-16
}

# Directory of the finished guest for the current key.
vm_guest_dir() { echo "$VM_CACHE/guest-$(vm_key)"; }

vm_guest_ready() {
  local d="$1"
  [ -f "$d/ok" ] && [ -s "$d/vmlinux" ] && [ -s "$d/initrd.cpio.gz" ] && [ -s "$d/rootfs.ext4" ]
}
