// Buffers the application allocated itself, registered once (symcommRegister) so that peers
// can load and store them like symmetric memory: every rank registers a buffer of the same
// size, in the same order, and each maps the buffers of its load/store accessible peers.
// A pointer inside registration k of this rank stands for the same offset in registration
// k of every peer (as a symmetric address stands for the same heap offset): collectives
// write such receive buffers in place instead of staging them through their workspace.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "memory/heap.h"
#include "memory/space.h"

namespace symcomm {

struct Registration {
  char* ptr;                 // this rank's buffer
  size_t bytes;              // the same on every rank
  std::vector<char*> peers;  // [nranks]: each rank's buffer as mapped here (nullptr: none)
  // The largest power of two, up to 256, modulo which every rank's buffer starts at the same
  // address: a pointer at the same offset in every rank's buffer is then aligned alike to
  // it, so that decisions made from this rank's alignment are the same on every rank.
  size_t alike = 256;
  // Registrations made on this communicator before this one: the same on every rank (they
  // are made collectively, in the same order), so it names the registration across ranks.
  uint64_t serial = 0;
};

class Registrations {
 public:
  Registrations(Bootstrap& bootstrap, const Topology& topology, Space& space, const Heap& heap);
  ~Registrations();  // closes every mapping (not collective: the communicator is going)

  // Collective over the communicator: every rank passes its own buffer and the same size.
  // Every rank receives the same error if any rank's buffer cannot be registered.
  const Registration* add(void* ptr, size_t bytes);
  // Collective: every rank passes its own handle of the same registration; returns once no
  // rank uses the peers' buffers any more (each synchronises its device first).
  void remove(const Registration* registration);

  // The registration holding [p, p + bytes) of this rank, or nullptr.
  const Registration* find(const void* p, size_t bytes) const;
  // `p` (inside a registration of this rank) on world rank `pe`, as mapped here; nullptr
  // where p is not registered or pe is not accessible.
  char* peer_ptr(const void* p, int pe) const;

 private:
  // Maps pe's allocation (opened once however many registrations share it); close() drops
  // one reference (called with mutex_ held).
  char* open(int pe, const SharedHandle& handle);
  void close(int pe, const std::array<uint8_t, 64>& handle);

  Bootstrap& bootstrap_;
  const Topology& topology_;
  Space& space_;
  const Heap& heap_;
  mutable std::mutex mutex_;  // lookups may come from any thread
  std::vector<std::unique_ptr<Registration>> live_;
  uint64_t made_ = 0;  // registrations made so far (each one's serial)
  // Opened allocations: (pe, handle bytes) -> (base, references); and per registration and
  // pe the base its address came from.
  struct Opened {
    char* base;
    int references;
  };
  std::map<std::pair<int, std::array<uint8_t, 64>>, Opened> opened_;
  std::map<const Registration*, std::vector<std::pair<int, std::array<uint8_t, 64>>>> uses_;
};

}  // namespace symcomm
