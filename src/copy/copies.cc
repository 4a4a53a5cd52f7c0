#include "copy/copies.h"

namespace symcomm {

std::unique_ptr<Copies> make_copies(symcommMemorySpace_t space, const Topology& topology, Rma& rma,
                                    const Heap& heap) {
  std::unique_ptr<Copies> copies;
  rma.bootstrap().agree_on([&] {
    // The registry of local copies: one line per memory space.
    copies = space == symcommSpaceCuda ? make_cuda_copies(topology, rma.backend(), heap.windows())
                                       : make_host_copies(rma.backend());
  });
  rma.on_team_start([c = copies.get()](symcommTeam_t id) { c->reset_team(id); });
  return copies;
}

}  // namespace symcomm
