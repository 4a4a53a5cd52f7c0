// The fused layer's GEMM: row-major C = A x B with cuBLASLt (fused/cublaslt.h), fp32
// accumulation, on a stream; what the implementations that multiply with cuBLASLt share.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/registry.h"
#include "symcomm/symcomm.h"

namespace symcomm {

struct FusedShape;

// Whether fused_gemm can multiply `shape`'s GEMMs here: cuBLASLt loads, and C is in the
// inputs' type or float32 (what cuBLASLt writes).
Verdict fused_gemm_verdict(const FusedShape& shape);

// Row-major c [m, n] = a [m, k] x b, b [k, n] (or [n, k] where b_transposed), inputs of type
// `in`, c of type `out`, on `stream` of `device` (current). k == 0 sets c to zeros.
void fused_gemm(int device, cudaStream_t stream, int64_t m, int64_t n, int64_t k,
                symcommDataType_t in, const void* a, const void* b, bool b_transposed,
                symcommDataType_t out, void* c);

}  // namespace symcomm
