// The fused layer's own kernels (fused/waiting_gemm.h, fused/scatter_gemm.h), found in the
// registries their files fill where CUTLASS's headers were found at build time.
#include <string>

#include "fused/scatter_gemm.h"
#include "fused/waiting_gemm.h"

namespace symcomm {

namespace {

template <class Kernel>
const Kernel* first_registered(std::string* why) {
  const auto& all = Registry<Kernel>::instance().all();
  if (all.empty()) {
    *why = "symcomm was built without CUTLASS's headers, so without its GEMM kernels "
           "(SYMCOMM_CUTLASS_DIR; scripts/install-deps.sh installs pip's nvidia-cutlass)";
    return nullptr;
  }
  return all.front();
}

}  // namespace

const WaitingGemm* waiting_gemm(std::string* why) { return first_registered<WaitingGemm>(why); }
const ScatterGemm* scatter_gemm(std::string* why) { return first_registered<ScatterGemm>(why); }

}  // namespace symcomm
