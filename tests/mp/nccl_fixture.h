// What the NCCL tests share (nccl_test.cc, nccl_decomp_test.cc, nccl_no_peer_access_test.cc,
// one binary): the operations and how to call them, the types and their data, the NcclGpu
// fixture that compares nccl with copy, and make_decomp.
#ifndef SYMCOMM_TESTS_MP_NCCL_FIXTURE_H_
#define SYMCOMM_TESTS_MP_NCCL_FIXTURE_H_

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "mp.h"
#include "symcomm/decomp.h"

namespace nccl_test {

enum class Op { AllGather, AllToAll, ReduceScatter, AllReduce, Broadcast };
inline const Op kOps[] = {Op::AllGather, Op::AllToAll, Op::ReduceScatter, Op::AllReduce,
                          Op::Broadcast};
inline const char* op_name(Op op) {
  const char* names[] = {"allgather", "alltoall", "reducescatter", "allreduce", "broadcast"};
  return names[static_cast<int>(op)];
}
inline bool reduces(Op op) { return op == Op::ReduceScatter || op == Op::AllReduce; }

// "" where got[i] == want(i) for every element, else how many differ and the first that does.
template <typename T, typename Want>
inline std::string wrong_elements(const std::vector<T>& got, Want want) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != static_cast<T>(want(i)) && bad++ == 0) first = i;
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(got.size()) + " elements wrong, the first " +
         std::to_string(first) + ": " + std::to_string(got[first]) + " for " +
         std::to_string(static_cast<T>(want(first)));
}

inline symcommResult_t call(Op op, symcommComm_t c, symcommTeam_t team, const void* s, void* r,
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
inline size_t send_elems(Op op, size_t count, int n) {
  return op == Op::AllToAll || op == Op::ReduceScatter ? count * static_cast<size_t>(n) : count;
}
inline size_t recv_elems(Op op, size_t count, int n) {
  return op == Op::AllGather || op == Op::AllToAll ? count * static_cast<size_t>(n) : count;
}

struct Type {
  symcommDataType_t id;
  size_t size;
  const char* name;
};
inline const Type kTypes[] = {{symcommInt8, 1, "int8"},         {symcommUint8, 1, "uint8"},
                       {symcommInt32, 4, "int32"},       {symcommUint32, 4, "uint32"},
                       {symcommInt64, 8, "int64"},       {symcommUint64, 8, "uint64"},
                       {symcommFloat16, 2, "float16"},   {symcommBfloat16, 2, "bfloat16"},
                       {symcommFloat32, 4, "float32"},   {symcommFloat64, 8, "float64"}};

// Small non-negative integers (0..7) in `t`: exact in every type, and so are their sums over
// a few ranks, whatever order NCCL adds them in.
inline std::vector<uint8_t> small_integers(const Type& t, size_t n, uint64_t seed) {
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

// Creates a decomposition of `gdims` on pr x pc with `backend` on `comm`.
inline symcommDecomp_t make_decomp(symcommComm_t comm, int pr, int pc, const int64_t* gdims,
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

}  // namespace nccl_test

#endif  // SYMCOMM_TESTS_MP_NCCL_FIXTURE_H_
