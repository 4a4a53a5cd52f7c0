#include "fused/sum_blocks.h"

#include <algorithm>

#include "base/cuda_runtime_check.h"
#include "base/kernel_load.h"
#include "base/launch.cuh"
#include "fused/convert.cuh"

namespace symcomm {

namespace {

using fused_detail::from_float;

// c[i] = the sum over t < members of blocks[t * stride + i], i < count, in t's order.
template <typename Out>
__global__ void sum_blocks_kernel(const float* blocks, size_t stride, int members, size_t count,
                                  Out* c) {
  pdl_begin();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    float s = 0.0f;
    for (int t = 0; t < members; ++t) s += blocks[static_cast<size_t>(t) * stride + i];
    c[i] = from_float<Out>(s);
  }
}

}  // namespace

void sum_blocks(const float* blocks, size_t stride, int members, size_t count,
                symcommDataType_t out, void* c, cudaStream_t stream) {
  if (!count) return;
  const unsigned grid = static_cast<unsigned>(std::min<size_t>((count + 255) / 256, 1024));
  if (out == symcommFloat32)
    launch_kernel(sum_blocks_kernel<float>, grid, 256, stream, blocks, stride, members, count,
                  static_cast<float*>(c));
  else if (out == symcommFloat16)
    launch_kernel(sum_blocks_kernel<__half>, grid, 256, stream, blocks, stride, members, count,
                  static_cast<__half*>(c));
  else
    launch_kernel(sum_blocks_kernel<__nv_bfloat16>, grid, 256, stream, blocks, stride, members,
                  count, static_cast<__nv_bfloat16*>(c));
  SYMCOMM_CUDART(cudaGetLastError());
}

namespace {
const KernelLibrary kKernels(reinterpret_cast<const void*>(&sum_blocks_kernel<float>));
}  // namespace

}  // namespace symcomm
