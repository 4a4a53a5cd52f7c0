// Transposes between pencils: the plan (which box of its pencil each rank sends to which
// member of its row or column, and where it lands) and its execution through a memory
// space's backend: pack every outgoing box into the workspace, put it into the member's
// receive area, barrier, unpack every incoming box into the output pencil.
#pragma once

#include <vector>

#include "decomp/geometry.h"
#include "copy/box.h"

namespace symcomm {

struct Box {
  int64_t lo[3];
  int64_t hi[3];
  int64_t count() const;
};

struct ExchangePlan {
  std::vector<int> members;          // world ranks that exchange, in team order
  int me = -1;                       // this rank's index in members
  std::vector<Box> send, recv;       // per member: the box sent to it, received from it
  std::vector<int64_t> send_off;     // per member: element offset in this rank's send area
  std::vector<int64_t> recv_off;     // per member: element offset in this rank's receive area
  std::vector<int64_t> remote_off;   // per member: offset of this rank's block in its area
};

// The exchange of `rank` for the transpose from pencil `from` to pencil `to` (X<->Y within a
// column of the process grid, Y<->Z within a row).
ExchangePlan plan_exchange(const Geometry& g, int rank, int from, int to);
// Elements of the send area and of the receive area that every transpose fits in, on every
// rank (the workspace holds both, send area first).
int64_t staging_elements(const Geometry& g);
// A pencil buffer's layout, and a packed box's (x fastest).
BoxLayout pencil_layout(const symcommPencilInfo_t& p);
BoxLayout packed_layout(const Box& b);

}  // namespace symcomm
