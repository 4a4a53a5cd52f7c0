// The "nccl" and "nccl_pipelined" decomposition backends (cuda space): transposes, small and
// with blocks larger than NCCL buffers, and halo exchanges give the same bytes as copy's.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nccl_fixture.h"
#include "symcomm/decomp.h"

namespace nccl_test {

// ---- Cuda space: the decomposition backend ---------------------------------------------

class NcclDecompGpu : public NcclGpu {
 protected:
  // Transposes X -> Y -> Z -> Y -> X of `gdims` on every grid, each followed where `halos` by
  // halo exchanges of the new pencil along every axis, with the copy, the nccl and the
  // nccl_pipelined backends on the same input: every output byte is the same.
  void compare_backends(const int64_t* gdims, bool halos) {
    const int n = mp::nranks();
    std::vector<std::pair<int, int>> grids = {{1, n}, {n, 1}};
    if (n == 4) grids.push_back({2, 2});
    if (n == 8) grids.insert(grids.end(), {{2, 4}, {4, 2}});
    const int64_t none[3] = {0, 0, 0};
    const int64_t some_halo[3] = {1, 1, 1}, some_padding[3] = {0, 1, 0};
    const int64_t* halo = halos ? some_halo : none;
    const int64_t* padding = halos ? some_padding : none;
    const int periodic[3] = {1, 0, 1};
    for (auto [pr, pc] : grids) {
      SCOPED_TRACE("grid " + std::to_string(pr) + "x" + std::to_string(pc));
      std::vector<std::vector<uint8_t>> outputs[3];
      const char* backends[3] = {"copy", "nccl", "nccl_pipelined"};
      for (int k = 0; k < 3; ++k) {
        symcommDecomp_t d = make_decomp(comm_, pr, pc, gdims, backends[k]);
        ASSERT_NE(d, nullptr);
        symcommPencilInfo_t info[3];
        int64_t most = 0;
        for (int a = 0; a < 3; ++a) {
          SC_OK(symcommDecompPencilInfo(d, a, halo, padding, &info[a]));
          most = std::max(most, info[a].size);
        }
        size_t ws_bytes = 0, halo_ws = 0;
        SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &ws_bytes));
        for (int a = 0; a < 3 && halos; ++a)
          for (int dim = 0; dim < 3; ++dim) {
            size_t b = 0;
            SC_OK(symcommDecompHaloWorkspaceSize(d, a, dim, symcommR64, halo, padding, &b));
            halo_ws = std::max(halo_ws, b);
          }
        void* ws = nullptr;
        SC_OK(symcommMalloc(comm_, std::max(ws_bytes, halo_ws), &ws));
        const size_t bytes = static_cast<size_t>(most) * 8;
        void* buf[2] = {mp::local_alloc(bytes), mp::local_alloc(bytes)};
        put(buf[0], small_integers(kTypes[9], static_cast<size_t>(most),
                                   seed_ + static_cast<uint64_t>(mp::rank())));
        put(buf[1], std::vector<uint8_t>(bytes, 0xAB));
        const int steps[4][2] = {{0, 1}, {1, 2}, {2, 1}, {1, 0}};
        int cur = 0;
        for (const auto& st : steps) {
          SC_OK(symcommDecompTranspose(d, st[0], st[1], buf[cur], buf[1 - cur], ws, symcommR64,
                                       halo, padding, halo, padding, stream_));
          cur = 1 - cur;
          outputs[k].push_back(fetch(buf[cur], static_cast<size_t>(info[st[1]].size) * 8));
          for (int dim = 0; dim < 3 && halos; ++dim) {
            SC_OK(symcommDecompHalo(d, st[1], dim, buf[cur], ws, symcommR64, halo, padding,
                                    periodic, stream_));
            outputs[k].push_back(fetch(buf[cur], static_cast<size_t>(info[st[1]].size) * 8));
          }
        }
        SC_OK(symcommHostBarrier(comm_));
        mp::local_free(buf[0]);
        mp::local_free(buf[1]);
        SC_OK(symcommFree(comm_, ws));
        SC_OK(symcommDecompDestroy(d));
      }
      const size_t per_step = halos ? 4 : 1;
      for (int k = 1; k < 3; ++k) {
        ASSERT_EQ(outputs[0].size(), outputs[k].size()) << backends[k];
        for (size_t i = 0; i < outputs[0].size(); ++i)
          EXPECT_TRUE(outputs[0][i] == outputs[k][i])
              << backends[k] << " step " << i / per_step << " part " << i % per_step;
      }
    }
  }
};

// Small uneven grids, halos and padding, halo exchanges after every transpose.
TEST_F(NcclDecompGpu, DecompBackendsMatchCopy) {
  const int64_t gdims[3] = {9, 7, 6};
  compare_backends(gdims, true);
}

// Blocks of 4-16 MiB, beyond what NCCL buffers (a send completes only once its receive is
// posted): the pipelined backend's steps must pair every send with a receive of the same
// step on its member, or they deadlock here.
TEST_F(NcclDecompGpu, DecompBackendsMatchCopyOnLargeBlocks) {
  const int64_t gdims[3] = {256, 256, 128};
  compare_backends(gdims, false);
}

// ---- Cuda space: ranks that cannot address each other ---------------------------------

}  // namespace nccl_test
