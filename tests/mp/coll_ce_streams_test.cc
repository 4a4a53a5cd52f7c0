// ce's streams (SYMCOMM_COLL_CE_STREAMS): the copies to peers on the caller's stream or spread
// over side streams, and a value out of range refused.
#include "coll_fixture.h"

namespace coll_test {

// SYMCOMM_COLL_CE_STREAMS (read when a communicator is created): 1 (the default) issues the
// copies to peers on the caller's stream, 2 spreads them over side streams; a value out of
// range fails the communicator's creation on every rank, naming the parameter and its range.
TEST(CollLimits, CeStreams) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "ce runs in the cuda space only";
  if (!coll_caps::of("ce").reaches(mp::nodes())) GTEST_SKIP() << "ce needs one node";
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
