// What the host emulations of the collectives' kernels share (tests/unit/*_emulation.cc):
// CUDA's keywords as nothing, and, for emulations that run a block as several host threads
// (ll, twoshot), the thread indices, the block's barrier and the device's error record.
// Include it before the extracted protocol code.
#pragma once

#include <atomic>
#include <barrier>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "symcomm/device_comm.h"

#ifndef __global__
#define __global__
#endif
#ifndef __device__
#define __device__
#endif
#ifndef __host__
#define __host__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif
#undef __launch_bounds__
#define __launch_bounds__(...)

// A kernel's wait for the one before it on the stream (base/launch.cuh): the emulations run
// one kernel at a time, so there is nothing to wait for.
[[maybe_unused]] inline void pdl_begin() {}

#ifndef SYMCOMM_EMULATION_ONE_THREAD_BLOCKS

namespace {

struct Dim { unsigned x = 0, y = 1, z = 1; };
thread_local Dim threadIdx, blockIdx, blockDim, gridDim;

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
thread_local BlockSync* block_sync = nullptr;

[[maybe_unused]] int __syncthreads_or(int x) {
  if (x) block_sync->acc.fetch_or(1);
  block_sync->bar.arrive_and_wait();
  return block_sync->result;
}
[[maybe_unused]] void __syncthreads() { __syncthreads_or(0); }

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

}  // namespace

namespace symcomm {
namespace detail {
// As device_impl.cuh's: the first failure's fields, then its code; later ones leave it.
inline std::mutex error_mutex;
inline void record_error(const DeviceComm& c, int code, const void* word, symcommCmp_t cmp,
                         uint64_t expected, uint64_t observed) {
  std::lock_guard<std::mutex> lock(error_mutex);
  if (c.error == nullptr || c.error->code != 0) return;
  c.error->pe = c.rank;
  c.error->cmp = static_cast<int32_t>(cmp);
  c.error->block = static_cast<int32_t>(blockIdx.x);
  c.error->address = reinterpret_cast<uintptr_t>(word);
  c.error->expected = expected;
  c.error->observed = observed;
  c.error->code = code;
}
}  // namespace detail
}  // namespace symcomm

#endif  // SYMCOMM_EMULATION_ONE_THREAD_BLOCKS
