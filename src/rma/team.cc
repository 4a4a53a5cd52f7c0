#include "rma/team.h"

#include <algorithm>

#include "base/error.h"

namespace symcomm {

static_assert(SYMCOMM_MAX_TEAMS <= 64, "free_mask() is one 64-bit word");

int Team::index_of(int world) const {
  if (!valid() || world < start) return -1;
  int d = world - start;
  if (d % stride != 0) return -1;
  int i = d / stride;
  return i < size ? i : -1;
}

Team Team::strided(int first, int step, int count) const {
  SYMCOMM_REQUIRE(count >= 1, symcommInvalidArgument, "size %d is not positive", count);
  SYMCOMM_REQUIRE(step >= 1, symcommInvalidArgument, "stride %d is not positive", step);
  SYMCOMM_REQUIRE(first >= 0 && first < size, symcommInvalidArgument,
                  "start %d is out of range for a parent team of %d ranks", first, size);
  SYMCOMM_REQUIRE(static_cast<int64_t>(first) + static_cast<int64_t>(step) * (count - 1) < size,
                  symcommInvalidArgument,
                  "start %d + stride %d x (size %d - 1) goes past the parent team's %d ranks",
                  first, step, count, size);
  // A team of one has no stride: any step is allowed there, and stride x step would overflow
  // (and a stride of 0 divide by zero in index_of). Otherwise the product stays below the
  // world's size, as the last member's world rank does.
  return Team{world_of(first), count == 1 ? 1 : stride * step, count};
}

// An xrange of the parent's size or more gives one row of every member, and columns of one:
// clamped to the size, so that no index arithmetic below overflows for xrange near INT_MAX.
Team Team::row_of(int index, int xrange) const {
  xrange = std::min(xrange, size);
  int row = index / xrange;
  return strided(row * xrange, 1, std::min(xrange, size - row * xrange));
}

Team Team::column_of(int index, int xrange) const {
  xrange = std::min(xrange, size);
  int col = index % xrange;
  return strided(col, xrange, (size - col + xrange - 1) / xrange);
}

TeamTable::TeamTable(int nranks, const std::vector<int>& node_ranks) {
  teams_[SYMCOMM_TEAM_WORLD] = Team{0, 1, nranks};
  int n = static_cast<int>(node_ranks.size());
  int stride = n > 1 ? node_ranks[1] - node_ranks[0] : 1;
  for (int i = 1; i < n; ++i)
    if (node_ranks[static_cast<size_t>(i)] - node_ranks[static_cast<size_t>(i - 1)] != stride)
      return;  // not evenly spaced: no node team
  teams_[SYMCOMM_TEAM_NODE] = Team{node_ranks.front(), stride, n};
}

bool TeamTable::exists(symcommTeam_t id) const {
  return id >= 0 && id < SYMCOMM_MAX_TEAMS && teams_[static_cast<size_t>(id)].valid();
}

const Team& TeamTable::get(symcommTeam_t id) const {
  SYMCOMM_REQUIRE(exists(id), symcommInvalidArgument, "team %d does not exist here", id);
  return teams_[static_cast<size_t>(id)];
}

uint64_t TeamTable::free_mask() const {
  uint64_t mask = 0;
  for (size_t id = 2; id < teams_.size(); ++id)
    if (!teams_[id].valid()) mask |= uint64_t{1} << id;
  return mask;
}

void TeamTable::set(symcommTeam_t id, const Team& team) { teams_[static_cast<size_t>(id)] = team; }

void TeamTable::destroy(symcommTeam_t id) {
  SYMCOMM_REQUIRE(id != SYMCOMM_TEAM_WORLD && id != SYMCOMM_TEAM_NODE, symcommInvalidArgument,
                  "the world and node teams cannot be destroyed");
  get(id);
  teams_[static_cast<size_t>(id)] = Team{};
}

}  // namespace symcomm
