#!/usr/bin/env bash
# `npm test`: the checkout transpiled into a test tree (scripts/build-js.sh,
# about a second), ava running the compiled tests there with plain Node.js
# (ava.compiled.config.mjs): no process of the run loads tsx. The type check
# (`tsc --noEmit`, 15-20 s of one core) runs beside the tests, not before
# them; a type error fails the run once the tests are done, and is printed
# then.
#
#   bash scripts/test.sh [AVA ARGS...]     # npm test [-- AVA ARGS...]
#
# A test file may be named by its path in the checkout (test/unit/foo.test.ts);
# it runs compiled. The tree, $TMPDIR/drover-test-tree/KEY/ (KEY hashes the
# checkout's path), is built anew on every run and kept after it:
#   a copy of the checkout   every top-level file and folder of the checkout
#                            but those .gitignore leaves out
#                            (src/, test/, docs/, examples/, package.json, ...),
#                            and beside each .ts file its .js
#   bin/, dist -> src        bin/drover.js starts the compiled CLI (the `drover`
#                            the tests spawn, test/support/drover-bin.ts)
#   node_modules             a link to the checkout's
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
TREE="${TMPDIR:-/tmp}/drover-test-tree/$(printf '%s' "$ROOT" | sha256sum | cut -c1-16)"
rm -rf "$TREE" "$TREE.typecheck"
mkdir -p "$(dirname "$TREE")"
# The type check, started first: it is the longest single step.
(cd "$ROOT" && exec node_modules/.bin/tsc -p tsconfig.json --noEmit) >"$TREE.typecheck" 2>&1 &
typecheck=$!
trap 'kill "$typecheck" 2>/dev/null || true' EXIT
# Interrupted: stop the type check too (a background job of a script ignores SIGINT), rather than wait for it.
trap 'kill "$typecheck" 2>/dev/null; exit 130' INT TERM
# Copies, not links: a test may copy a folder (examples/) or start a script
# that finds its neighbours by its own path. bin/ is the build's.
mapfile -t top < <(git -C "$ROOT" ls-files --cached --others --exclude-standard | cut -d/ -f1 | sort -u | grep -vx bin)
[ "${#top[@]}" -gt 0 ] || { echo "test.sh: git ls-files lists nothing in $ROOT" >&2; exit 1; }
bash "$ROOT/scripts/build-js.sh" --sources "$TREE" "${top[@]}"
ln -s "$ROOT/node_modules" "$TREE/node_modules"
args=()
for a in "$@"; do
  [[ "$a" == *.ts && -e "$ROOT/$a" ]] && a="${a%.ts}.js"
  args+=("$a")
done
code=0
(cd "$TREE" && exec node_modules/.bin/ava --config ava.compiled.config.mjs "${args[@]}") || code=$?
if wait "$typecheck"; then
  rm -f "$TREE.typecheck"
else
  cat "$TREE.typecheck" >&2
  echo "test.sh: the type check failed (tsc -p tsconfig.json --noEmit, above)" >&2
  [ "$code" -ne 0 ] || code=1
fi
trap - EXIT INT TERM
exit "$code"
