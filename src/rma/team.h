// Teams: ordered, strided subsets of a communicator's ranks (member i is world rank
// start + i * stride). Pure bookkeeping: the table of this rank's teams, by id.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "symcomm/symcomm.h"

namespace symcomm {

struct Team {
  int start = 0;
  int stride = 1;
  int size = 0;
  bool valid() const { return size > 0; }
  // The index of world rank `world` in the team, or -1.
  int index_of(int world) const;
  int world_of(int index) const { return start + index * stride; }

  // Members start, start + stride, ... (size of them) of this team; checks the arguments.
  Team strided(int start, int stride, int size) const;
  // This team as rows of `xrange` members: the row and the column of member `index`.
  Team row_of(int index, int xrange) const;
  Team column_of(int index, int xrange) const;
};

class TeamTable {
 public:
  // The world of `nranks` ranks and this rank's node. The node team exists when the node's
  // ranks are evenly spaced (always so under symrun, torchrun, mpirun --map-by node ...).
  TeamTable(int nranks, const std::vector<int>& node_ranks);

  bool exists(symcommTeam_t id) const;
  const Team& get(symcommTeam_t id) const;  // throws symcommInvalidArgument for a bad id
  // Bit i set: id i is free here.
  uint64_t free_mask() const;
  void set(symcommTeam_t id, const Team& team);
  void destroy(symcommTeam_t id);

 private:
  std::array<Team, SYMCOMM_MAX_TEAMS> teams_{};
};

}  // namespace symcomm
