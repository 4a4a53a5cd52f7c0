// The collectives' automatic choice: asked and followed, SYMCOMM_COLL_ALGO overriding it, and
// the registry's public view of the algorithms.
#include "coll_fixture.h"

namespace coll_test {

// The automatic choice, asked (symcommCollAlgorithm) and followed by calls:
// SYMCOMM_COLL_ALGO overrides it, for every operation or per operation, and the calls run
// the algorithm it names (seen where that algorithm refuses the call: the call's error is
// its refusal); "auto" (whole, or for one operation) means the table; a value that names no
// operation or algorithm fails every call, naming what is wrong.
TEST(CollChoice, FollowsSymcommCollAlgo) {
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t s = mp::new_stream();
  const int n = mp::nranks(), me = mp::rank();
  const bool cuda = mp::space() == symcommSpaceCuda;
  const Type& t = kTypes[6];  // float32
  const size_t count = 1000, b = count * t.size;
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  void* send = nullptr;
  void* recv = nullptr;
  SC_OK(symcommMalloc(comm, b, &send));
  SC_OK(symcommMalloc(comm, b * static_cast<size_t>(n), &recv));
  mp::store(send, make(t, seed, me, 0, count));
  // An all-gather (symcommCollAllGather) or all-reduce on symmetric buffers, by the automatic
  // choice, checked: returns the call's result code.
  auto call = [&](symcommCollOp_t op) {
    mp::store(recv, std::vector<uint8_t>(b * static_cast<size_t>(n), 0xAB));
    EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess);
    const bool gather = op == symcommCollAllGather;
    const symcommResult_t rc =
        gather ? symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, nullptr, s)
               : symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, t.id,
                                          symcommSum, nullptr, s);
    if (rc == symcommSuccess) {
      const std::vector<uint8_t> want =
          gather ? gathered(t, seed, n, count) : reduced(t, symcommSum, seed, n, 0, count);
      EXPECT_EQ(differences(mp::fetch(s, recv, want.size()), want, t.size), "");
    }
    EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess);
    return rc;
  };
  auto query = [&](symcommCollOp_t op, const char** name) {
    return symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, op, count, t.id, 1, name);
  };
  // Without SYMCOMM_COLL_ALGO, and with "auto": a registered algorithm for every operation;
  // in the host space copy does every reduction on one node, the algorithm that runs across
  // nodes where the world spans them.
  std::vector<std::string> registered;
  for (int i = 0; i < symcommCollAlgorithmCount(); ++i) registered.push_back(symcommCollAlgorithmName(i));
  for (const char* value : {"", "auto", "allreduce=auto"}) {
    SCOPED_TRACE(std::string("SYMCOMM_COLL_ALGO=") + value);
    mp::ScopedEnv env("SYMCOMM_COLL_ALGO", value);
    for (int op = symcommCollAllGather; op <= symcommCollBroadcast; ++op) {
      const char* name = nullptr;
      SC_OK(query(static_cast<symcommCollOp_t>(op), &name));
      EXPECT_NE(std::find(registered.begin(), registered.end(), name), registered.end()) << name;
      if (!cuda && (op == symcommCollAllReduce || op == symcommCollReduceScatter)) {
        EXPECT_STREQ(name, mp::nodes() > 1 ? coll_caps::across_nodes().name : "copy");
      }
      // A symmetric all-gather of 4 KB on at most 8 ranks: the table's first matching row is
      // sm's (or ll's, 2 ranks), which cannot run in the host space; a later matching row's,
      // direct, is taken before the registry's order (copy).
      if (!cuda && op == symcommCollAllGather && n <= 8 && mp::nodes() == 1) {
        EXPECT_STREQ(name, "direct");
      }
    }
    SC_OK(call(symcommCollAllGather));
    SC_OK(call(symcommCollAllReduce));
  }
  // SYMCOMM_COLL_ALGO=<algorithm>: the query names it where it runs the call (as its
  // descriptor says: symmetric buffers here), and the call runs; where it refuses, both fail
  // with its refusal.
  for (const coll_caps::Caps& caps : coll_caps::all()) {
    const std::string algo = caps.name;
    mp::ScopedEnv env("SYMCOMM_COLL_ALGO", algo);
    for (symcommCollOp_t op : {symcommCollAllGather, symcommCollAllReduce}) {
      SCOPED_TRACE(algo + (op == symcommCollAllGather ? " all-gather" : " all-reduce"));
      const bool runs = caps.declares(op, mp::space(), n, true) && caps.reaches(mp::nodes());
      const char* name = nullptr;
      const symcommResult_t asked = query(op, &name);
      const std::string why_asked = symcommGetLastError();
      const symcommResult_t ran = call(op);
      const std::string why = symcommGetLastError();
      // An algorithm built on a library loaded at run time refuses where it is missing.
      if (caps.library && ran == symcommNotSupported && asked == symcommNotSupported) continue;
      if (runs) {
        EXPECT_EQ(asked, symcommSuccess) << why_asked;
        if (asked == symcommSuccess) {
          EXPECT_EQ(std::string(name), algo);
        }
        EXPECT_EQ(ran, symcommSuccess) << why;
      } else {
        EXPECT_EQ(asked, symcommNotSupported) << why_asked;
        EXPECT_EQ(ran, symcommNotSupported) << why;
        const std::string refusal = "collective algorithm '" + algo + "' cannot run";
        EXPECT_NE(why_asked.find(refusal), std::string::npos) << why_asked;
        EXPECT_NE(why.find(refusal), std::string::npos) << why;
      }
    }
  }
  // Per operation: all-gather by copy, all-reduce by the table (auto), which the query and
  // the call agree on.
  {
    mp::ScopedEnv env("SYMCOMM_COLL_ALGO", "allgather=copy,allreduce=auto,");
    const char* name = nullptr;
    SC_OK(query(symcommCollAllGather, &name));
    EXPECT_STREQ(name, "copy");
    SC_OK(call(symcommCollAllGather));
    SC_OK(call(symcommCollAllReduce));
  }
  // Typos fail every call and every query, whichever operation they concern.
  for (const char* value : {"allgather=copy,allreduc=copy", "allgather=nope", "copy,allreduce=copy",
                            "cpoy"}) {
    SCOPED_TRACE(std::string("SYMCOMM_COLL_ALGO=") + value);
    mp::ScopedEnv env("SYMCOMM_COLL_ALGO", value);
    const char* name = nullptr;
    SC_FAILS(query(symcommCollAllReduce, &name), symcommInvalidArgument);
    for (symcommCollOp_t op : {symcommCollAllGather, symcommCollAllReduce}) {
      SC_FAILS(call(op), symcommInvalidArgument);
      const std::string why = symcommGetLastError();
      EXPECT_NE(why.find(std::string("SYMCOMM_COLL_ALGO=") + value), std::string::npos) << why;
    }
  }
  const char* name = nullptr;
  SC_FAILS(symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, static_cast<symcommCollOp_t>(9), count,
                                t.id, 0, &name), symcommInvalidArgument);
  SC_FAILS(symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, symcommCollAllGather, count, t.id, 0,
                                nullptr), symcommInvalidArgument);
  mp::sync(s);
  SC_OK(symcommFree(comm, send));
  SC_OK(symcommFree(comm, recv));
  mp::free_stream(s);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// The registry's public view: symcommGetCollAlgorithmInfo describes every registered
// algorithm under its name, and symcommCollAlgorithmCanRun answers as its descriptor says
// (every operation, symmetric buffers or not; an algorithm built on a library loaded at run
// time may refuse everything where it is missing), each refusal with a reason, the same one
// that a call it refuses gives.
TEST(CollChoice, AlgorithmInfoAndCanRunFollowTheDescriptors) {
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  const int n = mp::nranks();
  const int count = symcommCollAlgorithmCount();
  ASSERT_GT(count, 0);
  symcommCollAlgorithmInfo_t info;
  SC_FAILS(symcommGetCollAlgorithmInfo(count, &info), symcommInvalidArgument);
  SC_FAILS(symcommGetCollAlgorithmInfo(-1, &info), symcommInvalidArgument);
  SC_FAILS(symcommGetCollAlgorithmInfo(0, nullptr), symcommInvalidArgument);
  const symcommTeam_t w = SYMCOMM_TEAM_WORLD;
  SC_FAILS(symcommCollAlgorithmCanRun(comm, w, symcommCollAllGather, 8, symcommInt32, 0, "nope"),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "'nope'"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommCollAlgorithmCanRun(comm, w, symcommCollAllGather, 8, symcommInt32, 0, nullptr),
           symcommInvalidArgument);
  SC_FAILS(symcommCollAlgorithmCanRun(comm, w, static_cast<symcommCollOp_t>(9), 8, symcommInt32,
                                      0, symcommCollAlgorithmName(0)), symcommInvalidArgument);
  const std::vector<coll_caps::Caps> all = coll_caps::all();
  ASSERT_EQ(static_cast<int>(all.size()), count);
  std::vector<char> send(64 * 4 * static_cast<size_t>(n)), recv(send.size());
  for (int i = 0; i < count; ++i) {
    const coll_caps::Caps& caps = all[static_cast<size_t>(i)];
    SCOPED_TRACE(caps.name);
    EXPECT_STREQ(caps.name, symcommCollAlgorithmName(i));
    EXPECT_NE(caps.summary, nullptr);
    EXPECT_NE(caps.ops, 0u);
    EXPECT_NE(caps.spaces, 0u);
    EXPECT_EQ(caps.device_counts & ~caps.spaces, 0u) << "counts on the device where it runs";
    for (symcommCollOp_t op : coll_caps::kOps)
      for (int symmetric : {0, 1}) {
        SCOPED_TRACE(testing::Message() << "op " << op << (symmetric ? " symmetric" : " plain"));
        const symcommResult_t rc =
            symcommCollAlgorithmCanRun(comm, w, op, 64, symcommInt32, symmetric, caps.name);
        const std::string why = symcommGetLastError();
        const bool declared =
            caps.declares(op, mp::space(), n, symmetric != 0) && caps.reaches(mp::nodes());
        if (rc == symcommNotSupported && declared && caps.library) continue;  // missing
        EXPECT_EQ(rc, declared ? symcommSuccess : symcommNotSupported) << why;
        if (rc != symcommNotSupported) continue;
        const std::string refusal = std::string("collective algorithm '") + caps.name + "' cannot run ";
        const size_t at = why.find(" here: ");
        ASSERT_TRUE(why.find(refusal) != std::string::npos && at != std::string::npos &&
                    at + 7 < why.size()) << why;
        // A call on plain host buffers (the host space) that its descriptor refuses for the
        // same cause says the same.
        if (mp::space() != symcommSpaceHost || symmetric || op == symcommCollAllToAllv ||
            (caps.runs_in(mp::space()) && caps.does(op) && caps.fits(n)))
          continue;
        const symcommResult_t called = coll_caps::call_op(
            comm, w, op, send.data(), recv.data(), 8, n, symcommInt32, caps.name, nullptr);
        EXPECT_EQ(called, symcommNotSupported);
        const std::string call_why = symcommGetLastError();
        const std::string reason = why.substr(at + 7, why.rfind(" [") - at - 7);
        EXPECT_NE(call_why.find(reason), std::string::npos) << call_why << " vs " << why;
      }
  }
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

}  // namespace coll_test
