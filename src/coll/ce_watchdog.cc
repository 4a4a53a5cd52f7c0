// The ce watchdog: a thread per communicator (from its first ce call) that releases every
// flag wait when a wait stays blocked past SYMCOMM_WAIT_TIMEOUT or the communicator loses a
// peer, and names the members whose signal never came (docs/coll/ce.md, "What bounds the
// waits").
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/cuda_runtime_check.h"
#include "base/log.h"
#include "base/thread_guard.h"
#include "coll/ce_state.h"

namespace symcomm::ce {

namespace {

using Clock = std::chrono::steady_clock;

const char* kind_name(uint64_t kind) {
  return kind == kReady ? "ready" : kind == kDone ? "done" : "chunk";
}

// The high half a released rank writes into its done word on every other rank. Waits
// compare cyclically ((int64_t)(*word - value) >= 0): with 0xC0000000 above any low half, a
// word is some 2^62 behind every value a wait asks for (0x80000000 would put it just
// ahead of the values above its low half).
constexpr uint32_t kFailed = 0xC0000000u;
bool failed(uint64_t word) { return (word >> 32) == kFailed; }

}  // namespace

void CeState::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
  }
  wake_.notify_all();
}

void CeState::start() {
  std::call_once(started_, [this] {
    watchdog_ = std::thread([this] {
      LogRankScope scope(rank_);
      run_guarded([this] { watch_loop(); },
                  [this](symcommResult_t code, const std::string& why) {
                    watchdog_failed(code, why);
                  });
    });
  });
}

void CeState::watchdog_failed(symcommResult_t code, const std::string& why) {
  {
    // No watchdog bounds the waits any more: they are let go now.
    std::lock_guard<std::mutex> lock(mutex_);
    if (!released_) release("its watchdog failed");
  }
  bootstrap_.fail(code, format("the ce watchdog of rank %d failed: %s", rank_, why.c_str()));
}

void CeState::watch_loop() {
  const auto poll = std::chrono::milliseconds(std::clamp<int64_t>(timeout_ms_ / 10, 1, 100));
  const auto timeout = std::chrono::milliseconds(timeout_ms_);
  uint64_t seen = 0;
  Clock::time_point since = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  auto woken = [&] { return stop_ || (aborted_ && !released_); };
  for (;;) {
    thread_fault_point("ce watchdog");
    if (released_)
      wake_.wait_for(lock, std::chrono::milliseconds(100), woken);
    else if (timeout_ms_ > 0)
      wake_.wait_for(lock, poll, woken);
    else
      wake_.wait(lock, woken);
    if (stop_) return;
    if (aborted_ && !released_) {
      release("the communicator lost a peer");
      continue;
    }
    if (released_) {
      // A peer released later may have marked one of this rank's words failed after this
      // rank's release (see release()): released words are released again, every 100 ms.
      write_release(false);
      continue;
    }
    if (timeout_ms_ == 0) continue;
    // Blocked: the same wait at every look since `since`, and no group of waits passed.
    const uint64_t passed = __atomic_exchange_n(&watch_->passed, uint64_t{0}, __ATOMIC_ACQ_REL);
    const uint64_t waiting = __atomic_load_n(&watch_->waiting, __ATOMIC_ACQUIRE);
    const Clock::time_point now = Clock::now();
    if (passed != 0 || waiting == 0 || waiting != seen) {
      seen = waiting;
      since = now;
      continue;
    }
    if (now - since >= timeout)
      timed_out(waiting, std::chrono::duration<double>(now - since).count());
  }
}

uint32_t CeState::group_of(const std::vector<int>& worlds) {
  std::lock_guard<std::mutex> lock(groups_mutex_);
  for (size_t i = 0; i < groups_.size(); ++i)
    if (groups_[i] == worlds) return static_cast<uint32_t>(i);
  groups_.push_back(worlds);
  return static_cast<uint32_t>(groups_.size() - 1);
}

std::vector<int> CeState::group(uint32_t id) {
  std::lock_guard<std::mutex> lock(groups_mutex_);
  return id < groups_.size() ? groups_[id] : std::vector<int>{};
}

void CeState::timed_out(uint64_t waiting, double seconds) {
  const uint64_t kind = waiting >> 32;
  const std::vector<int> worlds = group(static_cast<uint32_t>(waiting & 0xffffffffu) - 1);
  // The members whose word is still 0 (all of the group where the words cannot be read);
  // a chain's wait is on one member's done word, which counts the chunks it sent.
  const Kind area = kind == kReady ? kReady : kDone;
  std::vector<int> missing = worlds;
  uint64_t observed = 0;
  if (kind <= kChunk) {
    std::vector<uint64_t> words(static_cast<size_t>(nranks_));
    try {
      DeviceScope guard(device_);
      SYMCOMM_CUDART(cudaMemcpyAsync(words.data(), word(area, 0),
                                     words.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                     release_stream_));
      SYMCOMM_CUDART(cudaStreamSynchronize(release_stream_));
      if (kind == kChunk) {
        if (!worlds.empty()) observed = words[static_cast<size_t>(worlds[0])];
      } else {
        missing.clear();
        for (int r : worlds)
          if (words[static_cast<size_t>(r)] == 0 || failed(words[static_cast<size_t>(r)]))
            missing.push_back(r);
      }
    } catch (const Error& e) {
      SYMCOMM_WARN("ce: cannot read the flags that held the wait back: %s", e.what());
    }
  }
  std::string ranks;
  for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  uint64_t* w = !missing.empty() && kind <= kChunk ? word(area, missing[0]) : nullptr;
  SYMCOMM_WARN("ce: this rank's stream waited %.1f s for the %s signal of rank(s) %s, more than "
               "SYMCOMM_WAIT_TIMEOUT%s: releasing every ce wait of the communicator",
               seconds, kind_name(kind), ranks.empty() ? "(none missing)" : ranks.c_str(),
               failed(observed) ? " (that rank's ce waits had failed before)" : "");
  timed_out_.store(true, std::memory_order_release);
  if (error_ && __atomic_load_n(&error_->code, __ATOMIC_ACQUIRE) == 0) {
    // As record_error() does on the device: the fields, then the code.
    error_->pe = rank_;
    error_->cmp = symcommCmpGe;
    error_->block = -1;
    error_->address = reinterpret_cast<uintptr_t>(w);
    // A word that holds a wait back is 0; a chain's counts the chunks that came.
    error_->expected = observed + 1;
    error_->observed = observed;
    __atomic_store_n(&error_->code, static_cast<int32_t>(symcommTimeout), __ATOMIC_RELEASE);
  }
  release("SYMCOMM_WAIT_TIMEOUT passed");
}

void CeState::release(const char* why) {
  released_.store(true, std::memory_order_release);
  SYMCOMM_INFO("ce: releasing the waits of this communicator (%s)", why);
  write_release(true);
}

void CeState::write_release(bool first) {
  try {
    DeviceScope guard(device_);
    if (first) {
      // First this rank's signals on the other ranks stop counting: once released, its
      // stream runs on and signals what it copies, which is not what they wait for (a
      // chain's member would forward chunks it never received). A high half of kFailed
      // holds back every wait on the word, whatever its low half becomes: a peer that waits
      // on it ends at its own timeout, whose release (1 in the high half) passes it. The
      // writes are on this stream before the release of this rank's own waits.
      for (uint64_t* w : peer_done_)
        if (w) write32(release_stream_, high_half(w), kFailed, CU_STREAM_WRITE_VALUE_DEFAULT);
    } else if (cudaStreamQuery(release_stream_) != cudaSuccess) {
      return;  // the earlier writes first: a queue that cannot drain would block this thread
    }
    for (int i = 0; i < 2 * nranks_; ++i)
      write32(release_stream_, high_half(flags_ + i), 1, CU_STREAM_WRITE_VALUE_DEFAULT);
  } catch (const Error& e) {
    SYMCOMM_WARN("ce: releasing the waits failed: %s", e.what());
  }
}

}  // namespace symcomm::ce
