// Pencil decompositions: the descriptor and its geometry.
#include <algorithm>
#include <cstring>

#include "capi/guard.h"
#include "decomp/geometry.h"
#include "decomp/halo.h"
#include "decomp/transpose.h"
#include "symcomm/decomp.h"

using namespace symcomm;

struct symcommDecomp {
  static constexpr uint64_t kMagic = 0x73796d6465636f6dull;  // "symdecom"
  uint64_t magic = kMagic;
  symcommComm* comm;
  Geometry geometry;
  symcommTeam_t row_team;  // the ranks of this rank's row of the process grid
  symcommTeam_t col_team;  // ... and of its column
  ~symcommDecomp() { magic = 0; }
};

namespace {
symcommDecomp& checked_decomp(symcommDecomp_t d) {
  SYMCOMM_REQUIRE(d != nullptr, symcommInvalidArgument, "decomp is NULL");
  SYMCOMM_REQUIRE(d->magic == symcommDecomp::kMagic, symcommInvalidArgument,
                  "decomp %p is not a live decomposition (destroyed already?)",
                  static_cast<void*>(d));
  return *d;
}
}  // namespace

extern "C" symcommResult_t symcommDecompConfigInit(symcommDecompConfig_t* config) {
  return guarded([] { return std::string("symcommDecompConfigInit"); }, [&] {
    SYMCOMM_REQUIRE_ARG(config);
    std::memset(config, 0, sizeof *config);
    config->struct_size = sizeof *config;
    config->magic = SYMCOMM_DECOMP_CONFIG_MAGIC;
    config->rank_order = symcommRowMajor;
  });
}

extern "C" symcommResult_t symcommDecompCreate(symcommComm_t comm,
                                               const symcommDecompConfig_t* config,
                                               symcommDecomp_t* decomp) {
  return guarded([] { return std::string("symcommDecompCreate"); }, [&] {
    symcommComm& c = checked(comm);
    LogRankScope scope(c.topology.rank);
    SYMCOMM_REQUIRE_ARG(decomp);
    *decomp = nullptr;
    SYMCOMM_REQUIRE_ARG(config);
    c.check_live();
    std::unique_ptr<Geometry> g;
    c.bootstrap->agree_on([&] { g = std::make_unique<Geometry>(*config, c.topology.nranks); });
    std::vector<symcommDecompConfig_t> all(static_cast<size_t>(c.topology.nranks));
    c.bootstrap->allgather(config, sizeof *config, all.data());
    for (int r = 0; r < c.topology.nranks; ++r)
      SYMCOMM_REQUIRE(std::memcmp(&all[static_cast<size_t>(r)], config, sizeof *config) == 0,
                      symcommInvalidUsage,
                      "symcommDecompCreate is collective with the same configuration on every "
                      "rank: rank %d's differs from this rank's", r);
    // Rows and columns as teams, for the barriers of the exchanges.
    const bool row_major = config->rank_order == symcommRowMajor;
    auto [x, y] = c.rma->split_2d(SYMCOMM_TEAM_WORLD, row_major ? config->pdims[1] : config->pdims[0]);
    *decomp = new symcommDecomp{symcommDecomp::kMagic, &c, *g, row_major ? x : y, row_major ? y : x};
  });
}

extern "C" symcommResult_t symcommDecompDestroy(symcommDecomp_t decomp) {
  return guarded([] { return std::string("symcommDecompDestroy"); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    if (d.comm->magic == symcommComm::kMagic) {
      d.comm->rma->destroy(d.row_team);
      d.comm->rma->destroy(d.col_team);
    }
    delete &d;
  });
}

extern "C" symcommResult_t symcommDecompGridCoords(symcommDecomp_t decomp, int* row, int* col) {
  return guarded([] { return std::string("symcommDecompGridCoords"); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(row);
    SYMCOMM_REQUIRE_ARG(col);
    *row = d.geometry.row_of(d.comm->topology.rank);
    *col = d.geometry.col_of(d.comm->topology.rank);
  });
}

extern "C" symcommResult_t symcommDecompPencilInfo(symcommDecomp_t decomp, int axis,
                                                   const int64_t halo[3], const int64_t padding[3],
                                                   symcommPencilInfo_t* info) {
  return guarded([&] { return format("symcommDecompPencilInfo(axis=%d)", axis); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(info);
    *info = d.geometry.pencil(d.comm->topology.rank, axis, halo, padding);
  });
}

namespace {
// `ws` must be a symmetric buffer of at least `bytes` bytes.
char* checked_workspace(const symcommComm& c, void* ws, size_t bytes, const char* query) {
  auto* p = static_cast<char*>(ws);
  SYMCOMM_REQUIRE(p && c.heap->contains(p) && c.heap->offset_of(p) + bytes <= c.heap->mapped(),
                  symcommInvalidArgument,
                  "workspace %p is not a symmetric buffer of %s (%zu) bytes", ws, query, bytes);
  return p;
}

size_t type_bytes(symcommDecompType_t type) {
  switch (type) {
    case symcommR32: return 4;
    case symcommR64: case symcommC32: return 8;
    case symcommC64: return 16;
  }
  SYMCOMM_THROW(symcommInvalidArgument, "type %d is not a symcommDecompType_t", static_cast<int>(type));
}
}  // namespace

extern "C" symcommResult_t symcommDecompWorkspaceSize(symcommDecomp_t decomp,
                                                      symcommDecompType_t type, size_t* bytes) {
  return guarded([] { return std::string("symcommDecompWorkspaceSize"); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(bytes);
    *bytes = 2 * static_cast<size_t>(staging_elements(d.geometry)) * type_bytes(type);
  });
}

extern "C" symcommResult_t symcommDecompTranspose(symcommDecomp_t decomp, int from, int to,
                                                  const void* input, void* output,
                                                  void* workspace, symcommDecompType_t type,
                                                  const int64_t in_halo[3],
                                                  const int64_t in_padding[3],
                                                  const int64_t out_halo[3],
                                                  const int64_t out_padding[3],
                                                  symcommStream_t stream) {
  return guarded([&] { return format("symcommDecompTranspose(from=%d, to=%d)", from, to); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    symcommComm& c = *d.comm;
    c.check_live();
    check_stream(c, stream);
    const size_t e = type_bytes(type);
    const ExchangePlan plan = plan_exchange(d.geometry, c.topology.rank, from, to);
    const symcommPencilInfo_t in = d.geometry.pencil(c.topology.rank, from, in_halo, in_padding);
    const symcommPencilInfo_t out = d.geometry.pencil(c.topology.rank, to, out_halo, out_padding);
    SYMCOMM_REQUIRE_ARG(input);
    SYMCOMM_REQUIRE_ARG(output);
    const size_t staging = static_cast<size_t>(staging_elements(d.geometry)) * e;
    char* ws = checked_workspace(c, workspace, 2 * staging, "symcommDecompWorkspaceSize");
    RmaBackend& b = c.rma->backend();
    const bool xy = from + to == 1;
    const BarrierArgs barrier = c.rma->barrier_args(xy ? d.col_team : d.row_team);
    const BoxLayout in_layout = pencil_layout(in), out_layout = pencil_layout(out);
    char* send = ws;
    char* recv = ws + staging;
    b.barrier(barrier, stream);  // every member is done with its receive area
    for (size_t k = 0; k < plan.members.size(); ++k) {
      const Box& box = plan.send[k];
      if (box.count() == 0) continue;
      b.copy_box(send + plan.send_off[k] * static_cast<int64_t>(e), packed_layout(box), input,
                 in_layout, box.lo, box.hi, e, stream);
      char* there = static_cast<char*>(c.heap->peer_ptr(recv + plan.remote_off[k] * static_cast<int64_t>(e),
                                                        plan.members[k]));
      SYMCOMM_REQUIRE(there, symcommNotSupported, "rank %d is not load/store accessible",
                      plan.members[k]);
      b.put(there, send + plan.send_off[k] * static_cast<int64_t>(e),
            static_cast<size_t>(box.count()) * e, symcommEngineCe, stream);
    }
    b.barrier(barrier, stream);  // every block arrived
    for (size_t k = 0; k < plan.members.size(); ++k) {
      const Box& box = plan.recv[k];
      if (box.count() == 0) continue;
      b.copy_box(output, out_layout, recv + plan.recv_off[k] * static_cast<int64_t>(e),
                 packed_layout(box), box.lo, box.hi, e, stream);
    }
  });
}

namespace {
// The largest slab of any rank: every rank's workspace slots are this big.
int64_t largest_slab(const symcommDecomp& d, int axis, int dim, const int64_t* halo,
                     const int64_t* padding) {
  int64_t most = 0;
  for (int r = 0; r < d.comm->topology.nranks; ++r)
    most = std::max(most, plan_halo(d.geometry, r, axis, dim, halo, padding, true).slab);
  return most;
}
}  // namespace

extern "C" symcommResult_t symcommDecompHaloWorkspaceSize(symcommDecomp_t decomp, int axis,
                                                          int dim, symcommDecompType_t type,
                                                          const int64_t halo[3],
                                                          const int64_t padding[3],
                                                          size_t* bytes) {
  return guarded([&] { return format("symcommDecompHaloWorkspaceSize(axis=%d, dim=%d)", axis, dim); },
                 [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(bytes);
    *bytes = 4 * static_cast<size_t>(largest_slab(d, axis, dim, halo, padding)) * type_bytes(type);
  });
}

extern "C" symcommResult_t symcommDecompHalo(symcommDecomp_t decomp, int axis, int dim,
                                             void* buffer, void* workspace,
                                             symcommDecompType_t type, const int64_t halo[3],
                                             const int64_t padding[3], const int periodic[3],
                                             symcommStream_t stream) {
  return guarded([&] { return format("symcommDecompHalo(axis=%d, dim=%d)", axis, dim); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    symcommComm& c = *d.comm;
    c.check_live();
    check_stream(c, stream);
    const size_t e = type_bytes(type);
    const bool wrap = periodic && dim >= 0 && dim < 3 && periodic[dim] != 0;
    const HaloPlan plan = plan_halo(d.geometry, c.topology.rank, axis, dim, halo, padding, wrap);
    if (plan.slab == 0) return;  // no halo along dim
    SYMCOMM_REQUIRE_ARG(buffer);
    const size_t slot = static_cast<size_t>(largest_slab(d, axis, dim, halo, padding)) * e;
    char* ws = checked_workspace(c, workspace, 4 * slot, "symcommDecompHaloWorkspaceSize");
    RmaBackend& b = c.rma->backend();
    const BoxLayout layout = pencil_layout(d.geometry.pencil(c.topology.rank, axis, halo, padding));
    // Slots: 0 my low slab, 1 my high slab, 2 what fills my low halo, 3 my high halo.
    char* slots[4] = {ws, ws + slot, ws + 2 * slot, ws + 3 * slot};
    const bool team = !plan.self;
    BarrierArgs barrier{};
    if (team) barrier = c.rma->barrier_args(plan.over_rows ? d.col_team : d.row_team);
    if (team) b.barrier(barrier, stream);  // the neighbours' slots are free
    // My high slab fills the low halo of the part above (slot 2 there); my low slab the high
    // halo of the part below (slot 3 there).
    const struct {
      const HaloSide& side;
      int mine, theirs;
    } sends[] = {{plan.high, 1, 2}, {plan.low, 0, 3}};
    for (const auto& s : sends) {
      if (s.side.neighbour < 0) continue;
      b.copy_box(slots[s.mine], packed_layout(s.side.send), buffer, layout, s.side.send.lo,
                 s.side.send.hi, e, stream);
      char* there = static_cast<char*>(c.heap->peer_ptr(slots[s.theirs], s.side.neighbour));
      SYMCOMM_REQUIRE(there, symcommNotSupported, "rank %d is not load/store accessible",
                      s.side.neighbour);
      b.put(there, slots[s.mine], static_cast<size_t>(s.side.send.count()) * e, symcommEngineCe,
            stream);
    }
    if (team) b.barrier(barrier, stream);  // every slab arrived
    const struct {
      const HaloSide& side;
      int slot;
    } recvs[] = {{plan.low, 2}, {plan.high, 3}};
    for (const auto& r : recvs)
      if (r.side.neighbour >= 0)
        b.copy_box(buffer, layout, slots[r.slot], packed_layout(r.side.recv), r.side.recv.lo,
                   r.side.recv.hi, e, stream);
  });
}
