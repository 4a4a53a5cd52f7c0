// Lanes between two ranks of a multi-rail net transport: which local rail talks to which rail
// of the peer. Peers may have different rail counts. There are max(L_local, L_remote) lanes;
// lane i uses local rail i mod L_local and remote rail (i + my_rank) mod L_remote, so that the
// senders to one rank start on different rails of it and its receive traffic spreads over its
// NICs (NVSHMEM's pe * rails + rail mapping starts every sender on the same remote NIC).
#pragma once

#include <vector>

namespace symcomm::rails {

struct Lane {
  int local_rail;
  int remote_rail;
};

// Throws symcommInvalidArgument where a count is below 1 or my_rank is negative.
std::vector<Lane> lanes(int my_rank, int local_rails, int remote_rails);

}  // namespace symcomm::rails
