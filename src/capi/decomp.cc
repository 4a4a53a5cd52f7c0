// Pencil decompositions: argument checks and dispatch to src/decomp.
#include <cstring>

#include "capi/guard.h"
#include "decomp/decomp.h"
#include "symcomm/decomp.h"

using namespace symcomm;

struct symcommDecomp {
  static constexpr uint64_t kMagic = 0x73796d6465636f6dull;  // "symdecom"
  uint64_t magic = kMagic;
  symcommComm* comm;  // nullptr once the communicator was finalized
  std::unique_ptr<Decomp> decomp;
  ~symcommDecomp() { magic = 0; }
};

namespace {

// A live decomposition; `need_comm`: its communicator must still exist.
symcommDecomp& checked_decomp(symcommDecomp_t d, bool need_comm = true) {
  SYMCOMM_REQUIRE(d != nullptr, symcommInvalidArgument, "decomp is NULL");
  SYMCOMM_REQUIRE(d->magic == symcommDecomp::kMagic, symcommInvalidArgument,
                  "decomp %p is not a live decomposition (destroyed already?)",
                  static_cast<void*>(d));
  SYMCOMM_REQUIRE(!need_comm || d->comm, symcommInvalidUsage,
                  "decomp %p belongs to a communicator that was finalized: destroy it",
                  static_cast<void*>(d));
  return *d;
}

// `ws` must be a symmetric buffer of at least `bytes` bytes.
char* checked_workspace(const symcommComm& c, void* ws, size_t bytes, const char* query) {
  auto* p = static_cast<char*>(ws);
  SYMCOMM_REQUIRE(p && c.heap->contains(p) && bytes <= c.heap->mapped() - c.heap->offset_of(p),
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

extern "C" symcommResult_t symcommDecompConfigInit(symcommDecompConfig_t* config) {
  return guarded([] { return std::string("symcommDecompConfigInit"); }, [&] {
    SYMCOMM_REQUIRE_ARG(config);
    std::memset(config, 0, sizeof *config);
    config->struct_size = sizeof *config;
    config->magic = SYMCOMM_DECOMP_CONFIG_MAGIC;
    config->rank_order = symcommRowMajor;
    config->autotune_type = symcommC32;
    config->autotune_warmup = 1;
    config->autotune_trials = 5;
    for (double& w : config->autotune_weights) w = 1.0;
    config->autotune_skip = 1.5;
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
    const DecompLayers layers{*c.bootstrap, c.topology, *c.heap, *c.rma, c.coll.get()};
    const bool tune = (config->pdims[0] == 0 && config->pdims[1] == 0) ||
                      std::strncmp(config->backend, "auto", sizeof config->backend) == 0;
    auto d = std::make_unique<symcommDecomp>();
    d->comm = &c;
    d->decomp = tune ? Decomp::autotune(layers, *config) : Decomp::create(layers, *config);
    symcommDecomp* raw = d.get();
    c.dependents[raw] = [raw] {
      raw->decomp->detach();
      raw->comm = nullptr;
    };
    *decomp = d.release();
  });
}

extern "C" symcommResult_t symcommDecompDestroy(symcommDecomp_t decomp) {
  return guarded([] { return std::string("symcommDecompDestroy"); }, [&] {
    symcommDecomp& d = checked_decomp(decomp, false);
    if (d.comm) d.comm->dependents.erase(&d);
    delete &d;
  });
}

extern "C" symcommResult_t symcommDecompGetConfig(symcommDecomp_t decomp,
                                                  symcommDecompConfig_t* config) {
  return guarded([] { return std::string("symcommDecompGetConfig"); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(config);
    *config = d.decomp->config();
  });
}

extern "C" symcommResult_t symcommDecompGridCoords(symcommDecomp_t decomp, int* row, int* col) {
  return guarded([] { return std::string("symcommDecompGridCoords"); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(row);
    SYMCOMM_REQUIRE_ARG(col);
    *row = d.decomp->geometry().row_of(d.decomp->rank());
    *col = d.decomp->geometry().col_of(d.decomp->rank());
  });
}

extern "C" symcommResult_t symcommDecompPencilInfo(symcommDecomp_t decomp, int axis,
                                                   const int64_t halo[3], const int64_t padding[3],
                                                   symcommPencilInfo_t* info) {
  return guarded([&] { return format("symcommDecompPencilInfo(axis=%d)", axis); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(info);
    *info = d.decomp->geometry().pencil(d.decomp->rank(), axis, halo, padding);
  });
}

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
    *name = d.decomp->backend().name();
  });
}

extern "C" symcommResult_t symcommDecompWorkspaceSize(symcommDecomp_t decomp,
                                                      symcommDecompType_t type, size_t* bytes) {
  return guarded([] { return std::string("symcommDecompWorkspaceSize"); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(bytes);
    *bytes = d.decomp->backend().transpose_workspace(d.decomp->context(), type_bytes(type));
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
    SYMCOMM_REQUIRE((from == 0 && to == 1) || (from == 1 && to == 0) || (from == 1 && to == 2) ||
                        (from == 2 && to == 1),
                    symcommInvalidArgument, "a transpose goes X<->Y or Y<->Z, not %d -> %d", from,
                    to);
    const Decomp& dd = *d.decomp;
    const DecompContext ctx = dd.context();
    TransposeCall t{};
    t.from = from;
    t.to = to;
    t.elem = type_bytes(type);
    t.in = dd.geometry().pencil(dd.rank(), from, in_halo, in_padding);
    t.out = dd.geometry().pencil(dd.rank(), to, out_halo, out_padding);
    SYMCOMM_REQUIRE_ARG(input);
    SYMCOMM_REQUIRE_ARG(output);
    t.input = input;
    t.output = output;
    t.workspace = checked_workspace(c, workspace, dd.backend().transpose_workspace(ctx, t.elem),
                                    "symcommDecompWorkspaceSize");
    t.stream = stream;
    dd.backend().transpose(ctx, t);
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
    *bytes = d.decomp->backend().halo_workspace(d.decomp->context(), axis, dim, type_bytes(type),
                                                halo, padding);
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
    const Decomp& dd = *d.decomp;
    const DecompContext ctx = dd.context();
    HaloCall h{};
    h.axis = axis;
    h.dim = dim;
    h.elem = type_bytes(type);
    h.halo = halo;
    h.padding = padding;
    h.periodic = periodic && dim >= 0 && dim < 3 && periodic[dim] != 0;
    h.stream = stream;
    const size_t need = dd.backend().halo_workspace(ctx, axis, dim, h.elem, halo, padding);
    if (need == 0) return;  // no halo along dim
    SYMCOMM_REQUIRE_ARG(buffer);
    h.buffer = buffer;
    h.workspace = checked_workspace(c, workspace, need, "symcommDecompHaloWorkspaceSize");
    dd.backend().halo(ctx, h);
  });
}
