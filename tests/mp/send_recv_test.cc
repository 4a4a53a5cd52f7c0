// symcommSendOnStream / symcommRecvOnStream and groups (coll/p2p.h), host space: rings and
// all-to-all-v written with sends and receives in a group at sizes around the mailbox's slots
// (SYMCOMM_P2P_SLOT, 4 a peer), calls matched in order, a receive whose size differs, a
// receive that nobody sends to (bounded by SYMCOMM_WAIT_TIMEOUT), bad arguments. Fresh random
// sizes each run (the seed is named on failure); data from mp::pattern, receive buffers
// poisoned first.
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mp.h"

namespace {

constexpr uint8_t kPoison = 0xA5;

class SendRecv : public ::testing::Test {
 protected:
  void SetUp() override {
    if (mp::space() != symcommSpaceHost) GTEST_SKIP() << "send and receive: host space only so far";
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
    me_ = mp::rank();
    n_ = mp::nranks();
    seed_ = mp::test_seed();
  }
  void TearDown() override {
    if (comm_) {
      EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
    }
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

  symcommComm_t comm_ = nullptr;
  int me_ = 0, n_ = 1;
  uint64_t seed_ = 0;
};

// Sizes around a slot's data (64 KiB less its 64-byte header) and past the 4 slots a peer has.
const size_t kSizes[] = {0, 1, 7, 4096, 65472, 65473, 4 * 65472, 4 * 65472 + 1, 1 << 20};

TEST_F(SendRecv, RingInAGroupAtEverySize) {
  SCOPED_TRACE(mp::seed_note(seed_));
  const int right = (me_ + 1) % n_, left = (me_ + n_ - 1) % n_;
  for (size_t bytes : kSizes) {
    SCOPED_TRACE(std::to_string(bytes) + " bytes");
    const std::vector<uint8_t> out = message(me_, right, bytes, bytes);
    std::vector<uint8_t> in(bytes + 16, kPoison);
    // Every rank sends first: past 4 slots this deadlocks unless the group moves both at once.
    SC_OK(symcommGroupStart());
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, out.data(), bytes, symcommUint8, right,
                              nullptr));
    SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in.data(), bytes, symcommUint8, left,
                              nullptr));
    SC_OK(symcommGroupEnd());
    EXPECT_EQ(differing(std::vector<uint8_t>(in.begin(), in.begin() + bytes),
                        message(left, me_, bytes, bytes)), 0u);
    for (size_t i = bytes; i < bytes + 16; ++i) ASSERT_EQ(in[i], kPoison) << "written past the end";
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
    std::vector<std::vector<uint8_t>> out(static_cast<size_t>(n_)), in(static_cast<size_t>(n_));
    SC_OK(symcommGroupStart());
    for (int j = 0; j < n_; ++j) {
      const size_t sj = static_cast<size_t>(j), sme = static_cast<size_t>(me_);
      out[sj] = message(me_, j, static_cast<uint64_t>(round), bytes[sme][sj]);
      in[sj].assign(bytes[sj][sme], kPoison);
      SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in[sj].data(), bytes[sj][sme],
                                symcommUint8, j, nullptr));
      SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, out[sj].data(), bytes[sme][sj],
                                symcommUint8, j, nullptr));
    }
    SC_OK(symcommGroupEnd());
    for (int j = 0; j < n_; ++j)
      EXPECT_EQ(differing(in[static_cast<size_t>(j)],
                          message(j, me_, static_cast<uint64_t>(round),
                                  bytes[static_cast<size_t>(j)][static_cast<size_t>(me_)])), 0u)
          << "from rank " << j << ", round " << round;
  }
}

TEST_F(SendRecv, MatchedInTheOrderOfTheCalls) {
  // Rank 0 sends three messages of different sizes and types to rank 1, outside a group (each
  // fits the mailbox); rank 1 receives them in the same order, in a nested group.
  if (n_ < 2) GTEST_SKIP() << "needs 2 ranks";
  const size_t counts[] = {3, 5000, 1};  // int32, float64, uint8
  if (me_ == 0) {
    const std::vector<uint8_t> a = message(0, 1, 0, counts[0] * 4),
                               b = message(0, 1, 1, counts[1] * 8), c = message(0, 1, 2, 1);
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, a.data(), counts[0], symcommInt32, 1,
                              nullptr));
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, b.data(), counts[1], symcommFloat64, 1,
                              nullptr));
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, c.data(), counts[2], symcommUint8, 1,
                              nullptr));
  } else if (me_ == 1) {
    std::vector<uint8_t> a(counts[0] * 4, kPoison), b(counts[1] * 8, kPoison), c(1, kPoison);
    SC_OK(symcommGroupStart());
    SC_OK(symcommGroupStart());
    SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, a.data(), counts[0], symcommInt32, 0,
                              nullptr));
    SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, b.data(), counts[1], symcommFloat64, 0,
                              nullptr));
    SC_OK(symcommGroupEnd());  // the inner end runs nothing
    EXPECT_EQ(a[0], kPoison) << "an inner symcommGroupEnd ran the calls";
    SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, c.data(), counts[2], symcommUint8, 0,
                              nullptr));
    SC_OK(symcommGroupEnd());
    EXPECT_EQ(differing(a, message(0, 1, 0, a.size())), 0u);
    EXPECT_EQ(differing(b, message(0, 1, 1, b.size())), 0u);
    EXPECT_EQ(differing(c, message(0, 1, 2, 1)), 0u);
  }
  SC_OK(symcommHostBarrier(comm_));
}

TEST_F(SendRecv, AReceiveOfAnotherSizeFailsAndTheNextMatches) {
  if (n_ < 2) GTEST_SKIP() << "needs 2 ranks";
  const std::vector<uint8_t> first = message(0, 1, 0, 100000), second = message(0, 1, 1, 64);
  if (me_ == 0) {
    SC_OK(symcommGroupStart());
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, first.data(), first.size(),
                              symcommUint8, 1, nullptr));
    SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, second.data(), second.size(),
                              symcommUint8, 1, nullptr));
    SC_OK(symcommGroupEnd());
  } else if (me_ == 1) {
    std::vector<uint8_t> in(200, kPoison), next(64, kPoison);
    SC_FAILS_SAYING(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in.data(), in.size(),
                                        symcommUint8, 0, nullptr),
                    symcommInvalidArgument, "rank 0 sent 100000 bytes", "receives 200 bytes");
    EXPECT_EQ(in, std::vector<uint8_t>(200, kPoison)) << "a mismatched receive wrote its buffer";
    SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, next.data(), next.size(), symcommUint8,
                              0, nullptr));
    EXPECT_EQ(differing(next, second), 0u) << "the pair after the mismatch did not match";
  }
  SC_OK(symcommHostBarrier(comm_));
}

TEST_F(SendRecv, AReceiveThatNobodySendsToTimesOut) {
  if (n_ < 2) GTEST_SKIP() << "needs 2 ranks";
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
  uint8_t b[8] = {};
  SC_FAILS_SAYING(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, b, 8, symcommUint8, n_, nullptr),
                  symcommInvalidArgument, "peer");
  SC_FAILS_SAYING(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, b, 8, symcommUint8, -1, nullptr),
                  symcommInvalidArgument, "peer -1");
  SC_FAILS_SAYING(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, nullptr, 8, symcommUint8, 0,
                                      nullptr),
                  symcommInvalidArgument, "send is NULL");
  SC_FAILS(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, b, 8,
                               static_cast<symcommDataType_t>(99), 0, nullptr),
           symcommInvalidArgument);
  SC_FAILS(symcommSendOnStream(nullptr, SYMCOMM_TEAM_WORLD, b, 8, symcommUint8, 0, nullptr),
           symcommInvalidArgument);
  SC_FAILS(symcommSendOnStream(comm_, 63, b, 8, symcommUint8, 0, nullptr), symcommInvalidArgument);
  SC_FAILS_SAYING(symcommGroupEnd(), symcommInvalidUsage, "no group is open");
  // A refused call in a group queues nothing: the group ends with nothing to run.
  SC_OK(symcommGroupStart());
  SC_FAILS(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, b, 8, symcommUint8, n_, nullptr),
           symcommInvalidArgument);
  SC_OK(symcommGroupEnd());
  // A zero count needs no buffer.
  SC_OK(symcommGroupStart());
  SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, nullptr, 0, symcommUint8, me_, nullptr));
  SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, nullptr, 0, symcommUint8, me_, nullptr));
  SC_OK(symcommGroupEnd());
}

TEST_F(SendRecv, AGroupOfAFinalizedCommunicatorIsRefused) {
  symcommComm_t other = mp::new_comm();
  ASSERT_NE(other, nullptr);
  uint8_t b[8] = {};
  SC_OK(symcommGroupStart());
  SC_OK(symcommSendOnStream(other, SYMCOMM_TEAM_WORLD, b, 8, symcommUint8, me_, nullptr));
  SC_OK(symcommRecvOnStream(other, SYMCOMM_TEAM_WORLD, b, 8, symcommUint8, me_, nullptr));
  SC_OK(symcommFinalize(other));
  SC_FAILS(symcommGroupEnd(), symcommInvalidArgument);
  // The group is over: a new one works on the live communicator.
  uint8_t in[8] = {};
  const std::vector<uint8_t> m = message(me_, me_, 3, 8);
  SC_OK(symcommGroupStart());
  SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, m.data(), 8, symcommUint8, me_, nullptr));
  SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, in, 8, symcommUint8, me_, nullptr));
  SC_OK(symcommGroupEnd());
  EXPECT_EQ(std::memcmp(in, m.data(), 8), 0);
}

}  // namespace
