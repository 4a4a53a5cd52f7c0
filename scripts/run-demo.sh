#!/usr/bin/env bash
# Runs the built demo (the second half of scripts/demo.sh): one rank per GPU where there are
# two or more, else 4 ranks in the host memory space (ranks sharing one GPU would time-slice
# it, and kernels that wait for each other cannot), which it says once and sets
# (SYMCOMM_MEMORY_SPACE=host: the ranks then do not each warn that there is no GPU). NRANKS
# overrides the count (on one GPU, NRANKS=1 runs there); a SYMCOMM_MEMORY_SPACE of the
# caller's stands. BUILD_DIR names the build (default build); arguments go to symcomm-demo.
set -euo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
B=${BUILD_DIR:-build}/bin
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
gpus=${gpus:-0}
if [ "$gpus" -ge 2 ]; then
  NRANKS=${NRANKS:-$gpus}
elif [ "$gpus" -eq 1 ] && [ -n "${NRANKS:-}" ]; then
  :  # the caller's count, on the one GPU
elif [ "${SYMCOMM_MEMORY_SPACE:-host}" = host ]; then
  NRANKS=${NRANKS:-4}
  if [ "$gpus" -eq 1 ]; then
    echo "demo.sh: one GPU: running $NRANKS ranks in the host memory space (NRANKS=1 for the GPU alone)" >&2
  else
    echo "demo.sh: no GPU found: running $NRANKS ranks in the host memory space (shared CPU memory)" >&2
  fi
  export SYMCOMM_MEMORY_SPACE=host
fi
exec "$B/symrun" -n "${NRANKS:-4}" "$B/symcomm-demo" "$@"
