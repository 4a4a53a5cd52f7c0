// The box copy kernels of the cuda space's copies (copies_cuda.cu, which alone includes this
// file): how a box is shaped for the kernels (rows or 32 x 32 tiles), the kernels that copy
// one box, a batch of up to kBatchBoxes boxes, or a batch between two team barriers in one
// launch (copy_boxes_synced_kernel), and the element-size dispatch. Directly tested by
// tests/unit/box_copy_*_test.cu through the copies.
#ifndef SYMCOMM_COPY_BOX_COPY_CUH_
#define SYMCOMM_COPY_BOX_COPY_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "base/launch.cuh"
#include "copy/box.h"
#include "symcomm/device.cuh"

namespace symcomm {
namespace box {
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

inline BoxShape shape_box(BoxLayout& dl, BoxLayout& sl, const int64_t lo[3], const int64_t hi[3]) {
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
inline int64_t box_blocks(const BoxShape& h) {
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
    // The first failure takes this rank's arrival back (every epoch is at least 1): a member
    // that comes late then waits until its own bound instead of copying into a call that
    // has failed here.
    if (!go && atomicExch(tickets + 2, 1u) == 0) barrier_arrive(c, 0);
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

}  // namespace box
}  // namespace symcomm

#endif  // SYMCOMM_COPY_BOX_COPY_CUH_
