#include "base/param.h"

namespace symcomm {

namespace {
const BoolParam kPdl("SYMCOMM_PDL", "1",
                     "launch the library's kernels with programmatic dependent launch (a "
                     "kernel's blocks wait on the SMs for the one before it on the stream, "
                     "saving the launch latency between them); 0: plain launches");
}  // namespace

bool pdl_enabled() { return kPdl.get(); }

}  // namespace symcomm
