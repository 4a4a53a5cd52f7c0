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
// registered algorithm and backend.)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "mp.h"
#include "transpose_check.h"
#include "symcomm/decomp.h"

namespace {

enum class Op { AllGather, AllToAll, ReduceScatter, AllReduce, Broadcast };
const Op kOps[] = {Op::AllGather, Op::AllToAll, Op::ReduceScatter, Op::AllReduce, Op::Broadcast};
const char* op_name(Op op) {
  const char* names[] = {"allgather", "alltoall", "reducescatter", "allreduce", "broadcast"};
  return names[static_cast<int>(op)];
}
bool reduces(Op op) { return op == Op::ReduceScatter || op == Op::AllReduce; }

// "" where got[i] == want(i) for every element, else how many differ and the first that does.
template <typename T, typename Want>
std::string wrong_elements(const std::vector<T>& got, Want want) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != static_cast<T>(want(i)) && bad++ == 0) first = i;
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(got.size()) + " elements wrong, the first " +
         std::to_string(first) + ": " + std::to_string(got[first]) + " for " +
         std::to_string(static_cast<T>(want(first)));
}

symcommResult_t call(Op op, symcommComm_t c, symcommTeam_t team, const void* s, void* r,
                     size_t count, symcommDataType_t t, symcommRedOp_t red, int root,
                     const char* algo, symcommStream_t st) {
  switch (op) {
    case Op::AllGather: return symcommAllGatherOnStream(c, team, s, r, count, t, algo, st);
    case Op::AllToAll: return symcommAllToAllOnStream(c, team, s, r, count, t, algo, st);
    case Op::ReduceScatter:
      return symcommReduceScatterOnStream(c, team, s, r, count, t, red, algo, st);
    case Op::AllReduce: return symcommAllReduceOnStream(c, team, s, r, count, t, red, algo, st);
    case Op::Broadcast: return symcommBroadcastOnStream(c, team, s, r, count, t, root, algo, st);
  }
  return symcommInternalError;
}

// Elements of send and recv for `count` (as the C API names it) on a team of n.
size_t send_elems(Op op, size_t count, int n) {
  return op == Op::AllToAll || op == Op::ReduceScatter ? count * static_cast<size_t>(n) : count;
}
size_t recv_elems(Op op, size_t count, int n) {
  return op == Op::AllGather || op == Op::AllToAll ? count * static_cast<size_t>(n) : count;
}

struct Type {
  symcommDataType_t id;
  size_t size;
  const char* name;
};
const Type kTypes[] = {{symcommInt8, 1, "int8"},         {symcommUint8, 1, "uint8"},
                       {symcommInt32, 4, "int32"},       {symcommUint32, 4, "uint32"},
                       {symcommInt64, 8, "int64"},       {symcommUint64, 8, "uint64"},
                       {symcommFloat16, 2, "float16"},   {symcommBfloat16, 2, "bfloat16"},
                       {symcommFloat32, 4, "float32"},   {symcommFloat64, 8, "float64"}};

// Small non-negative integers (0..7) in `t`: exact in every type, and so are their sums over
// a few ranks, whatever order NCCL adds them in.
std::vector<uint8_t> small_integers(const Type& t, size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n * t.size);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; ++i) {
    const unsigned v = static_cast<unsigned>(rng() % 8);
    uint8_t* p = &out[i * t.size];
    switch (t.id) {
      case symcommFloat16: {  // 1.0 is 0x3c00; v < 8 fits the 10-bit mantissa exactly
        uint16_t h = 0;
        if (v) {
          int e = 31 - __builtin_clz(v);
          h = static_cast<uint16_t>((e + 15) << 10 | ((v << (10 - e)) & 0x3ff));
        }
        std::memcpy(p, &h, 2);
        break;
      }
      case symcommBfloat16: {  // the high half of the float32
        float f = static_cast<float>(v);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        uint16_t b = static_cast<uint16_t>(bits >> 16);
        std::memcpy(p, &b, 2);
        break;
      }
      case symcommFloat32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
      case symcommFloat64: { double d = v; std::memcpy(p, &d, 8); break; }
      default: { uint64_t x = v; std::memcpy(p, &x, t.size); break; }  // little endian
    }
  }
  return out;
}

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

class NcclGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "NCCL runs in the cuda space only";
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
    stream_ = mp::new_stream();
    seed_ = mp::test_seed();
    seed_trace_.emplace(__FILE__, __LINE__, mp::seed_note(seed_));  // in every failure
  }
  void TearDown() override {
    if (!comm_) return;
    mp::free_stream(stream_);
    EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
  }
  std::vector<uint8_t> fetch(const void* p, size_t bytes) { return mp::fetch(stream_, p, bytes); }
  void put(void* p, const std::vector<uint8_t>& v) { mp::store(p, v); }

  // Captures an in-place float sum of `count` elements with `algorithm` into a graph, then
  // replays it `replays` times on ones: every element must be the rank count each time.
  void replay_captured_sum(void* buf, size_t count, const char* algorithm, int replays) {
    ASSERT_EQ(mp::begin_capture(stream_), 0);
    const symcommResult_t captured = symcommAllReduceOnStream(
        comm_, SYMCOMM_TEAM_WORLD, buf, buf, count, symcommFloat32, symcommSum, algorithm, stream_);
    const std::string why = symcommGetLastError();
    void* exec = mp::end_capture(stream_);
    ASSERT_EQ(captured, symcommSuccess) << why;
    ASSERT_NE(exec, nullptr);
    const std::vector<float> ones(count, 1.0f);
    for (int replay = 0; replay < replays; ++replay) {
      mp::copy_from_host(buf, ones.data(), count * 4);
      SC_OK(symcommHostBarrier(comm_));
      ASSERT_EQ(mp::launch_graph(exec, stream_), 0);
      mp::sync(stream_);
      std::vector<float> got(count);
      mp::copy_to_host(got.data(), buf, count * 4);
      ASSERT_EQ(wrong_elements(got, [](size_t) { return mp::nranks(); }), "")
          << "replay " << replay;
      SC_OK(symcommHostBarrier(comm_));
    }
    mp::destroy_graph(exec);
  }

  // Runs `op` with "copy" and with "nccl" on the same input and compares the bytes;
  // `in_place` uses one buffer where the operation allows it.
  void compare(Op op, symcommTeam_t team, int n, int me, const Type& t, symcommRedOp_t red,
               size_t count, bool in_place) {
    const size_t sb = send_elems(op, count, n) * t.size, rb = recv_elems(op, count, n) * t.size;
    const int root = n - 1;
    std::vector<uint8_t> input =
        small_integers(t, send_elems(op, count, n), seed_ + static_cast<uint64_t>(mp::rank()));
    std::vector<uint8_t> results[2];
    const char* algos[2] = {"copy", "nccl"};
    for (int k = 0; k < 2; ++k) {
      void* recv = mp::local_alloc(rb ? rb : 1);
      put(recv, std::vector<uint8_t>(rb, 0xAB));
      void* send = recv;
      if (!in_place) {
        send = mp::local_alloc(sb ? sb : 1);
        put(send, input);
      } else if (op == Op::AllGather) {
        send = static_cast<char*>(recv) + static_cast<size_t>(me) * count * t.size;
        put(send, input);
      } else {
        put(recv, input);  // all-reduce and broadcast: send is recv
      }
      mp::sync(stream_);
      SC_OK(symcommHostBarrier(comm_));  // every rank's input is in place
      SC_OK(call(op, comm_, team, send, recv, count, t.id, red, root, algos[k], stream_));
      results[k] = fetch(recv, rb);
      SC_OK(symcommHostBarrier(comm_));
      if (send != recv && !(in_place && op == Op::AllGather)) mp::local_free(send);
      mp::local_free(recv);
    }
    EXPECT_TRUE(results[0] == results[1]) << "nccl differs from copy";
  }

  symcommComm_t comm_ = nullptr;
  symcommStream_t stream_ = nullptr;
  uint64_t seed_ = 0;
  std::optional<::testing::ScopedTrace> seed_trace_;  // names seed_ until the test ends
};

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
  EXPECT_EQ(first, symcommInvalidUsage) << why;
  EXPECT_NE(why.find("CUDA graph"), std::string::npos) << why;
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

// ---- Cuda space: the decomposition backend ---------------------------------------------

// Creates a decomposition of `gdims` on pr x pc with `backend` on `comm`.
symcommDecomp_t make_decomp(symcommComm_t comm, int pr, int pc, const int64_t* gdims,
                            const char* backend) {
  symcommDecompConfig_t c;
  symcommDecompConfigInit(&c);
  for (int a = 0; a < 3; ++a) c.gdims[a] = gdims[a];
  c.pdims[0] = pr;
  c.pdims[1] = pc;
  std::snprintf(c.backend, sizeof c.backend, "%s", backend);
  symcommDecomp_t d = nullptr;
  EXPECT_EQ(symcommDecompCreate(comm, &c, &d), symcommSuccess) << symcommGetLastError();
  return d;
}

class NcclDecompGpu : public NcclGpu {
 protected:
  // Transposes X -> Y -> Z -> Y -> X of `gdims` on every grid, each followed where `halos` by
  // halo exchanges of the new pencil along every axis, with the copy, the nccl and the
  // nccl_pipelined backends on the same input: every output byte is the same.
  void compare_backends(const int64_t* gdims, bool halos) {
    const int n = mp::nranks();
    std::vector<std::pair<int, int>> grids = {{1, n}, {n, 1}};
    if (n == 4) grids.push_back({2, 2});
    if (n == 8) grids.insert(grids.end(), {{2, 4}, {4, 2}});
    const int64_t none[3] = {0, 0, 0};
    const int64_t some_halo[3] = {1, 1, 1}, some_padding[3] = {0, 1, 0};
    const int64_t* halo = halos ? some_halo : none;
    const int64_t* padding = halos ? some_padding : none;
    const int periodic[3] = {1, 0, 1};
    for (auto [pr, pc] : grids) {
      SCOPED_TRACE("grid " + std::to_string(pr) + "x" + std::to_string(pc));
      std::vector<std::vector<uint8_t>> outputs[3];
      const char* backends[3] = {"copy", "nccl", "nccl_pipelined"};
      for (int k = 0; k < 3; ++k) {
        symcommDecomp_t d = make_decomp(comm_, pr, pc, gdims, backends[k]);
        ASSERT_NE(d, nullptr);
        symcommPencilInfo_t info[3];
        int64_t most = 0;
        for (int a = 0; a < 3; ++a) {
          SC_OK(symcommDecompPencilInfo(d, a, halo, padding, &info[a]));
          most = std::max(most, info[a].size);
        }
        size_t ws_bytes = 0, halo_ws = 0;
        SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &ws_bytes));
        for (int a = 0; a < 3 && halos; ++a)
          for (int dim = 0; dim < 3; ++dim) {
            size_t b = 0;
            SC_OK(symcommDecompHaloWorkspaceSize(d, a, dim, symcommR64, halo, padding, &b));
            halo_ws = std::max(halo_ws, b);
          }
        void* ws = nullptr;
        SC_OK(symcommMalloc(comm_, std::max(ws_bytes, halo_ws), &ws));
        const size_t bytes = static_cast<size_t>(most) * 8;
        void* buf[2] = {mp::local_alloc(bytes), mp::local_alloc(bytes)};
        put(buf[0], small_integers(kTypes[9], static_cast<size_t>(most),
                                   seed_ + static_cast<uint64_t>(mp::rank())));
        put(buf[1], std::vector<uint8_t>(bytes, 0xAB));
        const int steps[4][2] = {{0, 1}, {1, 2}, {2, 1}, {1, 0}};
        int cur = 0;
        for (const auto& st : steps) {
          SC_OK(symcommDecompTranspose(d, st[0], st[1], buf[cur], buf[1 - cur], ws, symcommR64,
                                       halo, padding, halo, padding, stream_));
          cur = 1 - cur;
          outputs[k].push_back(fetch(buf[cur], static_cast<size_t>(info[st[1]].size) * 8));
          for (int dim = 0; dim < 3 && halos; ++dim) {
            SC_OK(symcommDecompHalo(d, st[1], dim, buf[cur], ws, symcommR64, halo, padding,
                                    periodic, stream_));
            outputs[k].push_back(fetch(buf[cur], static_cast<size_t>(info[st[1]].size) * 8));
          }
        }
        SC_OK(symcommHostBarrier(comm_));
        mp::local_free(buf[0]);
        mp::local_free(buf[1]);
        SC_OK(symcommFree(comm_, ws));
        SC_OK(symcommDecompDestroy(d));
      }
      const size_t per_step = halos ? 4 : 1;
      for (int k = 1; k < 3; ++k) {
        ASSERT_EQ(outputs[0].size(), outputs[k].size()) << backends[k];
        for (size_t i = 0; i < outputs[0].size(); ++i)
          EXPECT_TRUE(outputs[0][i] == outputs[k][i])
              << backends[k] << " step " << i / per_step << " part " << i % per_step;
      }
    }
  }
};

// Small uneven grids, halos and padding, halo exchanges after every transpose.
TEST_F(NcclDecompGpu, DecompBackendsMatchCopy) {
  const int64_t gdims[3] = {9, 7, 6};
  compare_backends(gdims, true);
}

// Blocks of 4-16 MiB, beyond what NCCL buffers (a send completes only once its receive is
// posted): the pipelined backend's steps must pair every send with a receive of the same
// step on its member, or they deadlock here.
TEST_F(NcclDecompGpu, DecompBackendsMatchCopyOnLargeBlocks) {
  const int64_t gdims[3] = {256, 256, 128};
  compare_backends(gdims, false);
}

// ---- Cuda space: ranks that cannot address each other ---------------------------------

// Each rank names a node of its own (SYMCOMM_NODE_NAME), so that no peer is load/store
// accessible, as across nodes: only NCCL reaches the peers. Its id travels over the
// bootstrap network, the automatic choice takes it for every operation (the load/store
// algorithms refuse, saying why), two teams make their NCCL communicators at the same time,
// and a decomposition with no backend named runs on an NCCL backend, every transpose
// between ranks (n x 1 and 1 x n grids) checked point by point.
TEST(NcclWithoutPeerAccess, EveryOperationRunsOnNccl) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "NCCL runs in the cuda space only";
  const int n = mp::nranks(), me = mp::rank();
  mp::ScopedEnv node("SYMCOMM_NODE_NAME", "node" + std::to_string(me));
  mp::ScopedEnv device("SYMCOMM_DEVICE", std::to_string(me));  // one GPU per rank, one node
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  for (int pe = 0; pe < n; ++pe) {
    int accessible = -1;
    SC_OK(symcommPeerAccessible(comm, pe, &accessible));
    EXPECT_EQ(accessible, pe == me ? 1 : 0) << "pe " << pe;
  }
  symcommStream_t stream = mp::new_stream();
  const size_t count = 5000;
  // Rank r's element i of block b: (r + 1) * 100000 + b * count + i.
  auto value = [&](int r, size_t b, size_t i) {
    return static_cast<int32_t>((r + 1) * 100000 + b * count + i);
  };
  std::vector<int32_t> input(count * static_cast<size_t>(n));
  for (size_t b = 0; b < static_cast<size_t>(n); ++b)
    for (size_t i = 0; i < count; ++i) input[b * count + i] = value(me, b, i);
  const int64_t ranks_sum = int64_t{100000} * n * (n + 1) / 2;
  for (Op op : kOps) {
    SCOPED_TRACE(op_name(op));
    const size_t sn = send_elems(op, count, n), rn = recv_elems(op, count, n);
    void* send = mp::local_alloc(sn * 4);
    void* recv = mp::local_alloc(rn * 4);
    mp::copy_from_host(send, input.data(), sn * 4);
    const std::vector<int32_t> poison(rn, -1);
    mp::copy_from_host(recv, poison.data(), rn * 4);
    SC_FAILS(call(op, comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32, symcommSum,
                  n - 1, "sm", stream), symcommNotSupported);
    SC_OK(call(op, comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32, symcommSum, n - 1,
               nullptr, stream));
    mp::sync(stream);
    std::vector<int32_t> got(rn);
    mp::copy_to_host(got.data(), recv, rn * 4);
    size_t bad = 0;
    for (size_t k = 0; k < rn; ++k) {
      const size_t b = k / count, i = k % count;
      int64_t want = 0;
      switch (op) {
        case Op::AllGather: want = value(static_cast<int>(b), 0, i); break;
        case Op::AllToAll: want = value(static_cast<int>(b), static_cast<size_t>(me), i); break;
        case Op::AllReduce: want = ranks_sum + int64_t{n} * static_cast<int64_t>(i); break;
        case Op::ReduceScatter:
          want = ranks_sum + int64_t{n} * static_cast<int64_t>(static_cast<size_t>(me) * count + i);
          break;
        case Op::Broadcast: want = value(n - 1, 0, i); break;
      }
      bad += got[k] != want;
    }
    EXPECT_EQ(bad, 0u) << "of " << rn << " elements wrong";
    mp::local_free(recv);
    mp::local_free(send);
  }
  // Even and odd ranks, each a team making its NCCL communicator while the other does.
  symcommTeam_t teams[2] = {SYMCOMM_TEAM_INVALID, SYMCOMM_TEAM_INVALID};
  for (int start : {0, 1})
    SC_OK(symcommTeamSplitStrided(comm, SYMCOMM_TEAM_WORLD, start, 2, (n - start + 1) / 2,
                                  &teams[start]));
  const symcommTeam_t mine = teams[me % 2];
  ASSERT_NE(mine, SYMCOMM_TEAM_INVALID);
  void* buf = mp::local_alloc(count * 4);
  mp::copy_from_host(buf, input.data(), count * 4);
  SC_OK(symcommAllReduceOnStream(comm, mine, buf, buf, count, symcommInt32, symcommSum, nullptr,
                                 stream));
  mp::sync(stream);
  std::vector<int32_t> got(count);
  mp::copy_to_host(got.data(), buf, count * 4);
  int64_t members = 0, base = 0;
  for (int r = me % 2; r < n; r += 2, ++members) base += int64_t{100000} * (r + 1);
  // Element i: the members' value(r, 0, i) summed.
  EXPECT_EQ(wrong_elements(got, [&](size_t i) { return base + members * static_cast<int64_t>(i); }),
            "");
  mp::local_free(buf);
  SC_OK(symcommTeamDestroy(comm, mine));
  // A decomposition, backend chosen: an NCCL one. On an n x 1 grid X -> Y exchanges between
  // all ranks (X pencils split y over the rows, Y pencils x: src/decomp/geometry.cc), on a
  // 1 x n grid Y -> Z; after each step of X -> Y -> Z -> Y -> X every point of the new pencil
  // holds its global index (transpose_check.h).
  const int64_t g[3] = {12, 10, 9};
  for (auto [pr, pc] : {std::pair<int, int>{n, 1}, std::pair<int, int>{1, n}}) {
    SCOPED_TRACE("grid " + std::to_string(pr) + "x" + std::to_string(pc));
    symcommDecomp_t d = make_decomp(comm, pr, pc, g, "");
    ASSERT_NE(d, nullptr);
    const char* name = nullptr;
    SC_OK(symcommDecompGetBackend(d, &name));
    EXPECT_EQ(std::string(name).rfind("nccl", 0), 0u) << name;
    mp::expect_transposes_work(comm, d, g);
    SC_OK(symcommDecompDestroy(d));
  }
  mp::free_stream(stream);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

}  // namespace
