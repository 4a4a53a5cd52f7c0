#!/usr/bin/env bash
# Probe (on a GPU machine, from the repository root): the relay broadcast against NCCL (and
# whatever else a setting names) for several settings of its parameters or rank counts, in
# one Release build. Each argument is one setting: "TAG RANKS IMPLS [VAR=VALUE ...]", e.g.
#   MIN=256K STEP=4 SYMCOMM_BENCH_COMMIT=$(git rev-parse --short HEAD) \
#     tools/probe/relay_sweep.sh "d96 4 nccl,sm,relay" "b64 4 nccl,relay SYMCOMM_COLL_RELAY_BLOCKS=64"
# Sizes from MIN (16M) to MAX (1G) by xSTEP (8); operations OPS (broadcast). Prints rank 0's
# table lines prefixed by the tag; $OUT/sweep.jsonl gets every record with a "relay_env"
# field naming the setting.
source "$(dirname "$0")/probe_env.sh"
setting() {
  local tag=$1 n=$2 impls=$3; shift 3
  rm -f "$OUT/p.jsonl"
  env "$@" SYMCOMM_BENCH_COMMIT="${SYMCOMM_BENCH_COMMIT:-unknown}" $B/symrun -n "$n" --timeout 120 \
    $B/symcomm-bench coll --ops "${OPS:-broadcast}" --impls "$impls" --min-bytes "${MIN:-16M}" \
    --max-bytes "${MAX:-1G}" --step "${STEP:-8}" --point-ms 150 --json "$OUT/p.jsonl" \
    --machine "h200x$n" 2>&1 | grep -E "^\[0\] +[0-9]+ |FAIL|WRONG|rror" | sed "s/^/$tag /"
  tag_records "$OUT/p.jsonl" relay_env "${*:-defaults}"
}
for spec in "$@"; do
  read -r -a words <<< "$spec"
  setting "${words[@]}"
done
rm -f "$OUT/p.jsonl"
