// symcomm-bench rma: put bandwidth (copy engines, SM kernels, device block-scope puts) against
// NCCL send/recv of the same sizes, signal ping-pong latency (signal alone, and put_signal
// with 8 bytes of data the receiver checks: a wrong round fails the run), and on-stream
// barrier latency. Every put point (implementation and size) is first checked once: the
// receiver's buffer poisoned, one put of a pattern particular to the sender and the point,
// the receiver's copy compared with it (whole up to 64 MiB, sampled above) and the bytes
// after it still poisoned; the record says `verified`, and a wrong put makes the run exit 1.
#include <algorithm>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>

#include "bench.h"
#include "symcomm/device.cuh"

namespace bench {

namespace {

using symcomm::DeviceComm;

__global__ void device_put_kernel(const __grid_constant__ DeviceComm c, char* dst, const char* src,
                                  size_t bytes, int pe) {
  size_t per = (bytes + gridDim.x - 1) / gridDim.x;
  size_t begin = per * blockIdx.x;
  if (begin >= bytes) return;
  size_t n = bytes - begin < per ? bytes - begin : per;
  symcomm::put_block(c, dst + begin, src + begin, n, pe);
}

// One thread on each of two ranks: rank `me` sends i and waits for i back, `rounds` times.
// Half::Both is the library's signal_op and signal_wait_until; LibSignal and LibWait replace
// one of the two by its raw form (a relaxed store to `theirs`, an acquire poll), to show
// which half costs what over the raw variants below. PutSignal sends 8 bytes of data with
// each signal (put_signal: data, fence, signal) and the receiver checks them after its wait.
enum class Half { Both, LibSignal, LibWait, PutSignal };

// put_signal's data in round i: never 0, different in every round (and from the last
// round of the previous repetition, which stays in the word).
__device__ __forceinline__ uint64_t round_data(uint64_t i) { return i * 0x9e3779b97f4a7c15ull; }

__device__ __forceinline__ void raw_signal(uint64_t* theirs, uint64_t v) {
  asm volatile("st.relaxed.sys.u64 [%0], %1;" : : "l"(theirs), "l"(v) : "memory");
}

__device__ __forceinline__ void raw_wait(const uint64_t* mine, uint64_t v) {
  uint64_t seen;
  do asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(seen) : "l"(mine) : "memory");
  while (seen < v);
}

// sig[0] is the signal; with PutSignal sig[1] (symmetric) receives the data, sig[2] is the
// local source. *status: the last failed wait's result; *wrong counts rounds whose data
// differed from round_data (both accumulate over launches).
// The ping-pong is timed inside the kernel, from the end of its first round (a handshake: the
// second rank's kernel may start later than the first's, and the host's launch is not part
// of a one-way latency) to the end of the last, on the first rank: *ns. Both kernel kinds
// run rounds + 1 rounds.
// (A memory clobber: not moved across the polls.)
__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : : "memory");
  return t;
}

template <Half H>
__global__ void pingpong_kernel(const __grid_constant__ DeviceComm c, uint64_t* sig,
                                uint64_t* theirs, int peer, int rounds, bool first, int* status,
                                unsigned long long* wrong, unsigned long long* ns) {
  int rc = 0;
  unsigned long long bad = 0;
  auto signal = [&](uint64_t v) {
    if constexpr (H == Half::LibWait) {
      raw_signal(theirs, v);
    } else if constexpr (H == Half::PutSignal) {
      sig[2] = round_data(v);
      symcomm::put_signal(c, sig + 1, sig + 2, sizeof(uint64_t), sig, v, symcommSignalSet, peer);
    } else {
      symcomm::signal_op(c, sig, v, symcommSignalSet, peer);
    }
  };
  auto wait = [&](uint64_t v) {
    if constexpr (H == Half::LibSignal) raw_wait(sig, v);
    else rc = symcomm::signal_wait_until(c, sig, symcommCmpGe, v);
    // The peer writes its next round only after this rank's reply: the word is stable here.
    if constexpr (H == Half::PutSignal)
      bad += rc == 0 && *reinterpret_cast<volatile uint64_t*>(sig + 1) != round_data(v);
  };
  uint64_t start = 0;
  for (int i = 1; i <= rounds + 1 && rc == 0; ++i) {
    const uint64_t v = static_cast<uint64_t>(i);
    if (first) {
      signal(v);
      wait(v);
      if (i == 1) start = now_ns();
    } else {
      wait(v);
      signal(v);
    }
  }
  if (first) *ns = now_ns() - start;
  if (rc) *status = rc;
  *wrong += bad;
}

// Ping-pong variants, to see what each ordering costs: how the waiter polls, which fence
// it issues once the value arrived, and how the signal is stored. Raw pointers; no bound.
enum class Poll { Volatile, Relaxed, Acquire };
enum class After { None, FenceGpu, FenceSys };
enum class Store { Volatile, Relaxed, Release };

template <Poll P>
__device__ __forceinline__ uint64_t poll_load(const volatile uint64_t* p) {
  uint64_t v;
  if constexpr (P == Poll::Volatile) v = *p;
  else if constexpr (P == Poll::Relaxed)
    asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

template <After A>
__device__ __forceinline__ void after_wait() {
  if constexpr (A == After::FenceGpu) asm volatile("fence.acq_rel.gpu;" ::: "memory");
  if constexpr (A == After::FenceSys) asm volatile("fence.acq_rel.sys;" ::: "memory");
}

template <Store S>
__device__ __forceinline__ void signal_store(volatile uint64_t* p, uint64_t v) {
  if constexpr (S == Store::Volatile) *p = v;
  else if constexpr (S == Store::Relaxed)
    asm volatile("st.relaxed.sys.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
  else
    asm volatile("st.release.sys.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
}

template <Poll P, After A, Store S>
__global__ void pingpong_variant_kernel(volatile uint64_t* mine, volatile uint64_t* theirs,
                                        int rounds, bool first, unsigned long long* ns) {
  uint64_t start = 0;
  for (int i = 1; i <= rounds + 1; ++i) {
    const uint64_t want = static_cast<uint64_t>(i);
    if (first) signal_store<S>(theirs, want);
    while (poll_load<P>(mine) < want) {
    }
    after_wait<A>();
    if (!first) signal_store<S>(theirs, want);
    if (first && i == 1) start = now_ns();
  }
  if (first) *ns = now_ns() - start;
}

using VariantKernel = void (*)(volatile uint64_t*, volatile uint64_t*, int, bool,
                               unsigned long long*);
struct Variant {
  const char* name;
  VariantKernel kernel;
};
// The plain volatile loop first: the floor the library's waits are compared against.
const Variant kVariants[] = {
    {"naive:volatile", pingpong_variant_kernel<Poll::Volatile, After::None, Store::Volatile>},
    {"variant:volatile+fence_gpu", pingpong_variant_kernel<Poll::Volatile, After::FenceGpu, Store::Volatile>},
    {"variant:volatile+fence_sys", pingpong_variant_kernel<Poll::Volatile, After::FenceSys, Store::Volatile>},
    {"variant:relaxed", pingpong_variant_kernel<Poll::Relaxed, After::None, Store::Relaxed>},
    {"variant:relaxed+fence_sys", pingpong_variant_kernel<Poll::Relaxed, After::FenceSys, Store::Relaxed>},
    {"variant:acquire", pingpong_variant_kernel<Poll::Acquire, After::None, Store::Relaxed>},
    {"variant:volatile+release_store", pingpong_variant_kernel<Poll::Volatile, After::None, Store::Release>},
};

std::vector<size_t> sizes(size_t max_bytes) {
  std::vector<size_t> v;
  for (size_t b = 8; b <= max_bytes; b *= 8) v.push_back(b);
  for (size_t b : {size_t{8} << 10, size_t{64} << 20, size_t{256} << 20, size_t{1} << 30})
    if (b <= max_bytes && std::find(v.begin(), v.end(), b) == v.end()) v.push_back(b);
  std::sort(v.begin(), v.end());
  return v;
}

int inner_for(size_t bytes) { return bytes <= (1 << 20) ? 100 : bytes <= (64 << 20) ? 10 : 2; }

// ---- The check of each put point ------------------------------------------------------------

constexpr unsigned char kPoison = 0xff;             // the receive buffer before the put
constexpr size_t kCheckBytes = size_t{64} << 20;    // compared whole up to this, sampled above
constexpr size_t kGuardBytes = 4096;                // after the put's bytes: must stay poisoned

__host__ __device__ inline uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Byte i of the pattern `seed`: any value but the poison.
__host__ __device__ inline unsigned char pattern_byte(uint64_t seed, size_t i) {
  const uint64_t word = mix64(seed + (static_cast<uint64_t>(i >> 3) + 1) * 0x9e3779b97f4a7c15ull);
  const auto b = static_cast<unsigned char>(word >> ((i & 7) * 8));
  return b == kPoison ? 0 : b;
}

__global__ void fill_pattern(unsigned char* p, size_t n, uint64_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = pattern_byte(seed, i);
}

struct Span {
  size_t begin, len;  // bytes of the receive buffer
};

// What is compared: every byte up to kCheckBytes; above, the first and last 64 KiB and 64
// windows of 4 KiB at places that change with the seed.
std::vector<Span> spans_to_check(size_t bytes, uint64_t seed) {
  if (bytes <= kCheckBytes) return {{0, bytes}};
  const size_t edge = size_t{64} << 10, len = 4096;
  std::vector<Span> spans{{0, edge}, {bytes - edge, edge}};
  uint64_t r = seed;
  for (int i = 0; i < 64; ++i) {
    r = mix64(r + 0x9e3779b97f4a7c15ull);
    spans.push_back({static_cast<size_t>(r % (bytes - len + 1)), len});
  }
  return spans;
}

// One put of `bytes` checked at the receiver, rank 1: rank 0 fills its `src` with a pattern
// of its own and of `point`, rank 1 poisons `recv` (its own buffer the put lands in) and up to
// kGuardBytes after it (within `capacity`, the buffer's size), then `put` runs on every rank
// (it makes the call on the ranks that take part) and every rank's stream is synchronised;
// rank 1 compares. Collective; returns whether the data arrived and nothing past it changed.
// (A wrong put is said on stderr by rank 1.)
bool check_put(Context& ctx, const std::string& where, char* src, char* recv, size_t bytes,
               size_t capacity, uint64_t point, const std::function<void()>& put) {
  const int sender = 0;  // every put of the series goes from rank 0 to rank 1
  const uint64_t seed =
      mix64((static_cast<uint64_t>(sender + 1) << 56) ^ (point << 8) ^ 0x726d6163686b0000ull);
  const size_t guard = std::min(kGuardBytes, capacity - bytes);
  if (ctx.rank == sender) {
    const unsigned grid = static_cast<unsigned>(std::min<size_t>((bytes + 255) / 256, 4096));
    fill_pattern<<<grid, 256, 0, ctx.stream>>>(reinterpret_cast<unsigned char*>(src), bytes, seed);
    BENCH_CUDA(cudaGetLastError());
  } else if (ctx.rank == 1) {
    BENCH_CUDA(cudaMemsetAsync(recv, kPoison, bytes + guard, ctx.stream));
  }
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  BENCH_SC(symcommHostBarrier(ctx.comm));  // poisoned before anything is put
  put();
  BENCH_CUDA(cudaGetLastError());
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  BENCH_SC(symcommHostBarrier(ctx.comm));  // the put is complete
  size_t wrong = 0, past = 0, checked = 0;
  if (ctx.rank == 1) {
    std::string first;
    std::vector<unsigned char> got;
    for (const Span& sp : spans_to_check(bytes, seed)) {
      got.resize(sp.len);
      BENCH_CUDA(cudaMemcpy(got.data(), recv + sp.begin, sp.len, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < sp.len; ++i) {
        const unsigned char want = pattern_byte(seed, sp.begin + i);
        if (got[i] == want) continue;
        if (++wrong <= 3) {
          char buf[96];
          std::snprintf(buf, sizeof buf, "%s[%zu] want 0x%02x got 0x%02x", first.empty() ? "" : ", ",
                        sp.begin + i, want, got[i]);
          first += buf;
        }
      }
      checked += sp.len;
    }
    got.resize(guard);
    if (guard) BENCH_CUDA(cudaMemcpy(got.data(), recv + bytes, guard, cudaMemcpyDeviceToHost));
    past = static_cast<size_t>(std::count_if(got.begin(), got.end(),
                                             [](unsigned char b) { return b != kPoison; }));
    if (wrong || past)
      std::fprintf(stderr, "symcomm-bench rma: FAILED: put %s, %zu bytes: %zu of %zu checked "
                   "bytes differ (%s); %zu of %zu bytes after it written\n", where.c_str(), bytes,
                   wrong, checked, first.c_str(), past, guard);
  }
  return max_over_ranks(ctx, static_cast<double>(wrong + past)) == 0;
}

Record point(const Context& ctx, const char* op, std::string impl, size_t bytes, double us,
             int ranks) {
  Record r;
  r.op = op;
  r.impl = std::move(impl);
  r.bytes = bytes;
  r.ranks = ranks;
  r.time_us = us;
  r.algbw_gbs = bytes ? static_cast<double>(bytes) / (us * 1e3) : -1;
  r.iters = ctx.opt.iters;
  r.warmup = ctx.opt.warmup;
  return r;
}

// cuMemcpyAsync from the driver, found through the runtime (no -lcuda).
using MemcpyAsyncFn = int (*)(uintptr_t, uintptr_t, size_t, cudaStream_t);
MemcpyAsyncFn driver_memcpy_async() {
  static MemcpyAsyncFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    BENCH_CUDA(cudaGetDriverEntryPointByVersion("cuMemcpyAsync", &p, 12000, cudaEnableDefault, &q));
    if (!p) die("cuMemcpyAsync", "not found", __FILE__, __LINE__);
    return reinterpret_cast<MemcpyAsyncFn>(p);
  }();
  return fn;
}
#define BENCH_CU(call) \
  do { if (int rc_ = (call)) die(#call, ("CUresult " + std::to_string(rc_)).c_str(), __FILE__, __LINE__); } while (0)

// Returns the number of points whose check failed (check_put; their records say
// "verified": false).
int put_bandwidth(Context& ctx, char* dst, char* src) {
  print_header(ctx, "Put GPU0 -> GPU1, stream-serialised (rank 0 issues; time per put)");
  DeviceComm h;
  BENCH_SC(symcommGetDeviceComm(ctx.comm, SYMCOMM_TEAM_WORLD, &h));
  if (!ctx.nccl) ctx.nccl = make_nccl(ctx);
  const size_t capacity = ctx.opt.max_bytes;  // of dst and src
  uint64_t points = 0;
  int failed = 0;
  // The point's check: `put` makes the one put on rank 0 (and NCCL's receive on rank 1) into
  // `recv`, rank 1's buffer.
  auto check = [&](const std::string& impl, size_t bytes, char* recv,
                   const std::function<void()>& put) {
    const bool ok = check_put(ctx, impl, src, recv, bytes, capacity, ++points, put);
    failed += !ok;
    return ok;
  };
  auto emit_put = [&](const std::string& impl, size_t bytes, double us, bool ok) {
    Record r = point(ctx, "put", impl, bytes, us, 2);
    r.extra.push_back({"verified", ok ? "true" : "false"});
    emit(ctx, r);
  };
  for (size_t bytes : sizes(ctx.opt.max_bytes)) {
    const int inner = inner_for(bytes);
    auto host_put = [&](symcommEngine_t e) {
      return [&, e] { BENCH_SC(symcommPutOnStream(ctx.comm, dst, src, bytes, 1, e, ctx.stream)); };
    };
    const struct {
      const char* impl;
      symcommEngine_t engine;
    } engines[] = {{"symcomm:ce", symcommEngineCe}, {"symcomm:sm", symcommEngineSm},
                   {"symcomm:auto", symcommEngineAuto}};
    for (const auto& e : engines) {
      const bool ok = check(e.impl, bytes, dst, [&] { if (ctx.rank == 0) host_put(e.engine)(); });
      double us = 0;
      if (ctx.rank == 0) us = time_stream_us(ctx.stream, ctx.opt.warmup, ctx.opt.iters, inner, host_put(e.engine));
      BENCH_SC(symcommHostBarrier(ctx.comm));
      emit_put(e.impl, bytes, us, ok);
    }
    // The floor under the host API for small puts: the runtime's (and the driver's) own copy
    // call on the peer address, without symcomm around it.
    if (bytes <= (64 << 10)) {
      void* peer = symcommPtr(ctx.comm, dst, 1);
      const bool rt_ok = check("raw:cudaMemcpyAsync", bytes, dst, [&] {
        if (ctx.rank == 0) BENCH_CUDA(cudaMemcpyAsync(peer, src, bytes, cudaMemcpyDefault, ctx.stream));
      });
      const bool drv_ok = check("raw:cuMemcpyAsync", bytes, dst, [&] {
        if (ctx.rank == 0)
          BENCH_CU(driver_memcpy_async()(reinterpret_cast<uintptr_t>(peer),
                                         reinterpret_cast<uintptr_t>(src), bytes, ctx.stream));
      });
      double rt = 0, drv = 0;
      if (ctx.rank == 0) {
        rt = time_stream_us(ctx.stream, ctx.opt.warmup, ctx.opt.iters, inner, [&] {
          BENCH_CUDA(cudaMemcpyAsync(peer, src, bytes, cudaMemcpyDefault, ctx.stream));
        });
        drv = time_stream_us(ctx.stream, ctx.opt.warmup, ctx.opt.iters, inner, [&] {
          BENCH_CU(driver_memcpy_async()(reinterpret_cast<uintptr_t>(peer),
                                         reinterpret_cast<uintptr_t>(src), bytes, ctx.stream));
        });
      }
      BENCH_SC(symcommHostBarrier(ctx.comm));
      emit_put("raw:cudaMemcpyAsync", bytes, rt, rt_ok);
      emit_put("raw:cuMemcpyAsync", bytes, drv, drv_ok);
    }
    for (unsigned blocks : {32u, 132u}) {
      double us = 0;
      unsigned grid = static_cast<unsigned>(std::min<size_t>(blocks, (bytes + 4095) / 4096));
      const std::string impl = "symcomm:device_block_x" + std::to_string(blocks);
      const bool ok = check(impl, bytes, dst, [&] {
        if (ctx.rank == 0) device_put_kernel<<<grid, 1024, 0, ctx.stream>>>(h, dst, src, bytes, 1);
      });
      if (ctx.rank == 0)
        us = time_stream_us(ctx.stream, ctx.opt.warmup, ctx.opt.iters, inner, [&] {
          device_put_kernel<<<grid, 1024, 0, ctx.stream>>>(h, dst, src, bytes, 1);
        });
      BENCH_CUDA(cudaGetLastError());
      BENCH_SC(symcommHostBarrier(ctx.comm));
      emit_put(impl, bytes, us, ok);
    }
    // NCCL send/recv of the same size: rank 0 sends, rank 1 receives (into its own src), same
    // repetitions.
    const bool nccl_ok = check("nccl:sendrecv", bytes, src, [&] {
      if (ctx.rank == 0) BENCH_NCCL(ncclSend(src, bytes, ncclChar, 1, ctx.nccl, ctx.stream));
      else if (ctx.rank == 1) BENCH_NCCL(ncclRecv(src, bytes, ncclChar, 0, ctx.nccl, ctx.stream));
    });
    double us = 0;
    if (ctx.rank <= 1) {
      us = time_stream_us(ctx.stream, ctx.opt.warmup, ctx.opt.iters, inner, [&] {
        if (ctx.rank == 0) BENCH_NCCL(ncclSend(src, bytes, ncclChar, 1, ctx.nccl, ctx.stream));
        else BENCH_NCCL(ncclRecv(src, bytes, ncclChar, 0, ctx.nccl, ctx.stream));
      });
    }
    std::vector<double> all(static_cast<size_t>(ctx.nranks));
    BENCH_SC(symcommHostAllgather(ctx.comm, &us, all.data(), sizeof us));
    emit_put("nccl:sendrecv", bytes, all[0], nccl_ok);
  }
  if (failed && ctx.rank == 0)
    std::fprintf(stderr, "symcomm-bench rma: FAILED: %d put point(s) delivered wrong data\n", failed);
  return failed;
}

// The library's device ping-pong (half: which of its halves are the library's), or (variant
// != null) one of the raw variants. `sig` holds 3 words (pingpong_kernel). Returns the number
// of rounds on ranks 0 and 1 whose data was wrong (Half::PutSignal; else 0). time_us is the
// kernel's own clock (see now_ns); event_us, the same rounds timed by events around the
// launch on rank 0, adds the launch and the second rank's late start.
unsigned long long pingpong(Context& ctx, uint64_t* sig, const char* impl, symcommComm_t comm,
                            const Variant* variant, Half half = Half::Both) {
  const int rounds = 2000;
  DeviceComm h;
  BENCH_SC(symcommGetDeviceComm(comm, SYMCOMM_TEAM_WORLD, &h));
  int* status;
  unsigned long long* wrong;
  BENCH_CUDA(cudaMalloc(&status, sizeof(int)));
  BENCH_CUDA(cudaMemset(status, 0, sizeof(int)));
  BENCH_CUDA(cudaMalloc(&wrong, sizeof *wrong));
  BENCH_CUDA(cudaMemset(wrong, 0, sizeof *wrong));
  unsigned long long* ns;
  BENCH_CUDA(cudaMalloc(&ns, sizeof *ns));
  BENCH_CUDA(cudaMemset(ns, 0, sizeof *ns));
  std::vector<double> t, t_event;
  for (int rep = 0; rep < ctx.opt.iters + ctx.opt.warmup; ++rep) {
    BENCH_CUDA(cudaMemset(sig, 0, 8));
    BENCH_CUDA(cudaDeviceSynchronize());
    BENCH_SC(symcommHostBarrier(comm));
    cudaEvent_t a, b;
    BENCH_CUDA(cudaEventCreate(&a));
    BENCH_CUDA(cudaEventCreate(&b));
    BENCH_CUDA(cudaEventRecord(a, ctx.stream));
    auto* theirs = ctx.rank <= 1 ? static_cast<uint64_t*>(symcommPtr(comm, sig, 1 - ctx.rank))
                                 : nullptr;
    const int peer = 1 - ctx.rank;
    const bool first = ctx.rank == 0;
    if (ctx.rank <= 1 && variant) {
      variant->kernel<<<1, 1, 0, ctx.stream>>>(sig, theirs, rounds, first, ns);
    } else if (ctx.rank <= 1) {
      auto* kernel = half == Half::Both        ? pingpong_kernel<Half::Both>
                     : half == Half::LibSignal ? pingpong_kernel<Half::LibSignal>
                     : half == Half::LibWait   ? pingpong_kernel<Half::LibWait>
                                               : pingpong_kernel<Half::PutSignal>;
      kernel<<<1, 1, 0, ctx.stream>>>(h, sig, theirs, peer, rounds, first, status, wrong, ns);
    }
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaEventRecord(b, ctx.stream));
    BENCH_CUDA(cudaEventSynchronize(b));
    float ms;
    BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    unsigned long long kernel_ns = 0;
    BENCH_CUDA(cudaMemcpy(&kernel_ns, ns, sizeof kernel_ns, cudaMemcpyDeviceToHost));
    if (rep >= ctx.opt.warmup) {
      t.push_back(1e-3 * static_cast<double>(kernel_ns) / (2.0 * rounds));
      t_event.push_back(1000.0 * ms / (2.0 * (rounds + 1)));
    }
    BENCH_CUDA(cudaEventDestroy(a));
    BENCH_CUDA(cudaEventDestroy(b));
  }
  int rc = 0;
  unsigned long long bad = 0;
  BENCH_CUDA(cudaMemcpy(&rc, status, sizeof rc, cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaMemcpy(&bad, wrong, sizeof bad, cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaFree(status));
  BENCH_CUDA(cudaFree(wrong));
  BENCH_CUDA(cudaFree(ns));
  if (ctx.rank <= 1 && rc != 0) die("pingpong", "a wait failed", __FILE__, __LINE__);
  double us[2] = {median(t), median(t_event)};
  std::vector<double> all(2 * static_cast<size_t>(ctx.nranks));
  BENCH_SC(symcommHostAllgather(comm, us, all.data(), sizeof us));
  Record r = point(ctx, "pingpong", impl, 8, all[0], 2);
  r.extra.push_back({"event_us", std::to_string(all[1])});
  bad = static_cast<unsigned long long>(max_over_ranks(ctx, static_cast<double>(bad)));
  if (half == Half::PutSignal) r.extra.push_back({"verified", bad ? "false" : "true"});
  emit(ctx, r);
  if (bad && ctx.rank == 0)
    std::fprintf(stderr, "symcomm-bench rma: FAILED: %s: %llu rounds received wrong data\n", impl, bad);
  return bad;
}

// Host-API ping-pong on streams: put-signal then wait, per round.
void stream_pingpong(Context& ctx, symcommComm_t comm, uint64_t* sig, const char* impl) {
  const int rounds = 200;
  BENCH_CUDA(cudaMemset(sig, 0, 8));
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_SC(symcommHostBarrier(comm));
  double us = 0;
  if (ctx.rank <= 1) {
    int peer = 1 - ctx.rank;
    uint64_t round = 0;
    // Warmed up like the other latencies: the first calls load the signal and wait kernels,
    // which cost the first communicator measured some 2 us per one-way trip before.
    us = time_stream_us(ctx.stream, ctx.opt.warmup, ctx.opt.iters, 1, [&] {
      for (int i = 0; i < rounds; ++i) {
        ++round;
        if (ctx.rank == 0) {
          BENCH_SC(symcommPutSignalOnStream(comm, nullptr, nullptr, 0, sig, round, symcommSignalSet,
                                            peer, symcommEngineAuto, ctx.stream));
          BENCH_SC(symcommSignalWaitOnStream(comm, sig, symcommCmpGe, round, ctx.stream));
        } else {
          BENCH_SC(symcommSignalWaitOnStream(comm, sig, symcommCmpGe, round, ctx.stream));
          BENCH_SC(symcommPutSignalOnStream(comm, nullptr, nullptr, 0, sig, round, symcommSignalSet,
                                            peer, symcommEngineAuto, ctx.stream));
        }
      }
    }) / (2.0 * rounds);
  }
  std::vector<double> all(static_cast<size_t>(ctx.nranks));
  BENCH_SC(symcommHostAllgather(comm, &us, all.data(), sizeof us));
  emit(ctx, point(ctx, "pingpong", impl, 8, all[0], 2));
}

void barrier_latency(Context& ctx, symcommComm_t comm, symcommTeam_t team, int members,
                     const char* impl) {
  int me = -1;  // -1 for SYMCOMM_TEAM_INVALID: this rank is not a member
  BENCH_SC(symcommTeamRank(comm, team, &me));
  double us = 0;
  if (me >= 0)
    us = time_stream_us(ctx.stream, ctx.opt.warmup, ctx.opt.iters, 100, [&] {
      BENCH_SC(symcommBarrierOnStream(comm, team, ctx.stream));
    });
  us = max_over_ranks(ctx, us);
  emit(ctx, point(ctx, "barrier", impl, 0, us, members));
}

// A second communicator with one parameter changed (the wait or signal engine).
// A communicator made with the parameters `settings` ({name, value} pairs) set.
symcommComm_t comm_with(Context& ctx, std::initializer_list<std::pair<const char*, const char*>> settings) {
  for (const auto& [name, value] : settings) setenv(name, value, 1);
  symcommUniqueId uid;
  if (ctx.rank == 0) BENCH_SC(symcommGetUniqueId(&uid));
  BENCH_SC(symcommHostBroadcast(ctx.comm, &uid, sizeof uid, 0));
  symcommComm_t c;
  BENCH_SC(symcommInit(&c, ctx.nranks, ctx.rank, &uid, nullptr));
  for (const auto& [name, value] : settings) unsetenv(name);
  return c;
}

}  // namespace

int run_rma(Context& ctx) {
  if (ctx.nranks < 2) die("rma", "needs at least 2 ranks", __FILE__, __LINE__);
  const bool latency_only = std::getenv("SYMCOMM_BENCH_LATENCY_ONLY") != nullptr;
  char *dst, *src;
  BENCH_SC(symcommMalloc(ctx.comm, ctx.opt.max_bytes, reinterpret_cast<void**>(&dst)));
  BENCH_CUDA(cudaMalloc(&src, ctx.opt.max_bytes));
  BENCH_CUDA(cudaMemset(src, 0x5a, ctx.opt.max_bytes));
  BENCH_CUDA(cudaDeviceSynchronize());
  const int wrong_puts = latency_only ? 0 : put_bandwidth(ctx, dst, src);

  print_header(ctx, "Latency (time us: one way for ping-pong; per barrier)");
  uint64_t* sig;
  BENCH_SC(symcommMalloc(ctx.comm, 64, reinterpret_cast<void**>(&sig)));
  pingpong(ctx, sig, "symcomm:device", ctx.comm, nullptr);
  pingpong(ctx, sig, "split:library_signal+raw_wait", ctx.comm, nullptr, Half::LibSignal);
  pingpong(ctx, sig, "split:raw_signal+library_wait", ctx.comm, nullptr, Half::LibWait);
  const unsigned long long wrong =
      pingpong(ctx, sig, "symcomm:device_put_signal", ctx.comm, nullptr, Half::PutSignal);
  for (const Variant& v : kVariants) pingpong(ctx, sig, v.name, ctx.comm, &v);
  stream_pingpong(ctx, ctx.comm, sig, "symcomm:stream_kernel_wait");
  // The defaults (kernel signal, kernel wait) above; each memory operation in turn here.
  symcommComm_t memop_wait = comm_with(
      ctx, {{"SYMCOMM_WAIT_ENGINE", "memop"}, {"SYMCOMM_WAIT_TIMEOUT", "0"}});
  symcommComm_t memop_signal = comm_with(ctx, {{"SYMCOMM_SIGNAL_ENGINE", "memop"}});
  const struct {
    symcommComm_t comm;
    const char* impl;
  } engines[] = {{memop_wait, "symcomm:stream_memop_wait"},
                 {memop_signal, "symcomm:stream_memop_signal"}};
  for (const auto& e : engines) {
    symcommComm_t other = e.comm;
    uint64_t* sig2;
    BENCH_SC(symcommMalloc(other, 64, reinterpret_cast<void**>(&sig2)));
    stream_pingpong(ctx, other, sig2, e.impl);
    BENCH_SC(symcommFree(other, sig2));
    BENCH_SC(symcommFinalize(other));
  }
  barrier_latency(ctx, ctx.comm, SYMCOMM_TEAM_WORLD, ctx.nranks, "symcomm:kernel");
  if (ctx.nranks > 2) {
    symcommTeam_t pair;
    BENCH_SC(symcommTeamSplitStrided(ctx.comm, SYMCOMM_TEAM_WORLD, 0, 1, 2, &pair));
    barrier_latency(ctx, ctx.comm, pair, 2, "symcomm:kernel");
  }
  BENCH_SC(symcommFree(ctx.comm, sig));
  BENCH_CUDA(cudaFree(src));
  BENCH_SC(symcommFree(ctx.comm, dst));
  return wrong || wrong_puts ? 1 : 0;
}

}  // namespace bench
