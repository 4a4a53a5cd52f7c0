#!/usr/bin/env bash
# Probe (on a GPU machine, from the repository root): the wait loop unrolled (SYMCOMM_WAIT_UNROLL=8,
# the default, build-gpu) against a counter test in every poll (=1, build-u1), alternating twice:
# transposes of 64^3 to 256^3 (1xN Y->Z, nccl, sm, fused, in CUDA graphs) and symcomm-bench rma
# to 8 bytes (ping-pongs, barrier). $OUT/sweep.jsonl gets every record with a "setting" field.
source "$(dirname "$0")/probe_env.sh"
BUILD_DIR=build-u1 BUILD_TYPE=Release scripts/build.sh -DCMAKE_CUDA_FLAGS=-DSYMCOMM_WAIT_UNROLL=1 > "$OUT/build-u1.log" 2>&1 || { tail -20 "$OUT/build-u1.log"; exit 1; }
n=$(nvidia-smi -L | wc -l)
for round in 1 2; do
  for v in u8 u1; do
    d=build-gpu; [ $v = u1 ] && d=build-u1
    rm -f "$OUT/p.jsonl"
    SYMCOMM_BENCH_COMMIT=${SYMCOMM_BENCH_COMMIT:-unknown} $d/bin/symrun -n "$n" --timeout 120 $d/bin/symcomm-bench decomp --sizes 64,128,256 --dtypes c32 --grids 1x$n --ops yz --backends nccl,sm,fused --no-autotune --graph --json "$OUT/p.jsonl" --machine "h200x$n" > /dev/null 2>&1
    echo "decomp $v $round rc=$?"
    tag_records "$OUT/p.jsonl" setting "$v round $round"
    rm -f "$OUT/p.jsonl"
    SYMCOMM_BENCH_COMMIT=${SYMCOMM_BENCH_COMMIT:-unknown} $d/bin/symrun -n "$n" --timeout 120 $d/bin/symcomm-bench rma --max-bytes 8 --json "$OUT/p.jsonl" --machine "h200x$n" > /dev/null 2>&1
    echo "rma $v $round rc=$?"
    tag_records "$OUT/p.jsonl" setting "$v round $round"
  done
done
python3 - "$OUT/sweep.jsonl" <<'PY'
import json, sys, collections
t = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get('op') in ('pingpong', 'barrier') or r.get('bench') == 'decomp':
        t[(r.get('op'), r.get('shape', ''), r['impl'], r['setting'].split()[0])].append(r['time_us'])
for k in sorted(t): print(*k, t[k])
PY
