#!/usr/bin/env bash
# scripts/run-demo.sh (what scripts/demo.sh runs once it has built) on a machine without a
# GPU: it says once that the demo runs in the host memory space, and no rank warns that there
# is no CUDA driver. A stub nvidia-smi that finds no GPU stands in for the machine's.
#
#   demo_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '#!/bin/sh\necho "No devices were found" >&2\nexit 6\n' >"$work/nvidia-smi"
chmod +x "$work/nvidia-smi"
env -u SYMCOMM_MEMORY_SPACE PATH="$work:$PATH" BUILD_DIR="$build" NRANKS=2 \
  "$src/scripts/run-demo.sh" --mib-per-peer 1 >"$work/out" 2>&1
rc=$?
fail() {
  echo "not ok - demo without a GPU: $*: $(head -c 600 "$work/out")"
  exit 1
}
[ "$rc" -eq 0 ] || fail "exit code $rc"
[ "$(grep -c '^demo.sh: no GPU found: running 2 ranks in the host memory space' "$work/out")" -eq 1 ] ||
  fail "not one line saying the demo runs in the host space"
! grep -q 'WARN\|no CUDA driver' "$work/out" || fail "a rank warned"
grep -q 'verified' "$work/out" || fail "the demo did not verify its data"
echo "ok - demo without a GPU"
