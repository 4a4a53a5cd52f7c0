// The host harness of the collectives' emulation tests (tests/unit/*_emulation.cc): the
// library's own protocol headers (src/coll/device/, src/coll/<algorithm>/) compiled by the
// host compiler and run with every CUDA thread a host thread. It provides what
// coll/device/env.cuh expects from CUDA and from symcomm's device API, as host code:
//   - CUDA's keywords (as nothing: crt/host_defines.h on the host; __shared__ as one object
//     per host thread, which is exact where a block is one thread or a thread reads only
//     what it wrote itself), the thread indices, the block's barrier, fences, atomics, L2
//     loads and min();
//   - symcomm's device helpers (pdl_begin, detail::remote, store_relaxed, load_acquire,
//     wait_local, copy, record_error, global_time_ns) and the LL packet's memory operations;
//   - fake devices: each rank's symmetric area, its world view (DeviceComm), error record,
//     abort flag and wait bound;
//   - the runner: a kernel as a grid of blocks of threads (run_grid), each rank's kernels
//     in order on its own "stream" and the ranks at once (run_streams), as back-to-back
//     calls run on GPUs.
// Include it before any protocol header. What it cannot answer is the memory model (fences,
// caches, volatile and relaxed accesses over NVLink, the atomicity of a packet's halves):
// C++ atomics on one host are stronger; the GPU tests answer those.
#pragma once

#define SYMCOMM_EMULATION 1

#include <gtest/gtest.h>
#include <vector_types.h>  // uint4; CUDA's keywords, as nothing on the host

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "symcomm/device_comm.h"

#undef __shared__
#define __shared__ static thread_local
#undef __launch_bounds__
#define __launch_bounds__(...)

// --- CUDA's built-ins ---------------------------------------------------------------------

using std::min;  // CUDA's min() overloads

struct Dim {
  unsigned x = 0, y = 1, z = 1;
};
inline thread_local Dim threadIdx, blockIdx, blockDim, gridDim;

// A block's barrier: the OR of __syncthreads_or is taken by the barrier's completion step,
// which runs once every thread has arrived and before any leaves.
struct BlockSync {
  explicit BlockSync(int threads) : bar(threads, Done{this}) {}
  struct Done {
    BlockSync* s;
    void operator()() noexcept { s->result = s->acc.exchange(0); }
  };
  std::atomic<int> acc{0};
  int result = 0;
  std::barrier<Done> bar;
};
inline thread_local BlockSync* block_sync = nullptr;

inline int __syncthreads_or(int x) {
  if (x) block_sync->acc.fetch_or(1);
  block_sync->bar.arrive_and_wait();
  return block_sync->result;
}
inline void __syncthreads() { __syncthreads_or(0); }

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline unsigned long long atomicExch(unsigned long long* p, unsigned long long v) {
  return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}
template <typename W>
W __ldcg(const W* p) {
  return *p;
}

namespace symcomm {
// A kernel's wait for the one before it on the stream (base/launch.cuh): the emulations run
// one kernel at a time, so there is nothing to wait for.
inline void pdl_begin() {}
}  // namespace symcomm

// --- symcomm's device helpers (symcomm/detail/device_impl.cuh) --------------------------

namespace symcomm {
namespace detail {

template <typename T>
T* remote(const DeviceComm& c, T* p, int pe) {
  const uintptr_t off = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(c.base);
  return reinterpret_cast<T*>(c.peer_base[pe] + off);
}

// With a fence before it, a release: what the block wrote before the signal is visible to
// the thread whose acquire poll sees it.
inline void store_relaxed(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
inline uint64_t load_acquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

inline uint64_t global_time_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// As the device's: the first failure's fields, then its code; later ones leave it.
inline std::mutex error_mutex;
inline void record_error(const DeviceComm& c, int code, const void* word, symcommCmp_t cmp,
                         uint64_t expected, uint64_t observed, int pe = -1) {
  std::lock_guard<std::mutex> lock(error_mutex);
  if (c.error == nullptr || c.error->code != 0) return;
  c.error->pe = pe < 0 ? c.rank : pe;
  c.error->cmp = static_cast<int32_t>(cmp);
  c.error->block = static_cast<int32_t>(blockIdx.x);
  c.error->address = reinterpret_cast<uintptr_t>(word);
  c.error->expected = expected;
  c.error->observed = observed;
  c.error->code = code;
}

// As the device's: acquire polls, the abort flag and the bound looked at now and then.
inline int wait_local(const DeviceComm& c, const uint64_t* word, symcommCmp_t cmp,
                      uint64_t value, int pe = -1) {
  const auto start = std::chrono::steady_clock::now();
  for (uint32_t polls = 1;; ++polls) {
    const uint64_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    if (compare(seen, cmp, value)) return 0;
    std::this_thread::yield();
    if (polls % 64 == 0) {
      int code = 0;
      if (c.abort_flag != nullptr && *c.abort_flag != 0)
        code = symcommPeerLost;
      else if (c.wait_timeout_ns != 0 && std::chrono::steady_clock::now() - start >
                                             std::chrono::nanoseconds(c.wait_timeout_ns))
        code = symcommTimeout;
      if (code != 0) {
        record_error(c, code, word, cmp, value, seen, pe);
        return code;
      }
    }
  }
}

// Thread tid of nt takes every nt-th byte, as the device's copy spreads over threads.
inline void copy(void* dst, const void* src, size_t bytes, unsigned tid, unsigned nt) {
  for (size_t i = tid; i < bytes; i += nt)
    static_cast<char*>(dst)[i] = static_cast<const char*>(src)[i];
}

}  // namespace detail

// --- The LL packet's memory operations (coll/device/ll_packet.cuh) ------------------------

namespace protocol {

// A packet is two 8-byte halves {data, flag}, each atomic, the pair not: stored in either
// order, sometimes with a pause between them, and loaded one half at a time.
inline thread_local unsigned packet_ops = 0;
inline void store_packet(uint4* at, uint64_t data, uint32_t flag) {
  uint64_t* h = reinterpret_cast<uint64_t*>(at);
  const uint64_t lo = (data & 0xffffffffu) | uint64_t{flag} << 32;
  const uint64_t hi = (data >> 32) | uint64_t{flag} << 32;
  const unsigned k = ++packet_ops;
  const int first = k & 1;
  __atomic_store_n(h + first, first ? hi : lo, __ATOMIC_RELAXED);
  if (k % 13 == 0) std::this_thread::yield();
  __atomic_store_n(h + (1 - first), first ? lo : hi, __ATOMIC_RELAXED);
}
inline uint4 load_packet(const uint4* at) {
  const uint64_t* h = reinterpret_cast<const uint64_t*>(at);
  const int first = ++packet_ops & 1;
  uint64_t half[2];
  half[first] = __atomic_load_n(h + first, __ATOMIC_RELAXED);
  half[1 - first] = __atomic_load_n(h + (1 - first), __ATOMIC_RELAXED);
  uint4 v;
  v.x = static_cast<uint32_t>(half[0]);
  v.y = static_cast<uint32_t>(half[0] >> 32);
  v.z = static_cast<uint32_t>(half[1]);
  v.w = static_cast<uint32_t>(half[1] >> 32);
  return v;
}
inline void poll_pause() { std::this_thread::yield(); }

}  // namespace protocol
}  // namespace symcomm

namespace emulation {

// --- Memory and fake devices --------------------------------------------------------------

// Bytes at 16-byte aligned addresses (uint4 elements), filled with `fill`.
struct Memory {
  Memory(size_t bytes, char fill) : words((bytes + 15) / 16) {
    std::memset(static_cast<void*>(words.data()), fill, words.size() * 16);
  }
  char* data() { return reinterpret_cast<char*>(words.data()); }
  std::vector<uint4> words;
};

// `nranks` GPUs: each rank's symmetric area of `bytes` bytes, its first `clear` bytes
// cleared as CollContext::place_counters clears an algorithm's area, the rest 0xCD (what
// the heap held before); its error record; and the abort flag and wait bound they share.
class Devices {
 public:
  Devices(int nranks, size_t bytes, size_t clear = SIZE_MAX)
      : bytes_(bytes), errors_(static_cast<size_t>(nranks)) {
    for (int r = 0; r < nranks; ++r) {
      areas_.push_back(std::make_unique<Memory>(bytes, static_cast<char>(0xCD)));
      bases_.push_back(areas_.back()->data());
      std::memset(bases_.back(), 0, std::min(clear, bytes));
    }
  }
  int size() const { return static_cast<int>(areas_.size()); }
  char* area(int rank) { return bases_[static_cast<size_t>(rank)]; }
  // The world's DeviceComm on `rank`, as CounterState::world: its area as its window, every
  // rank's as the peers'.
  symcomm::DeviceComm world(int rank) {
    symcomm::DeviceComm c{};
    c.rank = rank;
    c.nranks = size();
    c.team_size = size();
    c.team_stride = 1;
    c.base = area(rank);
    c.peer_base = bases_.data();
    c.error = &error(rank);
    c.abort_flag = &abort_;
    c.wait_timeout_ns = timeout_ns_;
    return c;
  }
  // `q`, an address in rank `from`'s area, in rank `to`'s (CollContext::on for the area).
  char* on(int from, const void* q, int to) {
    const char* p = static_cast<const char*>(q);
    const char* lo = area(from);
    EXPECT_TRUE(p >= lo && p < lo + bytes_) << "an address outside rank " << from << "'s area";
    return area(to) + (p - lo);
  }
  symcomm::DeviceError& error(int rank) { return errors_[static_cast<size_t>(rank)]; }
  // No wait of any rank failed (timed out, or aborted).
  void expect_no_failed_wait() {
    for (int r = 0; r < size(); ++r)
      EXPECT_EQ(error(r).code, 0) << "rank " << r << " recorded a failed wait for "
                                  << error(r).expected << ", seeing " << error(r).observed;
  }
  void set_timeout_ns(uint64_t ns) { timeout_ns_ = ns; }
  void set_abort() { abort_ = 1; }

 private:
  size_t bytes_;
  std::vector<std::unique_ptr<Memory>> areas_;
  std::vector<char*> bases_;
  std::vector<symcomm::DeviceError> errors_;
  int32_t abort_ = 0;
  uint64_t timeout_ns_ = uint64_t{60} * 1000000000;  // a failed test, not a slow host
};

// --- The runner ---------------------------------------------------------------------------

// Runs `kernel()` as a grid of `blocks` blocks of `threads` host threads (each with its
// indices and its block's barrier), and returns once every thread has.
template <typename Kernel>
void run_grid(int blocks, int threads, Kernel&& kernel) {
  std::vector<std::unique_ptr<BlockSync>> syncs;
  for (int b = 0; b < blocks; ++b) syncs.push_back(std::make_unique<BlockSync>(threads));
  std::vector<std::thread> all;
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t)
      all.emplace_back([&, b, t] {
        threadIdx.x = static_cast<unsigned>(t);
        blockIdx.x = static_cast<unsigned>(b);
        blockDim.x = static_cast<unsigned>(threads);
        gridDim.x = static_cast<unsigned>(blocks);
        block_sync = syncs[static_cast<size_t>(b)].get();
        kernel();
        block_sync->bar.arrive_and_drop();  // barriers wait for the threads not exited
      });
  for (std::thread& t : all) t.join();
}

// Each rank's launches in order on its own "stream" (one host thread per rank), the ranks at
// once with no synchronisation between them, as back-to-back calls run on GPUs.
template <typename Launch, typename Run>
void run_streams(const std::vector<std::vector<Launch>>& streams, Run&& run_one) {
  std::vector<std::thread> ranks;
  for (const auto& stream : streams)
    ranks.emplace_back([&run_one, &stream] {
      for (const Launch& l : stream) run_one(l);
    });
  for (std::thread& t : ranks) t.join();
}

}  // namespace emulation
