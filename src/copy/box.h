// What a local copy is described by: where the elements of a 3D array sit (BoxLayout), one
// box copy of a batch (BoxCopy), and a linear copy cut into rows that the batched copy
// kernels spread over many warps (append_linear_copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "symcomm/device_comm.h"

namespace symcomm {

// Where the elements of a local 3D array sit: element (x, y, z) (global indices) is at
// sum over axes of (index - origin) * stride, in elements.
struct BoxLayout {
  int64_t stride[3];
  int64_t origin[3];
  SYMCOMM_HOST_DEVICE int64_t offset(int64_t x, int64_t y, int64_t z) const {
    return (x - origin[0]) * stride[0] + (y - origin[1]) * stride[1] + (z - origin[2]) * stride[2];
  }
};

// One box copy of a batch (Copies::copy_boxes): the elements of [lo, hi) from src to dst.
struct BoxCopy {
  void* dst;
  BoxLayout dl;
  const void* src;
  BoxLayout sl;
  int64_t lo[3], hi[3];
  // For copy_boxes_between_barriers: the world rank whose memory this copy reads or writes
  // (its peer), or -1 where it touches only this rank's memory.
  int peer = -1;
};

// A linear copy of `elements` elements of `elem` bytes as box copies that the batched copy
// kernels spread over many warps: rows of `row` elements (0: linear_row(elements, elem)),
// then the rest (appended to `out`, with `peer` as BoxCopy::peer).
constexpr int64_t kLinearRow = 2048;   // the longest row, in elements
constexpr int64_t kLinearRows = 2048;  // rows wanted: a warp each in 256 blocks of 8 warps
constexpr int64_t kLinearRowBytes = 2048;  // the shortest row: one pass of a warp's 16-byte
                                           // vectors, four per lane
// kLinearRow, halved while the run would give fewer than kLinearRows rows, down to
// kLinearRowBytes (or kLinearRow where elements are larger): a copy kernel gives a block to
// 8 rows, so a 512 KiB run in rows of 2048 8-byte elements kept 4 blocks busy: 4.1 us on an
// H200 in a CUDA graph, 1.7 in rows of 256, where the copy engines take 1.1
// (bench/results/h200x4/rows_ab_1d8eb4f.txt).
int64_t linear_row(int64_t elements, size_t elem);
void append_linear_copy(std::vector<BoxCopy>& out, void* dst, const void* src, int64_t elements,
                        size_t elem, int peer, int64_t row = 0);

}  // namespace symcomm
