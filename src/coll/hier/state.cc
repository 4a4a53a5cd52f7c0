#include "coll/hier/state.h"

namespace symcomm::hier {

namespace {

constexpr size_t kKinds = 2;

// The words, then one count per team id and kind of group.
size_t words_bytes(int nranks) {
  return SYMCOMM_MAX_TEAMS * kKinds * (static_cast<size_t>(nranks) + 1) * sizeof(uint64_t);
}

}  // namespace

State::State(CollContext& ctx) : nranks_(ctx.topology().nranks), rank_(ctx.topology().rank) {
  words_ = static_cast<uint64_t*>(ctx.heap().malloc_internal(words_bytes(nranks_)));
  RmaBackend& backend = ctx.backend();
  backend.clear(words_, words_bytes(nranks_));
  // Word `from` of a group counts rank `from`'s arrivals: that rank alone changes it.
  ctx.rma().transports().single_writer_words(
      words_, SYMCOMM_MAX_TEAMS * kKinds * static_cast<size_t>(nranks_) * sizeof(uint64_t));
  // A new team on an id: its words and counts from zero, cleared on every rank before any
  // member's first call on it (Rma::start_team's barrier).
  ctx.rma().on_team_start([this, &backend](symcommTeam_t id) {
    backend.clear(word(id, Group::Node, 0), kKinds * static_cast<size_t>(nranks_) * sizeof(uint64_t));
    backend.clear(count(id, Group::Node), kKinds * sizeof(uint64_t));
  });
}

uint64_t* State::count(symcommTeam_t id, Group kind) const {
  return words_ + SYMCOMM_MAX_TEAMS * kKinds * static_cast<size_t>(nranks_) +
         static_cast<size_t>(id) * kKinds + static_cast<size_t>(kind);
}

uint64_t* State::word(symcommTeam_t id, Group kind, int from) const {
  return words_ + (static_cast<size_t>(id) * kKinds + static_cast<size_t>(kind)) *
                      static_cast<size_t>(nranks_) + static_cast<size_t>(from);
}

void State::sync(const CollArgs& a, CollContext& ctx, Group kind, const std::vector<int>& members) {
  if (members.size() < 2) return;  // alone in its group
  try {
    std::vector<uint64_t*> from;
    for (int m : members) {
      if (m == a.me) continue;
      const int pe = a.team.world_of(m);
      ctx.rma().transports().to(pe).signal(pe, word(a.team_id, kind, rank_), 1,
                                           symcommSignalAdd, a.stream);
      from.push_back(word(a.team_id, kind, pe));
    }
    ctx.backend().wait_counted(from.data(), static_cast<int>(from.size()),
                               count(a.team_id, kind), a.stream);
  } catch (const Error& e) {
    fail();
    std::string who;
    for (int m : members) who += format("%s%d", who.empty() ? "" : ", ", m);
    throw_error(e.code(), __FILE__, __LINE__,
                format("hier: the sync of %s (team members %s) failed: %s",
                       kind == Group::Node ? "the members of this rank's node"
                                           : "this rank's rail, the members of its local index",
                       who.c_str(), e.what()));
  }
}

}  // namespace symcomm::hier
