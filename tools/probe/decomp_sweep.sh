#!/usr/bin/env bash
# Probe (on a GPU machine, from the repository root): the decomposition benchmark once per
# setting, in one Release build. Each argument is one setting: "TAG [VAR=VALUE ...]"; the
# benchmark's options come from ARGS (default: 1x4 Y->Z of 64^3 to 256^3 C32, nccl and sm),
# e.g.
#   ARGS="--sizes 128,256 --grids 1x4 --ops yz --backends nccl,sm" \
#     tools/probe/decomp_sweep.sh "s2" "s1 SYMCOMM_BOX_COPY_SYNCED_PER_SM=1"
# Prints rank 0's table lines prefixed by the tag; $OUT/sweep.jsonl gets every record with a
# "setting" field naming it.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PATH="$PATH:/usr/local/cuda/bin"
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
BUILD_DIR=build-gpu BUILD_TYPE=Release scripts/build.sh > "$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; exit 1; }
B=build-gpu/bin
n=$(nvidia-smi -L | wc -l)
args=${ARGS:---sizes 64,128,256 --dtypes c32 --grids 1x$n --ops yz --backends nccl,sm --no-autotune}
for spec in "$@"; do
  read -r -a words <<< "$spec"
  tag=${words[0]}
  rm -f "$OUT/p.jsonl"
  env "${words[@]:1}" SYMCOMM_BENCH_COMMIT="${SYMCOMM_BENCH_COMMIT:-unknown}" $B/symrun -n "$n" \
    --timeout 120 $B/symcomm-bench decomp $args --json "$OUT/p.jsonl" --machine "h200x$n" 2>&1 \
    | grep -E "^\[0\] .*(1x|2x|4x|8x)|FAIL|WRONG|rror" | sed "s/^/$tag /"
  [ -f "$OUT/p.jsonl" ] && SETTING="$spec" python3 -c '
import json, os, sys
for line in open(sys.argv[1]):
    r = json.loads(line); r["setting"] = os.environ["SETTING"]; print(json.dumps(r))' \
    "$OUT/p.jsonl" >> "$OUT/sweep.jsonl"
done
rm -f "$OUT/p.jsonl"
