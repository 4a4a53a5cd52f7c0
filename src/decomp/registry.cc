#include "decomp/backend.h"

namespace symcomm {

const std::vector<DecompBackend*>& decomp_backends() {
  // The registry of transpose and halo backends: one line each, preferred first.
  static const std::vector<DecompBackend*> all = {
      make_copy_backend(),
      make_sm_backend(),
      make_fused_backend(),
      make_ce_pipelined_backend(),
      make_nccl_backend(),
  };
  return all;
}

}  // namespace symcomm
