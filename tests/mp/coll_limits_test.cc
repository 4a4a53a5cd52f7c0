// The collectives' bad arguments, for every algorithm. The automatic choice, the refusals,
// the waits cut at SYMCOMM_WAIT_TIMEOUT and ce's streams are in coll_choice_test.cc,
// coll_refusals_test.cc, coll_timeouts_test.cc and coll_ce_streams_test.cc (one binary).
#include <vector>

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
  // Reduce, gather and scatter: a root outside the team, a reduction that is none (every
  // member alike).
  SC_FAILS(symcommReduceOnStream(comm_, w, a, b, 10, symcommFloat32, symcommSum, n_, nullptr,
                                 stream_), symcommInvalidArgument);
  SC_FAILS(symcommReduceOnStream(comm_, w, a, b, 10, symcommFloat32, symcommNumRedOps, 0,
                                 nullptr, stream_), symcommInvalidArgument);
  SC_FAILS(symcommGatherOnStream(comm_, w, a, b, 10, symcommFloat32, -1, nullptr, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommScatterOnStream(comm_, w, b, a, 10, symcommFloat32, n_, nullptr, stream_),
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
  ASSERT_GE(symcommCollAlgorithmCount(), 3);
  EXPECT_STREQ(symcommCollAlgorithmName(0), "sm");
  // hier before copy: on a team across nodes (where the selection table's rows do not apply)
  // the registry's order gives hier where it runs the call, else copy.
  EXPECT_STREQ(symcommCollAlgorithmName(1), "hier");
  EXPECT_STREQ(symcommCollAlgorithmName(2), "copy");
  // ce is registered last: the registry order reaches it only where nothing else runs the
  // call; the selection table's rows send it large all-to-alls and all-gathers.
  EXPECT_STREQ(symcommCollAlgorithmName(symcommCollAlgorithmCount() - 1), "ce");
  EXPECT_EQ(symcommCollAlgorithmName(symcommCollAlgorithmCount()), nullptr);
  mp::sync(stream_);
  release(a, false);
  release(b, false);
}

// In the cuda space a plain buffer the GPU cannot access (pageable host memory) is refused
// before anything is enqueued, naming the buffer, on every rank alike (every rank passes
// one), as the decomposition and the one-sided calls refuse it; in the host space all
// memory is the host's.
TEST_P(Coll, PageableBuffersAreRefused) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "the host space takes any host memory";
  if (lacks({Op::AllReduce})) GTEST_SKIP() << algo_ << " does no all-reduce";
  const size_t count = 1024;
  std::vector<float> pageable(count * static_cast<size_t>(n_), 1.0f);
  void* dev = buffer(count * 4 * static_cast<size_t>(n_), false);
  const symcommTeam_t w = SYMCOMM_TEAM_WORLD;
  SC_FAILS_SAYING(symcommAllReduceOnStream(comm_, w, pageable.data(), dev, count, symcommFloat32,
                                           symcommSum, algo_, stream_),
                  symcommInvalidArgument, "send", "pageable host memory");
  SC_FAILS_SAYING(symcommAllReduceOnStream(comm_, w, dev, pageable.data(), count, symcommFloat32,
                                           symcommSum, algo_, stream_),
                  symcommInvalidArgument, "recv", "pageable host memory");
  if (!lacks({Op::AllGather}))
    SC_FAILS_SAYING(symcommAllGatherOnStream(comm_, w, dev, pageable.data(), count,
                                             symcommFloat32, algo_, stream_),
                    symcommInvalidArgument, "recv", "pageable host memory");
  // The communicator goes on: the same call on device memory runs.
  if (refuses(Op::AllReduce, false)) return;  // in place only
  void* out = buffer(count * 4, false);
  put(dev, std::vector<uint8_t>(count * 4, 0));
  SC_OK(symcommAllReduceOnStream(comm_, w, dev, out, count, symcommFloat32, symcommSum, algo_,
                                 stream_));
  mp::sync(stream_);
}

}  // namespace coll_test
