// The decomposition descriptor through the C API: collective creation with agreement,
// grid coordinates, pencil information, bad input; transposes and halo exchanges on every
// registered backend (the DecompBackends suite runs once per name that
// symcommDecompBackendName lists, and skips a backend that cannot run in the memory space
// under test).
#include <algorithm>
#include <chrono>
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
  SC_FAILS(symcommDecompPencilInfo(d, 5, nullptr, nullptr, nullptr), symcommInvalidArgument);
  SC_OK(symcommDecompDestroy(d));
  SC_FAILS(symcommDecompDestroy(d), symcommInvalidArgument);
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

// X -> Y -> Z -> Y -> X on a pr x pc grid; after each step every point of the new pencil
// holds its global index, and halo and padding points still hold -1.
void round_trip(const std::string& backend, int pr, int pc, const int64_t* gdims, const Layout& l,
                symcommRankOrder_t order, Buffers kind = Buffers::Local) {
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
  SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &ws_bytes));
  void* ws = dirty_workspace(ws_bytes);
  symcommPencilInfo_t info[3];
  int64_t most = 0;
  for (int a = 0; a < 3; ++a) {
    SC_OK(symcommDecompPencilInfo(d, a, l.halo, l.padding, &info[a]));
    most = std::max(most, info[a].size);
  }
  void* buf[2] = {alloc_buffer(kind, static_cast<size_t>(most) * 8),
                  alloc_buffer(kind, static_cast<size_t>(most) * 8)};
  symcommStream_t stream = mp::new_stream();
  const int steps[4][2] = {{0, 1}, {1, 2}, {2, 1}, {1, 0}};
  int cur = 0;
  std::vector<double> start = fill_pencil(info[0], gdims);
  mp::copy_from_host(buf[0], start.data(), start.size() * 8);
  for (const auto& st : steps) {
    const int next = l.in_place ? cur : 1 - cur;
    if (!l.in_place) {
      std::vector<double> poison(static_cast<size_t>(most), -1.0);
      mp::copy_from_host(buf[next], poison.data(), poison.size() * 8);
    }
    SC_OK(symcommDecompTranspose(d, st[0], st[1], buf[cur], buf[next], ws, symcommR64, l.halo,
                                 l.padding, l.halo, l.padding, stream));
    mp::sync(stream);
    const symcommPencilInfo_t& p = info[st[1]];
    std::vector<double> got(static_cast<size_t>(p.size));
    mp::copy_to_host(got.data(), buf[next], got.size() * 8);
    std::vector<double> want = fill_pencil(p, gdims);
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i] && !(l.in_place && want[i] < 0);
    EXPECT_EQ(bad, 0u) << "transpose " << st[0] << " -> " << st[1] << " on " << pr << " x " << pc;
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
                 int contiguous, Buffers kind = Buffers::Local) {
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
    SC_OK(symcommDecompHaloWorkspaceSize(d, axis, dim, symcommR64, halo, padding, &b));
    ws_bytes = std::max(ws_bytes, b);
  }
  void* ws = dirty_workspace(ws_bytes);
  std::vector<double> start = fill_pencil(p, gdims);
  void* buf = alloc_buffer(kind, start.size() * 8);
  mp::copy_from_host(buf, start.data(), start.size() * 8);
  symcommStream_t stream = mp::new_stream();
  for (int dim = 0; dim < 3; ++dim)
    SC_OK(symcommDecompHalo(d, axis, dim, buf, ws, symcommR64, halo, padding, periodic, stream));
  mp::sync(stream);
  std::vector<double> got(start.size());
  mp::copy_to_host(got.data(), buf, got.size() * 8);
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
          ADD_FAILURE() << "halo point (" << x << ", " << y << ", " << z << ") holds "
                        << got[static_cast<size_t>(at)] << ", expected " << want;
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

TEST(Decomp, TransposeBadArguments) {
  symcommDecompConfig_t c = config_2d(8);
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  double a[4], b[4];
  SC_FAILS(symcommDecompTranspose(d, 0, 2, a, b, nullptr, symcommR64, nullptr, nullptr, nullptr,
                                  nullptr, nullptr), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "X<->Y or Y<->Z"), nullptr);
  SC_FAILS(symcommDecompTranspose(d, 0, 1, a, b, a, symcommR64, nullptr, nullptr, nullptr,
                                  nullptr, nullptr), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "workspace"), nullptr);
  size_t bytes = 0;
  SC_FAILS(symcommDecompWorkspaceSize(d, static_cast<symcommDecompType_t>(9), &bytes),
           symcommInvalidArgument);
  const int64_t huge[3] = {0, 0, 100};
  const int periodic[3] = {1, 1, 1};
  SC_FAILS(symcommDecompHaloWorkspaceSize(d, 0, 2, symcommR64, huge, nullptr, &bytes),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "larger than"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommDecompHalo(d, 0, 3, a, a, symcommR64, nullptr, nullptr, periodic, nullptr),
           symcommInvalidArgument);
  SC_OK(symcommDecompDestroy(d));
}

}  // namespace
