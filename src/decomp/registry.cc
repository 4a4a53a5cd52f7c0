#include "decomp/backend.h"

namespace symcomm {

const std::vector<DecompBackend*>& decomp_backends() {
  // The registry of transpose and halo backends: one line each, preferred first (the order
  // of their speed on 4 x H200, bench/results/h200x4/decomp_a45e7a6.jsonl and
  // decomp_ce_a3643b7.jsonl: fused was the fastest with communication, 1.46-2.2x the nccl
  // backend, except at 512^3 and 1024^3 on 1-D grids, where ce was 1-8% faster than it; sm
  // and ce next, then ce_pipelined, which ce beat everywhere). The NCCL backends come last:
  // "" never picks them where another backend runs (nccl_pipelined was 0.64-1.26x nccl with
  // communication), and nccl, the baseline, stays last.
  static const std::vector<DecompBackend*> all = {
      make_fused_backend(),
      make_sm_backend(),
      make_ce_backend(),
      make_ce_pipelined_backend(),
      make_copy_backend(),
      make_nccl_pipelined_backend(),
      make_nccl_backend(),
  };
  return all;
}

}  // namespace symcomm
