#include "transport/net/rails/stripes.h"

#include <algorithm>

#include "base/error.h"

namespace symcomm::rails {

Striper::Striper(const StripePolicy& policy) : policy_(policy) {
  SYMCOMM_REQUIRE(policy.align >= 1 && policy.slow_factor >= 1, symcommInvalidArgument,
                  "a stripe policy with alignment %zu and slow factor %g", policy.align,
                  policy.slow_factor);
}

void observe_rate(LaneState& lane, size_t bytes, double seconds) {
  if (bytes < kRateSampleMin || !(seconds > 0)) return;
  const double sample = static_cast<double>(bytes) / seconds;
  lane.rate = lane.rate > 0 ? 0.75 * lane.rate + 0.25 * sample : sample;
}

std::vector<int> Striper::stripe_set(const std::vector<LaneState>& lanes) const {
  double fastest = 0;
  bool unmeasured = false;
  for (const LaneState& l : lanes)
    if (l.up) {
      fastest = std::max(fastest, l.rate);
      unmeasured |= l.rate <= 0;
    }
  std::vector<int> set;
  for (size_t i = 0; i < lanes.size(); ++i) {
    const LaneState& l = lanes[i];
    // Until every lane that is up has been measured, they all weigh alike.
    if (l.up && (unmeasured || l.rate * policy_.slow_factor >= fastest))
      set.push_back(static_cast<int>(i));
  }
  return set;
}

std::vector<Piece> Striper::plan(size_t bytes, const std::vector<LaneState>& lanes) {
  if (bytes == 0) return {};
  const std::vector<int> set = stripe_set(lanes);
  SYMCOMM_REQUIRE(!set.empty(), symcommPeerLost, "every rail to the peer is down (%zu lanes)",
                  lanes.size());
  if (bytes < policy_.threshold || set.size() == 1) {
    // Whole, on the next lane that is up (in turn, whatever the rates).
    for (size_t k = 0; k < lanes.size(); ++k) {
      const size_t lane = (next_ + k) % lanes.size();
      if (!lanes[lane].up) continue;
      next_ = lane + 1;
      return {Piece{static_cast<int>(lane), 0, bytes}};
    }
  }
  bool unmeasured = false;
  double total = 0;
  for (int lane : set) {
    unmeasured |= lanes[static_cast<size_t>(lane)].rate <= 0;
    total += lanes[static_cast<size_t>(lane)].rate;
  }
  auto weight = [&](int lane) {
    return unmeasured ? 1.0 / static_cast<double>(set.size())
                      : lanes[static_cast<size_t>(lane)].rate / total;
  };
  // Each lane's share rounded down to the alignment; what is left (less than an alignment a
  // lane) goes to the last, so that every piece but the last begins and ends aligned.
  std::vector<size_t> share(set.size());
  size_t given = 0;
  for (size_t k = 0; k < set.size(); ++k) {
    const double exact = static_cast<double>(bytes) * weight(set[k]);
    share[k] = std::min(static_cast<size_t>(exact) / policy_.align * policy_.align, bytes - given);
    given += share[k];
  }
  share.back() += bytes - given;
  std::vector<Piece> pieces;
  size_t offset = 0;
  for (size_t k = 0; k < set.size(); ++k) {
    if (share[k] == 0) continue;
    pieces.push_back(Piece{set[k], offset, share[k]});
    offset += share[k];
  }
  return pieces;
}

}  // namespace symcomm::rails
