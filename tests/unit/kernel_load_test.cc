// Making a communicator in the cuda space loads every kernel of the library into the GPU's
// context (base/kernel_load.h): none is left to CUDA's lazy loading at its first launch,
// which may wait for every kernel running on the GPU, other communicators' kernels that wait
// for their peers included. ctest runs this with CUDA_MODULE_LOADING=LAZY (CUDA's default),
// so that before the communicator is made some kernels are not loaded: the check can fail.
// One process, GPU 0; exit code 77 (skipped) without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "base/cuda_driver.h"
#include "base/kernel_load.h"
#include "symcomm/symcomm.h"

namespace {

using symcomm::KernelLoadState;

TEST(KernelLoad, MakingACommunicatorLoadsEveryKernel) {
  const symcomm::CudaDriver* drv = symcomm::CudaDriver::get();
  int gpus = 0;
  if (!drv || cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    (void)cudaGetLastError();
    GTEST_SKIP() << "no GPU";
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // the context, nothing launched yet
  CUmoduleLoadingMode mode = CU_MODULE_EAGER_LOADING;
  ASSERT_EQ(drv->cuModuleGetLoadingMode(&mode), CUDA_SUCCESS);
  const KernelLoadState before = symcomm::kernel_load_state(*drv);
  std::printf("before: %d kernels in %d libraries, %d loaded (lazy loading: %s)\n",
              before.kernels, before.libraries, before.loaded,
              mode == CU_MODULE_LAZY_LOADING ? "yes" : "no");
  // A library per CUDA source under src/ (tests/CMakeLists.txt counts them).
  EXPECT_EQ(before.libraries, SYMCOMM_CUDA_SOURCES);
  // Every reduction kernel has an instance per element type: far more kernels than files.
  EXPECT_GE(before.kernels, 4 * before.libraries);
  if (mode == CU_MODULE_LAZY_LOADING) {
    EXPECT_LT(before.loaded, before.kernels) << "every kernel was loaded before the communicator";
  }

  symcommUniqueId uid;
  ASSERT_EQ(symcommGetUniqueId(&uid), symcommSuccess) << symcommGetLastError();
  symcommConfig_t config;
  symcommConfigInit(&config);
  config.space = symcommSpaceCuda;
  symcommComm_t comm = nullptr;
  ASSERT_EQ(symcommInit(&comm, 1, 0, &uid, &config), symcommSuccess) << symcommGetLastError();
  const KernelLoadState after = symcomm::kernel_load_state(*drv);
  std::printf("after symcommInit: %d of %d kernels loaded\n", after.loaded, after.kernels);
  EXPECT_EQ(after.kernels, before.kernels);
  EXPECT_EQ(after.loaded, after.kernels) << "not loaded: " << after.unloaded;
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  if (rc == 0 && u.test_to_run_count() > 0 && u.skipped_test_count() == u.test_to_run_count())
    return 77;  // ctest's SKIP_RETURN_CODE
  return rc;
}
