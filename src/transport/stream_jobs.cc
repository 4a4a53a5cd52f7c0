#include "transport/stream_jobs.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <cstring>

#include "base/cuda_driver.h"
#include "base/cuda_runtime_check.h"
#include "base/thread_guard.h"
#include "transport/trace.h"

namespace symcomm {

namespace {

constexpr size_t kGatesPerPage = 512;
constexpr auto kPoll = std::chrono::milliseconds(50);
// The most pieces of work taken from the sources before a job runs (a ring holds 1024).
constexpr int kDrainAtMost = 4096;
// After this long with only sources to poll, naps grow to kQuietNap.
constexpr auto kQuiet = std::chrono::seconds(1);
constexpr auto kQuietNap = std::chrono::microseconds(4000);
using Clock = std::chrono::steady_clock;

uint64_t load(const uint64_t* word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }
void store(uint64_t* word, uint64_t value) { __atomic_store_n(word, value, __ATOMIC_RELEASE); }

uint64_t device_address(void* host) {
  void* dev = nullptr;
  SYMCOMM_CUDART(cudaHostGetDevicePointer(&dev, host, 0));
  return reinterpret_cast<uint64_t>(dev);
}

}  // namespace

StreamJobs::StreamJobs(int device, const char* what) : device_(device), what_(what) {
  DeviceScope guard(device_);
  CUdevice dev = 0;
  const CudaDriver& drv = cuda_driver();
  SYMCOMM_CU(drv, cuDeviceGet(&dev, device_));
  int memops = 0;
  drv.cuDeviceGetAttribute(&memops, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev);
  SYMCOMM_REQUIRE(memops != 0, symcommNotSupported,
                  "the %s transport orders its work in CUDA streams with 64-bit stream memory "
                  "operations, which GPU %d lacks (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS)",
                  what_, device_);
  void* host = nullptr;
  SYMCOMM_CUDART(cudaHostAlloc(&host, sizeof(Flags), cudaHostAllocMapped));
  flags_ = static_cast<Flags*>(host);
  std::memset(flags_, 0, sizeof *flags_);
  flags_device_ = device_address(host);
  thread_ = std::thread([this] {
    run_guarded([this] { run(); },
                [this](symcommResult_t code, const std::string& why) {
                  fail(code, format("the %s transport's stream worker failed: %s", what_,
                                    why.c_str()));
                  abort(why);
                  // Nothing runs the jobs any more: their streams go on.
                  std::lock_guard<std::mutex> lock(mutex_);
                  for (const Job& job : jobs_) complete(job);
                  jobs_.clear();
                  for (const auto& c : captured_) store(c->gate, 1);  // a replay waiting now
                });
  });
}

StreamJobs::~StreamJobs() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Streams still waiting for a job go on (finalizing with work in flight is the caller's
  // error; this only keeps the GPU from waiting forever). The words then stay mapped: such a
  // stream may not have read them yet. Graphs that still hold host nodes of this
  // communicator must not be replayed after it is finalized (symcomm.h).
  if (!jobs_.empty()) {
    for (const Job& job : jobs_) complete(job);
    return;
  }
  for (uint64_t* page : gate_pages_)
    if (cudaFreeHost(page) != cudaSuccess) static_cast<void>(cudaGetLastError());
  if (cudaFreeHost(flags_) != cudaSuccess) static_cast<void>(cudaGetLastError());
}

void StreamJobs::enqueue(symcommStream_t stream, std::function<void()> job) {
  raise_failure();
  if (aborted_.load()) SYMCOMM_THROW(symcommPeerLost, "%s", abort_reason_.c_str());
  DeviceScope guard(device_);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  SYMCOMM_CUDART(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture));
  if (capture != cudaStreamCaptureStatusNone) return enqueue_captured(stream, std::move(job));
  // The number is taken and the job handed over under the lock; the stream memory operations
  // are enqueued after it is released: an enqueue blocks while the stream's queue of work is
  // full, until the GPU runs earlier operations, which wait for the worker, which takes the
  // lock to find its next job (symcomm-bench net, 1000 puts on one stream, deadlocked so).
  // The worker runs a job once its `reached` word shows the number, whenever it was handed
  // over.
  uint64_t number = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    number = ++next_;
    jobs_.push_back(Job{number, nullptr, std::move(job)});
  }
  wake_.notify_one();
  const size_t slot = number % kRing;
  try {
    // The ring: job `number` takes the words of job number - kRing once that one ran.
    const auto start = Clock::now();
    while (number > kRing && load(&flags_->done[slot]) < number - kRing) {
      if (aborted_.load()) SYMCOMM_THROW(symcommPeerLost, "%s", abort_reason_.c_str());
      if (Clock::now() - start > std::chrono::seconds(60))
        SYMCOMM_THROW(symcommTimeout, "%llu calls to %s peers are in flight and the oldest has "
                      "not run for a minute", static_cast<unsigned long long>(kRing), what_);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    const CudaDriver& drv = cuda_driver();
    const CUstream s = static_cast<CUstream>(stream);
    SYMCOMM_CU(drv, cuStreamWriteValue64(s, flags_device_ + offsetof(Flags, reached) + 8 * slot,
                                         number, CU_STREAM_WRITE_VALUE_DEFAULT));
    SYMCOMM_CU(drv, cuStreamWaitValue64(s, flags_device_ + offsetof(Flags, done) + 8 * slot,
                                        number, CU_STREAM_WAIT_VALUE_GEQ));
  } catch (...) {
    // Not in the stream (or only its first word): the job never runs. (A job whose stream
    // reached it stays: the worker runs it, and the stream waits for nothing more.)
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
      if (it->number == number && load(&flags_->reached[slot]) != number) {
        jobs_.erase(it);
        // Its words are free for job number + kRing once the one before it ran.
        if (number <= kRing || load(&flags_->done[slot]) >= number - kRing)
          store(&flags_->done[slot], number);
        break;
      }
    throw;
  }
}

uint64_t* StreamJobs::new_gate(uint64_t* device) {
  // Under mutex_. Gates live as long as the communicator: a graph may be replayed any time.
  if (gate_pages_.empty() || gates_used_ == kGatesPerPage) {
    // Called while a stream is being captured: the allocation is this thread's own business,
    // not the capture's (relaxed mode lets it through).
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    SYMCOMM_CUDART(cudaThreadExchangeStreamCaptureMode(&mode));
    void* page = nullptr;
    cudaError_t e = cudaHostAlloc(&page, kGatesPerPage * 8, cudaHostAllocMapped);
    void* dev = nullptr;
    if (e == cudaSuccess) e = cudaHostGetDevicePointer(&dev, page, 0);
    cudaThreadExchangeStreamCaptureMode(&mode);
    SYMCOMM_CUDART(e);
    std::memset(page, 0, kGatesPerPage * 8);
    gate_pages_.push_back(static_cast<uint64_t*>(page));
    gate_devices_.push_back(reinterpret_cast<uint64_t>(dev));
    gates_used_ = 0;
  }
  uint64_t* gate = gate_pages_.back() + gates_used_;
  *device = gate_devices_.back() + 8 * gates_used_++;
  return gate;
}

void StreamJobs::enqueue_captured(symcommStream_t stream, std::function<void()> job) {
  uint64_t reached_device = 0, gate_device = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto c = std::make_unique<Captured>();
    c->reached = new_gate(&reached_device);
    c->gate = new_gate(&gate_device);
    c->work = std::move(job);
    captured_.push_back(std::move(c));
  }
  wake_.notify_one();  // the worker now watches one more job's words
  const CudaDriver& drv = cuda_driver();
  const CUstream s = static_cast<CUstream>(stream);
  SYMCOMM_CU(drv, cuStreamWriteValue64(s, reached_device, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
  SYMCOMM_CU(drv, cuStreamWaitValue64(s, gate_device, 1, CU_STREAM_WAIT_VALUE_EQ));
  SYMCOMM_CU(drv, cuStreamWriteValue64(s, gate_device, 0, CU_STREAM_WRITE_VALUE_DEFAULT));
}

void StreamJobs::raise_failure() {
  // Called by every call on the communicator (check_live) and every enqueue: the lock only
  // where something failed.
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (failure_code_ == symcommSuccess) return;
  failed_.store(false, std::memory_order_relaxed);
  const symcommResult_t code = failure_code_;
  const std::string why = failure_;
  failure_code_ = symcommSuccess;
  failure_.clear();
  SYMCOMM_THROW(code, "an earlier call on a stream failed (its stream went on): %s", why.c_str());
}

void StreamJobs::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_.load()) return;
    abort_reason_ = why;
    aborted_.store(true);
  }
  wake_.notify_all();
}

void StreamJobs::add_source(std::function<bool()> poll) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sources_.push_back(std::move(poll));
  }
  wake_.notify_one();
}

bool StreamJobs::poll_sources() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (polled_.size() != sources_.size()) polled_ = sources_;
  }
  bool did = false;
  for (const auto& poll : polled_) {
    try {
      did |= poll();
    } catch (const Error& e) {
      fail(e.code(), e.what());
      did = true;
    } catch (const std::exception& e) {
      fail(symcommInternalError, e.what());
      did = true;
    }
  }
  return did;
}

void StreamJobs::fail(symcommResult_t code, const std::string& why) {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (failure_code_ != symcommSuccess) return;  // the first failure is the one to report
  failure_code_ = code;
  failed_.store(true, std::memory_order_release);
  failure_ = why;
}

bool StreamJobs::take_ready(Job* job) {
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
    if (load(&flags_->reached[it->number % kRing]) == it->number) {
      *job = std::move(*it);
      jobs_.erase(it);
      return true;
    }
  for (const auto& c : captured_)
    if (load(c->reached) == 1) {
      store(c->reached, 0);  // before the job runs: the next replay sets it again
      *job = Job{0, c->gate, c->work};
      return true;
    }
  return false;
}

void StreamJobs::complete(const Job& job) {
  if (job.gate) store(job.gate, 1);
  else store(&flags_->done[job.number % kRing], job.number);
}

void StreamJobs::run() {
  // The jobs copy with the CUDA runtime: this thread works on the communicator's GPU.
  SYMCOMM_CUDART(cudaSetDevice(device_));
  // While jobs wait for their streams it polls for kPoll since a job last ran or was handed
  // over, then naps, longer each time up to 1 ms: a stream may be busy for long before it
  // reaches a call. (Napping from 200 us on, in a ping-pong where each side's stream reaches
  // its put-signal once the peer's arrived, added up to a millisecond to every one-way time.)
  auto polling_since = Clock::now();
  std::chrono::microseconds nap(10);
  uint64_t seen = 0;  // next_ when it last looked
  for (;;) {
    Job job;
    bool ready = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] {
        return stop_.load() || !jobs_.empty() || !captured_.empty() || !sources_.empty();
      });
      if (stop_.load()) return;  // the destructor releases what is left
      if (next_ != seen) {
        seen = next_;
        polling_since = Clock::now();
        nap = std::chrono::microseconds(10);
      }
      if (aborted_.load()) {
        // Every job fails; its stream goes on. Replays of captured jobs keep coming.
        while (!jobs_.empty()) {
          complete(jobs_.front());
          jobs_.pop_front();
          fail(symcommPeerLost, abort_reason_);
        }
        while (take_ready(&job)) {
          complete(job);
          fail(symcommPeerLost, abort_reason_);
        }
        wake_.wait_for(lock, std::chrono::milliseconds(1));
        continue;
      }
      ready = take_ready(&job);
    }
    if (!ready && poll_sources()) {
      polling_since = Clock::now();
      nap = std::chrono::microseconds(10);
      continue;
    }
    if (!ready) {
      if (Clock::now() - polling_since < kPoll) {
        std::this_thread::yield();
      } else {
        std::unique_lock<std::mutex> lock(mutex_);
        // Nothing but the sources (a kernel's ring) to watch, for a while: longer naps, so
        // that an idle communicator whose kernels made a ring costs little CPU (polling it
        // every millisecond took 2% of a core); the first operation after the quiet waits
        // for the nap's end. Jobs that wait for their streams keep the short naps.
        const bool sources_only = jobs_.empty() && captured_.empty();
        const auto most = sources_only && Clock::now() - polling_since > kQuiet
                              ? kQuietNap
                              : std::chrono::microseconds(1000);
        wake_.wait_for(lock, nap);  // a new job wakes it
        nap = std::min<std::chrono::microseconds>(nap * 2, most);
      }
      continue;
    }
    polling_since = Clock::now();
    nap = std::chrono::microseconds(10);
    // What kernels handed over before the stream reached the job goes first: the ring's
    // descriptors of a kernel that ran before it on the stream (written before the kernel
    // ended, so before the stream wrote the job's word) are all there now. A quiet after
    // such a kernel then covers its signals and small put-signals, which the kernel did not
    // wait for. At most a ring's worth: what kernels post meanwhile waits for the next pass.
    for (int i = 0; i < kDrainAtMost && poll_sources(); ++i) {
    }
    thread_fault_point("stream jobs");
    if (trace::enabled()) {
      const double d = trace::since("signal applied");
      if (d >= 0) trace::add("signal applied -> job", d);
      const double gap = trace::since("job done");
      if (gap >= 0) trace::add("job done -> next job", gap);
    }
    trace::Scope t("job");
    try {
      job.work();
    } catch (const Error& e) {
      fail(e.code(), e.what());
    } catch (const std::exception& e) {
      fail(symcommInternalError, e.what());
    }
    complete(job);
    if (trace::enabled()) trace::mark("job done");
    // Then the sources, once: streams that keep jobs ready do not hold kernels' work back.
    poll_sources();
  }
}

}  // namespace symcomm
