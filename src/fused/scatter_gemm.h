// The fused layer's GEMM whose row blocks are stored to different places: group g multiplies
// rows [a_row[g], a_row[g] + rows[g]) of A [*, K] (row-major) by B (B [K, N], or [N, K] where
// b_transposed) and stores the float32 product, row-major [rows[g], N], at out[g]. out[g] may
// be any memory this GPU stores to, a team member's mapped here included: GEMM +
// reduce-scatter's epilogue stores each partial tile straight into its owner's slot, with no
// copy after the GEMM (fused_gemm_rs.cc).
//
// One persistent kernel takes the groups' tiles in group order, so the caller orders the groups
// (each member starts on a different owner). The kernel is CUTLASS's warp-specialised,
// persistent SM90 grouped GEMM (WGMMA, TMA loads, TMA stores; src/fused/sm90a/, built where
// CUTLASS's headers are found), which registers itself here.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/registry.h"
#include "symcomm/fused.h"

namespace symcomm {

struct ScatterGemmCall {
  int64_t n, k;
  symcommDataType_t in;  // float16 or bfloat16; the products are float32
  bool b_transposed;
  const void* a;
  const void* b;
  int groups;  // each with rows > 0
  int64_t a_row[SYMCOMM_FUSED_MAX_MEMBERS];
  int64_t rows[SYMCOMM_FUSED_MAX_MEMBERS];
  float* out[SYMCOMM_FUSED_MAX_MEMBERS];
  // Device memory of this GPU, scratch_bytes() of it, not used by anything else until the
  // kernel ends: the groups' arguments and CUTLASS's workspace.
  void* scratch;
};

class ScatterGemm {
 public:
  virtual ~ScatterGemm() = default;
  virtual const char* name() const = 0;
  // Whether it multiplies these shapes and types (TMA needs rows of 16-byte multiples).
  virtual Verdict can_run(int64_t n, int64_t k, symcommDataType_t in) const = 0;
  // Bytes of scratch a call needs: the same on every GPU (a bound).
  virtual size_t scratch_bytes() const = 0;
  virtual void run(const ScatterGemmCall& call, int device, cudaStream_t stream) const = 0;
};

// The registered kernels, or nullptr (with *why) where none were built.
const ScatterGemm* scatter_gemm(std::string* why);

}  // namespace symcomm
