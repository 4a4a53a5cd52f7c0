#!/usr/bin/env bash
# Probe (on a GPU machine, from the repository root): the decomposition benchmark once per
# setting, in one Release build. Each argument is one setting: "TAG [VAR=VALUE ...]"; the
# benchmark's options come from ARGS (default: 1x4 Y->Z of 64^3 to 256^3 C32, nccl and sm),
# e.g.
#   ARGS="--sizes 128,256 --grids 1x4 --ops yz --backends nccl,sm" \
#     tools/probe/decomp_sweep.sh "s2" "s1 SYMCOMM_BOX_COPY_SYNCED_PER_SM=1"
# Prints rank 0's table lines prefixed by the tag; $OUT/sweep.jsonl gets every record with a
# "setting" field naming it.
source "$(dirname "$0")/probe_env.sh"
n=$(nvidia-smi -L | wc -l)
args=${ARGS:---sizes 64,128,256 --dtypes c32 --grids 1x$n --ops yz --backends nccl,sm --no-autotune}
for spec in "$@"; do
  read -r -a words <<< "$spec"
  tag=${words[0]}
  rm -f "$OUT/p.jsonl"
  env "${words[@]:1}" SYMCOMM_BENCH_COMMIT="${SYMCOMM_BENCH_COMMIT:-unknown}" $B/symrun -n "$n" \
    --timeout 120 $B/symcomm-bench decomp $args --json "$OUT/p.jsonl" --machine "h200x$n" 2>&1 \
    | grep -E "^\[0\] .*(1x|2x|4x|8x)|FAIL|WRONG|rror" | sed "s/^/$tag /"
  tag_records "$OUT/p.jsonl" setting "$spec"
done
rm -f "$OUT/p.jsonl"
