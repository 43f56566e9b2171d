#!/usr/bin/env bash
# Run a command as root inside the drover test guest (Debian, QEMU TCG, with
# IPVS, dummy, veth, netns), with this repository shared read-write over 9p at
# the same absolute path as on the host (or /repo if that path is unusable in
# the guest) and the command started in it. Its stdout and stderr both stream
# to this script's stdout; this script exits with the command's exit code.
#
#   scripts/vm/run.sh [--timeout SECONDS] [--verbose] [--copy DIR:PATH]... -- COMMAND [ARG...]
#
#   --timeout SECONDS  kill the VM after this long (default $DROVER_VM_TIMEOUT or 900); exit 124
#   --verbose          print boot and run timings on stderr (or DROVER_VM_VERBOSE=1)
#   --copy DIR:PATH    a throw-away copy of host folder DIR at absolute PATH in the guest (on a disk)
#
# Environment: DROVER_VM_TIMEOUT, DROVER_VM_DIR (guest cache), DROVER_VM_MODULES
# (modules loaded at boot, space-separated), DROVER_VM_APPEND (extra kernel
# options), DROVER_VM_9P_CACHE (9p cache mode of the repository, default none),
# DROVER_VM_NODE_MODULES (image: node_modules is a throw-away copy on a disk,
# the default, fast; share: node_modules over 9p like the rest, slow but writable),
# DROVER_VM_CPU (QEMU -cpu model, default max), DROVER_VM_MEMORY (guest RAM in MiB,
# default 1024).
#
# Exit codes besides the command's: 124 timeout, 125 the guest failed before
# or around the command (no exit code came back), 130/143/129 interrupted by
# SIGINT/SIGTERM/SIGHUP (the VM is stopped), 2 usage. The guest runs
# from a snapshot of the root image, so nothing but the repository persists.
# The job sees DROVER_IN_GUEST=1 and DROVER_REPO (its repository path); CI and
# DROVER_* variables of the caller are passed through. Builds the guest first
# (scripts/vm/build-guest.sh) when it is missing. The VM has no network device.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TIMEOUT="${DROVER_VM_TIMEOUT:-900}"
MEMORY="${DROVER_VM_MEMORY:-1024}"
VERBOSE="${DROVER_VM_VERBOSE:-0}"
COPIES=()
usage() { sed -n '7,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) [ $# -ge 2 ] || usage; TIMEOUT="$2"; shift 2 ;;
    --timeout=*) TIMEOUT="${1#*=}"; shift ;;
    --verbose|-v) VERBOSE=1; shift ;;
    --copy) [ $# -ge 2 ] || usage; COPIES+=("$2"); shift 2 ;;
    --copy=*) COPIES+=("${1#*=}"); shift ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) echo "run.sh: unexpected argument '$1' (the command goes after --)" >&2; usage ;;
  esac
done
[ $# -gt 0 ] || { echo "run.sh: no command given" >&2; usage; }
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] && [ "$TIMEOUT" -gt 0 ] || { echo "run.sh: --timeout needs a positive number of seconds" >&2; exit 2; }
for c in "${COPIES[@]}"; do
  [[ "$c" == *:/* ]] && [ -d "${c%%:*}" ] || { echo "run.sh: --copy needs DIR:/ABSOLUTE/PATH with an existing DIR, not '$c'" >&2; exit 2; }
done
[[ "$MEMORY" =~ ^[0-9]+$ ]] && [ "$MEMORY" -ge 256 ] || { echo "run.sh: DROVER_VM_MEMORY needs a number of MiB, at least 256" >&2; exit 2; }

T0=$(date +%s.%N)
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

GUEST="$(vm_guest_dir)"
if ! vm_guest_ready "$GUEST" || ! command -v qemu-system-x86_64 >/dev/null; then
  vm_log "guest not built for this recipe; running build-guest.sh"
  bash "$VM_SCRIPTS/build-guest.sh" >&2 || vm_die "building the guest failed"
  vm_guest_ready "$GUEST" || vm_die "build-guest.sh did not produce $GUEST"
fi

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/drover-vm-run.XXXXXX")"
JOB="$WORKDIR/job"   # shared with the guest as /run/job
mkdir "$JOB"
QPID=""
cleanup() {
  if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
    kill -TERM "$QPID" 2>/dev/null || true
    wait "$QPID" 2>/dev/null || true
  fi
  rm -rf "$WORKDIR"
}
trap cleanup EXIT

# An ext4 image of host folder $1, labelled $2, in file $3, sized with room
# to spare (writes in the guest are thrown away with it).
make_image() {
  local mb inodes
  mb=$(( $(du -sm "$1/" | cut -f1) * 13 / 10 + 64 ))
  inodes=$(( $(find "$1/" | wc -l) * 12 / 10 + 1024 ))
  mkfs.ext4 -q -F -L "$2" -N "$inodes" -d "$1/" "$3" "${mb}M" >"$WORKDIR/mkfs.log" 2>&1 \
    || { cat "$WORKDIR/mkfs.log" >&2; return 1; }
  [ "$VERBOSE" = 0 ] || vm_log "image $2 of $1 (${mb} MB) made at +$(elapsed)s"
}

# node_modules goes in as a throw-away ext4 disk, mounted over the 9p share's
# node_modules: under TCG, 9p reads run at a few MB/s and node's module loading
# (many small files, many stats) over 9p took ~4x longer than from a disk.
# Writes into node_modules inside the guest are therefore not kept.
# DROVER_VM_NODE_MODULES=share uses the 9p share for it too (slow, writable).
EXTRA_DRIVES=()
NM_IMAGE=0
if [ "${DROVER_VM_NODE_MODULES:-image}" = image ] && [ -d "$REPO_ROOT/node_modules" ]; then
  make_image "$REPO_ROOT/node_modules" drover-nm "$WORKDIR/node_modules.ext4" \
    || vm_die "cannot make the node_modules image (set DROVER_VM_NODE_MODULES=share to skip it)"
  EXTRA_DRIVES=(-drive "file=$WORKDIR/node_modules.ext4,format=raw,if=virtio,cache=unsafe")
  NM_IMAGE=1
fi
# --copy folders: one disk each, labelled drover-c1, drover-c2, ...
COPY_MOUNTS=""
i=0
for c in "${COPIES[@]}"; do
  i=$((i + 1))
  make_image "${c%%:*}" "drover-c$i" "$WORKDIR/copy$i.ext4" || vm_die "cannot make the image of ${c%%:*}"
  EXTRA_DRIVES+=(-drive "file=$WORKDIR/copy$i.ext4,format=raw,if=virtio,cache=unsafe")
  COPY_MOUNTS+="drover-c$i=${c#*:} "
done

cp "$VM_SCRIPTS/guest/stage2.sh" "$JOB/stage2.sh"
{
  printf 'HOST_REPO=%q\n' "$REPO_ROOT"
  printf 'VERBOSE=%q\n' "$VERBOSE"
  printf 'CACHE=%q\n' "${DROVER_VM_9P_CACHE:-none}"
  printf 'NM_IMAGE=%q\n' "$NM_IMAGE"
  printf 'COPY_MOUNTS=%q\n' "$COPY_MOUNTS"
  [ -z "${DROVER_VM_MODULES+set}" ] || printf 'MODULES=%q\n' "$DROVER_VM_MODULES"
  while IFS= read -r name; do
    case "$name" in DROVER_VM_*|DROVER_IN_GUEST|DROVER_REPO) continue ;; esac
    printf 'export %s=%q\n' "$name" "${!name}"
  done < <(compgen -e | grep -E '^(CI|DROVER_[A-Z0-9_]*)$' || true)
} >"$JOB/config"
{
  echo '# generated by scripts/vm/run.sh'
  printf 'exec'
  printf ' %q' "$@"
  echo
} >"$JOB/job.sh"

# Boot options: quiet serial console; power off on panic (-no-reboot); and,
# since this is a throw-away test VM under emulation, skip work that only
# costs boot time (CPU mitigations, W+X checks, crypto self-tests, audit,
# AppArmor). DROVER_VM_APPEND adds more.
APPEND="console=ttyS0 quiet loglevel=3 panic=-1 8250.nr_uarts=1 mitigations=off rodata=off"
APPEND+=" cryptomgr.notests tsc=reliable no_timer_check audit=0 apparmor=0 security=none nowatchdog"
APPEND+=" ${DROVER_VM_APPEND:-}"

INTERRUPTED=0
on_signal() {
  INTERRUPTED="$1"
  vm_log "interrupted; stopping the VM"
  [ -z "$QPID" ] || kill -TERM "$QPID" 2>/dev/null || true
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap 'on_signal 129' HUP
[ "$VERBOSE" = 0 ] || vm_log "booting $GUEST (timeout ${TIMEOUT}s) at +$(elapsed)s"
# stdin is /dev/null: the VM takes no input, and the terminal is never put in
# raw mode. The repository share remaps inode numbers across host devices.
timeout -k 10 "$TIMEOUT" qemu-system-x86_64 \
  -machine q35,accel=tcg -cpu "${DROVER_VM_CPU:-max}" -m "$MEMORY" -smp 1 \
  -nodefaults -no-user-config -display none -no-reboot \
  -chardev stdio,id=con,signal=off -serial chardev:con \
  -kernel "$GUEST/vmlinux" -initrd "$GUEST/initrd.cpio.gz" \
  -append "$APPEND" \
  -drive "file=$GUEST/rootfs.ext4,format=raw,if=virtio,snapshot=on,cache=unsafe" \
  -fsdev "local,id=job,path=$JOB,security_model=none" \
  -device virtio-9p-pci,fsdev=job,mount_tag=job \
  -fsdev "local,id=repo,path=$REPO_ROOT,security_model=none,multidevs=remap" \
  -device virtio-9p-pci,fsdev=repo,mount_tag=repo \
  "${EXTRA_DRIVES[@]}" \
  </dev/null &
QPID=$!
[ "$INTERRUPTED" = 0 ] || kill -TERM "$QPID" 2>/dev/null || true
qs=0
while :; do
  wait "$QPID" && qs=0 || qs=$?
  kill -0 "$QPID" 2>/dev/null || break
done
QPID=""
[ "$VERBOSE" = 0 ] || vm_log "VM exited (qemu status $qs) at +$(elapsed)s"

[ "$INTERRUPTED" = 0 ] || exit "$INTERRUPTED"
if [ -s "$JOB/rc" ]; then
  rc="$(tr -dc 0-9 <"$JOB/rc")"
  exit "${rc:-125}"
fi
if [ "$qs" = 124 ] || [ "$qs" = 137 ]; then
  vm_log "timed out after ${TIMEOUT}s; the VM was killed"
  exit 124
fi
vm_log "the guest ended without reporting an exit code (qemu exit status $qs)"
exit 125
