#!/usr/bin/env bash
# Command 1 of the README: installs what is missing, builds, and runs the demo on 4 ranks
# (one per GPU when there are GPUs, in the host memory space otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
exec build/bin/symrun -n "${NRANKS:-4}" build/bin/symcomm-demo "$@"
