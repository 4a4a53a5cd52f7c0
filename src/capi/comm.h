// The object behind symcommComm_t: one communicator's layers, owned bottom up.
#pragma once

#include <functional>
#include <map>
#include <memory>

#include "bootstrap/bootstrap.h"
#include "memory/heap.h"
#include "memory/registration.h"
#include "memory/space.h"
#include "coll/coll.h"
#include "coll/p2p.h"
#include "copy/copies.h"
#include "nccl/nccl_comms.h"
#include "rma/rma.h"
#include "topology/topology.h"

namespace symcomm {
// A pre-multiplied sum (symcommRedOpCreatePreMulSum): the scalar's type, and its value (read
// when the op was made) or where to read it when a reduction runs.
struct PreMulSum {
  symcommDataType_t type;
  bool on_device;
  uint64_t value;        // the scalar's bytes (host residence)
  const void* scalar;    // device residence
};
}  // namespace symcomm

struct symcommComm {
  static constexpr uint64_t kMagic = 0x73796d636f6d6d31ull;  // "symcomm1"
  uint64_t magic = kMagic;
  // Declared in construction order; destroyed in reverse.
  std::unique_ptr<symcomm::Bootstrap> bootstrap;
  symcomm::Topology topology;
  symcommMemorySpace_t space_kind = symcommSpaceHost;
  std::unique_ptr<symcomm::Space> space;
  std::unique_ptr<symcomm::Heap> heap;
  std::unique_ptr<symcomm::Registrations> registrations;
  std::unique_ptr<symcomm::Rma> rma;
  std::unique_ptr<symcomm::Copies> copies;
  // The NCCL communicators that the collectives and the decompositions share.
  std::unique_ptr<symcomm::NcclComms> nccl;
  std::unique_ptr<symcomm::CollContext> coll;
  std::unique_ptr<symcomm::PointToPoint> p2p;  // send and receive

  // Objects built on this communicator (decompositions, fused plans) that must let go of it
  // when it is finalized first: called then, before the layers go.
  std::map<const void*, std::function<void()>> dependents;
  // Pre-multiplied sums by op value (capi/redop.cc); the next value to give.
  std::map<int, symcomm::PreMulSum> premul_sums;
  int next_redop = symcommNumRedOps;
  // Fused plans made per team id: numbers the plans' agreements (capi/fused.cc).
  std::map<symcommTeam_t, uint64_t> fused_plans;

  // The communicator is usable: no peer lost, no device-side wait failure pending.
  void check_live() {
    bootstrap->check_alive();
    rma->backend().raise_recorded_error();
    rma->transports().raise_failure();
  }

  // Finalizing: the layers go, top down, and the handle stays allocated (a few hundred bytes)
  // with magic 0, so that a stale handle is known as finalized and never aliases a newer
  // communicator that an allocator would have put at the same address.
  void tear_down() {
    magic = 0;
    if (bootstrap) bootstrap->on_lost(nullptr);  // the backend goes first
    dependents.clear();
    p2p.reset();
    coll.reset();
    nccl.reset();
    copies.reset();
    rma.reset();
    registrations.reset();
    heap.reset();
    space.reset();
    topology = symcomm::Topology{};
    bootstrap.reset();
  }

  ~symcommComm() { tear_down(); }
};
