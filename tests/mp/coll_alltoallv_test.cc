// All-to-all-v with counts on the host (random counts with zeros, a member that receives
// nothing, counts that do not match) and on the device (MoE-style routing: back to back, on
// a team); every algorithm (coll_test.cc instantiates the Coll fixture of coll_fixture.h).
#include "coll_fixture.h"

namespace coll_test {

TEST_P(Coll, AllToAllvRandomCounts) {
  if (lacks({Op::AllToAllv})) GTEST_SKIP() << algo_ << " does not do all-to-all-v";
  // Counts below each of kCounts (as the largest count to a member), every type.
  for (bool sym : {false, true})
    for (const Type& t : kTypes)
      for (size_t max_count : kCounts) all_to_all_v_case(t, max_count, sym);
}

// A member that receives nothing may pass recv = NULL while the others' receive buffers are
// symmetric: every member must still take the same path (copy then stages on all of them,
// through the same barriers, where it used to write in place on some and time out). Twice,
// so that a barrier too many or too few on one member shows.
TEST_P(Coll, AllToAllvIntoNullOnAMemberThatReceivesNothing) {
  if (refuses(Op::AllToAllv, true)) GTEST_SKIP() << algo_ << " does not do all-to-all-v";
  const Type& t = kTypes[6];  // float32
  const size_t nn = static_cast<size_t>(n_), last = nn - 1;
  VLayout v;
  v.counts.assign(nn, std::vector<size_t>(nn));
  for (size_t i = 0; i < nn; ++i)
    for (size_t j = 0; j < nn; ++j) v.counts[i][j] = j == last ? 0 : 10000 + 7 * i + j;
  const std::vector<size_t> sc = v.sends(me_), sd = v.sdispls(me_), rc = v.receives(me_), rd = v.rdispls(me_);
  const size_t se = VLayout::extent(sd, sc) + 1, re = nn * (10000 + 8 * nn) + 1;
  void* send = buffer(se * t.size, false);
  void* recv = buffer(re * t.size, true);  // every member allocates (collective); the last passes NULL
  const bool receives = static_cast<size_t>(me_) != last;
  for (uint64_t k = 0; k < 2; ++k) {
    SCOPED_TRACE("call " + std::to_string(k));
    put(send, make(t, seed_ + k, me_, 0, se));
    poison(recv, re * t.size);
    SC_OK(symcommHostBarrier(comm_));
    SC_OK(symcommAllToAllvOnStream(comm_, SYMCOMM_TEAM_WORLD, send, sc.data(), sd.data(),
                                   receives ? recv : nullptr, rc.data(), rd.data(), t.id, algo_,
                                   stream_));
    const std::vector<uint8_t> want =
        receives ? v.received(t, seed_ + k, me_, re) : std::vector<uint8_t>(re * t.size, 0xAB);
    EXPECT_EQ(differences(fetch(recv, re * t.size), want, t.size), "");
    SC_OK(symcommHostBarrier(comm_));
  }
  release(send, false);
  release(recv, true);
}
// A member that receives nothing may pass any recv: here the last one passes another
// symmetric object (poisoned on every rank) while the others' recv are symmetric. Every
// algorithm must leave that object alone on every rank and deliver the others' blocks (copy
// once went in place with it: the last member wrote its blocks into the peers' copies of
// that object, at its own recv's place).
TEST_P(Coll, AllToAllvIntoAnotherObjectOnAMemberThatReceivesNothing) {
  if (refuses(Op::AllToAllv, true)) GTEST_SKIP() << algo_ << " does not do all-to-all-v";
  const Type& t = kTypes[1];  // int32
  const size_t nn = static_cast<size_t>(n_), last = nn - 1;
  VLayout v;
  v.counts.assign(nn, std::vector<size_t>(nn));
  for (size_t i = 0; i < nn; ++i)
    for (size_t j = 0; j < nn; ++j) v.counts[i][j] = j == last ? 0 : 500 + 3 * i + j;
  const std::vector<size_t> sc = v.sends(me_), sd = v.sdispls(me_), rc = v.receives(me_),
                            rd = v.rdispls(me_);
  const size_t se = VLayout::extent(sd, sc) + 1, re = nn * (500 + 4 * nn) + 1;
  void* send = buffer(se * t.size, false);
  void* recv = buffer(re * t.size, true);
  void* other = buffer(re * t.size, true);
  const bool receives = static_cast<size_t>(me_) != last;
  put(send, make(t, seed_, me_, 0, se));
  poison(recv, re * t.size);
  poison(other, re * t.size);
  SC_OK(symcommHostBarrier(comm_));
  SC_OK(symcommAllToAllvOnStream(comm_, SYMCOMM_TEAM_WORLD, send, sc.data(), sd.data(),
                                 receives ? recv : other, rc.data(), rd.data(), t.id, algo_,
                                 stream_));
  if (receives) {
    EXPECT_EQ(differences(fetch(recv, re * t.size), v.received(t, seed_, me_, re), t.size), "");
  }
  EXPECT_EQ(differences(fetch(other, re * t.size), std::vector<uint8_t>(re * t.size, 0xAB),
                        t.size), "")
      << "the last member's recv (another object), here";
  SC_OK(symcommHostBarrier(comm_));
  release(other, true);
  release(recv, true);
  release(send, false);
}

// The block a member sends itself must be the one it expects from itself: every algorithm
// copies sendcounts[me] elements to rdispls[me], so a larger send count wrote past the
// receive block (a smaller one left part of it unwritten). Refused on every member before
// anything runs.
TEST_P(Coll, AllToAllvOwnBlockMustMatch) {
  const size_t nn = static_cast<size_t>(n_), me = static_cast<size_t>(me_);
  std::vector<size_t> scounts(nn, 4), rcounts(nn, 4), sd(nn), rd(nn);
  for (size_t j = 0; j < nn; ++j) sd[j] = rd[j] = 8 * j;
  scounts[me] = 8;  // more than the 4 this member expects from itself
  void* send = buffer(64 * nn, false);
  void* recv = buffer(64 * nn, false);
  SC_FAILS(symcommAllToAllvOnStream(comm_, SYMCOMM_TEAM_WORLD, send, scounts.data(), sd.data(),
                                    recv, rcounts.data(), rd.data(), symcommInt32, algo_, stream_),
           symcommInvalidArgument);
  const std::string want = "sendcounts[" + std::to_string(me_) + "] = 8 but recvcounts[" +
                           std::to_string(me_) + "] = 4";
  EXPECT_NE(std::string(symcommGetLastError()).find(want), std::string::npos)
      << symcommGetLastError();
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  release(send, false);
  release(recv, false);
}

// Counts that do not match between a sender and its receiver: "copy" and "hier" see the whole
// matrix (coll/alltoallv_table.h) and every member reports the same pair.
TEST_P(Coll, AllToAllvCountsMustMatch) {
  if (std::string(algo_) != "copy" && std::string(algo_) != "hier")
    GTEST_SKIP() << "only copy and hier check the counts of every pair";
  std::vector<size_t> scounts(static_cast<size_t>(n_), 4), rcounts(static_cast<size_t>(n_), 4),
      sd(static_cast<size_t>(n_)), rd(static_cast<size_t>(n_));
  for (int j = 0; j < n_; ++j) sd[static_cast<size_t>(j)] = rd[static_cast<size_t>(j)] = 8 * static_cast<size_t>(j);
  if (me_ == n_ - 1) rcounts[0] = 5;  // the last member expects 5 from member 0, which sends 4
  void* send = buffer(64 * static_cast<size_t>(n_), false);
  void* recv = buffer(64 * static_cast<size_t>(n_), false);
  // The algorithm's own check of the pairs, on a communicator without SYMCOMM_COLL_CHECK (on by
  // default in the host space), which would find them first (coll_check_test.cc).
  mp::ScopedEnv unchecked("SYMCOMM_COLL_CHECK", "0");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  SC_FAILS(symcommAllToAllvOnStream(comm, SYMCOMM_TEAM_WORLD, send, scounts.data(), sd.data(), recv,
                                    rcounts.data(), rd.data(), symcommInt32, algo_, stream_),
           symcommInvalidArgument);
  const std::string want = "member 0 sends 4 elements to member " + std::to_string(n_ - 1) + ", which expects 5";
  EXPECT_NE(std::string(symcommGetLastError()).find(want), std::string::npos) << symcommGetLastError();
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm));
  SC_OK(symcommFinalize(comm));
  release(send, false);
  release(recv, false);
}


// All-to-all-v with counts in device memory, every type, the counts below each of kCounts.
TEST_P(Coll, AllToAllvWithCountsOnTheDevice) {
  for (const Type& t : kTypes)
    for (size_t max_count : kCounts)
      if (!device_counts_case(t, max_count)) return;  // refused (checked): once is enough
}

// Counts on the device are trusted, but a block that does not fit in the capacity is dropped
// whole, also where the counts before it add up past 2^64: member 0 "sends" the last member
// SIZE_MAX - 1 elements (never moved: they do not fit), every other member 4. The sum
// wrapped around to a place inside recv, and the 4 elements were written at element
// SIZE_MAX - 1 of recv. Host space (copy): sm on GPUs moves every block, dropped or not,
// so a count this large would read past send there.
TEST_P(Coll, AllToAllvWithCountsOnTheDeviceWhoseSumWraps) {
  if (refuses(Op::AllToAllvDevice, false) || std::string(algo_) != "copy")
    GTEST_SKIP() << "copy's counts on the device, in the host space";
  const size_t nn = static_cast<size_t>(n_), me = static_cast<size_t>(me_), last = nn - 1;
  const size_t capacity = 16;
  std::vector<size_t> table(4 * nn, 0);  // sendcounts, sdispls, recvcounts, rdispls
  if (me == 0) table[last] = SIZE_MAX - 1;
  else table[last] = 4;
  size_t* counts = static_cast<size_t*>(buffer(table.size() * sizeof(size_t), false));
  put(counts, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(table.data()),
                                   reinterpret_cast<const uint8_t*>(table.data() + table.size())));
  void* send = buffer(4 * sizeof(int32_t), false);
  put(send, make(kTypes[1], seed_, me_, 0, 4));
  void* recv = buffer((capacity + 1) * sizeof(int32_t), false);
  poison(recv, (capacity + 1) * sizeof(int32_t));
  SC_OK(symcommHostBarrier(comm_));
  SC_OK(symcommAllToAllvDeviceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, counts, counts + nn, recv,
                                       capacity, counts + 2 * nn, counts + 3 * nn, symcommInt32,
                                       algo_, stream_));
  std::vector<uint8_t> raw = fetch(counts, table.size() * sizeof(size_t));
  const size_t* got_counts = reinterpret_cast<const size_t*>(raw.data()) + 2 * nn;
  if (me == last) {
    EXPECT_EQ(got_counts[0], SIZE_MAX - 1);
    for (size_t i = 1; i < nn; ++i) EXPECT_EQ(got_counts[i], 4u) << "count from " << i;
  }
  EXPECT_EQ(differences(fetch(recv, (capacity + 1) * sizeof(int32_t)),
                        std::vector<uint8_t>((capacity + 1) * sizeof(int32_t), 0xAB), 4),
            "")
      << "every block to the last member comes after one that does not fit";
  SC_OK(symcommHostBarrier(comm_));
  release(recv, false);
  release(send, false);
  release(counts, false);
}

// Six all-to-all-vs with counts on the device, each with counts, sizes and data of its own,
// and an all-to-all between each two, back to back on one stream without a host
// synchronisation: each call must take its counts, not a neighbour's (the table of counts
// in the sm area and its epoch), and the data of its own send buffer.
TEST_P(Coll, AllToAllvWithCountsOnTheDeviceBackToBack) {
  if (refuses(Op::AllToAllvDevice, false)) GTEST_SKIP() << algo_ << " refuses counts on the device";
  const Type& t = kTypes[1];  // int32
  const size_t nb = 3000 * t.size * static_cast<size_t>(n_);
  std::vector<DeviceCountsCall> calls;
  std::vector<void*> a2a_send, a2a_recv;
  for (uint64_t k = 0; k < 6; ++k) {
    calls.push_back(device_counts_setup(t, std::vector<size_t>{0, 9, 5000, 70000, 1, 300}[k], seed_ + 100 * k));
    a2a_send.push_back(buffer(nb, false));
    put(a2a_send.back(), make(t, seed_ + k, me_, 0, nb / t.size));
    a2a_recv.push_back(buffer(nb, true));
    poison(a2a_recv.back(), nb);
  }
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  for (size_t k = 0; k < 6; ++k) {
    SC_OK(device_counts_run(calls[k], t));
    SC_OK(symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, a2a_send[k], a2a_recv[k], 3000,
                                  t.id, algo_, stream_));
  }
  for (size_t k = 0; k < 6; ++k) {
    SCOPED_TRACE("call " + std::to_string(k));
    device_counts_check(calls[k], t);
    const std::vector<uint8_t> got = fetch(a2a_recv[k], nb);
    for (int i = 0; i < n_; ++i) {
      const std::vector<uint8_t> want = make(t, seed_ + k, i, 3000 * static_cast<size_t>(me_), 3000);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + static_cast<long>(static_cast<size_t>(i) * 3000 * t.size)))
          << "all-to-all block from " << i;
    }
  }
  SC_OK(symcommHostBarrier(comm_));
  for (const DeviceCountsCall& d : calls) device_counts_release(d);
  for (void* p : a2a_send) release(p, false);
  for (void* p : a2a_recv) release(p, true);
}

// Counts on the device on a team whose team ranks are not its world ranks (the even
// ranks), alternating with calls on the world, back to back on one stream: the members'
// headers are found by world rank, and the channel counters and the readers' counter stay
// in step although the odd ranks make fewer calls.
TEST_P(Coll, AllToAllvWithCountsOnTheDeviceOnATeam) {
  if (refuses(Op::AllToAllvDevice, false)) GTEST_SKIP() << algo_ << " refuses counts on the device";
  symcommTeam_t even;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 2, (n_ + 1) / 2, &even));
  const Type& t = kTypes[6];
  std::vector<DeviceCountsCall> calls;
  for (uint64_t k = 0; k < 4; ++k) {
    const bool on_even = k % 2 == 0;
    if (on_even && even == SYMCOMM_TEAM_INVALID) continue;
    calls.push_back(on_even ? device_counts_setup(t, 3000 + 500 * k, seed_ + k, even, (n_ + 1) / 2, me_ / 2)
                            : device_counts_setup(t, 3000 + 500 * k, seed_ + k));
  }
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  for (const DeviceCountsCall& d : calls) SC_OK(device_counts_run(d, t));
  for (const DeviceCountsCall& d : calls) {
    SCOPED_TRACE(d.team == SYMCOMM_TEAM_WORLD ? "world" : "even team");
    device_counts_check(d, t);
  }
  SC_OK(symcommHostBarrier(comm_));
  for (const DeviceCountsCall& d : calls) device_counts_release(d);
  if (even != SYMCOMM_TEAM_INVALID) SC_OK(symcommTeamDestroy(comm_, even));
}

}  // namespace coll_test
