#!/usr/bin/env bash
# Run the VM test suite (test/vm/) inside the IPVS guest: build the guest if
# needed, compile the checkout to JavaScript on the host (build-js.sh), boot
# the guest once, run ava on the compiled test/vm/ there, and exit with ava's
# exit code.
#
#   scripts/vm/test.sh [FILE...] [AVA ARGS]
#
# FILE: test files to run instead of those directly in test/vm/ (test/vm/x.test.ts
# or x.test.ts or x; takeover/x for test/vm/takeover/x.test.ts); other arguments go to ava (e.g. --match, --verbose,
# --timeout). The guest runs plain JavaScript, compiled here without a type
# check: under emulation, tsx transpiling src/ took most of a minute in every
# process that started. ava is started as node_modules/.bin/ava rather than
# `npx ava`: the same program, but npx's own start costs ~8 s under emulation.
# The guest has one vCPU, so ava runs one file at a time.
# Environment: DROVER_VM_TIMEOUT (default 1800 s), DROVER_VM_DIR (cache),
# DROVER_VM_KEEP_JS=DIR (compile into DIR and keep it, for a look at what ran).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ -d "$REPO_ROOT/node_modules/ava" ] || vm_die "node_modules is missing: run npm ci first (the guest uses the repository's node_modules)"
vm_guest_ready "$(vm_guest_dir)" || bash "$VM_SCRIPTS/build-guest.sh" >&2

FILES=()
AVA_ARGS=()
for a in "$@"; do
  case "$a" in
    -*) AVA_ARGS+=("$a") ;;
    *.test.ts | *.test.js | *.test)
      f="test/vm/$(basename "${a%.ts}")"; f="${f%.js}"; f="${f%.test}.test.js"
      [ -f "$REPO_ROOT/${f%.js}.ts" ] || vm_die "no such VM test file: $a"
      FILES+=("$f") ;;
    *) if [ -f "$REPO_ROOT/test/vm/$a.test.ts" ]; then FILES+=("test/vm/$a.test.js"); else AVA_ARGS+=("$a"); fi ;;
  esac
done
# By default the files directly in test/vm/; test/vm/takeover/ (a takeover from IPVS mode with traffic, minutes
# under emulation) runs on its own: `npm run test:vm:takeover`, which CI runs too.
if [ ${#FILES[@]} -eq 0 ]; then
  for f in "$REPO_ROOT"/test/vm/*.test.ts; do FILES+=("test/vm/$(basename "${f%.ts}").js"); done
fi

if [ -n "${DROVER_VM_KEEP_JS:-}" ]; then
  JS="$DROVER_VM_KEEP_JS"
else
  TMP="$(mktemp -d "${TMPDIR:-/tmp}/drover-vm-js.XXXXXX")"
  trap 'rm -rf "$TMP"' EXIT
  JS="$TMP/tree"
fi
bash "$VM_SCRIPTS/build-js.sh" "$JS"

# In the guest, the compiled tree is at /opt/drover with the repository's
# node_modules linked in (wherever run.sh mounted the repository).
GUEST_JS=/opt/drover
JOB="ln -sfn \"\$DROVER_REPO/node_modules\" $GUEST_JS/node_modules && cd $GUEST_JS && exec node_modules/.bin/ava --concurrency=1"
bash "$VM_SCRIPTS/run.sh" --timeout "${DROVER_VM_TIMEOUT:-1800}" --copy "$JS:$GUEST_JS" -- \
  bash -c "$JOB \"\$@\"" ava "${FILES[@]}" "${AVA_ARGS[@]}"
