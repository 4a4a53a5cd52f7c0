// The "ce" algorithm: every collective as copy-engine copies (cudaMemcpyAsync) into the
// members' memory, synchronised with stream memory operations (cuStreamWriteValue32,
// cuStreamWaitValue64): no kernel moves data or synchronises, so the SMs stay free for
// computation that overlaps the collective. The one exception is a reduction's arithmetic:
// once every member's piece has arrived, one local kernel combines them (as in "copy").
// GPUs only (the cuda memory space).
//
// Rounds. A collective is one round (a symmetric receive buffer, written in place) or
// several (through the workspace in pieces, one slot per member, as in "copy"). In a round,
// for every pair of a sender s and a receiver r:
//   r, caller's stream:  ready[r] on s := 1          r's slot (or receive buffer) is free
//   s, caller's stream:  wait ready[r] >= 1
//   s, a side stream:    copy to r; ready[r] := 0; done[s] on r := 1
//   r, caller's stream:  wait done[s] >= 1; done[s] := 0; copies out of the slots
// ready and done are 64-bit words, one per world rank, in a symmetric area of every rank.
// The values are constants and every round leaves the words at 0, so every call issues the
// same operations: calls follow each other without host synchronisation, and a captured
// CUDA graph replays correctly (nothing on the host counts calls). A reset cannot overtake
// the peer's next write of the word: the peer writes it again only after a signal that
// this rank issues after the reset, on the same stream, behind the signal's memory barrier.
//
// Streams. By default the copies to the members run one after another on the caller's
// stream: one copy engine stream to one peer at a time moves 386 GB/s per GPU in an
// all-to-all on 4 x H200, and spreading the peers over four streams (the earlier default)
// only 230 (tools/probe/ce_a2a.cu and symcomm-bench coll, 2026-11-21). SYMCOMM_COLL_CE_STREAMS
// > 1 spreads them over that many side streams (made with the communicator). This rank's
// own block (a local copy, which nobody waits for) runs beside the round on a side stream of
// its own. Side streams fork from the caller's stream and join it again through events,
// which stream capture records as graph edges. Only the caller's stream waits on flags, and
// only while none of this rank's copies to members are in flight: a blocked wait cannot hold
// up the copies that peers wait for, even where streams share a hardware queue (the local
// copy may be held up; no peer waits for it).
//
// Bounding the waits. cuStreamWaitValue64 has no bound of its own. Signals and resets write
// the low 32 bits of a word, waits compare all 64 (>= 1), and releasing a word writes 1 into
// its high half, which nothing clears: every wait on it, now or later, passes. The state
// releases all its words when the communicator loses a peer (abort()) and when a wait has
// been blocked for SYMCOMM_WAIT_TIMEOUT: before a group of waits (on the words of several
// members) the caller's stream writes which group it is into host-mapped memory, and after
// it that it passed them (three writes per group, whatever its size: each memory operation
// costs about 2.5 us); a watchdog thread that sees the same group and nothing passed for the
// timeout reads the group's words to name the members that never signalled, records
// symcommTimeout in the backend's DeviceError record (so the next call on the communicator
// reports it, like a failed wait kernel) and releases. A group is a list of world ranks,
// numbered once per communicator as it is first used, so every call (and a graph replay)
// writes the same values. Releasing is one memory operation per word on a stream of its own
// (of the highest priority), from the watchdog thread. Released words stay released: the
// state refuses further calls. A released stream runs on and signals what it copies, so a
// release first marks this rank's done word on every other rank failed (kFailed), which
// holds back their waits on it until their own bound, rather than let them pass on data
// this rank never had (a broadcast's chain forwards what it received).
//
// Broadcast into symmetric buffers on teams of 3 or more is a pipelined chain of chunks
// (Rounds::chain): every member receives the message once and sends it once.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/cuda_driver.h"
#include "base/cuda_runtime_check.h"
#include "base/log.h"
#include "base/param.h"
#include "base/thread_guard.h"
#include "coll/coll.h"
#include "rma/wait.h"

namespace symcomm {

namespace {

constexpr int kMaxStreams = 16;
const IntParam kStreams("SYMCOMM_COLL_CE_STREAMS", "1",
                        "streams over which a ce collective spreads its copies to peers, 1 to "
                        "16; 1: one after another on the caller's stream, the fastest on H200 "
                        "(read when a communicator is created)", 1, kMaxStreams);
const IntParam kChainChunks("SYMCOMM_COLL_CE_CHAIN_CHUNKS", "0",
                            "chunks of a ce broadcast's chain (teams of 3 or more, symmetric "
                            "receive buffers), 1 to 1024; 0: from the size and the team "
                            "(must be the same on every rank)", 0, 1024);

using Clock = std::chrono::steady_clock;

// A rank's area: ready[nranks], then done[nranks], indexed by the writer's world rank.
// kChunk is no area of its own: the waits of a broadcast's chain on a done word, which
// counts chunks there (see chain()).
enum Kind : uint32_t { kReady = 0, kDone = 1, kChunk = 2 };
const char* kind_name(uint64_t kind) {
  return kind == kReady ? "ready" : kind == kDone ? "done" : "chunk";
}

// What the caller's stream tells the watchdog (host-mapped, written by memory operations).
struct Watch {
  uint64_t waiting;  // 0, or the group of waits the stream reached: kind << 32 | (group + 1)
  uint64_t passed;   // 1 once a group of waits passed; the watchdog swaps it back to 0
};

// Every memory-operation write has the default flags (a memory barrier before it): the H200
// machines' driver refuses CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER with
// CUDA_ERROR_INVALID_VALUE for every kind of memory, 32- and 64-bit writes alike
// (tools/probe/memop_host.cu, 2026-11-21).
constexpr unsigned kWrite = CU_STREAM_WRITE_VALUE_DEFAULT;

// The high half a released rank writes into its done word on every other rank. Waits
// compare cyclically ((int64_t)(*word - value) >= 0): with 0xC0000000 above any low half, a
// word is some 2^62 behind every value a wait asks for (0x80000000 would put it just
// ahead of the values above its low half).
constexpr uint32_t kFailed = 0xC0000000u;
bool failed(uint64_t word) { return (word >> 32) == kFailed; }

uint32_t* low_half(uint64_t* word) { return reinterpret_cast<uint32_t*>(word); }
uint32_t* high_half(uint64_t* word) { return reinterpret_cast<uint32_t*>(word) + 1; }

CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

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

CeState::CeState(CollContext& ctx)
    : drv_(cuda_driver()), bootstrap_(ctx.rma().bootstrap()), device_(ctx.topology().device), rank_(ctx.topology().rank),
      nranks_(ctx.topology().nranks), timeout_ms_(wait_timeout_ms()) {
  DeviceScope guard(device_);
  const size_t bytes = (2 * sizeof(uint64_t) * static_cast<size_t>(nranks_) + 255) / 256 * 256;
  flags_ = static_cast<uint64_t*>(ctx.heap().malloc_internal(bytes));
  ctx.backend().clear(flags_, bytes);
  peer_done_.assign(static_cast<size_t>(nranks_), nullptr);
  for (int r = 0; r < nranks_; ++r)
    if (r != rank_)
      peer_done_[static_cast<size_t>(r)] =
          static_cast<uint64_t*>(ctx.heap().peer_ptr(word(kDone, rank_), r));

  // What this rank can do, agreed by all so that every member runs ce or none does: 0 yes,
  // 1 no 64-bit stream memory operations, 3 the streams or the memory operations failed
  // here. (SYMCOMM_COLL_CE_STREAMS was checked when the communicator's creation began.)
  const int64_t streams = kStreams.get();
  CUdevice dev = 0;
  SYMCOMM_CU(drv_, cuDeviceGet(&dev, device_));
  int memops = 0;
  if (drv_.cuDeviceGetAttribute(&memops, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                                dev) != CUDA_SUCCESS)
    memops = 0;
  int32_t mine = memops == 0 ? 1 : 0;
  std::string failure;
  if (mine == 0) {
    try {
      create_resources(ctx, static_cast<int>(streams));
      failure = try_memops();
    } catch (const Error& e) {
      failure = e.what();
    }
    if (!failure.empty()) mine = 3;
  }
  std::vector<int32_t> all(static_cast<size_t>(nranks_));
  try {
    ctx.rma().bootstrap().allgather(&mine, sizeof mine, all.data());
  } catch (...) {
    destroy();  // no destructor runs for a constructor that throws
    throw;
  }
  for (int r = 0; r < nranks_ && problem_.empty(); ++r) {
    const int32_t v = all[static_cast<size_t>(r)];
    if (v == 1)
      problem_ = format("rank %d's GPU has no 64-bit stream memory operations "
                        "(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS)", r);
    else if (v == 3)
      problem_ = r == rank_ ? failure
                            : format("rank %d could not make its streams or run stream memory "
                                     "operations (see its log)", r);
  }
  if (!problem_.empty()) {
    if (mine == 3) SYMCOMM_WARN("no ce collectives on this communicator: %s", failure.c_str());
    else SYMCOMM_INFO("no ce collectives on this communicator: %s", problem_.c_str());
    destroy();
  }
}

void CeState::create_resources(CollContext& ctx, int streams) {
  create_streams(streams);
  void* host = nullptr;
  SYMCOMM_CUDART(cudaHostAlloc(&host, sizeof(Watch), cudaHostAllocMapped));
  watch_ = static_cast<Watch*>(host);
  *watch_ = Watch{};
  SYMCOMM_CUDART(cudaHostGetDevicePointer(reinterpret_cast<void**>(&watch_dev_), host, 0));
  // Where a timeout is recorded: the backend's DeviceError, which every later call on the
  // communicator reports (and clears) as it does for wait kernels.
  DeviceComm world{};
  ctx.backend().fill_device_comm(world, SYMCOMM_TEAM_WORLD,
                                 ctx.rma().teams().get(SYMCOMM_TEAM_WORLD));
  cudaPointerAttributes attributes{};
  if (world.error && cudaPointerGetAttributes(&attributes, world.error) == cudaSuccess &&
      attributes.hostPointer)
    error_ = static_cast<DeviceError*>(attributes.hostPointer);
  else
    SYMCOMM_WARN("ce: the device error record has no host address: a timeout is only logged");
}

// The kinds of memory operation ce issues, once each, leaving every word as it is: a 32-bit
// write and a 64-bit wait on the flags, a 64-bit write to host-mapped memory (the
// watchdog's). "" if they all completed, else what failed.
std::string CeState::try_memops() {
  try {
    write32(release_stream_, low_half(flags_), 0, CU_STREAM_WRITE_VALUE_DEFAULT);
    wait_geq(release_stream_, flags_, 0);  // holds: the word is 0
    write64(release_stream_, &watch_dev_->waiting, 0, kWrite);
    SYMCOMM_CUDART(cudaStreamSynchronize(release_stream_));
  } catch (const Error& e) {
    return format("stream memory operations failed here: %s", e.what());
  }
  return "";
}

void CeState::create_streams(int count) {
  for (int k = 0; k < count; ++k) {
    cudaStream_t s = nullptr;
    cudaEvent_t e = nullptr;
    SYMCOMM_CUDART(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    side_.push_back(s);
    SYMCOMM_CUDART(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    joined_.push_back(e);
  }
  SYMCOMM_CUDART(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  SYMCOMM_CUDART(cudaStreamCreateWithFlags(&aside_, cudaStreamNonBlocking));
  SYMCOMM_CUDART(cudaEventCreateWithFlags(&aside_fork_, cudaEventDisableTiming));
  SYMCOMM_CUDART(cudaEventCreateWithFlags(&aside_join_, cudaEventDisableTiming));
  int least = 0, greatest = 0;
  SYMCOMM_CUDART(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  SYMCOMM_CUDART(cudaStreamCreateWithPriority(&release_stream_, cudaStreamNonBlocking, greatest));
}

void CeState::destroy() {
  // Clean-up must not throw; a failure is logged. Work still queued keeps what it uses
  // until it completes (streams and events are released then).
  auto check = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) SYMCOMM_WARN("ce: %s failed: %s", what, cudaGetErrorString(e));
  };
  for (cudaStream_t s : side_) check(cudaStreamDestroy(s), "cudaStreamDestroy");
  for (cudaEvent_t e : joined_) check(cudaEventDestroy(e), "cudaEventDestroy");
  if (fork_) check(cudaEventDestroy(fork_), "cudaEventDestroy");
  if (aside_) check(cudaStreamDestroy(aside_), "cudaStreamDestroy");
  if (aside_fork_) check(cudaEventDestroy(aside_fork_), "cudaEventDestroy");
  if (aside_join_) check(cudaEventDestroy(aside_join_), "cudaEventDestroy");
  if (release_stream_) check(cudaStreamDestroy(release_stream_), "cudaStreamDestroy");
  if (watch_) check(cudaFreeHost(watch_), "cudaFreeHost");
  side_.clear();
  joined_.clear();
  fork_ = aside_fork_ = aside_join_ = nullptr;
  aside_ = release_stream_ = nullptr;
  watch_ = watch_dev_ = nullptr;
}

CeState::~CeState() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  destroy();
}

void CeState::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
  }
  wake_.notify_all();
}

void CeState::check_usable() const {
  if (!released_.load(std::memory_order_acquire)) return;
  if (timed_out_.load(std::memory_order_acquire))
    SYMCOMM_THROW(symcommTimeout,
                  "a ce wait of this communicator passed SYMCOMM_WAIT_TIMEOUT and its flags were "
                  "released: ce collectives cannot run on it any more (finalize it)");
  SYMCOMM_THROW(symcommPeerLost,
                "the communicator lost a peer and the flags of its ce collectives were released");
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

// One copy of `bytes` bytes (dst as mapped here).
struct Copy {
  char* dst;
  const char* src;
  size_t bytes;
};

// What a round moves (see the top of the file).
struct Round {
  std::vector<std::pair<int, Copy>> out;  // team member, and the copy into its memory
  std::vector<int> in;                   // team members that write here
  std::vector<Copy> own;                 // local copies, on the side while the round runs
  std::vector<Copy> unpack;              // local copies once the members' data arrived
};

// Issues rounds on the caller's stream and the state's side streams.
class Rounds {
 public:
  // A broadcast as a pipelined chain (see CeAlgorithm::broadcast): this member receives
  // from `prev` and sends to `next` (team ranks, -1: none).
  struct Chain {
    int prev = -1, next = -1;
    const char* src = nullptr;  // what this member sends: the root's send, else its recv
    char* dst = nullptr;        // next's receive buffer, as mapped here
    size_t bytes = 0, chunk = 0;
    Copy own{};                 // the root's copy of its send into its recv (0 bytes: none)
  };

  Rounds(const CollArgs& a, CollContext& ctx, CeState& s)
      : a_(a), ctx_(ctx), s_(s), main_(a.stream), me_(a.team.world_of(a.me)) {}

  // The chain, on the caller's stream alone:
  //   prev's ready := 1                       (this member's receive buffer is free)
  //   wait ready[next] >= 1; ready[next] := 0
  //   for each chunk c: wait done[prev] >= c + 1; copy chunk c to next; next's done := c + 1
  //   done[prev] := 0
  // The done words count chunks in a call and go back to 0 at its end: prev writes the
  // word again only after this member's next ready, which follows the reset on this
  // stream; next writes ready again only after the last chunk's signal, which follows the
  // reset of ready here (the signal's barrier orders it). The last member waits only for
  // the last chunk. Every call issues the same operations (graphs replay it).
  void chain(const Chain& ch) {
    if (ch.own.bytes) {
      SYMCOMM_CUDART(cudaEventRecord(s_.aside_fork(), main_));
      SYMCOMM_CUDART(cudaStreamWaitEvent(s_.aside(), s_.aside_fork(), 0));
      put(ch.own, s_.aside());
    }
    if (ch.prev >= 0)
      s_.write32(main_, low_half(peer(kReady, ch.prev)), 1, CU_STREAM_WRITE_VALUE_DEFAULT);
    if (ch.next >= 0) wait_all(kReady, {ch.next}, true);
    const size_t chunks = (ch.bytes + ch.chunk - 1) / ch.chunk;
    uint64_t* from = ch.prev >= 0 ? s_.word(kDone, a_.team.world_of(ch.prev)) : nullptr;
    if (from) announce(kChunk, {a_.team.world_of(ch.prev)});
    for (size_t c = 0; c < chunks; ++c) {
      if (from && (ch.next >= 0 || c + 1 == chunks)) s_.wait_geq(main_, from, c + 1);
      if (ch.next < 0) continue;
      const size_t off = c * ch.chunk;
      put({ch.dst + off, ch.src + off, std::min(ch.chunk, ch.bytes - off)}, main_);
      s_.write32(main_, low_half(peer(kDone, ch.next)), static_cast<uint32_t>(c + 1),
                 CU_STREAM_WRITE_VALUE_DEFAULT);
    }
    if (from) {
      s_.write32(main_, low_half(from), 0, kWrite);
      passed();
    }
    if (ch.own.bytes) {
      SYMCOMM_CUDART(cudaEventRecord(s_.aside_join(), s_.aside()));
      SYMCOMM_CUDART(cudaStreamWaitEvent(main_, s_.aside_join(), 0));
    }
  }

  void run(const Round& r) {
    // This rank's own block needs no flag: it is copied beside the round.
    if (!r.own.empty()) {
      SYMCOMM_CUDART(cudaEventRecord(s_.aside_fork(), main_));
      SYMCOMM_CUDART(cudaStreamWaitEvent(s_.aside(), s_.aside_fork(), 0));
      for (const Copy& c : r.own) put(c, s_.aside());
    }
    // The slots (or the receive buffer) of the members that write here are free.
    for (int j : r.in)
      s_.write32(main_, low_half(peer(kReady, j)), 1, CU_STREAM_WRITE_VALUE_DEFAULT);
    std::vector<int> to;
    for (const auto& o : r.out) to.push_back(o.first);
    wait_all(kReady, to, false);
    spread(r.out.size(), [&](size_t i, cudaStream_t stream) {
      const auto& [j, copy] = r.out[i];
      put(copy, stream);
      // The reset is ordered before the signal by the signal's barrier; the peer writes the
      // word again only after it has seen the signal.
      s_.write32(stream, low_half(s_.word(kReady, a_.team.world_of(j))), 0, kWrite);
      s_.write32(stream, low_half(peer(kDone, j)), 1, CU_STREAM_WRITE_VALUE_DEFAULT);
    });
    wait_all(kDone, r.in, true);
    spread(r.unpack.size(), [&](size_t i, cudaStream_t stream) { put(r.unpack[i], stream); });
    if (!r.own.empty()) {
      SYMCOMM_CUDART(cudaEventRecord(s_.aside_join(), s_.aside()));
      SYMCOMM_CUDART(cudaStreamWaitEvent(main_, s_.aside_join(), 0));
    }
  }

 private:
  // This rank's word of `kind` on team member j, as mapped here.
  uint64_t* peer(Kind kind, int j) const {
    return reinterpret_cast<uint64_t*>(ctx_.on(a_, s_.word(kind, me_), j));
  }

  void put(const Copy& c, cudaStream_t stream) {
    if (c.bytes) ctx_.backend().put(c.dst, c.src, c.bytes, symcommEngineCe, stream);
  }

  // The caller's stream waits for the words of `kind` of `members` (team ranks), telling
  // the watchdog which group of waits it is in; `reset`: each word back to 0 once passed.
  void wait_all(Kind kind, const std::vector<int>& members, bool reset) {
    if (members.empty()) return;
    std::vector<int> worlds;
    for (int j : members) worlds.push_back(a_.team.world_of(j));
    announce(kind, worlds);
    for (int world : worlds) s_.wait_geq(main_, s_.word(kind, world), 1);
    if (reset)
      for (int world : worlds) s_.write32(main_, low_half(s_.word(kind, world)), 0, kWrite);
    passed();
  }
  // The caller's stream tells the watchdog that it reaches a group of waits, and that it
  // passed them.
  void announce(Kind kind, const std::vector<int>& worlds) {
    if (Watch* w = s_.watch())
      s_.write64(main_, &w->waiting, uint64_t{kind} << 32 | (uint64_t{s_.group_of(worlds)} + 1),
                 kWrite);
  }
  void passed() {
    if (Watch* w = s_.watch()) {
      s_.write64(main_, &w->passed, 1, kWrite);
      s_.write64(main_, &w->waiting, 0, kWrite);
    }
  }

  // issue(i, stream) for items i < count: on the caller's stream for one item, else spread
  // over the side streams between a fork and a join.
  template <typename F>
  void spread(size_t count, F&& issue) {
    if (count == 0) return;
    const size_t ks = std::min(count, static_cast<size_t>(s_.streams()));
    const int k = static_cast<int>(ks);
    if (k == 1) {
      for (size_t i = 0; i < count; ++i) issue(i, main_);
      return;
    }
    SYMCOMM_CUDART(cudaEventRecord(s_.fork_event(), main_));
    for (int q = 0; q < k; ++q) SYMCOMM_CUDART(cudaStreamWaitEvent(s_.side(q), s_.fork_event(), 0));
    for (size_t i = 0; i < count; ++i) issue(i, s_.side(static_cast<int>(i % ks)));
    for (int q = 0; q < k; ++q) {
      SYMCOMM_CUDART(cudaEventRecord(s_.join_event(q), s_.side(q)));
      SYMCOMM_CUDART(cudaStreamWaitEvent(main_, s_.join_event(q), 0));
    }
  }

  const CollArgs& a_;
  CollContext& ctx_;
  CeState& s_;
  cudaStream_t main_;
  int me_;  // world rank
};

constexpr CollDescriptor kDescriptor = [] {
  CollDescriptor d{"ce", "copy engines and stream memory operations"};
  d.state = CollState::Own;
  return d;
}();

class CeAlgorithm final : public CollAlgorithm {
 public:
  CeAlgorithm() : CollAlgorithm(kDescriptor) {}

  Verdict own_conditions(const CollArgs&, const CollContext& ctx) const override {
    const CeState& s = ctx.state<CeState>(this);
    return s.problem().empty() ? Verdict::yes() : Verdict::no(s.problem());
  }

  std::unique_ptr<AlgorithmState> make_state(CollContext& ctx) override {
    if (ctx.space() != symcommSpaceCuda) return nullptr;
    return std::make_unique<CeState>(ctx);
  }

  void run(const CollArgs& a, CollContext& ctx) override {
    CeState& s = ctx.state<CeState>(this);
    s.check_usable();
    s.start();
    DeviceScope guard(ctx.topology().device);
    Rounds rounds(a, ctx, s);
    if (a.op == CollOp::AllToAllv) return gather_v(a, ctx, rounds);
    const size_t block = a.count * a.elem;  // bytes of one block (see each operation)
    if (block == 0) return;
    switch (a.op) {
      case CollOp::AllToAllv: break;  // above
      case CollOp::AllGather: return gather(a, ctx, rounds, block, false);
      case CollOp::AllToAll: return gather(a, ctx, rounds, block, true);
      case CollOp::Broadcast: return broadcast(a, ctx, rounds, block);
      case CollOp::ReduceScatter: return reduce(a, ctx, rounds, block, true);
      case CollOp::AllReduce: return reduce(a, ctx, rounds, block, false);
    }
  }

 private:
  // The other members, starting after this one (so that not everyone writes to the same
  // member first).
  static std::vector<int> peers(const CollArgs& a) {
    std::vector<int> v;
    for (int d = 1; d < a.team.size; ++d) v.push_back((a.me + d) % a.team.size);
    return v;
  }

  static size_t at(int j, size_t bytes) { return static_cast<size_t>(j) * bytes; }

  // All-gather (my send to every member's block `me`) or all-to-all (my block j to member j).
  static void gather(const CollArgs& a, CollContext& ctx, Rounds& rounds, size_t block,
                     bool to_all) {
    const int n = a.team.size;
    auto source = [&](int j) { return a.send + (to_all ? at(j, block) : 0); };
    char* mine = a.recv + at(a.me, block);
    const Copy own{mine, source(a.me), source(a.me) == mine ? 0 : block};
    if (ctx.addressable(a.recv, at(n, block))) {
      Round r;
      for (int j : peers(a)) {
        r.out.push_back({j, {ctx.on(a, mine, j), source(j), block}});
        r.in.push_back(j);
      }
      if (own.bytes) r.own.push_back(own);
      return rounds.run(r);
    }
    const size_t slot = ctx.workspace_slot(n, a.team.size);
    char* ws = ctx.workspace();
    for (size_t off = 0; off < block; off += slot) {
      const size_t len = std::min(slot, block - off);
      Round r;
      for (int j : peers(a)) {
        r.out.push_back({j, {ctx.on(a, ws + at(a.me, slot), j), source(j) + off, len}});
        r.in.push_back(j);
        r.unpack.push_back({a.recv + at(j, block) + off, ws + at(j, slot), len});
      }
      if (off == 0 && own.bytes) r.own.push_back(own);
      rounds.run(r);
    }
  }

  // All-to-all-v, always through the workspace (a sender does not know where its block goes
  // in the receiver's buffer). The counts are trusted, as by sm: the message from s to r
  // takes ceil(bytes / slot) rounds, which s and r both derive from their counts, and in
  // round t every pair with a piece t exchanges it. Counts that disagree end in
  // SYMCOMM_WAIT_TIMEOUT, or worse.
  static void gather_v(const CollArgs& a, CollContext& ctx, Rounds& rounds) {
    const int n = a.team.size;
    const size_t slot = ctx.workspace_slot(n, a.team.size);
    char* ws = ctx.workspace();
    auto out_bytes = [&](int j) { return a.send_counts[j] * a.elem; };
    auto in_bytes = [&](int j) { return a.recv_counts[j] * a.elem; };
    const Copy own{a.recv + a.recv_displs[a.me] * a.elem, a.send + a.send_displs[a.me] * a.elem,
                   out_bytes(a.me)};
    size_t longest = own.bytes ? 1 : 0;
    for (int j : peers(a)) longest = std::max({longest, out_bytes(j), in_bytes(j)});
    for (size_t off = 0; off < longest; off += slot) {
      Round r;
      for (int j : peers(a)) {
        if (out_bytes(j) > off)
          r.out.push_back({j, {ctx.on(a, ws + at(a.me, slot), j),
                               a.send + a.send_displs[j] * a.elem + off,
                               std::min(slot, out_bytes(j) - off)}});
        if (in_bytes(j) > off) {
          r.in.push_back(j);
          r.unpack.push_back({a.recv + a.recv_displs[j] * a.elem + off, ws + at(j, slot),
                              std::min(slot, in_bytes(j) - off)});
        }
      }
      if (off == 0 && own.bytes) r.own.push_back(own);
      rounds.run(r);
    }
  }

  // How many chunks a broadcast's chain cuts `bytes` into on a team of n: each chunk costs
  // a forwarding member three memory operations (some 5 us) and the last chunk crosses
  // n - 1 links, so for T the message's time on one link, (K + n - 2) (T / K + 5 us) is
  // least at K = sqrt((n - 2) T / 5 us).
  static size_t chain_chunk(size_t bytes, int n) {
    int64_t k = kChainChunks.get();
    if (k == 0) {
      const double link_us = static_cast<double>(bytes) / 390e3;  // 390 GB/s
      k = std::clamp<int64_t>(std::llround(std::sqrt((n - 2) * link_us / 5.0)), 1, 64);
    }
    const size_t unit = size_t{64} << 10;  // chunks of whole 64 KiB but the last
    const size_t chunk = (bytes + static_cast<size_t>(k) - 1) / static_cast<size_t>(k);
    return std::max(unit, (chunk + unit - 1) / unit * unit);
  }

  // A broadcast. Into symmetric receive buffers on teams of 3 or more, a pipelined chain:
  // the members in team order from the root, each copying chunk c into the next member's
  // receive buffer as soon as chunk c has reached its own (Rounds::chain), so every GPU
  // receives the message once and sends it once, where a root that copies to every member
  // sends it n - 1 times. On two members, and through the workspace, the root copies to
  // every member.
  static void broadcast(const CollArgs& a, CollContext& ctx, Rounds& rounds, size_t block) {
    const bool root = a.me == a.root;
    const Copy own{a.recv, a.send, root && a.send != a.recv ? block : 0};
    const int n = a.team.size;
    if (n >= 3 && ctx.addressable(a.recv, block)) {
      const int pos = (a.me - a.root + n) % n;  // place in the chain
      Rounds::Chain ch;
      ch.prev = pos > 0 ? (a.me + n - 1) % n : -1;
      ch.next = pos + 1 < n ? (a.me + 1) % n : -1;
      ch.src = root ? a.send : a.recv;
      ch.dst = ch.next >= 0 ? ctx.on(a, a.recv, ch.next) : nullptr;
      ch.bytes = block;
      ch.chunk = chain_chunk(block, n);
      ch.own = own;
      return rounds.chain(ch);
    }
    if (ctx.addressable(a.recv, block)) {
      Round r;
      if (root)
        for (int j : peers(a)) r.out.push_back({j, {ctx.on(a, a.recv, j), a.send, block}});
      else
        r.in.push_back(a.root);
      if (own.bytes) r.own.push_back(own);
      return rounds.run(r);
    }
    const size_t slot = ctx.workspace_slot(1, a.team.size);
    char* ws = ctx.workspace();
    for (size_t off = 0; off < block; off += slot) {
      const size_t len = std::min(slot, block - off);
      Round r;
      if (root) {
        for (int j : peers(a)) r.out.push_back({j, {ctx.on(a, ws, j), a.send + off, len}});
        if (off == 0 && own.bytes) r.own.push_back(own);
      } else {
        r.in.push_back(a.root);
        r.unpack.push_back({a.recv + off, ws, len});
      }
      rounds.run(r);
    }
  }

  // Reduce-scatter (my block j to member j's slot `me`) or all-reduce (my whole buffer to
  // every member's slot `me`, one shot as in "copy"), then one local reduction kernel over
  // the slots in team-rank order (the same result on every member).
  static void reduce(const CollArgs& a, CollContext& ctx, Rounds& rounds, size_t block,
                     bool scatter) {
    const int n = a.team.size;
    const size_t slot = ctx.workspace_slot(n, a.team.size);
    char* ws = ctx.workspace();
    for (size_t off = 0; off < block; off += slot) {
      const size_t len = std::min(slot, block - off);
      auto source = [&](int j) { return a.send + (scatter ? at(j, block) : 0) + off; };
      Round r;
      for (int j : peers(a)) {
        r.out.push_back({j, {ctx.on(a, ws + at(a.me, slot), j), source(j), len}});
        r.in.push_back(j);
      }
      r.own.push_back({ws + at(a.me, slot), source(a.me), len});
      rounds.run(r);
      ctx.backend().reduce(a.recv + off, ws, slot, n, len / a.elem, a.type, a.redop, a.stream);
    }
  }
};

const Registered<CollAlgorithm, CeAlgorithm> kRegistered(80);

}  // namespace

}  // namespace symcomm
