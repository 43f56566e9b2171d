#!/usr/bin/env bash
# Build the Debian guest that runs drover's IPVS tests under QEMU (TCG):
#   vmlinux         uncompressed kernel, booted directly (PVH), no bzImage unpacking
#   initrd.cpio.gz  busybox + the modules needed to mount the root disk and 9p
#   rootfs.ext4     debootstrap minbase + iptables/ipset/ipvsadm/nftables/... + the host's node and npm
# into $DROVER_VM_DIR (default /var/cache/drover-vm)/guest-<key>, where <key>
# hashes the build recipe (see lib.sh). An existing guest for the same key is
# reused. Builds happen in a temporary directory that is renamed into place
# only when complete. Needs root (debootstrap, chroot) and the Debian mirror
# configured in /etc/apt. Host packages are installed with apt if missing.
#
#   scripts/vm/build-guest.sh          build if needed, print the guest dir
#   scripts/vm/build-guest.sh --force  rebuild even if cached
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FORCE=0
case "${1:-}" in
  --force) FORCE=1 ;;
  "") ;;
  -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
  *) vm_die "unknown argument: $1 (use --force or nothing)" ;;
esac

[ "$(id -u)" = 0 ] || vm_die "build-guest.sh needs root (debootstrap, chroot)"
[ "$(uname -m)" = x86_64 ] || vm_die "only x86_64 hosts are supported"

# Packages installed in the guest (with apt, in the chroot). The kernel is
# added separately (see below) so that no initramfs-tools run is needed.
GUEST_PACKAGES=(iptables ipset ipvsadm nftables iproute2 conntrack kmod procps netcat-openbsd
  socat busybox util-linux ca-certificates)
# Modules the initramfs loads to reach the root disk and the 9p shares.
INITRD_MODULES=(virtio_pci virtio_blk ext4 9pnet_virtio 9p)
HOST_PACKAGES=(qemu-system-x86 qemu-utils debootstrap busybox-static cpio xz-utils e2fsprogs
  debian-archive-keyring util-linux)

T_START=$SECONDS
T_STEP=$SECONDS
step() { # print the time of the step that just ended
  echo "drover-vm: [$(printf '%4d' $((SECONDS - T_STEP)))s] $*"
  T_STEP=$SECONDS
}

# --- host packages --------------------------------------------------------
missing=()
for p in "${HOST_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "drover-vm: installing host packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || vm_die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || vm_die "apt-get install ${missing[*]} failed"
  step "host packages installed"
fi

mkdir -p "$VM_CACHE"
KEY="$(vm_key)"
OUT="$VM_CACHE/guest-$KEY"

# One build at a time per cache dir; a second caller waits and then reuses.
exec 9>"$VM_CACHE/.lock"
flock -w 1800 9 || vm_die "timed out waiting for another build (lock $VM_CACHE/.lock)"

if [ "$FORCE" = 0 ] && vm_guest_ready "$OUT"; then
  echo "drover-vm: guest $KEY is cached in $OUT"
  exit 0
fi

# Leftovers of builds that were killed outright (the lock says none is running).
for stale in "$VM_CACHE"/.build-*; do
  [ -d "$stale" ] && { echo "drover-vm: removing unfinished build $stale"; rm -rf --one-file-system "$stale"; }
done
avail_mb=$(df -Pm "$VM_CACHE" | awk 'NR==2 {print $4}')
[ "${avail_mb:-0}" -ge 3072 ] || vm_die "need 3 GB free in $VM_CACHE for the build (${avail_mb:-?} MB available); set DROVER_VM_DIR elsewhere"

# --- Debian mirror and suite, as configured on this host --------------------
# shellcheck disable=SC1091
SUITE="${DROVER_VM_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}"
[ -n "$SUITE" ] || vm_die "cannot tell the Debian suite (no VERSION_CODENAME in /etc/os-release); set DROVER_VM_SUITE"
apt_uris() { # print "URI SUITE" for every configured deb source (one-line and deb822 formats)
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1=="deb" { i=2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } print $i, $(i+1) }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN{RS=""; FS="\n"} {
        uris=""; suites=""; types=""; enabled="yes"
        for (i=1;i<=NF;i++) {
          if ($i ~ /^URIs:/) uris=substr($i,6)
          else if ($i ~ /^Suites:/) suites=substr($i,8)
          else if ($i ~ /^Types:/) types=substr($i,7)
          else if ($i ~ /^Enabled:/) enabled=substr($i,9)
        }
        if (types ~ /(^| )deb( |$)/ && enabled !~ /no/) {
          n=split(uris,u," "); m=split(suites,s," ")
          for (a=1;a<=n;a++) for (b=1;b<=m;b++) print u[a], s[b]
        }
      }' "$f"
  done
}
MIRROR="${DROVER_VM_MIRROR:-$(apt_uris | awk -v s="$SUITE" '$2==s {print $1; exit}')}"
[ -n "$MIRROR" ] || vm_die "no Debian mirror for suite '$SUITE' in /etc/apt/sources.list{,.d/}; set DROVER_VM_MIRROR"
SECURITY="$(apt_uris | awk -v s="$SUITE-security" '$2==s {print $1; exit}')"
echo "drover-vm: building guest $KEY (Debian $SUITE from $MIRROR) into $OUT"

# --- work directory, removed on any failure ----------------------------------
WORK="$(mktemp -d "$VM_CACHE/.build-$KEY.XXXXXX")"
cleanup() {
  local rc=$?
  # Mounts are only ever made inside private mount namespaces (unshare -m),
  # so nothing is mounted under $WORK when we get here.
  rm -rf --one-file-system "$WORK"
  if [ "$rc" != 0 ]; then echo "drover-vm: build FAILED (exit $rc); partial output removed" >&2; fi
}
trap cleanup EXIT
R="$WORK/rootfs"
BOOT="$WORK/out"
mkdir -p "$BOOT"

# Run a command chrooted in the rootfs, with /proc, /sys and /dev in a private
# mount namespace (they disappear with it, also on failure).
in_chroot() {
  unshare -m --propagation private -- /bin/sh -ec '
    R="$1"; shift
    mount -t proc proc "$R/proc"
    mount -t sysfs sysfs "$R/sys"
    mount --rbind /dev "$R/dev"
    exec chroot "$R" "$@"' sh "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
      DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"
}

# --- 1. debootstrap ------------------------------------------------------------
unshare -m --propagation private -- \
  debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    "$SUITE" "$R" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
  || { tail -n 30 "$WORK/debootstrap.log" >&2; vm_die "debootstrap $SUITE from $MIRROR failed (log above)"; }
step "debootstrap --variant=minbase $SUITE"

# --- 2. guest packages ---------------------------------------------------------
{
  echo "deb $MIRROR $SUITE main"
  echo "deb $MIRROR $SUITE-updates main"
  [ -z "$SECURITY" ] || echo "deb $SECURITY $SUITE-security main"
} >"$R/etc/apt/sources.list"
cp -L /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"
chmod +x "$R/usr/sbin/policy-rc.d"
in_chroot apt-get update -qq >"$WORK/apt.log" 2>&1 \
  || { tail -n 30 "$WORK/apt.log" >&2; vm_die "apt-get update in the guest rootfs failed"; }
in_chroot apt-get install -y -qq --no-install-recommends "${GUEST_PACKAGES[@]}" >>"$WORK/apt.log" 2>&1 \
  || { tail -n 30 "$WORK/apt.log" >&2; vm_die "apt-get install ${GUEST_PACKAGES[*]} in the guest rootfs failed"; }
step "apt-get install ${GUEST_PACKAGES[*]}"

# --- 3. kernel: linux-image-amd64's image package, unpacked without running
# its maintainer scripts (which would build an initramfs we do not use).
KPKG="$(in_chroot apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
[ -n "$KPKG" ] || vm_die "cannot resolve linux-image-amd64 to a kernel package"
mkdir -p "$R/tmp/kernel"
in_chroot sh -c "cd /tmp/kernel && apt-get download -qq $KPKG" >>"$WORK/apt.log" 2>&1 \
  || { tail -n 30 "$WORK/apt.log" >&2; vm_die "apt-get download $KPKG failed"; }
dpkg-deb -x "$R"/tmp/kernel/*.deb "$WORK/kernel"
KVER="$(ls "$WORK/kernel/lib/modules" | head -n1)"
[ -n "$KVER" ] && [ -f "$WORK/kernel/boot/vmlinuz-$KVER" ] || vm_die "unexpected layout of $KPKG"
mkdir -p "$R/lib/modules"
cp -a "$WORK/kernel/lib/modules/$KVER" "$R/lib/modules/"
in_chroot depmod -a "$KVER"
rm -rf "$R/tmp/kernel"
step "kernel $KPKG ($KVER)"

# Uncompressed vmlinux for PVH boot: the bzImage payload is xz; find its magic
# and decompress from there (xz complains about the trailing data; the check
# below is what counts).
VMLINUZ="$WORK/kernel/boot/vmlinuz-$KVER"
for off in $(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$VMLINUZ" | cut -d: -f1); do
  tail -c +$((off + 1)) "$VMLINUZ" | xz -dc 2>/dev/null >"$BOOT/vmlinux" || true
  [ "$(head -c 4 "$BOOT/vmlinux" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] && break
  rm -f "$BOOT/vmlinux"
done
[ -s "$BOOT/vmlinux" ] || vm_die "could not extract an ELF vmlinux from $VMLINUZ"
step "vmlinux extracted ($(du -m "$BOOT/vmlinux" | cut -f1) MB)"

# --- 4. node and npm from the host ---------------------------------------------
NODE="$(vm_node_bin)"
NPM_DIR="$(dirname "$NODE")/../lib/node_modules/npm"
install -m 0755 "$NODE" "$R/usr/local/bin/node"
if [ -d "$NPM_DIR" ]; then
  mkdir -p "$R/usr/local/lib/node_modules"
  cp -a "$(readlink -f "$NPM_DIR")" "$R/usr/local/lib/node_modules/npm"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$R/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$R/usr/local/bin/npx"
else
  echo "drover-vm: warning: no npm next to $NODE; the guest has node but no npm/npx" >&2
fi
in_chroot /usr/local/bin/node -e 'process.exit(0)' || vm_die "the host's node does not run in the guest rootfs (missing libraries?)"
step "node $("$NODE" -v) copied from $NODE"

# --- 5. initramfs ----------------------------------------------------------------
I="$WORK/initrd"
mkdir -p "$I/bin" "$I/lib/modules"
BB=/bin/busybox
[ -x "$BB" ] && ! ldd "$BB" >/dev/null 2>&1 || vm_die "$BB is not a static busybox (install busybox-static)"
cp "$BB" "$I/bin/busybox"
install -m 0755 "$VM_SCRIPTS/guest/initramfs-init" "$I/init"
: >"$I/modules.list"
in_chroot modprobe --show-depends -S "$KVER" -a "${INITRD_MODULES[@]}" >"$WORK/modules.dep" \
  || vm_die "modprobe --show-depends ${INITRD_MODULES[*]} failed"
while read -r kind path _; do
  [ "$kind" = insmod ] || continue       # "builtin NAME" needs nothing
  name="$(basename "$path")"
  grep -qxF "$name" "$I/modules.list" && continue
  cp "$R$path" "$I/lib/modules/$name"
  echo "$name" >>"$I/modules.list"
done <"$WORK/modules.dep"
(cd "$I" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1 >"$BOOT/initrd.cpio.gz")
step "initramfs ($(wc -l <"$I/modules.list") modules: $(tr '\n' ' ' <"$I/modules.list"))"

# --- 6. root image -----------------------------------------------------------------
echo drover-vm >"$R/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 drover-vm\n::1 localhost\n' >"$R/etc/hosts"
: >"$R/etc/resolv.conf"
rm -f "$R/usr/sbin/policy-rc.d"
rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/*.bin "$R"/var/cache/apt/archives/*.deb \
  "$R"/usr/share/doc/* "$R"/usr/share/man/* "$R"/usr/share/info/* "$R"/usr/share/locale/* "$R"/var/log/*.log
# The job's repository is mounted at its host path; that path must not exist
# in the image or hide anything (stage2.sh checks this again at boot).
SIZE_MB=$(( $(du -sm "$R" | cut -f1) * 12 / 10 + 512 ))
mkfs.ext4 -q -F -L drover-root -d "$R" "$BOOT/rootfs.ext4" "${SIZE_MB}M" >"$WORK/mkfs.log" 2>&1 \
  || { cat "$WORK/mkfs.log" >&2; vm_die "mkfs.ext4 -d failed"; }
step "rootfs.ext4 (${SIZE_MB} MB, $(du -sm "$R" | cut -f1) MB used)"

{
  echo "key=$KEY"
  echo "suite=$SUITE"
  echo "mirror=$MIRROR"
  echo "kernel=$KPKG $KVER"
  echo "node=$("$NODE" -v)"
  echo "packages=${GUEST_PACKAGES[*]}"
  echo "built=$(date -u +%FT%TZ) in $((SECONDS - T_START))s"
} >"$BOOT/info"
touch "$BOOT/ok"

# --- 7. move into place atomically, drop guests of older recipes -------------------
rm -rf "$OUT"
mv -T "$BOOT" "$OUT"
for old in "$VM_CACHE"/guest-*; do
  [ "$old" = "$OUT" ] || [ ! -d "$old" ] || { echo "drover-vm: removing old guest $old"; rm -rf "$old"; }
done
step "installed into $OUT"
echo "drover-vm: guest $KEY built in $((SECONDS - T_START))s"
