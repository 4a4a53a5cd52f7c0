// The sender's record of what is in flight on each lane of a multi-rail net transport, for
// failover: an operation stays here from its post until its completion (delivery complete).
// When a lane fails (an error completion, or operations outstanding and no completion for the
// rail timeout: tcp stalls silently), everything outstanding on it is taken out and posted
// again on lanes that are up, with the same immediate data: a piece that had landed before
// the failure lands again with the same bytes and the target drops it (epochs.h); signals
// and atomics are de-duplicated the same way. Nothing is lost and nothing applied twice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace symcomm::rails {

class ReplayTable {
 public:
  // Operation `id` (the transport's; unique while outstanding) was posted on `lane`.
  void posted(uint64_t id, int lane);
  // It completed; false where it was not outstanding (completed before, or taken).
  bool completed(uint64_t id);
  // `lane` failed: its outstanding operations, oldest first, no longer recorded (the caller
  // posts them again elsewhere, and records them with posted()).
  std::vector<uint64_t> take(int lane);
  size_t outstanding() const { return lane_of_.size(); }
  size_t outstanding(int lane) const;

 private:
  uint64_t order_ = 0;  // posting order, for oldest-first replays
  struct Entry {
    int lane;
    uint64_t order;
  };
  std::unordered_map<uint64_t, Entry> lane_of_;
};

}  // namespace symcomm::rails
