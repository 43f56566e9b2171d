#!/usr/bin/env bash
# The Vagrant VM's shell provisioner (runs in the guest, as root). Installs
# only what is missing, so it also works offline on a box that has it all:
#   - iptables, ipset, ipvsadm, conntrack, iproute2, nftables (apt)
#   - Node.js 20 or later: the official linux tarball of the newest 20.x,
#     checked against its SHASUMS256.txt, into /usr/local (Debian 12 ships 18)
#   - the IPVS modules, loaded now and at every boot
#   - npm ci in the repository share (cache /var/cache/drover-npm)
# Environment: DROVER_REPO (default /vagrant), DROVER_NODE_MAJOR (default 20),
# DROVER_NODE_DIST (where the Node.js tarballs are; default the official site).
set -euo pipefail
REPO="${DROVER_REPO:-/vagrant}"
NODE_MAJOR="${DROVER_NODE_MAJOR:-20}"
NODE_DIST="${DROVER_NODE_DIST:-https://nodejs.org/dist}"
MODULES=(ip_vs ip_vs_rr ip_vs_wrr ip_vs_lc ip_vs_sh nf_conntrack)
PACKAGES=(iptables ipset ipvsadm conntrack iproute2 nftables kmod)
export DEBIAN_FRONTEND=noninteractive
T0=$SECONDS
log() { echo "drover-provision: [$(printf '%4d' $((SECONDS - T0)))s] $*"; }
die() { echo "drover-provision: $*" >&2; exit 1; }

APT_UPDATED=0
apt_install() {
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  if [ "$APT_UPDATED" = 0 ]; then apt-get update -qq || die "apt-get update failed"; APT_UPDATED=1; fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
  log "installed ${missing[*]}"
}

apt_install "${PACKAGES[@]}"

node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if [ "$(node_major)" -lt "$NODE_MAJOR" ] || ! command -v npm >/dev/null; then
  apt_install ca-certificates curl xz-utils
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64) arch=arm64 ;;
    *) die "no Node.js tarball for $(uname -m)" ;;
  esac
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  base="$NODE_DIST/latest-v$NODE_MAJOR.x"
  curl -fsSL --retry 3 -o "$tmp/SHASUMS256.txt" "$base/SHASUMS256.txt" || die "cannot fetch $base/SHASUMS256.txt"
  file="$(awk -v a="linux-$arch.tar.xz" '$2 ~ ("^node-v[0-9.]+-" a "$") {print $2; exit}' "$tmp/SHASUMS256.txt")"
  [ -n "$file" ] || die "no linux-$arch.tar.xz in $base/SHASUMS256.txt"
  curl -fsSL --retry 3 -o "$tmp/$file" "$base/$file" || die "cannot fetch $base/$file"
  (cd "$tmp" && grep " $file\$" SHASUMS256.txt | sha256sum -c --quiet -) || die "checksum mismatch for $file"
  tar -xJf "$tmp/$file" -C /usr/local --strip-components=1 --no-same-owner \
    --exclude='*/CHANGELOG.md' --exclude='*/README.md' --exclude='*/LICENSE'
  hash -r
  log "installed ${file%.tar.xz}"
fi
[ "$(node_major)" -ge "$NODE_MAJOR" ] || die "node $(node -v 2>/dev/null) is older than $NODE_MAJOR"

for m in "${MODULES[@]}"; do
  modprobe "$m" || die "modprobe $m failed (kernel $(uname -r); after a kernel upgrade, reboot the VM: vagrant reload)"
done
printf '%s\n' "${MODULES[@]}" >/etc/modules-load.d/drover-ipvs.conf
log "loaded ${MODULES[*]}"

[ -f "$REPO/package-lock.json" ] || die "$REPO/package-lock.json is missing: is the repository shared at $REPO?"
cd "$REPO"
npm ci --no-audit --no-fund --prefer-offline --cache /var/cache/drover-npm --loglevel=error \
  || die "npm ci failed (a box built by build-box.sh has the npm cache of the package-lock.json it was built with; rebuild it after dependency changes)"
log "npm ci done; node $(node -v), npm $(npm -v), kernel $(uname -r)"
log "run the benchmark: vagrant ssh -c 'cd $REPO && sudo npm run bench'"
