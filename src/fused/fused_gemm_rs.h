// The fused implementation's GEMM + reduce-scatter (fused_impl.cu chooses it): one kernel
// multiplies every owner's rows of A by B and its epilogue stores each partial tile straight
// into the owner's slot of this member (fused/scatter_gemm.h), the owners in turn from the
// member after this one, so that the members start on different owners; then this member
// flags every owner, waits for every member's flag and sums its slots in team-rank order, as
// pipelined and sequential do.
#pragma once

#include <cstddef>

#include "base/registry.h"
#include "fused/fused.h"

namespace symcomm {

// Whether it runs `s` (GEMM + reduce-scatter) here: the CUTLASS kernels built, every member
// mapped here, every member's K and N multiples of 8.
Verdict fused_gemm_rs_verdict(const FusedShape& s, const FusedContext& ctx);
// Bytes of symmetric workspace: the flags, every member's slot of this member's rows, and the
// kernel's scratch.
size_t fused_gemm_rs_workspace(const FusedShape& s);
void fused_gemm_rs(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
                   symcommStream_t stream);

}  // namespace symcomm
