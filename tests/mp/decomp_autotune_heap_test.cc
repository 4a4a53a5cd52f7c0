// The autotuner in a heap too small for some candidates: they cannot run, the others can.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "decomp_autotune_fixture.h"

namespace decomp_autotune_test {

// The largest symmetric allocation `comm` can make now (collective), to 4 KiB.
size_t largest_allocation(symcommComm_t comm, size_t most) {
  size_t lo = 0, hi = most;
  while (hi - lo > 4096) {
    const size_t mid = (lo + hi) / 2 / 4096 * 4096;
    void* p = nullptr;
    if (symcommMalloc(comm, mid, &p) == symcommSuccess) {
      EXPECT_EQ(symcommFree(comm, p), symcommSuccess) << symcommGetLastError();
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// A candidate whose buffers do not fit in the heap cannot run; the others still can, and no
// candidate keeps its buffers. Two backends whose transposes need different room (two
// pencils and the workspace: sm three pencils, fused four) are the candidates, and the heap
// is filled to leave room between the two needs. Before, the first failure to fit ended the
// autotuning, and the buffers allocated before it stayed.
TEST(DecompAutotune, ACandidateThatDoesNotFitInTheHeapCannotRun) {
  const int n = mp::nranks();
  if (runnable().size() < 2)  // decided before making a communicator
    GTEST_SKIP() << "needs two backends that run here (" << runnable().size() << " on "
                 << mp::nodes() << " nodes)";
  mp::ScopedEnv heap_max("SYMCOMM_HEAP_MAX", "32M");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  mp::FinalizeAtEnd end(comm);  // also where the test skips below
  symcommDecompConfig_t c = tiny_config(32, 32, 32);
  c.pdims[0] = 1;
  c.pdims[1] = n;
  const size_t pencil = 32 * 32 * 32 * 8 / static_cast<size_t>(n);  // C32
  // Each backend that runs here with what its transposes need.
  std::vector<std::pair<std::string, size_t>> needs;
  for (int i = 0; i < symcommDecompBackendCount(); ++i) {
    std::snprintf(c.backend, sizeof c.backend, "%s", symcommDecompBackendName(i));
    symcommDecomp_t d = nullptr;
    const symcommResult_t rc = symcommDecompCreate(comm, &c, &d);
    if (rc != symcommSuccess) {
      EXPECT_EQ(rc, symcommNotSupported) << symcommGetLastError();
      continue;
    }
    size_t workspace = 0;
    SC_OK(symcommDecompWorkspaceSize(d, symcommC32, &workspace));
    SC_OK(symcommDecompDestroy(d));
    needs.push_back({symcommDecompBackendName(i), 2 * pencil + workspace});
  }
  std::stable_sort(needs.begin(), needs.end(),
                   [](const auto& a, const auto& b) { return a.second < b.second; });
  // The one that needs least, and one that needs a pencil more: room for 1/2 pencil more
  // than the first needs.
  const auto larger = std::find_if(needs.begin(), needs.end(), [&](const auto& b) {
    return b.second >= needs.front().second + pencil;
  });
  if (larger == needs.end()) GTEST_SKIP() << "needs two backends a pencil apart in workspace";
  const auto& [fits, fits_need] = needs.front();
  const auto& [too_large, too_large_need] = *larger;
  std::snprintf(c.backend, sizeof c.backend, "auto");
  std::snprintf(c.autotune_backends, sizeof c.autotune_backends, "%s,%s", fits.c_str(),
                too_large.c_str());
  const size_t free_at_first = largest_allocation(comm, size_t{32} << 20);
  ASSERT_GT(free_at_first, too_large_need);
  void* filler = nullptr;
  SC_OK(symcommMalloc(comm, free_at_first - (fits_need + pencil / 2), &filler));
  const size_t before = largest_allocation(comm, 2 * too_large_need);
  ASSERT_GE(before, fits_need);
  ASSERT_LT(before, too_large_need);
  symcommDecomp_t d = nullptr;
  SC_OK(symcommDecompCreate(comm, &c, &d));
  const char* backend = nullptr;
  SC_OK(symcommDecompGetBackend(d, &backend));
  EXPECT_EQ(backend, fits);
  SC_OK(symcommDecompDestroy(d));
  EXPECT_EQ(largest_allocation(comm, 2 * too_large_need), before) << "a candidate kept heap memory";
  SC_OK(symcommFree(comm, filler));
}

}  // namespace decomp_autotune_test
