// The ce state's making and unmaking: the flag area, the streams and events, the
// host-mapped watch record, and the check, agreed by every rank, that ce can run here.
#include <cuda.h>
#include <cuda_runtime.h>

#include <mutex>
#include <string>
#include <vector>

#include "base/cuda_driver.h"
#include "base/cuda_runtime_check.h"
#include "base/log.h"
#include "base/param.h"
#include "coll/ce_state.h"
#include "rma/wait.h"

namespace symcomm::ce {

namespace {

// 1 by default: on 4 x H200 a ce all-to-all moves 354 GB/s per GPU (busbw) on 1 stream and
// 230 on 4 (bench/results/h200x4/ce_a2a_probe.log, its last lines).
constexpr int kMaxStreams = 16;
const IntParam kStreams("SYMCOMM_COLL_CE_STREAMS", "1",
                        "streams over which a ce collective spreads its copies to peers, 1 to "
                        "16; 1: one after another on the caller's stream, the fastest on H200 "
                        "(read when a communicator is created)", 1, kMaxStreams);

}  // namespace

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
void CeState::check_usable() const {
  if (!released_.load(std::memory_order_acquire)) return;
  if (timed_out_.load(std::memory_order_acquire))
    SYMCOMM_THROW(symcommTimeout,
                  "a ce wait of this communicator passed SYMCOMM_WAIT_TIMEOUT and its flags were "
                  "released: ce collectives cannot run on it any more (finalize it)");
  SYMCOMM_THROW(symcommPeerLost,
                "the communicator lost a peer and the flags of its ce collectives were released");
}

}  // namespace symcomm::ce
