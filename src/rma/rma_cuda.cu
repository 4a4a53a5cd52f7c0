// One-sided communication in the cuda memory space. Puts and gets run on the copy engines
// (cudaMemcpyAsync between this GPU and the peer's memory mapped here) or on SMs (a copy
// kernel). Signals use stream memory operations where they can (a SET is a
// cuStreamWriteValue64: no SM), else a one-thread kernel. Waits and barriers are small
// kernels: they are bounded by SYMCOMM_WAIT_TIMEOUT (unless it is 0) and end when the
// communicator is aborted, recording what they waited for in host-mapped memory
// (DeviceError), which the next call that checks the communicator (check_live,
// symcommHostBarrier) reports. Stream memory operations need
// CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS; without it signals and waits are kernels.
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>

#include "base/cuda_driver.h"
#include "base/cuda_runtime_check.h"
#include "base/kernel_load.h"
#include "base/launch.cuh"
#include "base/log.h"
#include "base/param.h"
#include "rma/device_checks.h"
#include "rma/rma.h"
#include "rma/wait.h"
#include "symcomm/device.cuh"

namespace symcomm {

// The copy engines win a single stream-serialised put at every size (symcomm-bench rma): on
// 8 x H200, CE 2.07-3.02 us vs SM 4.66-5.00 us from 8 B to 32 KiB and 388.7 vs 360.5 GB/s
// at 64 MiB (bench/results/h200x8/rma.jsonl); on 2 x H200, 1.66-2.09 vs 3.08-3.77 us and
// 388.5 vs 349.1 GB/s (bench/results/h200x2/rma_near_base.jsonl). So Auto means CE unless
// this is raised.
static const SizeParam kSmCopyMax(
    "SYMCOMM_SM_COPY_MAX", "0",
    "puts and gets up to this size use SM copy kernels under symcommEngineAuto, larger ones the "
    "copy engines (0: always the copy engines)");
static const IntParam kSmCopyBlocks("SYMCOMM_SM_COPY_BLOCKS", "32",
                                    "blocks of the SM copy kernel (one per SM at most), 1 to "
                                    "1024", 1, 1024);
static const EnumParam kWaitEngine(
    "SYMCOMM_WAIT_ENGINE", "kernel", "kernel|memop",
    "on-stream signal waits: a bounded kernel, or cuStreamWaitValue64 (>= and == only), which "
    "neither a timeout nor an abort can end: refused unless SYMCOMM_WAIT_TIMEOUT=0");
// cuStreamWriteValue64 needs no SM (a signal queued behind work that holds every SM still
// goes out) and is as fast as a one-thread kernel: 2.81 against 2.85 us one way in the
// on-stream ping-pong, twice each (bench/results/h200x4/rma_signal_{memop,kernel}_6165753.jsonl,
// symcomm:stream_kernel_wait).
static const EnumParam kSignalEngine(
    "SYMCOMM_SIGNAL_ENGINE", "memop", "kernel|memop",
    "on-stream SET signals: cuStreamWriteValue64 (no SM) or a one-thread kernel");

namespace {

constexpr int kCopyThreads = 512;

__global__ void copy_kernel(char* dst, const char* src, size_t bytes) {
  pdl_begin();
  detail::copy(dst, src, bytes, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

// A host-side atomic on a stream (symcommAtomicFetchAddOnStream, ...CompareSwap...): one thread.
__global__ void atomic_kernel(uint64_t* word, uint64_t operand, uint64_t desired,
                              bool compare_swap, uint64_t* result) {
  pdl_begin();
  __threadfence_system();  // what the stream did before is visible first
  auto* w = reinterpret_cast<unsigned long long*>(word);
  const unsigned long long old =
      compare_swap ? atomicCAS_system(w, operand, desired) : atomicAdd_system(w, operand);
  *result = old;
  __threadfence_system();  // the result before whatever the stream does next
}

__global__ void signal_kernel(uint64_t* sig, uint64_t value, symcommSignalOp_t op) {
  pdl_begin();
  __threadfence_system();  // what the stream did before is visible first
  detail::signal_update(sig, value, op);
}

__global__ void wait_kernel(const __grid_constant__ DeviceComm c, uint64_t* sig, symcommCmp_t cmp,
                            uint64_t value) {
  pdl_begin();
  signal_wait_until(c, sig, cmp, value);
}

// wait_counted's words, as many as one launch takes (a kernel's parameters: 4 KiB).
constexpr int kCountedWords = 64;
struct CountedWait {
  uint64_t* counter;
  int advance;  // the first launch of a call adds 1; the others read what it left
  int n;
  uint64_t* words[kCountedWords];
};

__global__ void counted_wait_kernel(const __grid_constant__ DeviceComm c,
                                    const __grid_constant__ CountedWait w) {
  pdl_begin();
  __shared__ uint64_t target;
  if (threadIdx.x == 0) target = w.advance ? ++*w.counter : *w.counter;
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < w.n; i += static_cast<int>(blockDim.x))
    signal_wait_until(c, w.words[i], symcommCmpGe, target);
}

__global__ void barrier_kernel(const __grid_constant__ DeviceComm c) {
  pdl_begin();
  barrier_block(c);
}

// The barrier of a team with members on other nodes (reached by a transport, not mapped
// here): before this kernel runs, the stream sends this rank's arrival to those members as a
// signal that adds 1 (their slot of this rank counts its barriers); the kernel counts the
// barrier in device memory, as barrier_block does, arrives at the mapped members and waits
// for every member's arrival, the ones the network brings included. Nothing is counted on the
// host: a CUDA graph that captured the barrier counts on at each replay.
// Where it fails, it also writes 1 into `failed` (mapped host memory): the host's job that
// follows it on the stream then takes back the arrivals it sent by network.
__global__ void barrier_mixed_kernel(const __grid_constant__ DeviceComm c, uint64_t* failed) {
  pdl_begin();
  __shared__ int result;
  __shared__ uint64_t epoch;
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int n = c.team_size;
  if (tid == 0) {
    result = 0;
    epoch = ++*c.barrier_epoch;  // counted here, so that graph replays count on
  }
  __syncthreads();
  const uint64_t e = epoch;
  const size_t slot = reinterpret_cast<char*>(c.barrier_slots + c.rank) - c.base;
  if (tid < n) __threadfence_system();
  for (int t = tid; t < n; t += nt)
    if (char* w = detail::window(c, t)) detail::store_relaxed(reinterpret_cast<uint64_t*>(w + slot), e);
  for (int t = tid; t < n; t += nt) {
    const int w = world_rank(c, t);
    const int rc = detail::wait_local(c, c.barrier_slots + w, symcommCmpGe, e, w);
    if (rc != 0) atomicCAS(&result, 0, rc);
  }
  __syncthreads();
  if (result != 0) {  // taken back, as barrier_block does
    for (int t = tid; t < n; t += nt)
      if (char* w = detail::window(c, t)) detail::store_relaxed(reinterpret_cast<uint64_t*>(w + slot), 0);
    if (tid == 0) {
      __threadfence_system();
      detail::store_relaxed(failed, 1);
    }
  }
}

class CudaRma final : public RmaBackend {
 public:
  CudaRma(const Topology& topology, const std::vector<char*>& windows, char* area)
      : topology_(topology), drv_(cuda_driver()), area_(area), windows_(windows) {
    SYMCOMM_CUDART(cudaSetDevice(topology.device));
    choose_memops();  // first: it may refuse the parameters, before anything is allocated
    void* host = nullptr;
    SYMCOMM_CUDART(cudaHostAlloc(&host, sizeof(HostMapped), cudaHostAllocMapped));
    mapped_ = static_cast<HostMapped*>(host);
    std::memset(mapped_, 0, sizeof *mapped_);
    SYMCOMM_CUDART(cudaHostGetDevicePointer(reinterpret_cast<void**>(&mapped_dev_), host, 0));
    SYMCOMM_CUDART(cudaMalloc(&peer_base_, sizeof(char*) * windows.size()));
    SYMCOMM_CUDART(cudaMemcpy(peer_base_, windows.data(), sizeof(char*) * windows.size(),
                              cudaMemcpyHostToDevice));
    SYMCOMM_CUDART(cudaMalloc(&epochs_, sizeof(uint64_t) * SYMCOMM_MAX_TEAMS));
    SYMCOMM_CUDART(cudaMemset(epochs_, 0, sizeof(uint64_t) * SYMCOMM_MAX_TEAMS));
    SYMCOMM_CUDART(cudaStreamCreateWithFlags(&reset_stream_, cudaStreamNonBlocking));
    load_kernels(drv_);  // all of the library's, before any of them can wait for a peer
    base_ = windows[static_cast<size_t>(topology.rank)];
    copy_blocks_ = static_cast<int>(kSmCopyBlocks.get());
    sm_copy_max_ = kSmCopyMax.get();
    wait_timeout_ns_ = static_cast<uint64_t>(wait_timeout_ms()) * 1000000ull;
    SYMCOMM_CUDART(cudaDeviceSynchronize());
  }

  ~CudaRma() override {
    // Clean-up must not throw; a failure here is logged.
    for (cudaError_t e : {cudaStreamDestroy(reset_stream_), cudaFree(peer_base_),
                          cudaFree(epochs_), cudaFreeHost(mapped_)})
      if (e != cudaSuccess) SYMCOMM_WARN("freeing RMA state: %s", cudaGetErrorString(e));
  }

  void put(void* dst, const void* src, size_t bytes, symcommEngine_t engine,
           symcommStream_t stream) override {
    copy(dst, src, bytes, engine, stream);
  }
  void get(void* dst, const void* src, size_t bytes, symcommEngine_t engine,
           symcommStream_t stream) override {
    copy(dst, src, bytes, engine, stream);
  }

  void signal(uint64_t* sig, uint64_t value, symcommSignalOp_t op,
              symcommStream_t stream) override {
    // In the stream's context: the net transport's proxy applies signals on a stream of a
    // context of its own (transport/net/copy_context.h).
    ContextScope guard(stream_context(drv_, stream), topology_.device);
    if (op == symcommSignalSet && memop_signal_) {
      // The default flags put a memory barrier before the write: the data before it lands first.
      SYMCOMM_CU(drv_, cuStreamWriteValue64(stream, reinterpret_cast<CUdeviceptr>(sig), value,
                                            CU_STREAM_WRITE_VALUE_DEFAULT));
      return;
    }
    launch_kernel(signal_kernel, 1, 1, stream, sig, value, op);
    SYMCOMM_CUDART(cudaGetLastError());
  }

  void atomic(uint64_t* word, uint64_t operand, uint64_t desired, bool compare_swap,
              uint64_t* result, symcommStream_t stream) override {
    ContextScope guard(stream_context(drv_, stream), topology_.device);
    launch_kernel(atomic_kernel, 1, 1, stream, word, operand, desired, compare_swap, result);
    SYMCOMM_CUDART(cudaGetLastError());
  }

  void wait(uint64_t* sig, symcommCmp_t cmp, uint64_t value, symcommStream_t stream) override {
    DeviceScope guard(topology_.device);
    if (memop_wait_ && (cmp == symcommCmpGe || cmp == symcommCmpEq)) {
      // GEQ compares as (int64_t)(*sig - value) >= 0: the same as >= for counts below 2^63.
      const unsigned flags =
          (cmp == symcommCmpGe ? CU_STREAM_WAIT_VALUE_GEQ : CU_STREAM_WAIT_VALUE_EQ) | wait_flush_;
      SYMCOMM_CU(drv_, cuStreamWaitValue64(stream, reinterpret_cast<CUdeviceptr>(sig), value,
                                           flags));
      return;
    }
    DeviceComm c{};
    fill(c, SYMCOMM_TEAM_WORLD, Team{0, 1, topology_.nranks});
    launch_kernel(wait_kernel, 1, 1, stream, c, sig, cmp, value);
    SYMCOMM_CUDART(cudaGetLastError());
  }

  void synchronize(symcommStream_t stream) override {
    DeviceScope guard(topology_.device);
    SYMCOMM_CUDART(cudaStreamSynchronize(stream));
  }

  double time_us(symcommStream_t stream, const std::function<void()>& work) override {
    DeviceScope guard(topology_.device);
    cudaEvent_t start, stop;
    SYMCOMM_CUDART(cudaEventCreate(&start));
    SYMCOMM_CUDART(cudaEventCreate(&stop));
    float ms = 0;
    cudaError_t e = cudaEventRecord(start, stream);
    if (e == cudaSuccess) {
      try {
        work();
      } catch (...) {
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        throw;
      }
      e = cudaEventRecord(stop, stream);
    }
    if (e == cudaSuccess) e = cudaEventSynchronize(stop);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    SYMCOMM_CUDART(e);
    return 1000.0 * static_cast<double>(ms);
  }

  void quiet(symcommStream_t) override {
    // Everything issued on the stream before is complete when the stream passes this point:
    // copies, kernels and memory operations all finish in stream order.
  }

  void barrier(const BarrierArgs& a, symcommStream_t stream) override {
    DeviceScope guard(topology_.device);
    DeviceComm c{};
    fill(c, a.id, a.team);
    int threads = a.team.size < 32 ? 32 : (a.team.size > 1024 ? 1024 : a.team.size);
    bool mixed = false;
    for (int i = 0; i < a.team.size; ++i) mixed |= a.slots[a.team.world_of(i)] == nullptr;
    if (!mixed) {
      launch_kernel(barrier_kernel, 1, threads, stream, c);
      SYMCOMM_CUDART(cudaGetLastError());
      return;
    }
    // Members reached by network: this rank's arrival goes to them as a signal that adds 1,
    // applied after everything this rank sent them before, ordered on the stream.
    for (int i = 0; i < a.team.size; ++i) {
      const int member = a.team.world_of(i);
      if (!a.slots[member])
        a.transports->to(member).signal(member, &a.own[a.rank], 1, symcommSignalAdd, stream);
    }
    launch_kernel(barrier_mixed_kernel, 1, threads, stream, c,
                  &mapped_dev_->mixed_failed[static_cast<size_t>(a.id)]);
    SYMCOMM_CUDART(cudaGetLastError());
    // Where it failed, the arrivals sent by network are taken back (set to 0) before the
    // stream goes on, so that a member that comes late waits instead of passing on them
    // into a call this rank has left (as the host space and barrier_block do). Barriers of
    // the team refuse from then on (barrier_failed), so the counts need not agree again.
    uint64_t* failed = &mapped_->mixed_failed[static_cast<size_t>(a.id)];
    for (int i = 0; i < a.team.size; ++i) {
      const int member = a.team.world_of(i);
      if (!a.slots[member])
        a.transports->to(member).signal_if(member, &a.own[a.rank], 0, symcommSignalSet, failed,
                                           1, stream);
    }
  }

  void wait_counted(uint64_t* const* words, int n, uint64_t* counter,
                    symcommStream_t stream) override {
    DeviceScope guard(topology_.device);
    DeviceComm c{};
    fill(c, SYMCOMM_TEAM_WORLD, Team{0, 1, topology_.nranks});
    for (int first = 0; first == 0 || first < n; first += kCountedWords) {
      CountedWait w{};
      w.counter = counter;
      w.advance = first == 0;
      w.n = std::min(kCountedWords, n - first);
      for (int i = 0; i < w.n; ++i) w.words[i] = words[first + i];
      launch_kernel(counted_wait_kernel, 1, 64, stream, c, w);
      SYMCOMM_CUDART(cudaGetLastError());
    }
  }

  // Both run when a team is made (collective), on a stream of their own that waits for
  // nothing else on the GPU: no operation on the team id's previous team may be in flight
  // (symcommTeamDestroy), so only the clear itself must be complete, not the rest of the
  // GPU's work (a training step on another stream, another communicator's kernels waiting
  // for their peers; tests/mp/rma_team_test.cc, Rma.TeamSplitDoesNotWaitForOtherWork).
  void clear(void* local, size_t bytes) override {
    DeviceScope guard(topology_.device);
    SYMCOMM_CUDART(cudaMemsetAsync(local, 0, bytes, reset_stream_));
    SYMCOMM_CUDART(cudaStreamSynchronize(reset_stream_));
  }

  void reset_epoch(symcommTeam_t id) override {
    DeviceScope guard(topology_.device);
    SYMCOMM_CUDART(cudaMemsetAsync(epochs_ + id, 0, sizeof(uint64_t), reset_stream_));
    SYMCOMM_CUDART(cudaStreamSynchronize(reset_stream_));
    __atomic_store_n(&mapped_->mixed_failed[static_cast<size_t>(id)], 0, __ATOMIC_RELEASE);
  }

  void raise_recorded_error() override {
    DeviceError& e = mapped_->error;
    if (__atomic_load_n(&e.code, __ATOMIC_ACQUIRE) == 0) return;
    DeviceError copy = e;
    std::memset(&e, 0, sizeof e);  // reported once
    symcommResult_t code = static_cast<symcommResult_t>(copy.code);
    // A refused call did nothing: no wait failed, nothing is out of step.
    if (copy.cmp < 0) throw_refused_device_call(copy);
    failed_.store(true, std::memory_order_release);
    // A word of the barrier area is a barrier's slot, whose failed wait recorded the member
    // that did not arrive as the pe (barrier_block; copy_boxes_synced_kernel of the copies,
    // copy/box_copy.cuh, which holds its barriers through this backend's device handle).
    const uintptr_t area = reinterpret_cast<uintptr_t>(area_);
    const bool barrier = copy.address >= area &&
                         copy.address - area < RmaLayout::area_bytes(topology_.nranks);
    if (barrier) barrier_failed_.store(true, std::memory_order_release);
    throw_wait_error(code, barrier ? topology_.rank : copy.pe,
                     reinterpret_cast<void*>(copy.address), static_cast<symcommCmp_t>(copy.cmp),
                     copy.expected, copy.observed,
                     code == symcommPeerLost ? "on the device: the communicator was aborted"
                                             : "on the device: SYMCOMM_WAIT_TIMEOUT passed",
                     barrier ? copy.pe : -1);
  }

  symcommResult_t pending_error() const override {
    return static_cast<symcommResult_t>(__atomic_load_n(&mapped_->error.code, __ATOMIC_ACQUIRE));
  }

  bool any_wait_failed() const override { return failed_.load(std::memory_order_acquire); }
  bool barrier_failed() const override { return barrier_failed_.load(std::memory_order_acquire); }

  void abort() override { __atomic_store_n(&mapped_->abort, 1, __ATOMIC_RELEASE); }

  void publish_allocations(const std::vector<std::pair<size_t, size_t>>& live) override {
    write_allocation_table(mapped_->allocations, live);
  }

  void fill_device_comm(DeviceComm& h, symcommTeam_t id, const Team& team) override {
    fill(h, id, team);
  }

 private:
  struct HostMapped {
    DeviceError error;
    int32_t abort;
    uint64_t mixed_failed[SYMCOMM_MAX_TEAMS];  // [team]: 1 once a mixed barrier failed
    DeviceAllocations allocations;  // SYMCOMM_DEVICE_CHECKS (rma/device_checks.h)
  };

  // Which signals and waits are stream memory operations (SYMCOMM_SIGNAL_ENGINE,
  // SYMCOMM_WAIT_ENGINE, what the GPU supports), and the flags of the waits.
  void choose_memops() {
    memop_wait_ = kWaitEngine.get() == "memop";
    memop_signal_ = kSignalEngine.get() == "memop";
    // cuStreamWaitValue64 holds the stream until the word changes, whatever the time or an
    // abort (ce collectives release their own flags to end such waits; a user's signal word
    // cannot be overwritten so): only a caller who asked for no bound gets it.
    SYMCOMM_REQUIRE(!memop_wait_ || wait_timeout_ms() == 0, symcommInvalidArgument,
                    "SYMCOMM_WAIT_ENGINE=memop waits with cuStreamWaitValue64, which neither "
                    "SYMCOMM_WAIT_TIMEOUT nor an abort can end: set SYMCOMM_WAIT_TIMEOUT=0 (no "
                    "bound) to use it, or SYMCOMM_WAIT_ENGINE=kernel");
    CUdevice dev = 0;
    SYMCOMM_CU(drv_, cuDeviceGet(&dev, topology_.device));
    auto attribute = [&](CUdevice_attribute a) {
      int v = 0;
      return drv_.cuDeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS && v != 0;
    };
    if ((memop_wait_ || memop_signal_) &&
        !attribute(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS)) {
      static std::once_flag logged;
      std::call_once(logged, [&] {
        SYMCOMM_INFO("GPU %d has no 64-bit stream memory operations "
                     "(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS): on-stream signals "
                     "and waits run as kernels", topology_.device);
      });
      memop_wait_ = memop_signal_ = false;
    }
    // With the flush, data that reached this GPU before the signal is visible to the work
    // after the wait, as the driver documents it; without (most platforms), see
    // docs/memory-model.md.
    if (memop_wait_ && attribute(CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES))
      wait_flush_ = CU_STREAM_WAIT_VALUE_FLUSH;
  }

  void copy(void* dst, const void* src, size_t bytes, symcommEngine_t engine,
            symcommStream_t stream) {
    DeviceScope guard(topology_.device);
    if (engine == symcommEngineAuto)
      engine = bytes <= sm_copy_max_ ? symcommEngineSm : symcommEngineCe;
    if (engine == symcommEngineCe) {
      SYMCOMM_CUDART(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
      return;
    }
    size_t per_block = static_cast<size_t>(kCopyThreads) * 64;  // 64 bytes per thread at least
    size_t want = (bytes + per_block - 1) / per_block;
    unsigned blocks = static_cast<unsigned>(want < static_cast<size_t>(copy_blocks_) ? want : copy_blocks_);
    launch_kernel(copy_kernel, blocks, kCopyThreads, stream, static_cast<char*>(dst),
           static_cast<const char*>(src), bytes);
    SYMCOMM_CUDART(cudaGetLastError());
  }

  void fill(DeviceComm& h, symcommTeam_t id, const Team& team) const {
    h.rank = topology_.rank;
    h.nranks = topology_.nranks;
    h.team_rank = team.index_of(topology_.rank);
    h.team_size = team.size;
    h.team_start = team.start;
    h.team_stride = team.stride;
    h.base = base_;
    h.peer_base = peer_base_;
    for (int i = 0; i < SYMCOMM_DEVICE_COMM_NEAR; ++i)
      h.near_base[i] = i < team.size ? windows_[static_cast<size_t>(team.world_of(i))] : nullptr;
    h.barrier_slots = reinterpret_cast<uint64_t*>(
        area_ + static_cast<size_t>(id) * RmaLayout::slots_bytes(topology_.nranks));
    h.barrier_epoch = epochs_ + id;
    h.abort_flag = &mapped_dev_->abort;
    h.error = &mapped_dev_->error;
    h.wait_timeout_ns = wait_timeout_ns_;
    h.allocations = &mapped_dev_->allocations;
  }

  const Topology& topology_;
  const CudaDriver& drv_;
  char* area_;
  HostMapped* mapped_ = nullptr;
  HostMapped* mapped_dev_ = nullptr;
  char** peer_base_ = nullptr;
  std::vector<char*> windows_;  // peer_base_ on the host
  uint64_t* epochs_ = nullptr;
  cudaStream_t reset_stream_ = nullptr;  // clear() and reset_epoch()
  char* base_ = nullptr;
  int copy_blocks_ = 32;
  size_t sm_copy_max_ = 0;
  bool memop_wait_ = false;
  bool memop_signal_ = true;
  unsigned wait_flush_ = 0;  // CU_STREAM_WAIT_VALUE_FLUSH where the GPU supports it
  uint64_t wait_timeout_ns_ = 0;  // SYMCOMM_WAIT_TIMEOUT, read once per communicator
  std::atomic<bool> failed_{false};  // a device-side wait failed and was raised
  std::atomic<bool> barrier_failed_{false};  // and the record was a barrier's
};

// Every kernel of this file, loaded when a communicator is made (base/kernel_load.h).
const KernelLibrary kKernels(reinterpret_cast<const void*>(&copy_kernel));

}  // namespace

std::unique_ptr<RmaBackend> make_cuda_rma(const Topology& topology,
                                          const std::vector<char*>& windows, char* area) {
  return std::make_unique<CudaRma>(topology, windows, area);
}

}  // namespace symcomm
