#include "transport/net/rails/lanes.h"

#include <algorithm>

#include "base/error.h"

namespace symcomm::rails {

std::vector<Lane> lanes(int my_rank, int local_rails, int remote_rails) {
  SYMCOMM_REQUIRE(local_rails >= 1 && remote_rails >= 1 && my_rank >= 0, symcommInvalidArgument,
                  "lanes between %d local and %d remote rails (rank %d)", local_rails,
                  remote_rails, my_rank);
  const int n = std::max(local_rails, remote_rails);
  std::vector<Lane> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] =
        Lane{i % local_rails, (i + my_rank % remote_rails) % remote_rails};
  return out;
}

}  // namespace symcomm::rails
