#!/usr/bin/env bash
# Command 2 of the README: installs what is missing, builds, and runs the test suite
# (unit, mp and - where GPUs are visible - gpu tests; ctest skips gpu tests without one).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
cd "${BUILD_DIR:-build}"
exec ctest --output-on-failure -j "${CTEST_JOBS:-2}" "$@"
