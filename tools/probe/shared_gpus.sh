#!/usr/bin/env bash
# Probe (on a GPU machine, from the repository root): the multi-process GPU tests with more
# ranks than GPUs (8 ranks on 4 H200: two per GPU), under MPS so that the two processes on a
# GPU run their kernels side by side (without MPS a kernel that waits for the other process
# holds the GPU from it). Each process gets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE of the GPU (by
# default its share: 50 for two ranks per GPU, 25 for four), so that the resident grids of
# all the ranks on a GPU fit at once (kernels that wait for each other stall otherwise: with
# 8 ranks on 2 H200 at 50% each, the all-to-all-v with counts on the device timed out). It
# shows that the 8-rank paths (plans, lanes, grids of 2 x 4 and 1 x 8) run correctly on
# GPUs; its times mean nothing.
# On a machine of one GPU, `tools/probe/shared_gpus.sh 2` runs the 2-rank suites (and, with
# SYMRUN_ARGS="--nodes 2", the 2-node ones) there.
# NCCL refuses two ranks on one GPU, so nccl algorithms and backends are filtered out.
#   [SUITES="coll decomp"] tools/probe/shared_gpus.sh [RANKS]     RANKS: 8 by default
# GTEST_FILTER narrows the suites that name no filter of their own; COLL_FILTER the coll one.
# The MPS control daemon runs with private pipe and log directories and is stopped on exit;
# nothing else on the machine changes (no compute mode, clocks or MIG).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PATH="$PATH:/usr/local/cuda/bin"
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
n=${1:-8}
BUILD_DIR=build-gpu BUILD_TYPE=Release scripts/build.sh > "$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; exit 1; }
B=build-gpu/bin
nvidia-smi --query-gpu=index,compute_mode --format=csv

T=$(mktemp -d) L=$OUT/logs; mkdir -p "$L"
export CUDA_MPS_PIPE_DIRECTORY=$T/pipe CUDA_MPS_LOG_DIRECTORY=$T/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d || { echo "cannot start MPS"; exit 1; }
trap 'echo quit | nvidia-cuda-mps-control; sleep 1; cp -r "$CUDA_MPS_LOG_DIRECTORY" "$L/mps"
      tar -C "$L" -czf "$OUT/logs.tgz" . && rm -rf "$L"' EXIT
ngpu=$(nvidia-smi -L | wc -l)
per_gpu=$(( (n + ngpu - 1) / ngpu ))
export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-$((100 / per_gpu))}

cat > "$T/sms.cu" <<'EOF'
#include <cstdio>
#include <cuda_runtime.h>
int main() {
  int sms = 0;
  cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  std::printf("MPS client, %s%% of threads: SMs reported %d (%s)\n",
              getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), sms, cudaGetErrorString(e));
  return e != cudaSuccess;
}
EOF
nvcc -arch=sm_90 -o "$T/sms" "$T/sms.cu" && "$T/sms"

export SYMCOMM_TEST_SPACE=cuda SYMCOMM_TEST_SHARED_GPUS=1 SYMCOMM_BOOTSTRAP_ADDR=127.0.0.1
# The benches' records name the commit (scripts/gpu-check's .commit, where it was carried).
export SYMCOMM_BENCH_COMMIT=${SYMCOMM_BENCH_COMMIT:-$(cat .commit 2>/dev/null || echo unknown)}
failed=0
# SYMRUN_ARGS: more symrun options, e.g. "--nodes 2" (ranks as nodes: the net transport,
# with SYMCOMM_NET_PROVIDER=tcp SYMCOMM_NET_DOMAIN=lo in the environment). A suite still
# running after SUITE_LIMIT seconds (default 240) has its processes' stacks written to its
# log's folder (where scripts/gdb-kit's .gdbkit.tar.xz was carried), then is stopped.
limit=${SUITE_LIMIT:-240}
run() {  # name binary [args...]: a binary of the build, or a path (python3's)
  local name=$1 bin=$2; shift 2
  case $bin in /*) ;; *) bin=$B/$bin ;; esac
  local t0=$SECONDS
  # shellcheck disable=SC2086  # SYMRUN_ARGS is a list of options
  $B/symrun -n "$n" ${SYMRUN_ARGS:-} --timeout $((limit + 60)) "$bin" "$@" > "$L/$name.log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt "$limit" ]; do sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    [ -f .gdbkit.tar.xz ] && scripts/stacks "$bin" > "$L/stacks_$name.txt" 2>&1
    pkill -9 -f "$bin"; pkill -9 -f "$B/symrun"
  fi
  wait "$pid"
  local rc=$?
  [ "$rc" = 0 ] || failed=1
  echo "$name: rc=$rc, $((SECONDS - t0)) s; $(grep -E '^\[0\] \[  (PASSED|FAILED|SKIPPED) +\] [0-9]' "$L/$name.log" | tr '\n' ' ')"
  grep -E "^\[0\] \[  FAILED  \] [A-Za-z]" "$L/$name.log" | head -20
  case $name in py*) tail -5 "$L/$name.log" ;; esac
}
suite() {  # the suites by name: SUITES="coll decomp" runs those only
  case $1 in
    init|heap|rma|device|register|coll_check|decomp_autotune) run "$1" "mp_$1" ;;
    coll) run coll mp_coll --gtest_filter="${COLL_FILTER:--CollLarge.*}" ;;
    coll_large) run coll_large mp_coll --gtest_filter='CollLarge.*' ;;
    send_recv) run send_recv mp_coll --gtest_filter='SendRecv.*' ;;
    coll_mix) run coll_mix mp_coll --gtest_filter='CollMix.*' --gtest_repeat=3 ;;
    decomp_mix) run decomp_mix mp_decomp --gtest_filter='DecompMix.*' --gtest_repeat=3 ;;
    rma_mix) run rma_mix mp_rma --gtest_filter='RmaMix.*' --gtest_repeat=3 ;;
    device_mix) run device_mix mp_device --gtest_filter='DeviceMix.*' --gtest_repeat=3 ;;
    decomp) run decomp mp_decomp --gtest_filter='-*/nccl*' ;;  # NCCL refuses shared GPUs
    # The fused layer by each implementation (its GEMM cases skip where it has none).
    fused) for impl in ${FUSED_IMPLS:-fused pipelined sequential}; do
             SYMCOMM_TEST_FUSED_IMPL=$impl run "fused_$impl" mp_fused
           done ;;
    # A rank dies during a fused operation (3 ranks: `shared_gpus.sh 3` with
    # SYMRUN_ARGS=--keep-going), by each of FAULT_IMPLS (mp_fault's dies-during-fused).
    fault_fused) for impl in ${FAULT_IMPLS:-fused fused:transpose}; do
                   SYMCOMM_BOOTSTRAP_TIMEOUT=8 SYMCOMM_PEER_TIMEOUT=5 \
                     run "fault_fused_${impl//:/_}" mp_fault dies-during-fused "$impl"
                 done ;;
    # One cuBLASLt GEMM checked row by row, in each rank (tools/probe/cublaslt_rows.cu; M N K
    # from CUBLASLT_SHAPE, default 6144 128 4096).
    cublaslt_rows) nvcc -O2 -arch=sm_90 -o "$T/cublaslt_rows" tools/probe/cublaslt_rows.cu -lcublasLt \
                     && run cublaslt_rows "$T/cublaslt_rows" ${CUBLASLT_SHAPE:-} ;;
    # FUSED_JSON / COLL_JSON: where the bench writes its records (JSON Lines); FUSED_EXTRA:
    # more options (--llm).
    fused_bench) run fused_bench symcomm-bench fused --fused-ops "${FUSED_OPS:-transpose}" \
                   --shapes "${FUSED_SHAPES:-1024,4096,8192}" ${FUSED_EXTRA:-} \
                   ${FUSED_JSON:+--json "$FUSED_JSON"} ;;
    # Reduce, gather and scatter (or COLL_OPS) by each algorithm that does them (NCCL refuses
    # shared GPUs), COLL_MIN to COLL_MAX bytes, COLL_EXTRA more options (--plain); every
    # result checked.
    coll_rooted) run coll_rooted symcomm-bench coll --ops "${COLL_OPS:-reduce,gather,scatter}" \
                   --impls "${COLL_IMPLS:-auto,sm,copy}" --min-bytes "${COLL_MIN:-8}" \
                   --max-bytes "${COLL_MAX:-64M}" --step 8 --root 1 \
                   ${COLL_EXTRA:-} ${COLL_JSON:+--json "$COLL_JSON"} ;;
    # The Python module's cuda-space tests (tests/python/test_cuda.py), where it was built.
    # PY_PATH: the package to test (default the build's); PYTEST_K: pytest's -k.
    py) SYMCOMM_MEMORY_SPACE=cuda PYTHONPATH=${PY_PATH:-build-gpu/python} run py "$(command -v python3)" \
          -m pytest -q -p no:cacheprovider ${PYTEST_K:+-k "$PYTEST_K"} tests/python/test_cuda.py ;;
    py_torch) SYMCOMM_MEMORY_SPACE=cuda SYMCOMM_TEST_TORCH_DEVICE=cuda PYTHONPATH=${PY_PATH:-build-gpu/python} \
          run py_torch "$(command -v python3)" -m pytest -q -p no:cacheprovider ${PYTEST_K:+-k "$PYTEST_K"} \
          tests/python/test_torch.py tests/python/test_torch_ops.py tests/python/test_torch_fused.py ;;
    # `symcomm-bench net` in the cuda space (2 ranks as 2 nodes: SYMRUN_ARGS="--nodes 2" with
    # the provider in the environment) against raw libfabric; NCCL, which refuses a shared
    # GPU, is not loaded. NET_JSON: where it writes its records; NET_ARGS: more options.
    net_bench) SYMCOMM_MEMORY_SPACE=cuda SYMCOMM_NCCL_LIBRARY=none run net_bench symcomm-bench net \
                 ${NET_JSON:+--json "$NET_JSON"} ${NET_ARGS:-} ;;
    # Every operation by every algorithm and the automatic choice, 8 B to 256 MiB, on
    # symmetric and on plain buffers, every result checked (the bench exits 1 on a wrong one).
    coll_bench)
      for kind in symmetric plain; do
        run "coll_bench_$kind" symcomm-bench coll --impls auto,sm,ll,copy,direct,twoshot,relay,ce \
          --min-bytes 8 --max-bytes 256M --step 8 --point-ms 10 --warmup 1 --iters 3 --root 5 \
          $([ $kind = plain ] && echo --plain)
      done ;;
    *) echo "unknown suite $1"; failed=1 ;;
  esac
}
for s in ${SUITES:-init heap rma device coll coll_large register coll_check decomp decomp_autotune}; do
  suite "$s"
done
exit "$failed"  # 1 where a suite failed
