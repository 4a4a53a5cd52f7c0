// Halo exchanges on every registered backend (DecompBackends of decomp_fixture.h, instantiated
// in decomp_transpose_test.cc): every grid and pencil, periodic, open and mixed boundaries,
// halo widths with padding, every element type, local and symmetric buffers.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "decomp_fixture.h"

namespace decomp_test {

// Halo exchanges along x, then y, then z fill every halo point (corners included) with the
// value of the point it mirrors: wrapped around where periodic, left at -1 past a
// non-periodic boundary. The padding (-1 from fill_pencil) is neither read nor written: every
// element outside the owned points and their halo still holds -1.
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
  std::vector<bool> in_box(got.size(), false);  // owned or halo: compared below
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
        in_box[static_cast<size_t>(at)] = true;
        if (got[static_cast<size_t>(at)] != want && bad++ < 5)
          ADD_FAILURE() << type_name(type) << " halo point (" << x << ", " << y << ", " << z
                        << ") holds " << got[static_cast<size_t>(at)] << ", expected " << want;
      }
  EXPECT_EQ(bad, 0u);
  // The padding: the rest of the buffer.
  size_t padding_points = 0, padding_bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (in_box[i]) continue;
    ++padding_points;
    if (got[i] != -1.0 && padding_bad++ < 5)
      ADD_FAILURE() << type_name(type) << " padding element " << i << " holds " << got[i]
                    << ", expected -1 (never written)";
  }
  EXPECT_EQ(padding_bad, 0u);
  const int64_t box = (p.hi[0] - p.lo[0] + 2 * halo[0]) * (p.hi[1] - p.lo[1] + 2 * halo[1]) *
                      (p.hi[2] - p.lo[2] + 2 * halo[2]);
  EXPECT_EQ(padding_points, got.size() - static_cast<size_t>(box))
      << "the owned points and halo take fewer elements than they are (two at one index?)";
  mp::free_stream(stream);
  free_buffer(kind, buf);
  SC_OK(symcommFree(mp::world(), ws));
  SC_OK(symcommDecompDestroy(d));
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

}  // namespace decomp_test
