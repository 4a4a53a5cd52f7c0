// symcomm-bench decomp: one backend on one configuration. A round trip X->Y->Z->Y->X on
// index-valued data checks the backend (every output poisoned first), then each transpose
// chosen by --ops is timed, eagerly or (--graph) as replays of a captured CUDA graph.
#include <algorithm>
#include <cstdio>

#include "decomp_bench.h"

namespace bench::decomp {

namespace {

// ---- Index-valued data: every element (8 bytes for both types) holds its global index -----

__device__ int64_t pencil_index(const symcommPencilInfo_t& p, int64_t x, int64_t y, int64_t z) {
  const int64_t g[3] = {x, y, z};
  int64_t index = 0;
  for (int i = 2; i >= 0; --i) {
    const int a = p.order[i];
    index = index * p.shape[i] + (g[a] - p.lo[a] + p.halo[a]);
  }
  return index;
}

// For every owned point i (x fastest over the owned box): check ? count mismatches : write.
__global__ void index_kernel(uint64_t* buf, symcommPencilInfo_t p, int64_t nx, int64_t ny,
                             bool check, unsigned long long* bad) {
  const int64_t ex = p.hi[0] - p.lo[0], ey = p.hi[1] - p.lo[1], ez = p.hi[2] - p.lo[2];
  const int64_t total = ex * ey * ez;
  unsigned long long wrong = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t x = p.lo[0] + i % ex, y = p.lo[1] + i / ex % ey, z = p.lo[2] + i / (ex * ey);
    const uint64_t want = static_cast<uint64_t>((z * ny + y) * nx + x);
    uint64_t& e = buf[pencil_index(p, x, y, z)];
    if (!check) e = want;
    else wrong += e != want;
  }
  if (check && wrong) atomicAdd(bad, wrong);
}

int64_t owned(const symcommPencilInfo_t& p) {
  return (p.hi[0] - p.lo[0]) * (p.hi[1] - p.lo[1]) * (p.hi[2] - p.lo[2]);
}

// What a rank sends to others in the transpose between pencils a and b: its pencil less the
// block it keeps.
int64_t sent_elements(const symcommPencilInfo_t& a, const symcommPencilInfo_t& b) {
  int64_t kept = 1;
  for (int d = 0; d < 3; ++d)
    kept *= std::max<int64_t>(0, std::min(a.hi[d], b.hi[d]) - std::max(a.lo[d], b.lo[d]));
  return owned(a) - kept;
}

}  // namespace

Runner::Runner(Context& ctx) : ctx_(ctx) { BENCH_CUDA(cudaMalloc(&bad_, sizeof *bad_)); }
Runner::~Runner() { cudaFree(bad_); }

Result Runner::run(const Config& cfg, const std::string& backend) {
  Result r;
  r.backend = backend;
  const DecompOptions& o = ctx_.opt.decomp;
  symcommDecompConfig_t c;
  BENCH_SC(symcommDecompConfigInit(&c));
  for (int a = 0; a < 3; ++a) {
    c.gdims[a] = cfg.n;
    c.axis_contiguous[a] = o.contiguous ? 1 : 0;
  }
  c.pdims[0] = cfg.pr;
  c.pdims[1] = cfg.pc;
  std::snprintf(c.backend, sizeof c.backend, "%s", backend.c_str());
  symcommDecomp_t d = nullptr;
  if (symcommDecompCreate(ctx_.comm, &c, &d) != symcommSuccess) {
    if (ctx_.rank == 0)
      std::printf("  (%s skipped on %dx%d: %s)\n", backend.c_str(), cfg.pr, cfg.pc,
                  symcommGetLastError());
    return r;
  }
  r.ran = true;
  symcommPencilInfo_t p[3];
  int64_t most = 0;
  for (int a = 0; a < 3; ++a) {
    BENCH_SC(symcommDecompPencilInfo(d, a, nullptr, nullptr, &p[a]));
    most = std::max(most, p[a].size);
  }
  const size_t e = 8;  // C32 and R64 alike
  const size_t bytes = static_cast<size_t>(max_over_ranks(ctx_, static_cast<double>(most))) * e;
  size_t ws_bytes = 0;
  BENCH_SC(symcommDecompWorkspaceSize(d, cfg.type, &ws_bytes));
  void* ws = nullptr;
  BENCH_SC(symcommMalloc(ctx_.comm, ws_bytes, &ws));
  void* buf[3];
  for (void*& b : buf) b = alloc(bytes);

  // The check: X -> Y -> Z -> Y -> X, each output poisoned and then compared with the index.
  index_pass(buf[0], p[0], cfg.n, false);
  const int steps[4][3] = {{0, 1, 1}, {1, 2, 2}, {2, 1, 1}, {1, 0, 0}};  // from, to, buffer
  const int in_buf[4] = {0, 1, 2, 1};
  unsigned long long wrong = 0;
  for (int s = 0; s < 4; ++s) {
    const int out = steps[s][2];
    BENCH_CUDA(cudaMemsetAsync(buf[out], 0xff, bytes, ctx_.stream));
    BENCH_SC(symcommDecompTranspose(d, steps[s][0], steps[s][1], buf[in_buf[s]], buf[out], ws,
                                    cfg.type, nullptr, nullptr, nullptr, nullptr, ctx_.stream));
    wrong += index_pass(buf[out], p[steps[s][1]], cfg.n, true);
  }
  r.verified = max_over_ranks(ctx_, static_cast<double>(wrong)) == 0;

  // Timing: each transpose chosen by --ops, from the buffer of its input pencil into that
  // of its output (the data is the round trip's; its values do not matter here).
  const size_t pencil_bytes = static_cast<size_t>(owned(p[0])) * e;
  const int inner = static_cast<int>(
      std::clamp<size_t>((size_t{256} << 20) / std::max<size_t>(pencil_bytes, 1), 4, 50));
  for (int k = 0; k < kNumOps; ++k) {
    const TimedOp& op = kTimedOps[k];
    if (!op_wanted(o, op)) continue;
    const auto call = [&] {
      return symcommDecompTranspose(d, op.from, op.to, buf[op.from], buf[op.to], ws, cfg.type,
                                    nullptr, nullptr, nullptr, nullptr, ctx_.stream);
    };
    double us = 0, host = 0;
    if (!o.graph) {
      BENCH_SC(symcommHostBarrier(ctx_.comm));
      us = time_stream_us(ctx_.stream, ctx_.opt.warmup, ctx_.opt.iters, inner,
                          [&] { BENCH_SC(call()); }, &host);
    } else if (!time_graph(cfg, p, buf, bytes, op, inner, call, &r, &us, &host)) {
      continue;  // not captured on some rank: no time for this transpose
    }
    r.timed[k] = true;
    r.us[k] = max_over_ranks(ctx_, us);
    r.host_us[k] = max_over_ranks(ctx_, host);
    const int64_t sent = sent_elements(p[op.from], p[op.to]) * static_cast<int64_t>(e);
    r.bytes[k] = static_cast<size_t>(max_over_ranks(ctx_, static_cast<double>(sent)));
  }
  BENCH_CUDA(cudaStreamSynchronize(ctx_.stream));
  for (void* b : buf) release(b);
  BENCH_SC(symcommFree(ctx_.comm, ws));
  BENCH_SC(symcommDecompDestroy(d));
  return r;
}

// --graph: `inner` calls of the transpose captured into one CUDA graph per rank; the replay
// checked on fresh index data (every call of the batch writes the same output from the same
// input), then timed by replays (*us and *host per call). False, with a line on rank 0,
// where some rank could not capture it: every rank then skips it (a replayed graph whose
// barriers some peer does not run would wait for that peer). A wrong replay clears
// r->verified.
bool Runner::time_graph(const Config& cfg, const symcommPencilInfo_t* p, void* const* buf,
                        size_t bytes, const TimedOp& op, int inner,
                        const std::function<symcommResult_t()>& call, Result* r, double* us,
                        double* host) {
  BENCH_SC(symcommHostBarrier(ctx_.comm));
  const GraphBatch g(ctx_.stream, inner, call);
  if (max_over_ranks(ctx_, g.ok() ? 0 : 1) > 0) {
    if (ctx_.rank == 0)
      std::printf("  (%s %s on %dx%d: no CUDA graph of it on some rank%s%s)\n",
                  r->backend.c_str(), op.name, cfg.pr, cfg.pc, g.ok() ? "" : ": ",
                  g.ok() ? "" : g.why().c_str());
    return false;
  }
  index_pass(buf[op.from], p[op.from], cfg.n, false);
  BENCH_CUDA(cudaMemsetAsync(buf[op.to], 0xff, bytes, ctx_.stream));
  BENCH_SC(symcommHostBarrier(ctx_.comm));
  g.launch();
  const auto wrong = index_pass(buf[op.to], p[op.to], cfg.n, true);
  if (max_over_ranks(ctx_, static_cast<double>(wrong)) != 0) r->verified = false;
  BENCH_SC(symcommHostBarrier(ctx_.comm));
  // The first replay uploads the graph: at least two untimed.
  const double batch = time_stream_us(ctx_.stream, std::max(2, ctx_.opt.warmup), ctx_.opt.iters,
                                      1, [&] { g.launch(); }, host);
  *us = batch / inner;
  *host /= inner;
  return true;
}

void* Runner::alloc(size_t bytes) {
  void* p = nullptr;
  if (ctx_.opt.decomp.local) BENCH_CUDA(cudaMalloc(&p, bytes));
  else BENCH_SC(symcommMalloc(ctx_.comm, bytes, &p));
  return p;
}

void Runner::release(void* p) {
  if (ctx_.opt.decomp.local) BENCH_CUDA(cudaFree(p));
  else BENCH_SC(symcommFree(ctx_.comm, p));
}

// Writes the index into the owned points of `buf`, or counts the points that differ.
unsigned long long Runner::index_pass(void* buf, const symcommPencilInfo_t& p, int64_t n,
                                      bool check) {
  BENCH_CUDA(cudaMemsetAsync(bad_, 0, sizeof *bad_, ctx_.stream));
  index_kernel<<<1024, 256, 0, ctx_.stream>>>(static_cast<uint64_t*>(buf), p, n, n, check, bad_);
  BENCH_CUDA(cudaGetLastError());
  unsigned long long wrong = 0;
  BENCH_CUDA(cudaMemcpyAsync(&wrong, bad_, sizeof wrong, cudaMemcpyDeviceToHost, ctx_.stream));
  BENCH_CUDA(cudaStreamSynchronize(ctx_.stream));
  return wrong;
}

}  // namespace bench::decomp
