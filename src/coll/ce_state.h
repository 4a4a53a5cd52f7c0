// The ce algorithm's per-communicator state: the ready and done flag words (a symmetric
// area), the memory operations on them, the streams and events the rounds use, and the
// watchdog that bounds the waits. The protocol: docs/coll/ce.md.
// ce_state.cc makes and destroys the state, ce_watchdog.cc runs the watchdog.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/cuda_driver.h"
#include "coll/coll.h"

namespace symcomm::ce {

// A rank's area: ready[nranks], then done[nranks], indexed by the writer's world rank.
// kChunk is no area of its own: the waits of a broadcast's chain on a done word, which
// counts chunks there (see Rounds::chain()).
enum Kind : uint32_t { kReady = 0, kDone = 1, kChunk = 2 };

// What the caller's stream tells the watchdog (host-mapped, written by memory operations).
struct Watch {
  uint64_t waiting;  // 0, or the group of waits the stream reached: kind << 32 | (group + 1)
  uint64_t passed;   // 1 once a group of waits passed; the watchdog swaps it back to 0
};

// Every memory-operation write has the default flags (a memory barrier before it): the H200
// machines' driver refuses CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER with
// CUDA_ERROR_INVALID_VALUE for every kind of memory, 32- and 64-bit writes alike
// (tools/probe/memop_host.cu).
constexpr unsigned kWrite = CU_STREAM_WRITE_VALUE_DEFAULT;

inline uint32_t* low_half(uint64_t* word) { return reinterpret_cast<uint32_t*>(word); }
inline uint32_t* high_half(uint64_t* word) { return reinterpret_cast<uint32_t*>(word) + 1; }

inline CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// The per-communicator state: the flags, the streams and events, the watchdog.
class CeState final : public AlgorithmState {
 public:
  explicit CeState(CollContext& ctx);  // collective over the communicator
  ~CeState() override;
  CeState(const CeState&) = delete;
  CeState& operator=(const CeState&) = delete;

  // The communicator lost a peer (monitor thread): the watchdog releases every wait.
  void abort() override;

  // Why ce cannot run on this communicator ("": it can); the same on every rank.
  const std::string& problem() const { return problem_; }
  // Throws once a release has ended the state's waits early.
  void check_usable() const;
  // Starts the watchdog thread on the first call.
  void start();

  uint64_t* word(Kind kind, int world) const {
    return flags_ + static_cast<size_t>(kind) * static_cast<size_t>(nranks_) +
           static_cast<size_t>(world);
  }
  int streams() const { return static_cast<int>(side_.size()); }
  cudaStream_t side(int k) const { return side_[static_cast<size_t>(k)]; }
  cudaEvent_t fork_event() const { return fork_; }
  cudaEvent_t join_event(int k) const { return joined_[static_cast<size_t>(k)]; }
  // The stream of this rank's own block, and the events that fork it from and join it to
  // the caller's stream.
  cudaStream_t aside() const { return aside_; }
  cudaEvent_t aside_fork() const { return aside_fork_; }
  cudaEvent_t aside_join() const { return aside_join_; }
  Watch* watch() const { return timeout_ms_ > 0 ? watch_dev_ : nullptr; }
  // The number of a group of waits on these world ranks' words (the same list, the same
  // number), and the list of a number.
  uint32_t group_of(const std::vector<int>& worlds);
  std::vector<int> group(uint32_t id);

  void write32(cudaStream_t stream, uint32_t* addr, uint32_t value, unsigned flags) const {
    SYMCOMM_CU(drv_, cuStreamWriteValue32(stream, dptr(addr), value, flags));
  }
  void write64(cudaStream_t stream, uint64_t* addr, uint64_t value, unsigned flags) const {
    SYMCOMM_CU(drv_, cuStreamWriteValue64(stream, dptr(addr), value, flags));
  }
  void wait_geq(cudaStream_t stream, uint64_t* word, uint64_t value) const {
    // GEQ compares as (int64_t)(*word - value) >= 0: for value 1, a released word (high
    // half 1) passes.
    SYMCOMM_CU(drv_, cuStreamWaitValue64(stream, dptr(word), value, CU_STREAM_WAIT_VALUE_GEQ));
  }

 private:
  void create_resources(CollContext& ctx, int streams);
  void create_streams(int count);
  std::string try_memops();
  void destroy();
  void watch_loop();
  // The watchdog's body threw: its waits are released and the communicator fails.
  void watchdog_failed(symcommResult_t code, const std::string& why);
  void timed_out(uint64_t waiting, double seconds);
  void release(const char* why);  // with mutex_ held
  // The writes of a release: `first`, this rank's signals on the others marked failed,
  // then its own words released; later, its own words again (see watch_loop).
  void write_release(bool first);

  const CudaDriver& drv_;
  Bootstrap& bootstrap_;
  const int device_, rank_, nranks_;
  const int64_t timeout_ms_;  // SYMCOMM_WAIT_TIMEOUT, read once per communicator
  std::string problem_;
  uint64_t* flags_ = nullptr;  // symmetric
  // This rank's done word on every other rank, as mapped here (nullptr: not reachable).
  std::vector<uint64_t*> peer_done_;
  std::vector<cudaStream_t> side_;
  cudaEvent_t fork_ = nullptr;
  std::vector<cudaEvent_t> joined_;
  cudaStream_t aside_ = nullptr;
  cudaEvent_t aside_fork_ = nullptr, aside_join_ = nullptr;
  cudaStream_t release_stream_ = nullptr;
  Watch* watch_ = nullptr;      // host-mapped: the host's address
  Watch* watch_dev_ = nullptr;  // and the device's
  DeviceError* error_ = nullptr;  // the backend's record, host address (nullptr: not found)

  std::mutex groups_mutex_;
  std::vector<std::vector<int>> groups_;  // under groups_mutex_

  std::once_flag started_;
  std::thread watchdog_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false, aborted_ = false;  // under mutex_
  std::atomic<bool> released_{false}, timed_out_{false};
};

}  // namespace symcomm::ce
