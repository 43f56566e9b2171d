#!/usr/bin/env bash
# Compile this checkout into a tree of plain JavaScript that runs without tsx:
# one build for `npm test` (scripts/test.sh: type check and compile in one tsc
# run) and for the IPVS guest (scripts/vm/build-js.sh: no type check, the
# guest's files only). Through tsx, every Node.js process (each ava worker,
# each `drover` command, each helper) transpiles what it loads again: about a
# second of CPU per process on a host, most of a minute under emulation.
#
#   scripts/build-js.sh [--sources] TSCONFIG OUT_DIR DIR...
#
# OUT_DIR (created, must not exist yet) gets:
#   what tsc emits for TSCONFIG   whose rootDir is the repository and which
#                                 rewrites relative .ts imports to .js; it
#                                 decides whether types are checked (a type
#                                 error then fails the build)
#   DIR/... (each DIR relative    the files tsc does not emit: .mjs helpers
#   to the repository)            started by path, fixtures read by path;
#                                 with --sources also the .ts sources, so
#                                 that the tree holds every file of DIR
#   bin/                          copied, with dist -> src: bin/drover.js
#                                 (and so the tests' `drover`) starts the
#                                 compiled CLI
# node_modules, rules/ and the rest are the caller's to add.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
die() { echo "build-js.sh: $*" >&2; exit 1; }

exclude=(--exclude='*.ts')
if [ "${1:-}" = --sources ]; then exclude=(); shift; fi
[ $# -ge 3 ] || die "usage: build-js.sh [--sources] TSCONFIG OUT_DIR DIR..."
TSCONFIG="$1" OUT="$2"
shift 2
[ ! -e "$OUT" ] || die "$OUT already exists"
mkdir -p "$OUT"
"$ROOT/node_modules/.bin/tsc" -p "$TSCONFIG" --outDir "$OUT" || die "tsc -p $TSCONFIG failed"
tar -C "$ROOT" -cf - "${exclude[@]}" "$@" | tar -C "$OUT" -xf -
cp -r "$ROOT/bin" "$OUT/"
ln -s src "$OUT/dist"
