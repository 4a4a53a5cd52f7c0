#!/usr/bin/env bash
# A/B of two trees on GPUs: the latency benchmark (symcomm-bench rma to 8 KiB: puts, ping-pong,
# barrier) built from the working tree ("new") and from an older tree ("old"), alternating.
# Make the old tree first, left untracked so that it travels with the working tree (delete it
# afterwards, never commit it):
#   git archive <commit> | (mkdir -p /tmp/o && tar -x -C /tmp/o) && rm -rf /tmp/o/bench/results \
#     /tmp/o/docs && tar -C /tmp/o -czf tools/probe/old_tree.tgz .
#   tools/probe/commit_ab.sh [ranks] [rounds]
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PATH=$PATH:/usr/local/cuda/bin
n=${1:-2}; rounds=${2:-3}; old=/tmp/old_tree
rm -rf "$old" && mkdir -p "$old" && tar -xzf tools/probe/old_tree.tgz -C "$old" || exit 1
for t in . "$old"; do
  cmake -S "$t" -B "$t/build-ab" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null &&
    cmake --build "$t/build-ab" --target symcomm-bench symrun -j 64 > /tmp/build.log 2>&1 ||
    { tail -20 /tmp/build.log; exit 1; }
done
for i in $(seq "$rounds"); do
  for t in new old; do
    d=.; [ $t = old ] && d=$old
    $d/build-ab/bin/symrun -n "$n" $d/build-ab/bin/symcomm-bench rma --max-bytes 8192 2>&1 |
      grep -E "^\[0\] +(put|get|pingpong|barrier).* (8|8192) |pingpong|barrier|FAIL|WRONG" | sed "s/^\[0\]/$t/"
  done
done
