// The net transport's rails on this rank, and what it knows of every rank's: one endpoint a
// rail (endpoint.h), opened together; every rank's rail count, its rails' addresses (each
// endpoint here can address every rail of every rank) and its memory keys for each heap range
// on each rail. Ranks may have different rail counts: between two ranks the lanes of
// rails/lanes.h decide which local rail talks to which remote rail. The exchanges are
// collective over the communicator.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/net/endpoint.h"
#include "transport/net/rails/lanes.h"

namespace symcomm {

class RailSet {
 public:
  // Collective: opens an endpoint on each of `domains` (this rank's rails, at least one),
  // learns every rank's rail count and rails' addresses.
  RailSet(Bootstrap& bootstrap, int rank, int nranks, const std::vector<std::string>& domains);

  size_t size() const { return rails_.size(); }  // this rank's rails
  int nranks() const { return nranks_; }
  // The provider is tcp (its connections can be aborted one by one: tcp_abort.h).
  bool tcp() const;
  FabricEndpoint& rail(size_t i) { return *rails_[i]; }
  int rails_of(int pe) const { return counts_[static_cast<size_t>(pe)]; }
  // The lanes to `pe`: max(size(), rails_of(pe)) of them; lane 0 carries the messages.
  const std::vector<rails::Lane>& lanes(int pe) const { return lanes_[static_cast<size_t>(pe)]; }

  // Collective: registers [base, base + bytes), the heap's range at `offset`, on every rail,
  // and learns every rank's address and key for its own range at that offset on each of its
  // rails.
  void register_heap_range(char* base, size_t offset, size_t bytes);
  // Where heap offset `offset` of rank `pe` is on its rail `rail`, for at most `bytes` from
  // there (the rest lies in the next region). Throws where the offset is not registered.
  RemoteRange remote(int pe, int rail, size_t offset, size_t bytes) const;

  // Closes the endpoints (after the proxies that use them stopped).
  void close() { rails_.clear(); }

 private:
  struct Region {
    size_t offset, bytes;
    std::vector<FabricEndpoint::Registration> remote;  // [pe * most_ + rail]
  };

  Bootstrap& bootstrap_;
  int nranks_;
  int most_ = 1;  // the most rails of any rank
  std::vector<std::unique_ptr<FabricEndpoint>> rails_;
  std::vector<int> counts_;                       // [pe]
  std::vector<std::vector<rails::Lane>> lanes_;  // [pe]
  mutable std::mutex regions_mutex_;  // registration (app thread) against lookups (any)
  std::vector<Region> regions_;
};

}  // namespace symcomm
