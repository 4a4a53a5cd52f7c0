// One-sided communication in the host memory space: CPU copies and CPU atomics on the
// shared-memory heap. Every operation completes before the call returns; waits are bounded
// by SYMCOMM_WAIT_TIMEOUT (unless it is 0) and end when the communicator is aborted.
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/param.h"
#include "rma/rma.h"
#include "rma/wait.h"

namespace symcomm {

namespace {

class HostRma final : public RmaBackend {
 public:
  explicit HostRma(const Topology& topology)
      : rank_(topology.rank), timeout_(std::chrono::milliseconds(wait_timeout_ms())) {}

  void put(void* dst, const void* src, size_t bytes, symcommEngine_t, symcommStream_t) override {
    std::memcpy(dst, src, bytes);
  }
  void get(void* dst, const void* src, size_t bytes, symcommEngine_t, symcommStream_t) override {
    std::memcpy(dst, src, bytes);
  }
  void signal(uint64_t* sig, uint64_t value, symcommSignalOp_t op, symcommStream_t) override {
    // Release: the data copied before is visible to whoever acquires the signal.
    if (op == symcommSignalAdd) __atomic_fetch_add(sig, value, __ATOMIC_RELEASE);
    else __atomic_store_n(sig, value, __ATOMIC_RELEASE);
  }
  void atomic(uint64_t* word, uint64_t operand, uint64_t desired, bool compare_swap,
              uint64_t* result, symcommStream_t) override {
    if (compare_swap) {
      __atomic_compare_exchange_n(word, &operand, desired, false, __ATOMIC_SEQ_CST,
                                  __ATOMIC_SEQ_CST);
      *result = operand;
    } else {
      *result = __atomic_fetch_add(word, operand, __ATOMIC_SEQ_CST);
    }
  }
  void wait(uint64_t* sig, symcommCmp_t cmp, uint64_t value, symcommStream_t) override {
    wait_until(sig, cmp, value);
  }
  void set_progress(std::function<void()> progress) override { progress_ = std::move(progress); }
  void wait_counted(uint64_t* const* words, int n, uint64_t* counter, symcommStream_t) override {
    const uint64_t target = ++*counter;  // only this rank's calls touch it
    for (int i = 0; i < n; ++i) wait_until(words[i], symcommCmpGe, target);
  }
  void quiet(symcommStream_t) override { std::atomic_thread_fence(std::memory_order_seq_cst); }
  void synchronize(symcommStream_t) override {}  // everything completed in its call

  double time_us(symcommStream_t, const std::function<void()>& work) override {
    const auto start = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
        .count();
  }

  void barrier(const BarrierArgs& a, symcommStream_t) override {
    uint64_t epoch = ++epochs_[static_cast<size_t>(a.id)];
    try {
      arrive(a, epoch);
      for (int i = 0; i < a.team.size; ++i) {
        int peer = a.team.world_of(i);
        wait_until(&a.slots[a.rank][peer], symcommCmpGe, epoch, peer);
      }
    } catch (...) {
      // This barrier failed here: withdraw the arrival, so that a member that comes late
      // waits (until its own bound) instead of passing on it into a call this rank has left.
      try {
        arrive(a, 0);
        // Applied at members on other nodes before this call returns: the withdrawal is a
        // message, which may still be on its way when the call has failed here.
        a.transports->quiet(nullptr);
      } catch (const Error&) {
        // A member reached by network is gone too: nothing to withdraw there.
      }
      barrier_failed_.store(true, std::memory_order_release);
      throw;
    }
  }

  void clear(void* local, size_t bytes) override { std::memset(local, 0, bytes); }
  void reset_epoch(symcommTeam_t id) override { epochs_[static_cast<size_t>(id)] = 0; }
  void raise_recorded_error() override {}  // host waits throw where they fail
  void abort() override { aborted_.store(true); }
  bool aborted() const override { return aborted_.load(); }
  bool barrier_failed() const override { return barrier_failed_.load(std::memory_order_acquire); }
  void fill_device_comm(DeviceComm&, symcommTeam_t, const Team&) override {
    SYMCOMM_THROW(symcommNotSupported, "device handles need the cuda memory space");
  }

 private:
  // This rank's slot on every member of the barrier's team := value (its arrival; 0 takes
  // it back: every barrier's epoch is at least 1).
  // A member reached by network gets it as a signal, applied after everything this rank
  // sent it before.
  static void arrive(const BarrierArgs& a, uint64_t value) {
    for (int i = 0; i < a.team.size; ++i) {
      const int member = a.team.world_of(i);
      if (uint64_t* slots = a.slots[member])
        __atomic_store_n(&slots[a.rank], value, __ATOMIC_RELEASE);
      else
        a.transports->to(member).signal(member, &a.own[a.rank], value, symcommSignalSet, nullptr);
    }
  }

  // `missing`: in a barrier, the member whose arrival the word shows (see throw_wait_error).
  void wait_until(uint64_t* word, symcommCmp_t cmp, uint64_t value, int missing = -1) {
    Clock::time_point start = Clock::now();
    for (uint64_t spins = 0;; ++spins) {
      uint64_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
      if (compare(seen, cmp, value)) return;
      // A peer on another node sets the word by a message: handle what has arrived here.
      if (progress_ && spins % 16 == 0) progress_();
      if (spins % 1024 != 1023) continue;
      if (aborted_.load())
        throw_wait_error(symcommPeerLost, rank_, word, cmp, value, seen,
                         "the communicator was aborted", missing);
      // A bound of 0 is no bound, as on the device.
      if (timeout_ != Clock::duration::zero() && Clock::now() - start > timeout_)
        throw_wait_error(symcommTimeout, rank_, word, cmp, value, seen,
                         "SYMCOMM_WAIT_TIMEOUT passed", missing);
      std::this_thread::yield();
    }
  }

  int rank_;
  std::function<void()> progress_;  // Transports::progress, where some peer has one to drive
  const Clock::duration timeout_;  // SYMCOMM_WAIT_TIMEOUT, read once per communicator; 0: none
  std::array<uint64_t, SYMCOMM_MAX_TEAMS> epochs_{};
  std::atomic<bool> aborted_{false};
  std::atomic<bool> barrier_failed_{false};  // a barrier's wait failed
};

}  // namespace

std::unique_ptr<RmaBackend> make_host_rma(const Topology& topology) {
  return std::make_unique<HostRma>(topology);
}

}  // namespace symcomm
