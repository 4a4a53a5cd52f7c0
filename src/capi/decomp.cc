// Pencil decompositions: the descriptor and its geometry.
#include <cstring>

#include "capi/guard.h"
#include "decomp/geometry.h"
#include "symcomm/decomp.h"

using namespace symcomm;

struct symcommDecomp {
  static constexpr uint64_t kMagic = 0x73796d6465636f6dull;  // "symdecom"
  uint64_t magic = kMagic;
  symcommComm* comm;
  Geometry geometry;
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
    *decomp = new symcommDecomp{symcommDecomp::kMagic, &c, *g};
  });
}

extern "C" symcommResult_t symcommDecompDestroy(symcommDecomp_t decomp) {
  return guarded([] { return std::string("symcommDecompDestroy"); }, [&] {
    delete &checked_decomp(decomp);
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
