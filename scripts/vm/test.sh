#!/usr/bin/env bash
# Run the VM test suite (test/vm/) inside the IPVS guest: build the guest if
# needed, boot it, run ava on test/vm/ in the repository, and exit with ava's
# exit code. Extra arguments go to ava (e.g. --match, --verbose).
# ava is started as node_modules/.bin/ava rather than `npx ava`: the same
# program, but npx's own start costs ~8 s under emulation.
# Environment: DROVER_VM_TIMEOUT (default 1800 s: the suite grows, and takes
# ~10 min on a busy 2-core host), DROVER_VM_DIR (cache).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ -d "$REPO_ROOT/node_modules/ava" ] || vm_die "node_modules is missing: run npm ci first (the guest uses the repository's node_modules)"
vm_guest_ready "$(vm_guest_dir)" || bash "$VM_SCRIPTS/build-guest.sh" >&2
exec bash "$VM_SCRIPTS/run.sh" --timeout "${DROVER_VM_TIMEOUT:-1800}" -- node_modules/.bin/ava --concurrency=1 test/vm/ "$@"
