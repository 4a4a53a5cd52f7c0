// The heap tests' fixture (heap_test.cc, heap_calloc_test.cc, one binary): a communicator
// of the world's ranks for each test, finalized after it.
#pragma once

#include "mp.h"

namespace heap_test {

class Heap : public ::testing::Test {
 protected:
  void SetUp() override {
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
  }
  void TearDown() override {
    if (comm_) {
      EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
    }
  }
  symcommComm_t comm_ = nullptr;
};

}  // namespace heap_test
