#!/usr/bin/env bash
# Build a tree of plain JavaScript from this checkout that runs without tsx:
# for `npm test` (scripts/test.sh, which type-checks beside it) and for the
# IPVS guest (scripts/vm/build-js.sh). Through tsx, every Node.js process
# (each ava worker, each `drover` command, each helper) transpiles what it
# loads again: about a second of CPU per process on a host, most of a minute
# under emulation.
#
#   scripts/build-js.sh [--sources] OUT_DIR DIR...
#
# OUT_DIR (created, must not exist yet) gets:
#   DIR/.../x.js for each      transpiled by scripts/transpile.mjs (esbuild,
#   DIR/.../x.ts               no type check), relative .ts imports rewritten
#                              to .js
#   DIR/... (each DIR relative the files that are not transpiled: .mjs helpers
#   to the repository)         started by path, fixtures read by path; with
#                              --sources also the .ts sources, so that the
#                              tree holds every file of DIR
#   bin/                       copied, with dist -> src: bin/drover.js (and so
#                              the tests' `drover`) starts the compiled CLI
# node_modules, rules/ and the rest are the caller's to add.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
die() { echo "build-js.sh: $*" >&2; exit 1; }

exclude=(--exclude='*.ts')
if [ "${1:-}" = --sources ]; then exclude=(); shift; fi
[ $# -ge 2 ] || die "usage: build-js.sh [--sources] OUT_DIR DIR..."
OUT="$1"
shift
[ ! -e "$OUT" ] || die "$OUT already exists"
mkdir -p "$OUT"
node "$ROOT/scripts/transpile.mjs" "$OUT" "$@" || die "scripts/transpile.mjs could not transpile the sources"
tar -C "$ROOT" -cf - "${exclude[@]}" "$@" | tar -C "$OUT" -xf -
cp -r "$ROOT/bin" "$OUT/"
ln -s src "$OUT/dist"
