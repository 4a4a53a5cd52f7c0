#!/usr/bin/env bash
# Probe (on a GPU machine, from the repository root): the random-sequence tests (RmaMix,
# DeviceMix, DecompMix, CollMix) on 2 to all of this machine's GPUs, then RmaMix and
# DeviceMix under compute-sanitizer memcheck and racecheck on 2 ranks. Logs go to $OUT.
#   [RANKS="2 4"] [RMA_REPEAT=6] [DEV_REPEAT=6] [DECOMP_REPEAT=4] [COLL_REPEAT=2]
#   [SANITIZERS="memcheck racecheck" (empty: none)] tools/probe/mix_tests.sh
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PATH="$PATH:/usr/local/cuda/bin" SYMCOMM_TEST_SPACE=cuda SYMCOMM_BOOTSTRAP_ADDR=127.0.0.1
OUT=${OUT:-out}; mkdir -p "$OUT"; L=$OUT/mix.log; : > "$L"
t0=$SECONDS
BUILD_DIR=build-gpu BUILD_TYPE=Release scripts/build.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $((SECONDS - t0)) s"
B=build-gpu/bin
ngpu=$(nvidia-smi -L | wc -l)
one() {  # name ranks binary args...
  local name=$1 n=$2 bin=$3; shift 3; local t=$SECONDS
  timeout 200 $B/symrun -n "$n" --timeout 190 $B/$bin "$@" >> "$L" 2>&1; local rc=$?
  echo "$name n=$n: rc=$rc $((SECONDS - t)) s $(grep -cE '^\[0\] \[       OK \]' "$L") ok-so-far, $(grep -cE '^\[0\] \[  FAILED  \] [A-Z].*\(' "$L") failed-so-far"
}
for n in ${RANKS:-$(seq 2 "$ngpu")}; do
  one RmaMix "$n" mp_rma --gtest_filter='RmaMix.*' --gtest_repeat=${RMA_REPEAT:-6}
  one DeviceMix "$n" mp_device --gtest_filter='DeviceMix.*' --gtest_repeat=${DEV_REPEAT:-6}
  one DecompMix "$n" mp_decomp --gtest_filter='DecompMix.*' --gtest_repeat=${DECOMP_REPEAT:-4}
done
one CollMix "$ngpu" mp_coll --gtest_filter='CollMix.*' --gtest_repeat=${COLL_REPEAT:-2}
for tool in ${SANITIZERS-memcheck racecheck}; do
  for t in "mp_rma RmaMix" "mp_device DeviceMix"; do
    set -- $t; tt=$SECONDS
    SYMCOMM_WAIT_TIMEOUT=120 timeout 240 compute-sanitizer --tool $tool --target-processes all \
      $B/symrun -n 2 --timeout 230 $B/$1 --gtest_filter="$2.*" > "$OUT/${tool}_$2.log" 2>&1
    echo "$tool $2 n=2: rc=$? $((SECONDS - tt)) s"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED|Failure" "$OUT/${tool}_$2.log" | sort | uniq -c | head
  done
done
grep -E "Failure|wrong bytes|SEED" "$L" | head -20
