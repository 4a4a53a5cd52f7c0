// The "nccl" collective algorithm and the "nccl" and "nccl_pipelined" decomposition backends.
// In the host space (CI): asked for by name (argument or SYMCOMM_COLL_ALGO) they fail with
// symcommNotSupported and say why, and automatic choices never pick them. In the cuda space
// (GPUs, one per rank): every operation, type and reduction gives the same bytes as "copy" on
// the world and on a strided team; NCCL communicators follow team membership, not team ids
// (which are reused); the first use over a team cannot be captured in a CUDA graph, later ones
// can; transposes (small, and with blocks larger than NCCL buffers) and halo exchanges of
// both backends give the same bytes as the copy backend's; ranks that cannot address each
// other (each naming its own node) run every operation and a decomposition on NCCL. (The
// coll and decomp suites also run every test on "nccl" and "nccl_pipelined", as on every
// registered algorithm and backend.) The decomposition backends are in nccl_decomp_test.cc,
// ranks that cannot address each other in nccl_no_peer_access_test.cc (one binary).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nccl_fixture.h"
#include "symcomm/decomp.h"

namespace nccl_test {

// ---- Host space: not available, and says so ------------------------------------------

TEST(NcclHostSpace, AskedForByNameFailsWithNotSupported) {
  if (mp::space() != symcommSpaceHost) GTEST_SKIP() << "the host space's behaviour";
  const int n = mp::nranks();
  const size_t count = 4;
  std::vector<float> send(count * static_cast<size_t>(n), 1.0f), recv(send.size());
  for (Op op : kOps) {
    SCOPED_TRACE(op_name(op));
    SC_FAILS(call(op, mp::world(), SYMCOMM_TEAM_WORLD, send.data(), recv.data(), count,
                  symcommFloat32, symcommSum, 0, "nccl", nullptr),
             symcommNotSupported);
    const std::string why = symcommGetLastError();
    EXPECT_NE(why.find("'nccl'"), std::string::npos) << why;
    EXPECT_NE(why.find("cuda memory space"), std::string::npos) << why;
  }
  {
    mp::ScopedEnv algo("SYMCOMM_COLL_ALGO", "nccl");
    SC_FAILS(symcommAllReduceOnStream(mp::world(), SYMCOMM_TEAM_WORLD, send.data(), recv.data(),
                                      count, symcommFloat32, symcommSum, nullptr, nullptr),
             symcommNotSupported);
  }
  // Automatic choices never pick it here. Every element of the sum is n; the rest of recv
  // (sized for the all-gather) is left alone.
  std::fill(recv.begin(), recv.end(), -1.0f);
  SC_OK(symcommAllReduceOnStream(mp::world(), SYMCOMM_TEAM_WORLD, send.data(), recv.data(), count,
                                 symcommFloat32, symcommSum, nullptr, nullptr));
  EXPECT_EQ(wrong_elements(recv, [&](size_t i) { return i < count ? n : -1; }), "");
}

TEST(NcclHostSpace, DecompBackendAskedForByNameFailsWithNotSupported) {
  if (mp::space() != symcommSpaceHost) GTEST_SKIP() << "the host space's behaviour";
  symcommDecompConfig_t c;
  symcommDecompConfigInit(&c);
  c.gdims[0] = c.gdims[1] = c.gdims[2] = 8;
  c.pdims[0] = 1;
  c.pdims[1] = mp::nranks();
  symcommDecomp_t d = nullptr;
  for (const char* backend : {"nccl", "nccl_pipelined"}) {
    SCOPED_TRACE(backend);
    std::snprintf(c.backend, sizeof c.backend, "%s", backend);
    SC_FAILS(symcommDecompCreate(mp::world(), &c, &d), symcommNotSupported);
    const std::string why = symcommGetLastError();
    EXPECT_NE(why.find("named " + std::string(backend) + " can run on this communicator"),
              std::string::npos) << why;
    EXPECT_NE(why.find("cuda memory space"), std::string::npos) << why;
    EXPECT_EQ(d, nullptr);
  }
  // A name no backend has stays an invalid argument.
  std::snprintf(c.backend, sizeof c.backend, "no-such-backend");
  SC_FAILS(symcommDecompCreate(mp::world(), &c, &d), symcommInvalidArgument);
  // Automatic choice: some other backend.
  c.backend[0] = '\0';
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  const char* name = nullptr;
  SC_OK(symcommDecompGetBackend(d, &name));
  EXPECT_STRNE(name, "nccl");
  EXPECT_STRNE(name, "nccl_pipelined");
  SC_OK(symcommDecompDestroy(d));
}

// ---- Cuda space: the same bytes as copy ------------------------------------------------

TEST_F(NcclGpu, EveryOperationTypeAndReductionMatchesCopy) {
  const int n = mp::nranks(), me = mp::rank();
  for (Op op : kOps)
    for (const Type& t : kTypes)
      for (symcommRedOp_t red : {symcommSum, symcommMin, symcommMax}) {
        if (!reduces(op) && red != symcommSum) continue;
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}, size_t{70000}}) {
          SCOPED_TRACE(std::string(op_name(op)) + " " + t.name + " op " + std::to_string(red) +
                       " count " + std::to_string(count));
          compare(op, SYMCOMM_TEAM_WORLD, n, me, t, red, count, false);
          if (op != Op::AllToAll && op != Op::ReduceScatter)
            compare(op, SYMCOMM_TEAM_WORLD, n, me, t, red, count, true);
        }
      }
}

// Buffers NCCL's kernels on this rank's GPU cannot reach are refused before anything is
// enqueued, naming the buffer and why: pageable host memory, and (with two GPUs or more
// visible) another GPU's memory.
TEST_F(NcclGpu, RefusesBuffersItsKernelsCannotReach) {
  const size_t count = 64, bytes = count * sizeof(float) * static_cast<size_t>(mp::nranks());
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, bytes), cudaSuccess);
  std::vector<float> pageable(bytes / sizeof(float), 1.0f);
  SC_FAILS(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, pageable.data(), dev, count,
                                    symcommFloat32, symcommSum, "nccl", stream_),
           symcommNotSupported);
  EXPECT_NE(std::strstr(symcommGetLastError(), "send 0x"), nullptr) << symcommGetLastError();
  EXPECT_NE(std::strstr(symcommGetLastError(), "pageable host memory"), nullptr)
      << symcommGetLastError();
  SC_FAILS(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, dev, pageable.data(), count,
                                    symcommFloat32, "nccl", stream_),
           symcommNotSupported);
  EXPECT_NE(std::strstr(symcommGetLastError(), "recv 0x"), nullptr) << symcommGetLastError();
  int devices = 0, mine = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  ASSERT_EQ(cudaGetDevice(&mine), cudaSuccess);
  if (devices > 1) {
    void* other = nullptr;
    ASSERT_EQ(cudaSetDevice((mine + 1) % devices), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&other, bytes), cudaSuccess);
    ASSERT_EQ(cudaSetDevice(mine), cudaSuccess);
    SC_FAILS(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, dev, other, count,
                                      symcommFloat32, symcommSum, "nccl", stream_),
             symcommNotSupported);
    EXPECT_NE(std::strstr(symcommGetLastError(), "memory of another GPU"), nullptr)
        << symcommGetLastError();
    ASSERT_EQ(cudaFree(other), cudaSuccess);
  }
  // The same buffers that NCCL can reach run (a check that the refusals above are about the
  // buffers, not the call).
  SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, dev, dev, count, symcommFloat32,
                                 symcommSum, "nccl", stream_));
  mp::sync(stream_);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
}

TEST_F(NcclGpu, StridedTeamMatchesCopy) {
  const int n = mp::nranks();
  // Every other rank (n / 2 of them, at least 1), then the others.
  for (int start : {0, 1}) {
    const int size = (n - start + 1) / 2;
    if (size == 0) continue;
    symcommTeam_t team = SYMCOMM_TEAM_INVALID;
    SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, start, 2, size, &team));
    int me = -1;
    SC_OK(symcommTeamRank(comm_, team, &me));
    for (Op op : kOps) {
      SCOPED_TRACE(std::string(op_name(op)) + " on the team from " + std::to_string(start));
      if (me >= 0) compare(op, team, size, me, kTypes[8], symcommSum, 3001, false);
      else {  // the same host barriers as the members
        for (int k = 0; k < 4; ++k) SC_OK(symcommHostBarrier(comm_));
      }
    }
    if (me >= 0) SC_OK(symcommTeamDestroy(comm_, team));
  }
}

// Team ids are reused after a team is destroyed; NCCL communicators follow membership.
TEST_F(NcclGpu, TeamIdReusedWithOtherMembers) {
  const int n = mp::nranks();
  for (int first : {0, 1}) {
    const int size = n - first;  // all ranks, then all but rank 0
    if (size == 0) continue;
    symcommTeam_t team = SYMCOMM_TEAM_INVALID;
    SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, first, 1, size, &team));
    int me = -1;
    SC_OK(symcommTeamRank(comm_, team, &me));
    if (me >= 0) {
      const size_t count = 1000;
      std::vector<int32_t> mine(count, mp::rank() + 1);
      void* buf = mp::local_alloc(count * 4);
      mp::copy_from_host(buf, mine.data(), count * 4);
      SC_OK(symcommAllReduceOnStream(comm_, team, buf, buf, count, symcommInt32, symcommSum,
                                     "nccl", stream_));
      mp::sync(stream_);
      std::vector<int32_t> got(count);
      mp::copy_to_host(got.data(), buf, count * 4);
      int32_t want = 0;
      for (int r = first; r < n; ++r) want += r + 1;
      EXPECT_EQ(wrong_elements(got, [&](size_t) { return want; }), "");
      mp::local_free(buf);
      SC_OK(symcommTeamDestroy(comm_, team));
    }
    SC_OK(symcommHostBarrier(comm_));
  }
}

// The selection table names NCCL for large all-reduces on small teams; in a capture before
// NCCL's first use over the team the automatic choice takes another algorithm rather than
// failing, and the captured graph computes the sum.
TEST_F(NcclGpu, AutomaticChoiceInACaptureBeforeFirstUse) {
  const size_t count = 1 << 20;  // 4 MiB per rank: NCCL's row (teams of up to 4)
  void* buf = mp::local_alloc(count * 4);
  replay_captured_sum(buf, count, nullptr, 2);
  mp::local_free(buf);
}

TEST_F(NcclGpu, FirstUseCannotBeCapturedLaterUsesCan) {
  const size_t count = 4096;
  void* buf = mp::local_alloc(count * 4);
  std::vector<float> ones(count, 1.0f);
  mp::copy_from_host(buf, ones.data(), count * 4);
  ASSERT_EQ(mp::begin_capture(stream_), 0);
  const symcommResult_t first = symcommAllReduceOnStream(
      comm_, SYMCOMM_TEAM_WORLD, buf, buf, count, symcommFloat32, symcommSum, "nccl", stream_);
  const std::string why = symcommGetLastError();
  void* empty = mp::end_capture(stream_);
  if (empty) mp::destroy_graph(empty);
  // A named algorithm that refuses the call says so (symcomm.h: symcommNotSupported, why).
  EXPECT_EQ(first, symcommNotSupported) << why;
  EXPECT_NE(why.find("cannot be captured"), std::string::npos) << why;
  // Eager once (makes the communicator), then captured and replayed.
  SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, buf, buf, count, symcommFloat32,
                                 symcommSum, "nccl", stream_));
  mp::sync(stream_);
  replay_captured_sum(buf, count, "nccl", 3);
  mp::local_free(buf);
}

// A captured all-to-all from cudaMalloc memory into a symmetric buffer, 2 MiB per block: NCCL
// would register the symmetric buffer (cuMem memory) in the capture and not the other, a mix
// it does not allow, and the replays received nothing from the peers (NCCL 2.28.3, 2 x H200)
// until symcomm set NCCL_GRAPH_REGISTER=0 when it loads NCCL (nccl_lib.cc).
TEST_F(NcclGpu, CapturedWithAPlainSendIntoASymmetricRecv) {
  const int n = mp::nranks(), me = mp::rank();
  const size_t count = size_t{1} << 19, block = count * 4, bytes = block * static_cast<size_t>(n);
  void* send = mp::local_alloc(bytes);
  void* recv = nullptr;
  SC_OK(symcommMalloc(comm_, bytes, &recv));
  auto data = [&](uint64_t seed, int rank) {  // rank's send: block j for member j
    return small_integers(kTypes[2], count * static_cast<size_t>(n), seed + static_cast<uint64_t>(rank));
  };
  auto run = [&](uint64_t seed, void* exec) {
    put(send, data(seed, me));
    put(recv, std::vector<uint8_t>(bytes, 0xAB));
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));
    if (exec) {
      ASSERT_EQ(mp::launch_graph(exec, stream_), 0);
    } else {
      SC_OK(symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, kTypes[2].id,
                                    "nccl", stream_));
    }
    std::vector<uint8_t> want;
    for (int r = 0; r < n; ++r) {
      const std::vector<uint8_t> theirs = data(seed, r);
      want.insert(want.end(), theirs.begin() + static_cast<long>(static_cast<size_t>(me) * block),
                  theirs.begin() + static_cast<long>((static_cast<size_t>(me) + 1) * block));
    }
    const std::vector<uint8_t> got = fetch(recv, bytes);
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(std::equal(got.begin() + static_cast<long>(static_cast<size_t>(r) * block),
                             got.begin() + static_cast<long>((static_cast<size_t>(r) + 1) * block),
                             want.begin() + static_cast<long>(static_cast<size_t>(r) * block)))
          << (exec ? "replay" : "eager") << ", seed " << seed << ": block from rank " << r;
    SC_OK(symcommHostBarrier(comm_));
  };
  run(seed_, nullptr);  // makes the NCCL communicator, outside the capture
  const char* reg = std::getenv("NCCL_GRAPH_REGISTER");
  EXPECT_STREQ(reg ? reg : "(unset)", "0") << "symcomm sets it when it loads NCCL";
  ASSERT_EQ(mp::begin_capture(stream_), 0);
  const symcommResult_t captured = symcommAllToAllOnStream(
      comm_, SYMCOMM_TEAM_WORLD, send, recv, count, kTypes[2].id, "nccl", stream_);
  const std::string why = symcommGetLastError();
  void* exec = mp::end_capture(stream_);
  ASSERT_EQ(captured, symcommSuccess) << why;
  ASSERT_NE(exec, nullptr);
  for (uint64_t k = 1; k <= 3; ++k) run(seed_ + 1000 * k, exec);
  mp::destroy_graph(exec);
  SC_OK(symcommFree(comm_, recv));
  mp::local_free(send);
}

}  // namespace nccl_test
