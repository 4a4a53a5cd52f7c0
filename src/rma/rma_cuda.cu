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
#include <mutex>

#include "base/cuda_driver.h"
#include "base/log.h"
#include "base/param.h"
#include "rma/reduce.h"
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
                                    "blocks of the SM copy kernel (one per SM at most)");
static const IntParam kBoxBlocks("SYMCOMM_BOX_COPY_BLOCKS", "8192",
                                 "most blocks of one batched box-copy launch (decomposition "
                                 "transposes and halos)");
static const IntParam kSyncedPerSm(
    "SYMCOMM_BOX_COPY_SYNCED_PER_SM", "2",
    "blocks per SM of a box-copy launch that holds its barriers (each block ends with a "
    "system-scope fence, so few long-lived blocks beat many short ones); 0: barrier kernels "
    "and the copy kernel apart");
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

// Boxes with rows (fixed y and z) of at least 32 elements: a warp per row, its lanes along
// x, four elements in flight per lane: one division per row rather than three 64-bit
// divisions per element (which bounded the fused and sm backends' transposes), and
// x-contiguous rows read and written coalesced.
constexpr int kBoxThreads = 256;
constexpr int kTile = 32;  // copy_tiles: kTile x kTile elements per tile

// A box copy as the kernels run it: the axes of the box and of both layouts permuted alike
// (which changes nothing copied: an offset is a sum over axes) so that axis 0 is the one the
// kernel walks. Rows along an axis that is contiguous on both sides, where there is one;
// else, where the source and the destination are contiguous along different axes, tiles
// (tiled: the source's contiguous axis first, the destination's second); else rows along x.
struct BoxShape {
  int64_t lo[3], n[3];
  int tiled;
};

BoxShape shape_box(BoxLayout& dl, BoxLayout& sl, const int64_t lo[3], const int64_t hi[3]) {
  int both = -1, sa = -1, db = -1;
  for (int a = 2; a >= 0; --a) {  // the lowest axis wins ties
    if (hi[a] - lo[a] < 2) continue;
    if (sl.stride[a] == 1) sa = a;
    if (dl.stride[a] == 1) db = a;
    if (sl.stride[a] == 1 && dl.stride[a] == 1) both = a;
  }
  int perm[3] = {0, 1, 2};
  const bool tiled = both < 0 && sa >= 0 && db >= 0 && sa != db;
  if (both > 0) {
    perm[0] = both;
    for (int a = 0, k = 1; a < 3; ++a)
      if (a != both) perm[k++] = a;
  } else if (tiled) {
    perm[0] = sa;
    perm[1] = db;
    perm[2] = 3 - sa - db;
  }
  BoxShape shape{};
  shape.tiled = tiled;
  const BoxLayout d = dl, s = sl;
  for (int i = 0; i < 3; ++i) {
    const int a = perm[i];
    dl.stride[i] = d.stride[a];
    dl.origin[i] = d.origin[a];
    sl.stride[i] = s.stride[a];
    sl.origin[i] = s.origin[a];
    shape.lo[i] = lo[a];
    shape.n[i] = hi[a] - lo[a];
  }
  return shape;
}

// Blocks a box's copy can use: one per tile, or one per kBoxThreads / 32 rows.
int64_t box_blocks(const BoxShape& h) {
  if (h.tiled) return (h.n[0] + kTile - 1) / kTile * ((h.n[1] + kTile - 1) / kTile) * h.n[2];
  return (h.n[1] * h.n[2] + kBoxThreads / 32 - 1) / (kBoxThreads / 32);
}

// Elements [0, n) of one row, strided, by the 32 lanes of a warp, four per lane in flight.
template <typename T>
__device__ __forceinline__ void copy_row_strided(T* d, int64_t ds, const T* s, int64_t ss,
                                                 int64_t n, int64_t lane) {
  constexpr int kUnroll = 4;
  int64_t x = lane;
  for (; x + 32 * (kUnroll - 1) < n; x += 32 * kUnroll) {
    T v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = s[(x + 32 * u) * ss];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) d[(x + 32 * u) * ds] = v[u];
  }
  for (; x < n; x += 32) d[x * ds] = s[x * ss];
}

// One row: as 16-byte vectors where the row is contiguous on both sides and both ends are
// 16-byte aligned (the same for the whole warp: no divergence), which halves the memory
// instructions for 8-byte elements (C32, R64) and doubles the bytes in flight, which
// reading a peer's pencil over NVLink needs; else element by element.
template <typename T>
__device__ __forceinline__ void copy_row(T* d, int64_t ds, const T* s, int64_t ss, int64_t n,
                                         int64_t lane) {
  if constexpr (sizeof(T) < 16) {
    constexpr int64_t kPer = 16 / sizeof(T);
    if (ds == 1 && ss == 1 &&
        ((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s)) & 15) == 0) {
      const int64_t vectors = n / kPer;
      copy_row_strided(reinterpret_cast<uint4*>(d), 1, reinterpret_cast<const uint4*>(s), 1,
                       vectors, lane);
      for (int64_t x = vectors * kPer + lane; x < n; x += 32) d[x] = s[x];
      return;
    }
  }
  copy_row_strided(d, ds, s, ss, n, lane);
}

// Rows [block, rows) by `blocks` of one box: a warp per row (see copy_box_kernel).
template <typename T>
__device__ __forceinline__ void copy_rows(T* dst, const BoxLayout& dl, const T* src,
                                          const BoxLayout& sl, int64_t lo0, int64_t lo1,
                                          int64_t lo2, int64_t n0, int64_t n1, int64_t rows,
                                          int64_t block, int64_t blocks) {
  constexpr int kWarps = kBoxThreads / 32;
  const int64_t lane = threadIdx.x % 32;
  for (int64_t r = block * kWarps + threadIdx.x / 32; r < rows; r += blocks * kWarps) {
    const int64_t y = lo1 + r % n1, z = lo2 + r / n1;
    copy_row(dst + dl.offset(lo0, y, z), dl.stride[0], src + sl.offset(lo0, y, z), sl.stride[0],
             n0, lane);
  }
}

// Boxes whose source is contiguous along axis 0 and destination along axis 1 (pencils whose
// memory orders differ, as axis-contiguous ones do between X, Y and Z): 32 x 32 tiles of the
// (0, 1) plane, read along 0 into shared memory and written along 1, so that both sides
// move whole lines (a warp per row would scatter every write). Tiles [block, tiles) by
// `blocks`; every thread of the block runs the same iterations (the barriers).
template <typename T>
__device__ __forceinline__ void copy_tiles(T* dst, const BoxLayout& dl, const T* src,
                                           const BoxLayout& sl, const int64_t lo[3],
                                           const int64_t n[3], int64_t block, int64_t blocks) {
  __shared__ T tile[kTile][kTile + 1];
  constexpr int kPass = kBoxThreads / kTile;  // lines of the tile per pass
  const int tx = static_cast<int>(threadIdx.x) % kTile, ty = static_cast<int>(threadIdx.x) / kTile;
  const int64_t t0 = (n[0] + kTile - 1) / kTile, t1 = (n[1] + kTile - 1) / kTile;
  const T* s0 = src + sl.offset(lo[0], lo[1], lo[2]);
  T* d0 = dst + dl.offset(lo[0], lo[1], lo[2]);
  for (int64_t t = block; t < t0 * t1 * n[2]; t += blocks) {
    const int64_t a0 = t % t0 * kTile, b0 = t / t0 % t1 * kTile, c = t / (t0 * t1);
    const T* s = s0 + c * sl.stride[2] + a0 + b0 * sl.stride[1];
    T* d = d0 + c * dl.stride[2] + a0 * dl.stride[0] + b0;
    const int64_t na = min(n[0] - a0, int64_t{kTile}), nb = min(n[1] - b0, int64_t{kTile});
    for (int j = ty; j < nb; j += kPass)
      if (tx < na) tile[j][tx] = s[tx + j * sl.stride[1]];
    __syncthreads();
    for (int j = ty; j < na; j += kPass)
      if (tx < nb) d[j * dl.stride[0] + tx] = tile[tx][j];
    __syncthreads();  // the tile is read before the next one overwrites it
  }
}

template <typename T>
__global__ void __launch_bounds__(kBoxThreads) copy_tiles_kernel(T* dst, BoxLayout dl,
                                                                 const T* src, BoxLayout sl,
                                                                 BoxShape shape) {
  pdl_begin();
  copy_tiles(dst, dl, src, sl, shape.lo, shape.n, blockIdx.x, gridDim.x);
}

template <typename T>
__global__ void __launch_bounds__(kBoxThreads) copy_box_kernel(
    T* dst, BoxLayout dl, const T* src, BoxLayout sl, int64_t lo0, int64_t lo1, int64_t lo2,
    int64_t n0, int64_t n1, int64_t rows) {
  pdl_begin();
  copy_rows(dst, dl, src, sl, lo0, lo1, lo2, n0, n1, rows, blockIdx.x, gridDim.x);
}

// Up to kBatchBoxes boxes in one launch: block i works on box i % count (so that the
// blocks running at any moment read from every source at once), with the other blocks of
// that box, over its rows (or tiles).
constexpr int kBatchBoxes = 16;
struct BoxBatch {
  struct One {
    char* dst;
    BoxLayout dl;
    const char* src;
    BoxLayout sl;
    BoxShape shape;
    int peer;  // copy_boxes_synced_kernel: the world rank whose arrival this box waits for
  } box[kBatchBoxes];
  int count;
  // copy_boxes_between_barriers, steps apart: the team's failure word (non-zero: the opening
  // barrier failed, copy nothing); nullptr elsewhere.
  const uint32_t* guard;
};

// Whether a batch's guard says to copy nothing (the same answer for every thread: the word
// was written by a kernel earlier on the stream).
__device__ __forceinline__ bool guarded(const BoxBatch& b) {
  return b.guard != nullptr && *static_cast<const volatile uint32_t*>(b.guard) != 0;
}

// Rows and tiles in kernels of their own: one kernel with both paths holds the registers of
// the larger for the other, which halved the tiles' speed (fewer blocks resident).
template <typename T>
__global__ void __launch_bounds__(kBoxThreads) copy_boxes_kernel(const __grid_constant__ BoxBatch b) {
  pdl_begin();
  if (guarded(b)) return;
  const BoxBatch::One& c = b.box[blockIdx.x % b.count];
  const BoxShape& h = c.shape;
  copy_rows(reinterpret_cast<T*>(c.dst), c.dl, reinterpret_cast<const T*>(c.src), c.sl, h.lo[0],
            h.lo[1], h.lo[2], h.n[0], h.n[1], h.n[1] * h.n[2], blockIdx.x / b.count,
            gridDim.x / b.count);
}

template <typename T>
__global__ void __launch_bounds__(kBoxThreads) copy_tiled_boxes_kernel(
    const __grid_constant__ BoxBatch b) {
  pdl_begin();
  if (guarded(b)) return;
  const BoxBatch::One& c = b.box[blockIdx.x % b.count];
  copy_tiles(reinterpret_cast<T*>(c.dst), c.dl, reinterpret_cast<const T*>(c.src), c.sl,
             c.shape.lo, c.shape.n, blockIdx.x / b.count, gridDim.x / b.count);
}

// Calls f with a value of the unsigned type as wide as `elem` (the element type the box
// kernels copy), then checks the launch it made; `what` names the caller in the error.
template <typename F>
void by_element(size_t elem, const char* what, F&& f) {
  switch (elem) {
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    case 16: f(uint4{}); break;
    default: SYMCOMM_THROW(symcommInvalidArgument, "%s of %zu-byte elements", what, elem);
  }
  SYMCOMM_CUDART(cudaGetLastError());
}

// This rank arrives at its team's barrier `e` (as barrier_block does): the writes that
// precede the caller's fence go before the stores of the members' slots.
__device__ __forceinline__ void barrier_arrive(const DeviceComm& c, uint64_t e) {
  __threadfence_system();
  const size_t slot = reinterpret_cast<char*>(c.barrier_slots + c.rank) - c.base;
  for (int t = 0; t < c.team_size; ++t)
    detail::store_relaxed(reinterpret_cast<uint64_t*>(detail::window(c, t) + slot), e);
}

// copy_boxes_between_barriers in one launch: barrier, the batch's copies, barrier, with the
// team's barrier counting (epoch, slots) of barrier_block, so that both interleave with
// barriers of the team. tickets (device memory, the team's): [0] blocks that started, [1]
// blocks that finished, [2] a wait failed; zero between launches.
//   First barrier: the first block to start arrives for this rank (which of them is first
//   does not matter: no block waits for another block of the grid, so any grid size
//   runs); each block then waits for the arrival of its box's peer only, and copies.
//   Second barrier: each block fences its copies and counts itself finished; the last one
//   (every copy is done and ordered before its fence: fence, count; count, fence) arrives
//   and waits for every member, then stores the epoch and clears the tickets for the next
//   launch. The epoch is read by every block at its start and stored only by the last.
// A failed wait (timeout, abort) is recorded for the host and marked in tickets[2]: blocks
// that start later skip their waits (a grid of many waves would otherwise wait the bound
// once per wave), no block copies without its peer's arrival, and this rank does not arrive
// at the closing barrier (its copies are incomplete: the members' closing waits fail too).
// While they wait, the blocks hold their SMs (2 per SM fill an H200's registers): two such
// launches on different teams that wait for each other across GPUs (issued in different
// orders on different streams) can only end by the bound, as with NCCL kernels.
template <typename T, bool kTiled>
__global__ void __launch_bounds__(kBoxThreads) copy_boxes_synced_kernel(
    const __grid_constant__ BoxBatch b, const __grid_constant__ DeviceComm c,
    uint32_t* tickets) {
  pdl_begin();
  __shared__ uint64_t base;
  __shared__ int go;
  const BoxBatch::One& box = b.box[blockIdx.x % b.count];
  if (threadIdx.x == 0) {
    base = *c.barrier_epoch;
    if (atomicAdd(&tickets[0], 1u) == 0) barrier_arrive(c, base + 1);
    volatile uint32_t* failed = tickets + 2;
    go = box.peer < 0 || (*failed == 0 && detail::wait_local(c, c.barrier_slots + box.peer,
                                                             symcommCmpGe, base + 1,
                                                             box.peer) == 0);
    if (!go) *failed = 1;
  }
  __syncthreads();
  if (go) {
    T* dst = reinterpret_cast<T*>(box.dst);
    const T* src = reinterpret_cast<const T*>(box.src);
    const BoxShape& h = box.shape;
    if constexpr (kTiled)
      copy_tiles(dst, box.dl, src, box.sl, h.lo, h.n, blockIdx.x / b.count, gridDim.x / b.count);
    else
      copy_rows(dst, box.dl, src, box.sl, h.lo[0], h.lo[1], h.lo[2], h.n[0], h.n[1],
                h.n[1] * h.n[2], blockIdx.x / b.count, gridDim.x / b.count);
  }
  __syncthreads();  // every thread's copies precede thread 0's fence
  if (threadIdx.x != 0) return;
  __threadfence_system();
  if (atomicAdd(&tickets[1], 1u) != gridDim.x - 1) return;
  const bool failed = *static_cast<volatile uint32_t*>(tickets + 2) != 0;
  tickets[0] = tickets[1] = tickets[2] = 0;
  const uint64_t e = base + 2;
  // After a failed wait this rank's copies are incomplete: it does not arrive, so that the
  // members' closing waits fail too rather than report success without its blocks.
  if (!failed) {
    barrier_arrive(c, e);
    for (int t = 0; t < c.team_size; ++t) {
      const int w = world_rank(c, t);
      if (detail::wait_local(c, c.barrier_slots + w, symcommCmpGe, e, w) != 0) break;
    }
  }
  *c.barrier_epoch = e;
}

// Boxes with short rows (a halo along x, say): a thread per element, in 32-bit arithmetic.
template <typename T>
__global__ void __launch_bounds__(kBoxThreads) copy_box_short_rows_kernel(
    T* dst, BoxLayout dl, const T* src, BoxLayout sl, int64_t lo0, int64_t lo1, int64_t lo2,
    uint32_t n0, uint32_t n1, uint32_t total) {
  pdl_begin();
  for (uint32_t i = blockIdx.x * kBoxThreads + threadIdx.x; i < total;
       i += gridDim.x * kBoxThreads) {
    const uint32_t row = i / n0;
    const int64_t x = lo0 + (i - row * n0), y = lo1 + row % n1, z = lo2 + row / n1;
    dst[dl.offset(x, y, z)] = src[sl.offset(x, y, z)];
  }
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
    base_ = windows[static_cast<size_t>(topology.rank)];
    int blocks = static_cast<int>(kSmCopyBlocks.get());
    SYMCOMM_REQUIRE(blocks >= 1 && blocks <= 1024, symcommInvalidArgument,
                    "SYMCOMM_SM_COPY_BLOCKS=%d is not in [1, 1024]", blocks);
    copy_blocks_ = blocks;
    box_blocks_ = static_cast<int>(kBoxBlocks.get());
    int sms = 0;
    SYMCOMM_CUDART(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, topology.device));
    const int per_sm = static_cast<int>(kSyncedPerSm.get());
    SYMCOMM_REQUIRE(per_sm >= 0 && per_sm <= 64, symcommInvalidArgument,
                    "SYMCOMM_BOX_COPY_SYNCED_PER_SM=%d is not in [0, 64]", per_sm);
    synced_blocks_ = sms * per_sm;
    SYMCOMM_REQUIRE(box_blocks_ >= 1 && box_blocks_ <= (1 << 20), symcommInvalidArgument,
                    "SYMCOMM_BOX_COPY_BLOCKS=%d is not in [1, 2^20]", box_blocks_);
    sm_copy_max_ = kSmCopyMax.get();
    wait_timeout_ns_ = static_cast<uint64_t>(wait_timeout_ms()) * 1000000ull;
    SYMCOMM_CUDART(cudaDeviceSynchronize());
  }

  ~CudaRma() override {
    // Clean-up must not throw; a failure here is logged.
    for (cudaError_t e : {cudaFree(peer_base_), cudaFree(epochs_), cudaFree(tickets_),
                          cudaFreeHost(mapped_)})
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

  void clear(void* local, size_t bytes) override {
    DeviceScope guard(topology_.device);
    SYMCOMM_CUDART(cudaMemset(local, 0, bytes));
    SYMCOMM_CUDART(cudaDeviceSynchronize());
  }

  void reset_epoch(symcommTeam_t id) override {
    DeviceScope guard(topology_.device);
    SYMCOMM_CUDART(cudaMemset(epochs_ + id, 0, sizeof(uint64_t)));
    SYMCOMM_CUDART(cudaMemset(tickets_ + 4 * static_cast<size_t>(id), 0, 4 * sizeof(uint32_t)));
    SYMCOMM_CUDART(cudaDeviceSynchronize());
  }

  void raise_recorded_error() override {
    DeviceError& e = mapped_->error;
    if (__atomic_load_n(&e.code, __ATOMIC_ACQUIRE) == 0) return;
    DeviceError copy = e;
    std::memset(&e, 0, sizeof e);  // reported once
    {
      std::lock_guard<std::mutex> lock(failed_mutex_);
      failed_.push_back(copy.address);
    }
    symcommResult_t code = static_cast<symcommResult_t>(copy.code);
    // A word of the barrier area is a barrier's slot, whose failed wait recorded the member
    // that did not arrive as the pe (barrier_block, copy_boxes_synced_kernel).
    const uintptr_t area = reinterpret_cast<uintptr_t>(area_);
    const bool barrier = copy.address >= area &&
                         copy.address - area < RmaLayout::area_bytes(topology_.nranks);
    throw_wait_error(code, barrier ? topology_.rank : copy.pe,
                     reinterpret_cast<void*>(copy.address), static_cast<symcommCmp_t>(copy.cmp),
                     copy.expected, copy.observed,
                     code == symcommPeerLost ? "on the device: the communicator was aborted"
                                             : "on the device: SYMCOMM_WAIT_TIMEOUT passed",
                     barrier ? copy.pe : -1);
  }

  bool wait_failed_in(const void* p, size_t bytes) const override {
    const auto lo = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(failed_mutex_);
    for (uintptr_t a : failed_)
      if (a >= lo && a - lo < bytes) return true;
    return false;
  }

  void abort() override { __atomic_store_n(&mapped_->abort, 1, __ATOMIC_RELEASE); }

  void fill_device_comm(DeviceComm& h, symcommTeam_t id, const Team& team) override {
    fill(h, id, team);
  }

 private:
  struct HostMapped {
    DeviceError error;
    int32_t abort;
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
  }

  const Topology& topology_;
  const CudaDriver& drv_;
  char* area_;
  HostMapped* mapped_ = nullptr;
  HostMapped* mapped_dev_ = nullptr;
  char** peer_base_ = nullptr;
  std::vector<char*> windows_;  // peer_base_ on the host
  uint64_t* epochs_ = nullptr;
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
  mutable std::mutex failed_mutex_;
  std::vector<uintptr_t> failed_;  // the words of every failed wait raised (under the mutex)
};

}  // namespace

std::unique_ptr<RmaBackend> make_cuda_rma(const Topology& topology,
                                          const std::vector<char*>& windows, char* area) {
  return std::make_unique<CudaRma>(topology, windows, area);
}

}  // namespace symcomm
