// The reduce-scatter's last step in the fused layer: a member's rows of every member's fp32
// partial product, summed in team-rank order (the same order on every run and implementation)
// and converted to C's type.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "symcomm/symcomm.h"

namespace symcomm {

// c[i] = the sum over t < members of blocks[t * stride + i], i < count, as `out` (float32,
// float16 or bfloat16), on `stream`. Checks the launch.
void sum_blocks(const float* blocks, size_t stride, int members, size_t count,
                symcommDataType_t out, void* c, cudaStream_t stream);

}  // namespace symcomm
