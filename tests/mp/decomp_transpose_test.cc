// Transposes on every registered backend (the DecompBackends suite of decomp_fixture.h runs
// once per name that symcommDecompBackendName lists, and skips a backend that cannot run in
// the memory space under test; instantiated here): round trips over grids, layouts, element
// types and buffer kinds, input and output of different layouts, an input written by an
// early-triggering kernel, and a transpose captured in a CUDA graph and replayed.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "decomp_fixture.h"

namespace decomp_test {

struct Layout {
  int axis_contiguous;
  int64_t halo[3], padding[3];
  bool in_place;
};

// X -> Y -> Z -> Y -> X on a pr x pc grid with elements of `type`; after each step every
// point of the new pencil holds its global index, and halo and padding points still hold -1.
void round_trip(const std::string& backend, int pr, int pc, const int64_t* gdims, const Layout& l,
                symcommRankOrder_t order, Buffers kind = Buffers::Local,
                symcommDecompType_t type = symcommR64) {
  symcommDecompConfig_t c = grid_config(gdims, pr, pc);
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
  symcommDecomp_t d = make_decomp(grid_config(gdims, pr, pc), backend);
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

// One symmetric buffer holds both pencils, the output `shift` elements after the input. With
// uneven splits the pencils differ in size between members, so the two overlap on some
// members and not on others. A member that sees no overlap here must still not write into a
// member whose output overlaps the input it is still reading (a direct path that does gives
// wrong values on every rank).
TEST_P(DecompBackends, InPlaceOnSomeMembersOnly) {
  SKIP_UNLESS_BACKEND_RUNS(GetParam());
  const int n = mp::nranks();
  if (n < 2) GTEST_SKIP() << "needs members whose pencils differ in size";
  const int64_t gdims[3] = {n + 1, n + 1, 1};  // X pencils of n + 1 points and of 2 (n + 1)
  symcommDecomp_t d = make_decomp(grid_config(gdims, n, 1), GetParam());
  ASSERT_NE(d, nullptr);
  size_t ws_bytes = 0;
  SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &ws_bytes));
  void* ws = dirty_workspace(ws_bytes);
  symcommPencilInfo_t in, out;
  SC_OK(symcommDecompPencilInfo(d, 0, nullptr, nullptr, &in));
  SC_OK(symcommDecompPencilInfo(d, 1, nullptr, nullptr, &out));
  // The first shift at which the output overlaps the input on some member and not on another.
  int64_t shift = 0;
  for (int64_t s = 1; s <= 4 * (n + 1) && shift == 0; ++s)
    if (!mp::all_ok(s >= in.size) && !mp::all_ok(s < in.size)) shift = s;
  ASSERT_GT(shift, 0) << "every member's pencils overlap alike";
  const size_t total = static_cast<size_t>(shift + std::max(in.size, out.size) + 8);
  void* buf = alloc_buffer(Buffers::Symmetric, total * sizeof(double));
  store_values(buf, std::vector<double>(total, -7.0), symcommR64);
  store_values(buf, fill_pencil(in, gdims), symcommR64);
  symcommStream_t stream = mp::new_stream();
  double* output = static_cast<double*>(buf) + shift;
  SC_OK(symcommDecompTranspose(d, 0, 1, buf, output, ws, symcommR64, nullptr, nullptr, nullptr,
                               nullptr, stream));
  mp::sync(stream);
  const std::vector<double> got = load_values(output, static_cast<size_t>(out.size), symcommR64);
  const std::vector<double> want = fill_pencil(out, gdims);
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i];
  EXPECT_EQ(bad, 0u) << "output " << shift << " elements after the input, whose "
                     << in.size << " elements " << (shift < in.size ? "overlap" : "do not overlap")
                     << " it on this rank";
  mp::free_stream(stream);
  free_buffer(Buffers::Symmetric, buf);
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

}  // namespace decomp_test
