// What the fused layer's CUTLASS kernels share (fused/sm90a/): the CUTLASS element type of
// each CUDA type, the tile and cluster shapes, and CUTLASS's stride of a packed matrix.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/numeric_types.h"

namespace symcomm {

template <class T>
struct Cutlass;
template <>
struct Cutlass<__half> {
  using type = cutlass::half_t;
};
template <>
struct Cutlass<__nv_bfloat16> {
  using type = cutlass::bfloat16_t;
};
template <>
struct Cutlass<float> {
  using type = float;
};

// 128 x 128 x 64 tiles (WGMMA of two consumer warp groups), clusters of one CTA.
using TileShape = cute::Shape<cute::_128, cute::_128, cute::_64>;
using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;

// CUTLASS's stride of a packed matrix of shape (x, y) (one batch): one of x's and y's strides
// is the static 1, the other the extent of the contiguous mode; the batch stride stays 0 (or
// static).
template <class Stride>
Stride packed_stride(int x, int y) {
  Stride s{};
  if constexpr (cute::is_static<std::decay_t<decltype(cute::get<1>(s))>>::value)
    cute::get<0>(s) = y;
  else
    cute::get<1>(s) = x;
  return s;
}

}  // namespace symcomm
