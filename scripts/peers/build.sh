#!/usr/bin/env bash
# Build the real peers drover is tested and measured against, from the Go
# modules in test/peers/:
#   (default)  test/peers/ (k8s.io/kubernetes and go.etcd.io/etcd/server/v3 at
#              the versions its go.mod pins):
#                test-apiserver  embedded etcd + the real kube-apiserver on 127.0.0.1
#                kube-proxy      the real kube-proxy, unchanged
#              into $DROVER_PEERS_DIR (default /var/cache/drover-peers)/<key>/;
#   --coredns  test/peers/coredns/ (github.com/coredns/coredns at the version
#              its go.mod pins, every plugin of CoreDNS's default build): the
#              bench peer of drover's node DNS (scripts/dns-bench.ts --peers),
#              not built by CI, into the same folder's coredns-<key>/.
# <key> hashes the module's go.mod, go.sum and Go sources, this script and the
# Go version. An existing build for the same key is reused; a build happens
# in a temporary directory that is renamed into place only when complete. The
# Go module and build caches stay in Go's default places (go env GOMODCACHE
# GOCACHE). Runs under nice -n 19.
#
#   scripts/peers/build.sh [--coredns]           build if needed, print the build directory
#   scripts/peers/build.sh [--coredns] --locate  print the build directory if built, else exit 1
#   scripts/peers/build.sh [--coredns] --force   rebuild even if cached
set -euo pipefail
SCRIPT=$(realpath "${BASH_SOURCE[0]}")
PEERS="$(dirname "$SCRIPT")/../../test/peers"

die() { echo "peers: $*" >&2; exit 1; }
MODE=build
TARGET=peers
for arg in "$@"; do
  case "$arg" in
    --coredns) TARGET=coredns ;;
    --locate) MODE=locate ;;
    --force) MODE=force ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) die "unknown argument: $arg (use --coredns, --locate, --force or nothing)" ;;
  esac
done

command -v go >/dev/null || die "go not found in PATH (Go 1.26 or later is needed to build the peers)"
GO_VERSION=$(go env GOVERSION)
CACHE=${DROVER_PEERS_DIR:-/var/cache/drover-peers}
if [ "$TARGET" = peers ]; then
  cd "$PEERS"
  BINARIES=(test-apiserver kube-proxy)
  KEY=$({ echo "$GO_VERSION"; cat go.mod go.sum "$SCRIPT"; find cmd -name '*.go' | LC_ALL=C sort | xargs cat; } | sha256sum | cut -c1-16)
  OUT="$CACHE/$KEY"
else
  cd "$PEERS/coredns"
  BINARIES=(coredns)
  KEY=$({ echo "$GO_VERSION"; cat go.mod go.sum main.go "$SCRIPT"; } | sha256sum | cut -c1-16)
  OUT="$CACHE/coredns-$KEY"
fi

built() { for b in "${BINARIES[@]}"; do [ -x "$OUT/$b" ] || return 1; done; }
if [ "$MODE" = locate ]; then
  built || exit 1
  echo "$OUT"
  exit 0
fi
if [ "$MODE" = build ] && built; then
  echo "$OUT"
  exit 0
fi

mkdir -p "$CACHE"
TMP=$(mktemp -d "$CACHE/.build-$TARGET-$KEY.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
start=$SECONDS
echo "peers: building ${BINARIES[*]} with $GO_VERSION into $OUT" >&2
nice -n 19 go mod download
if [ "$TARGET" = peers ]; then
  # The version the binaries report (/version, --version), as the release's
  # own build sets it (hack/lib/version.sh): the pinned k8s.io/kubernetes.
  K8S_VERSION=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  LDFLAGS=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    LDFLAGS+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  for b in "${BINARIES[@]}"; do
    nice -n 19 go build -p 2 -trimpath -buildvcs=false -ldflags "$LDFLAGS" -o "$TMP/$b" "./cmd/$b"
  done
  { echo "go $GO_VERSION"; go list -m k8s.io/kubernetes go.etcd.io/etcd/server/v3; } >"$TMP/versions.txt"
else
  nice -n 19 go build -p 2 -trimpath -buildvcs=false -o "$TMP/coredns" .
  { echo "go $GO_VERSION"; go list -m github.com/coredns/coredns; } >"$TMP/versions.txt"
fi
rm -rf "$OUT"
mv "$TMP" "$OUT"
trap - EXIT
echo "peers: built in $((SECONDS - start)) s" >&2
echo "$OUT"
