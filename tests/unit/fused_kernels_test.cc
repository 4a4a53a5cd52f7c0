// Where the fused GEMM kernels (fused/sm90a/, CUTLASS) are not in the objects a program
// links, as in a build without CUTLASS's headers: the fused implementation finds none and
// says why, naming how to get them. unit_tests links the library's objects without them
// (src/CMakeLists.txt keeps them in an object library of their own).
#include "fused/scatter_gemm.h"
#include "fused/waiting_gemm.h"

#include <gtest/gtest.h>

#include <string>

namespace symcomm {
namespace {

TEST(FusedKernels, WithoutThemTheReasonSaysHowToGetThem) {
  std::string why;
  EXPECT_EQ(waiting_gemm(&why), nullptr);
  EXPECT_NE(why.find("without CUTLASS's headers"), std::string::npos) << why;
  EXPECT_NE(why.find("nvidia-cutlass"), std::string::npos) << why;
  why.clear();
  EXPECT_EQ(scatter_gemm(&why), nullptr);
  EXPECT_NE(why.find("without CUTLASS's headers"), std::string::npos) << why;
}

}  // namespace
}  // namespace symcomm
