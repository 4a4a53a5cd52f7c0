#include "transport/net/rails/replay.h"

#include <algorithm>
#include <utility>

#include "base/error.h"

namespace symcomm::rails {

void ReplayTable::posted(uint64_t id, int lane) {
  const bool fresh = lane_of_.emplace(id, Entry{lane, order_++}).second;
  SYMCOMM_REQUIRE(fresh, symcommInternalError, "operation %llu posted twice while outstanding",
                  static_cast<unsigned long long>(id));
}

bool ReplayTable::completed(uint64_t id) { return lane_of_.erase(id) == 1; }

std::vector<uint64_t> ReplayTable::take(int lane) {
  std::vector<std::pair<uint64_t, uint64_t>> taken;  // (order, id)
  for (auto it = lane_of_.begin(); it != lane_of_.end();) {
    if (it->second.lane == lane) {
      taken.emplace_back(it->second.order, it->first);
      it = lane_of_.erase(it);
    } else {
      ++it;
    }
  }
  std::sort(taken.begin(), taken.end());
  std::vector<uint64_t> ids;
  ids.reserve(taken.size());
  for (const auto& t : taken) ids.push_back(t.second);
  return ids;
}

size_t ReplayTable::outstanding(int lane) const {
  return static_cast<size_t>(std::count_if(lane_of_.begin(), lane_of_.end(),
                                           [&](const auto& e) { return e.second.lane == lane; }));
}

}  // namespace symcomm::rails
