// Put-with-signal's promise under stress: the target reads the whole payload the moment it
// sees the signal. 10^4 rounds around a ring, sizes random with every edge included (0, 1,
// the net transport's eager limit and its chunk size, the heap's chunk size, each +-1),
// fresh data each round, the target's slot poisoned before each round.
#include <algorithm>
#include <random>
#include <vector>

#include "rma_fixture.h"

namespace rma_test {

TEST_F(Rma, PutSignalDataIsThereWhenTheSignalIs) {
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  std::mt19937_64 rng(seed);
  const int rounds = mp::space() == symcommSpaceHost ? 10000 : 3000;
  const size_t kMax = (2 << 20) + 1;  // the fixture's heap chunk (2 MiB) and one byte more
  // Small edges (the net transport's eager limit among them) half the time; the large ones
  // (its chunk size, the heap's chunk) one round in 32, to keep 10^4 rounds short.
  std::vector<size_t> edges = {0, 1, 2, 7, 8, 9, 8191, 8192, 8193}, large;
  for (size_t e : {size_t{1} << 20, size_t{2} << 20})
    for (size_t d : {e - 1, e, e + 1}) large.push_back(d);
  char* slot;
  uint64_t* words;  // [0]: data signal (set by my left), [1]: ack (set by my right)
  SC_OK(symcommMalloc(comm_, kMax, reinterpret_cast<void**>(&slot)));
  SC_OK(symcommMalloc(comm_, 16, reinterpret_cast<void**>(&words)));
  mp::write_u64(&words[0], 0);
  mp::write_u64(&words[1], 0);
  char* src = static_cast<char*>(mp::local_alloc(kMax));
  SC_OK(symcommHostBarrier(comm_));
  size_t bad = 0, big = 0;
  for (int k = 1; k <= rounds && bad == 0; ++k) {
    // Every rank draws the same size: what my left sends me is what I send my right.
    size_t bytes = rng() % 2 ? edges[rng() % edges.size()] : rng() % 4097;
    if (rng() % 32 == 0) bytes = rng() % 2 ? large[rng() % large.size()] : rng() % kMax;
    if (bytes > (64 << 10)) ++big;
    // My right neighbour has read round k - 1 (and poisoned its slot for this one).
    if (k > 1)
      SC_OK(symcommSignalWaitOnStream(comm_, &words[1], symcommCmpGe,
                                      static_cast<uint64_t>(k - 1), stream_));
    mp::sync(stream_);
    mp::fill(src, bytes, mp::rank(), static_cast<uint64_t>(k));
    SC_OK(symcommPutSignalOnStream(comm_, slot, src, bytes, &words[0], static_cast<uint64_t>(k),
                                   symcommSignalSet, right(), symcommEngineAuto, stream_));
    SC_OK(symcommSignalWaitOnStream(comm_, &words[0], symcommCmpGe, static_cast<uint64_t>(k),
                                    stream_));
    mp::sync(stream_);
    const size_t wrong = mp::count_mismatches(slot, bytes, left(), static_cast<uint64_t>(k));
    EXPECT_EQ(wrong, 0u) << "round " << k << ", " << bytes << " bytes";
    bad += wrong;
    mp::fill(slot, std::min(bytes + 64, kMax), mp::rank(), 0);  // poison for the next round
    SC_OK(symcommPutSignalOnStream(comm_, nullptr, nullptr, 0, &words[1], static_cast<uint64_t>(k),
                                   symcommSignalSet, left(), symcommEngineAuto, stream_));
  }
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  EXPECT_GT(big, 0u);
  mp::local_free(src);
  SC_OK(symcommFree(comm_, words));
  SC_OK(symcommFree(comm_, slot));
}

}  // namespace rma_test
