// A test of its own communicator with a stream (NULL in the host space) and buffers of the
// space under test (GPU memory in the cuda space), freed when it ends: the base of the
// send/recv and group tests.
#pragma once

#include <algorithm>
#include <vector>

#include "mp.h"

class StreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
    me_ = mp::rank();
    n_ = mp::nranks();
    stream_ = mp::new_stream();
  }
  void TearDown() override {
    for (void* b : bufs_) mp::local_free(b);
    if (stream_) mp::free_stream(stream_);
    if (comm_) {
      EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
    }
  }
  // A buffer of the space holding `v`, freed with the test.
  template <typename T>
  T* buffer(const std::vector<T>& v) {
    auto* b = static_cast<T*>(mp::local_alloc(std::max<size_t>(v.size(), 1) * sizeof(T)));
    bufs_.push_back(b);
    if (!v.empty()) mp::copy_from_host(b, v.data(), v.size() * sizeof(T));
    return b;
  }
  // `n` elements of buffer `b`, after the stream's work.
  template <typename T>
  std::vector<T> read(const T* b, size_t n) {
    mp::sync(stream_);
    std::vector<T> v(n);
    if (n) mp::copy_to_host(v.data(), b, n * sizeof(T));
    return v;
  }
  static bool cuda() { return mp::space() == symcommSpaceCuda; }

  symcommComm_t comm_ = nullptr;
  int me_ = 0, n_ = 1;
  symcommStream_t stream_ = nullptr;
  std::vector<void*> bufs_;
};
