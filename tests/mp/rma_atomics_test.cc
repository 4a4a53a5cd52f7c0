// Host-side atomics (symcommAtomicFetchAddOnStream, symcommAtomicCompareSwapOnStream): every
// rank adds to every rank's word many times, and every value before an add is seen exactly
// once; of the ranks that swap a word from 0, exactly one wins; the arguments they refuse;
// and their refusal in the cuda space, which has no host-side atomics yet.
#include <algorithm>
#include <cstring>
#include <vector>

#include "rma_fixture.h"

namespace rma_test {

TEST_F(Rma, HostAtomicsAreAtomicAcrossRanks) {
  const int n = mp::nranks(), me = mp::rank();
  uint64_t* words = nullptr;
  SC_OK(symcommCalloc(comm_, static_cast<size_t>(n) + 1, sizeof(uint64_t),
                      reinterpret_cast<void**>(&words)));
  uint64_t old = 0;
  if (mp::space() == symcommSpaceCuda) {
    EXPECT_EQ(symcommAtomicFetchAddOnStream(comm_, words, 1, 0, &old, stream_),
              symcommNotSupported);
    EXPECT_NE(std::strstr(symcommGetLastError(), "atomic_fetch_add"), nullptr);
    EXPECT_EQ(symcommAtomicCompareSwapOnStream(comm_, words, 0, 1, 0, &old, stream_),
              symcommNotSupported);
    SC_OK(symcommHostBarrier(comm_));
    SC_OK(symcommFree(comm_, words));
    GTEST_SKIP() << "host-side atomics are the host space's so far";
  }
  // Fetch-add: each rank adds 1 to word t of every rank t, kAdds times; the values seen on
  // each word are 0 .. n kAdds - 1, each once.
  constexpr int kAdds = 50;
  std::vector<uint64_t> seen;  // [t * kAdds + i]
  for (int i = 0; i < kAdds; ++i)
    for (int t = 0; t < n; ++t) {
      SC_OK(symcommAtomicFetchAddOnStream(comm_, words + t, 1, t, &old, nullptr));
      seen.push_back(old);
    }
  std::vector<uint64_t> all(seen.size() * static_cast<size_t>(n));
  SC_OK(symcommHostAllgather(comm_, seen.data(), all.data(), seen.size() * sizeof(uint64_t)));
  for (int t = 0; t < n; ++t) {
    std::vector<uint64_t> on_t;
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < kAdds; ++i)
        on_t.push_back(all[static_cast<size_t>(r) * seen.size() +
                           static_cast<size_t>(i * n + t)]);
    std::sort(on_t.begin(), on_t.end());
    for (size_t v = 0; v < on_t.size(); ++v) ASSERT_EQ(on_t[v], v) << "word of rank " << t;
  }
  SC_OK(symcommHostBarrier(comm_));
  EXPECT_EQ(words[me], static_cast<uint64_t>(n * kAdds));
  // Compare-swap: every rank swaps rank 0's last word from 0 to its rank + 1; one wins, and
  // the others see the winner's value.
  SC_OK(symcommAtomicCompareSwapOnStream(comm_, words + n, 0, static_cast<uint64_t>(me) + 1, 0,
                                         &old, nullptr));
  const int won = old == 0;
  std::vector<int> wins(static_cast<size_t>(n));
  SC_OK(symcommHostAllgather(comm_, &won, wins.data(), sizeof won));
  EXPECT_EQ(std::count(wins.begin(), wins.end(), 1), 1);
  const int winner = static_cast<int>(std::find(wins.begin(), wins.end(), 1) - wins.begin());
  if (!won) {
    EXPECT_EQ(old, static_cast<uint64_t>(winner) + 1);
  }
  // Refused: no result, a rank out of range, a misaligned word, one outside the heap, a
  // stream in the host space.
  uint64_t local = 0;
  EXPECT_EQ(symcommAtomicFetchAddOnStream(comm_, words, 1, 0, nullptr, nullptr),
            symcommInvalidArgument);
  EXPECT_EQ(symcommAtomicFetchAddOnStream(comm_, words, 1, n, &old, nullptr),
            symcommInvalidArgument);
  EXPECT_EQ(symcommAtomicCompareSwapOnStream(comm_, words, 0, 1, -1, &old, nullptr),
            symcommInvalidArgument);
  EXPECT_EQ(symcommAtomicFetchAddOnStream(
                comm_, reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(words) + 4), 1, 0,
                &old, nullptr),
            symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "aligned"), nullptr);
  EXPECT_EQ(symcommAtomicFetchAddOnStream(comm_, &local, 1, 0, &old, nullptr),
            symcommInvalidArgument);
  EXPECT_EQ(symcommAtomicFetchAddOnStream(comm_, words, 1, 0, &old,
                                          reinterpret_cast<symcommStream_t>(1)),
            symcommInvalidArgument);
  SC_OK(symcommHostBarrier(comm_));
  SC_OK(symcommFree(comm_, words));
}

}  // namespace rma_test
