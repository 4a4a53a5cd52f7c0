// Collectives refused, saying why: an algorithm does not reach the team, sm's rings do not fit in the
// heap, copy passed over by the automatic choice in a graph capture.
#include "coll_fixture.h"

namespace coll_test {

// Every refusal has a reason. Ranks of even and odd number claim two nodes (host space:
// node names are faked there only), so that no load/store algorithm reaches the world team:
// each such algorithm asked for by name says which member is on another node, the automatic
// choice runs one that reaches it through the transports, and every algorithm asked for by
// name gives its reason wherever it refuses (an odd team, plain buffers, each operation).
TEST(CollLimits, EveryRefusalSaysWhy) {
  if (mp::space() == symcommSpaceCuda) GTEST_SKIP() << "node names are faked in the host space only";
  if (mp::nranks() < 2) GTEST_SKIP() << "needs two nodes";
  symcommComm_t comm = mp::new_two_node_comm();
  ASSERT_NE(comm, nullptr);
  const size_t count = 64, n = static_cast<size_t>(mp::nranks());
  std::vector<char> send(count * 4 * n), recv(count * 4 * n);
  size_t counts[64], displs[64];
  for (size_t i = 0; i < n; ++i) counts[i] = count, displs[i] = i * count;
  auto call = [&](int op, symcommTeam_t team, const char* algorithm) {
    switch (op) {
      case 0: return symcommAllGatherOnStream(comm, team, send.data(), recv.data(), count,
                                              symcommInt32, algorithm, nullptr);
      case 1: return symcommAllToAllOnStream(comm, team, send.data(), recv.data(), count,
                                             symcommInt32, algorithm, nullptr);
      case 2: return symcommAllToAllvOnStream(comm, team, send.data(), counts, displs,
                                              recv.data(), counts, displs, symcommInt32,
                                              algorithm, nullptr);
      case 3: return symcommReduceScatterOnStream(comm, team, send.data(), recv.data(), count,
                                                  symcommInt32, symcommSum, algorithm, nullptr);
      case 4: return symcommAllReduceOnStream(comm, team, send.data(), recv.data(), count,
                                              symcommInt32, symcommSum, algorithm, nullptr);
      default: return symcommBroadcastOnStream(comm, team, send.data(), recv.data(), count,
                                               symcommInt32, 0, algorithm, nullptr);
    }
  };
  // The automatic choice reaches the world across the nodes through the transports (copy,
  // the algorithm whose descriptor needs no load/store reach), for every operation; the
  // algorithms that need load/store reach refuse the world, naming the member on the other
  // node.
  for (int op = 0; op < 6; ++op) {
    const char* chosen = nullptr;
    SC_OK(symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, static_cast<symcommCollOp_t>(op), count,
                               symcommInt32, 0, &chosen));
    EXPECT_TRUE(coll_caps::of(chosen).reaches(2)) << chosen;
    SC_OK(call(op, SYMCOMM_TEAM_WORLD, nullptr));
    for (const coll_caps::Caps& caps : coll_caps::all()) {
      if (caps.reaches(2) || !caps.runs_in(mp::space()) ||
          !caps.does(static_cast<symcommCollOp_t>(op)))
        continue;
      SC_FAILS(call(op, SYMCOMM_TEAM_WORLD, caps.name), symcommNotSupported);
      const std::string why = symcommGetLastError();
      EXPECT_NE(why.find("is on node"), std::string::npos) << caps.name << ": " << why;
    }
  }
  // By name: wherever an algorithm refuses, its message ends in a reason.
  symcommTeam_t node_team = SYMCOMM_TEAM_NODE;
  for (int i = 0; i < symcommCollAlgorithmCount(); ++i) {
    const char* name = symcommCollAlgorithmName(i);
    for (symcommTeam_t team : {SYMCOMM_TEAM_WORLD, node_team})
      for (int op = 0; op < 6; ++op) {
        const symcommResult_t rc = call(op, team, name);
        if (rc != symcommNotSupported) continue;
        const std::string e = symcommGetLastError();
        const size_t at = e.find(" here: ");
        EXPECT_TRUE(at != std::string::npos && at + 7 < e.size())
            << name << ", op " << op << ", team " << team << ": " << e;
      }
  }
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// sm keeps its rings within 1/16 of the heap (or SYMCOMM_COLL_SM_BYTES): where 4 KiB slots do
// not fit, asking for it by name names the reason, and the automatic choice runs another.
TEST(CollLimits, SmNeedsRoomForItsRings) {
  mp::ScopedEnv rings("SYMCOMM_COLL_SM_BYTES", "256K");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t stream = mp::new_stream();
  const int n = mp::nranks();
  const size_t count = 1000;
  void* send = mp::local_alloc(count * 4);
  void* recv = mp::local_alloc(count * 4 * static_cast<size_t>(n));
  std::vector<uint8_t> mine(count * 4);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<uint8_t>(i * 7 + mp::rank());
  mp::store(send, mine);
  if (mp::space() == symcommSpaceCuda) {
    SC_FAILS(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                      "sm", stream), symcommNotSupported);
    EXPECT_NE(std::strstr(symcommGetLastError(), "1/16 of SYMCOMM_HEAP_MAX"), nullptr)
        << symcommGetLastError();
  }
  mp::store(recv, std::vector<uint8_t>(count * 4 * static_cast<size_t>(n), 0xAB));
  SC_OK(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                 nullptr, stream));
  std::vector<uint8_t> got = mp::fetch(stream, recv, count * 4 * static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < mine.size(); ++i)
      ASSERT_EQ(got[static_cast<size_t>(r) * mine.size() + i], static_cast<uint8_t>(i * 7 + r))
          << "rank " << r << " byte " << i;
  mp::free_stream(stream);
  mp::local_free(send);
  mp::local_free(recv);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// copy's all-to-all-v reads the counts back on the host, which a CUDA graph capture cannot
// do. Where sm cannot run (no room for its rings), the registry order gives all-to-all-v to
// copy: outside a capture the automatic choice is copy (asked here), inside one it passes
// over copy to an algorithm that captures (ll), whose graph replays correctly with new data.
// Asked for by name in a capture, copy refuses before it enqueues anything, and the capture
// goes on.
TEST(CollLimits, AutomaticChoicePassesOverCopyInAGraph) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "CUDA graphs need the cuda space";
  if (!coll_caps::of("sm").reaches(mp::nodes()))
    GTEST_SKIP() << "sm, what the automatic choice takes instead, needs one node";
  mp::ScopedEnv rings("SYMCOMM_COLL_SM_BYTES", "256K");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t s = mp::new_stream();
  const int n = mp::nranks(), me = mp::rank();
  const Type& t = kTypes[6];  // float32
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  const VLayout v = random_layout(seed, n, 3000);
  const std::vector<size_t> sc = v.sends(me), sd = v.sdispls(me), rc = v.receives(me), rd = v.rdispls(me);
  const size_t se = VLayout::extent(sd, sc) + 1, re = VLayout::extent(rd, rc) + 1;
  void* send = mp::local_alloc(se * t.size);
  void* recv = mp::local_alloc(re * t.size);
  size_t total = 0;
  for (size_t c : sc) total += c;
  const char* name = nullptr;
  SC_OK(symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, symcommCollAllToAllv, total, t.id, 0, &name));
  EXPECT_STREQ(name, "copy");
  ASSERT_EQ(mp::begin_capture(s), 0);
  SC_FAILS(symcommAllToAllvOnStream(comm, SYMCOMM_TEAM_WORLD, send, sc.data(), sd.data(), recv,
                                    rc.data(), rd.data(), t.id, "copy", s), symcommNotSupported);
  EXPECT_NE(std::strstr(symcommGetLastError(), "a stream being captured cannot do"), nullptr) << symcommGetLastError();
  const symcommResult_t captured = symcommAllToAllvOnStream(
      comm, SYMCOMM_TEAM_WORLD, send, sc.data(), sd.data(), recv, rc.data(), rd.data(), t.id,
      nullptr, s);
  EXPECT_EQ(captured, symcommSuccess) << symcommGetLastError();
  void* exec = mp::end_capture(s);
  ASSERT_NE(exec, nullptr);
  for (uint64_t k = 1; k <= 2 && captured == symcommSuccess; ++k) {
    SCOPED_TRACE("replay " + std::to_string(k));
    mp::store(send, make(t, seed + k, me, 0, se));
    mp::store(recv, std::vector<uint8_t>(re * t.size, 0xAB));
    SC_OK(symcommHostBarrier(comm));
    ASSERT_EQ(mp::launch_graph(exec, s), 0);
    EXPECT_EQ(differences(mp::fetch(s, recv, re * t.size), v.received(t, seed + k, me, re), t.size), "");
    SC_OK(symcommHostBarrier(comm));
  }
  mp::destroy_graph(exec);
  mp::local_free(send);
  mp::local_free(recv);
  mp::free_stream(s);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

}  // namespace coll_test
