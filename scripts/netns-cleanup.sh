#!/bin/sh
# Remove network namespaces left behind by drover's testbed (src/testbed/)
# after a crash or SIGKILL. Testbed namespaces are named PREFIX-<6 hex>-<role>,
# e.g. drv-3fa9c1-node; nothing else is touched. Processes still running
# inside them (echo servers, a proxy under test) are killed first.
#
# usage: sudo scripts/netns-cleanup.sh [-n] [PREFIX]    (-n: only list; PREFIX default: drv)
set -eu
dry=0
if [ "${1:-}" = "-n" ]; then dry=1; shift; fi
prefix="${1:-drv}"
[ "$(id -u)" -eq 0 ] || { echo "netns-cleanup: must run as root" >&2; exit 1; }

found=0
for ns in $(ip netns list | awk '{print $1}' | grep -E "^${prefix}-[0-9a-f]{6}-[a-z0-9-]+\$" || true); do
  found=1
  if [ "$dry" -eq 1 ]; then echo "would delete $ns"; continue; fi
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  if [ -n "$pids" ]; then kill -KILL $pids 2>/dev/null || true; fi
  ip netns del "$ns" && echo "deleted $ns"
done
[ "$found" -eq 1 ] || echo "netns-cleanup: no ${prefix}-* testbed namespaces"
