// symcomm-bench rma: latencies. Signal ping-pong between ranks 0 and 1 on the device (the
// library's signal and wait, each half replaced in turn by its raw form, put_signal with 8
// bytes of checked data, and raw variants of the polling, fencing and storing), ping-pong
// through the host API on streams (kernel and memory-operation engines), and on-stream
// barriers.
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "rma_bench.h"
#include "symcomm/device.cuh"

namespace bench::rma {

namespace {

using symcomm::DeviceComm;

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

unsigned long long latency(Context& ctx) {
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
  return wrong;
}

}  // namespace bench::rma
