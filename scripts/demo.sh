#!/usr/bin/env bash
# Command 1 of the README: installs what is missing, builds, and runs the demo: one rank per
# GPU where there are two or more, else 4 ranks in the host memory space (ranks sharing one
# GPU would time-slice it, and kernels that wait for each other cannot). NRANKS overrides.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
B=${BUILD_DIR:-build}/bin
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ -z "${NRANKS:-}" ]; then
  if [ "${gpus:-0}" -ge 2 ]; then
    NRANKS=$gpus
  else
    NRANKS=4
    if [ "${gpus:-0}" -eq 1 ]; then
      echo "demo.sh: one GPU: running 4 ranks in the host memory space (NRANKS=1 for the GPU alone)" >&2
      export SYMCOMM_MEMORY_SPACE=${SYMCOMM_MEMORY_SPACE:-host}
    fi
  fi
fi
exec "$B/symrun" -n "$NRANKS" "$B/symcomm-demo" "$@"
