// What the decomposition tests share (decomp_test.cc, decomp_transpose_test.cc,
// decomp_halo_test.cc, decomp_errors_test.cc, decomp_mix_test.cc, decomp_staging_test.cc, one
// binary, also run as several nodes): grid shapes, index-valued pencils
// and their encoding as every element type, local and symmetric buffers, dirty workspaces,
// and the DecompBackends fixture over every registered backend (instantiated once, in
// decomp_transpose_test.cc).
#ifndef SYMCOMM_TESTS_MP_DECOMP_FIXTURE_H_
#define SYMCOMM_TESTS_MP_DECOMP_FIXTURE_H_

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "mp.h"
#include "symcomm/decomp.h"

// A named namespace: every file of the binary must see the same fixture class.
namespace decomp_test {

// The grid shapes below are written for up to 4 ranks. Every rank must own a point of every
// pencil, and a halo may be no wider than the part it comes from: on more ranks each dimension
// is tripled (8 ranks split 3 x 7 points into parts of 2 or 3).
inline int64_t fit(int64_t points) { return mp::nranks() > 4 ? 3 * points : points; }

inline symcommDecompConfig_t config_2d(int64_t n) {
  symcommDecompConfig_t c;
  symcommDecompConfigInit(&c);
  c.gdims[0] = n;
  c.gdims[1] = n + 1;  // uneven
  c.gdims[2] = n + 2;
  c.pdims[0] = mp::nranks() % 2 == 0 ? 2 : 1;
  c.pdims[1] = mp::nranks() / c.pdims[0];
  return c;
}

// gdims on a pr x pc grid, the rest default.
inline symcommDecompConfig_t grid_config(const int64_t* gdims, int pr, int pc) {
  symcommDecompConfig_t c;
  symcommDecompConfigInit(&c);
  for (int a = 0; a < 3; ++a) c.gdims[a] = gdims[a];
  c.pdims[0] = pr;
  c.pdims[1] = pc;
  return c;
}

// Every owned point holds its global linear index; halos and padding hold -1.
inline std::vector<double> fill_pencil(const symcommPencilInfo_t& p, const int64_t* gdims) {
  std::vector<double> v(static_cast<size_t>(p.size), -1.0);
  for (int64_t z = p.lo[2]; z < p.hi[2]; ++z)
    for (int64_t y = p.lo[1]; y < p.hi[1]; ++y)
      for (int64_t x = p.lo[0]; x < p.hi[0]; ++x)
        v[static_cast<size_t>(symcommPencilIndex(&p, x, y, z))] =
            static_cast<double>((z * gdims[1] + y) * gdims[0] + x);
  return v;
}

// The element types, and the bytes of one element.
inline const symcommDecompType_t kTypes[] = {symcommR32, symcommR64, symcommC32, symcommC64};

inline size_t elem_bytes(symcommDecompType_t type) {
  return type == symcommR32 ? 4 : type == symcommC64 ? 16 : 8;
}

inline const char* type_name(symcommDecompType_t type) {
  const char* names[] = {"R32", "R64", "C32", "C64"};
  return names[type];
}

// Values (as fill_pencil gives them) as elements of `type`: a complex element holds the value
// in its real part and -value - 0.5 in its imaginary part, so that swapped or misplaced parts
// show. Every value here (indices of small grids, -1, their halves) is exact in float.
inline std::vector<uint8_t> encode(const std::vector<double>& values, symcommDecompType_t type) {
  std::vector<uint8_t> bytes(values.size() * elem_bytes(type));
  const bool complex = type == symcommC32 || type == symcommC64;
  for (size_t i = 0; i < values.size(); ++i) {
    const double parts[2] = {values[i], -values[i] - 0.5};
    for (int k = 0; k < (complex ? 2 : 1); ++k) {
      uint8_t* at = bytes.data() + i * elem_bytes(type) + k * elem_bytes(type) / 2;
      if (type == symcommR32 || type == symcommC32) {
        const float f = static_cast<float>(parts[k]);
        std::memcpy(at, &f, sizeof f);
      } else {
        std::memcpy(at, &parts[k], sizeof parts[k]);
      }
    }
  }
  return bytes;
}

// The inverse: each element's value, NaN (unequal to everything) where a complex element's
// imaginary part does not belong to its real part.
inline std::vector<double> decode(const std::vector<uint8_t>& bytes, symcommDecompType_t type) {
  std::vector<double> values(bytes.size() / elem_bytes(type));
  const bool complex = type == symcommC32 || type == symcommC64;
  for (size_t i = 0; i < values.size(); ++i) {
    double parts[2] = {0, 0};
    for (int k = 0; k < (complex ? 2 : 1); ++k) {
      const uint8_t* at = bytes.data() + i * elem_bytes(type) + k * elem_bytes(type) / 2;
      if (type == symcommR32 || type == symcommC32) {
        float f;
        std::memcpy(&f, at, sizeof f);
        parts[k] = f;
      } else {
        std::memcpy(&parts[k], at, sizeof parts[k]);
      }
    }
    values[i] = !complex || parts[1] == -parts[0] - 0.5 ? parts[0] : std::nan("");
  }
  return values;
}

// Writes values as elements of `type` into p (memory of the space under test), and reads
// `count` of them back.
inline void store_values(void* p, const std::vector<double>& values, symcommDecompType_t type) {
  const std::vector<uint8_t> bytes = encode(values, type);
  mp::copy_from_host(p, bytes.data(), bytes.size());
}

inline std::vector<double> load_values(const void* p, size_t count, symcommDecompType_t type) {
  std::vector<uint8_t> bytes(count * elem_bytes(type));
  mp::copy_to_host(bytes.data(), p, bytes.size());
  return decode(bytes, type);
}

// Buffers of the exchanged data: this process's own memory, or symmetric (symcommMalloc,
// the same object on every rank), which the backends may read or write from the peers.
enum class Buffers { Local, Symmetric };

// Allocates `bytes` of either kind; symmetric allocations are collective, with the largest
// size of any rank.
inline void* alloc_buffer(Buffers kind, size_t bytes) {
  if (kind == Buffers::Local) return mp::local_alloc(bytes);
  std::vector<size_t> all(static_cast<size_t>(mp::nranks()));
  EXPECT_EQ(symcommHostAllgather(mp::world(), &bytes, all.data(), sizeof bytes), symcommSuccess);
  void* p = nullptr;
  EXPECT_EQ(symcommMalloc(mp::world(), *std::max_element(all.begin(), all.end()), &p),
            symcommSuccess) << symcommGetLastError();
  return p;
}

inline void free_buffer(Buffers kind, void* p) {
  if (kind == Buffers::Local) mp::local_free(p);
  else EXPECT_EQ(symcommFree(mp::world(), p), symcommSuccess) << symcommGetLastError();
}

// A workspace as the backends find it in real use: full of whatever was there before (here
// all bits set: as signal words that would satisfy any wait, as data NaNs).
inline void* dirty_workspace(size_t bytes) {
  void* ws = nullptr;
  EXPECT_EQ(symcommMalloc(mp::world(), bytes ? bytes : 8, &ws), symcommSuccess)
      << symcommGetLastError();
  std::vector<unsigned char> junk(bytes ? bytes : 8, 0xff);
  mp::copy_from_host(ws, junk.data(), junk.size());
  return ws;
}

// Creates a decomposition with `backend` (collective); nullptr where creation failed (the
// failure is recorded).
inline symcommDecomp_t make_decomp(symcommDecompConfig_t c, const std::string& backend) {
  std::snprintf(c.backend, sizeof c.backend, "%s", backend.c_str());
  symcommDecomp_t d = nullptr;
  symcommResult_t rc = symcommDecompCreate(mp::world(), &c, &d);
  EXPECT_EQ(rc, symcommSuccess) << "backend " << backend << ": " << symcommGetLastError();
  if (rc != symcommSuccess) return nullptr;
  const char* name = nullptr;
  EXPECT_EQ(symcommDecompGetBackend(d, &name), symcommSuccess);
  EXPECT_STREQ(name, backend.c_str());
  return d;
}

// Every registered backend, by name.
inline std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (int i = 0; i < symcommDecompBackendCount(); ++i)
    names.push_back(symcommDecompBackendName(i));
  return names;
}

// What the registered backend `backend` needs (its descriptor); fails the test where no
// backend has that name.
inline symcommDecompBackendInfo_t backend_info(const std::string& backend) {
  symcommDecompBackendInfo_t info{};
  for (int i = 0; i < symcommDecompBackendCount(); ++i)
    if (symcommDecompGetBackendInfo(i, &info) == symcommSuccess && backend == info.name)
      return info;
  ADD_FAILURE() << "no registered backend is named " << backend;
  return symcommDecompBackendInfo_t{};
}

// Whether the descriptor keeps `info`'s backend off a world that spans nodes: it loads and
// stores every rank's heap, and ranks of other nodes are not mapped.
inline bool kept_off_by_nodes(const symcommDecompBackendInfo_t& info) {
  return info.load_store_peers && mp::nodes() > 1;
}

// Whether every rank of the world has a transport from this rank (in the cuda space, ranks
// of other nodes, and GPUs without peer access, have none yet).
inline bool every_rank_has_transport() {
  for (int pe = 0; pe < mp::nranks(); ++pe) {
    const char* name = nullptr;
    if (symcommPeerTransport(mp::world(), pe, &name) != symcommSuccess ||
        std::strcmp(name, "none") == 0)
      return false;
  }
  return true;
}

// Whether the descriptor allows `info`'s backend to be refused on the world communicator:
// not in this memory space, or it needs what a machine may lack (NCCL; load/store peers in
// the cuda space, GPUs without peer access, or on ranks of other nodes; a transport to every
// rank, for a backend that needs neither load/store peers nor NCCL). In the host space every
// rank of one node is load/store accessible, and every rank has a transport.
inline bool may_be_refused_here(const symcommDecompBackendInfo_t& info) {
  const bool in_space = (info.spaces & (1u << mp::space())) != 0;
  return !in_space || info.nccl || kept_off_by_nodes(info) ||
         (info.load_store_peers && mp::space() == symcommSpaceCuda) ||
         (!info.load_store_peers && !every_rank_has_transport());
}

// `backend` where its descriptor lets it reach every rank of the world, else "" (the
// automatic choice): for the tests that name a backend for what every backend does.
inline std::string reaching_or_automatic(const std::string& backend) {
  return kept_off_by_nodes(backend_info(backend)) ? "" : backend;
}

// Whether `backend` can run on the world communicator (collective); `why` says why not. A
// backend that cannot is refused with symcommNotSupported, and only where its descriptor
// allows it (any other failure, or a refusal it does not explain, fails the test).
inline bool runs_here(const std::string& backend, std::string* why) {
  symcommDecompConfig_t c = config_2d(8);
  std::snprintf(c.backend, sizeof c.backend, "%s", backend.c_str());
  symcommDecomp_t d = nullptr;
  const symcommResult_t rc = symcommDecompCreate(mp::world(), &c, &d);
  if (rc == symcommSuccess) {
    EXPECT_EQ(symcommDecompDestroy(d), symcommSuccess);
    return true;
  }
  *why = symcommGetLastError();
  EXPECT_EQ(rc, symcommNotSupported) << *why;
  EXPECT_TRUE(may_be_refused_here(backend_info(backend)))
      << "backend " << backend << " needs nothing this communicator lacks, yet: " << *why;
  return false;
}

// A backend that needs load/store peers skips where the world spans nodes before making
// anything (Decomp.EveryBackendDescribesWhatItNeeds checks that the library refuses it).
#define SKIP_UNLESS_BACKEND_RUNS(backend)                                                \
  do {                                                                                   \
    if (kept_off_by_nodes(backend_info(backend)))                                        \
      GTEST_SKIP() << "backend " << (backend) << " loads and stores every rank's heap, "   \
                   << "and the world spans " << mp::nodes() << " nodes";                 \
    std::string why_;                                                                    \
    if (!runs_here(backend, &why_))                                                      \
      GTEST_SKIP() << "backend " << (backend) << " cannot run in the "                   \
                   << (mp::space() == symcommSpaceCuda ? "cuda" : "host")                \
                   << " memory space: " << why_;                                         \
  } while (0)

// The process grids the backend suite covers: 1 x N and N x 1, 2 x 2 on 4 ranks, 2 x 4 and
// 4 x 2 on 8.
inline std::vector<std::pair<int, int>> test_grids() {
  const int n = mp::nranks();
  std::vector<std::pair<int, int>> grids = {{1, n}, {n, 1}};
  if (n == 4) grids.push_back({2, 2});
  if (n == 8) grids.insert(grids.end(), {{2, 4}, {4, 2}});
  return grids;
}

class DecompBackends : public ::testing::TestWithParam<std::string> {};

}  // namespace decomp_test

#endif  // SYMCOMM_TESTS_MP_DECOMP_FIXTURE_H_
