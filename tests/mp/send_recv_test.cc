// symcommSendOnStream / symcommRecvOnStream and groups (coll/p2p.h), in the host space and
// (on the test's stream, buffers in GPU memory) the cuda space: rings and all-to-all-v
// written with sends and receives in a group at sizes around the mailbox's slots
// (SYMCOMM_P2P_SLOT, 4 a peer), calls matched in order, a receive whose size differs (in the
// cuda space reported by the next call), a receive that nobody sends to (bounded by
// SYMCOMM_WAIT_TIMEOUT), bad arguments. Fresh random sizes each run (the seed is named on
// failure); data from mp::pattern, receive buffers poisoned first.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "stream_fixture.h"

namespace {

constexpr uint8_t kPoison = 0xA5;

class SendRecv : public StreamTest {
 protected:
  void SetUp() override {
    StreamTest::SetUp();
    seed_ = mp::test_seed();
  }
  char* buffer(const std::vector<uint8_t>& v) {
    return reinterpret_cast<char*>(StreamTest::buffer(v));
  }
  std::vector<uint8_t> read(const char* b, size_t bytes) {
    return StreamTest::read(reinterpret_cast<const uint8_t*>(b), bytes);
  }
  // What rank `from` sends to rank `to` as message `k`: `bytes` of the pattern.
  std::vector<uint8_t> message(int from, int to, uint64_t k, size_t bytes) const {
    std::vector<uint8_t> m(bytes);
    for (size_t i = 0; i < bytes; ++i)
      m[i] = mp::pattern(from, seed_ * 7919 + static_cast<uint64_t>(to) * 131 + k, i);
    return m;
  }
  static size_t differing(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
    size_t d = got.size() != want.size();
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) d += got[i] != want[i];
    return d;
  }

  uint64_t seed_ = 0;
};

// A size parameter's value in force, in bytes (or an integer's), from the registry.
size_t param(const char* name) {
  for (int i = 0; i < symcommGetParamCount(); ++i) {
    symcommParamInfo_t info{};
    if (symcommGetParam(i, &info) == symcommSuccess && std::strcmp(info.name, name) == 0)
      return std::strtoull(info.value, nullptr, 10);
  }
  ADD_FAILURE() << name << " is not in the registry";
  return 0;
}

// Sizes around a slot's data (SYMCOMM_P2P_SLOT less its 64-byte header) and past the 4 slots
// a peer has; in the cuda space, between members of a node, each of the ways
// (SYMCOMM_P2P_WAYS at most, coll/p2p_plan.h) carries a part: 257 bytes leaves all but two
// ways empty, the last size takes each way past its 4 slots (fewer ways take more each).
std::vector<size_t> sizes(bool cuda) {
  const size_t chunk = param("SYMCOMM_P2P_SLOT") / 64 * 64 - 64;
  const size_t ways = cuda ? param("SYMCOMM_P2P_WAYS") : 1;
  return {0, 1, 7, 257, 4096, chunk, chunk + 1, 4 * chunk, 4 * chunk + 1, 1 << 20,
          ways * 4 * chunk + 4099};
}

TEST_F(SendRecv, RingInAGroupAtEverySize) {
  SCOPED_TRACE(mp::seed_note(seed_));
  const int right = (me_ + 1) % n_, left = (me_ + n_ - 1) % n_;
  for (size_t bytes : sizes(cuda())) {
    SCOPED_TRACE(std::to_string(bytes) + " bytes");
    char* out = buffer(message(me_, right, bytes, bytes));
    char* in = buffer(std::vector<uint8_t>(bytes + 16, kPoison));
    // Every rank sends first: past 4 slots this deadlocks unless the group moves both at once.
    SC_OK(symcommGroupStart());
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, out, bytes, symcommUint8, right,
                              stream_));
    SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in, bytes, symcommUint8, left,
                              stream_));
    SC_OK(symcommGroupEnd());
    const std::vector<uint8_t> got = read(in, bytes + 16);
    EXPECT_EQ(differing(std::vector<uint8_t>(got.begin(), got.begin() + bytes),
                        message(left, me_, bytes, bytes)), 0u);
    for (size_t i = bytes; i < bytes + 16; ++i) ASSERT_EQ(got[i], kPoison) << "written past the end";
  }
}

TEST_F(SendRecv, AllToAllvInAGroup) {
  // Random sizes to every rank, itself included, with zeros; the same table on every rank.
  SCOPED_TRACE(mp::seed_note(seed_));
  std::mt19937_64 rng(seed_);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<size_t>> bytes(static_cast<size_t>(n_), std::vector<size_t>(n_));
    for (auto& row : bytes)
      for (size_t& b : row) b = rng() % 4 == 0 ? 0 : rng() % (300 << 10);
    std::vector<char*> in(static_cast<size_t>(n_));
    SC_OK(symcommGroupStart());
    for (int j = 0; j < n_; ++j) {
      const size_t sj = static_cast<size_t>(j), sme = static_cast<size_t>(me_);
      char* out = buffer(message(me_, j, static_cast<uint64_t>(round), bytes[sme][sj]));
      in[sj] = buffer(std::vector<uint8_t>(bytes[sj][sme], kPoison));
      SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in[sj], bytes[sj][sme],
                                symcommUint8, j, stream_));
      SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, out, bytes[sme][sj], symcommUint8, j,
                                stream_));
    }
    SC_OK(symcommGroupEnd());
    for (int j = 0; j < n_; ++j) {
      const size_t b = bytes[static_cast<size_t>(j)][static_cast<size_t>(me_)];
      EXPECT_EQ(differing(read(in[static_cast<size_t>(j)], b),
                          message(j, me_, static_cast<uint64_t>(round), b)), 0u)
          << "from rank " << j << ", round " << round;
    }
  }
}

TEST_F(SendRecv, ARingCapturedInAGraphReplays) {
  // The cuda space: a group captured into a CUDA graph, replayed three times with fresh data
  // (past 4 slots, so each replay needs both lanes at once), then an eager group still pairs.
  if (!cuda()) GTEST_SKIP() << "CUDA graphs: the cuda space";
  SCOPED_TRACE(mp::seed_note(seed_));
  const int right = (me_ + 1) % n_, left = (me_ + n_ - 1) % n_;
  const size_t bytes = sizes(true).back() + 3;  // every way past its 4 slots
  char* out = buffer(std::vector<uint8_t>(bytes, 0));
  char* in = buffer(std::vector<uint8_t>(bytes, kPoison));
  SC_OK(symcommHostBarrier(comm_));
  ASSERT_EQ(mp::begin_capture(stream_), 0);
  SC_OK(symcommGroupStart());
  SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, out, bytes, symcommUint8, right,
                            stream_));
  SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in, bytes, symcommUint8, left, stream_));
  SC_OK(symcommGroupEnd());
  void* exec = mp::end_capture(stream_);
  ASSERT_NE(exec, nullptr);
  for (uint64_t replay = 0; replay < 3; ++replay) {
    const std::vector<uint8_t> m = message(me_, right, 100 + replay, bytes);
    mp::copy_from_host(out, m.data(), bytes);
    const std::vector<uint8_t> poison(bytes, kPoison);
    mp::copy_from_host(in, poison.data(), bytes);
    SC_OK(symcommHostBarrier(comm_));  // every rank's new data is in place
    ASSERT_EQ(mp::launch_graph(exec, stream_), 0);
    EXPECT_EQ(differing(read(in, bytes), message(left, me_, 100 + replay, bytes)), 0u)
        << "replay " << replay;
    SC_OK(symcommHostBarrier(comm_));  // every rank read its data before the next replay
  }
  mp::destroy_graph(exec);
  const std::vector<uint8_t> m = message(me_, right, 7, 100);
  char* out2 = buffer(m);
  char* in2 = buffer(std::vector<uint8_t>(100, kPoison));
  SC_OK(symcommGroupStart());
  SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, out2, 100, symcommUint8, right, stream_));
  SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in2, 100, symcommUint8, left, stream_));
  SC_OK(symcommGroupEnd());
  EXPECT_EQ(differing(read(in2, 100), message(left, me_, 7, 100)), 0u);
}

TEST_F(SendRecv, AGroupOverTwoStreamsJoinsThem) {
  // The cuda space: a group's send on one stream and receive on another run as one kernel on
  // the first call's stream, after the work before the group on both and before the work
  // after it on both: the receive stream's copy-out after the group sees the data.
  if (!cuda()) GTEST_SKIP() << "streams: the cuda space";
  SCOPED_TRACE(mp::seed_note(seed_));
  const int right = (me_ + 1) % n_, left = (me_ + n_ - 1) % n_;
  const size_t bytes = 3 * 65472 + 11;
  symcommStream_t other = mp::new_stream();
  const std::vector<uint8_t> m = message(me_, right, 11, bytes);
  char* out = buffer(std::vector<uint8_t>(bytes, 0));
  char* in = buffer(std::vector<uint8_t>(bytes, kPoison));
  char* copy = buffer(std::vector<uint8_t>(bytes, 0));
  mp::sync(stream_);
  mp::copy_from_host_on(stream_, out, m.data(), bytes);  // before the group, on stream_
  SC_OK(symcommGroupStart());
  SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, out, bytes, symcommUint8, right,
                            stream_));
  SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in, bytes, symcommUint8, left, other));
  SC_OK(symcommGroupEnd());
  mp::copy_on(other, copy, in, bytes);  // after the group, on the other stream
  mp::sync(other);
  EXPECT_EQ(differing(read(copy, bytes), message(left, me_, 11, bytes)), 0u);
  mp::free_stream(other);
}

TEST_F(SendRecv, MatchedInTheOrderOfTheCalls) {
  // Rank 0 sends three messages of different sizes and types to rank 1, outside a group (each
  // fits the mailbox); rank 1 receives them in the same order, in a nested group.
  if (n_ < 2) GTEST_SKIP() << "needs 2 ranks";
  const size_t counts[] = {3, 5000, 1};  // int32, float64, uint8
  const std::vector<uint8_t> ma = message(0, 1, 0, counts[0] * 4),
                             mb = message(0, 1, 1, counts[1] * 8), mc = message(0, 1, 2, 1);
  if (me_ == 0) {
    char *a = buffer(ma), *b = buffer(mb), *c = buffer(mc);
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, a, counts[0], symcommInt32, 1,
                              stream_));
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, b, counts[1], symcommFloat64, 1,
                              stream_));
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, c, counts[2], symcommUint8, 1,
                              stream_));
    mp::sync(stream_);
  } else if (me_ == 1) {
    char* a = buffer(std::vector<uint8_t>(ma.size(), kPoison));
    char* b = buffer(std::vector<uint8_t>(mb.size(), kPoison));
    char* c = buffer(std::vector<uint8_t>(1, kPoison));
    SC_OK(symcommGroupStart());
    SC_OK(symcommGroupStart());
    SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, a, counts[0], symcommInt32, 0,
                              stream_));
    SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, b, counts[1], symcommFloat64, 0,
                              stream_));
    SC_OK(symcommGroupEnd());  // the inner end runs nothing
    EXPECT_EQ(read(a, 1)[0], kPoison) << "an inner symcommGroupEnd ran the calls";
    SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, c, counts[2], symcommUint8, 0,
                              stream_));
    SC_OK(symcommGroupEnd());
    EXPECT_EQ(differing(read(a, ma.size()), ma), 0u);
    EXPECT_EQ(differing(read(b, mb.size()), mb), 0u);
    EXPECT_EQ(differing(read(c, 1), mc), 0u);
  }
  SC_OK(symcommHostBarrier(comm_));
}

TEST_F(SendRecv, AReceiveOfAnotherSizeFailsAndTheNextMatches) {
  // The host space fails the receive itself; the cuda space's kernel records the mismatch,
  // and the communicator's next send or receive reports it (and does nothing).
  if (n_ < 2) GTEST_SKIP() << "needs 2 ranks";
  const std::vector<uint8_t> first = message(0, 1, 0, 100000), second = message(0, 1, 1, 64);
  if (me_ == 0) {
    char *a = buffer(first), *b = buffer(second);
    SC_OK(symcommGroupStart());
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, a, first.size(), symcommUint8, 1,
                              stream_));
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, b, second.size(), symcommUint8, 1,
                              stream_));
    SC_OK(symcommGroupEnd());
    mp::sync(stream_);
  } else if (me_ == 1) {
    char* in = buffer(std::vector<uint8_t>(200, kPoison));
    char* next = buffer(std::vector<uint8_t>(64, kPoison));
    if (cuda()) {
      SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in, 200, symcommUint8, 0, stream_));
      mp::sync(stream_);
      SC_FAILS_SAYING(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, next, 64, symcommUint8, 0,
                                          stream_),
                      symcommInvalidArgument, "rank 0 sent 100000 bytes", "receives 200 bytes");
    } else {
      SC_FAILS_SAYING(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in, 200, symcommUint8, 0,
                                          stream_),
                      symcommInvalidArgument, "rank 0 sent 100000 bytes", "receives 200 bytes");
    }
    EXPECT_EQ(read(in, 200), std::vector<uint8_t>(200, kPoison))
        << "a mismatched receive wrote its buffer";
    SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, next, 64, symcommUint8, 0, stream_));
    EXPECT_EQ(differing(read(next, 64), second), 0u) << "the pair after the mismatch did not match";
  }
  SC_OK(symcommHostBarrier(comm_));
}

TEST_F(SendRecv, AReceiveThatNobodySendsToTimesOut) {
  // The host space fails the call; in the cuda space the kernel's wait fails (the bound is the
  // communicator's, read when it was made: a communicator of its own here), and the next call
  // on the communicator reports it.
  if (n_ < 2) GTEST_SKIP() << "needs 2 ranks";
  if (cuda()) {
    symcommComm_t bounded = nullptr;
    {
      mp::ScopedEnv bound("SYMCOMM_WAIT_TIMEOUT", "0.3");
      bounded = mp::new_comm();
    }
    ASSERT_NE(bounded, nullptr);
    if (me_ == 1) {
      char* in = buffer(std::vector<uint8_t>(8, kPoison));
      SC_OK(symcommRecvOnStream(bounded, SYMCOMM_TEAM_WORLD, in, 8, symcommUint8, 0, stream_));
      mp::sync(stream_);
      SC_FAILS_SAYING(symcommRecvOnStream(bounded, SYMCOMM_TEAM_WORLD, in, 8, symcommUint8, 0,
                                          stream_),
                      symcommTimeout, "SYMCOMM_WAIT_TIMEOUT");
      EXPECT_EQ(read(in, 8), std::vector<uint8_t>(8, kPoison));
    }
    SC_OK(symcommHostBarrier(comm_));
    EXPECT_EQ(symcommFinalize(bounded), symcommSuccess) << symcommGetLastError();
    return;
  }
  if (me_ == 1) {
    mp::ScopedEnv bound("SYMCOMM_WAIT_TIMEOUT", "0.3");
    std::vector<uint8_t> in(8, kPoison);
    SC_FAILS_SAYING(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in.data(), in.size(),
                                        symcommUint8, 0, nullptr),
                    symcommTimeout, "a receive of 8 bytes from rank 0", "SYMCOMM_WAIT_TIMEOUT");
  }
  SC_OK(symcommHostBarrier(comm_));
  // Nothing was taken: the pair matches from the start.
  const std::vector<uint8_t> m = message(0, 1, 9, 8);
  if (me_ == 0)
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, m.data(), 8, symcommUint8, 1, nullptr));
  if (me_ == 1) {
    std::vector<uint8_t> in(8, kPoison);
    SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in.data(), 8, symcommUint8, 0, nullptr));
    EXPECT_EQ(differing(in, m), 0u);
  }
  SC_OK(symcommHostBarrier(comm_));
}

TEST_F(SendRecv, BadArguments) {
  char* b = buffer(std::vector<uint8_t>(8, 0));
  SC_FAILS_SAYING(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, b, 8, symcommUint8, n_, stream_),
                  symcommInvalidArgument, "peer");
  SC_FAILS_SAYING(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, b, 8, symcommUint8, -1, stream_),
                  symcommInvalidArgument, "peer -1");
  SC_FAILS_SAYING(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, nullptr, 8, symcommUint8, 0,
                                      stream_),
                  symcommInvalidArgument, "send is NULL");
  SC_FAILS(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, b, 8,
                               static_cast<symcommDataType_t>(99), 0, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommSendOnStream(nullptr, SYMCOMM_TEAM_WORLD, b, 8, symcommUint8, 0, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommSendOnStream(comm_, 63, b, 8, symcommUint8, 0, stream_), symcommInvalidArgument);
  SC_FAILS_SAYING(symcommGroupEnd(), symcommInvalidUsage, "no group is open");
  // A refused call in a group queues nothing: the group ends with nothing to run.
  SC_OK(symcommGroupStart());
  SC_FAILS(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, b, 8, symcommUint8, n_, stream_),
           symcommInvalidArgument);
  SC_OK(symcommGroupEnd());
  // A zero count needs no buffer.
  SC_OK(symcommGroupStart());
  SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, nullptr, 0, symcommUint8, me_, stream_));
  SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, nullptr, 0, symcommUint8, me_, stream_));
  SC_OK(symcommGroupEnd());
  mp::sync(stream_);
  if (!cuda()) return;
  // The cuda space: the kernel touches the buffers (pageable host memory is refused); a
  // group is of one communicator, of at most 72 calls.
  uint8_t pageable[8] = {};
  SC_FAILS_SAYING(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, pageable, 8, symcommUint8, me_,
                                      stream_),
                  symcommInvalidArgument, "send");
  SC_OK(symcommGroupStart());
  for (int i = 0; i < 73; ++i)
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, b, 1, symcommUint8, me_, stream_));
  SC_FAILS_SAYING(symcommGroupEnd(), symcommNotSupported, "at most 72 calls");
  symcommComm_t other = mp::new_comm();
  ASSERT_NE(other, nullptr);
  SC_OK(symcommGroupStart());
  SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, b, 1, symcommUint8, me_, stream_));
  SC_OK(symcommRecvOnStream(other, SYMCOMM_TEAM_WORLD, b, 1, symcommUint8, me_, stream_));
  SC_FAILS_SAYING(symcommGroupEnd(), symcommNotSupported, "several communicators");
  EXPECT_EQ(symcommFinalize(other), symcommSuccess) << symcommGetLastError();
  // Nothing of the refused groups ran: a send and receive to itself still pair up.
  const std::vector<uint8_t> m = message(me_, me_, 5, 8);
  char* out = buffer(m);
  char* in = buffer(std::vector<uint8_t>(8, kPoison));
  SC_OK(symcommGroupStart());
  SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, out, 8, symcommUint8, me_, stream_));
  SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in, 8, symcommUint8, me_, stream_));
  SC_OK(symcommGroupEnd());
  EXPECT_EQ(differing(read(in, 8), m), 0u);
}

TEST_F(SendRecv, AGroupOfAFinalizedCommunicatorIsRefused) {
  symcommComm_t other = mp::new_comm();
  ASSERT_NE(other, nullptr);
  char* b = buffer(std::vector<uint8_t>(8, 0));
  SC_OK(symcommGroupStart());
  SC_OK(symcommSendOnStream(other, SYMCOMM_TEAM_WORLD, b, 8, symcommUint8, me_, stream_));
  SC_OK(symcommRecvOnStream(other, SYMCOMM_TEAM_WORLD, b, 8, symcommUint8, me_, stream_));
  SC_OK(symcommFinalize(other));
  SC_FAILS(symcommGroupEnd(), symcommInvalidArgument);
  // The group is over: a new one works on the live communicator.
  const std::vector<uint8_t> m = message(me_, me_, 3, 8);
  char* out = buffer(m);
  char* in = buffer(std::vector<uint8_t>(8, 0));
  SC_OK(symcommGroupStart());
  SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, out, 8, symcommUint8, me_, stream_));
  SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in, 8, symcommUint8, me_, stream_));
  SC_OK(symcommGroupEnd());
  EXPECT_EQ(differing(read(in, 8), m), 0u);
}

}  // namespace
