// The fused layer (include/symcomm/fused.h): a GEMM with its communication, and a transpose
// that reads its blocks from the team. A plan's configuration is checked once into a
// FusedShape; implementations register themselves (base/registry.h) and say whether they can
// implement a shape, how much symmetric workspace they need, and run it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/registry.h"
#include "bootstrap/bootstrap.h"
#include "memory/heap.h"
#include "rma/rma.h"
#include "rma/team.h"
#include "symcomm/fused.h"
#include "topology/topology.h"

namespace symcomm {

// A configuration checked over a team of `rows.size()` members (fused.h gives the meanings).
struct FusedShape {
  symcommFusedOp_t op = symcommFusedAllGatherGemm;
  int64_t m = 0;  // GEMMs: the sum of rows
  int64_t n = 0;  // columns of B and C; the transpose: N, the sum of cols
  int64_t k = 0;  // all-gather + GEMM: as given; GEMM + reduce-scatter: the sum of cols
  std::vector<int64_t> rows, cols;            // per team rank
  std::vector<int64_t> row_start, col_start;  // their prefix sums
  symcommDataType_t a_type = symcommBfloat16, b_type = symcommBfloat16, c_type = symcommBfloat16;
  bool b_transposed = false;
  bool gather_a = false;
  std::string implementation;  // "" or a name
};

// Checks `config` for a team of `members`; throws symcommInvalidArgument naming the field.
FusedShape check_fused_config(const symcommFusedConfig_t* config, int members);
// Bytes of one element of `type`.
size_t fused_element_bytes(symcommDataType_t type);

// The layers a plan runs on, and its team.
struct FusedContext {
  symcommMemorySpace_t space;
  Bootstrap& bootstrap;
  const Topology& topology;
  Heap& heap;
  Rma& rma;
  symcommTeam_t team_id;
  Team team;
  int me;  // this rank's team rank
};

class Transport;

// The team's barrier on `stream` (every member's earlier work on the team is done, as its
// transports and the space order it), and the transport that reaches team member `member`.
void team_barrier(FusedContext& ctx, symcommStream_t stream);
Transport& member_transport(FusedContext& ctx, int member);

// A run's buffers (fused.h, symcommFusedRun), checked.
struct FusedBuffers {
  const void* a;
  const void* b;
  void* c;
  void* gathered;
  void* workspace;
};

class FusedImplementation {
 public:
  virtual ~FusedImplementation() = default;
  virtual const char* name() const = 0;
  // Whether it can run `shape` here; the same answer on every member of the team.
  virtual Verdict can_implement(const FusedShape& shape, const FusedContext& ctx) const = 0;
  // Whether the automatic choice should take it for `shape` (where it can implement it): a
  // pipeline that splits the GEMM pays off only where the GEMM is long. The same answer on
  // every member.
  virtual bool suits(const FusedShape& shape, const FusedContext& ctx) const {
    static_cast<void>(shape);
    static_cast<void>(ctx);
    return true;
  }
  // Bytes of symmetric workspace a run needs (the same on every member).
  virtual size_t workspace_bytes(const FusedShape& shape, const FusedContext& ctx) const = 0;
  // Collective over the team.
  virtual void run(const FusedShape& shape, FusedContext& ctx, const FusedBuffers& buffers,
                   symcommStream_t stream) const = 0;
};

// The implementation `shape` names, or the first registered that can implement it and suits
// it (else the first that can implement it); throws
// symcommInvalidArgument for a name that is not registered, symcommNotSupported with every
// reason where none can.
const FusedImplementation& choose_fused(const FusedShape& shape, const FusedContext& ctx);

}  // namespace symcomm
