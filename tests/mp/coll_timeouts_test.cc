// Collective waits cut at SYMCOMM_WAIT_TIMEOUT (ce's memory operations, the counter
// algorithms' kernels, a late member, counts on the device) and the refusals that follow.
#include "coll_fixture.h"

namespace coll_test {

// A ce call issued on `stream` at `start` that waits for a signal that never comes: the
// stream ends once the watchdog released the wait, after at least `least` seconds (the
// bound) and within 10, and the next call on the communicator reports the timeout.
void expect_ce_timed_out(symcommComm_t comm, symcommStream_t stream,
                         std::chrono::steady_clock::time_point start, double least) {
  mp::sync(stream);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(took, least);
  EXPECT_LT(took, 10.0);
  SC_FAILS(symcommQuietOnStream(comm, stream), symcommTimeout);
  EXPECT_NE(std::strstr(symcommGetLastError(), "SYMCOMM_WAIT_TIMEOUT"), nullptr)
      << symcommGetLastError();
}

// ce's waits are stream memory operations, bounded by its watchdog: a rank that calls a
// collective alone is let go after SYMCOMM_WAIT_TIMEOUT, the next call reports the timeout
// like a failed wait kernel, and ce refuses to run on the communicator from then on.
TEST(CollLimits, CeWaitEndsAtTheTimeout) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "ce runs in the cuda space only";
  if (!coll_caps::of("ce").reaches(mp::nodes())) GTEST_SKIP() << "ce needs one node";
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t stream = mp::new_stream();
  const int n = mp::nranks();
  const size_t count = 1000;
  void* send = mp::local_alloc(count * 4);
  void* recv = mp::local_alloc(count * 4 * static_cast<size_t>(n));
  if (mp::rank() == 0) {  // the others never call: rank 0 waits for their ready signals
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count,
                                       symcommInt32, "ce", stream), symcommSuccess)
        << symcommGetLastError();
    expect_ce_timed_out(comm, stream, start, 0.9);
    SC_FAILS(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                      "ce", stream), symcommTimeout);
    EXPECT_NE(std::strstr(symcommGetLastError(), "released"), nullptr) << symcommGetLastError();
    mp::sync(stream);
  }
  EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
  mp::free_stream(stream);
  mp::local_free(send);
  mp::local_free(recv);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// ce's chain: the root never calls, so rank 1 waits for its first chunk (after its own
// successor's ready signal came) and the ranks after it for theirs. Rank 1's bound is 1 s,
// the others' 3 s: rank 1 is released first, and its stream then runs on and signals
// chunks it never received, but its release first made its signals stop counting on the
// others, so each of them still waits its own bound and reports symcommTimeout (the
// release of 0x80000000 let them pass on garbage: caught here).
TEST(CollLimits, CeChainWaitEndsAtTheTimeout) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "ce runs in the cuda space only";
  if (!coll_caps::of("ce").reaches(mp::nodes())) GTEST_SKIP() << "ce needs one node";
  if (mp::nranks() < 3) GTEST_SKIP() << "the chain runs on teams of 3 or more";
  const int me = mp::rank();
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", me == 1 ? "1" : "3");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t stream = mp::new_stream();
  const size_t count = 1 << 20;
  void* send = mp::local_alloc(count * 4);
  void* recv = nullptr;
  SC_OK(symcommMalloc(comm, count * 4, &recv));
  if (me != 0) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(symcommBroadcastOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                       0, "ce", stream), symcommSuccess)
        << symcommGetLastError();
    expect_ce_timed_out(comm, stream, start, me == 1 ? 0.9 : 2.9);
    SC_FAILS(symcommBroadcastOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                      0, "ce", stream), symcommTimeout);
    mp::sync(stream);
  }
  EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
  SC_OK(symcommFree(comm, recv));
  mp::free_stream(stream);
  mp::local_free(send);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// The algorithms that keep counters with their peers (their descriptors say so): a wait of theirs
// that never ends (only rank 0 calls) is cut at SYMCOMM_WAIT_TIMEOUT and reported at the
// next call; after it the algorithm refuses every call on that communicator, rather than
// run with counters that no longer agree with the peers' (a later wait could pass on a
// stale signal). Other algorithms, and a fresh communicator, still run.
// After a wait of an algorithm's timed out on this rank: the next call reports it, and
// `again` (a call of that algorithm) is refused for good.
void expect_refused_after_timeout(symcommComm_t comm, symcommStream_t stream,
                                  const std::function<symcommResult_t()>& again) {
  mp::sync(stream);
  SC_FAILS(symcommQuietOnStream(comm, stream), symcommTimeout);
  SC_FAILS(again(), symcommTimeout);
  EXPECT_NE(std::strstr(symcommGetLastError(), "cannot run on this communicator any more"), nullptr)
      << symcommGetLastError();
  mp::sync(stream);
}

// After a failed barrier on this rank, barriers refuse, and so do the collectives built on
// them (copy, an all-reduce of `count` int32 in place in `buf`): the members' barrier
// counts may no longer agree, and a later barrier could pass on an arrival from another
// call.
void expect_barriers_refused(symcommComm_t comm, symcommStream_t stream, void* buf,
                             size_t count) {
  SC_FAILS(symcommBarrierOnStream(comm, SYMCOMM_TEAM_WORLD, stream), symcommTimeout);
  EXPECT_NE(std::strstr(symcommGetLastError(), "barrier counts may no longer agree"), nullptr)
      << symcommGetLastError();
  SC_FAILS(symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count, symcommInt32,
                                    symcommSum, "copy", stream), symcommTimeout);
  EXPECT_NE(std::strstr(symcommGetLastError(), "barrier counts may no longer agree"), nullptr)
      << symcommGetLastError();
}

// One member comes to a copy all-gather after the others' barrier waits have timed out.
// Each of them takes its arrival back as its wait fails, so the late member waits out its
// own bound rather than passing on their arrivals and writing into receive buffers whose
// call has failed (before, it did, and the members' barrier counts drifted apart: later
// calls returned success with wrong data). Every member fails the call, in the host space
// nobody's block lands on another, and from then on barriers and the collectives built on
// them refuse.
TEST(CollLimits, ALateMemberFailsTheCallAndLaterBarriersRefuse) {
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  // The barriers' own bound: SYMCOMM_COLL_CHECK (on by default in the host space) would hold
  // the early members until the late one's record came (coll_check_test.cc).
  mp::ScopedEnv unchecked("SYMCOMM_COLL_CHECK", "0");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t stream = mp::new_stream();
  const int n = mp::nranks(), me = mp::rank();
  const size_t count = 1000, block = count * 4;
  void* send = nullptr;
  void* recv = nullptr;
  SC_OK(symcommMalloc(comm, block, &send));
  SC_OK(symcommMalloc(comm, block * static_cast<size_t>(n), &recv));
  mp::store(send, std::vector<uint8_t>(block, static_cast<uint8_t>(0x10 + me)));
  mp::store(recv, std::vector<uint8_t>(block * static_cast<size_t>(n), 0xAB));
  SC_OK(symcommHostBarrier(comm));
  // The late member calls only once the others' calls have failed (a barrier of the world,
  // another communicator, in between), however slowly a loaded machine runs them.
  const bool late = me == n - 1;
  auto call = [&] {
    const symcommResult_t rc = symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv,
                                                        count, symcommInt32, "copy", stream);
    if (mp::space() == symcommSpaceHost) {  // the call waits, and fails, in itself
      EXPECT_EQ(rc, symcommTimeout) << symcommGetLastError();
    } else {  // issued; the next call reports what the barrier kernel recorded
      EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();
      mp::sync(stream);
      SC_FAILS(symcommQuietOnStream(comm, stream), symcommTimeout);
    }
  };
  if (!late) call();
  SC_OK(symcommHostBarrier(mp::world()));
  if (late) call();
  SC_OK(symcommHostBarrier(comm));  // every member's call has ended
  // In the host space a failed call stops where its wait failed: nobody's block lands on
  // another. (On GPUs the stream goes on after a failed wait, the early members' copies
  // with it: docs/rma.md.)
  const std::vector<uint8_t> got = mp::fetch(stream, recv, block * static_cast<size_t>(n));
  for (int j = 0; j < n && mp::space() == symcommSpaceHost; ++j) {
    if (j == me) continue;  // (the own block may have been copied before the barrier)
    size_t landed = 0;
    for (size_t i = 0; i < block; ++i) landed += got[static_cast<size_t>(j) * block + i] != 0xAB;
    EXPECT_EQ(landed, 0u) << "member " << j << "'s block landed here";
  }
  expect_barriers_refused(comm, stream, recv, count);
  SC_OK(symcommHostBarrier(comm));
  SC_OK(symcommFree(comm, send));
  SC_OK(symcommFree(comm, recv));
  mp::free_stream(stream);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

TEST(CollLimits, CounterAlgorithmsRefuseCallsAfterAFailedWait) {
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  const size_t count = 1000;
  int tested = 0;
  for (const coll_caps::Caps& caps : coll_caps::all()) {
    if (!caps.counters || !caps.runs_in(mp::space()) || !caps.fits(mp::nranks()) ||
        !caps.reaches(mp::nodes()))
      continue;
    const char* algo = caps.name;
    SCOPED_TRACE(algo);
    ++tested;
    symcommComm_t comm = mp::new_comm();
    ASSERT_NE(comm, nullptr);
    symcommStream_t stream = mp::new_stream();
    void* buf = nullptr;
    SC_OK(symcommMalloc(comm, count * 4, &buf));
    if (mp::rank() == 0) {  // the others never call: rank 0's waits time out
      auto call = [&] {  // an all-reduce in place, or a broadcast from rank 0 in place
        return caps.does(symcommCollAllReduce)
                   ? symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count,
                                              symcommInt32, symcommSum, algo, stream)
                   : symcommBroadcastOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count,
                                              symcommInt32, 0, algo, stream);
      };
      SC_OK(call());
      expect_refused_after_timeout(comm, stream, call);
    }
    EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
    // Every rank: the algorithms built on barriers still run (no barrier failed).
    SC_OK(symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count, symcommInt32,
                                   symcommSum, "copy", stream));
    mp::sync(stream);
    SC_OK(symcommFree(comm, buf));
    mp::free_stream(stream);
    EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
  }
  if (tested == 0) GTEST_SKIP() << "no algorithm that keeps counters runs here";
}

// All-to-all-v with counts on the device that only rank 0 calls, by an algorithm that reads
// them on the device with counters (sm): its blocks' waits for the members' headers end at
// SYMCOMM_WAIT_TIMEOUT, the next call says so, and the algorithm refuses calls on the
// communicator from then on (the other algorithms still run).
TEST(CollLimits, CountsOnTheDeviceWaitEndsAtTheTimeout) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "counts on the device: the cuda space";
  const char* algo = nullptr;
  for (const coll_caps::Caps& caps : coll_caps::all())
    if (!algo && caps.counters && caps.device_counts_in(symcommSpaceCuda) &&
        caps.does(symcommCollAllToAll) && caps.fits(mp::nranks()) && caps.reaches(mp::nodes()))
      algo = caps.name;
  if (!algo) GTEST_SKIP() << "no algorithm with counters reads counts on the device";
  SCOPED_TRACE(algo);
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t stream = mp::new_stream();
  const size_t n = static_cast<size_t>(mp::nranks()), count = 100;
  void* send = mp::local_alloc(n * count * 4);
  void* recv = mp::local_alloc(n * count * 4);
  auto* counts = static_cast<size_t*>(mp::local_alloc(4 * n * sizeof(size_t)));
  std::vector<size_t> host(4 * n);
  for (size_t j = 0; j < n; ++j) {
    host[j] = count;
    host[n + j] = j * count;
  }
  mp::store(counts, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(host.data()),
                                         reinterpret_cast<uint8_t*>(host.data() + host.size())));
  if (mp::rank() == 0) {  // the others never call
    const auto t0 = std::chrono::steady_clock::now();
    SC_OK(symcommAllToAllvDeviceOnStream(comm, SYMCOMM_TEAM_WORLD, send, counts, counts + n, recv,
                                         n * count, counts + 2 * n, counts + 3 * n, symcommInt32,
                                         algo, stream));
    expect_refused_after_timeout(comm, stream, [&] {
      return symcommAllToAllOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                     algo, stream);
    });
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  }
  EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
  SC_OK(symcommAllToAllOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32, "copy",
                                stream));
  mp::sync(stream);
  mp::local_free(send);
  mp::local_free(recv);
  mp::local_free(counts);
  mp::free_stream(stream);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

}  // namespace coll_test
