// Pencil decompositions: the descriptor and its geometry.
#include <algorithm>
#include <cstring>

#include "capi/guard.h"
#include "decomp/geometry.h"
#include "decomp/backend.h"
#include "symcomm/decomp.h"

using namespace symcomm;

struct symcommDecomp {
  static constexpr uint64_t kMagic = 0x73796d6465636f6dull;  // "symdecom"
  uint64_t magic = kMagic;
  symcommComm* comm;
  Geometry geometry;
  symcommTeam_t row_team;  // the ranks of this rank's row of the process grid
  symcommTeam_t col_team;  // ... and of its column
  DecompBackend* backend;
  ~symcommDecomp() { magic = 0; }
  DecompContext context() {
    return DecompContext{geometry, comm->topology.rank, *comm->heap, *comm->rma, row_team, col_team};
  }
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
    auto d = std::make_unique<symcommDecomp>(
        symcommDecomp{symcommDecomp::kMagic, &c, *g, row_major ? x : y, row_major ? y : x, nullptr});
    const DecompContext ctx = d->context();
    const std::string wanted(config->backend, strnlen(config->backend, sizeof config->backend));
    for (DecompBackend* b : decomp_backends())
      if ((wanted.empty() || wanted == b->name()) && b->supports(ctx)) {
        d->backend = b;
        break;
      }
    if (!d->backend) {
      c.rma->destroy(d->row_team);
      c.rma->destroy(d->col_team);
      SYMCOMM_THROW(wanted.empty() ? symcommNotSupported : symcommInvalidArgument,
                    "no decomposition backend %s%scan run on this communicator",
                    wanted.empty() ? "" : "named ", wanted.c_str());
    }
    *decomp = d.release();
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

extern "C" int symcommDecompBackendCount(void) { return static_cast<int>(decomp_backends().size()); }

extern "C" const char* symcommDecompBackendName(int index) {
  const auto& all = decomp_backends();
  return index >= 0 && static_cast<size_t>(index) < all.size() ? all[static_cast<size_t>(index)]->name()
                                                                 : nullptr;
}

extern "C" symcommResult_t symcommDecompGetBackend(symcommDecomp_t decomp, const char** name) {
  return guarded([] { return std::string("symcommDecompGetBackend"); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(name);
    *name = d.backend->name();
  });
}

extern "C" symcommResult_t symcommDecompWorkspaceSize(symcommDecomp_t decomp,
                                                      symcommDecompType_t type, size_t* bytes) {
  return guarded([] { return std::string("symcommDecompWorkspaceSize"); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(bytes);
    *bytes = d.backend->transpose_workspace(d.context(), type_bytes(type));
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
    const DecompContext ctx = d.context();
    TransposeCall t{};
    t.from = from;
    t.to = to;
    SYMCOMM_REQUIRE((from == 0 && to == 1) || (from == 1 && to == 0) || (from == 1 && to == 2) ||
                        (from == 2 && to == 1),
                    symcommInvalidArgument, "a transpose goes X<->Y or Y<->Z, not %d -> %d", from,
                    to);
    t.elem = type_bytes(type);
    t.in = d.geometry.pencil(c.topology.rank, from, in_halo, in_padding);
    t.out = d.geometry.pencil(c.topology.rank, to, out_halo, out_padding);
    SYMCOMM_REQUIRE_ARG(input);
    SYMCOMM_REQUIRE_ARG(output);
    t.input = input;
    t.output = output;
    t.workspace = checked_workspace(c, workspace, d.backend->transpose_workspace(ctx, t.elem),
                                    "symcommDecompWorkspaceSize");
    t.stream = stream;
    d.backend->transpose(ctx, t);
  });
}

extern "C" symcommResult_t symcommDecompHaloWorkspaceSize(symcommDecomp_t decomp, int axis,
                                                          int dim, symcommDecompType_t type,
                                                          const int64_t halo[3],
                                                          const int64_t padding[3],
                                                          size_t* bytes) {
  return guarded([&] { return format("symcommDecompHaloWorkspaceSize(axis=%d, dim=%d)", axis, dim); },
                 [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(bytes);
    *bytes = d.backend->halo_workspace(d.context(), axis, dim, type_bytes(type), halo, padding);
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
    const DecompContext ctx = d.context();
    HaloCall h{};
    h.axis = axis;
    h.dim = dim;
    h.elem = type_bytes(type);
    h.halo = halo;
    h.padding = padding;
    h.periodic = periodic && dim >= 0 && dim < 3 && periodic[dim] != 0;
    h.stream = stream;
    const size_t need = d.backend->halo_workspace(ctx, axis, dim, h.elem, halo, padding);
    if (need == 0) return;  // no halo along dim
    SYMCOMM_REQUIRE_ARG(buffer);
    h.buffer = buffer;
    h.workspace = checked_workspace(c, workspace, need, "symcommDecompHaloWorkspaceSize");
    d.backend->halo(ctx, h);
  });
}
