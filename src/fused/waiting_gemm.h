// The fused layer's own GEMM kernels: row-major C [M, N] = A [M, K] x B (B [K, N], or [N, K]
// where b_transposed), fp32 accumulation, whose tiles wait for their rows of A. A arrives by
// team member (an all-gather into it): before a tile loads rows of member t, its producer
// waits until flags[t] >= 1, as the device API's waits do (bounded by SYMCOMM_WAIT_TIMEOUT,
// ended by an abort; a failure is recorded in the communicator's device error and the tile
// goes on, so that the kernel ends). This member's own rows (`me`) are not waited for.
//
// The kernels are CUTLASS's warp-specialised, persistent SM90 GEMM (WGMMA, TMA) with a
// producer that waits (src/fused/sm90a/, built where CUTLASS's headers are found); that file
// registers itself here, and the fused implementation (fused_impl.cu) finds it or says why
// not.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "base/registry.h"
#include "symcomm/device_comm.h"
#include "symcomm/fused.h"

namespace symcomm {

// Which rows of A come from whom, and where their arrival shows.
struct RowArrival {
  const uint64_t* flags;  // [members]: member t's rows are in A once flags[t] >= 1
  int32_t members;
  int32_t me;  // rows already in A before the kernel starts
  int32_t row_start[SYMCOMM_FUSED_MAX_MEMBERS + 1];  // member t's rows: [row_start[t], [t + 1])
  DeviceComm comm;  // the team's: the bound, the abort flag, the error record
};

struct WaitingGemmCall {
  int64_t m, n, k;
  symcommDataType_t in, out;
  bool b_transposed;
  const void* a;
  const void* b;
  void* c;
  RowArrival arrival;
  // The most CTAs (SMs) the persistent kernel may take (0: every SM): room left for other
  // kernels that its tiles wait for, such as the pushes of this GPU's own rows.
  int max_ctas;
};

class WaitingGemm {
 public:
  virtual ~WaitingGemm() = default;
  virtual const char* name() const = 0;
  // Whether it multiplies this shape and these types (TMA needs rows of 16-byte multiples).
  virtual Verdict can_run(int64_t m, int64_t n, int64_t k, symcommDataType_t in,
                          symcommDataType_t out, bool b_transposed) const = 0;
  // Tiles (of one wave's worth of CTAs) that the shape makes on `device`: the caller's
  // measure of whether one launch fills the GPU.
  virtual int64_t tiles(int64_t m, int64_t n) const = 0;
  virtual void run(const WaitingGemmCall& call, int device, cudaStream_t stream) const = 0;
};

// The registered kernels, or nullptr (with *why) where none were built.
const WaitingGemm* waiting_gemm(std::string* why);

}  // namespace symcomm
