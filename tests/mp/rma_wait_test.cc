// One-sided waits and barriers (host API): waits that cannot succeed time out,
// SYMCOMM_WAIT_TIMEOUT=0 means no bound, every comparison (and at its edges), a barrier that
// a member misses times out.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "rma_fixture.h"

namespace rma_test {

TEST_F(Rma, WaitThatCannotSucceedTimesOut) {
  // The bound is read when a communicator is created: this test makes its own.
  const double bound = 0.3;
  symcommComm_t c = comm_with_timeout("0.3");
  ASSERT_NE(c, nullptr);
  uint64_t* word;
  SC_OK(symcommMalloc(c, 8, reinterpret_cast<void**>(&word)));
  mp::write_u64(word, 5);
  SC_OK(symcommHostBarrier(c));
  auto start = std::chrono::steady_clock::now();
  // The stream goes on after the bound in the cuda space; the next call reports it, once.
  symcommResult_t rc =
      reported(c, symcommSignalWaitOnStream(c, word, symcommCmpGt, 1000, stream_));
  const double took = seconds_since(start);
  EXPECT_EQ(rc, symcommTimeout) << symcommGetLastError();
  std::string msg = symcommGetLastError();
  EXPECT_NE(msg.find("> 1000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("last saw 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank " + std::to_string(mp::rank()) + " "), std::string::npos) << msg;
  EXPECT_NE(msg.find(address(word)), std::string::npos) << msg;
  EXPECT_GE(took, 0.9 * bound) << "the wait ended before its bound";
  EXPECT_LT(took, 5.0);
  // Usable afterwards.
  SC_OK(symcommQuietOnStream(c, stream_));
  SC_OK(symcommBarrierOnStream(c, SYMCOMM_TEAM_WORLD, stream_));
  mp::sync(stream_);
  SC_OK(symcommFree(c, word));
  SC_OK(symcommFinalize(c));
}

// SYMCOMM_WAIT_TIMEOUT=0 means no bound in both spaces (read as a bound, the host space
// would time out at once): a signal sent 0.3 s late is still waited for. The smallest
// positive bound, 1 ms, is a bound, not "none".
TEST_F(Rma, WaitTimeoutZeroMeansNoBound) {
  symcommComm_t c = comm_with_timeout("0");
  ASSERT_NE(c, nullptr);
  uint64_t* word;
  SC_OK(symcommMalloc(c, 8, reinterpret_cast<void**>(&word)));
  mp::write_u64(word, 0);
  SC_OK(symcommHostBarrier(c));
  if (mp::rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    SC_OK(symcommPutSignalOnStream(c, nullptr, nullptr, 0, word, 1, symcommSignalSet, 0,
                                   symcommEngineAuto, stream_));
  } else if (mp::rank() == 0) {
    auto start = std::chrono::steady_clock::now();
    SC_OK(symcommSignalWaitOnStream(c, word, symcommCmpGe, 1, stream_));
    mp::sync(stream_);
    SC_OK(symcommQuietOnStream(c, stream_));  // no failure recorded on the device either
    EXPECT_GE(seconds_since(start), 0.2) << "the wait passed before the signal was sent";
    EXPECT_EQ(mp::read_u64(word), 1u);
  }
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(c));
  SC_OK(symcommFree(c, word));
  SC_OK(symcommFinalize(c));

  c = comm_with_timeout("0.001");
  ASSERT_NE(c, nullptr);
  SC_OK(symcommMalloc(c, 8, reinterpret_cast<void**>(&word)));
  mp::write_u64(word, 5);
  SC_OK(symcommHostBarrier(c));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(reported(c, symcommSignalWaitOnStream(c, word, symcommCmpLt, 5, stream_)),
            symcommTimeout) << symcommGetLastError();
  EXPECT_LT(seconds_since(start), 5.0);
  SC_OK(symcommHostBarrier(c));
  SC_OK(symcommFree(c, word));
  SC_OK(symcommFinalize(c));
}

// Every comparison, on words a peer changes with put-signal: each wait cannot pass before
// the peer's signal (the word starts where the comparison fails), and the data behind the
// signal is there once it passes. Then waits that hold already, at their edges.
TEST_F(Rma, EveryComparison) {
  struct Step {
    symcommCmp_t cmp;
    uint64_t value, before, after;  // wait for `cmp value`; the word goes before -> after
  };
  const Step steps[] = {{symcommCmpNe, 7, 7, 8},       {symcommCmpLe, 50, 100, 50},
                        {symcommCmpLt, 5, 10, 4},      {symcommCmpGt, 9, 9, 10},
                        {symcommCmpGe, 30, 29, 30},    {symcommCmpEq, 77, 76, 77}};
  constexpr int kSteps = 6;
  constexpr size_t kData = 4096;
  uint64_t* words;
  char* data;
  SC_OK(symcommMalloc(comm_, 8 * kSteps, reinterpret_cast<void**>(&words)));
  SC_OK(symcommMalloc(comm_, kData * kSteps, reinterpret_cast<void**>(&data)));
  char* src = static_cast<char*>(mp::local_alloc(kData * kSteps));
  for (int i = 0; i < kSteps; ++i) {
    mp::write_u64(&words[i], steps[i].before);
    mp::fill(src + i * kData, kData, mp::rank(), 500 + i);
  }
  mp::fill(data, kData * kSteps, mp::rank(), 499);
  SC_OK(symcommHostBarrier(comm_));
  for (int i = 0; i < kSteps; ++i)
    SC_OK(symcommPutSignalOnStream(comm_, data + i * kData, src + i * kData, kData, &words[i],
                                   steps[i].after, symcommSignalSet, right(),
                                   kEngines[i % 3], stream_));
  for (int i = 0; i < kSteps; ++i) {
    SC_OK(symcommSignalWaitOnStream(comm_, &words[i], steps[i].cmp, steps[i].value, stream_));
    mp::sync(stream_);
    EXPECT_EQ(mp::read_u64(&words[i]), steps[i].after) << "comparison " << steps[i].cmp;
    EXPECT_EQ(mismatches(data + i * kData, kData, left(), 500 + i), 0u)
        << "comparison " << steps[i].cmp << " passed before the data arrived";
  }
  // Already true of words[1] (50 now): each at the edge where a wrong comparison fails.
  const std::pair<symcommCmp_t, uint64_t> now[] = {
      {symcommCmpNe, 49}, {symcommCmpLe, 50}, {symcommCmpLt, 51},
      {symcommCmpGe, 50}, {symcommCmpGt, 49}, {symcommCmpEq, 50}};
  for (const auto& [cmp, value] : now)
    SC_OK(symcommSignalWaitOnStream(comm_, &words[1], cmp, value, stream_));
  mp::sync(stream_);
  SC_OK(symcommQuietOnStream(comm_, stream_));  // no wait failed on the device
  SC_OK(symcommHostBarrier(comm_));
  mp::local_free(src);
  SC_OK(symcommFree(comm_, data));
  SC_OK(symcommFree(comm_, words));
}

// Every comparison at its edges, on a word that holds 50 and that nobody changes: those one
// step past the edge (< 50, > 50, != 50, == 49, <= 49, >= 51) never hold and time out after
// the bound (0.15 s each, naming the comparison), the communicator staying usable; those at
// the edge (<= 50, >= 50, == 50, < 51, > 49, != 49) hold at once. EveryComparison above
// cannot tell an off-by-one comparison (< for <=, say): its signals mostly land before the
// wait starts, and its edges only try comparisons that hold.
TEST_F(Rma, EveryComparisonAtItsEdges) {
  const double bound = 0.15;
  symcommComm_t c = comm_with_timeout("0.15");
  ASSERT_NE(c, nullptr);
  uint64_t* word;
  SC_OK(symcommMalloc(c, 8, reinterpret_cast<void**>(&word)));
  mp::write_u64(word, 50);
  SC_OK(symcommHostBarrier(c));
  struct Edge {
    symcommCmp_t cmp;
    uint64_t value;
    const char* text;  // as the error message writes the comparison
  };
  const Edge refused[] = {{symcommCmpLt, 50, "< 50"},  {symcommCmpGt, 50, "> 50"},
                          {symcommCmpNe, 50, "!= 50"}, {symcommCmpEq, 49, "== 49"},
                          {symcommCmpLe, 49, "<= 49"}, {symcommCmpGe, 51, ">= 51"}};
  for (const Edge& e : refused) {
    SCOPED_TRACE(std::string("word 50, wait for ") + e.text);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(reported(c, symcommSignalWaitOnStream(c, word, e.cmp, e.value, stream_)),
              symcommTimeout) << "a comparison that does not hold passed";
    const double took = seconds_since(start);
    const std::string msg = symcommGetLastError();
    EXPECT_NE(msg.find(std::string("to be ") + e.text + " and last saw 50"), std::string::npos)
        << msg;
    EXPECT_GE(took, 0.9 * bound) << "the wait ended before its bound";
    EXPECT_LT(took, 5.0);
  }
  // Usable: the next calls succeed, no failure left to report.
  SC_OK(symcommQuietOnStream(c, stream_));
  SC_OK(symcommBarrierOnStream(c, SYMCOMM_TEAM_WORLD, stream_));
  mp::sync(stream_);
  const Edge hold[] = {{symcommCmpLe, 50, "<= 50"}, {symcommCmpGe, 50, ">= 50"},
                       {symcommCmpEq, 50, "== 50"}, {symcommCmpLt, 51, "< 51"},
                       {symcommCmpGt, 49, "> 49"},  {symcommCmpNe, 49, "!= 49"}};
  for (const Edge& e : hold) {
    SCOPED_TRACE(std::string("word 50, wait for ") + e.text);
    EXPECT_EQ(reported(c, symcommSignalWaitOnStream(c, word, e.cmp, e.value, stream_)),
              symcommSuccess) << symcommGetLastError();
  }
  EXPECT_EQ(mp::read_u64(word), 50u);
  SC_OK(symcommHostBarrier(c));
  SC_OK(symcommFree(c, word));
  SC_OK(symcommFinalize(c));
}

// A barrier that one member never reaches ends with symcommTimeout naming that member (the
// call itself fails in the host space; the next call in the cuda space, the stream going
// on). The members whose barrier failed refuse barriers from then on, on every team (their
// counts and the absent member's disagree); one-sided calls still run.
TEST_F(Rma, BarrierThatAMemberMissesTimesOut) {
  const double bound = 0.3;
  // The barrier's own bound: SYMCOMM_COLL_CHECK (on by default in the host space) would
  // catch the missed barrier first, at SYMCOMM_BOOTSTRAP_TIMEOUT (coll_check_test.cc).
  mp::ScopedEnv unchecked("SYMCOMM_COLL_CHECK", "0");
  symcommComm_t c = comm_with_timeout("0.3");
  ASSERT_NE(c, nullptr);
  const int n = mp::nranks(), me = mp::rank(), absent = n - 1;
  symcommTeam_t team;
  SC_OK(symcommTeamSplitStrided(c, SYMCOMM_TEAM_WORLD, 0, 1, n, &team));
  SC_OK(symcommHostBarrier(c));
  if (me != absent) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(reported(c, symcommBarrierOnStream(c, team, stream_)), symcommTimeout)
        << symcommGetLastError();
    const double took = seconds_since(start);
    std::string msg = symcommGetLastError();
    EXPECT_NE(msg.find("waited for rank " + std::to_string(absent) + ", which did not arrive"),
              std::string::npos) << msg;
    EXPECT_GE(took, 0.9 * bound);
    EXPECT_LT(took, 5.0);
  }
  SC_OK(symcommHostBarrier(c));
  SC_OK(symcommTeamDestroy(c, team));
  if (me != absent) {
    SC_FAILS(symcommBarrierOnStream(c, SYMCOMM_TEAM_WORLD, stream_), symcommTimeout);
    EXPECT_NE(std::strstr(symcommGetLastError(), "barrier counts may no longer agree"), nullptr)
        << symcommGetLastError();
  }
  // A put, seen after the stream and a host barrier.
  uint64_t* word;
  SC_OK(symcommMalloc(c, 8, reinterpret_cast<void**>(&word)));
  uint64_t* value = static_cast<uint64_t*>(mp::local_alloc(8));
  mp::write_u64(value, 1000 + static_cast<uint64_t>(me));
  mp::write_u64(word, 0);
  SC_OK(symcommHostBarrier(c));
  SC_OK(symcommPutOnStream(c, word, value, 8, right(), symcommEngineAuto, stream_));
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(c));
  EXPECT_EQ(mp::read_u64(word), 1000 + static_cast<uint64_t>(left()));
  SC_OK(symcommHostBarrier(c));
  mp::local_free(value);
  SC_OK(symcommFree(c, word));
  SC_OK(symcommFinalize(c));
}

}  // namespace rma_test
