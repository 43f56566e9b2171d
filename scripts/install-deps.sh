#!/usr/bin/env bash
# Install the Debian packages drover and its tests use (as root):
# iptables (nft and legacy), nftables (nft, used by tests to read rule handles),
# conntrack (deleting stale UDP flows), ipset (IPVS mode's sets; its host
# kernel test), iproute2 (ip netns), bind9-dnsutils (dig, the DNS tests'
# client) and dnsperf (scripts/dns-bench.ts). Installs only what is missing.
set -euo pipefail
packages=(iptables nftables iproute2 conntrack ipset bind9-dnsutils dnsperf)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
