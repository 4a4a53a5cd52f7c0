#include "transport/net/rail_set.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/log.h"

namespace symcomm {

namespace {

// An endpoint's address as the exchange carries it (a rail a rank lacks: 0 bytes).
struct Name {
  uint64_t bytes;
  uint8_t data[FabricEndpoint::kMaxNameBytes];
};

}  // namespace

RailSet::RailSet(Bootstrap& bootstrap, int rank, int nranks,
                 const std::vector<std::string>& domains)
    : bootstrap_(bootstrap), nranks_(nranks) {
  SYMCOMM_REQUIRE(!domains.empty(), symcommInternalError, "a net transport without rails");
  const int mine = static_cast<int>(domains.size());
  counts_.resize(static_cast<size_t>(nranks));
  bootstrap.allgather(&mine, sizeof mine, counts_.data());
  most_ = *std::max_element(counts_.begin(), counts_.end());
  bootstrap.agree_on([&] {
    for (const std::string& d : domains) rails_.push_back(std::make_unique<FabricEndpoint>(d));
  });
  std::vector<Name> names(static_cast<size_t>(most_)), all;
  bootstrap.agree_on([&] {
    for (size_t i = 0; i < rails_.size(); ++i) {
      const std::vector<uint8_t> n = rails_[i]->name();
      names[i].bytes = n.size();
      std::memcpy(names[i].data, n.data(), n.size());
    }
  });
  all.resize(static_cast<size_t>(nranks) * names.size());
  bootstrap.allgather(names.data(), names.size() * sizeof(Name), all.data());
  std::vector<std::vector<std::vector<uint8_t>>> table(static_cast<size_t>(nranks));
  for (int pe = 0; pe < nranks; ++pe)
    for (int r = 0; r < counts_[static_cast<size_t>(pe)]; ++r) {
      const Name& n = all[static_cast<size_t>(pe * most_ + r)];
      table[static_cast<size_t>(pe)].emplace_back(n.data, n.data + n.bytes);
    }
  bootstrap.agree_on([&] {
    for (auto& e : rails_) e->insert(table);
  });
  for (int pe = 0; pe < nranks; ++pe)
    lanes_.push_back(rails::lanes(rank, mine, counts_[static_cast<size_t>(pe)]));
  for (size_t i = 0; i < rails_.size(); ++i)
    SYMCOMM_DEBUG("net transport: rail %zu: %s", i, rails_[i]->describe().c_str());
}

void RailSet::register_heap_range(char* base, size_t offset, size_t bytes) {
  std::vector<FabricEndpoint::Registration> mine(static_cast<size_t>(most_)), all;
  bootstrap_.agree_on([&] {
    // Keys the provider does not choose are ours: the region's number, alike on every rank.
    const uint64_t requested = regions_.size() + 1;
    for (size_t i = 0; i < rails_.size(); ++i)
      mine[i] = rails_[i]->register_range(base, bytes, requested);
  });
  all.resize(static_cast<size_t>(nranks_) * mine.size());
  bootstrap_.allgather(mine.data(), mine.size() * sizeof(FabricEndpoint::Registration),
                       all.data());
  std::lock_guard<std::mutex> lock(regions_mutex_);
  regions_.push_back(Region{offset, bytes, std::move(all)});
}

RemoteRange RailSet::remote(int pe, int rail, size_t offset, size_t bytes) const {
  std::lock_guard<std::mutex> lock(regions_mutex_);
  for (const Region& r : regions_) {
    if (offset < r.offset || offset >= r.offset + r.bytes) continue;
    const size_t in = offset - r.offset;
    const FabricEndpoint::Registration& at = r.remote[static_cast<size_t>(pe * most_ + rail)];
    return RemoteRange{at.base + in, at.key, std::min(bytes, r.bytes - in)};
  }
  SYMCOMM_THROW(symcommInternalError, "heap offset %zu is not registered with the network",
                offset);
}

bool RailSet::tcp() const { return rails_[0]->abortable(); }

}  // namespace symcomm
