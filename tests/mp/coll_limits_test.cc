// The collectives' limits: bad arguments for every algorithm, the automatic choice (asked
// and followed, SYMCOMM_COLL_ALGO), sm's rings within the heap, copy passed over in a graph
// capture, waits cut at SYMCOMM_WAIT_TIMEOUT (ce's memory operations, the counter
// algorithms' kernels, counts on the device) and the refusals that follow, ce's streams.
#include <thread>

#include "coll_fixture.h"

namespace coll_test {

TEST_P(Coll, BadArguments) {
  void* a = buffer(4096, false);
  void* b = buffer(4096 * n_, false);
  const symcommTeam_t w = SYMCOMM_TEAM_WORLD;
  SC_FAILS(symcommAllReduceOnStream(comm_, w, a, b, 10, static_cast<symcommDataType_t>(77),
                                    symcommSum, nullptr, stream_), symcommInvalidArgument);
  SC_FAILS(symcommAllReduceOnStream(comm_, w, a, b, 10, symcommFloat32,
                                    static_cast<symcommRedOp_t>(9), nullptr, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommBroadcastOnStream(comm_, w, a, b, 10, symcommFloat32, n_, nullptr, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommAllGatherOnStream(comm_, 33, a, b, 10, symcommFloat32, nullptr, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommAllReduceOnStream(comm_, w, a, static_cast<char*>(a) + 4, 10, symcommFloat32,
                                    symcommSum, nullptr, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "overlap"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommAllToAllOnStream(comm_, w, b, b, 10, symcommFloat32, nullptr, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommAllReduceOnStream(comm_, w, nullptr, b, 10, symcommFloat32, symcommSum,
                                    nullptr, stream_), symcommInvalidArgument);
  SC_FAILS(symcommAllReduceOnStream(comm_, w, a, b, 10, symcommFloat32, symcommSum,
                                    "no-such-algorithm", stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "no-such-algorithm"), nullptr);
  {
    mp::ScopedEnv algo("SYMCOMM_COLL_ALGO", "allreduce=nope");
    SC_FAILS(symcommAllReduceOnStream(comm_, w, a, b, 10, symcommFloat32, symcommSum, nullptr,
                                      stream_), symcommInvalidArgument);
    EXPECT_NE(std::strstr(symcommGetLastError(), "SYMCOMM_COLL_ALGO"), nullptr);
  }
  if (std::strcmp(algo_, "sm") == 0) {
    mp::ScopedEnv blocks("SYMCOMM_COLL_SM_BLOCKS", "0");
    SC_FAILS(symcommAllReduceOnStream(comm_, w, a, b, 10, symcommFloat32, symcommSum, algo_,
                                      stream_), symcommInvalidArgument);
    EXPECT_NE(std::strstr(symcommGetLastError(), "SYMCOMM_COLL_SM_BLOCKS"), nullptr)
        << symcommGetLastError();
  }
  if (std::strcmp(algo_, "twoshot") == 0) {
    mp::ScopedEnv blocks("SYMCOMM_COLL_TWOSHOT_BLOCKS", "0");
    SC_FAILS(symcommAllReduceOnStream(comm_, w, a, b, 10, symcommFloat32, symcommSum, algo_,
                                      stream_), symcommInvalidArgument);
    EXPECT_NE(std::strstr(symcommGetLastError(), "SYMCOMM_COLL_TWOSHOT_BLOCKS"), nullptr)
        << symcommGetLastError();
  }
  if (std::strcmp(algo_, "relay") == 0) {
    void* sym = buffer(4096, true);
    for (const char* bad : {"SYMCOMM_COLL_RELAY_BLOCKS=0", "SYMCOMM_COLL_RELAY_BLOCKS=129",
                            "SYMCOMM_COLL_RELAY_CHUNK=8", "SYMCOMM_COLL_RELAY_LANE_BYTES=0",
                            "SYMCOMM_COLL_RELAY_STEPS=0"}) {
      const std::string kv = bad, name = kv.substr(0, kv.find('='));
      mp::ScopedEnv env(name.c_str(), kv.substr(kv.find('=') + 1).c_str());
      SC_FAILS(symcommBroadcastOnStream(comm_, w, a, sym, 10, symcommFloat32, 0, algo_, stream_),
               symcommInvalidArgument);
      EXPECT_NE(std::strstr(symcommGetLastError(), name.c_str()), nullptr) << symcommGetLastError();
    }
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));
    release(sym, true);
  }
  const size_t counts[64] = {}, displs[64] = {};
  SC_FAILS(symcommAllToAllvOnStream(comm_, w, a, nullptr, displs, b, counts, displs,
                                    symcommFloat32, algo_, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "sendcounts"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommAllToAllvOnStream(comm_, w, a, counts, displs, b, counts, nullptr,
                                    symcommFloat32, algo_, stream_), symcommInvalidArgument);
  // Buffers not aligned to their type (kernels load elements through T*).
  char* ca = static_cast<char*>(a);
  SC_FAILS(symcommAllReduceOnStream(comm_, w, ca + 2, b, 10, symcommFloat32, symcommSum, algo_,
                                    stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "is not aligned to 4 bytes"), nullptr)
      << symcommGetLastError();
  SC_FAILS(symcommAllGatherOnStream(comm_, w, a, static_cast<char*>(b) + 4, 10, symcommFloat64,
                                    algo_, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "recv"), nullptr) << symcommGetLastError();
  // All-to-all-v: receive blocks that overlap; an extent that overflows, by its count or its
  // displacement (in bytes it would wrap around).
  const size_t nn = static_cast<size_t>(n_);
  std::vector<size_t> fours(nn, 4), apart(nn), close(nn);
  for (size_t j = 0; j < nn; ++j) apart[j] = 4 * j, close[j] = 3 * j;
  SC_FAILS(symcommAllToAllvOnStream(comm_, w, a, fours.data(), apart.data(), b, fours.data(),
                                    close.data(), symcommFloat32, algo_, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "overlap"), nullptr) << symcommGetLastError();
  std::vector<size_t> one(nn, 1), huge(nn, 0);
  huge[nn - 1] = SIZE_MAX / 8;
  SC_FAILS(symcommAllToAllvOnStream(comm_, w, a, huge.data(), apart.data(), b, one.data(),
                                    apart.data(), symcommFloat64, algo_, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::string(symcommGetLastError()).find("sendcounts[" + std::to_string(nn - 1) + "]"),
            std::string::npos) << symcommGetLastError();
  SC_FAILS(symcommAllToAllvOnStream(comm_, w, a, one.data(), apart.data(), b, one.data(),
                                    huge.data(), symcommFloat64, algo_, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::string(symcommGetLastError()).find("recvcounts[" + std::to_string(nn - 1) + "]"),
            std::string::npos) << symcommGetLastError();
  // Counts on the device: 8-byte aligned, and in memory the GPU can access (the host's
  // pageable memory is refused in the cuda space; in the host space, all memory is the
  // host's, and copy and auto run the call: here every rank r sends r + 1 elements from
  // offset 0 to every member, into a capacity of 10 elements). The outputs, recvcounts and
  // rdispls, start as 12345 so that the check below sees them written.
  std::vector<size_t> host_counts(4 * nn, 12345);
  size_t* hc = host_counts.data();
  for (size_t j = 0; j < nn; ++j) {
    hc[j] = static_cast<size_t>(me_) + 1;  // sendcounts
    hc[nn + j] = 0;                         // sdispls
  }
  auto* odd = reinterpret_cast<size_t*>(ca + 4);
  SC_FAILS(symcommAllToAllvDeviceOnStream(comm_, w, a, odd, odd, b, 10, odd, odd, symcommFloat32,
                                          algo_, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "is not aligned to 8 bytes"), nullptr)
      << symcommGetLastError();
  {  // The arrays the call writes apart from the other arrays and from recv (b: 4096 x n
     // bytes, a capacity of 10 floats here).
    auto* dc = static_cast<size_t*>(buffer(4 * nn * sizeof(size_t), false));
    auto* in_b = static_cast<size_t*>(b);
    const struct {
      size_t *sc, *sd, *rc, *rd;
      const char* says;
    } cases[] = {
        {dc, dc + nn, dc + 2 * nn, dc + 2 * nn, "recvcounts ["},   // rdispls is recvcounts
        {dc, dc + nn, dc, dc + 3 * nn, "sendcounts ["},            // recvcounts is sendcounts
        {dc, dc + nn, dc + 2 * nn, dc + nn + 1, "sdispls ["},      // rdispls inside sdispls
        {dc, dc + nn, in_b, dc + 3 * nn, "overlaps recv"},        // recvcounts inside recv
        {in_b + 1, dc + nn, dc + 2 * nn, dc + 3 * nn, "overlaps recv"},  // so are sendcounts
    };
    for (const auto& c : cases) {
      SC_FAILS(symcommAllToAllvDeviceOnStream(comm_, w, a, c.sc, c.sd, b, 10, c.rc, c.rd,
                                              symcommFloat32, algo_, stream_),
               symcommInvalidArgument);
      EXPECT_NE(std::strstr(symcommGetLastError(), c.says), nullptr) << symcommGetLastError();
    }
    release(dc, false);
  }
  const bool cuda = mp::space() == symcommSpaceCuda;
  const symcommResult_t host_rc = symcommAllToAllvDeviceOnStream(
      comm_, w, a, hc, hc + nn, b, 10, hc + 2 * nn, hc + 3 * nn, symcommFloat32, algo_, stream_);
  if (cuda) {
    EXPECT_EQ(host_rc, symcommInvalidArgument);
    EXPECT_NE(std::strstr(symcommGetLastError(), "not memory the GPU can access"), nullptr)
        << symcommGetLastError();
  } else if (refuses(Op::AllToAllvDevice, false)) {
    EXPECT_EQ(host_rc, symcommNotSupported) << symcommGetLastError();
  } else {
    EXPECT_EQ(host_rc, symcommSuccess) << symcommGetLastError();
    mp::sync(stream_);
    // recvcounts[i]: what member i sent here (i + 1 elements, counted even where its block
    // does not fit); rdispls[i]: where its block starts, packed in team-rank order (the sum
    // of the counts before it).
    for (size_t i = 0; i < nn; ++i) {
      EXPECT_EQ(hc[2 * nn + i], i + 1) << "recvcounts[" << i << "]";
      EXPECT_EQ(hc[3 * nn + i], i * (i + 1) / 2) << "rdispls[" << i << "]";
    }
  }
  ASSERT_GE(symcommCollAlgorithmCount(), 2);
  EXPECT_STREQ(symcommCollAlgorithmName(0), "sm");
  EXPECT_STREQ(symcommCollAlgorithmName(1), "copy");
  // ce is registered last: the registry order reaches it only where nothing else runs the
  // call; the selection table's rows send it large all-to-alls and all-gathers.
  EXPECT_STREQ(symcommCollAlgorithmName(symcommCollAlgorithmCount() - 1), "ce");
  EXPECT_EQ(symcommCollAlgorithmName(symcommCollAlgorithmCount()), nullptr);
  mp::sync(stream_);
  release(a, false);
  release(b, false);
}

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
  // in the host space copy does every reduction.
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
        EXPECT_STREQ(name, "copy");
      }
      // A symmetric all-gather of 4 KB on at most 8 ranks: the table's first matching row is
      // sm's (or ll's, 2 ranks), which cannot run in the host space; a later matching row's,
      // direct, is taken before the registry's order (copy).
      if (!cuda && op == symcommCollAllGather && n <= 8) {
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
      const bool runs = caps.declares(op, mp::space(), n, true);
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
        const bool declared = caps.declares(op, mp::space(), n, symmetric != 0);
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
        const char* name = caps.name;
        symcommResult_t called;
        switch (op) {
          case symcommCollAllGather:
            called = symcommAllGatherOnStream(comm, w, send.data(), recv.data(), 8, symcommInt32, name, nullptr);
            break;
          case symcommCollAllToAll:
            called = symcommAllToAllOnStream(comm, w, send.data(), recv.data(), 8, symcommInt32, name, nullptr);
            break;
          case symcommCollReduceScatter:
            called = symcommReduceScatterOnStream(comm, w, send.data(), recv.data(), 8, symcommInt32,
                                                  symcommSum, name, nullptr);
            break;
          case symcommCollAllReduce:
            called = symcommAllReduceOnStream(comm, w, send.data(), recv.data(), 8, symcommInt32,
                                              symcommSum, name, nullptr);
            break;
          default:
            called = symcommBroadcastOnStream(comm, w, send.data(), recv.data(), 8, symcommInt32, 0,
                                              name, nullptr);
        }
        EXPECT_EQ(called, symcommNotSupported);
        const std::string call_why = symcommGetLastError();
        const std::string reason = why.substr(at + 7, why.rfind(" [") - at - 7);
        EXPECT_NE(call_why.find(reason), std::string::npos) << call_why << " vs " << why;
      }
  }
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// Every refusal has a reason. Ranks of even and odd number claim two nodes (host space:
// node names are faked there only), so that no algorithm reaches the world team: the
// automatic choice fails naming every registered algorithm, each with its reason on a line
// of its own, and each algorithm asked for by name gives its reason, here and in calls it
// refuses for other causes (an odd team, plain buffers, each operation).
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
  for (int op = 0; op < 6; ++op) {
    SC_FAILS(call(op, SYMCOMM_TEAM_WORLD, nullptr), symcommNotSupported);
    const std::string all = symcommGetLastError();
    EXPECT_NE(all.find("no collective algorithm can run"), std::string::npos) << all;
    for (int i = 0; i < symcommCollAlgorithmCount(); ++i) {
      const std::string line = std::string("\n  ") + symcommCollAlgorithmName(i) + ": ";
      const size_t at = all.find(line), text = at + line.size();
      EXPECT_TRUE(at != std::string::npos && text < all.size() && all[text] != '\n')
          << "op " << op << " names no " << line << " with a reason in " << all;
    }
    EXPECT_NE(all.find("is on node"), std::string::npos) << all;  // the unreachable member
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
  EXPECT_NE(std::strstr(symcommGetLastError(), "cannot be captured"), nullptr) << symcommGetLastError();
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

// A ce call issued on `stream` at `start` that waits for a signal that never comes: the
// stream ends once the watchdog released the wait, after at least `least` seconds (the
// bound) and within 10, and the next call on the communicator reports the timeout.
void expect_ce_timed_out(symcommComm_t comm, symcommStream_t stream,
                         std::chrono::steady_clock::time_point start, double least) {
  mp::sync(stream);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(took, least);
  EXPECT_LT(took, 10.0);
  SC_FAILS(symcommQuietOnStream(comm, stream), symcommTimeout);
  EXPECT_NE(std::strstr(symcommGetLastError(), "SYMCOMM_WAIT_TIMEOUT"), nullptr)
      << symcommGetLastError();
}

// ce's waits are stream memory operations, bounded by its watchdog: a rank that calls a
// collective alone is let go after SYMCOMM_WAIT_TIMEOUT, the next call reports the timeout
// like a failed wait kernel, and ce refuses to run on the communicator from then on.
TEST(CollLimits, CeWaitEndsAtTheTimeout) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "ce runs in the cuda space only";
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t stream = mp::new_stream();
  const int n = mp::nranks();
  const size_t count = 1000;
  void* send = mp::local_alloc(count * 4);
  void* recv = mp::local_alloc(count * 4 * static_cast<size_t>(n));
  if (mp::rank() == 0) {  // the others never call: rank 0 waits for their ready signals
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count,
                                       symcommInt32, "ce", stream), symcommSuccess)
        << symcommGetLastError();
    expect_ce_timed_out(comm, stream, start, 0.9);
    SC_FAILS(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                      "ce", stream), symcommTimeout);
    EXPECT_NE(std::strstr(symcommGetLastError(), "released"), nullptr) << symcommGetLastError();
    mp::sync(stream);
  }
  EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
  mp::free_stream(stream);
  mp::local_free(send);
  mp::local_free(recv);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// ce's chain: the root never calls, so rank 1 waits for its first chunk (after its own
// successor's ready signal came) and the ranks after it for theirs. Rank 1's bound is 1 s,
// the others' 3 s: rank 1 is released first, and its stream then runs on and signals
// chunks it never received, but its release first made its signals stop counting on the
// others, so each of them still waits its own bound and reports symcommTimeout (the
// release of 0x80000000 let them pass on garbage: caught here).
TEST(CollLimits, CeChainWaitEndsAtTheTimeout) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "ce runs in the cuda space only";
  if (mp::nranks() < 3) GTEST_SKIP() << "the chain runs on teams of 3 or more";
  const int me = mp::rank();
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", me == 1 ? "1" : "3");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t stream = mp::new_stream();
  const size_t count = 1 << 20;
  void* send = mp::local_alloc(count * 4);
  void* recv = nullptr;
  SC_OK(symcommMalloc(comm, count * 4, &recv));
  if (me != 0) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(symcommBroadcastOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                       0, "ce", stream), symcommSuccess)
        << symcommGetLastError();
    expect_ce_timed_out(comm, stream, start, me == 1 ? 0.9 : 2.9);
    SC_FAILS(symcommBroadcastOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                      0, "ce", stream), symcommTimeout);
    mp::sync(stream);
  }
  EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
  SC_OK(symcommFree(comm, recv));
  mp::free_stream(stream);
  mp::local_free(send);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// The algorithms that keep counters with their peers (their descriptors say so): a wait of theirs
// that never ends (only rank 0 calls) is cut at SYMCOMM_WAIT_TIMEOUT and reported at the
// next call; after it the algorithm refuses every call on that communicator, rather than
// run with counters that no longer agree with the peers' (a later wait could pass on a
// stale signal). Other algorithms, and a fresh communicator, still run.
// After a wait of an algorithm's timed out on this rank: the next call reports it, and
// `again` (a call of that algorithm) is refused for good.
void expect_refused_after_timeout(symcommComm_t comm, symcommStream_t stream,
                                  const std::function<symcommResult_t()>& again) {
  mp::sync(stream);
  SC_FAILS(symcommQuietOnStream(comm, stream), symcommTimeout);
  SC_FAILS(again(), symcommTimeout);
  EXPECT_NE(std::strstr(symcommGetLastError(), "cannot run on this communicator any more"), nullptr)
      << symcommGetLastError();
  mp::sync(stream);
}

// After a failed barrier on this rank, barriers refuse, and so do the collectives built on
// them (copy, an all-reduce of `count` int32 in place in `buf`): the members' barrier
// counts may no longer agree, and a later barrier could pass on an arrival from another
// call.
void expect_barriers_refused(symcommComm_t comm, symcommStream_t stream, void* buf,
                             size_t count) {
  SC_FAILS(symcommBarrierOnStream(comm, SYMCOMM_TEAM_WORLD, stream), symcommTimeout);
  EXPECT_NE(std::strstr(symcommGetLastError(), "barrier counts may no longer agree"), nullptr)
      << symcommGetLastError();
  SC_FAILS(symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count, symcommInt32,
                                    symcommSum, "copy", stream), symcommTimeout);
  EXPECT_NE(std::strstr(symcommGetLastError(), "barrier counts may no longer agree"), nullptr)
      << symcommGetLastError();
}

// One member comes to a copy all-gather after the others' barrier waits have timed out.
// Each of them takes its arrival back as its wait fails, so the late member waits out its
// own bound rather than passing on their arrivals and writing into receive buffers whose
// call has failed (before, it did, and the members' barrier counts drifted apart: later
// calls returned success with wrong data). Every member fails the call, in the host space
// nobody's block lands on another, and from then on barriers and the collectives built on
// them refuse.
TEST(CollLimits, ALateMemberFailsTheCallAndLaterBarriersRefuse) {
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  // The barriers' own bound: SYMCOMM_COLL_CHECK (on by default in the host space) would hold
  // the early members until the late one's record came (coll_check_test.cc).
  mp::ScopedEnv unchecked("SYMCOMM_COLL_CHECK", "0");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t stream = mp::new_stream();
  const int n = mp::nranks(), me = mp::rank();
  const size_t count = 1000, block = count * 4;
  void* send = nullptr;
  void* recv = nullptr;
  SC_OK(symcommMalloc(comm, block, &send));
  SC_OK(symcommMalloc(comm, block * static_cast<size_t>(n), &recv));
  mp::store(send, std::vector<uint8_t>(block, static_cast<uint8_t>(0x10 + me)));
  mp::store(recv, std::vector<uint8_t>(block * static_cast<size_t>(n), 0xAB));
  SC_OK(symcommHostBarrier(comm));
  // The late member calls only once the others' calls have failed (a barrier of the world,
  // another communicator, in between), however slowly a loaded machine runs them.
  const bool late = me == n - 1;
  auto call = [&] {
    const symcommResult_t rc = symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv,
                                                        count, symcommInt32, "copy", stream);
    if (mp::space() == symcommSpaceHost) {  // the call waits, and fails, in itself
      EXPECT_EQ(rc, symcommTimeout) << symcommGetLastError();
    } else {  // issued; the next call reports what the barrier kernel recorded
      EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();
      mp::sync(stream);
      SC_FAILS(symcommQuietOnStream(comm, stream), symcommTimeout);
    }
  };
  if (!late) call();
  SC_OK(symcommHostBarrier(mp::world()));
  if (late) call();
  SC_OK(symcommHostBarrier(comm));  // every member's call has ended
  // In the host space a failed call stops where its wait failed: nobody's block lands on
  // another. (On GPUs the stream goes on after a failed wait, the early members' copies
  // with it: docs/rma.md.)
  const std::vector<uint8_t> got = mp::fetch(stream, recv, block * static_cast<size_t>(n));
  for (int j = 0; j < n && mp::space() == symcommSpaceHost; ++j) {
    if (j == me) continue;  // (the own block may have been copied before the barrier)
    size_t landed = 0;
    for (size_t i = 0; i < block; ++i) landed += got[static_cast<size_t>(j) * block + i] != 0xAB;
    EXPECT_EQ(landed, 0u) << "member " << j << "'s block landed here";
  }
  expect_barriers_refused(comm, stream, recv, count);
  SC_OK(symcommHostBarrier(comm));
  SC_OK(symcommFree(comm, send));
  SC_OK(symcommFree(comm, recv));
  mp::free_stream(stream);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

TEST(CollLimits, CounterAlgorithmsRefuseCallsAfterAFailedWait) {
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  const size_t count = 1000;
  int tested = 0;
  for (const coll_caps::Caps& caps : coll_caps::all()) {
    if (!caps.counters || !caps.runs_in(mp::space()) || !caps.fits(mp::nranks())) continue;
    const char* algo = caps.name;
    SCOPED_TRACE(algo);
    ++tested;
    symcommComm_t comm = mp::new_comm();
    ASSERT_NE(comm, nullptr);
    symcommStream_t stream = mp::new_stream();
    void* buf = nullptr;
    SC_OK(symcommMalloc(comm, count * 4, &buf));
    if (mp::rank() == 0) {  // the others never call: rank 0's waits time out
      auto call = [&] {  // an all-reduce in place, or a broadcast from rank 0 in place
        return caps.does(symcommCollAllReduce)
                   ? symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count,
                                              symcommInt32, symcommSum, algo, stream)
                   : symcommBroadcastOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count,
                                              symcommInt32, 0, algo, stream);
      };
      SC_OK(call());
      expect_refused_after_timeout(comm, stream, call);
    }
    EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
    // Every rank: the algorithms built on barriers still run (no barrier failed).
    SC_OK(symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count, symcommInt32,
                                   symcommSum, "copy", stream));
    mp::sync(stream);
    SC_OK(symcommFree(comm, buf));
    mp::free_stream(stream);
    EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
  }
  if (tested == 0) GTEST_SKIP() << "no algorithm that keeps counters runs here";
}

// All-to-all-v with counts on the device that only rank 0 calls, by an algorithm that reads
// them on the device with counters (sm): its blocks' waits for the members' headers end at
// SYMCOMM_WAIT_TIMEOUT, the next call says so, and the algorithm refuses calls on the
// communicator from then on (the other algorithms still run).
TEST(CollLimits, CountsOnTheDeviceWaitEndsAtTheTimeout) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "counts on the device: the cuda space";
  const char* algo = nullptr;
  for (const coll_caps::Caps& caps : coll_caps::all())
    if (!algo && caps.counters && caps.device_counts_in(symcommSpaceCuda) &&
        caps.does(symcommCollAllToAll) && caps.fits(mp::nranks()))
      algo = caps.name;
  if (!algo) GTEST_SKIP() << "no algorithm with counters reads counts on the device";
  SCOPED_TRACE(algo);
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t stream = mp::new_stream();
  const size_t n = static_cast<size_t>(mp::nranks()), count = 100;
  void* send = mp::local_alloc(n * count * 4);
  void* recv = mp::local_alloc(n * count * 4);
  auto* counts = static_cast<size_t*>(mp::local_alloc(4 * n * sizeof(size_t)));
  std::vector<size_t> host(4 * n);
  for (size_t j = 0; j < n; ++j) {
    host[j] = count;
    host[n + j] = j * count;
  }
  mp::store(counts, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(host.data()),
                                         reinterpret_cast<uint8_t*>(host.data() + host.size())));
  if (mp::rank() == 0) {  // the others never call
    const auto t0 = std::chrono::steady_clock::now();
    SC_OK(symcommAllToAllvDeviceOnStream(comm, SYMCOMM_TEAM_WORLD, send, counts, counts + n, recv,
                                         n * count, counts + 2 * n, counts + 3 * n, symcommInt32,
                                         algo, stream));
    expect_refused_after_timeout(comm, stream, [&] {
      return symcommAllToAllOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                     algo, stream);
    });
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  }
  EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
  SC_OK(symcommAllToAllOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32, "copy",
                                stream));
  mp::sync(stream);
  mp::local_free(send);
  mp::local_free(recv);
  mp::local_free(counts);
  mp::free_stream(stream);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// SYMCOMM_COLL_CE_STREAMS (read when a communicator is created): 1 (the default) issues the
// copies to peers on the caller's stream, 2 spreads them over side streams; a value out of
// range fails the communicator's creation on every rank, naming the parameter and its range.
TEST(CollLimits, CeStreams) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "ce runs in the cuda space only";
  const int n = mp::nranks();
  const size_t count = 3001, b = count * 4;
  void* send = mp::local_alloc(b * static_cast<size_t>(n));
  void* recv = mp::local_alloc(b * static_cast<size_t>(n));
  std::vector<uint8_t> mine(b * static_cast<size_t>(n));
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<uint8_t>(i * 13 + mp::rank());
  mp::store(send, mine);
  {
    mp::ScopedEnv env("SYMCOMM_COLL_CE_STREAMS", "0");
    symcommComm_t comm = nullptr;
    const symcommUniqueId uid = mp::shared_uid();
    symcommConfig_t cfg = mp::config();
    SC_FAILS_SAYING(symcommInit(&comm, n, mp::rank(), &uid, &cfg), symcommInvalidArgument,
                    "SYMCOMM_COLL_CE_STREAMS='0' is not an integer in [1, 16]");
    EXPECT_EQ(comm, nullptr);
  }
  for (const char* streams : {"1", "2"}) {
    SCOPED_TRACE(std::string("SYMCOMM_COLL_CE_STREAMS=") + streams);
    mp::ScopedEnv env("SYMCOMM_COLL_CE_STREAMS", streams);
    symcommComm_t comm = mp::new_comm();
    ASSERT_NE(comm, nullptr);
    symcommStream_t stream = mp::new_stream();
    mp::store(recv, std::vector<uint8_t>(b * static_cast<size_t>(n), 0xAB));
    const symcommResult_t rc = symcommAllToAllOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv,
                                                       count, symcommInt32, "ce", stream);
    EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();
    // Block r of recv is block `me` of rank r's send.
    std::vector<uint8_t> got = mp::fetch(stream, recv, b * static_cast<size_t>(n));
    size_t wrong = 0;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < b; ++i) {
        const size_t at = static_cast<size_t>(mp::rank()) * b + i;
        wrong += got[static_cast<size_t>(r) * b + i] != static_cast<uint8_t>(at * 13 + r);
      }
    EXPECT_EQ(wrong, 0u);
    mp::sync(stream);
    mp::free_stream(stream);
    EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
  }
  mp::local_free(send);
  mp::local_free(recv);
}

}  // namespace coll_test
