// Host-side atomics (symcommAtomicFetchAddOnStream, symcommAtomicCompareSwapOnStream): every
// rank adds to every rank's word many times, and every value before an add is seen exactly
// once; of the ranks that swap a word from 0, exactly one wins; the arguments they refuse. In
// the cuda space they run on a stream, their results written into GPU memory when it gets
// there; members on another node are refused there (as the device API's atomics are).
#include <algorithm>
#include <cstring>
#include <vector>

#include "rma_fixture.h"

namespace rma_test {

TEST_F(Rma, HostAtomicsAreAtomicAcrossRanks) {
  const int n = mp::nranks(), me = mp::rank();
  const bool cuda = mp::space() == symcommSpaceCuda;
  uint64_t* words = nullptr;
  SC_OK(symcommCalloc(comm_, static_cast<size_t>(n) + 1, sizeof(uint64_t),
                      reinterpret_cast<void**>(&words)));
  // Fetch-add: each rank adds 1 to word t of every rank t, kAdds times; the values seen on
  // each word are 0 .. n kAdds - 1, each once. Results land in `res` (GPU memory in the cuda
  // space, poisoned first): [t * kAdds + i], and the compare-swap's at the end.
  constexpr int kAdds = 50;
  const size_t count = static_cast<size_t>(n) * kAdds;
  auto* res = static_cast<uint64_t*>(mp::local_alloc((count + 1) * sizeof(uint64_t)));
  const std::vector<uint64_t> poison(count + 1, ~uint64_t{0});
  mp::copy_from_host(res, poison.data(), poison.size() * sizeof(uint64_t));
  if (cuda && mp::nodes() > 1) {
    // A member on another node: refused, nothing written.
    int other = 0;  // a member not mapped here
    while (other < n && symcommPtr(comm_, words, other) != nullptr) ++other;
    ASSERT_LT(other, n);
    EXPECT_EQ(symcommAtomicFetchAddOnStream(comm_, words, 1, other, res, stream_),
              symcommNotSupported);
    EXPECT_NE(std::strstr(symcommGetLastError(), "this node"), nullptr);
    SC_OK(symcommHostBarrier(comm_));
    SC_OK(symcommFree(comm_, words));
    mp::local_free(res);
    GTEST_SKIP() << "host-side atomics in the cuda space reach members on this node only";
  }
  for (int i = 0; i < kAdds; ++i)
    for (int t = 0; t < n; ++t)
      SC_OK(symcommAtomicFetchAddOnStream(comm_, words + t, 1, t,
                                          res + static_cast<size_t>(t) * kAdds + i, stream_));
  mp::sync(stream_);
  std::vector<uint64_t> seen(count);
  mp::copy_to_host(seen.data(), res, count * sizeof(uint64_t));
  std::vector<uint64_t> all(seen.size() * static_cast<size_t>(n));
  SC_OK(symcommHostAllgather(comm_, seen.data(), all.data(), seen.size() * sizeof(uint64_t)));
  for (int t = 0; t < n; ++t) {
    std::vector<uint64_t> on_t;
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < kAdds; ++i)
        on_t.push_back(all[static_cast<size_t>(r) * seen.size() +
                           static_cast<size_t>(t) * kAdds + static_cast<size_t>(i)]);
    std::sort(on_t.begin(), on_t.end());
    for (size_t v = 0; v < on_t.size(); ++v) ASSERT_EQ(on_t[v], v) << "word of rank " << t;
  }
  SC_OK(symcommHostBarrier(comm_));
  EXPECT_EQ(mp::read_u64(words + me), static_cast<uint64_t>(n * kAdds));
  // Compare-swap: every rank swaps rank 0's last word from 0 to its rank + 1; one wins, and
  // the others see the winner's value.
  SC_OK(symcommAtomicCompareSwapOnStream(comm_, words + n, 0, static_cast<uint64_t>(me) + 1, 0,
                                         res + count, stream_));
  mp::sync(stream_);
  const uint64_t old = mp::read_u64(res + count);
  const int won = old == 0;
  std::vector<int> wins(static_cast<size_t>(n));
  SC_OK(symcommHostAllgather(comm_, &won, wins.data(), sizeof won));
  EXPECT_EQ(std::count(wins.begin(), wins.end(), 1), 1);
  const int winner = static_cast<int>(std::find(wins.begin(), wins.end(), 1) - wins.begin());
  if (!won) {
    EXPECT_EQ(old, static_cast<uint64_t>(winner) + 1);
  }
  // Refused: no result, a rank out of range, a misaligned word, one outside the heap; in the
  // host space a stream, in the cuda space a result in pageable host memory.
  uint64_t local = 0, host_result = 0;
  EXPECT_EQ(symcommAtomicFetchAddOnStream(comm_, words, 1, 0, nullptr, stream_),
            symcommInvalidArgument);
  EXPECT_EQ(symcommAtomicFetchAddOnStream(comm_, words, 1, n, res, stream_),
            symcommInvalidArgument);
  EXPECT_EQ(symcommAtomicCompareSwapOnStream(comm_, words, 0, 1, -1, res, stream_),
            symcommInvalidArgument);
  EXPECT_EQ(symcommAtomicFetchAddOnStream(
                comm_, reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(words) + 4), 1, 0,
                res, stream_),
            symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "aligned"), nullptr);
  EXPECT_EQ(symcommAtomicFetchAddOnStream(comm_, &local, 1, 0, res, stream_),
            symcommInvalidArgument);
  if (cuda) {
    EXPECT_EQ(symcommAtomicFetchAddOnStream(comm_, words, 1, 0, &host_result, stream_),
              symcommInvalidArgument);
    EXPECT_NE(std::strstr(symcommGetLastError(), "result"), nullptr);
  } else {
    EXPECT_EQ(symcommAtomicFetchAddOnStream(comm_, words, 1, 0, &host_result,
                                            reinterpret_cast<symcommStream_t>(1)),
              symcommInvalidArgument);
  }
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  SC_OK(symcommFree(comm_, words));
  mp::local_free(res);
}

}  // namespace rma_test
