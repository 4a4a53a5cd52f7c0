// Passing file descriptors between the ranks of a node: each rank listens on an abstract
// Unix-domain socket (@symcomm-<uid>-<comm id>-<rank>: nothing on the file system, so a rank
// that is killed leaves no file behind; the communicator's id is random, and both ends check
// that the other runs as this user) and sends its descriptors with SCM_RIGHTS.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "topology/topology.h"

namespace symcomm {

class FdExchange {
 public:
  // Not collective by itself: the caller must pass a barrier before the first exchange so
  // that every rank's socket exists. The socket's name goes with the object.
  FdExchange(const Bootstrap& bootstrap, const Topology& topology);

  // Collective over the ranks of the node: sends `fd` to every other local rank and returns
  // the descriptor each of them sent, indexed by rank (empty for this rank and other nodes).
  // `tag` must be the same on all ranks and larger for every exchange, failed ones included:
  // descriptors that arrive under an older tag (sent for an exchange that failed here before
  // they were accepted) are closed unused.
  std::vector<Fd> exchange(int fd, uint64_t tag);


 private:
  std::string name_of(int rank) const;

  const Bootstrap& bootstrap_;
  const Topology& topology_;
  Fd listener_;
  // Descriptors that arrived for a later exchange than the one in progress.
  std::map<std::pair<uint64_t, int>, Fd> early_;
};

}  // namespace symcomm
