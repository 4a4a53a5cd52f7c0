// CUTLASS's stride of a packed matrix of shape (x, y) (one batch), for the fused layer's
// kernels: one of x's and y's strides is the static 1, the other the extent of the contiguous
// mode; the batch stride stays 0 (or static).
#pragma once

#include <type_traits>

#include "cute/tensor.hpp"

namespace symcomm {

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
