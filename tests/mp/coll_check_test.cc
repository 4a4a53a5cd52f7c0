// SYMCOMM_COLL_CHECK=1 (src/coll/agreement.h): before a collective runs, the members of its
// team compare their calls. Here the last rank of the world (or of a team) makes a call that
// differs from the others' in one field at a time: every member must fail with
// symcommInvalidUsage and a message naming the field, both values and both ranks, nothing
// may run, and calls that agree must still run and give the right data afterwards (the
// members' records stay paired call by call). Runs in both memory spaces, with the "copy"
// algorithm (both spaces) unless a case is about the algorithm.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "mp.h"

namespace {

constexpr size_t kCount = 64;  // elements of int32 per block

class CollCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    check_ = std::make_unique<mp::ScopedEnv>("SYMCOMM_COLL_CHECK", "1");
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
    n_ = mp::nranks();
    me_ = mp::rank();
    last_ = me_ == n_ - 1;
    stream_ = mp::new_stream();
    const size_t bytes = bytes_per_buffer();
    for (void*& p : sym_) SC_OK(symcommMalloc(comm_, bytes, &p));
    local_ = mp::local_alloc(bytes);
  }
  void TearDown() override {
    for (void* p : sym_) EXPECT_EQ(symcommFree(comm_, p), symcommSuccess) << symcommGetLastError();
    mp::local_free(local_);
    mp::free_stream(stream_);
    EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
  }
  size_t bytes_per_buffer() const { return kCount * sizeof(int32_t) * static_cast<size_t>(n_); }

  // An all-gather of kCount int32 per member, this rank's block i holding me * 1000 + i,
  // checked: the calls that agree still run, with the right result. The whole receive buffer
  // is poisoned first (mp::fill's pattern bytes): what an earlier call left there (a world
  // all-gather leaves the very values a team all-gather of the odd ranks gives) cannot pass
  // for this call's result, and the blocks past `members` (a team smaller than the world)
  // must still hold their poison afterwards.
  void expect_all_gather_runs(symcommTeam_t team, int members, int my_team_rank) {
    const size_t block = kCount * sizeof(int32_t), written = block * static_cast<size_t>(members);
    const size_t rest = bytes_per_buffer() - written;
    char* recv = static_cast<char*>(sym_[1]);
    std::vector<int32_t> mine(kCount), got(kCount * static_cast<size_t>(members));
    for (size_t i = 0; i < kCount; ++i) mine[i] = my_team_rank * 1000 + static_cast<int32_t>(i);
    mp::copy_from_host(sym_[0], mine.data(), block);
    mp::fill(recv, written, me_, 90);
    if (rest > 0) mp::fill(recv + written, rest, me_, 91);
    SC_OK(symcommAllGatherOnStream(comm_, team, sym_[0], recv, kCount, symcommInt32, "copy",
                                   stream_));
    mp::sync(stream_);
    mp::copy_to_host(got.data(), recv, written);
    for (int r = 0; r < members; ++r)
      for (size_t i = 0; i < kCount; ++i)
        ASSERT_EQ(got[static_cast<size_t>(r) * kCount + i], r * 1000 + static_cast<int32_t>(i))
            << "block of team rank " << r << ", element " << i;
    if (rest > 0) {
      EXPECT_EQ(mp::count_mismatches(recv + written, rest, me_, 91), 0u)
          << "bytes past the team's " << members << " blocks were written";
    }
  }

  std::unique_ptr<mp::ScopedEnv> check_;
  symcommComm_t comm_ = nullptr;
  int n_ = 0, me_ = 0;
  bool last_ = false;
  symcommStream_t stream_ = nullptr;
  void* sym_[3] = {};
  void* local_ = nullptr;
};

// One field differs on the last rank: every member fails the same way; then a call that
// agrees runs.
TEST_F(CollCheck, EveryMemberFailsWhereOneDiffers) {
  const std::string last = "team rank " + std::to_string(n_ - 1) + " (rank " + std::to_string(n_ - 1) + ")";
  const std::string zero = "team rank 0 (rank 0)";
  void* send = sym_[0];
  void* recv = sym_[1];
  // Every buffer the calls below name, poisoned: none of them may run, so none may change.
  void* const named[4] = {sym_[0], sym_[1], sym_[2], local_};
  for (int k = 0; k < 4; ++k) mp::fill(named[k], bytes_per_buffer(), me_, 80 + k);
  SC_FAILS_SAYING(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv,
                                           last_ ? kCount - 1 : kCount, symcommInt32, "copy",
                                           stream_),
                  symcommInvalidUsage, "SYMCOMM_COLL_CHECK", "disagree on their call 1",
                  last + " passes count " + std::to_string(kCount - 1),
                  zero + " passes " + std::to_string(kCount));
  SC_FAILS_SAYING(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, kCount,
                                           last_ ? symcommFloat32 : symcommInt32,
                                           last_ ? symcommMax : symcommSum, "copy", stream_),
                  symcommInvalidUsage, "call 2", last + " passes type");
  SC_FAILS_SAYING(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, kCount,
                                           symcommInt32, last_ ? symcommMax : symcommSum, "copy",
                                           stream_),
                  symcommInvalidUsage, last + " passes reduction 2", zero + " passes 0");
  SC_FAILS_SAYING(symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, kCount,
                                           symcommInt32, last_ ? n_ - 1 : 0, "copy", stream_),
                  symcommInvalidUsage, last + " passes root " + std::to_string(n_ - 1));
  // Another symmetric object as recv: peers would write it at the wrong offset.
  SC_FAILS_SAYING(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, send, last_ ? sym_[2] : recv,
                                           kCount, symcommInt32, "copy", stream_),
                  symcommInvalidUsage, last + " passes recv at heap offset", zero + " passes at heap offset");
  // A plain recv where the others pass a symmetric one.
  SC_FAILS_SAYING(symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, send, last_ ? local_ : recv,
                                          kCount, symcommInt32, "copy", stream_),
                  symcommInvalidUsage, last + " passes buffers that are not symmetric",
                  zero + " passes symmetric (or registered)");
  // Another operation altogether.
  SC_FAILS_SAYING(last_ ? symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, kCount / 4,
                                                  symcommInt32, "copy", stream_)
                        : symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, kCount,
                                                   symcommInt32, "copy", stream_),
                  symcommInvalidUsage, last + " passes operation alltoall", zero + " passes allgather");
  // The algorithm: "direct" on the last rank ("copy" elsewhere), which both spaces run.
  SC_FAILS_SAYING(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, kCount,
                                           symcommInt32, last_ ? "direct" : "copy", stream_),
                  symcommInvalidUsage, last + " passes algorithm direct", zero + " passes copy");
  // Nothing ran: once every member is past its failed calls (and whatever they might have
  // enqueued has finished), every buffer still holds its poison, here and on every peer.
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(mp::count_mismatches(named[k], bytes_per_buffer(), me_, 80 + k), 0u)
        << (k < 3 ? "symmetric buffer " + std::to_string(k) : std::string("the plain buffer"))
        << " was written by a call that failed";
  expect_all_gather_runs(SYMCOMM_TEAM_WORLD, n_, me_);
}

// Calls that agree although the members' pointers differ: all-gather in place (send is
// each member's own block of recv), broadcast with send NULL off the root, all-reduce in
// place. Each runs, and the all-gather's result is right.
TEST_F(CollCheck, CallsThatAgreeRun) {
  std::vector<int32_t> mine(kCount), got(kCount * static_cast<size_t>(n_));
  for (size_t i = 0; i < kCount; ++i) mine[i] = me_ * 1000 + static_cast<int32_t>(i);
  char* recv = static_cast<char*>(sym_[1]);
  char* own = recv + static_cast<size_t>(me_) * kCount * sizeof(int32_t);
  mp::copy_from_host(own, mine.data(), kCount * sizeof(int32_t));
  SC_OK(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, own, recv, kCount, symcommInt32,
                                 "copy", stream_));
  mp::sync(stream_);
  mp::copy_to_host(got.data(), recv, got.size() * sizeof(int32_t));
  for (int r = 0; r < n_; ++r)
    for (size_t i = 0; i < kCount; ++i)
      ASSERT_EQ(got[static_cast<size_t>(r) * kCount + i], r * 1000 + static_cast<int32_t>(i));
  SC_OK(symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, me_ == 0 ? sym_[0] : nullptr, sym_[1],
                                 kCount, symcommInt32, 0, "copy", stream_));
  SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, sym_[1], sym_[1], kCount, symcommInt32,
                                 symcommSum, "copy", stream_));
  mp::sync(stream_);
}

// A broadcast's send is the root's alone: a root whose send is plain memory while every
// member's recv is symmetric makes the same call as its members (before, the root counted
// its send and took the call for one on plain buffers: the check failed it, and without the
// check the root chose another algorithm than its members, on 8 GPUs, and the call hung).
TEST_F(CollCheck, ABroadcastFromAPlainSendIntoSymmetricBuffers) {
  const int root = n_ - 1;
  std::vector<int32_t> mine(kCount), got(kCount);
  for (size_t i = 0; i < kCount; ++i) mine[i] = 7000 + static_cast<int32_t>(i);
  if (me_ == root) mp::copy_from_host(local_, mine.data(), kCount * sizeof(int32_t));
  mp::fill(sym_[1], kCount * sizeof(int32_t), me_, 99);  // poison
  SC_OK(symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, me_ == root ? local_ : nullptr,
                                 sym_[1], kCount, symcommInt32, root, nullptr, stream_));
  mp::sync(stream_);
  mp::copy_to_host(got.data(), sym_[1], kCount * sizeof(int32_t));
  EXPECT_EQ(got, mine);
}

// The members other than the root do not read send, so it may point anywhere: into their
// own recv (a common way to call it, one expression for every rank) or elsewhere. The check
// once took such a send for an in-place one and failed every member, naming a mismatch with
// the root's plain send.
TEST_F(CollCheck, ABroadcastWhoseMembersPassTheirRecvAsSend) {
  const int root = n_ - 1;
  std::vector<int32_t> mine(kCount), got(kCount);
  for (size_t i = 0; i < kCount; ++i) mine[i] = 8000 + static_cast<int32_t>(i);
  if (me_ == root) mp::copy_from_host(local_, mine.data(), kCount * sizeof(int32_t));
  mp::fill(sym_[1], kCount * sizeof(int32_t), me_, 98);  // poison
  SC_OK(symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, me_ == root ? local_ : sym_[1],
                                 sym_[1], kCount, symcommInt32, root, "copy", stream_));
  mp::sync(stream_);
  mp::copy_to_host(got.data(), sym_[1], kCount * sizeof(int32_t));
  EXPECT_EQ(got, mine);
}

// Registered buffers (cuda space): the same registration at another offset on one member.
TEST_F(CollCheck, RegisteredBuffersAtAnotherOffset) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "registration is for cudaMalloc memory";
  const size_t bytes = 2 * bytes_per_buffer();
  void* buffer = mp::local_alloc(bytes);
  symcommRegistration_t reg = nullptr;
  SC_OK(symcommRegister(comm_, buffer, bytes, &reg));
  char* at = static_cast<char*>(buffer) + (last_ ? 256 : 0);
  SC_FAILS_SAYING(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, sym_[0], at, kCount,
                                           symcommInt32, "copy", stream_),
                  symcommInvalidUsage,
                  "passes recv at offset 256 of registration 0", "passes at offset 0 of registration 0");
  SC_OK(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, sym_[0], buffer, kCount, symcommInt32,
                                 "copy", stream_));
  mp::sync(stream_);
  SC_OK(symcommDeregister(comm_, reg));
  mp::local_free(buffer);
}

// A member that refuses its own arguments (recv NULL) still takes part: it fails with its
// own error, the others with one that quotes it; nobody waits for a call that never comes.
TEST_F(CollCheck, ARefusalOnOneMemberFailsEveryMember) {
  const symcommResult_t rc = symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, sym_[0],
                                                      last_ ? nullptr : sym_[1], kCount,
                                                      symcommInt32, "copy", stream_);
  const std::string said = symcommGetLastError();
  if (last_) {
    EXPECT_EQ(rc, symcommInvalidArgument) << said;
    EXPECT_NE(said.find("recv is NULL"), std::string::npos) << said;
  } else {
    EXPECT_EQ(rc, symcommInvalidUsage) << said;
    EXPECT_NE(said.find("team rank " + std::to_string(n_ - 1) + " (rank " + std::to_string(n_ - 1) +
                        ") refused the call"), std::string::npos) << said;
    EXPECT_NE(said.find("recv is NULL"), std::string::npos) << said;
  }
  expect_all_gather_runs(SYMCOMM_TEAM_WORLD, n_, me_);
}

// A member skips a call: the others end at SYMCOMM_BOOTSTRAP_TIMEOUT (1 s here) naming it,
// and from then on the team's checked calls fail on every member, the late one included,
// at once: no member pairs its call with another's different one. `late` is the member
// that skips (team rank 0 or the last); the world barrier lets it come only once the others
// gave up.
void skipped_call(symcommComm_t comm, symcommStream_t stream, void* const* sym, int late) {
  const int n = mp::nranks(), me = mp::rank();
  const std::string name = "team rank " + std::to_string(late) + " (rank " + std::to_string(late) + ")";
  auto all_gather = [&] {
    return symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, sym[0], sym[1], kCount, symcommInt32,
                                    "copy", stream);
  };
  mp::ScopedEnv bound("SYMCOMM_BOOTSTRAP_TIMEOUT", "1");
  if (me != late) {
    const symcommResult_t rc = all_gather();
    const std::string said = symcommGetLastError();
    EXPECT_EQ(rc, symcommTimeout) << said;
    const std::string who = late == 0 ? "team rank 0 (rank 0) of team 0 sent no verdict"
                            : me == 0 ? name + " of team 0 sent no record"
                                      : "";  // a middle member hears team rank 0's verdict
    EXPECT_NE(said.find(who), std::string::npos) << said;
  }
  {
    mp::ScopedEnv world_bound("SYMCOMM_BOOTSTRAP_TIMEOUT", "60");  // the world's own barrier
    SC_OK(symcommHostBarrier(mp::world()));
  }
  // The late member's call: it is told the checks ended (a member that was not waited for),
  // or finds that the others gave up (team rank 0 late).
  SC_FAILS(all_gather(), symcommTimeout);
  EXPECT_NE(std::strstr(symcommGetLastError(), late == 0 && me == 0 ? "gave up" : "ended there"),
            nullptr) << symcommGetLastError();
  for (int k = 0; k < 2; ++k) {
    SC_FAILS(all_gather(), symcommTimeout);
    EXPECT_NE(std::strstr(symcommGetLastError(), "ended there on every member"), nullptr)
        << symcommGetLastError();
    SC_FAILS(symcommBarrierOnStream(comm, SYMCOMM_TEAM_WORLD, stream), symcommTimeout);
  }
  (void)n;
}

TEST_F(CollCheck, AMemberThatSkipsTheCallEndsTheTeamsChecks) {
  skipped_call(comm_, stream_, sym_, n_ - 1);
}

TEST_F(CollCheck, TeamRankZeroSkipsTheCall) {
  skipped_call(comm_, stream_, sym_, 0);
}

// Barriers take turns with the team's collectives: the last member at a barrier where the
// others make an all-gather fails them all; barriers that agree pass.
TEST_F(CollCheck, ABarrierWhereTheOthersMakeACollective) {
  SC_OK(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_));
  mp::sync(stream_);
  const std::string last = "team rank " + std::to_string(n_ - 1) + " (rank " + std::to_string(n_ - 1) + ")";
  SC_FAILS_SAYING(last_ ? symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_)
                        : symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, sym_[0], sym_[1],
                                                   kCount, symcommInt32, "copy", stream_),
                  symcommInvalidUsage, last + " passes operation barrier",
                  "team rank 0 (rank 0) passes allgather", "(allgather on team rank 0)");
  SC_OK(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_));
  mp::sync(stream_);
  expect_all_gather_runs(SYMCOMM_TEAM_WORLD, n_, me_);
}

// All-to-all-v with host counts: recvcounts[i] of member j must be sendcounts[j] of member
// i. The last member expects one element fewer from member 0 than member 0 sends it.
TEST_F(CollCheck, AllToAllvCountsThatDoNotPairUp) {
  const size_t n = static_cast<size_t>(n_);
  std::vector<size_t> sc(n, 2), sd(n), rc(n, 2), rd(n);
  for (size_t j = 0; j < n; ++j) sd[j] = rd[j] = 2 * j;
  SC_OK(symcommAllToAllvOnStream(comm_, SYMCOMM_TEAM_WORLD, sym_[0], sc.data(), sd.data(), sym_[1],
                                 rc.data(), rd.data(), symcommInt32, "copy", stream_));
  mp::sync(stream_);
  if (last_) rc[0] = 1;
  SC_FAILS_SAYING(symcommAllToAllvOnStream(comm_, SYMCOMM_TEAM_WORLD, sym_[0], sc.data(), sd.data(),
                                           sym_[1], rc.data(), rd.data(), symcommInt32, "copy",
                                           stream_),
                  symcommInvalidUsage, "team rank 0 (rank 0) sends sendcounts[" +
                      std::to_string(n - 1) + "] = 2 elements to team rank " + std::to_string(n - 1),
                  "whose recvcounts[0] is 1");
  expect_all_gather_runs(SYMCOMM_TEAM_WORLD, n_, me_);
}

// Counts on the device where the others pass them on the host (automatic choice: copy in
// the host space, sm on GPUs, which the check compares after the counts).
TEST_F(CollCheck, CountsOnTheDeviceAgainstCountsOnTheHost) {
  const size_t n = static_cast<size_t>(n_);
  std::vector<size_t> sc(n, 2), sd(n), rc(n, 2), rd(n);
  for (size_t j = 0; j < n; ++j) sd[j] = rd[j] = 2 * j;
  auto* arrays = static_cast<size_t*>(mp::local_alloc(4 * n * sizeof(size_t)));
  mp::copy_from_host(arrays, sc.data(), n * sizeof(size_t));
  mp::copy_from_host(arrays + n, sd.data(), n * sizeof(size_t));
  const std::string last = "team rank " + std::to_string(n_ - 1) + " (rank " + std::to_string(n_ - 1) + ")";
  SC_FAILS_SAYING(last_ ? symcommAllToAllvOnStream(comm_, SYMCOMM_TEAM_WORLD, sym_[0], sc.data(),
                                                   sd.data(), sym_[1], rc.data(), rd.data(),
                                                   symcommInt32, nullptr, stream_)
                        : symcommAllToAllvDeviceOnStream(comm_, SYMCOMM_TEAM_WORLD, sym_[0], arrays,
                                                         arrays + n, sym_[1], 2 * n, arrays + 2 * n,
                                                         arrays + 3 * n, symcommInt32, nullptr,
                                                         stream_),
                  symcommInvalidUsage, last + " passes counts on the host",
                  "team rank 0 (rank 0) passes on the device");
  mp::sync(stream_);
  mp::local_free(arrays);
  expect_all_gather_runs(SYMCOMM_TEAM_WORLD, n_, me_);
}

// On a team whose team rank 0 is not world rank 0 (the odd ranks): the records go to the
// team's rank 0, and the team's calls and the world's stay paired separately.
TEST_F(CollCheck, OnATeamOfTheOddRanks) {
  if (n_ < 4) GTEST_SKIP() << "needs a team of at least two odd ranks";
  symcommTeam_t odd;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 1, 2, n_ / 2, &odd));
  if (me_ % 2 == 1) {
    ASSERT_NE(odd, SYMCOMM_TEAM_INVALID);
    const bool last_odd = me_ == n_ - 1 - (n_ % 2 == 0 ? 0 : 1);
    SC_FAILS_SAYING(symcommAllGatherOnStream(comm_, odd, sym_[0], sym_[1],
                                             last_odd ? kCount / 2 : kCount, symcommInt32, "copy",
                                             stream_),
                    symcommInvalidUsage, "team " + std::to_string(odd),
                    "team rank " + std::to_string(n_ / 2 - 1) + " (rank " +
                        std::to_string(2 * (n_ / 2) - 1) + ") passes count " + std::to_string(kCount / 2),
                    "team rank 0 (rank 1) passes " + std::to_string(kCount));
  }
  expect_all_gather_runs(SYMCOMM_TEAM_WORLD, n_, me_);
  if (me_ % 2 == 1) expect_all_gather_runs(odd, n_ / 2, me_ / 2);
  SC_OK(symcommHostBarrier(comm_));
  if (odd != SYMCOMM_TEAM_INVALID) SC_OK(symcommTeamDestroy(comm_, odd));
}

// Without SYMCOMM_COLL_CHECK in the environment, the check is on in the host space: a count
// that differs on the last rank fails every rank, naming both. (In the cuda space it is off
// by default; such a call would run with wrong data there, so it is not made.)
TEST(CollCheckDefault, OnInTheHostSpace) {
  if (mp::space() != symcommSpaceHost) GTEST_SKIP() << "off by default in the cuda space";
  if (mp::nranks() < 2) GTEST_SKIP() << "needs two ranks";
  mp::ScopedEnv unset("SYMCOMM_COLL_CHECK", "auto");  // the default, whatever the caller set
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  const bool last = mp::rank() == mp::nranks() - 1;
  std::vector<int32_t> send(kCount), recv(kCount * static_cast<size_t>(mp::nranks()));
  SC_FAILS_SAYING(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send.data(), recv.data(),
                                           last ? kCount - 1 : kCount, symcommInt32, nullptr,
                                           nullptr),
                  symcommInvalidUsage, "SYMCOMM_COLL_CHECK", "passes count");
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

}  // namespace
