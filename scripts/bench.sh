#!/usr/bin/env bash
# `npm run bench [-- OPTIONS]`: drover's rule-update latency benchmark, as
# root. Every run works in throw-away network namespaces.
#
# - On a kernel with IPVS (/proc/net/ip_vs, after `modprobe ip_vs`; e.g. the Vagrant VM):
#   iptables and IPVS mode side by side, here, into $OUT.
# - Otherwise (like a host without ip_vs): iptables mode here, for absolute
#   numbers, into $OUT/host; then iptables and IPVS mode side by side in the
#   QEMU test guest (scripts/vm/; emulated, so its report gives ratios
#   only) into $OUT/guest. DROVER_BENCH_GUEST=0 skips the guest.
#
# OPTIONS are `drover bench` options that override the defaults below, e.g.
#   npm run bench -- --services 100 --changes 5
# $OUT is DROVER_BENCH_OUT, default out/bench. Guest knobs: DROVER_VM_MEMORY
# (default 3072 MiB here), DROVER_BENCH_VM_TIMEOUT (default 14400 s).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${DROVER_BENCH_OUT:-out/bench}"
HOST_DEFAULTS=(--services 100,1000 --endpoints 10 --changes 20)
# The guest is ~25x slower: fewer changes by default.
GUEST_DEFAULTS=(--services 100,1000 --endpoints 10 --changes 5)
for a in "$@"; do
  case "$a" in
    --out|--out=*|-o|--modes|--modes=*|--from|--from=*)
      echo "bench.sh: $a is set by this script (use DROVER_BENCH_OUT, or run ./bin/drover.js bench directly)" >&2
      exit 2 ;;
  esac
done

# IPVS loads on demand where the module exists (as drover's netlink lookup would load it).
[ -e /proc/net/ip_vs ] || modprobe -q ip_vs 2>/dev/null || true
if [ -e /proc/net/ip_vs ]; then
  echo "bench: this kernel has IPVS: measuring iptables and IPVS mode side by side into $OUT" >&2
  exec ./bin/drover.js bench "${HOST_DEFAULTS[@]}" --modes iptables,ipvs "$@" --out "$OUT"
fi

echo "bench: this kernel has no IPVS (no /proc/net/ip_vs, and modprobe ip_vs failed): iptables mode here into $OUT/host, then both modes in the test guest into $OUT/guest" >&2
./bin/drover.js bench "${HOST_DEFAULTS[@]}" --modes iptables "$@" --out "$OUT/host"
if [ "${DROVER_BENCH_GUEST:-1}" = 0 ]; then
  echo "bench: DROVER_BENCH_GUEST=0: the guest run is skipped" >&2
  exit 0
fi
DROVER_VM_MEMORY="${DROVER_VM_MEMORY:-3072}" bash scripts/vm/run.sh --timeout "${DROVER_BENCH_VM_TIMEOUT:-14400}" -- \
  ./bin/drover.js bench "${GUEST_DEFAULTS[@]}" --modes iptables,ipvs "$@" --out "$OUT/guest"
