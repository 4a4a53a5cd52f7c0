# Sourced by the sweep probes (relay_sweep.sh, decomp_sweep.sh) on a GPU machine: the
# environment every run there keeps (no NVLink multicast), the repository root as the
# working directory, $OUT, a Release build in build-gpu ($B: its binaries), and
# tag_records FILE FIELD VALUE, which appends FILE's records to $OUT/sweep.jsonl with
# "FIELD": VALUE added to each.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PATH="$PATH:/usr/local/cuda/bin"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
BUILD_DIR=build-gpu BUILD_TYPE=Release scripts/build.sh > "$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; exit 1; }
B=build-gpu/bin
tag_records() {
  [ -f "$1" ] || return 0
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line); r[sys.argv[2]] = sys.argv[3]; print(json.dumps(r))' "$@" \
    >> "$OUT/sweep.jsonl"
}
