#include "transport/stream_jobs.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstring>

#include "base/cuda_driver.h"
#include "base/cuda_runtime_check.h"
#include "base/thread_guard.h"

namespace symcomm {

namespace {

constexpr uint64_t kRing = 4096;  // Flags::reached
using Clock = std::chrono::steady_clock;

uint64_t load(const uint64_t* word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

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
  void* dev_ptr = nullptr;
  SYMCOMM_CUDART(cudaHostGetDevicePointer(&dev_ptr, host, 0));
  flags_device_ = reinterpret_cast<uint64_t>(dev_ptr);
  thread_ = std::thread([this] {
    run_guarded([this] { run(); },
                [this](symcommResult_t code, const std::string& why) {
                  fail(code, format("the %s transport's stream worker failed: %s", what_,
                                    why.c_str()));
                  abort(why);
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
  // error; this only keeps the GPU from waiting forever). The flags stay mapped: such a
  // stream may not have read them yet.
  if (!jobs_.empty()) {
    __atomic_store_n(&flags_->done, next_, __ATOMIC_RELEASE);
    return;
  }
  if (cudaFreeHost(flags_) != cudaSuccess) static_cast<void>(cudaGetLastError());
}

void StreamJobs::enqueue(symcommStream_t stream, std::function<void()> job) {
  raise_failure();
  DeviceScope guard(device_);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  SYMCOMM_CUDART(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture));
  SYMCOMM_REQUIRE(capture == cudaStreamCaptureStatusNone, symcommNotSupported,
                  "a call to a peer of the %s transport (another node) cannot be captured in a "
                  "CUDA graph: its host work is ordered by numbers that replays would repeat",
                  what_);
  if (aborted_.load()) SYMCOMM_THROW(symcommPeerLost, "%s", abort_reason_.c_str());
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t number = next_ + 1;
  // The ring of `reached` words: job `number` may reuse a word once job number - kRing ran.
  const auto start = Clock::now();
  while (number > kRing && load(&flags_->done) < number - kRing) {
    if (aborted_.load()) SYMCOMM_THROW(symcommPeerLost, "%s", abort_reason_.c_str());
    if (Clock::now() - start > std::chrono::seconds(60))
      SYMCOMM_THROW(symcommTimeout, "%llu calls to %s peers are in flight and the oldest has not "
                    "run for a minute", static_cast<unsigned long long>(kRing), what_);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  const CudaDriver& drv = cuda_driver();
  const CUstream s = static_cast<CUstream>(stream);
  SYMCOMM_CU(drv, cuStreamWriteValue64(
                      s, flags_device_ + offsetof(Flags, reached) + 8 * (number % kRing), number,
                      CU_STREAM_WRITE_VALUE_DEFAULT));
  SYMCOMM_CU(drv, cuStreamWaitValue64(s, flags_device_ + offsetof(Flags, done), number,
                                      CU_STREAM_WAIT_VALUE_GEQ));
  next_ = number;
  jobs_.push_back(Job{number, std::move(job)});
  wake_.notify_one();
}

void StreamJobs::raise_failure() {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (failure_code_ == symcommSuccess) return;
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

void StreamJobs::fail(symcommResult_t code, const std::string& why) {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (failure_code_ != symcommSuccess) return;  // the first failure is the one to report
  failure_code_ = code;
  failure_ = why;
}

bool StreamJobs::wait_reached(uint64_t number) {
  // Polls while the stream is about to get there, then naps, longer each time up to 1 ms: a
  // stream may be busy for long before it reaches the call.
  const auto start = Clock::now();
  std::chrono::microseconds nap(10);
  const uint64_t* word = &flags_->reached[number % kRing];
  while (load(word) != number) {
    if (stop_.load() || aborted_.load()) return false;
    if (Clock::now() - start < std::chrono::microseconds(200)) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
  }
  return true;
}

void StreamJobs::run() {
  // The jobs copy with the CUDA runtime: this thread works on the communicator's GPU.
  SYMCOMM_CUDART(cudaSetDevice(device_));
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_.load() || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
    }
    thread_fault_point("stream jobs");
    if (wait_reached(job.number)) {
      try {
        job.work();
      } catch (const Error& e) {
        fail(e.code(), e.what());
      } catch (const std::exception& e) {
        fail(symcommInternalError, e.what());
      }
    } else if (aborted_.load()) {
      fail(symcommPeerLost, abort_reason_);
    } else {
      return;  // finalizing: the destructor releases what is left
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.pop_front();
    }
    __atomic_store_n(&flags_->done, job.number, __ATOMIC_RELEASE);
  }
}

}  // namespace symcomm
