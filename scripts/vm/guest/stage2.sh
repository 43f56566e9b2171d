#!/bin/bash
# drover VM, stage 2: PID 1 in the Debian root, started by the initramfs from
# the job share (/run/job), which run.sh fills for every boot with:
#   config   shell assignments: HOST_REPO, VERBOSE, CACHE, NM_IMAGE, COPY_MOUNTS
#            ("LABEL=PATH ..." disks to mount), exported pass-through env
#   job.sh   `exec COMMAND...`, quoted
# It prepares the system (mounts, lo, IPVS and friends), mounts the repository
# share (tag "repo") at HOST_REPO (or /repo when that path is unusable in the
# guest), runs job.sh as root in it, writes the exit code to /run/job/rc and
# powers off. It must never exit: PID 1 exiting panics the kernel.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb
# Modules loaded before the command (one modprobe call: each process start
# costs ~0.2 s under TCG); run.sh may override the list (DROVER_VM_MODULES).
MODULES="ip_vs ip_vs_rr ip_vs_wrr ip_vs_lc ip_vs_sh nf_conntrack dummy veth br_netfilter"

stty -F /dev/console -onlcr 2>/dev/null  # plain \n on the serial console
note() { echo "drover-vm guest: $*" >&2; }
finish() {
  echo "$1" >/run/job/rc
  sync
  echo 0 >/proc/sys/kernel/printk  # no "reboot: Power down" on the console
  busybox poweroff -f
  echo o >/proc/sysrq-trigger
  sleep 60
}
VERBOSE=0
source /run/job/config || { note "cannot read /run/job/config"; finish 125; }

mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
ln -sfn /proc/self/fd /dev/fd
hostname drover-vm
ip link set lo up

# shellcheck disable=SC2086
if ! out="$(modprobe -a $MODULES 2>&1)"; then
  note "not all modules loaded (${MODULES}): ${out//$'\n'/; }"
fi

# The repository at its host path, so absolute paths and node_modules work;
# /repo when that path is not a fresh directory in the guest.
GUEST_REPO="$HOST_REPO"
case "$GUEST_REPO" in
  / | /proc | /proc/* | /sys | /sys/* | /dev | /dev/* | /run/job | /run/job/*) GUEST_REPO=/repo ;;
esac
if [ "$GUEST_REPO" != /repo ] && [ -e "$GUEST_REPO" ] && [ -n "$(ls -A "$GUEST_REPO" 2>/dev/null)" ]; then
  GUEST_REPO=/repo
fi
[ "$GUEST_REPO" = "$HOST_REPO" ] || note "$HOST_REPO cannot be used in the guest; the repository is at /repo"
mkdir -p "$GUEST_REPO"
if ! mount -t 9p -o "trans=virtio,version=9p2000.L,msize=262144,cache=${CACHE:-none}" repo "$GUEST_REPO"; then
  note "cannot mount the repository share at $GUEST_REPO"
  finish 125
fi
if [ "${NM_IMAGE:-0}" = 1 ]; then
  # run.sh's copy of node_modules, on the disk labelled drover-nm
  nm_dev=""
  for _ in $(seq 100); do
    nm_dev="$(blkid -L drover-nm 2>/dev/null)" && break
    sleep 0.05
  done
  # a git worktree's node_modules may be a link to another checkout's: mount
  # the disk where the link points (a path of the guest's own root, or the share)
  nm_at="$GUEST_REPO/node_modules"
  [ ! -L "$nm_at" ] || nm_at="$(readlink -m "$nm_at")"
  mkdir -p "$nm_at"
  if [ -z "$nm_dev" ] || ! mount -t ext4 -o noatime "$nm_dev" "$nm_at"; then
    note "cannot mount the node_modules disk; using node_modules over 9p"
  fi
fi
# run.sh --copy folders, each on the disk with its label
for m in ${COPY_MOUNTS:-}; do
  dev=""
  for _ in $(seq 100); do
    dev="$(blkid -L "${m%%=*}" 2>/dev/null)" && break
    sleep 0.05
  done
  mkdir -p "${m#*=}"
  if [ -z "$dev" ] || ! mount -t ext4 -o noatime "$dev" "${m#*=}"; then
    note "cannot mount the copy ${m%%=*} at ${m#*=}"
    finish 125
  fi
done
export DROVER_IN_GUEST=1 DROVER_REPO="$GUEST_REPO"

[ "$VERBOSE" = 0 ] || note "ready at uptime $(cut -d' ' -f1 /proc/uptime)s; running in $GUEST_REPO: $(tail -n1 /run/job/job.sh)"
cd "$GUEST_REPO" && setsid -w bash /run/job/job.sh </dev/null
rc=$?
[ "$VERBOSE" = 0 ] || note "command exited $rc at uptime $(cut -d' ' -f1 /proc/uptime)s"
finish "$rc"
