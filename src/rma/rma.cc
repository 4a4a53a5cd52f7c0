#include "rma/rma.h"

#include <algorithm>

namespace symcomm {

Rma::Rma(Bootstrap& bootstrap, const Topology& topology, Heap& heap,
         const Registrations& registrations, symcommMemorySpace_t space)
    : bootstrap_(bootstrap), topology_(topology),
      teams_(topology.nranks, topology.local_ranks) {
  const int n = topology.nranks;
  area_ = static_cast<char*>(heap.malloc_internal(RmaLayout::area_bytes(n)));
  bootstrap.agree_on([&] {
    // The registry of RMA backends: one line per memory space.
    backend_ = space == symcommSpaceCuda ? make_cuda_rma(topology, heap.windows(), area_)
                                         : make_host_rma(topology);
    backend_->clear(area_, RmaLayout::area_bytes(n));
  });
  transports_ = std::make_unique<Transports>(
      TransportContext{bootstrap, topology, heap, registrations, space, *backend_});
  backend_->set_progress([t = transports_.get()] { t->progress(); });
  // Word r of a team's slot array counts member r's barriers: member r alone changes it.
  transports_->single_writer_words(area_, RmaLayout::area_bytes(n));
  peer_slots_.resize(SYMCOMM_MAX_TEAMS);
  for (symcommTeam_t id = 0; id < SYMCOMM_MAX_TEAMS; ++id)
    for (int r = 0; r < n; ++r)
      peer_slots_[static_cast<size_t>(id)].push_back(
          static_cast<uint64_t*>(heap.peer_ptr(slots(id), r)));
  bootstrap.barrier();  // nobody touches a peer's area before the peer cleared it
}

uint64_t* Rma::slots(symcommTeam_t id) const {
  return reinterpret_cast<uint64_t*>(area_ +
                                     static_cast<size_t>(id) * RmaLayout::slots_bytes(topology_.nranks));
}

std::vector<symcommTeam_t> Rma::agree_ids(bool member, const int32_t args[4], int count) {
  struct Offer {
    int32_t member;
    int32_t args[4];
    uint64_t free;
  } mine{member ? 1 : 0, {args[0], args[1], args[2], args[3]}, teams_.free_mask()};
  std::vector<Offer> all(static_cast<size_t>(topology_.nranks));
  bootstrap_.allgather(&mine, sizeof mine, all.data());
  uint64_t free = ~uint64_t{0};
  const Offer* first = nullptr;
  for (int r = 0; r < topology_.nranks; ++r) {
    const Offer& o = all[static_cast<size_t>(r)];
    free &= o.free;
    if (!o.member) continue;
    if (!first) first = &o;
    SYMCOMM_REQUIRE(std::equal(o.args, o.args + 4, first->args), symcommInvalidUsage,
                    "team creation needs the same arguments on every member of the parent: "
                    "rank %d passes (%d, %d, %d, %d), another member (%d, %d, %d, %d)", r,
                    o.args[0], o.args[1], o.args[2], o.args[3], first->args[0], first->args[1],
                    first->args[2], first->args[3]);
  }
  // Every rank sees the same offers: a parent that is a team on no rank fails everywhere
  // (before, every rank got SYMCOMM_TEAM_INVALID and success).
  SYMCOMM_REQUIRE(first != nullptr, symcommInvalidArgument,
                  "the parent team %d is a team on no rank", args[0]);
  std::vector<symcommTeam_t> ids;
  for (int id = 0; id < SYMCOMM_MAX_TEAMS && static_cast<int>(ids.size()) < count; ++id)
    if (free >> id & 1) ids.push_back(id);
  SYMCOMM_REQUIRE(static_cast<int>(ids.size()) == count, symcommOutOfMemory,
                  "no %d team id(s) are free on every rank (at most %d teams; destroy some)",
                  count, SYMCOMM_MAX_TEAMS);
  return ids;
}

symcommTeam_t Rma::split_strided(symcommTeam_t parent, int start, int stride, int size) {
  const bool member = teams_.exists(parent);
  Team team;
  bootstrap_.agree_on([&] {
    if (member) team = teams_.get(parent).strided(start, stride, size);
  });
  const int32_t args[4] = {parent, start, stride, size};
  symcommTeam_t id = agree_ids(member, args, 1)[0];
  const bool in = team.index_of(topology_.rank) >= 0;
  start_team(id, in ? team : Team{});
  return in ? id : SYMCOMM_TEAM_INVALID;
}

std::pair<symcommTeam_t, symcommTeam_t> Rma::split_2d(symcommTeam_t parent, int xrange) {
  const bool member = teams_.exists(parent);
  Team row, column;
  bootstrap_.agree_on([&] {
    if (!member) return;
    const Team& p = teams_.get(parent);
    SYMCOMM_REQUIRE(xrange >= 1, symcommInvalidArgument, "xrange %d is not positive", xrange);
    int me = p.index_of(topology_.rank);
    row = p.row_of(me, xrange);
    column = p.column_of(me, xrange);
  });
  const int32_t args[4] = {parent, xrange, 0, 0};
  // Rows are disjoint, and so are columns: all rows share one id (and one slot array,
  // indexed by world rank), all columns another.
  std::vector<symcommTeam_t> ids = agree_ids(member, args, 2);
  start_team(ids[0], row);
  start_team(ids[1], column);
  return member ? std::make_pair(ids[0], ids[1])
                : std::make_pair(SYMCOMM_TEAM_INVALID, SYMCOMM_TEAM_INVALID);
}

void Rma::destroy(symcommTeam_t id) { teams_.destroy(id); }

void Rma::on_team_start(std::function<void(symcommTeam_t)> reset) {
  team_start_.push_back(std::move(reset));
}

void Rma::start_team(symcommTeam_t id, const Team& team) {
  bootstrap_.agree_on([&] {
    if (team.valid()) teams_.set(id, team);
    backend_->clear(slots(id), RmaLayout::slots_bytes(topology_.nranks));
    backend_->reset_epoch(id);
    for (const auto& reset : team_start_) reset(id);
  });
  bootstrap_.barrier();  // cleared everywhere before any member's first barrier
}

DeviceComm Rma::device_comm(symcommTeam_t id) {
  const Team& t = teams_.get(id);
  SYMCOMM_REQUIRE(t.index_of(topology_.rank) >= 0, symcommInvalidArgument,
                  "rank %d is not a member of team %d", topology_.rank, id);
  DeviceComm handle{};
  backend_->fill_device_comm(handle, id, t);
  // Members that kernels do not reach by load and store: through their transport's ring.
  for (int i = 0; i < t.size; ++i) {
    const int member = t.world_of(i);
    if (!transports_->connected(member)) continue;
    Transport& tr = transports_->to(member);
    if (tr.load_store()) continue;
    handle.net = tr.device_ring();
    break;
  }
  return handle;
}

BarrierArgs Rma::barrier_args(symcommTeam_t id) {
  // A failed barrier leaves the members' barrier counts apart (it counted itself here; a
  // member that never came did not), so a later barrier could pass on an arrival from
  // another call: every barrier, and what is built on them (the copy and direct
  // collectives, the decomposition's transposes and halo exchanges), refuses from then on.
  SYMCOMM_REQUIRE(!backend_->barrier_failed(), symcommTimeout,
                  "a barrier on this communicator failed earlier (SYMCOMM_WAIT_TIMEOUT passed, "
                  "or a peer was lost): the members' barrier counts may no longer agree, so "
                  "barriers, and the collectives and transposes built on them, cannot run on "
                  "it any more (finalize it)");
  return BarrierArgs{id, teams_.get(id), topology_.rank, peer_slots_[static_cast<size_t>(id)].data(),
                     slots(id), transports_.get()};
}

}  // namespace symcomm
