// What the fused layer's CUTLASS kernels share (fused/sm90a/): the CUTLASS element type of
// each CUDA type, the tile and cluster shapes, CUTLASS's stride of a packed matrix, the
// kernels' parameters kept per call, and their shared memory allowed once per device.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <type_traits>
#include <utility>

#include "base/cuda_runtime_check.h"

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

// A kernel's parameters for the last kCached calls, found again by the key they were made
// from: encoding them (TMA descriptors, on the host) takes microseconds a call, and a fused
// plan runs the same call each time. `Key` is trivially copyable, zeroed before it is filled
// (keys compare byte by byte).
template <class Key, class Params>
class ParamsCache {
 public:
  static_assert(std::is_trivially_copyable<Key>::value, "keys compare byte by byte");
  // The parameters of `key`, made by `make()` where none are kept.
  template <class Make>
  Params get(const Key& key, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [k, params] : cache_)
        if (!std::memcmp(&k, &key, sizeof key)) return params;
    }
    const Params params = make();
    std::lock_guard<std::mutex> lock(mutex_);
    cache_.emplace_front(key, params);
    if (cache_.size() > kCached) cache_.pop_back();
    return params;
  }

 private:
  static constexpr size_t kCached = 16;
  std::mutex mutex_;
  std::deque<std::pair<Key, Params>> cache_;
};

// Allows `kernel` `bytes` of dynamic shared memory on `device`, once per device.
template <auto kernel>
void allow_shared_memory(int device, int bytes) {
  static std::mutex mutex;
  static std::set<int> done;
  std::lock_guard<std::mutex> lock(mutex);
  if (done.count(device)) return;
  SYMCOMM_CUDART(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done.insert(device);
}

}  // namespace symcomm
