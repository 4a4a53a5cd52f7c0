// Where the ranks are: which share a node, this rank's place on its node, its GPU, and
// which peers it can load from and store to directly.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "symcomm/symcomm.h"

namespace symcomm {

struct Topology {
  int rank = 0;
  int nranks = 1;
  int node = 0;    // index of this rank's node, nodes numbered by their lowest rank
  int nnodes = 1;
  int local_rank = 0;
  int local_size = 1;
  std::vector<int> node_of;      // node index of every rank
  std::vector<int> local_ranks;  // the ranks of this node, ascending
  std::vector<char> accessible;  // per rank: load/store accessible from this rank
  std::vector<int> gpu_owner;    // per rank: the lowest rank on the same GPU (itself if alone)
  int device = -1;               // CUDA device ordinal in the cuda space, else -1

  bool same_node(int pe) const { return node_of[static_cast<size_t>(pe)] == node; }
  // Why rank `pe` is not load/store accessible from this rank ("" where it is).
  std::string why_inaccessible(int pe) const;
};

// Collective. Groups ranks into nodes by hostname and boot id (or SYMCOMM_NODE_NAME). In
// the host space, every rank of the node is accessible. In the cuda space, picks the device
// (`requested` >= 0, else SYMCOMM_DEVICE, else local rank modulo the device count) and marks
// a peer of the node accessible when both GPUs are one, or P2P-capable. A peer GPU that this
// process cannot see (CUDA_VISIBLE_DEVICES) is taken as accessible; mapping its memory then
// proves it or fails with a clear error.
Topology discover_topology(Bootstrap& bootstrap, symcommMemorySpace_t space, int requested);

}  // namespace symcomm
