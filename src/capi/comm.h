// The object behind symcommComm_t: one communicator's layers, owned bottom up.
#pragma once

#include <memory>

#include "bootstrap/bootstrap.h"
#include "memory/heap.h"
#include "memory/space.h"
#include "topology/topology.h"

struct symcommComm {
  static constexpr uint64_t kMagic = 0x73796d636f6d6d31ull;  // "symcomm1"
  uint64_t magic = kMagic;
  // Declared in construction order; destroyed in reverse.
  std::unique_ptr<symcomm::Bootstrap> bootstrap;
  symcomm::Topology topology;
  symcommMemorySpace_t space_kind = symcommSpaceHost;
  std::unique_ptr<symcomm::Space> space;
  std::unique_ptr<symcomm::Heap> heap;

  ~symcommComm() { magic = 0; }
};
