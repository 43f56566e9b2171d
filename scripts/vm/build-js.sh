#!/usr/bin/env bash
# The tree the guest runs as plain JavaScript, compiled once on the host by
# scripts/build-js.sh: under TCG emulation, tsx transpiling src/ in every
# process (each ava worker, each `drover` command, each helper) cost most of a
# minute per process start.
#
#   scripts/vm/build-js.sh OUT_DIR
#
# OUT_DIR (created, must not exist yet) gets:
#   src/, test/vm/, test/support/   transpiled by scripts/transpile.mjs (no type
#                                   check, relative .ts imports rewritten to .js),
#                                   plus the files it does not transpile (.mjs
#                                   helpers, test fixtures)
#   dist -> src                     so bin/drover.js and the bench pick the compiled CLI
#   bin/, rules/                    copied
#   package.json                    the repository's, with an ava configuration for .js files
# node_modules is not copied: the caller links OUT_DIR/node_modules to the
# repository's (test.sh does so in the guest). Type errors are not reported
# here: `npm run typecheck` does that.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OUT="${1:?usage: build-js.sh OUT_DIR}"
[ ! -e "$OUT" ] || vm_die "build-js.sh: $OUT already exists"
bash "$REPO_ROOT/scripts/build-js.sh" "$OUT" src test/vm test/support test/fixtures \
  || vm_die "build-js.sh: the sources could not be transpiled"
cp -r "$REPO_ROOT/rules" "$OUT/"
node -e '
  const fs = require("node:fs");
  const pkg = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  pkg.ava = { files: ["test/vm/**/*.test.js"], workerThreads: false, timeout: "10m" };
  fs.writeFileSync(process.argv[2], JSON.stringify(pkg, null, 2) + "\n");
' "$REPO_ROOT/package.json" "$OUT/package.json"
