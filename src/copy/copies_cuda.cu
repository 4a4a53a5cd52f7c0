// Local copies in the cuda memory space: reduce and box copy kernels (box_copy.cuh), the
// copy-engine form of a box copy (copy_box_ce.cc), and copy_boxes_between_barriers, whose
// barriers are the team barriers of the cuda RMA backend (its device handle: epoch, slots,
// the failure record), held inside the copy kernel where the copies fit one launch.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "base/cuda_runtime_check.h"
#include "base/kernel_load.h"
#include "base/launch.cuh"
#include "base/log.h"
#include "base/param.h"
#include "copy/box_copy.cuh"
#include "copy/copies.h"
#include "copy/copy_box_ce.h"
#include "copy/reduce.h"
#include "symcomm/device.cuh"

namespace symcomm {

static const IntParam kBoxBlocks("SYMCOMM_BOX_COPY_BLOCKS", "8192",
                                 "most blocks of one batched box-copy launch (decomposition "
                                 "transposes and halos), 1 to 1048576", 1, 1 << 20);
static const IntParam kSyncedPerSm(
    "SYMCOMM_BOX_COPY_SYNCED_PER_SM", "2",
    "blocks per SM of a box-copy launch that holds its barriers (each block ends with a "
    "system-scope fence, so few long-lived blocks beat many short ones); 0: barrier kernels "
    "and the copy kernel apart; at most 64", 0, 64);

namespace {

using namespace box;  // copy/box_copy.cuh: the box copy kernels and their shapes

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

template <typename T>
__global__ void divide_kernel(T* v, size_t count, int n) {
  pdl_begin();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x)
    divide_one(v, i, n);
}

// dst[i] = src[i] * factor, the factor read from `factor_device` where that is not NULL.
template <typename T>
__global__ void scale_kernel(T* dst, const T* src, size_t count, T factor,
                             const T* factor_device) {
  pdl_begin();
  const T f = factor_device ? *factor_device : factor;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x)
    scale_one(dst, src, i, f);
}

// Blocks of 256 threads for an element-wise kernel over `count` elements: one element a
// thread, 1024 blocks at most (the kernels stride over the rest).
unsigned elementwise_blocks(size_t count) {
  const size_t want = (count + 255) / 256;
  return static_cast<unsigned>(want < 1024 ? want : 1024);
}

class CudaCopies final : public Copies {
 public:
  CudaCopies(const Topology& topology, RmaBackend& rma, const std::vector<char*>& windows)
      : device_(topology.device), rma_(rma), windows_(windows) {
    SYMCOMM_CUDART(cudaSetDevice(device_));
    SYMCOMM_CUDART(cudaMalloc(&tickets_, 4 * sizeof(uint32_t) * SYMCOMM_MAX_TEAMS));
    SYMCOMM_CUDART(cudaMemset(tickets_, 0, 4 * sizeof(uint32_t) * SYMCOMM_MAX_TEAMS));
    SYMCOMM_CUDART(cudaStreamCreateWithFlags(&reset_stream_, cudaStreamNonBlocking));
    box_blocks_ = static_cast<int>(kBoxBlocks.get());
    int sms = 0;
    SYMCOMM_CUDART(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_));
    synced_blocks_ = sms * static_cast<int>(kSyncedPerSm.get());
    SYMCOMM_CUDART(cudaDeviceSynchronize());
  }

  ~CudaCopies() override {
    // Clean-up must not throw; a failure here is logged.
    for (cudaError_t e : {cudaStreamDestroy(reset_stream_), cudaFree(tickets_)})
      if (e != cudaSuccess) SYMCOMM_WARN("freeing the copies' state: %s", cudaGetErrorString(e));
  }

  void reduce(void* dst, const void* src, size_t stride, int n, size_t count,
              symcommDataType_t type, symcommRedOp_t op, symcommStream_t stream) override {
    if (count == 0) return;
    DeviceScope guard(device_);
    const unsigned blocks = elementwise_blocks(count);
    with_type(type, [&](auto zero) {
      using T = decltype(zero);
      launch_kernel(reduce_kernel<T>, blocks, 256, stream, static_cast<T*>(dst),
             static_cast<const char*>(src), stride, n, count, op);
    });
    SYMCOMM_CUDART(cudaGetLastError());
  }

  void divide(void* v, size_t count, symcommDataType_t type, int n,
              symcommStream_t stream) override {
    if (count == 0) return;
    DeviceScope guard(device_);
    const unsigned blocks = elementwise_blocks(count);
    with_type(type, [&](auto zero) {
      using T = decltype(zero);
      launch_kernel(divide_kernel<T>, blocks, 256, stream, static_cast<T*>(v), count, n);
    });
    SYMCOMM_CUDART(cudaGetLastError());
  }

  void scale(void* dst, const void* src, size_t count, symcommDataType_t type, uint64_t factor,
             const void* factor_device, symcommStream_t stream) override {
    if (count == 0) return;
    DeviceScope guard(device_);
    const unsigned blocks = elementwise_blocks(count);
    with_type(type, [&](auto zero) {
      using T = decltype(zero);
      T f;
      std::memcpy(&f, &factor, sizeof f);
      launch_kernel(scale_kernel<T>, blocks, 256, stream, static_cast<T*>(dst),
                    static_cast<const T*>(src), count, f, static_cast<const T*>(factor_device));
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
    DeviceScope guard(device_);
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
    DeviceScope guard(device_);
    return copy_box_on_copy_engines(dst, dl, src, sl, lo, hi, elem, stream);
  }

  void copy_boxes(const std::vector<BoxCopy>& copies, size_t elem,
                  symcommStream_t stream) override {
    launch_boxes(copies, elem, stream, nullptr);
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
    DeviceScope guard(device_);
    DeviceComm c{};
    rma_.fill_device_comm(c, a.id, a.team);
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

  // On a stream of its own that waits for nothing else on the GPU, as the RMA backend's
  // reset_epoch, beside which it runs (Rma::on_team_start): only the clear itself must be
  // complete, not the rest of the GPU's work.
  void reset_team(symcommTeam_t id) override {
    DeviceScope guard(device_);
    SYMCOMM_CUDART(cudaMemsetAsync(tickets_ + 4 * static_cast<size_t>(id), 0,
                                   4 * sizeof(uint32_t), reset_stream_));
    SYMCOMM_CUDART(cudaStreamSynchronize(reset_stream_));
  }

 private:
  // copy_boxes, each launch doing nothing where *guard is non-zero when it runs (guard may be
  // nullptr).
  void launch_boxes(const std::vector<BoxCopy>& copies, size_t elem, symcommStream_t stream,
                    const uint32_t* guard) {
    DeviceScope scope(device_);
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

  int device_;
  RmaBackend& rma_;
  std::vector<char*> windows_;  // every rank's heap window as mapped here
  uint32_t* tickets_ = nullptr;  // [SYMCOMM_MAX_TEAMS][4]: copy_boxes_synced_kernel's
  cudaStream_t reset_stream_ = nullptr;  // reset_team()
  int box_blocks_ = 8192;
  int synced_blocks_ = 264;  // SMs x SYMCOMM_BOX_COPY_SYNCED_PER_SM
};

// Every kernel of this file, loaded when a communicator is made (base/kernel_load.h).
const KernelLibrary kKernels(reinterpret_cast<const void*>(&guarded_barrier_kernel));

}  // namespace

std::unique_ptr<Copies> make_cuda_copies(const Topology& topology, RmaBackend& rma,
                                         const std::vector<char*>& windows) {
  return std::make_unique<CudaCopies>(topology, rma, windows);
}

}  // namespace symcomm
