#!/usr/bin/env bash
# Build a local Vagrant box for the libvirt provider from the same Debian root
# filesystem as the IPVS test guest (scripts/vm/build-guest.sh), for hosts that
# cannot download boxes, and add it to Vagrant:
#
#   scripts/vagrant/build-box.sh [--name NAME] [--disk-gb N] [--keep FILE.box]
#
#   --name NAME       box name (default $DROVER_BOX or drover-local)
#   --disk-gb N       virtual disk size in GB (default 16; the image is sparse)
#   --keep FILE.box   also keep the box file there (default: removed once added)
#
# On top of the guest rootfs (iptables, ipset, ipvsadm, nftables, iproute2,
# conntrack, the host's node and npm) it installs the Debian kernel with an
# initramfs, systemd, openssh-server, sudo and rsync, boots with extlinux, and
# adds the user `vagrant` (password-less sudo, Vagrant's public insecure key).
# The npm cache of this repository's package-lock.json is baked into
# /var/cache/drover-npm, so the VM's `npm ci` needs no network.
# Root; installs its host packages with apt; needs the Debian mirror and the
# npm registry while it builds (the box itself works offline).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BOX_NAME="${DROVER_BOX:-drover-local}"
DISK_GB=16
KEEP=""
usage() { sed -n '6,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --name) [ $# -ge 2 ] || usage; BOX_NAME="$2"; shift 2 ;;
    --disk-gb) [ $# -ge 2 ] || usage; DISK_GB="$2"; shift 2 ;;
    --keep) [ $# -ge 2 ] || usage; KEEP="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "build-box.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ "$BOX_NAME" =~ ^[A-Za-z0-9._-]+$ ]] || vg_die "box name '$BOX_NAME': use letters, digits, '.', '_' and '-'"
[[ "$DISK_GB" =~ ^[0-9]+$ ]] && [ "$DISK_GB" -ge 4 ] || vg_die "--disk-gb needs a whole number of at least 4"
[ "$(id -u)" = 0 ] || vg_die "build-box.sh needs root (loop mounts, chroot)"

# Packages installed on top of the guest rootfs.
BOX_PACKAGES=(linux-image-amd64 initramfs-tools systemd-sysv systemd-resolved udev dbus
  openssh-server sudo rsync)
HOST_PACKAGES=(vagrant qemu-utils extlinux syslinux-common e2fsprogs fdisk util-linux)

T_START=$SECONDS
T_STEP=$SECONDS
step() { echo "drover-vagrant: [$(printf '%4d' $((SECONDS - T_STEP)))s] $*"; T_STEP=$SECONDS; }

mapfile -t missing < <(vg_missing_packages "${HOST_PACKAGES[@]}")
if [ "${#missing[@]}" -gt 0 ]; then
  echo "drover-vagrant: installing host packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || vg_die "apt-get install ${missing[*]} failed"
  step "host packages installed"
fi
command -v npm >/dev/null || vg_die "npm is not installed on the host"

# Vagrant's public insecure key(s), from the installed Vagrant.
PUBKEYS="${DROVER_VAGRANT_PUBKEY:-}"
if [ -z "$PUBKEYS" ]; then
  PUBKEYS="$(find /usr/share/rubygems-integration /opt/vagrant /usr/lib/ruby /var/lib/gems \
    -path '*/gems/vagrant-[0-9]*/keys/*.pub' 2>/dev/null | sort | tr '\n' ' ' || true)"
fi
[ -n "$PUBKEYS" ] || vg_die "cannot find Vagrant's keys/vagrant.pub; set DROVER_VAGRANT_PUBKEY to it"

# --- 1. the IPVS test guest's root filesystem (built or reused) ----------------
bash "$VM_SCRIPTS/build-guest.sh" || vg_die "scripts/vm/build-guest.sh failed"
GUEST="$(vm_guest_dir)"
vm_guest_ready "$GUEST" || vg_die "build-guest.sh did not produce $GUEST"
step "guest rootfs $GUEST/rootfs.ext4"

WORK="$(mktemp -d "$VM_CACHE/.box-$BOX_NAME.XXXXXX")"
cleanup() {
  local rc=$?
  # The loop mounts live in a private mount namespace (unshare -m) and vanish
  # with it, also when it is killed; nothing is mounted under $WORK here.
  rm -rf --one-file-system "$WORK"
  [ "$rc" = 0 ] || echo "drover-vagrant: box build FAILED (exit $rc); partial output removed" >&2
}
trap cleanup EXIT
avail_mb=$(df -Pm "$VM_CACHE" | awk 'NR==2 {print $4}')
[ "${avail_mb:-0}" -ge 6144 ] || vg_die "need 6 GB free in $VM_CACHE (${avail_mb:-?} MB available); set DROVER_VM_DIR elsewhere"

# --- 2. npm cache for this repository's lockfile -------------------------------
mkdir -p "$WORK/npm-project" "$WORK/npm-cache"
cp "$REPO_ROOT/package.json" "$REPO_ROOT/package-lock.json" "$WORK/npm-project/"
(cd "$WORK/npm-project" && timeout 900 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
  --cache "$WORK/npm-cache" >"$WORK/npm.log" 2>&1) \
  || { tail -n 20 "$WORK/npm.log" >&2; vg_die "npm ci (filling the box's npm cache) failed"; }
rm -rf "$WORK/npm-project"
step "npm cache for package-lock.json ($(du -sm "$WORK/npm-cache" | cut -f1) MB)"

# --- 3. disk: MBR + one bootable ext4 partition from 1 MiB ---------------------
DISK="$WORK/disk.raw"
OFFSET=$((1024 * 1024))
truncate -s "${DISK_GB}G" "$DISK"
echo 'start=2048, type=83, bootable' | sfdisk -q "$DISK" >/dev/null
PART_MB=$((DISK_GB * 1024 - 1))
# No 64bit feature: extlinux reads the filesystem it boots from.
mkfs.ext4 -q -F -L drover-root -O ^64bit -E offset=$OFFSET "$DISK" "${PART_MB}M" >"$WORK/mkfs.log" 2>&1 \
  || { cat "$WORK/mkfs.log" >&2; vg_die "mkfs.ext4 failed"; }

# --- 4. fill and configure it, in a private mount namespace ---------------------
export WORK GUEST OFFSET PUBKEYS
BOX_PACKAGES_STR="${BOX_PACKAGES[*]}"
export BOX_PACKAGES_STR
unshare -m --propagation private -- bash -euo pipefail -c '
  src="$WORK/src"; R="$WORK/root"
  mkdir -p "$src" "$R"
  mount -o loop,ro "$GUEST/rootfs.ext4" "$src"
  mount -o loop,offset=$OFFSET "$WORK/disk.raw" "$R"
  cp -a "$src/." "$R/"
  umount "$src"
  echo "drover-vagrant: copied the guest rootfs"

  mount -t proc proc "$R/proc"
  mount -t sysfs sysfs "$R/sys"
  mount --rbind /dev "$R/dev"
  ch() { chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }

  rm -f "$R/etc/resolv.conf"; cp -L /etc/resolv.conf "$R/etc/resolv.conf"
  printf "#!/bin/sh\nexit 101\n" >"$R/usr/sbin/policy-rc.d"; chmod +x "$R/usr/sbin/policy-rc.d"
  # The guest rootfs carries the kernel modules without the kernel package.
  rm -rf "$R"/lib/modules/*
  { ch apt-get update -qq && ch apt-get install -y -qq --no-install-recommends $BOX_PACKAGES_STR; } \
    >"$WORK/apt.log" 2>&1 || { tail -n 30 "$WORK/apt.log" >&2; exit 1; }
  KVER="$(ls "$R/lib/modules" | sort -V | tail -n1)"
  [ -f "$R/boot/vmlinuz-$KVER" ] && [ -f "$R/boot/initrd.img-$KVER" ] || { echo "no kernel/initrd for $KVER" >&2; exit 1; }
  echo "drover-vagrant: installed $BOX_PACKAGES_STR (kernel $KVER)"

  # Boot: extlinux in the partition, the MBR boot code is written afterwards.
  mkdir -p "$R/boot/extlinux"
  cat >"$R/boot/extlinux/extlinux.conf" <<CONF
DEFAULT debian
PROMPT 0
TIMEOUT 1
LABEL debian
  LINUX /boot/vmlinuz-$KVER
  INITRD /boot/initrd.img-$KVER
  APPEND root=LABEL=drover-root ro console=tty0 console=ttyS0,115200n8 net.ifnames=0 quiet
CONF
  extlinux --install "$R/boot/extlinux" >/dev/null 2>&1 || { echo "extlinux --install failed" >&2; exit 1; }
  echo "LABEL=drover-root / ext4 defaults,errors=remount-ro 0 1" >"$R/etc/fstab"

  # Network: DHCP on the first NIC.
  mkdir -p "$R/etc/systemd/network"
  printf "[Match]\nName=eth* en*\n\n[Network]\nDHCP=yes\n" >"$R/etc/systemd/network/80-dhcp.network"
  ch systemctl enable systemd-networkd systemd-resolved >/dev/null
  echo drover-bench >"$R/etc/hostname"
  printf "127.0.0.1 localhost\n127.0.1.1 drover-bench\n::1 localhost\n" >"$R/etc/hosts"

  # The vagrant user.
  ch useradd -m -s /bin/bash -G sudo vagrant
  echo "vagrant ALL=(ALL) NOPASSWD:ALL" >"$R/etc/sudoers.d/vagrant"; chmod 0440 "$R/etc/sudoers.d/vagrant"
  install -d -m 0700 "$R/home/vagrant/.ssh"
  for k in $PUBKEYS; do cat "$k"; echo; done | grep . >"$R/home/vagrant/.ssh/authorized_keys"
  chmod 0600 "$R/home/vagrant/.ssh/authorized_keys"
  ch chown -R vagrant:vagrant /home/vagrant/.ssh

  # Per-VM identity: SSH host keys and machine-id are made on first boot.
  rm -f "$R"/etc/ssh/ssh_host_*
  cat >"$R/etc/systemd/system/drover-ssh-hostkeys.service" <<UNIT
[Unit]
Description=Generate SSH host keys
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
UNIT
  ch systemctl enable drover-ssh-hostkeys.service >/dev/null
  printf "UseDNS no\n" >"$R/etc/ssh/sshd_config.d/drover.conf"
  : >"$R/etc/machine-id"; rm -f "$R/var/lib/dbus/machine-id"

  # The npm cache the provisioner uses (npm ci --prefer-offline).
  mkdir -p "$R/var/cache/drover-npm"
  cp -a "$WORK/npm-cache/." "$R/var/cache/drover-npm/"

  rm -f "$R/usr/sbin/policy-rc.d"
  ch apt-get clean
  rm -rf "$R"/var/lib/apt/lists/* "$R"/usr/share/doc/* "$R"/usr/share/man/* "$R"/var/log/*.log
  [ ! -e "$R/vagrant" ] || { echo "/vagrant exists in the image" >&2; exit 1; }
  umount -R "$R/dev" "$R/sys" "$R/proc"
  umount "$R"
' || vg_die "configuring the box image failed"
dd if=/usr/lib/EXTLINUX/mbr.bin of="$DISK" bs=440 count=1 conv=notrunc status=none
step "box image configured"

# --- 5. box file and vagrant box add ----------------------------------------------
B="$WORK/box"
mkdir -p "$B"
qemu-img convert -O qcow2 "$DISK" "$B/box.img"
rm -f "$DISK"
printf '{"provider":"libvirt","format":"qcow2","virtual_size":%d}\n' "$DISK_GB" >"$B/metadata.json"
cat >"$B/Vagrantfile" <<'VF'
# Box defaults; the project's Vagrantfile sets the rest.
Vagrant.configure("2") do |config|
  config.vm.guest = :debian
end
VF
BOXFILE="${KEEP:-$WORK/$BOX_NAME.box}"
tar -C "$B" -cf "$BOXFILE" metadata.json Vagrantfile box.img
rm -rf "$B"
step "box file $BOXFILE ($(du -m "$BOXFILE" | cut -f1) MB)"

VAGRANT_CHECKPOINT_DISABLE=1 vagrant box add --force --name "$BOX_NAME" "$BOXFILE" >"$WORK/box-add.log" 2>&1 \
  || { cat "$WORK/box-add.log" >&2; vg_die "vagrant box add failed"; }
# vagrant-libvirt copies a box into libvirt's storage pool on first use and
# keeps reusing that copy: drop it so the next `vagrant up` takes the new box.
if command -v virsh >/dev/null && lv_running; then
  for vol in $(virsh -c "$LV_URI" vol-list default 2>/dev/null | awk -v b="${BOX_NAME}_vagrant_box_image_" 'index($1, b) == 1 {print $1}'); do
    virsh -c "$LV_URI" vol-delete --pool default "$vol" >/dev/null && vg_log "removed the old box image $vol from libvirt's pool"
  done
else
  vg_log "if libvirt's pool holds an older ${BOX_NAME}_vagrant_box_image_* volume, delete it (virsh vol-delete --pool default NAME)"
fi
step "vagrant box add --name $BOX_NAME"
echo "drover-vagrant: box $BOX_NAME built in $((SECONDS - T_START))s"
