// X -> Y -> Z -> Y -> X on a decomposition (R64, local buffers, no halo), checked after each
// step: every point of the new pencil holds its global index. Shared by the autotuner's tests
// (the grid and backend it chose) and the NCCL tests (a decomposition without peer access).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "mp.h"
#include "symcomm/decomp.h"

namespace mp {

// The global index of a point of a `g` grid: what the checks fill pencils with.
inline double global_index(const int64_t* g, int64_t x, int64_t y, int64_t z) {
  return static_cast<double>((z * g[1] + y) * g[0] + x);
}

// Collective over `comm` (the communicator of `d`).
inline void expect_transposes_work(symcommComm_t comm, symcommDecomp_t d, const int64_t* g) {
  symcommPencilInfo_t p[3];
  int64_t most = 0;
  for (int a = 0; a < 3; ++a) {
    SC_OK(symcommDecompPencilInfo(d, a, nullptr, nullptr, &p[a]));
    most = std::max(most, p[a].size);
  }
  size_t ws_bytes = 0;
  SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &ws_bytes));
  int nranks = 0;
  SC_OK(symcommCommSize(comm, &nranks));
  std::vector<size_t> sizes(static_cast<size_t>(nranks));
  SC_OK(symcommHostAllgather(comm, &ws_bytes, sizes.data(), sizeof ws_bytes));
  void* ws = nullptr;
  SC_OK(symcommMalloc(comm, std::max<size_t>(8, *std::max_element(sizes.begin(), sizes.end())),
                      &ws));
  const size_t bytes = static_cast<size_t>(most) * 8;
  void* buf[2] = {local_alloc(bytes), local_alloc(bytes)};
  std::vector<double> host(static_cast<size_t>(most), -1.0);
  for (int64_t z = p[0].lo[2]; z < p[0].hi[2]; ++z)
    for (int64_t y = p[0].lo[1]; y < p[0].hi[1]; ++y)
      for (int64_t x = p[0].lo[0]; x < p[0].hi[0]; ++x)
        host[static_cast<size_t>(symcommPencilIndex(&p[0], x, y, z))] = global_index(g, x, y, z);
  copy_from_host(buf[0], host.data(), bytes);
  symcommStream_t stream = new_stream();
  const int steps[4][2] = {{0, 1}, {1, 2}, {2, 1}, {1, 0}};
  for (int s = 0; s < 4; ++s) {
    const symcommPencilInfo_t& out = p[steps[s][1]];
    const std::vector<double> poison(static_cast<size_t>(most), -1.0);
    copy_from_host(buf[1 - s % 2], poison.data(), bytes);
    SC_OK(symcommDecompTranspose(d, steps[s][0], steps[s][1], buf[s % 2], buf[1 - s % 2], ws,
                                 symcommR64, nullptr, nullptr, nullptr, nullptr, stream));
    sync(stream);
    copy_to_host(host.data(), buf[1 - s % 2], bytes);
    int64_t bad = 0;
    for (int64_t z = out.lo[2]; z < out.hi[2]; ++z)
      for (int64_t y = out.lo[1]; y < out.hi[1]; ++y)
        for (int64_t x = out.lo[0]; x < out.hi[0]; ++x)
          bad += host[static_cast<size_t>(symcommPencilIndex(&out, x, y, z))] !=
                 global_index(g, x, y, z);
    EXPECT_EQ(bad, 0) << "points wrong after transpose " << steps[s][0] << " -> " << steps[s][1];
  }
  SC_OK(symcommHostBarrier(comm));
  free_stream(stream);
  local_free(buf[1]);
  local_free(buf[0]);
  SC_OK(symcommFree(comm, ws));
}

}  // namespace mp
