// What the one-sided tests share (rma_test.cc, rma_wait_test.cc, rma_errors_test.cc,
// rma_team_test.cc, rma_stress_test.cc, one binary): the engines, the check of a pattern,
// helpers and the Rma fixture.
#ifndef SYMCOMM_TESTS_MP_RMA_FIXTURE_H_
#define SYMCOMM_TESTS_MP_RMA_FIXTURE_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "mp.h"

namespace rma_test {

inline const symcommEngine_t kEngines[] = {symcommEngineAuto, symcommEngineCe, symcommEngineSm};

// Bytes of [p, p + bytes) (this process's memory in the space under test) that differ from
// pattern(who, what, first + i): a piece of a pattern written from index 0 further before.
inline size_t mismatches(const void* p, size_t bytes, int who, uint64_t what, size_t first = 0) {
  std::vector<uint8_t> got(bytes);
  if (bytes) mp::copy_to_host(got.data(), p, bytes);
  size_t bad = 0;
  for (size_t i = 0; i < bytes; ++i) bad += got[i] != mp::pattern(who, what, first + i);
  return bad;
}

// A communicator of its own whose waits have SYMCOMM_WAIT_TIMEOUT=`bound` (read at creation).
inline symcommComm_t comm_with_timeout(const char* bound) {
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", bound);
  return mp::new_comm();
}

inline std::string address(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class Rma : public ::testing::Test {
 protected:
  void SetUp() override {
    // Small chunks, so that transfers cross chunk boundaries.
    mp::ScopedEnv chunk("SYMCOMM_HEAP_CHUNK_SIZE", "2M");
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
    stream_ = mp::new_stream();
  }
  void TearDown() override {
    if (!comm_) return;
    mp::free_stream(stream_);
    if (comm_) {
      EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
    }
  }
  int right() const { return (mp::rank() + 1) % mp::nranks(); }
  int left() const { return (mp::rank() + mp::nranks() - 1) % mp::nranks(); }

  // What reports an on-stream wait's failure on `c`: `rc` itself in the host space; in the
  // cuda space (the stream goes on after the bound; rc is success) the next call.
  symcommResult_t reported(symcommComm_t c, symcommResult_t rc) {
    if (mp::space() != symcommSpaceCuda) return rc;
    EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();
    mp::sync(stream_);
    return symcommQuietOnStream(c, stream_);
  }

  symcommComm_t comm_ = nullptr;
  symcommStream_t stream_ = nullptr;
};

}  // namespace rma_test

#endif  // SYMCOMM_TESTS_MP_RMA_FIXTURE_H_
