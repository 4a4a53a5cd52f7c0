// How a multi-rail net transport spreads one operation to a peer over the lanes to it
// (lanes.h). Below a threshold an operation goes whole on one lane, the lanes taken in turn
// per peer. From the threshold on it is striped over every lane of the stripe set, in aligned
// pieces weighted by each lane's measured rate: one stream uses every NIC, and a slower NIC
// gets a smaller share instead of holding back the whole. The stripe set is the lanes that
// are up and not more than `slow_factor` times slower than the fastest (UCX's rule: such a
// lane costs more than it adds). Every byte is in exactly one piece.
#pragma once

#include <cstddef>
#include <vector>

namespace symcomm::rails {

struct LaneState {
  bool up = true;
  double rate = 0;  // bytes per second as measured; 0: not yet (all such lanes weigh alike)
};

struct Piece {
  int lane;
  size_t offset;  // into the operation
  size_t bytes;
};

struct StripePolicy {
  size_t threshold = size_t{64} << 10;  // operations from this size on are striped
  size_t align = 128;                   // pieces begin at multiples of this (but the last)
  double slow_factor = 4;               // lanes this much slower than the fastest leave the set
};

// Transfers smaller than this say more about latency than about a lane's rate: not measured.
constexpr size_t kRateSampleMin = size_t{64} << 10;

// A lane's rate after a transfer of `bytes` on it took `seconds` from its start (an average
// that weighs the newest transfer a quarter; the first sets it).
void observe_rate(LaneState& lane, size_t bytes, double seconds);

class Striper {
 public:
  explicit Striper(const StripePolicy& policy);  // throws symcommInvalidArgument
  // The pieces of an operation of `bytes` over `lanes` (none for 0 bytes). Throws
  // symcommPeerLost where no lane is up.
  std::vector<Piece> plan(size_t bytes, const std::vector<LaneState>& lanes);
  // The lanes a striped operation uses now.
  std::vector<int> stripe_set(const std::vector<LaneState>& lanes) const;

 private:
  StripePolicy policy_;
  size_t next_ = 0;  // the lane after the last whole operation's
};

}  // namespace symcomm::rails
