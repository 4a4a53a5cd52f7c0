// Collectives on teams that span nodes: the automatic choice takes the algorithm whose
// descriptor runs across nodes (hier) for every operation, and its results match the host's
// reference; a team that lies on one node, or whose nodes hold different numbers of its
// members, is refused by it with a reason, and the automatic choice runs another. The world
// spans the launcher's nodes (symrun --nodes), or, on one node, ranks of even and odd number
// are made two nodes (host space), so that every variant of mp_coll runs these: the even/odd
// nodes interleave the team ranks.
#include "coll_fixture.h"

namespace coll_test {
namespace {

class CollAcrossNodes : public ::testing::Test {
 protected:
  void SetUp() override {
    hier_ = coll_caps::across_nodes();
    ASSERT_NE(hier_.name, nullptr) << "no registered algorithm runs across nodes";
    n_ = mp::nranks();
    me_ = mp::rank();
    if (n_ < 2) GTEST_SKIP() << "needs two nodes";
    if (mp::nodes() == 1 && mp::space() != symcommSpaceHost)
      GTEST_SKIP() << "node names are faked in the host space only";
    // A small workspace: the sizes below go through it in several pieces.
    mp::ScopedEnv ws("SYMCOMM_COLL_WORKSPACE", "64K");
    comm_ = mp::nodes() > 1 ? mp::new_comm() : mp::new_two_node_comm();
    ASSERT_NE(comm_, nullptr);
    stream_ = mp::new_stream();
    seed_ = mp::test_seed();
    seed_trace_.emplace(__FILE__, __LINE__, mp::seed_note(seed_));
    int node = 0, nodes = 0;
    SC_OK(symcommCommNode(comm_, &node, &nodes));
    node_of_.assign(static_cast<size_t>(n_), 0);
    SC_OK(symcommHostAllgather(comm_, &node, node_of_.data(), sizeof node));
  }
  void TearDown() override {
    if (!comm_) return;
    mp::free_stream(stream_);
    EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
  }

  // Whether world ranks `members` lie over two or more nodes with as many on each.
  bool evenly_across_nodes(const std::vector<int>& members) const {
    std::vector<int> per(static_cast<size_t>(n_), 0);
    for (int r : members) ++per[static_cast<size_t>(node_of_[static_cast<size_t>(r)])];
    int nodes = 0, each = 0;
    bool even = true;
    for (int c : per) {
      if (c == 0) continue;
      even = even && (nodes == 0 || c == each);
      each = c;
      ++nodes;
    }
    return nodes >= 2 && even;
  }
  void* buffer(size_t bytes, bool symmetric) {
    void* p = nullptr;
    if (symmetric) {
      EXPECT_EQ(symcommMalloc(comm_, bytes ? bytes : 1, &p), symcommSuccess) << symcommGetLastError();
    } else {
      p = mp::local_alloc(bytes ? bytes : 1);
    }
    return p;
  }
  void release(void* p, bool symmetric) {
    if (symmetric) {
      EXPECT_EQ(symcommFree(comm_, p), symcommSuccess) << symcommGetLastError();
    } else {
      mp::local_free(p);
    }
  }
  std::vector<uint8_t> fetch(const void* p, size_t bytes) { return mp::fetch(stream_, p, bytes); }

  // Every operation once by `algo` on the world, checked against the reference: a plain send,
  // the receive buffer symmetric or plain (all-reduce in place on a plain buffer).
  void every_operation(const char* algo, const Type& t, size_t count, bool sym, int root) {
    SCOPED_TRACE(std::string(algo ? algo : "auto") + " " + t.name + (sym ? " symmetric" : " plain") + " count " +
                 std::to_string(count) + " root " + std::to_string(root));
    const symcommTeam_t w = SYMCOMM_TEAM_WORLD;
    const size_t nn = static_cast<size_t>(n_), b = count * t.size;
    void* send = buffer(b * nn, false);
    void* recv = buffer(b * nn, sym);
    auto run = [&](const char* what, symcommResult_t rc, const std::vector<uint8_t>& want,
                   const void* out) {
      EXPECT_EQ(rc, symcommSuccess) << what << ": " << symcommGetLastError();
      EXPECT_EQ(differences(fetch(out, want.size()), want, t.size), "") << what;
      SC_OK(symcommHostBarrier(comm_));  // every member is done with the buffers
    };
    auto poison = [&](void* p, size_t bytes) { mp::store(p, std::vector<uint8_t>(bytes, 0xAB)); };
    mp::store(send, make(t, seed_, me_, 0, count * nn));
    poison(recv, b * nn);
    SC_OK(symcommHostBarrier(comm_));
    run("all-gather", symcommAllGatherOnStream(comm_, w, send, recv, count, t.id, algo, stream_),
        gathered(t, seed_, n_, count), recv);
    poison(recv, b * nn);
    SC_OK(symcommHostBarrier(comm_));
    run("all-to-all", symcommAllToAllOnStream(comm_, w, send, recv, count, t.id, algo, stream_),
        exchanged(t, seed_, n_, me_, count), recv);
    poison(recv, b * nn);
    SC_OK(symcommHostBarrier(comm_));
    run("broadcast", symcommBroadcastOnStream(comm_, w, send, recv, count, t.id, root, algo, stream_),
        make(t, seed_, root, 0, count), recv);
    const symcommRedOp_t op = count % 3 == 0 ? symcommSum : count % 3 == 1 ? symcommMax : symcommMin;
    poison(recv, b * nn);
    SC_OK(symcommHostBarrier(comm_));
    run("reduce-scatter",
        symcommReduceScatterOnStream(comm_, w, send, recv, count, t.id, op, algo, stream_),
        reduced(t, op, seed_, n_, static_cast<size_t>(me_) * count, count), recv);
    poison(recv, b * nn);
    SC_OK(symcommHostBarrier(comm_));
    run("all-reduce", symcommAllReduceOnStream(comm_, w, send, recv, count, t.id, op, algo, stream_),
        reduced(t, op, seed_, n_, 0, count), recv);
    run("all-reduce in place",
        symcommAllReduceOnStream(comm_, w, send, send, count, t.id, op, algo, stream_),
        reduced(t, op, seed_, n_, 0, count), send);
    // All-to-all-v with random counts below count + 1.
    const VLayout v = random_layout(seed_ + count, n_, count + 1);
    const std::vector<size_t> sc = v.sends(me_), rc = v.receives(me_), sd = v.sdispls(me_),
                              rd = v.rdispls(me_);
    size_t se = VLayout::extent(sd, sc) + 1, re = VLayout::extent(rd, rc) + 1;
    std::vector<size_t> all(nn);
    SC_OK(symcommHostAllgather(comm_, &re, all.data(), sizeof re));
    re = *std::max_element(all.begin(), all.end());  // one size for a symmetric buffer
    void* vsend = buffer(se * t.size, false);
    void* vrecv = buffer(re * t.size, sym);
    mp::store(vsend, make(t, seed_, me_, 0, se));
    poison(vrecv, re * t.size);
    SC_OK(symcommHostBarrier(comm_));
    run("all-to-all-v",
        symcommAllToAllvOnStream(comm_, w, vsend, sc.data(), sd.data(), vrecv, rc.data(), rd.data(),
                                 t.id, algo, stream_),
        v.received(t, seed_, me_, re), vrecv);
    release(vsend, false);
    release(vrecv, sym);
    release(send, false);
    release(recv, sym);
  }

  coll_caps::Caps hier_{};
  symcommComm_t comm_ = nullptr;
  symcommStream_t stream_ = nullptr;
  int n_ = 0, me_ = 0;
  uint64_t seed_ = 0;
  std::optional<::testing::ScopedTrace> seed_trace_;
  std::vector<int> node_of_;  // every rank's node
};

// The world spans nodes: the automatic choice is the algorithm that runs across nodes, for
// every operation on symmetric and plain buffers, and what it computes is the reference's,
// for sizes from one element to several pieces of the workspace, every root.
TEST_F(CollAcrossNodes, AutomaticChoiceRunsEveryOperation) {
  for (int op = symcommCollAllGather; op <= symcommCollBroadcast; ++op)
    for (int sym : {0, 1}) {
      const char* name = nullptr;
      SC_OK(symcommCollAlgorithm(comm_, SYMCOMM_TEAM_WORLD, static_cast<symcommCollOp_t>(op), 1000,
                                 symcommFloat32, sym, &name));
      EXPECT_STREQ(name, hier_.name) << "op " << op << (sym ? " symmetric" : " plain");
    }
  int root = 0;
  for (int ti : {0, 4, 6, 7})  // int8, float16, float32, float64
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}, size_t{50001}})
      for (bool sym : {false, true}) {
        every_operation(nullptr, kTypes[ti], count, sym, root);
        root = (root + 1) % n_;
      }
  for (root = 0; root < n_; ++root) every_operation(hier_.name, kTypes[6], 3000, root % 2 == 0, root);
}

// A team on one node (the node team) and a team whose nodes hold different numbers of its
// members (world ranks 0, 1, 2: on the even and odd nodes, 2 and 1): the algorithm refuses
// them, saying why, and the automatic choice runs another, whose all-reduce is the reference's.
// A team of the same members over as many on each node (4 nodes of 1) it runs.
TEST_F(CollAcrossNodes, OneNodeAndUnevenTeamsFallToOthers) {
  const Type& t = kTypes[6];  // float32
  const size_t count = 2001, b = count * t.size;
  auto check_team = [&](symcommTeam_t team, const std::vector<int>& members) {
    const bool runs = evenly_across_nodes(members);
    SCOPED_TRACE("team of world ranks " + ::testing::PrintToString(members) +
                 (runs ? ": over nodes evenly" : ": not over nodes evenly"));
    const symcommResult_t can = symcommCollAlgorithmCanRun(comm_, team, symcommCollAllReduce, count,
                                                           t.id, 0, hier_.name);
    const std::string why = symcommGetLastError();
    const char* chosen = nullptr;
    SC_OK(symcommCollAlgorithm(comm_, team, symcommCollAllReduce, count, t.id, 0, &chosen));
    if (runs) {
      EXPECT_EQ(can, symcommSuccess) << why;
      EXPECT_STREQ(chosen, hier_.name);
    } else {
      EXPECT_EQ(can, symcommNotSupported);
      EXPECT_NE(why.find(" here: "), std::string::npos) << why;
      EXPECT_STRNE(chosen, hier_.name);
    }
    void* buf = buffer(b, false);
    mp::store(buf, make(t, seed_, me_, 0, count));
    SC_OK(symcommAllReduceOnStream(comm_, team, buf, buf, count, t.id, symcommSum, nullptr, stream_));
    std::vector<uint8_t> want(count * t.size);
    for (size_t i = 0; i < count; ++i) {
      double acc = 0;
      for (int r : members) acc += value(seed_, r, i, t);
      store(t, &want[i * t.size], acc);
    }
    EXPECT_EQ(differences(fetch(buf, b), want, t.size), "");
    release(buf, false);
  };
  {
    int size = 0;
    SC_OK(symcommTeamSize(comm_, SYMCOMM_TEAM_NODE, &size));
    std::vector<int> members;
    for (int i = 0; i < size; ++i) {
      int w = -1;
      SC_OK(symcommTeamTranslate(comm_, SYMCOMM_TEAM_NODE, i, SYMCOMM_TEAM_WORLD, &w));
      members.push_back(w);
    }
    check_team(SYMCOMM_TEAM_NODE, members);
    const symcommResult_t rc = symcommCollAlgorithmCanRun(comm_, SYMCOMM_TEAM_NODE,
                                                          symcommCollAllGather, 1, t.id, 1, hier_.name);
    EXPECT_EQ(rc, symcommNotSupported);
    EXPECT_NE(std::string(symcommGetLastError()).find("all on node"), std::string::npos)
        << symcommGetLastError();
  }
  SC_OK(symcommHostBarrier(comm_));
  if (n_ >= 3) {
    symcommTeam_t three = SYMCOMM_TEAM_INVALID;
    SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 1, 3, &three));
    if (three != SYMCOMM_TEAM_INVALID) {
      check_team(three, {0, 1, 2});
      if (!evenly_across_nodes({0, 1, 2})) {
        EXPECT_EQ(symcommCollAlgorithmCanRun(comm_, three, symcommCollAllGather, 1, t.id, 1,
                                             hier_.name), symcommNotSupported);
        const std::string why = symcommGetLastError();
        EXPECT_TRUE(why.find("as many on every node") != std::string::npos ||
                    why.find("all on node") != std::string::npos) << why;
      }
      mp::sync(stream_);
      SC_OK(symcommTeamDestroy(comm_, three));
    }
    SC_OK(symcommHostBarrier(comm_));
  }
}

}  // namespace
}  // namespace coll_test
