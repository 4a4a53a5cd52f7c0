// Pencil decompositions: argument checks and dispatch to src/decomp.
#include <cstring>
#include <exception>
#include <vector>

#include "base/param.h"
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
  if (d->comm) call_comm() = d->comm;  // its errors name a lost rank (guard.h)
  return *d;
}

static const SwitchParam kCheck(
    "SYMCOMM_DECOMP_CHECK",
    "check every transpose and halo exchange against every rank's call (a host allgather per "
    "call): symmetric buffers at the same heap offset on every rank or on none, same "
    "direction, type, halos and paddings; auto: on in the host memory space, off in the cuda "
    "space, where the round trip would dwarf small transposes");

constexpr size_t kWorkspaceAlignment = 16;

// A data buffer of `bytes` bytes must not overlap the `need` bytes of the workspace, which
// the backends write while they read or write the data.
void apart_from_workspace(const void* p, size_t bytes, const char* what, const void* ws,
                          size_t need) {
  SYMCOMM_REQUIRE(!overlaps(p, bytes, ws, need), symcommInvalidArgument,
                  "%s [%p, +%zu bytes) overlaps the workspace [%p, +%zu bytes)", what, p, bytes,
                  ws, need);
}

// `ws` must be a live symmetric allocation with at least `bytes` bytes from ws to its end.
char* checked_workspace(const symcommComm& c, void* ws, size_t bytes, const char* query) {
  auto* p = static_cast<char*>(ws);
  SYMCOMM_REQUIRE(p, symcommInvalidArgument,
                  "workspace is NULL: pass a symmetric buffer (symcommMalloc) of %s (%zu) bytes",
                  query, bytes);
  SYMCOMM_REQUIRE(c.heap->contains(p), symcommInvalidArgument,
                  "workspace %p is not a symmetric buffer (symcommMalloc) of %s (%zu) bytes", ws,
                  query, bytes);
  const size_t left = c.heap->bytes_left(p);
  SYMCOMM_REQUIRE(left > 0, symcommInvalidArgument,
                  "workspace %p is in the symmetric heap but in no live allocation (freed?)", ws);
  SYMCOMM_REQUIRE(reinterpret_cast<uintptr_t>(p) % kWorkspaceAlignment == 0,
                  symcommInvalidArgument,
                  "workspace %p is not aligned to %zu bytes (it holds 64-bit signal words and "
                  "16-byte elements)", ws, kWorkspaceAlignment);
  SYMCOMM_REQUIRE(bytes <= left, symcommInvalidArgument,
                  "workspace %p is too small: %zu bytes from it to the end of its allocation, "
                  "%s gives %zu",
                  ws, left, query, bytes);
  return p;
}

// A buffer of the call's data (`what`: "input", "output", "buffer") of `bytes` bytes: not
// NULL, aligned to its elements (`elem` bytes: kernels load them whole); a symmetric one must hold them within its allocation (the direct paths reach it from
// the peers at the same offset); any other must be memory the communicator's device can
// access (the space says: in the cuda space, not pageable host memory).
void check_data_buffer(const symcommComm& c, const void* p, size_t bytes, size_t elem,
                       const char* what) {
  SYMCOMM_REQUIRE(p, symcommInvalidArgument, "%s is NULL", what);
  require_aligned(p, elem, what);
  if (!c.heap->contains(p)) return c.space->check_device_accessible(p, what);
  const size_t left = c.heap->bytes_left(p);
  SYMCOMM_REQUIRE(bytes <= left, symcommInvalidArgument,
                  "%s %p is a symmetric buffer with %zu bytes to the end of its allocation; its "
                  "pencil takes %zu",
                  what, p, left, bytes);
}

// What SYMCOMM_DECOMP_CHECK compares between the ranks' calls: the contract of the direct
// paths (src/decomp/backend.h), that a buffer is symmetric on every rank or on none, and then
// the same object (heap offset), with the same layout.
struct CallRecord {
  static constexpr int kBuffers = 3;
  uint32_t refused = 0;                // this rank refused its own arguments
  uint32_t symmetric = 0;              // bit i: buffer i is in the heap
  uint64_t offset[kBuffers] = {};      // heap offset of each symmetric buffer
  int64_t args[16] = {};               // the rest: op, type, halos, paddings
};

// The scalar arguments of a call, named (the names stay here: the message names the first
// that differs between ranks).
struct Scalars {
  std::vector<std::string> names;
  CallRecord record;
  void add(const std::string& name, int64_t value) {
    record.args[names.size()] = value;
    names.push_back(name);
  }
  // The three values of `v` (NULL: zeros).
  void add3(const char* name, const int64_t* v) {
    for (int a = 0; a < 3; ++a) add(format("%s[%d]", name, a), v ? v[a] : 0);
  }
};

// Runs this rank's argument checks; with SYMCOMM_DECOMP_CHECK=1 then agrees with every rank of
// the communicator (whose ranks all make the call): where any rank refused its arguments, or
// the calls differ, every rank fails with the same message, before anything is enqueued.
template <typename Check>
void agreed_call(symcommComm& c, const char* const names[CallRecord::kBuffers],
                 const void* const buffers[CallRecord::kBuffers], const Scalars& args,
                 Check&& check) {
  if (!kCheck.get(c.space_kind == symcommSpaceHost)) return check();
  CallRecord mine = args.record;
  for (int i = 0; i < CallRecord::kBuffers; ++i)
    if (buffers[i] && c.heap->contains(buffers[i])) {
      mine.symmetric |= 1u << i;
      mine.offset[i] = c.heap->offset_of(buffers[i]);
    }
  std::exception_ptr refusal;
  try {
    check();
  } catch (...) {
    refusal = std::current_exception();
    mine.refused = 1;
  }
  std::vector<CallRecord> all(static_cast<size_t>(c.topology.nranks));
  c.bootstrap->allgather(&mine, sizeof mine, all.data());
  if (refusal) std::rethrow_exception(refusal);
  const CallRecord& first = all[0];
  for (int r = 0; r < c.topology.nranks; ++r) {
    const CallRecord& q = all[static_cast<size_t>(r)];
    SYMCOMM_REQUIRE(!q.refused, symcommInvalidUsage,
                    "rank %d refused its arguments (its error says why); no rank makes the call "
                    "(SYMCOMM_DECOMP_CHECK)", r);
    for (int i = 0; i < CallRecord::kBuffers; ++i) {
      const uint32_t bit = 1u << i;
      SYMCOMM_REQUIRE((q.symmetric & bit) == (first.symmetric & bit), symcommInvalidUsage,
                      "the %s is symmetric on rank %d and not on rank %d: symmetric on every "
                      "rank or on none (SYMCOMM_DECOMP_CHECK)",
                      names[i], (q.symmetric & bit) ? r : 0, (q.symmetric & bit) ? 0 : r);
      SYMCOMM_REQUIRE(q.offset[i] == first.offset[i], symcommInvalidUsage,
                      "the symmetric %s is at heap offset %llu on rank %d and %llu on rank 0: "
                      "it must be the same object on every rank (SYMCOMM_DECOMP_CHECK)",
                      names[i], static_cast<unsigned long long>(q.offset[i]), r,
                      static_cast<unsigned long long>(first.offset[i]));
    }
    for (size_t k = 0; k < args.names.size(); ++k)
      SYMCOMM_REQUIRE(q.args[k] == first.args[k], symcommInvalidUsage,
                      "rank %d passes other arguments than rank 0: %s is %lld on rank %d and "
                      "%lld on rank 0 (SYMCOMM_DECOMP_CHECK)", r, args.names[k].c_str(),
                      static_cast<long long>(q.args[k]), r,
                      static_cast<long long>(first.args[k]));
  }
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
    config->autotune_allow_uneven = 1;
    for (int a = 0; a < 3; ++a) {
      config->autotune_halo_extents[a] = 1;
      config->autotune_halo_periods[a] = 1;
    }
  });
}

extern "C" symcommResult_t symcommDecompCreate(symcommComm_t comm,
                                               const symcommDecompConfig_t* config,
                                               symcommDecomp_t* decomp) {
  return guarded([] { return std::string("symcommDecompCreate"); }, [&] {
    symcommComm& c = checked(comm);
    if (decomp) *decomp = nullptr;
    c.check_live();
    const DecompLayers layers{*c.bootstrap, c.topology, *c.heap, *c.rma, *c.copies,
                              c.nccl.get(), c.registrations.get()};
    // Agreed, before any other field is read (a configuration of another header version
    // would be read out of bounds), so that every rank fails alike: a NULL argument on one
    // rank too (it would otherwise put the ranks' collective steps out of step).
    layers.bootstrap.agree_on([&] {
      SYMCOMM_REQUIRE_ARG(decomp);
      SYMCOMM_REQUIRE_ARG(config);
      require_initialised(*config);
    });
    const bool tune = (config->pdims[0] == 0 && config->pdims[1] == 0) ||
                      std::strncmp(config->backend, "auto", sizeof config->backend) == 0 ||
                      std::strncmp(config->halo_backend, "auto", sizeof config->halo_backend) == 0;
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
    // The handle is kept, dead (a few bytes), as communicators' are: a stale one is known as
    // destroyed and never aliases a newer decomposition at the same address.
    d.decomp.reset();
    d.comm = nullptr;
    d.magic = 0;
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

extern "C" symcommResult_t symcommDecompGetBackendInfo(int index,
                                                       symcommDecompBackendInfo_t* info) {
  return guarded([&] { return format("symcommDecompGetBackendInfo(index=%d)", index); }, [&] {
    SYMCOMM_REQUIRE_ARG(info);
    const auto& all = decomp_backends();
    SYMCOMM_REQUIRE(index >= 0 && static_cast<size_t>(index) < all.size(), symcommInvalidArgument,
                    "index %d is not that of a registered backend (0 to %zu)", index,
                    all.size() - 1);
    const DecompDescriptor& d = all[static_cast<size_t>(index)]->descriptor();
    *info = symcommDecompBackendInfo_t{d.name, d.spaces, d.load_store_peers, d.nccl,
                                       d.copies_wait_for_peers, d.for_unmapped_ranks};
  });
}

extern "C" symcommResult_t symcommDecompGetBackend(symcommDecomp_t decomp, const char** name) {
  return guarded([] { return std::string("symcommDecompGetBackend"); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(name);
    *name = d.decomp->backend().name();
  });
}

extern "C" symcommResult_t symcommDecompGetHaloBackend(symcommDecomp_t decomp, const char** name) {
  return guarded([] { return std::string("symcommDecompGetHaloBackend"); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(name);
    *name = d.decomp->halo_backend().name();
  });
}

extern "C" symcommResult_t symcommDecompGetTraffic(symcommDecomp_t decomp,
                                                   symcommDecompTraffic_t* traffic) {
  return guarded([] { return std::string("symcommDecompGetTraffic"); }, [&] {
    symcommDecomp& d = checked_decomp(decomp);
    SYMCOMM_REQUIRE_ARG(traffic);
    const auto& bytes = d.decomp->traffic().bytes;  // [to the network][from the workspace]
    *traffic = symcommDecompTraffic_t{bytes[0][0].load(), bytes[0][1].load(), bytes[1][0].load(),
                                      bytes[1][1].load()};
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
    const Decomp& dd = *d.decomp;
    const DecompContext ctx = dd.context();
    TransposeCall t{};
    const char* const names[] = {"input", "output", "workspace"};
    const void* const buffers[] = {input, output, workspace};
    Scalars args;
    args.add("from", from);
    args.add("to", to);
    args.add("type", type);
    args.add3("in_halo", in_halo);
    args.add3("in_padding", in_padding);
    args.add3("out_halo", out_halo);
    args.add3("out_padding", out_padding);
    agreed_call(c, names, buffers, args, [&] {
      SYMCOMM_REQUIRE((from == 0 && to == 1) || (from == 1 && to == 0) ||
                          (from == 1 && to == 2) || (from == 2 && to == 1),
                      symcommInvalidArgument, "a transpose goes X<->Y or Y<->Z, not %d -> %d",
                      from, to);
      t.from = from;
      t.to = to;
      t.elem = type_bytes(type);
      t.in = dd.geometry().pencil(dd.rank(), from, in_halo, in_padding, "in_");
      t.out = dd.geometry().pencil(dd.rank(), to, out_halo, out_padding, "out_");
      const size_t in_bytes = static_cast<size_t>(t.in.size) * t.elem;
      const size_t out_bytes = static_cast<size_t>(t.out.size) * t.elem;
      check_data_buffer(c, input, in_bytes, t.elem, "input");
      check_data_buffer(c, output, out_bytes, t.elem, "output");
      t.input = input;
      t.output = output;
      const size_t need = dd.backend().transpose_workspace(ctx, t.elem);
      t.workspace = checked_workspace(c, workspace, need, "symcommDecompWorkspaceSize");
      apart_from_workspace(input, in_bytes, "input", workspace, need);
      apart_from_workspace(output, out_bytes, "output", workspace, need);
    });
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
    *bytes = d.decomp->halo_backend().halo_workspace(d.decomp->halo_context(), axis, dim,
                                                     type_bytes(type), halo, padding);
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
    const DecompContext ctx = dd.halo_context();
    HaloCall h{};
    const char* const names[] = {"buffer", "workspace", "(none)"};
    const void* const buffers[] = {buffer, workspace, nullptr};
    Scalars args;
    args.add("axis", axis);
    args.add("dim", dim);
    args.add("type", type);
    args.add3("halo", halo);
    args.add3("padding", padding);
    args.add("periodic[dim]", periodic && dim >= 0 && dim < 3 && periodic[dim] != 0);
    size_t need = 0;
    agreed_call(c, names, buffers, args, [&] {
      h.axis = axis;
      h.dim = dim;
      h.elem = type_bytes(type);
      h.halo = halo;
      h.padding = padding;
      h.periodic = periodic && dim >= 0 && dim < 3 && periodic[dim] != 0;
      h.stream = stream;
      need = dd.halo_backend().halo_workspace(ctx, axis, dim, h.elem, halo, padding);
      if (need == 0) return;  // no halo along dim: nothing is touched
      const symcommPencilInfo_t p = dd.geometry().pencil(dd.rank(), axis, halo, padding);
      const size_t bytes = static_cast<size_t>(p.size) * h.elem;
      check_data_buffer(c, buffer, bytes, h.elem, "buffer");
      h.buffer = buffer;
      h.workspace = checked_workspace(c, workspace, need, "symcommDecompHaloWorkspaceSize");
      apart_from_workspace(buffer, bytes, "buffer", workspace, need);
    });
    if (need == 0) return;
    dd.halo_backend().halo(ctx, h);
  });
}
