// symcomm-bench fused: all-gather + GEMM and GEMM + reduce-scatter (bfloat16 in and out, fp32
// accumulation) against the floor and the baseline in the same run:
//   gemm:cublaslt   the GEMM alone, on the whole shape (all-gather + GEMM: [M, K] x [K, N];
//                   GEMM + reduce-scatter: this rank's [M, K/p] x [K/p, N]): the floor
//   nccl+cublaslt   ncclAllGather then the GEMM; the GEMM then ncclReduceScatter
//   symcomm:allgather, symcomm:reducescatter_f32   the communication alone (symcomm's
//                   collective on the gathered A, or on the fp32 partial product)
//   symcomm:NAME    symcommFusedRun of a plan of every fused implementation that can run here
// Each symcomm line is checked against the NCCL line's result (relative to the largest
// magnitude, within bfloat16's rounding of the sums). Records: bench "fused", op ag_gemm or
// gemm_rs, shape "MxNxK", TFLOP/s of the whole problem (2 M N K over the time), and the ratio
// to the GEMM alone.
// Transpose + accumulate of an N x N bfloat16 matrix (op transpose, shape "NxN"): the baseline
// alltoall+transpose (symcomm's all-to-all of the blocks, then a tiled kernel), and every
// fused implementation, checked against it; GB/s of the matrix, the speedup over the baseline.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "bench.h"
#include "symcomm/fused.h"

namespace bench {

const char* const kFusedUsage =
    "  --shapes LIST     M=N=K of cubes (default 1024,2048,4096,8192,16384)\n"
    "  --llm             also M=K=8192 with N 1024, 3584, 28672\n"
    "  --fused-ops LIST  ag_gemm, gemm_rs, transpose (default all three; the transpose's\n"
    "                    N is each --shapes value)\n";

bool fused_option(Options& opt, int argc, char** argv, int& i) {
  auto value = [&]() -> const char* {
    if (i + 1 >= argc) die("arguments", "an option needs a value", __FILE__, __LINE__);
    return argv[++i];
  };
  if (!std::strcmp(argv[i], "--shapes")) {
    opt.fused.cubes.clear();
    for (const std::string& s : split_list(value())) {
      const long long n = std::atoll(s.c_str());
      if (n < 64) {
        std::fprintf(stderr, "symcomm-bench fused: --shapes %s: each at least 64\n", s.c_str());
        std::exit(2);
      }
      opt.fused.cubes.push_back(n);
    }
    return true;
  }
  if (!std::strcmp(argv[i], "--llm")) return opt.fused.llm = true;
  if (!std::strcmp(argv[i], "--fused-ops")) {
    opt.fused.ops = split_list(value());
    for (const std::string& o : opt.fused.ops)
      if (o != "ag_gemm" && o != "gemm_rs" && o != "transpose") {
        std::fprintf(stderr,
                     "symcomm-bench fused: --fused-ops %s: ag_gemm, gemm_rs or transpose\n",
                     o.c_str());
        std::exit(2);
      }
    return true;
  }
  return false;
}

namespace {

#define BENCH_LT(call)                                                                 \
  do {                                                                                 \
    cublasStatus_t s_ = (call);                                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                   \
      die(#call, "cuBLAS status not success", __FILE__, __LINE__);                     \
  } while (0)

// x in [-1, 1) from an index: the same data wherever it is made.
__global__ void fill_kernel(__nv_bfloat16* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    p[i] = __float2bfloat16(static_cast<float>(x >> 40) / static_cast<float>(1ull << 23) - 1.0f);
  }
}

void fill(__nv_bfloat16* p, size_t n, uint64_t seed, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(p, n, seed);
  BENCH_CUDA(cudaGetLastError());
}

// Row-major c [m, n] = a [m, k] x b [k, n], bfloat16, fp32 accumulation (as C^T = B^T A^T in
// cuBLASLt's column-major terms), on stream s.
class Gemm {
 public:
  Gemm() { BENCH_LT(cublasLtCreate(&h_)); }
  ~Gemm() { cublasLtDestroy(h_); }
  void run(int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c,
           cudaStream_t s) {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    BENCH_LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    BENCH_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, k, n));
    BENCH_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, m, k));
    BENCH_LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, m, n));
    cublasLtMatmulPreference_t pref;
    BENCH_LT(cublasLtMatmulPreferenceCreate(&pref));
    const size_t none = 0;
    BENCH_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &none, sizeof none));
    cublasLtMatmulHeuristicResult_t best{};
    int found = 0;
    BENCH_LT(cublasLtMatmulAlgoGetHeuristic(h_, op, la, lb, lc, lc, pref, 1, &best, &found));
    if (!found) die("cublasLtMatmulAlgoGetHeuristic", "no algorithm", __FILE__, __LINE__);
    const float alpha = 1, beta = 0;
    BENCH_LT(cublasLtMatmul(h_, op, &alpha, b, la, a, lb, &beta, c, lc, c, lc, &best.algo,
                            nullptr, 0, s));
    cublasLtMatmulPreferenceDestroy(pref);
    for (cublasLtMatrixLayout_t l : {la, lb, lc}) cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(op);
  }

 private:
  cublasLtHandle_t h_ = nullptr;
};

// The largest difference between two bfloat16 arrays on the GPU, over the largest magnitude
// (every 97th element beyond 16M elements, so that the largest shapes stay quick).
double relative_difference(const void* x, const void* y, size_t n) {
  const size_t step = n > (size_t{1} << 24) ? 97 : 1;
  std::vector<__nv_bfloat16> a(n), b(n);
  BENCH_CUDA(cudaMemcpy(a.data(), x, n * 2, cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaMemcpy(b.data(), y, n * 2, cudaMemcpyDeviceToHost));
  double most = 0, diff = 0;
  for (size_t i = 0; i < n; i += step) {
    const double u = __bfloat162float(a[i]), v = __bfloat162float(b[i]);
    most = std::max(most, std::fabs(v));
    diff = std::max(diff, std::fabs(u - v));
  }
  return most > 0 ? diff / most : diff;
}

struct Shape {
  int64_t m, n, k;
};

void report(const Context& ctx, const char* op, const std::string& impl, const Shape& sh,
            double us, double floor_us, int verified) {
  Record r;
  r.bench = "fused";
  r.op = op;
  r.impl = impl;
  r.dtype = "bf16";
  r.shape = std::to_string(sh.m) + "x" + std::to_string(sh.n) + "x" + std::to_string(sh.k);
  r.bytes = static_cast<size_t>(sh.m * sh.n) * 2;
  r.ranks = ctx.nranks;
  r.time_us = us;
  if (sh.k > 0) {
    r.tflops = 2.0 * static_cast<double>(sh.m) * static_cast<double>(sh.n) *
               static_cast<double>(sh.k) / (us * 1e6);
  } else {  // the transpose: the whole N x N matrix of bfloat16 moved and added, per second
    r.shape = std::to_string(sh.m) + "x" + std::to_string(sh.n);
    r.algbw_gbs = static_cast<double>(r.bytes) / (us * 1e3);
  }
  r.iters = ctx.opt.iters;
  r.warmup = ctx.opt.warmup;
  if (floor_us > 0 && sh.k > 0)
    r.extra.emplace_back("ratio_to_gemm_alone", std::to_string(us / floor_us));
  if (floor_us > 0 && sh.k == 0)  // above 1: faster than the baseline
    r.extra.emplace_back("speedup_vs_alltoall_then_transpose", std::to_string(floor_us / us));
  if (verified >= 0) r.extra.emplace_back("verified", verified ? "true" : "false");
  if (ctx.rank == 0 && sh.k > 0)
    std::printf("%-8s %-22s %-18s %10.1f us %8.1f TFLOP/s%s\n", op, impl.c_str(),
                r.shape.c_str(), us, r.tflops,
                floor_us > 0 ? (" " + std::to_string(us / floor_us).substr(0, 5) + "x GEMM")
                                   .c_str() : "");
  if (ctx.rank == 0 && sh.k == 0)
    std::printf("%-9s %-22s %-12s %10.1f us %8.1f GB/s%s\n", op, impl.c_str(),
                r.shape.c_str(), us, r.algbw_gbs,
                floor_us > 0 ? (" " + std::to_string(floor_us / us).substr(0, 5) +
                                "x all-to-all then transpose").c_str() : "");
  write_json(ctx, r);
}

// A plan of `cfg` (its implementation named) with its workspace, made where every rank can
// implement it (they agree first: the create is collective); else says why (as `op`'s line)
// and returns false.
struct BenchPlan {
  symcommFusedPlan_t plan = nullptr;
  void* ws = nullptr;
};
bool make_plan(Context& ctx, const symcommFusedConfig_t& cfg, const char* op, BenchPlan* out) {
  char why[512];
  int can = symcommFusedCanImplement(ctx.comm, SYMCOMM_TEAM_WORLD, &cfg, why, sizeof why) ==
            symcommSuccess;
  std::vector<int> all(static_cast<size_t>(ctx.nranks));
  BENCH_SC(symcommHostAllgather(ctx.comm, &can, all.data(), sizeof can));
  if (std::count(all.begin(), all.end(), 1) != ctx.nranks) {
    if (ctx.rank == 0)
      std::printf("%-8s symcomm:%-14s cannot run: %s\n", op, cfg.implementation,
                  can ? "not on every rank" : why);
    return false;
  }
  BENCH_SC(symcommFusedPlanCreate(ctx.comm, SYMCOMM_TEAM_WORLD, &cfg, &out->plan));
  size_t ws_bytes = 0;
  BENCH_SC(symcommFusedWorkspaceSize(out->plan, &ws_bytes));
  if (ws_bytes) BENCH_SC(symcommMalloc(ctx.comm, ws_bytes, &out->ws));
  return true;
}
// Collective: after the stream's work, on every rank.
void destroy_plan(Context& ctx, BenchPlan& b) {
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  BENCH_SC(symcommHostBarrier(ctx.comm));
  if (b.ws) BENCH_SC(symcommFree(ctx.comm, b.ws));
  BENCH_SC(symcommFusedPlanDestroy(b.plan));
}

// One shape of one operation: the floor, NCCL's baseline, every symcomm implementation.
void run_shape(Context& ctx, Gemm& gemm, const char* op, const Shape& sh) {
  const bool ag = !std::strcmp(op, "ag_gemm");
  const int p = ctx.nranks;
  if (sh.m % p || sh.k % p) return;  // even shards only here
  const int64_t mr = sh.m / p, kr = sh.k / p;
  cudaStream_t s = ctx.stream;
  // Buffers: A (the shard), B, C (ours and NCCL's), the gathered A or the partial product.
  const size_t a_elems = static_cast<size_t>(ag ? mr * sh.k : sh.m * kr);
  const size_t b_elems = static_cast<size_t>(ag ? sh.k * sh.n : kr * sh.n);
  const size_t c_elems = static_cast<size_t>(ag ? sh.m * sh.n : mr * sh.n);
  const size_t full_elems = static_cast<size_t>(ag ? sh.m * sh.k : sh.m * sh.n);
  void *a, *b, *c, *c_nccl, *full;
  BENCH_CUDA(cudaMalloc(&b, b_elems * 2));
  BENCH_CUDA(cudaMalloc(&c, c_elems * 2));
  BENCH_CUDA(cudaMalloc(&c_nccl, c_elems * 2));
  BENCH_CUDA(cudaMalloc(&full, full_elems * 2));
  BENCH_SC(symcommMalloc(ctx.comm, a_elems * 2, &a));  // symmetric: NCCL and symcomm alike
  fill(static_cast<__nv_bfloat16*>(a), a_elems, 11 + ctx.rank, s);
  fill(static_cast<__nv_bfloat16*>(b), b_elems, ag ? 7 : 7 + ctx.rank, s);
  fill(static_cast<__nv_bfloat16*>(full), full_elems, 5, s);
  BENCH_CUDA(cudaStreamSynchronize(s));
  const int w = ctx.opt.warmup, it = ctx.opt.iters;
  // The floor.
  const double floor_us = max_over_ranks(ctx, time_stream_us(s, w, it, 1, [&] {
    if (ag) gemm.run(sh.m, sh.n, sh.k, full, b, c_nccl, s);
    else gemm.run(sh.m, sh.n, kr, a, b, full, s);
  }));
  report(ctx, op, "gemm:cublaslt", sh, floor_us, floor_us, -1);
  // NCCL's baseline (its result is the reference of the symcomm lines); where NCCL cannot
  // run (GPUs shared by ranks), symcomm's collective in its place.
  const char* baseline = ctx.nccl ? "nccl+cublaslt" : "symcomm+cublaslt";
  auto nccl = [&] {
    if (ag) {
      if (ctx.nccl) BENCH_NCCL(ncclAllGather(a, full, a_elems, ncclBfloat16, ctx.nccl, s));
      else
        BENCH_SC(symcommAllGatherOnStream(ctx.comm, SYMCOMM_TEAM_WORLD, a, full, a_elems,
                                          symcommBfloat16, nullptr, s));
      gemm.run(sh.m, sh.n, sh.k, full, b, c_nccl, s);
    } else {
      gemm.run(sh.m, sh.n, kr, a, b, full, s);
      if (ctx.nccl)
        BENCH_NCCL(ncclReduceScatter(full, c_nccl, c_elems, ncclBfloat16, ncclSum, ctx.nccl, s));
      else
        BENCH_SC(symcommReduceScatterOnStream(ctx.comm, SYMCOMM_TEAM_WORLD, full, c_nccl,
                                              c_elems, symcommBfloat16, symcommSum, nullptr, s));
    }
  };
  const double nccl_us = max_over_ranks(ctx, time_stream_us(s, w, it, 1, nccl));
  report(ctx, op, baseline, sh, nccl_us, floor_us, -1);
  // symcomm's collective alone (the algorithm it chooses), on the data the fused operation
  // moves: the gathered A (bfloat16), or the reduce-scatter of the fp32 partial product. With
  // the GEMM alone, the floor of an operation that overlaps both.
  {
    const size_t send_bytes = ag ? a_elems * 2 : full_elems * 4;
    const size_t recv_bytes = ag ? full_elems * 2 : c_elems * 4;
    void *send = nullptr, *recv = nullptr;
    BENCH_SC(symcommMalloc(ctx.comm, send_bytes, &send));
    BENCH_SC(symcommMalloc(ctx.comm, recv_bytes, &recv));
    BENCH_CUDA(cudaMemsetAsync(send, 0, send_bytes, s));
    const double comm_us = max_over_ranks(ctx, time_stream_us(s, w, it, 1, [&] {
      if (ag)
        BENCH_SC(symcommAllGatherOnStream(ctx.comm, SYMCOMM_TEAM_WORLD, send, recv, a_elems,
                                          symcommBfloat16, nullptr, s));
      else
        BENCH_SC(symcommReduceScatterOnStream(ctx.comm, SYMCOMM_TEAM_WORLD, send, recv, c_elems,
                                              symcommFloat32, symcommSum, nullptr, s));
    }));
    report(ctx, op, ag ? "symcomm:allgather" : "symcomm:reducescatter_f32", sh, comm_us,
           floor_us, -1);
    BENCH_CUDA(cudaStreamSynchronize(s));
    BENCH_SC(symcommHostBarrier(ctx.comm));
    BENCH_SC(symcommFree(ctx.comm, recv));
    BENCH_SC(symcommFree(ctx.comm, send));
  }
  // symcomm's implementations.
  symcommFusedConfig_t cfg;
  BENCH_SC(symcommFusedConfigInit(&cfg));
  cfg.op = ag ? symcommFusedAllGatherGemm : symcommFusedGemmReduceScatter;
  cfg.n = sh.n;
  cfg.k = sh.k;
  for (int r = 0; r < p; ++r) {
    cfg.rows[r] = mr;
    if (!ag) cfg.cols[r] = kr;
  }
  for (int i = 0; i < symcommFusedImplementationCount(); ++i) {
    std::snprintf(cfg.implementation, sizeof cfg.implementation, "%s",
                  symcommFusedImplementationName(i));
    BenchPlan bp;
    if (!make_plan(ctx, cfg, op, &bp)) continue;
    symcommFusedPlan_t plan = bp.plan;
    void* ws = bp.ws;
    BENCH_CUDA(cudaMemsetAsync(c, 0xff, c_elems * 2, s));
    nccl();
    BENCH_SC(symcommFusedRun(plan, a, b, c, nullptr, ws, s));
    BENCH_CUDA(cudaStreamSynchronize(s));
    // GEMM+RS: NCCL sums bfloat16 partials, symcomm fp32 ones: a few bfloat16 roundings apart.
    const double diff = relative_difference(c, c_nccl, c_elems);
    const int ok = diff <= (ag ? 1e-2 : 3e-2);
    const double us = max_over_ranks(ctx, time_stream_us(s, w, it, 1, [&] {
      BENCH_SC(symcommFusedRun(plan, a, b, c, nullptr, ws, s));
    }));
    report(ctx, op, std::string("symcomm:") + cfg.implementation, sh, us, floor_us, ok);
    if (!ok && ctx.rank == 0)
      std::printf("  differs from %s by %.3g of the largest magnitude\n", baseline, diff);
    destroy_plan(ctx, bp);
  }
  BENCH_SC(symcommHostBarrier(ctx.comm));
  BENCH_SC(symcommFree(ctx.comm, a));
  for (void* q : {b, c, c_nccl, full}) BENCH_CUDA(cudaFree(q));
}

// out [N, w] (this rank's block, N = p w) += the transpose of what every rank holds for it:
// recv's block t, [w, w], is rank t's X rows of this block (its columns t w .. t w + w), so
// out[t w + i][j] += block_t[j][i]. 32 x 32 tiles through shared memory: reads and writes
// coalesced, as a tuned baseline's would be.
__global__ void transpose_accumulate_tiles(const __nv_bfloat16* recv, int64_t w, int p,
                                           __nv_bfloat16* out) {
  __shared__ float tile[32][33];
  const int64_t tiles = (w + 31) / 32;
  for (int64_t b = blockIdx.x; b < static_cast<int64_t>(p) * tiles * tiles; b += gridDim.x) {
    const int64_t t = b / (tiles * tiles), ti = (b / tiles) % tiles, tj = b % tiles;
    const __nv_bfloat16* block = recv + t * w * w;
    // Read block rows tj*32.., columns ti*32.. (coalesced along the columns).
    for (int r = threadIdx.y; r < 32; r += blockDim.y) {
      const int64_t row = tj * 32 + r, col = ti * 32 + threadIdx.x;
      tile[r][threadIdx.x] = row < w && col < w ? __bfloat162float(block[row * w + col]) : 0.f;
    }
    __syncthreads();
    // out row t w + (ti*32 + r), column tj*32 + x: block[tj*32 + x][ti*32 + r].
    for (int r = threadIdx.y; r < 32; r += blockDim.y) {
      const int64_t i = ti * 32 + r, j = tj * 32 + threadIdx.x;
      if (i < w && j < w) {
        __nv_bfloat16* o = out + (t * w + i) * w + j;
        *o = __float2bfloat16(__bfloat162float(*o) + tile[threadIdx.x][r]);
      }
    }
    __syncthreads();
  }
}

// Transpose + accumulate of an N x N bfloat16 matrix held by column blocks (fused.h): the
// baseline is symcomm's all-to-all of the blocks then the tiled kernel above; every fused
// implementation that can run is checked against it (the same initial out) and timed.
void run_transpose(Context& ctx, int64_t n) {
  const int p = ctx.nranks;
  if (n % p) return;
  const int64_t w = n / p;
  const size_t elems = static_cast<size_t>(n * w);  // X_r, out_r, the received blocks
  cudaStream_t s = ctx.stream;
  void *x, *recv, *out, *ref, *init;
  BENCH_SC(symcommMalloc(ctx.comm, elems * 2, &x));
  BENCH_SC(symcommMalloc(ctx.comm, elems * 2, &recv));
  BENCH_CUDA(cudaMalloc(&out, elems * 2));
  BENCH_CUDA(cudaMalloc(&ref, elems * 2));
  BENCH_CUDA(cudaMalloc(&init, elems * 2));
  fill(static_cast<__nv_bfloat16*>(x), elems, 31 + ctx.rank, s);
  fill(static_cast<__nv_bfloat16*>(init), elems, 41 + ctx.rank, s);
  const Shape sh{n, n, 0};
  const int wu = ctx.opt.warmup, it = ctx.opt.iters;
  auto baseline = [&](void* into) {
    BENCH_SC(symcommAllToAllOnStream(ctx.comm, SYMCOMM_TEAM_WORLD, x, recv,
                                     static_cast<size_t>(w * w), symcommBfloat16, nullptr, s));
    transpose_accumulate_tiles<<<1024, dim3(32, 8), 0, s>>>(
        static_cast<const __nv_bfloat16*>(recv), w, p, static_cast<__nv_bfloat16*>(into));
    BENCH_CUDA(cudaGetLastError());
  };
  BENCH_CUDA(cudaMemcpyAsync(ref, init, elems * 2, cudaMemcpyDeviceToDevice, s));
  baseline(ref);  // the reference result
  const double base_us = max_over_ranks(ctx, time_stream_us(s, wu, it, 1, [&] { baseline(out); }));
  report(ctx, "transpose", "alltoall+transpose", sh, base_us, base_us, -1);
  symcommFusedConfig_t cfg;
  BENCH_SC(symcommFusedConfigInit(&cfg));
  cfg.op = symcommFusedTransposeAccumulate;
  cfg.n = n;
  for (int r = 0; r < p; ++r) cfg.cols[r] = w;
  cfg.a_type = cfg.b_type = cfg.c_type = symcommBfloat16;
  for (int i = 0; i < symcommFusedImplementationCount(); ++i) {
    std::snprintf(cfg.implementation, sizeof cfg.implementation, "%s",
                  symcommFusedImplementationName(i));
    BenchPlan bp;
    if (!make_plan(ctx, cfg, "transpose", &bp)) continue;
    symcommFusedPlan_t plan = bp.plan;
    void* ws = bp.ws;
    BENCH_CUDA(cudaMemcpyAsync(out, init, elems * 2, cudaMemcpyDeviceToDevice, s));
    BENCH_SC(symcommFusedRun(plan, x, nullptr, out, nullptr, ws, s));
    BENCH_CUDA(cudaStreamSynchronize(s));
    const double diff = relative_difference(out, ref, elems);
    const int ok = diff <= 1e-2;  // one bfloat16 rounding of each sum
    const double us = max_over_ranks(ctx, time_stream_us(s, wu, it, 1, [&] {
      BENCH_SC(symcommFusedRun(plan, x, nullptr, out, nullptr, ws, s));
    }));
    report(ctx, "transpose", std::string("symcomm:") + cfg.implementation, sh, us, base_us, ok);
    if (!ok && ctx.rank == 0)
      std::printf("  differs from alltoall+transpose by %.3g of the largest magnitude\n", diff);
    destroy_plan(ctx, bp);
  }
  BENCH_CUDA(cudaStreamSynchronize(s));
  BENCH_SC(symcommHostBarrier(ctx.comm));
  BENCH_SC(symcommFree(ctx.comm, recv));
  BENCH_SC(symcommFree(ctx.comm, x));
  for (void* q : {out, ref, init}) BENCH_CUDA(cudaFree(q));
}

}  // namespace

// NCCL's communicator for the GEMMs' baseline, or nullptr (saying why, once) where NCCL
// refuses on some rank: it refuses two ranks on one GPU, which symcomm serves under MPS.
static ncclComm_t try_nccl(Context& ctx, bool* refused) {
  ncclUniqueId id{};
  ncclResult_t r = ctx.rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
  BENCH_SC(symcommHostBroadcast(ctx.comm, &id, sizeof id, 0));
  ncclComm_t nccl = nullptr;
  if (r == ncclSuccess) r = ncclCommInitRank(&nccl, ctx.nranks, id, ctx.rank);
  int ok = r == ncclSuccess;
  std::vector<int> all(static_cast<size_t>(ctx.nranks));
  BENCH_SC(symcommHostAllgather(ctx.comm, &ok, all.data(), sizeof ok));
  if (std::count(all.begin(), all.end(), 1) == ctx.nranks) return nccl;
  if (nccl) ncclCommDestroy(nccl);
  if (ctx.rank == 0)
    std::printf("NCCL refused (%s on rank 0): its baseline rows are symcomm's collectives "
                "with cuBLASLt\n", ncclGetErrorString(r));
  *refused = true;
  return nullptr;
}

int run_fused(Context& ctx) {
  const FusedOptions& o = ctx.opt.fused;
  std::vector<Shape> shapes;
  for (int64_t n : o.cubes) shapes.push_back({n, n, n});
  if (o.llm)
    for (int64_t n : {1024, 3584, 28672}) shapes.push_back({8192, n, 8192});
  Gemm gemm;
  bool nccl_refused = false;
  for (const char* op : {"ag_gemm", "gemm_rs"}) {
    if (!o.ops.empty() && std::find(o.ops.begin(), o.ops.end(), op) == o.ops.end()) continue;
    if (!ctx.nccl && !nccl_refused) ctx.nccl = try_nccl(ctx, &nccl_refused);  // the baseline
    if (ctx.rank == 0) std::printf("\n%s, bfloat16, %d ranks (median of %d)\n", op, ctx.nranks,
                                   ctx.opt.iters);
    for (const Shape& sh : shapes) run_shape(ctx, gemm, op, sh);
  }
  if (o.ops.empty() || std::find(o.ops.begin(), o.ops.end(), "transpose") != o.ops.end()) {
    if (ctx.rank == 0)
      std::printf("\ntranspose + accumulate, bfloat16, %d ranks (median of %d)\n", ctx.nranks,
                  ctx.opt.iters);
    for (int64_t n : o.cubes) run_transpose(ctx, n);
  }
  return 0;
}

}  // namespace bench
