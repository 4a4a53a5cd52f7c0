// symcommCommSplit: groups by color, ordered by key then parent rank; a rank without a color
// gets none; each new communicator works on its own (its heap, its collectives, one-sided
// calls between its ranks) and is finalized on its own; bad arguments.
#include <algorithm>
#include <vector>

#include "mp.h"

namespace {

// Every rank of `comm` reports its parent rank: the group's members in its order.
std::vector<int> members(symcommComm_t comm) {
  int size = 0;
  EXPECT_EQ(symcommCommSize(comm, &size), symcommSuccess);
  std::vector<int> out(static_cast<size_t>(size));
  const int mine = mp::rank();
  EXPECT_EQ(symcommHostAllgather(comm, &mine, out.data(), sizeof mine), symcommSuccess);
  return out;
}

TEST(Split, GroupsByColorOrderedByKey) {
  const int n = mp::nranks(), me = mp::rank();
  // Two colors (even and odd parent ranks), keys that reverse the order; the last rank of
  // more than two sits out.
  const bool out = n > 2 && me == n - 1;
  const int color = out ? SYMCOMM_COMM_SPLIT_NOCOLOR : me % 2;
  symcommComm_t sub = reinterpret_cast<symcommComm_t>(1);
  SC_OK(symcommCommSplit(mp::world(), color, -me, &sub));
  if (out) {
    EXPECT_EQ(sub, nullptr);
  } else {
    ASSERT_NE(sub, nullptr);
    std::vector<int> expect;
    for (int r = n - 1; r >= 0; --r)
      if (r % 2 == me % 2 && !(n > 2 && r == n - 1)) expect.push_back(r);
    EXPECT_EQ(members(sub), expect);
    int rank = -1;
    SC_OK(symcommCommRank(sub, &rank));
    EXPECT_EQ(expect[static_cast<size_t>(rank)], me);
    symcommMemorySpace_t space, world_space;
    SC_OK(symcommCommMemorySpace(sub, &space));
    SC_OK(symcommCommMemorySpace(mp::world(), &world_space));
    EXPECT_EQ(space, world_space);
    // Its own heap and one-sided calls: each rank puts its parent rank into the next one's
    // copy.
    const int size = static_cast<int>(expect.size());
    uint64_t* word = nullptr;
    SC_OK(symcommCalloc(sub, 1, sizeof(uint64_t), reinterpret_cast<void**>(&word)));
    uint64_t* src = static_cast<uint64_t*>(mp::local_alloc(sizeof(uint64_t)));
    mp::write_u64(src, static_cast<uint64_t>(me) + 100);
    symcommStream_t stream = mp::new_stream();
    SC_OK(symcommPutOnStream(sub, word, src, sizeof(uint64_t), (rank + 1) % size,
                             symcommEngineAuto, stream));
    SC_OK(symcommBarrierOnStream(sub, SYMCOMM_TEAM_WORLD, stream));
    mp::sync(stream);
    const int from = expect[static_cast<size_t>((rank + size - 1) % size)];
    EXPECT_EQ(mp::read_u64(word), static_cast<uint64_t>(from) + 100);
    SC_OK(symcommHostBarrier(sub));
    mp::free_stream(stream);
    mp::local_free(src);
    SC_OK(symcommFree(sub, word));
    EXPECT_EQ(symcommFinalize(sub), symcommSuccess) << symcommGetLastError();
  }
  SC_OK(symcommHostBarrier(mp::world()));  // the parent is untouched
}

TEST(Split, EveryRankAloneAndBadArguments) {
  symcommComm_t sub = nullptr;
  SC_OK(symcommCommSplit(mp::world(), mp::rank(), 0, &sub));  // a communicator of one
  ASSERT_NE(sub, nullptr);
  int size = 0;
  SC_OK(symcommCommSize(sub, &size));
  EXPECT_EQ(size, 1);
  EXPECT_EQ(symcommFinalize(sub), symcommSuccess) << symcommGetLastError();
  EXPECT_EQ(symcommCommSplit(mp::world(), 0, 0, nullptr), symcommInvalidArgument);
  EXPECT_EQ(symcommCommSplit(mp::world(), -5, 0, &sub), symcommInvalidArgument);
  EXPECT_EQ(symcommCommSplit(nullptr, 0, 0, &sub), symcommInvalidArgument);
  SC_OK(symcommHostBarrier(mp::world()));
}

}  // namespace
