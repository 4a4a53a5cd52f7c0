// NCCL between ranks that cannot address each other (each naming its own node): every
// operation and a decomposition run on NCCL.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nccl_fixture.h"
#include "symcomm/decomp.h"
#include "transpose_check.h"

namespace nccl_test {

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
  // A decomposition, backend chosen: an NCCL one, or, where every rank has a transport (once
  // the network transport carries the cuda space), one that needs no load/store reach
  // (docs/decomp.md, "Across nodes"). On an n x 1 grid X -> Y exchanges between
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
    bool transports = true;  // every rank has one
    for (int pe = 0; pe < n; ++pe) {
      const char* t = nullptr;
      SC_OK(symcommPeerTransport(comm, pe, &t));
      transports = transports && std::string(t) != "none";
    }
    if (transports) {
      for (int i = 0; i < symcommDecompBackendCount(); ++i) {
        symcommDecompBackendInfo_t info;
        SC_OK(symcommDecompGetBackendInfo(i, &info));
        if (std::string(info.name) == name) {
          EXPECT_FALSE(info.load_store_peers) << name;
        }
      }
    } else {
      EXPECT_EQ(std::string(name).rfind("nccl", 0), 0u) << name;
    }
    mp::expect_transposes_work(comm, d, g);
    SC_OK(symcommDecompDestroy(d));
  }
  mp::free_stream(stream);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

}  // namespace nccl_test
