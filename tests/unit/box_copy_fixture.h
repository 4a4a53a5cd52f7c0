// Shared by the box copy tests (box_copy_single_test.cu: copy_box and copy_box_ce;
// box_copy_batch_test.cu: copy_boxes; one binary, box_copy_test): the fixtures HostBoxCopy
// and GpuBoxCopy, and what they build on: the seeds, the arrays, boxes and cases, random cases
// (box_copy_cases.h), the reference and the comparison (box_copy_reference.h), the spaces,
// host and GPU 0 (box_copy_spaces.h). What the tests check and how: the comment at the head
// of box_copy_single_test.cu.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "box_copy_cases.h"
#include "box_copy_reference.h"
#include "box_copy_spaces.h"

namespace box_copy_test {

class HostBoxCopy : public ::testing::Test {
 protected:
  void SetUp() override { space_ = std::make_unique<HostSpace>(); }
  std::unique_ptr<Space> space_;
};

class GpuBoxCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!gpu_available(&why)) GTEST_SKIP() << "no GPU: " << why;
    space_ = std::make_unique<CudaSpace>();
  }
  std::unique_ptr<Space> space_;
};

}  // namespace box_copy_test
