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

#include <algorithm>
#include <array>
#include <cstring>
#include <atomic>
#include <mutex>

#include "base/cuda_driver.h"
#include "base/kernel_load.h"
#include "base/log.h"
#include "base/param.h"
#include "rma/box_copy.cuh"
#include "rma/reduce.h"
#include "rma/device_checks.h"
#include "rma/rma.h"
#include "rma/wait.h"
#include "symcomm/device.cuh"
#include "base/cuda_runtime_check.h"
#include "base/launch.cuh"

namespace symcomm {

// The copy engines win a single stream-serialised put at every size (symcomm-bench rma,
// 2026-11-21): on 8 x H200, CE 2.07-3.02 us vs SM 4.66-5.00 us from 8 B to 32 KiB and 388.7
// vs 360.5 GB/s at 64 MiB (bench/results/h200x8/rma.jsonl); on 2 x H200, 1.66-2.09 vs
// 3.08-3.77 us and 388.5 vs 349.1 GB/s (bench/results/h200x2/rma_near_base.jsonl). So Auto
// means CE unless this is raised.
static const SizeParam kSmCopyMax(
    "SYMCOMM_SM_COPY_MAX", "0",
    "puts and gets up to this size use SM copy kernels under symcommEngineAuto, larger ones the "
    "copy engines (0: always the copy engines)");
static const IntParam kSmCopyBlocks("SYMCOMM_SM_COPY_BLOCKS", "32",
                                    "blocks of the SM copy kernel (one per SM at most), 1 to "
                                    "1024", 1, 1024);
static const IntParam kBoxBlocks("SYMCOMM_BOX_COPY_BLOCKS", "8192",
                                 "most blocks of one batched box-copy launch (decomposition "
                                 "transposes and halos), 1 to 1048576", 1, 1 << 20);
static const IntParam kSyncedPerSm(
    "SYMCOMM_BOX_COPY_SYNCED_PER_SM", "2",
    "blocks per SM of a box-copy launch that holds its barriers (each block ends with a "
    "system-scope fence, so few long-lived blocks beat many short ones); 0: barrier kernels "
    "and the copy kernel apart; at most 64", 0, 64);
static const EnumParam kWaitEngine(
    "SYMCOMM_WAIT_ENGINE", "kernel", "kernel|memop",
    "on-stream signal waits: a bounded kernel, or cuStreamWaitValue64 (>= and == only), which "
    "neither a timeout nor an abort can end: refused unless SYMCOMM_WAIT_TIMEOUT=0");
// cuStreamWriteValue64 needs no SM (a signal queued behind work that holds every SM still
// goes out) and is as fast as a one-thread kernel: 2.81 against 2.85 us one way in the
// on-stream ping-pong, twice each (bench/results/h200x4/rma_signal_{memop,kernel}_6165753.jsonl,
// symcomm:stream_kernel_wait). Earlier runs, whose first communicator measured ran cold (no
// warm-up before commit 6165753), seemed to favour the kernel.
static const EnumParam kSignalEngine(
    "SYMCOMM_SIGNAL_ENGINE", "memop", "kernel|memop",
    "on-stream SET signals: cuStreamWriteValue64 (no SM) or a one-thread kernel");


namespace {

using namespace box;  // rma/box_copy.cuh: the box copy kernels and their shapes

constexpr int kCopyThreads = 512;

__global__ void copy_kernel(char* dst, const char* src, size_t bytes) {
  pdl_begin();
  detail::copy(dst, src, bytes, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
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

__global__ void barrier_kernel(const __grid_constant__ DeviceComm c) {
  pdl_begin();
  barrier_block(c);
}

// The barriers of copy_boxes_between_barriers with its steps apart, guarded by the team's
// failure word: the opening one sets it where a wait failed (the copies between then do
// nothing); the closing one then counts the barrier without arriving (the members' waits
// fail too, rather than pass without this rank's copies) and clears the word.
__global__ void guarded_barrier_kernel(const __grid_constant__ DeviceComm c, uint32_t* failed,
                                       bool closing) {
  pdl_begin();
  __shared__ int skip;
  if (threadIdx.x == 0) skip = closing && *static_cast<volatile uint32_t*>(failed) != 0;
  __syncthreads();
  if (skip) {
    if (threadIdx.x == 0) {
      ++*c.barrier_epoch;
      *failed = 0;
    }
    return;
  }
  const int rc = barrier_block(c);
  if (!closing && rc != 0 && threadIdx.x == 0) *failed = 1;
}


template <typename T>
__global__ void reduce_kernel(T* dst, const char* src, size_t stride, int n, size_t count,
                              symcommRedOp_t op) {
  pdl_begin();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x)
    reduce_one(dst, src, stride, n, i, op);
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
    SYMCOMM_CUDART(cudaMalloc(&tickets_, 4 * sizeof(uint32_t) * SYMCOMM_MAX_TEAMS));
    SYMCOMM_CUDART(cudaMemset(tickets_, 0, 4 * sizeof(uint32_t) * SYMCOMM_MAX_TEAMS));
    SYMCOMM_CUDART(cudaStreamCreateWithFlags(&reset_stream_, cudaStreamNonBlocking));
    load_kernels(drv_);  // all of the library's, before any of them can wait for a peer
    base_ = windows[static_cast<size_t>(topology.rank)];
    copy_blocks_ = static_cast<int>(kSmCopyBlocks.get());
    box_blocks_ = static_cast<int>(kBoxBlocks.get());
    int sms = 0;
    SYMCOMM_CUDART(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, topology.device));
    synced_blocks_ = sms * static_cast<int>(kSyncedPerSm.get());
    sm_copy_max_ = kSmCopyMax.get();
    wait_timeout_ns_ = static_cast<uint64_t>(wait_timeout_ms()) * 1000000ull;
    SYMCOMM_CUDART(cudaDeviceSynchronize());
  }

  ~CudaRma() override {
    // Clean-up must not throw; a failure here is logged.
    for (cudaError_t e : {cudaStreamDestroy(reset_stream_), cudaFree(peer_base_),
                          cudaFree(epochs_), cudaFree(tickets_), cudaFreeHost(mapped_)})
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
    DeviceScope guard(topology_.device);
    if (op == symcommSignalSet && memop_signal_) {
      // The default flags put a memory barrier before the write: the data before it lands first.
      SYMCOMM_CU(drv_, cuStreamWriteValue64(stream, reinterpret_cast<CUdeviceptr>(sig), value,
                                            CU_STREAM_WRITE_VALUE_DEFAULT));
      return;
    }
    launch_kernel(signal_kernel, 1, 1, stream, sig, value, op);
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

  void reduce(void* dst, const void* src, size_t stride, int n, size_t count,
              symcommDataType_t type, symcommRedOp_t op, symcommStream_t stream) override {
    if (count == 0) return;
    DeviceScope guard(topology_.device);
    size_t want = (count + 255) / 256;
    unsigned blocks = static_cast<unsigned>(want < 1024 ? want : 1024);
    with_type(type, [&](auto zero) {
      using T = decltype(zero);
      launch_kernel(reduce_kernel<T>, blocks, 256, stream, static_cast<T*>(dst),
             static_cast<const char*>(src), stride, n, count, op);
    });
    SYMCOMM_CUDART(cudaGetLastError());
  }

  void copy_box(void* dst, const BoxLayout& dl_in, const void* src, const BoxLayout& sl_in,
                const int64_t lo[3], const int64_t hi[3], size_t elem,
                symcommStream_t stream) override {
    if (hi[0] <= lo[0] || hi[1] <= lo[1] || hi[2] <= lo[2]) return;
    BoxLayout dl = dl_in, sl = sl_in;
    const BoxShape h = shape_box(dl, sl, lo, hi);
    const int64_t n0 = h.n[0], n1 = h.n[1], rows = n1 * h.n[2], total = rows * n0;
    DeviceScope guard(topology_.device);
    auto launch = [&](auto zero) {
      using T = decltype(zero);
      if (h.tiled) {
        const auto blocks = static_cast<unsigned>(std::min<int64_t>(box_blocks(h), 8192));
        launch_kernel(copy_tiles_kernel<T>, blocks, kBoxThreads, stream, static_cast<T*>(dst), dl,
               static_cast<const T*>(src), sl, h);
        return;
      }
      if (n0 < 32 && total < (int64_t{1} << 31)) {
        const auto blocks =
            static_cast<unsigned>(std::min<int64_t>((total + kBoxThreads - 1) / kBoxThreads, 4096));
        launch_kernel(copy_box_short_rows_kernel<T>, blocks, kBoxThreads, stream,
            static_cast<T*>(dst), dl, static_cast<const T*>(src), sl, h.lo[0], h.lo[1], h.lo[2],
            static_cast<uint32_t>(n0), static_cast<uint32_t>(n1), static_cast<uint32_t>(total));
        return;
      }
      const auto blocks = static_cast<unsigned>(std::min<int64_t>(box_blocks(h), 8192));
      launch_kernel(copy_box_kernel<T>, blocks, kBoxThreads, stream,
          static_cast<T*>(dst), dl, static_cast<const T*>(src), sl, h.lo[0], h.lo[1], h.lo[2],
          n0, n1, rows);
    };
    by_element(elem, "copy_box", launch);
  }

  bool copy_box_ce(void* dst, const BoxLayout& dl, const void* src, const BoxLayout& sl,
                   const int64_t lo[3], const int64_t hi[3], size_t elem,
                   symcommStream_t stream) override {
    // The axes the box extends along (extent > 1), by the source's strides.
    int axes[3], m = 0;
    int64_t n[3];
    for (int a = 0; a < 3; ++a) {
      n[a] = hi[a] - lo[a];
      if (n[a] <= 0) return true;  // nothing to copy
      if (n[a] > 1) axes[m++] = a;
    }
    std::sort(axes, axes + m, [&](int a, int b) { return sl.stride[a] < sl.stride[b]; });
    for (int i = 1; i < m; ++i)
      if (dl.stride[axes[i]] <= dl.stride[axes[i - 1]]) return false;  // another order
    if (m > 0 && (sl.stride[axes[0]] != 1 || dl.stride[axes[0]] != 1)) return false;
    // The run along the first axis grows by every next axis that both layouts reach exactly
    // at its end: a box that is one contiguous run on both sides is one linear copy.
    int64_t run = m > 0 ? n[axes[0]] : 1;
    int j = 1;
    while (j < m && sl.stride[axes[j]] == run && dl.stride[axes[j]] == run) run *= n[axes[j++]];
    const auto e = static_cast<int64_t>(elem);
    char* d = static_cast<char*>(dst) + dl.offset(lo[0], lo[1], lo[2]) * e;
    const char* s = static_cast<const char*>(src) + sl.offset(lo[0], lo[1], lo[2]) * e;
    const auto width = static_cast<size_t>(run * e);
    DeviceScope guard(topology_.device);
    if (j >= m) {
      SYMCOMM_CUDART(cudaMemcpyAsync(d, s, width, cudaMemcpyDefault, stream));
      return true;
    }
    const int a1 = axes[j];
    const auto dpitch = static_cast<size_t>(dl.stride[a1] * e);
    const auto spitch = static_cast<size_t>(sl.stride[a1] * e);
    if (dpitch < width || spitch < width) return false;
    if (j + 1 == m) {
      SYMCOMM_CUDART(cudaMemcpy2DAsync(d, dpitch, s, spitch, width, static_cast<size_t>(n[a1]),
                                       cudaMemcpyDefault, stream));
      return true;
    }
    // A 3D copy describes a slice as rows of the pitch: the slice pitch must be whole rows,
    // enough of them for the box.
    const int a2 = axes[j + 1];
    if (dl.stride[a2] % dl.stride[a1] != 0 || sl.stride[a2] % sl.stride[a1] != 0) return false;
    const int64_t drows = dl.stride[a2] / dl.stride[a1], srows = sl.stride[a2] / sl.stride[a1];
    if (drows < n[a1] || srows < n[a1]) return false;
    cudaMemcpy3DParms p{};
    p.srcPtr = make_cudaPitchedPtr(const_cast<char*>(s), spitch, width, static_cast<size_t>(srows));
    p.dstPtr = make_cudaPitchedPtr(d, dpitch, width, static_cast<size_t>(drows));
    p.extent = make_cudaExtent(width, static_cast<size_t>(n[a1]), static_cast<size_t>(n[a2]));
    p.kind = cudaMemcpyDefault;
    SYMCOMM_CUDART(cudaMemcpy3DAsync(&p, stream));
    return true;
  }

  void copy_boxes(const std::vector<BoxCopy>& copies, size_t elem,
                  symcommStream_t stream) override {
    launch_boxes(copies, elem, stream, nullptr);
  }

  // copy_boxes, each launch doing nothing where *guard is non-zero when it runs (guard may be
  // nullptr).
  void launch_boxes(const std::vector<BoxCopy>& copies, size_t elem, symcommStream_t stream,
                    const uint32_t* guard) {
    DeviceScope scope(topology_.device);
    // Up to kBatchBoxes boxes per launch, the row boxes and the tiled ones apart.
    BoxBatch batches[2]{};
    batches[0].guard = batches[1].guard = guard;
    int64_t most[2] = {0, 0};
    auto launch = [&](int tiled) {
      BoxBatch& batch = batches[tiled];
      if (batch.count == 0) return;
      const int64_t per_box =
          std::max<int64_t>(1, std::min<int64_t>(most[tiled], box_blocks_ / batch.count));
      const auto blocks = static_cast<unsigned>(per_box * batch.count);
      auto run = [&](auto zero) {
        using T = decltype(zero);
        launch_kernel(tiled ? copy_tiled_boxes_kernel<T> : copy_boxes_kernel<T>, blocks, kBoxThreads,
               stream, batch);
      };
      by_element(elem, "copy_boxes", run);
      batch.count = 0;
      most[tiled] = 0;
    };
    for (const BoxCopy& c : copies) {
      if (empty(c)) continue;
      const BoxBatch::One one = batch_entry(c);
      const int tiled = one.shape.tiled;
      batches[tiled].box[batches[tiled].count++] = one;
      most[tiled] = std::max(most[tiled], box_blocks(one.shape));
      if (batches[tiled].count == kBatchBoxes) launch(tiled);
    }
    launch(0);
    launch(1);
  }

  void copy_boxes_between_barriers(const BarrierArgs& a, const std::vector<BoxCopy>& copies,
                                   size_t elem, symcommStream_t stream) override {
    // A team of one (a decomposition's X<->Y team on a 1 x N grid, Y<->Z on N x 1) has
    // nobody to wait for: stream order is the whole barrier, and the copies get the batched
    // kernel's full width instead of the barrier kernel's resident blocks (a local 256^3
    // transpose, 32 MiB per rank, took 21.6 us between barriers and 18.4 without in CUDA
    // graphs on 4 x H200: bench/results/h200x4/decomp_graph_{adf1658,e1c9c79}.jsonl).
    if (a.team.size == 1) return launch_boxes(copies, elem, stream, nullptr);
    // One launch where every copy fits one batch of one kind (rows or tiles) and every
    // member is mapped here; else the three steps apart.
    BoxBatch batch{};
    int64_t most = 0;
    int kind = -1;
    bool one_launch = synced_blocks_ > 0;
    for (int t = 0; t < a.team.size && one_launch; ++t)
      one_launch = windows_[static_cast<size_t>(a.team.world_of(t))] != nullptr;
    for (const BoxCopy& c : copies) {
      if (!one_launch) break;
      if (empty(c)) continue;
      const BoxBatch::One one = batch_entry(c);
      one_launch = batch.count < kBatchBoxes && (kind < 0 || kind == one.shape.tiled);
      if (!one_launch) break;  // a 17th box, or rows and tiles mixed
      kind = one.shape.tiled;
      batch.box[batch.count++] = one;
      most = std::max(most, box_blocks(one.shape));
    }
    DeviceScope guard(topology_.device);
    DeviceComm c{};
    fill(c, a.id, a.team);
    uint32_t* tickets = tickets_ + 4 * static_cast<size_t>(a.id);
    if (!one_launch || batch.count == 0) {
      // The steps apart, guarded: copies only after an opening barrier that passed.
      const int threads = a.team.size < 32 ? 32 : (a.team.size > 1024 ? 1024 : a.team.size);
      launch_kernel(guarded_barrier_kernel, 1, threads, stream, c, tickets + 2, false);
      SYMCOMM_CUDART(cudaGetLastError());
      launch_boxes(copies, elem, stream, tickets + 2);
      launch_kernel(guarded_barrier_kernel, 1, threads, stream, c, tickets + 2, true);
      SYMCOMM_CUDART(cudaGetLastError());
      return;
    }
    const int64_t per_box =
        std::max<int64_t>(1, std::min<int64_t>(most, synced_blocks_ / batch.count));
    const auto blocks = static_cast<unsigned>(per_box * batch.count);
    auto run = [&](auto zero) {
      using T = decltype(zero);
      launch_kernel(kind ? copy_boxes_synced_kernel<T, true> : copy_boxes_synced_kernel<T, false>,
             blocks, kBoxThreads, stream, batch, c, tickets);
    };
    by_element(elem, "copy_boxes", run);
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
    launch_kernel(barrier_kernel, 1, threads, stream, c);
    SYMCOMM_CUDART(cudaGetLastError());
  }

  // Both run when a team is made (collective), on a stream of their own that waits for
  // nothing else on the GPU: no operation on the team id's previous team may be in flight
  // (symcommTeamDestroy), so only the clear itself must be complete, not the rest of the
  // GPU's work (a training step on another stream, another communicator's kernels waiting
  // for their peers; tests/mp/rma_test.cc, Rma.TeamSplitDoesNotWaitForOtherWork).
  void clear(void* local, size_t bytes) override {
    DeviceScope guard(topology_.device);
    SYMCOMM_CUDART(cudaMemsetAsync(local, 0, bytes, reset_stream_));
    SYMCOMM_CUDART(cudaStreamSynchronize(reset_stream_));
  }

  void reset_epoch(symcommTeam_t id) override {
    DeviceScope guard(topology_.device);
    SYMCOMM_CUDART(cudaMemsetAsync(epochs_ + id, 0, sizeof(uint64_t), reset_stream_));
    SYMCOMM_CUDART(cudaMemsetAsync(tickets_ + 4 * static_cast<size_t>(id), 0,
                                   4 * sizeof(uint32_t), reset_stream_));
    SYMCOMM_CUDART(cudaStreamSynchronize(reset_stream_));
  }

  void raise_recorded_error() override {
    DeviceError& e = mapped_->error;
    if (__atomic_load_n(&e.code, __ATOMIC_ACQUIRE) == 0) return;
    DeviceError copy = e;
    std::memset(&e, 0, sizeof e);  // reported once
    symcommResult_t code = static_cast<symcommResult_t>(copy.code);
    // A call the bounds checks refused did nothing: no wait failed, nothing is out of step.
    if (code == symcommInvalidArgument) throw_refused_device_call(copy);
    failed_.store(true, std::memory_order_release);
    // A word of the barrier area is a barrier's slot, whose failed wait recorded the member
    // that did not arrive as the pe (barrier_block, copy_boxes_synced_kernel).
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

  static bool empty(const BoxCopy& c) {
    return c.hi[0] <= c.lo[0] || c.hi[1] <= c.lo[1] || c.hi[2] <= c.lo[2];
  }

  // A copy as the batched kernels take it (axes permuted by shape_box).
  static BoxBatch::One batch_entry(const BoxCopy& c) {
    BoxBatch::One one{static_cast<char*>(c.dst), c.dl, static_cast<const char*>(c.src), c.sl, {},
                      c.peer};
    one.shape = shape_box(one.dl, one.sl, c.lo, c.hi);
    return one;
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
  uint32_t* tickets_ = nullptr;  // [SYMCOMM_MAX_TEAMS][4]: copy_boxes_synced_kernel's
  char* base_ = nullptr;
  int copy_blocks_ = 32;
  int box_blocks_ = 8192;
  int synced_blocks_ = 264;  // SMs x SYMCOMM_BOX_COPY_SYNCED_PER_SM
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
