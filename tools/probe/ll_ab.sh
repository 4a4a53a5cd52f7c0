#!/usr/bin/env bash
# A/B of src/coll/ll.cu on GPUs (bench/results/h200x4/ll_ab_feff727.txt): small-message benchmark (eager and --graph) built from the
# working tree's ll.cu ("new") and from tools/probe/ll_before.cu.txt ("before"), alternating.
# Make the "before" file first (git show HEAD:src/coll/ll.cu > tools/probe/ll_before.cu.txt): left untracked, it travels
# to the device machine with the working tree; delete it afterwards, never commit it.
#   tools/probe/ll_ab.sh [ranks] [ops]
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PATH=$PATH:/usr/local/cuda/bin
n=${1:-4}; ops=${2:-alltoall,allgather,broadcast,allreduce,reducescatter}
B=build-gpu/bin; src=src/coll/ll.cu
cp "$src" /tmp/ll.cu.new; trap 'cp /tmp/ll.cu.new "$src"' EXIT
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null || exit 1
run() {
  cmake --build build-gpu --target symcomm-bench symrun -j 64 > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
  for m in eager graph; do
    $B/symrun -n "$n" $B/symcomm-bench coll --ops "$ops" --impls ll --max-bytes 64K --step 8 \
      $([ $m = graph ] && echo --graph) 2>&1 | grep -E "^\[0\] +[0-9]+ |^\[0\] # [a-z]+: [0-9]|FAILED|WRONG" | sed "s/^\[0\]/$1 $m/"
  done
}
for i in 1 2; do
  cp /tmp/ll.cu.new "$src"; run new
  cp tools/probe/ll_before.cu.txt "$src"; run before
done
