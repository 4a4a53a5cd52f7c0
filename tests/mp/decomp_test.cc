// The decomposition descriptor through the C API: collective creation with agreement,
// grid coordinates, pencil information, bad input; transposes and halo exchanges on every
// registered backend (the DecompBackends suite runs once per name that
// symcommDecompBackendName lists, and skips a backend that cannot run in the memory space
// under test).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mp.h"
#include "symcomm/decomp.h"

namespace {

// The grid shapes below are written for up to 4 ranks. Every rank must own a point of every
// pencil, and a halo may be no wider than the part it comes from: on more ranks each dimension
// is tripled (8 ranks split 3 x 7 points into parts of 2 or 3).
int64_t fit(int64_t points) { return mp::nranks() > 4 ? 3 * points : points; }

symcommDecompConfig_t config_2d(int64_t n) {
  symcommDecompConfig_t c;
  symcommDecompConfigInit(&c);
  c.gdims[0] = n;
  c.gdims[1] = n + 1;  // uneven
  c.gdims[2] = n + 2;
  c.pdims[0] = mp::nranks() % 2 == 0 ? 2 : 1;
  c.pdims[1] = mp::nranks() / c.pdims[0];
  return c;
}

TEST(Decomp, CreateDescribeDestroy) {
  symcommDecompConfig_t c = config_2d(13);
  c.axis_contiguous[1] = 1;
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  int row = -1, col = -1;
  SC_OK(symcommDecompGridCoords(d, &row, &col));
  EXPECT_EQ(row * c.pdims[1] + col, mp::rank());
  // The pieces of every pencil, gathered from every rank, add up to the grid.
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t halo[3] = {1, 0, 2};
    symcommPencilInfo_t p;
    SC_OK(symcommDecompPencilInfo(d, axis, halo, nullptr, &p));
    int64_t owned = (p.hi[0] - p.lo[0]) * (p.hi[1] - p.lo[1]) * (p.hi[2] - p.lo[2]);
    std::vector<int64_t> all(static_cast<size_t>(mp::nranks()));
    SC_OK(symcommHostAllgather(mp::world(), &owned, all.data(), sizeof owned));
    int64_t total = 0;
    for (int64_t v : all) total += v;
    EXPECT_EQ(total, c.gdims[0] * c.gdims[1] * c.gdims[2]) << "axis " << axis;
    EXPECT_EQ(p.order[0], axis == 1 ? 1 : 0);
    EXPECT_EQ(p.shape[0], p.hi[p.order[0]] - p.lo[p.order[0]] + 2 * halo[p.order[0]]);
  }
  symcommPencilInfo_t bad;
  SC_FAILS(symcommDecompPencilInfo(d, 5, nullptr, nullptr, &bad), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "axis 5"), nullptr) << symcommGetLastError();
  const int64_t negative[3] = {0, -1, 0};
  SC_FAILS(symcommDecompPencilInfo(d, 0, negative, nullptr, &bad), symcommInvalidArgument);
  SC_FAILS(symcommDecompPencilInfo(d, 0, nullptr, nullptr, nullptr), symcommInvalidArgument);
  SC_OK(symcommDecompDestroy(d));
}

TEST(Decomp, RanksMustAgree) {
  symcommDecompConfig_t c = config_2d(16);
  if (mp::rank() == 0) c.gdims[2] = 17;
  symcommDecomp_t d = nullptr;
  SC_FAILS(symcommDecompCreate(mp::world(), &c, &d), symcommInvalidUsage);
  EXPECT_NE(std::strstr(symcommGetLastError(), "same configuration"), nullptr) << symcommGetLastError();
  EXPECT_EQ(d, nullptr);
  c = config_2d(16);
  c.pdims[0] = mp::nranks() + 1;  // wrong on every rank: each says why
  SC_FAILS(symcommDecompCreate(mp::world(), &c, &d), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "does not match"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommDecompCreate(mp::world(), nullptr, &d), symcommInvalidArgument);
  // Backends by name.
  c = config_2d(16);
  std::snprintf(c.backend, sizeof c.backend, "nope");
  SC_FAILS(symcommDecompCreate(mp::world(), &c, &d), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "nope"), nullptr) << symcommGetLastError();
  ASSERT_GE(symcommDecompBackendCount(), 1);
  std::snprintf(c.backend, sizeof c.backend, "%s", symcommDecompBackendName(0));
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  const char* name = nullptr;
  SC_OK(symcommDecompGetBackend(d, &name));
  EXPECT_STREQ(name, symcommDecompBackendName(0));
  SC_OK(symcommDecompDestroy(d));
}

// Every owned point holds its global linear index; halos and padding hold -1.
std::vector<double> fill_pencil(const symcommPencilInfo_t& p, const int64_t* gdims) {
  std::vector<double> v(static_cast<size_t>(p.size), -1.0);
  for (int64_t z = p.lo[2]; z < p.hi[2]; ++z)
    for (int64_t y = p.lo[1]; y < p.hi[1]; ++y)
      for (int64_t x = p.lo[0]; x < p.hi[0]; ++x)
        v[static_cast<size_t>(symcommPencilIndex(&p, x, y, z))] =
            static_cast<double>((z * gdims[1] + y) * gdims[0] + x);
  return v;
}

// The element types, and the bytes of one element.
const symcommDecompType_t kTypes[] = {symcommR32, symcommR64, symcommC32, symcommC64};

size_t elem_bytes(symcommDecompType_t type) {
  return type == symcommR32 ? 4 : type == symcommC64 ? 16 : 8;
}

const char* type_name(symcommDecompType_t type) {
  const char* names[] = {"R32", "R64", "C32", "C64"};
  return names[type];
}

// Values (as fill_pencil gives them) as elements of `type`: a complex element holds the value
// in its real part and -value - 0.5 in its imaginary part, so that swapped or misplaced parts
// show. Every value here (indices of small grids, -1, their halves) is exact in float.
std::vector<uint8_t> encode(const std::vector<double>& values, symcommDecompType_t type) {
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
std::vector<double> decode(const std::vector<uint8_t>& bytes, symcommDecompType_t type) {
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
void store_values(void* p, const std::vector<double>& values, symcommDecompType_t type) {
  const std::vector<uint8_t> bytes = encode(values, type);
  mp::copy_from_host(p, bytes.data(), bytes.size());
}

std::vector<double> load_values(const void* p, size_t count, symcommDecompType_t type) {
  std::vector<uint8_t> bytes(count * elem_bytes(type));
  mp::copy_to_host(bytes.data(), p, bytes.size());
  return decode(bytes, type);
}

struct Layout {
  int axis_contiguous;
  int64_t halo[3], padding[3];
  bool in_place;
};

// Buffers of the exchanged data: this process's own memory, or symmetric (symcommMalloc,
// the same object on every rank), which the backends may read or write from the peers.
enum class Buffers { Local, Symmetric };

// Allocates `bytes` of either kind; symmetric allocations are collective, with the largest
// size of any rank.
void* alloc_buffer(Buffers kind, size_t bytes) {
  if (kind == Buffers::Local) return mp::local_alloc(bytes);
  std::vector<size_t> all(static_cast<size_t>(mp::nranks()));
  EXPECT_EQ(symcommHostAllgather(mp::world(), &bytes, all.data(), sizeof bytes), symcommSuccess);
  void* p = nullptr;
  EXPECT_EQ(symcommMalloc(mp::world(), *std::max_element(all.begin(), all.end()), &p),
            symcommSuccess) << symcommGetLastError();
  return p;
}

void free_buffer(Buffers kind, void* p) {
  if (kind == Buffers::Local) mp::local_free(p);
  else EXPECT_EQ(symcommFree(mp::world(), p), symcommSuccess) << symcommGetLastError();
}

// A workspace as the backends find it in real use: full of whatever was there before (here
// all bits set: as signal words that would satisfy any wait, as data NaNs).
void* dirty_workspace(size_t bytes) {
  void* ws = nullptr;
  EXPECT_EQ(symcommMalloc(mp::world(), bytes ? bytes : 8, &ws), symcommSuccess)
      << symcommGetLastError();
  std::vector<unsigned char> junk(bytes ? bytes : 8, 0xff);
  mp::copy_from_host(ws, junk.data(), junk.size());
  return ws;
}

// Creates a decomposition with `backend` (collective); nullptr where creation failed (the
// failure is recorded).
symcommDecomp_t make_decomp(symcommDecompConfig_t c, const std::string& backend) {
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

// X -> Y -> Z -> Y -> X on a pr x pc grid with elements of `type`; after each step every
// point of the new pencil holds its global index, and halo and padding points still hold -1.
void round_trip(const std::string& backend, int pr, int pc, const int64_t* gdims, const Layout& l,
                symcommRankOrder_t order, Buffers kind = Buffers::Local,
                symcommDecompType_t type = symcommR64) {
  symcommDecompConfig_t c;
  symcommDecompConfigInit(&c);
  for (int a = 0; a < 3; ++a) c.gdims[a] = gdims[a];
  c.pdims[0] = pr;
  c.pdims[1] = pc;
  c.rank_order = order;
  for (int a = 0; a < 3; ++a) c.axis_contiguous[a] = l.axis_contiguous;
  symcommDecomp_t d = make_decomp(c, backend);
  ASSERT_NE(d, nullptr);
  size_t ws_bytes = 0;
  SC_OK(symcommDecompWorkspaceSize(d, type, &ws_bytes));
  void* ws = dirty_workspace(ws_bytes);
  symcommPencilInfo_t info[3];
  int64_t most = 0;
  for (int a = 0; a < 3; ++a) {
    SC_OK(symcommDecompPencilInfo(d, a, l.halo, l.padding, &info[a]));
    most = std::max(most, info[a].size);
  }
  const size_t e = elem_bytes(type);
  void* buf[2] = {alloc_buffer(kind, static_cast<size_t>(most) * e),
                  alloc_buffer(kind, static_cast<size_t>(most) * e)};
  symcommStream_t stream = mp::new_stream();
  const int steps[4][2] = {{0, 1}, {1, 2}, {2, 1}, {1, 0}};
  int cur = 0;
  store_values(buf[0], fill_pencil(info[0], gdims), type);
  for (const auto& st : steps) {
    const int next = l.in_place ? cur : 1 - cur;
    if (!l.in_place) store_values(buf[next], std::vector<double>(static_cast<size_t>(most), -1.0), type);
    SC_OK(symcommDecompTranspose(d, st[0], st[1], buf[cur], buf[next], ws, type, l.halo,
                                 l.padding, l.halo, l.padding, stream));
    mp::sync(stream);
    const symcommPencilInfo_t& p = info[st[1]];
    const std::vector<double> got = load_values(buf[next], static_cast<size_t>(p.size), type);
    std::vector<double> want = fill_pencil(p, gdims);
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i] && !(l.in_place && want[i] < 0);
    EXPECT_EQ(bad, 0u) << "transpose " << st[0] << " -> " << st[1] << " on " << pr << " x " << pc
                       << ", " << type_name(type);
    cur = next;
  }
  mp::free_stream(stream);
  free_buffer(kind, buf[1]);
  free_buffer(kind, buf[0]);
  SC_OK(symcommFree(mp::world(), ws));
  SC_OK(symcommDecompDestroy(d));
}

// Every registered backend, by name.
std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (int i = 0; i < symcommDecompBackendCount(); ++i)
    names.push_back(symcommDecompBackendName(i));
  return names;
}

// Whether `backend` can run on the world communicator (collective); `why` says why not.
bool runs_here(const std::string& backend, std::string* why) {
  symcommDecompConfig_t c = config_2d(8);
  std::snprintf(c.backend, sizeof c.backend, "%s", backend.c_str());
  symcommDecomp_t d = nullptr;
  const symcommResult_t rc = symcommDecompCreate(mp::world(), &c, &d);
  if (rc == symcommSuccess) {
    EXPECT_EQ(symcommDecompDestroy(d), symcommSuccess);
    return true;
  }
  *why = symcommGetLastError();
  // Only "this backend cannot run here" is a reason to skip; any other failure is a failure.
  EXPECT_NE(std::strstr(why->c_str(), "can run on this communicator"), nullptr) << *why;
  return false;
}

#define SKIP_UNLESS_BACKEND_RUNS(backend)                                                \
  do {                                                                                   \
    std::string why_;                                                                    \
    if (!runs_here(backend, &why_))                                                      \
      GTEST_SKIP() << "backend " << (backend) << " cannot run in the "                   \
                   << (mp::space() == symcommSpaceCuda ? "cuda" : "host")                \
                   << " memory space: " << why_;                                         \
  } while (0)

// The process grids the backend suite covers: 1 x N and N x 1, 2 x 2 on 4 ranks, 2 x 4 and
// 4 x 2 on 8.
std::vector<std::pair<int, int>> test_grids() {
  const int n = mp::nranks();
  std::vector<std::pair<int, int>> grids = {{1, n}, {n, 1}};
  if (n == 4) grids.push_back({2, 2});
  if (n == 8) grids.insert(grids.end(), {{2, 4}, {4, 2}});
  return grids;
}

class DecompBackends : public ::testing::TestWithParam<std::string> {};

TEST_P(DecompBackends, TransposesRoundTrip) {
  SKIP_UNLESS_BACKEND_RUNS(GetParam());
  const std::vector<std::pair<int, int>> grids = test_grids();
  const int64_t even[3] = {fit(8), fit(8), fit(8)}, uneven[3] = {fit(7), fit(9), fit(6)};
  const Layout layouts[] = {
      {0, {0, 0, 0}, {0, 0, 0}, false},
      {1, {0, 0, 0}, {0, 0, 0}, false},
      {0, {1, 2, 1}, {0, 1, 3}, false},
      {1, {1, 0, 2}, {2, 0, 1}, false},
      {0, {0, 0, 0}, {0, 0, 0}, true},
      {1, {1, 1, 1}, {1, 0, 0}, true},
  };
  for (auto [pr, pc] : grids)
    for (const int64_t* g : {even, uneven})
      for (const Layout& l : layouts)
        for (symcommRankOrder_t order : {symcommRowMajor, symcommColumnMajor}) {
          SCOPED_TRACE("grid " + std::to_string(pr) + "x" + std::to_string(pc) + " dims " +
                       std::to_string(g[0]) + " contiguous " + std::to_string(l.axis_contiguous) +
                       (l.in_place ? " in place" : "") + " order " + std::to_string(order));
          round_trip(GetParam(), pr, pc, g, l, order);
        }
  // Symmetric buffers: the paths that read or write the peers' buffers directly (in place
  // too), on every grid, with halos and padding and without.
  for (auto [pr, pc] : grids)
    for (const int64_t* g : {even, uneven})
      for (const Layout& l : {layouts[0], layouts[3], layouts[4], layouts[5]}) {
        SCOPED_TRACE("symmetric buffers, grid " + std::to_string(pr) + "x" + std::to_string(pc) +
                     " dims " + std::to_string(g[0]) + " contiguous " +
                     std::to_string(l.axis_contiguous) + (l.in_place ? " in place" : ""));
        round_trip(GetParam(), pr, pc, g, l, symcommRowMajor, Buffers::Symmetric);
      }
  // The other element types (4, 8 and 16 bytes take different copy paths): every grid, the
  // uneven dimensions, plain, with halos and padding, and in place; local and symmetric.
  for (auto [pr, pc] : grids)
    for (symcommDecompType_t type : kTypes) {
      if (type == symcommR64) continue;  // above
      for (const Layout& l : {layouts[0], layouts[3], layouts[5]})
        for (Buffers kind : {Buffers::Local, Buffers::Symmetric}) {
          SCOPED_TRACE(std::string(type_name(type)) + ", grid " + std::to_string(pr) + "x" +
                       std::to_string(pc) + " contiguous " + std::to_string(l.axis_contiguous) +
                       (l.in_place ? " in place" : "") +
                       (kind == Buffers::Local ? ", local" : ", symmetric"));
          round_trip(GetParam(), pr, pc, uneven, l, symcommRowMajor, kind, type);
        }
    }
}

// One transpose each way between pencils whose input and output carry different halos and
// padding (the backends that write into the peers' outputs must use the output's layout, those
// that read the peers' inputs the input's): the output's owned points hold their global index,
// its halo and padding keep the poison, and input halo points (-5) never travel.
void transpose_between_layouts(const std::string& backend, int pr, int pc, Buffers kind) {
  const int64_t gdims[3] = {fit(7), fit(9), fit(6)};
  const int64_t halo_a[3] = {1, 0, 2}, pad_a[3] = {0, 1, 0};
  const int64_t halo_b[3] = {0, 2, 1}, pad_b[3] = {2, 0, 1};
  symcommDecompConfig_t c;
  symcommDecompConfigInit(&c);
  for (int a = 0; a < 3; ++a) c.gdims[a] = gdims[a];
  c.pdims[0] = pr;
  c.pdims[1] = pc;
  symcommDecomp_t d = make_decomp(c, backend);
  ASSERT_NE(d, nullptr);
  size_t ws_bytes = 0;
  SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &ws_bytes));
  void* ws = dirty_workspace(ws_bytes);
  symcommStream_t stream = mp::new_stream();
  const int steps[4][2] = {{0, 1}, {1, 2}, {2, 1}, {1, 0}};
  for (const auto& st : steps) {
    SCOPED_TRACE("transpose " + std::to_string(st[0]) + " -> " + std::to_string(st[1]));
    symcommPencilInfo_t in, out;
    SC_OK(symcommDecompPencilInfo(d, st[0], halo_a, pad_a, &in));
    SC_OK(symcommDecompPencilInfo(d, st[1], halo_b, pad_b, &out));
    void* src = alloc_buffer(kind, static_cast<size_t>(in.size) * 8);
    void* dst = alloc_buffer(kind, static_cast<size_t>(out.size) * 8);
    std::vector<double> start = fill_pencil(in, gdims);
    for (double& v : start)
      if (v < 0) v = -5.0;
    mp::copy_from_host(src, start.data(), start.size() * 8);
    const std::vector<double> poison(static_cast<size_t>(out.size), -1.0);
    mp::copy_from_host(dst, poison.data(), poison.size() * 8);
    SC_OK(symcommDecompTranspose(d, st[0], st[1], src, dst, ws, symcommR64, halo_a, pad_a, halo_b,
                                 pad_b, stream));
    mp::sync(stream);
    std::vector<double> got(static_cast<size_t>(out.size));
    mp::copy_to_host(got.data(), dst, got.size() * 8);
    EXPECT_EQ(got, fill_pencil(out, gdims));
    free_buffer(kind, dst);
    free_buffer(kind, src);
  }
  mp::free_stream(stream);
  SC_OK(symcommFree(mp::world(), ws));
  SC_OK(symcommDecompDestroy(d));
}

TEST_P(DecompBackends, TransposesBetweenDifferentLayouts) {
  SKIP_UNLESS_BACKEND_RUNS(GetParam());
  const std::vector<std::pair<int, int>> grids = test_grids();
  for (auto [pr, pc] : grids)
    for (Buffers kind : {Buffers::Local, Buffers::Symmetric}) {
      SCOPED_TRACE("grid " + std::to_string(pr) + "x" + std::to_string(pc) +
                   (kind == Buffers::Local ? ", local buffers" : ", symmetric buffers"));
      transpose_between_layouts(GetParam(), pr, pc, kind);
    }
}

// Halo exchanges along x, then y, then z fill every halo point (corners included) with the
// value of the point it mirrors: wrapped around where periodic, left at -1 past a
// non-periodic boundary.
void check_halos(const std::string& backend, int pr, int pc, const int64_t* gdims,
                 const int* periodic, int axis, const int64_t* halo, const int64_t* padding,
                 int contiguous, Buffers kind = Buffers::Local,
                 symcommDecompType_t type = symcommR64) {
  symcommDecompConfig_t c;
  symcommDecompConfigInit(&c);
  for (int a = 0; a < 3; ++a) {
    c.gdims[a] = gdims[a];
    c.axis_contiguous[a] = contiguous;
  }
  c.pdims[0] = pr;
  c.pdims[1] = pc;
  symcommDecomp_t d = make_decomp(c, backend);
  ASSERT_NE(d, nullptr);
  symcommPencilInfo_t p;
  SC_OK(symcommDecompPencilInfo(d, axis, halo, padding, &p));
  size_t ws_bytes = 0;
  for (int dim = 0; dim < 3; ++dim) {
    size_t b = 0;
    SC_OK(symcommDecompHaloWorkspaceSize(d, axis, dim, type, halo, padding, &b));
    ws_bytes = std::max(ws_bytes, b);
  }
  void* ws = dirty_workspace(ws_bytes);
  const std::vector<double> start = fill_pencil(p, gdims);
  void* buf = alloc_buffer(kind, start.size() * elem_bytes(type));
  store_values(buf, start, type);
  symcommStream_t stream = mp::new_stream();
  for (int dim = 0; dim < 3; ++dim)
    SC_OK(symcommDecompHalo(d, axis, dim, buf, ws, type, halo, padding, periodic, stream));
  mp::sync(stream);
  const std::vector<double> got = load_values(buf, start.size(), type);
  size_t bad = 0;
  for (int64_t z = p.lo[2] - halo[2]; z < p.hi[2] + halo[2]; ++z)
    for (int64_t y = p.lo[1] - halo[1]; y < p.hi[1] + halo[1]; ++y)
      for (int64_t x = p.lo[0] - halo[0]; x < p.hi[0] + halo[0]; ++x) {
        const int64_t g[3] = {x, y, z};
        double want = 0;
        int64_t w[3];
        bool outside = false;
        for (int a = 0; a < 3; ++a) {
          w[a] = g[a];
          if (g[a] < 0 || g[a] >= gdims[a]) {
            if (periodic[a]) w[a] = (g[a] + gdims[a]) % gdims[a];
            else outside = true;
          }
        }
        want = outside ? -1.0 : static_cast<double>((w[2] * gdims[1] + w[1]) * gdims[0] + w[0]);
        const int64_t at = symcommPencilIndex(&p, x, y, z);
        if (got[static_cast<size_t>(at)] != want && bad++ < 5)
          ADD_FAILURE() << type_name(type) << " halo point (" << x << ", " << y << ", " << z
                        << ") holds " << got[static_cast<size_t>(at)] << ", expected " << want;
      }
  EXPECT_EQ(bad, 0u);
  mp::free_stream(stream);
  free_buffer(kind, buf);
  SC_OK(symcommFree(mp::world(), ws));
  SC_OK(symcommDecompDestroy(d));
}

// The input of a transpose is written by a kernel just before it on the stream, one that lets
// the next kernel launch at once and writes only 1 ms later (written for programmatic
// dependent launch). The backends' kernels start early then (launched with PDL): every
// backend must still transpose the data, not what the input held before. On an N x 1 grid,
// where X -> Y goes between ranks.
TEST_P(DecompBackends, TransposeReadsWhatAnEarlyTriggeringKernelWrote) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "a kernel before the transpose: GPUs only";
  SKIP_UNLESS_BACKEND_RUNS(GetParam());
  const int64_t gdims[3] = {24, 20, 16}, none[3] = {0, 0, 0};
  for (Buffers kind : {Buffers::Local, Buffers::Symmetric}) {
    SCOPED_TRACE(kind == Buffers::Local ? "local buffers" : "symmetric buffers");
    symcommDecompConfig_t c;
    symcommDecompConfigInit(&c);
    for (int a = 0; a < 3; ++a) c.gdims[a] = gdims[a];
    c.pdims[0] = mp::nranks();
    c.pdims[1] = 1;
    symcommDecomp_t d = make_decomp(c, GetParam());
    ASSERT_NE(d, nullptr);
    size_t ws_bytes = 0;
    SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &ws_bytes));
    void* ws = dirty_workspace(ws_bytes);
    symcommPencilInfo_t x, y;
    SC_OK(symcommDecompPencilInfo(d, 0, none, none, &x));
    SC_OK(symcommDecompPencilInfo(d, 1, none, none, &y));
    const size_t most = static_cast<size_t>(std::max(x.size, y.size));
    void* in = alloc_buffer(kind, most * 8);
    void* out = alloc_buffer(kind, most * 8);
    void* data = mp::local_alloc(most * 8);
    const std::vector<double> start = fill_pencil(x, gdims), poison(most, -1.0);
    mp::copy_from_host(data, start.data(), start.size() * 8);
    mp::copy_from_host(in, poison.data(), most * 8);
    mp::copy_from_host(out, poison.data(), most * 8);
    symcommStream_t stream = mp::new_stream();
    // Once before, so that the kernels are loaded (lazy loading can take longer than the
    // delay).
    SC_OK(symcommDecompTranspose(d, 0, 1, in, out, ws, symcommR64, none, none, none, none,
                                 stream));
    mp::sync(stream);
    mp::copy_from_host(out, poison.data(), most * 8);
    SC_OK(symcommHostBarrier(mp::world()));
    mp::copy_after_early_trigger(stream, in, data, start.size() * 8, 1000);
    SC_OK(symcommDecompTranspose(d, 0, 1, in, out, ws, symcommR64, none, none, none, none,
                                 stream));
    mp::sync(stream);
    std::vector<double> got(static_cast<size_t>(y.size));
    mp::copy_to_host(got.data(), out, got.size() * 8);
    const std::vector<double> want = fill_pencil(y, gdims);
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i];
    EXPECT_EQ(bad, 0u) << "points of " << want.size() << " wrong (-1: read before written)";
    SC_OK(symcommHostBarrier(mp::world()));
    mp::free_stream(stream);
    mp::local_free(data);
    free_buffer(kind, out);
    free_buffer(kind, in);
    SC_OK(symcommFree(mp::world(), ws));
    SC_OK(symcommDecompDestroy(d));
  }
}

TEST_P(DecompBackends, HaloExchanges) {
  SKIP_UNLESS_BACKEND_RUNS(GetParam());
  const std::vector<std::pair<int, int>> grids = test_grids();
  const int64_t dims[3] = {fit(9), fit(8), fit(7)};
  const int all[3] = {1, 1, 1}, none[3] = {0, 0, 0}, mixed[3] = {1, 0, 1};
  const int64_t halo1[3] = {1, 1, 1}, halo2[3] = {2, 0, 1}, pad[3] = {1, 0, 2};
  for (auto [pr, pc] : grids)
    for (int axis = 0; axis < 3; ++axis)
      for (const int* per : {all, none, mixed})
        for (const int64_t* h : {halo1, halo2}) {
          SCOPED_TRACE("grid " + std::to_string(pr) + "x" + std::to_string(pc) + " axis " +
                       std::to_string(axis) + " periodic " + std::to_string(per[0]) +
                       std::to_string(per[1]) + std::to_string(per[2]) + " halo " +
                       std::to_string(h[0]) + std::to_string(h[1]) + std::to_string(h[2]));
          check_halos(GetParam(), pr, pc, dims, per, axis, h, pad, axis % 2);
          check_halos(GetParam(), pr, pc, dims, per, axis, h, pad, axis % 2, Buffers::Symmetric);
        }
  // The other element types: every grid and pencil, mixed boundaries, local and symmetric.
  for (auto [pr, pc] : grids)
    for (int axis = 0; axis < 3; ++axis)
      for (symcommDecompType_t type : kTypes) {
        if (type == symcommR64) continue;  // above
        SCOPED_TRACE(std::string(type_name(type)) + ", grid " + std::to_string(pr) + "x" +
                     std::to_string(pc) + " axis " + std::to_string(axis));
        for (Buffers kind : {Buffers::Local, Buffers::Symmetric})
          check_halos(GetParam(), pr, pc, dims, mixed, axis, halo1, pad, axis % 2, kind, type);
      }
}

// A transpose captured in a CUDA graph and replayed, with eager calls on the same workspace
// in between: whatever a backend keeps in the workspace (signal words) must be right on
// every replay, not only on the call that was captured.
TEST_P(DecompBackends, TransposeGraphReplay) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "CUDA graphs need the cuda memory space";
  SKIP_UNLESS_BACKEND_RUNS(GetParam());
  const int64_t gdims[3] = {12, 10, 9};
  for (Buffers kind : {Buffers::Local, Buffers::Symmetric}) {
    SCOPED_TRACE(kind == Buffers::Local ? "local buffers" : "symmetric buffers");
    symcommDecompConfig_t c = config_2d(4);
    for (int a = 0; a < 3; ++a) c.gdims[a] = gdims[a];
    symcommDecomp_t d = make_decomp(c, GetParam());
    ASSERT_NE(d, nullptr);
    size_t ws_bytes = 0;
    SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &ws_bytes));
    void* ws = dirty_workspace(ws_bytes);
    symcommPencilInfo_t info[3];
    int64_t most = 0;
    for (int a = 0; a < 3; ++a) {
      SC_OK(symcommDecompPencilInfo(d, a, nullptr, nullptr, &info[a]));
      most = std::max(most, info[a].size);
    }
    const size_t bytes = static_cast<size_t>(most) * 8;
    void* x = alloc_buffer(kind, bytes);
    void* y = alloc_buffer(kind, bytes);
    void* z = alloc_buffer(kind, bytes);
    symcommStream_t stream = mp::new_stream();
    ASSERT_EQ(mp::begin_capture(stream), 0);
    const symcommResult_t xy = symcommDecompTranspose(d, 0, 1, x, y, ws, symcommR64, nullptr,
                                                      nullptr, nullptr, nullptr, stream);
    const symcommResult_t yz = symcommDecompTranspose(d, 1, 2, y, z, ws, symcommR64, nullptr,
                                                      nullptr, nullptr, nullptr, stream);
    void* graph = mp::end_capture(stream);
    ASSERT_EQ(xy, symcommSuccess) << symcommGetLastError();
    ASSERT_EQ(yz, symcommSuccess) << symcommGetLastError();
    ASSERT_NE(graph, nullptr);
    // Each replay moves different values (the index plus a per-replay offset).
    auto filled = [&](const symcommPencilInfo_t& p, int replay) {
      std::vector<double> v = fill_pencil(p, gdims);
      for (double& e : v)
        if (e >= 0) e += 1e6 * replay;
      return v;
    };
    const std::vector<double> poison(static_cast<size_t>(most), -7.0);
    for (int replay = 0; replay < 4; ++replay) {
      const std::vector<double> in = filled(info[0], replay);
      mp::copy_from_host(x, in.data(), in.size() * 8);
      mp::copy_from_host(y, poison.data(), bytes);
      mp::copy_from_host(z, poison.data(), bytes);
      ASSERT_EQ(mp::launch_graph(graph, stream), 0);
      mp::sync(stream);
      std::vector<double> got(static_cast<size_t>(info[2].size));
      mp::copy_to_host(got.data(), z, got.size() * 8);
      const std::vector<double> want = filled(info[2], replay);
      EXPECT_EQ(got, want) << "replay " << replay;
      // An eager call between replays, on the same workspace, the other way.
      mp::copy_from_host(y, poison.data(), bytes);
      SC_OK(symcommDecompTranspose(d, 2, 1, z, y, ws, symcommR64, nullptr, nullptr, nullptr,
                                   nullptr, stream));
      mp::sync(stream);
      std::vector<double> back(static_cast<size_t>(info[1].size));
      mp::copy_to_host(back.data(), y, back.size() * 8);
      EXPECT_EQ(back, filled(info[1], replay)) << "eager Z -> Y after replay " << replay;
    }
    mp::destroy_graph(graph);
    mp::free_stream(stream);
    free_buffer(kind, z);
    free_buffer(kind, y);
    free_buffer(kind, x);
    SC_OK(symcommFree(mp::world(), ws));
    SC_OK(symcommDecompDestroy(d));
  }
}

INSTANTIATE_TEST_SUITE_P(Registered, DecompBackends, ::testing::ValuesIn(backend_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(Decomp, OutlivingItsCommunicator) {
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommDecompConfig_t c = config_2d(8);
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(comm, &c, &d));
  SC_OK(symcommFinalize(comm));  // the decomposition lets go of it
  int row, col;
  SC_FAILS(symcommDecompGridCoords(d, &row, &col), symcommInvalidUsage);
  EXPECT_NE(std::strstr(symcommGetLastError(), "finalized"), nullptr) << symcommGetLastError();
  SC_OK(symcommDecompDestroy(d));
}

// A transpose whose peers never call: its waits are bounded. In the cuda space the call
// returns at once and the host learns the timeout at its next call (the copy kernel's waits
// for the peers' arrival end at SYMCOMM_WAIT_TIMEOUT); in the host space the call itself
// fails. Either way nothing hangs, the process goes on, and nothing was written into the
// peers' buffers (sm writes straight into their outputs: only after their arrival). In the
// cuda space also with the barriers and copies apart (SYMCOMM_BOX_COPY_SYNCED_PER_SM=0), and
// with a grid of several waves (16 per SM: the blocks of later waves must not wait the bound
// again).
TEST(Decomp, TransposeWithoutItsPeersTimesOut) {
  if (mp::nranks() < 2) GTEST_SKIP() << "needs 2 ranks";
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  std::vector<std::string> per_sm = {"2"};
  if (mp::space() == symcommSpaceCuda) per_sm = {"2", "16", "0"};
  for (const std::string& blocks : per_sm)
    for (const char* backend : {"sm", "fused"}) {
      SCOPED_TRACE(std::string(backend) + ", SYMCOMM_BOX_COPY_SYNCED_PER_SM=" + blocks);
      mp::ScopedEnv synced("SYMCOMM_BOX_COPY_SYNCED_PER_SM", blocks);
      symcommComm_t comm = mp::new_comm();
      ASSERT_NE(comm, nullptr);
      symcommDecompConfig_t c;
      symcommDecompConfigInit(&c);
      for (int a = 0; a < 3; ++a) c.gdims[a] = 128;
      c.pdims[0] = 1;
      c.pdims[1] = mp::nranks();
      std::snprintf(c.backend, sizeof c.backend, "%s", backend);
      symcommDecomp_t d = nullptr;
      ASSERT_EQ(symcommDecompCreate(comm, &c, &d), symcommSuccess) << symcommGetLastError();
      size_t ws_bytes = 0, bytes = 0;
      SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &ws_bytes));
      for (int a = 0; a < 3; ++a) {
        symcommPencilInfo_t p;
        SC_OK(symcommDecompPencilInfo(d, a, nullptr, nullptr, &p));
        bytes = std::max(bytes, static_cast<size_t>(p.size) * 8);
      }
      void *ws = nullptr, *in = nullptr, *out = nullptr;
      SC_OK(symcommMalloc(comm, ws_bytes, &ws));
      SC_OK(symcommMalloc(comm, bytes, &in));
      SC_OK(symcommMalloc(comm, bytes, &out));
      const std::vector<uint8_t> marker(bytes, 0x5A);
      mp::copy_from_host(out, marker.data(), bytes);
      EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
      symcommStream_t stream = mp::new_stream();
      if (mp::rank() == 0) {  // Y -> Z over every rank; the others never call
        const auto start = std::chrono::steady_clock::now();
        const symcommResult_t rc = symcommDecompTranspose(d, 1, 2, in, out, ws, symcommR64,
                                                          nullptr, nullptr, nullptr, nullptr,
                                                          stream);
        if (mp::space() == symcommSpaceCuda) {
          EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();
          mp::sync(stream);
          SC_FAILS(symcommQuietOnStream(comm, stream), symcommTimeout);
        } else {
          EXPECT_EQ(rc, symcommTimeout) << symcommGetLastError();
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        EXPECT_LT(seconds, 10.0) << "each wait is bounded by 1 s, and waited once";
      }
      EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
      if (mp::rank() != 0) {
        std::vector<uint8_t> got(bytes);
        mp::copy_to_host(got.data(), out, bytes);
        EXPECT_TRUE(got == marker) << "rank 0 wrote into this rank's output without its arrival";
      }
      mp::free_stream(stream);
      SC_OK(symcommDecompDestroy(d));
      EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
    }
}

// Expects `call` to fail with `code` and a last-error message that holds every one of `parts`.
// Every failure below is this rank's own (nothing collective has begun), so each rank fails
// the same way.
TEST(Decomp, TransposeBadArguments) {
  symcommDecompConfig_t c = config_2d(8);
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  symcommPencilInfo_t x, y;
  SC_OK(symcommDecompPencilInfo(d, 0, nullptr, nullptr, &x));
  SC_OK(symcommDecompPencilInfo(d, 1, nullptr, nullptr, &y));
  const size_t bytes = static_cast<size_t>(std::max(x.size, y.size)) * 8;
  void* in = mp::local_alloc(bytes);
  void* out = mp::local_alloc(bytes);
  size_t need = 0;
  SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &need));
  void* ws = nullptr;
  SC_OK(symcommMalloc(mp::world(), need, &ws));
  symcommStream_t stream = mp::new_stream();
  auto transpose = [&](int from, int to, const void* i, void* o, void* w,
                       symcommDecompType_t type = symcommR64) {
    return symcommDecompTranspose(d, from, to, i, o, w, type, nullptr, nullptr, nullptr, nullptr,
                                  stream);
  };
  SC_FAILS_SAYING(transpose(0, 2, in, out, ws), symcommInvalidArgument, "X<->Y or Y<->Z");
  SC_FAILS_SAYING(transpose(0, 1, in, out, ws, static_cast<symcommDecompType_t>(9)),
                  symcommInvalidArgument, "type 9");
  SC_FAILS_SAYING(transpose(0, 1, nullptr, out, ws), symcommInvalidArgument, "input is NULL");
  SC_FAILS_SAYING(transpose(0, 1, in, nullptr, ws), symcommInvalidArgument, "output is NULL");
  SC_FAILS_SAYING(transpose(0, 1, in, out, nullptr), symcommInvalidArgument, "workspace is NULL",
                  std::to_string(need));
  SC_FAILS_SAYING(transpose(0, 1, in, out, in), symcommInvalidArgument,
                  "is not a symmetric buffer");
  const int64_t negative[3] = {-1, 0, 0};
  SC_FAILS(symcommDecompTranspose(d, 0, 1, in, out, ws, symcommR64, negative, nullptr, nullptr,
                                  nullptr, nullptr), symcommInvalidArgument);
  // A workspace too small for the call: the allocation it lies in is smaller (256 bytes, the
  // allocator's unit), or it starts too close to the allocation's end. Before the check
  // looked at the live allocations, both passed (the heap beyond is mapped) and the
  // transpose wrote over the next allocation.
  ASSERT_GT(need, 512u) << "the grid is too small for this test";
  void* small = nullptr;
  SC_OK(symcommMalloc(mp::world(), 256, &small));
  SC_FAILS_SAYING(transpose(0, 1, in, out, small), symcommInvalidArgument, "too small", "256",
                  std::to_string(need));
  char* late = static_cast<char*>(ws) + 256;
  const size_t allocated = (need + 255) / 256 * 256;  // what symcommMalloc(need) holds
  SC_FAILS_SAYING(transpose(0, 1, in, out, late), symcommInvalidArgument, "too small",
                  std::to_string(allocated - 256), std::to_string(need));
  // A symmetric output smaller than its pencil (the direct paths write into it from peers).
  SC_FAILS_SAYING(transpose(0, 1, in, small, ws), symcommInvalidArgument, "output",
                  std::to_string(static_cast<size_t>(y.size) * 8));
  SC_OK(symcommFree(mp::world(), small));
  // A freed workspace: still inside the mapped heap, in no live allocation.
  SC_FAILS_SAYING(transpose(0, 1, in, out, small), symcommInvalidArgument, "no live allocation");
  // Nothing above was enqueued: the same call with good arguments works.
  SC_OK(transpose(0, 1, in, out, ws));
  mp::sync(stream);
  mp::free_stream(stream);
  size_t bytes_out = 0;
  SC_FAILS(symcommDecompWorkspaceSize(d, static_cast<symcommDecompType_t>(9), &bytes_out),
           symcommInvalidArgument);
  SC_OK(symcommFree(mp::world(), ws));
  mp::local_free(out);
  mp::local_free(in);
  SC_OK(symcommDecompDestroy(d));
}

TEST(Decomp, HaloBadArguments) {
  symcommDecompConfig_t c = config_2d(8);
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  const int64_t halo[3] = {1, 1, 1};
  const int periodic[3] = {1, 1, 1};
  symcommPencilInfo_t p;
  SC_OK(symcommDecompPencilInfo(d, 0, halo, nullptr, &p));
  void* buf = mp::local_alloc(static_cast<size_t>(p.size) * 8);
  size_t need = 0;
  SC_OK(symcommDecompHaloWorkspaceSize(d, 0, 1, symcommR64, halo, nullptr, &need));
  void* ws = nullptr;
  ASSERT_GT(need, 256u) << "the grid is too small for this test";
  SC_OK(symcommMalloc(mp::world(), need, &ws));
  symcommStream_t stream = mp::new_stream();
  auto exchange_with = [&](int axis, int dim, void* b, void* w, symcommDecompType_t type,
                           const int64_t* h) {
    return symcommDecompHalo(d, axis, dim, b, w, type, h, nullptr, periodic, stream);
  };
  auto exchange = [&](int axis, int dim, void* b, void* w) {
    return exchange_with(axis, dim, b, w, symcommR64, halo);
  };
  SC_FAILS_SAYING(exchange(3, 1, buf, ws), symcommInvalidArgument, "axis 3");
  SC_FAILS_SAYING(exchange(-1, 1, buf, ws), symcommInvalidArgument, "axis -1");
  SC_FAILS_SAYING(exchange(0, 3, buf, ws), symcommInvalidArgument, "dim 3");
  SC_FAILS_SAYING(exchange(0, -1, buf, ws), symcommInvalidArgument, "dim -1");
  SC_FAILS_SAYING(exchange_with(0, 1, buf, ws, static_cast<symcommDecompType_t>(7), halo),
                  symcommInvalidArgument, "type 7");
  SC_FAILS_SAYING(exchange(0, 1, nullptr, ws), symcommInvalidArgument, "buffer is NULL");
  SC_FAILS_SAYING(exchange(0, 1, buf, nullptr), symcommInvalidArgument, "workspace is NULL");
  SC_FAILS_SAYING(exchange(0, 1, buf, buf), symcommInvalidArgument, "not a symmetric buffer");
  SC_FAILS_SAYING(exchange(0, 1, buf, static_cast<char*>(ws) + 256), symcommInvalidArgument,
                  "too small", std::to_string(need));
  const int64_t huge[3] = {0, 0, 100};
  size_t bytes = 0;
  SC_FAILS_SAYING(symcommDecompHaloWorkspaceSize(d, 0, 2, symcommR64, huge, nullptr, &bytes),
                  symcommInvalidArgument, "larger than");
  SC_FAILS(exchange_with(0, 2, buf, ws, symcommR64, huge), symcommInvalidArgument);
  // No halo along the dimension: nothing to do, nothing checked.
  const int64_t none[3] = {0, 0, 0};
  SC_OK(exchange_with(0, 1, nullptr, nullptr, symcommR64, none));
  SC_OK(exchange(0, 1, buf, ws));
  mp::sync(stream);
  mp::free_stream(stream);
  SC_OK(symcommFree(mp::world(), ws));
  mp::local_free(buf);
  SC_OK(symcommDecompDestroy(d));
}

// In the cuda space a buffer the GPU cannot access (pageable host memory) is refused before
// anything is enqueued, where the copy kernels would fault and the copy engines would stage
// through the host.
TEST(Decomp, RefusesBuffersTheGpuCannotAccess) {
  if (mp::space() != symcommSpaceCuda)
    GTEST_SKIP() << "the host space has only host memory, which it accepts";
  symcommDecompConfig_t c = config_2d(8);
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  symcommPencilInfo_t x, y;
  const int64_t halo[3] = {1, 1, 1};
  SC_OK(symcommDecompPencilInfo(d, 0, halo, nullptr, &x));
  SC_OK(symcommDecompPencilInfo(d, 1, halo, nullptr, &y));
  const size_t bytes = static_cast<size_t>(std::max(x.size, y.size)) * 8;
  std::vector<double> pageable(bytes / 8, 1.0);
  void* in = mp::local_alloc(bytes);
  void* out = mp::local_alloc(bytes);
  size_t need = 0, halo_need = 0;
  SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &need));
  SC_OK(symcommDecompHaloWorkspaceSize(d, 0, 1, symcommR64, halo, nullptr, &halo_need));
  void* ws = nullptr;
  SC_OK(symcommMalloc(mp::world(), std::max(need, halo_need), &ws));
  symcommStream_t stream = mp::new_stream();
  const int periodic[3] = {1, 1, 1};
  SC_FAILS_SAYING(symcommDecompTranspose(d, 0, 1, pageable.data(), out, ws, symcommR64, halo,
                                         nullptr, halo, nullptr, stream),
                  symcommInvalidArgument, "input", "pageable host memory");
  SC_FAILS_SAYING(symcommDecompTranspose(d, 0, 1, in, pageable.data(), ws, symcommR64, halo,
                                         nullptr, halo, nullptr, stream),
                  symcommInvalidArgument, "output", "pageable host memory");
  SC_FAILS_SAYING(symcommDecompHalo(d, 0, 1, pageable.data(), ws, symcommR64, halo, nullptr,
                                    periodic, stream),
                  symcommInvalidArgument, "buffer", "pageable host memory");
  // Device memory passes.
  SC_OK(symcommDecompTranspose(d, 0, 1, in, out, ws, symcommR64, halo, nullptr, halo, nullptr,
                               stream));
  SC_OK(symcommDecompHalo(d, 0, 1, in, ws, symcommR64, halo, nullptr, periodic, stream));
  mp::sync(stream);
  mp::free_stream(stream);
  SC_OK(symcommFree(mp::world(), ws));
  mp::local_free(out);
  mp::local_free(in);
  SC_OK(symcommDecompDestroy(d));
}

// SYMCOMM_DECOMP_CHECK=1: every rank's call is compared (a host allgather per call). One
// rank passing a local buffer where the others pass a symmetric one, another symmetric
// object, other halos, or arguments it refuses itself: every rank fails with the same
// message, and nothing is enqueued. Without the check such calls run with the ranks
// disagreeing on the direct paths.
TEST(Decomp, CheckFindsCallsThatDifferBetweenRanks) {
  mp::ScopedEnv check("SYMCOMM_DECOMP_CHECK", "1");
  symcommDecompConfig_t c = config_2d(8);
  std::snprintf(c.backend, sizeof c.backend, "copy");  // runs in both spaces
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  const int64_t halo[3] = {1, 1, 1};
  const int periodic[3] = {1, 1, 1};
  symcommPencilInfo_t x, y;
  SC_OK(symcommDecompPencilInfo(d, 0, halo, nullptr, &x));
  SC_OK(symcommDecompPencilInfo(d, 1, halo, nullptr, &y));
  const size_t bytes = static_cast<size_t>(std::max(x.size, y.size)) * 8;
  size_t need = 0, halo_need = 0;
  SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &need));
  SC_OK(symcommDecompHaloWorkspaceSize(d, 1, 0, symcommR64, halo, nullptr, &halo_need));
  void* ws = alloc_buffer(Buffers::Symmetric, std::max(need, halo_need));
  void* sym[2] = {alloc_buffer(Buffers::Symmetric, bytes), alloc_buffer(Buffers::Symmetric, bytes)};
  void* local = mp::local_alloc(bytes);
  const bool odd = mp::rank() == mp::nranks() - 1;  // the rank that differs
  const std::string who = std::to_string(mp::nranks() - 1);
  symcommStream_t stream = mp::new_stream();
  auto transpose = [&](const void* in, void* out, const int64_t* in_halo) {
    return symcommDecompTranspose(d, 0, 1, in, out, ws, symcommR64, in_halo, nullptr, halo,
                                  nullptr, stream);
  };
  SC_FAILS_SAYING(transpose(odd ? local : sym[0], sym[1], halo), symcommInvalidUsage,
                  "the input is symmetric on rank 0 and not on rank " + who,
                  "on every rank or on none");
  SC_FAILS_SAYING(transpose(sym[0], odd ? sym[0] : sym[1], halo), symcommInvalidUsage,
                  "the symmetric output is at heap offset", "on rank " + who,
                  "the same object on every rank");
  const int64_t other[3] = {1, 0, 1};
  SC_FAILS_SAYING(transpose(sym[0], sym[1], odd ? other : halo), symcommInvalidUsage,
                  "rank " + who + " passes other arguments");
  if (odd)
    SC_FAILS_SAYING(transpose(nullptr, sym[1], halo), symcommInvalidArgument, "input is NULL");
  else
    SC_FAILS_SAYING(transpose(sym[0], sym[1], halo), symcommInvalidUsage,
                    "rank " + who + " refused its arguments");
  SC_FAILS_SAYING(symcommDecompHalo(d, 1, 0, odd ? local : sym[0], ws, symcommR64, halo, nullptr,
                                    periodic, stream),
                  symcommInvalidUsage, "the buffer is symmetric on rank 0 and not on rank " + who);
  // Calls that keep the contract pass, symmetric and local alike, and move the data.
  const std::vector<double> start = fill_pencil(x, c.gdims);
  for (void* in : {sym[0], local}) {
    SCOPED_TRACE(in == local ? "local" : "symmetric");
    store_values(in, start, symcommR64);
    store_values(sym[1], std::vector<double>(bytes / 8, -1.0), symcommR64);
    SC_OK(transpose(in, sym[1], halo));
    SC_OK(symcommDecompHalo(d, 1, 0, sym[1], ws, symcommR64, halo, nullptr, periodic, stream));
    mp::sync(stream);
    const std::vector<double> got = load_values(sym[1], static_cast<size_t>(y.size), symcommR64);
    std::vector<double> want = fill_pencil(y, c.gdims);
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) bad += want[i] >= 0 && got[i] != want[i];
    EXPECT_EQ(bad, 0u);
  }
  SC_OK(symcommHostBarrier(mp::world()));
  mp::free_stream(stream);
  mp::local_free(local);
  free_buffer(Buffers::Symmetric, sym[1]);
  free_buffer(Buffers::Symmetric, sym[0]);
  free_buffer(Buffers::Symmetric, ws);
  SC_OK(symcommDecompDestroy(d));
}

}  // namespace
