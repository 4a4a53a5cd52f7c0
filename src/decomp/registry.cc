#include "decomp/backend.h"

namespace symcomm {

const std::vector<DecompBackend*>& decomp_backends() {
  // The registry of transpose and halo backends: one line each, preferred first (the order
  // of their speed on 4 x H200 with symmetric pencils, bench/results/h200x4/
  // decomp_497fdd2.jsonl: sm, writing straight into the members' outputs, was the fastest
  // in every case with communication, 256^3 to 1024^3, C32 and R64, 1-D and 2x2 grids:
  // 1.54-2.57x the nccl backend and 355-364 GB/s per GPU at 1024^3; fused next, 4-11%
  // slower; ce 1-8% faster than fused at 512^3 and 1024^3 on 1-D grids only; then
  // ce_pipelined, which ce beat everywhere). The NCCL backends come last: "" never picks
  // them where another backend runs (nccl_pipelined was 0.63-1.32x nccl with
  // communication), and nccl, the baseline, stays last.
  static const std::vector<DecompBackend*> all = {
      make_sm_backend(),
      make_fused_backend(),
      make_ce_backend(),
      make_ce_pipelined_backend(),
      make_copy_backend(),
      make_nccl_pipelined_backend(),
      make_nccl_backend(),
  };
  return all;
}

}  // namespace symcomm
