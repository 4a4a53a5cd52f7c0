// symcommRegister: buffers the application allocated itself, reached by peers through
// symcommPtr and written in place by the collectives; its errors, the same on every rank.
#include <cstdlib>
#include <cstring>
#include <string>

#include "coll_caps.h"
#include "mp.h"

namespace {

bool cuda() { return mp::space() == symcommSpaceCuda; }

// After `algo` refused a collective of `op` (symcommNotSupported): only by design, where its
// descriptor leaves the operation out, where it needs load/store reach of members on other
// nodes, or where the library it is built on is missing. Any other algorithm runs every
// collective on registered buffers.
void expect_refused_by_design(const char* algo, symcommCollOp_t op) {
  const coll_caps::Caps caps = coll_caps::of(algo);
  EXPECT_TRUE(!caps.does(op) || !caps.reaches(mp::nodes()) || caps.library != nullptr)
      << algo << ": " << symcommGetLastError();
}

// One communicator per test; a buffer of the space under test that is not symmetric.
class Register : public ::testing::Test {
 protected:
  void SetUp() override {
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
    n_ = mp::nranks();
    me_ = mp::rank();
  }
  void TearDown() override {
    if (comm_) {
      EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
    }
    for (void* p : plain_) mp::local_free(p);
  }
  char* plain(size_t bytes) {
    plain_.push_back(mp::local_alloc(bytes));
    return static_cast<char*>(plain_.back());
  }
  symcommComm_t comm_ = nullptr;
  int n_ = 0, me_ = 0;
  std::vector<void*> plain_;
};

TEST_F(Register, BadArgumentsFailOnEveryRank) {
  symcommRegistration_t r = nullptr;
  char* p = plain(1 << 16);
  SC_FAILS(symcommRegister(comm_, nullptr, 4096, &r), symcommInvalidArgument);
  EXPECT_EQ(r, nullptr);
  SC_FAILS(symcommRegister(comm_, p, 0, &r), symcommInvalidArgument);
  SC_FAILS(symcommRegister(comm_, p, 4096, nullptr), symcommInvalidArgument);
  // Ranks that pass different sizes: the same error everywhere, naming a rank.
  SC_FAILS(symcommRegister(comm_, p, 4096 + static_cast<size_t>(me_ == 0), &r),
           symcommInvalidUsage);
  // Only rank 0 passes NULL: every rank fails, with rank 0's reason.
  SC_FAILS(symcommRegister(comm_, me_ == 0 ? nullptr : p, 4096, &r), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "NULL"), nullptr) << symcommGetLastError();
  void* sym = nullptr;
  SC_OK(symcommMalloc(comm_, 4096, &sym));
  SC_FAILS(symcommRegister(comm_, sym, 4096, &r), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "heap"), nullptr) << symcommGetLastError();
  SC_OK(symcommFree(comm_, sym));
  SC_FAILS(symcommDeregister(comm_, nullptr), symcommInvalidArgument);
  if (!cuda()) {
    // The host space cannot share a process's private memory, and says so.
    SC_FAILS(symcommRegister(comm_, p, 4096, &r), symcommNotSupported);
    EXPECT_NE(std::strstr(symcommGetLastError(), "host"), nullptr) << symcommGetLastError();
    return;
  }
  std::vector<char> host(4096);
  SC_FAILS(symcommRegister(comm_, host.data(), host.size(), &r), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "not memory of this rank's GPU"), nullptr)
      << symcommGetLastError();
  SC_FAILS(symcommRegister(comm_, p + 4096, size_t{1} << 22, &r), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "past the end"), nullptr) << symcommGetLastError();
  SC_OK(symcommRegister(comm_, p, 8192, &r));
  symcommRegistration_t other = r;
  SC_FAILS(symcommRegister(comm_, p + 4096, 8192, &other), symcommInvalidArgument);  // overlaps
  EXPECT_EQ(other, nullptr);  // a failed call hands out no handle
  EXPECT_NE(std::strstr(symcommGetLastError(), "overlaps"), nullptr) << symcommGetLastError();
  SC_OK(symcommDeregister(comm_, r));
  SC_FAILS(symcommDeregister(comm_, r), symcommInvalidArgument);  // no longer live
}

// Each rank writes its pattern into slot `me` of every peer's buffer through symcommPtr;
// two registrations share one allocation (its IPC mapping is opened once and counted).
TEST_F(Register, PeersReachTheBufferThroughSymcommPtr) {
  if (!cuda()) GTEST_SKIP() << "registration needs the cuda space";
  const size_t slot = 12345, bytes = slot * static_cast<size_t>(n_);
  char* alloc = plain(2 * bytes + 1024);
  char* a = alloc + 256;        // interior pointers
  char* b = a + bytes + 100;
  symcommRegistration_t ra = nullptr, rb = nullptr;
  SC_OK(symcommRegister(comm_, a, bytes, &ra));
  SC_OK(symcommRegister(comm_, b, bytes, &rb));
  for (char* buf : {a, b}) {
    for (int pe = 0; pe < n_; ++pe) {
      int accessible = 0;
      SC_OK(symcommPeerAccessible(comm_, pe, &accessible));
      char* there = static_cast<char*>(symcommPtr(comm_, buf + static_cast<size_t>(me_) * slot, pe));
      if (!accessible) {
        EXPECT_EQ(there, nullptr);
        continue;
      }
      ASSERT_NE(there, nullptr) << symcommGetLastError();
      if (pe == me_) {
        EXPECT_EQ(there, buf + static_cast<size_t>(me_) * slot);
      }
      mp::fill(there, slot, me_, buf == a ? 1 : 2);
    }
  }
  SC_OK(symcommHostBarrier(comm_));
  for (char* buf : {a, b})
    for (int r = 0; r < n_; ++r) {
      int accessible = 0;  // symmetric: rank r wrote here where this rank reaches it
      SC_OK(symcommPeerAccessible(comm_, r, &accessible));
      if (!accessible) continue;
      EXPECT_EQ(mp::count_mismatches(buf + static_cast<size_t>(r) * slot, slot, r, buf == a ? 1 : 2), 0u)
          << "slot of rank " << r;
    }
  EXPECT_EQ(symcommPtr(comm_, a, n_), nullptr);  // pe out of range
  SC_OK(symcommHostBarrier(comm_));
  SC_OK(symcommDeregister(comm_, ra));
  EXPECT_EQ(symcommPtr(comm_, a, me_), nullptr);  // no longer registered
  EXPECT_NE(symcommPtr(comm_, b, me_), nullptr) << symcommGetLastError();
  SC_OK(symcommDeregister(comm_, rb));
}

// With a workspace too small to stage anything, "copy" still runs into registered receive
// buffers: it writes them in place, through the peers' mappings.
TEST(RegisterColl, CollectivesWriteRegisteredBuffersInPlace) {
  if (!cuda()) GTEST_SKIP() << "registration needs the cuda space";
  if (mp::nodes() > 1)
    GTEST_SKIP() << "the net transport does not reach registered buffers: across nodes, copy "
                    "stages through the workspace";
  mp::ScopedEnv ws("SYMCOMM_COLL_WORKSPACE", "256");  // under 256 bytes per member
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  const int n = mp::nranks(), me = mp::rank();
  const size_t nn = static_cast<size_t>(n), count = 3001, b = count * sizeof(float);
  symcommStream_t s = mp::new_stream();
  char* send = static_cast<char*>(mp::local_alloc(b * nn));
  char* recv = static_cast<char*>(mp::local_alloc(b * nn + 512));
  char* r = recv + 256;
  mp::fill(send, b * nn, me, 7);
  mp::fill(recv, b * nn + 512, me, 8);  // poison: the failing call below must not write it
  // Not registered: the workspace cannot hold one slot per member.
  SC_FAILS(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, r, count, symcommFloat32,
                                    "copy", s), symcommOutOfMemory);
  EXPECT_NE(std::strstr(symcommGetLastError(), "SYMCOMM_COLL_WORKSPACE"), nullptr);
  // Nothing was enqueued: once every rank's stream drained, recv still holds its poison.
  mp::sync(s);
  SC_OK(symcommHostBarrier(comm));
  EXPECT_EQ(mp::count_mismatches(recv, b * nn + 512, me, 8), 0u)
      << "the all-gather that failed wrote the receive buffer";
  symcommRegistration_t reg = nullptr;
  SC_OK(symcommRegister(comm, recv, b * nn + 512, &reg));
  // All-gather: block j of r is rank j's send (bytes [0, b) of its pattern).
  SC_OK(symcommHostBarrier(comm));
  SC_OK(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, r, count, symcommFloat32,
                                 "copy", s));
  mp::sync(s);
  for (int j = 0; j < n; ++j)
    EXPECT_EQ(mp::count_mismatches(r + static_cast<size_t>(j) * b, b, j, 7), 0u) << "all-gather from " << j;
  // All-to-all: block j of r is block `me` of rank j's send; compared against rank j's
  // pattern at that offset, written here for reference.
  SC_OK(symcommHostBarrier(comm));
  SC_OK(symcommAllToAllOnStream(comm, SYMCOMM_TEAM_WORLD, send, r, count, symcommFloat32,
                                "copy", s));
  mp::sync(s);
  char* want = static_cast<char*>(mp::local_alloc(b * nn));
  for (int j = 0; j < n; ++j) {
    mp::fill(want, b * nn, j, 7);
    std::vector<uint8_t> got = mp::fetch(s, r + static_cast<size_t>(j) * b, b);
    std::vector<uint8_t> ref = mp::fetch(s, want + static_cast<size_t>(me) * b, b);
    EXPECT_TRUE(got == ref) << "all-to-all from " << j;
  }
  // Broadcast from the last rank.
  SC_OK(symcommHostBarrier(comm));
  SC_OK(symcommBroadcastOnStream(comm, SYMCOMM_TEAM_WORLD, send, r, count, symcommFloat32, n - 1,
                                 "copy", s));
  mp::sync(s);
  EXPECT_EQ(mp::count_mismatches(r, b, n - 1, 7), 0u) << "broadcast";
  // Every algorithm's broadcast from rank 1 into the registered buffer (relay stores into it
  // in place, through the peers' mappings).
  for (int i = 0; i < symcommCollAlgorithmCount(); ++i) {
    const char* algo = symcommCollAlgorithmName(i);
    SCOPED_TRACE(algo);
    mp::store(r, std::vector<uint8_t>(b, 0xAB));
    SC_OK(symcommHostBarrier(comm));
    symcommResult_t rc = symcommBroadcastOnStream(comm, SYMCOMM_TEAM_WORLD, send, r, count,
                                                  symcommFloat32, 1 % n, algo, s);
    mp::sync(s);
    if (rc == symcommNotSupported) {
      expect_refused_by_design(algo, symcommCollBroadcast);
      continue;
    }
    ASSERT_EQ(rc, symcommSuccess) << symcommGetLastError();
    EXPECT_EQ(mp::count_mismatches(r, b, 1 % n, 7), 0u) << "broadcast";
  }
  // Every algorithm gives the same all-gather into the registered buffer.
  for (int i = 0; i < symcommCollAlgorithmCount(); ++i) {
    const char* algo = symcommCollAlgorithmName(i);
    SCOPED_TRACE(algo);
    mp::store(r, std::vector<uint8_t>(b * nn, 0xAB));
    SC_OK(symcommHostBarrier(comm));
    symcommResult_t rc = symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, r, count,
                                                  symcommFloat32, algo, s);
    mp::sync(s);
    if (rc == symcommNotSupported) {
      expect_refused_by_design(algo, symcommCollAllGather);
      continue;
    }
    ASSERT_EQ(rc, symcommSuccess) << symcommGetLastError();
    for (int j = 0; j < n; ++j)
      EXPECT_EQ(mp::count_mismatches(r + static_cast<size_t>(j) * b, b, j, 7), 0u) << "from " << j;
  }
  SC_OK(symcommHostBarrier(comm));
  SC_OK(symcommDeregister(comm, reg));
  mp::local_free(want);
  mp::local_free(send);
  mp::local_free(recv);
  mp::free_stream(s);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// Every algorithm's all-reduce in place on a registered buffer, at an offset of 256 bytes
// (twoshot reads and writes it straight through the peers' mappings): rank k holds
// (k + 1) (i % 7) at element i.
TEST(RegisterColl, AllReducesInPlaceOnARegisteredBuffer) {
  if (!cuda()) GTEST_SKIP() << "registration needs the cuda space";
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  const int n = mp::nranks(), me = mp::rank();
  const size_t count = 300001, b = count * sizeof(float);
  symcommStream_t s = mp::new_stream();
  std::vector<float> mine(count), sum(count);
  for (size_t i = 0; i < count; ++i) {
    mine[i] = static_cast<float>((me + 1) * static_cast<int>(i % 7));
    sum[i] = static_cast<float>(n * (n + 1) / 2 * static_cast<int>(i % 7));
  }
  const auto bytes_of = [](const std::vector<float>& v) {
    return std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(v.data()),
                                reinterpret_cast<const uint8_t*>(v.data() + v.size()));
  };
  // The registered buffer starts 16-byte aligned on every rank, then 8 bytes further on the
  // odd ranks only: the same offset in it is then aligned differently on different ranks,
  // and algorithms that choose by alignment (twoshot: in place or staged) must still agree.
  char* buf = static_cast<char*>(mp::local_alloc(b + 512));
  for (const size_t shift : {size_t{0}, size_t{8} * static_cast<size_t>(me % 2)}) {
    SCOPED_TRACE(testing::Message() << "registered from +" << shift);
    char* base = buf + shift;
    char* r = base + 256;
    symcommRegistration_t reg = nullptr;
    SC_OK(symcommRegister(comm, base, b + 256, &reg));
    for (int i = 0; i < symcommCollAlgorithmCount(); ++i) {
      const char* algo = symcommCollAlgorithmName(i);
      SCOPED_TRACE(algo);
      mp::store(r, bytes_of(mine));
      SC_OK(symcommHostBarrier(comm));
      symcommResult_t rc = symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, r, r, count,
                                                    symcommFloat32, symcommSum, algo, s);
      mp::sync(s);
      if (rc == symcommNotSupported) {
        expect_refused_by_design(algo, symcommCollAllReduce);
        continue;
      }
      ASSERT_EQ(rc, symcommSuccess) << symcommGetLastError();
      EXPECT_TRUE(mp::fetch(s, r, b) == bytes_of(sum));
    }
    SC_OK(symcommHostBarrier(comm));
    SC_OK(symcommDeregister(comm, reg));
  }
  mp::local_free(buf);
  mp::free_stream(s);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// Finalize releases registrations still live; the application's buffer stays its own.
TEST(RegisterColl, FinalizeReleasesLiveRegistrations) {
  if (!cuda()) GTEST_SKIP() << "registration needs the cuda space";
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  char* p = static_cast<char*>(mp::local_alloc(1 << 20));
  symcommRegistration_t reg = nullptr;
  SC_OK(symcommRegister(comm, p, 1 << 20, &reg));
  SC_OK(symcommHostBarrier(comm));
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
  mp::fill(p, 1 << 20, mp::rank(), 3);
  EXPECT_EQ(mp::count_mismatches(p, 1 << 20, mp::rank(), 3), 0u);
  mp::local_free(p);
}

}  // namespace
