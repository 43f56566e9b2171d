#!/usr/bin/env bash
# Build CoreDNS, the bench peer of drover's node DNS (scripts/dns-bench.ts
# --peers), from the Go module in test/peers/coredns/ (github.com/coredns/coredns
# at the version its go.mod pins, every plugin of CoreDNS's default build),
# into $DROVER_PEERS_DIR (default /var/cache/drover-peers)/coredns-<key>/coredns,
# where <key> hashes go.mod, go.sum, main.go, this script and the Go version.
# An existing build for the same key is reused; a build happens in a temporary
# directory that is renamed into place only when complete. Go's module and
# build caches stay in their default places. Runs under nice -n 19. Not part
# of CI's build (scripts/peers/build.sh): a bench peer only.
#
#   scripts/peers/build-coredns.sh           build if needed, print the build directory
#   scripts/peers/build-coredns.sh --locate  print the build directory if built, else exit 1
#   scripts/peers/build-coredns.sh --force   rebuild even if cached
set -euo pipefail
SCRIPT=$(realpath "${BASH_SOURCE[0]}")
cd "$(dirname "$SCRIPT")/../../test/peers/coredns"

die() { echo "coredns: $*" >&2; exit 1; }
MODE=build
case "${1:-}" in
  --locate) MODE=locate ;;
  --force) MODE=force ;;
  "") ;;
  -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
  *) die "unknown argument: $1 (use --locate, --force or nothing)" ;;
esac

command -v go >/dev/null || die "go not found in PATH (Go 1.26 or later is needed to build CoreDNS)"
GO_VERSION=$(go env GOVERSION)
CACHE=${DROVER_PEERS_DIR:-/var/cache/drover-peers}
KEY=$({ echo "$GO_VERSION"; cat go.mod go.sum main.go "$SCRIPT"; } | sha256sum | cut -c1-16)
OUT="$CACHE/coredns-$KEY"

if [ "$MODE" = locate ]; then
  [ -x "$OUT/coredns" ] || exit 1
  echo "$OUT"
  exit 0
fi
if [ "$MODE" = build ] && [ -x "$OUT/coredns" ]; then
  echo "$OUT"
  exit 0
fi

mkdir -p "$CACHE"
TMP=$(mktemp -d "$CACHE/.build-coredns-$KEY.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
start=$SECONDS
echo "coredns: building with $GO_VERSION into $OUT" >&2
nice -n 19 go mod download
nice -n 19 go build -p 2 -trimpath -buildvcs=false -o "$TMP/coredns" .
{ echo "go $GO_VERSION"; go list -m github.com/coredns/coredns; } >"$TMP/versions.txt"
rm -rf "$OUT"
mv "$TMP" "$OUT"
trap - EXIT
echo "coredns: built in $((SECONDS - start)) s" >&2
echo "$OUT"
