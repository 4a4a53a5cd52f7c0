// SYMCOMM_CUDART (src/base/cuda_runtime_check.h): a failed CUDA runtime call throws a symcomm
// error that names the call, and leaves nothing behind for the caller's next
// cudaGetLastError, which would otherwise blame the caller's own launch for symcomm's
// failure. The throw is checked everywhere; the last error on GPU machines only (without a
// driver the runtime reports its failed start-up at every call, cudaGetLastError included).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

#include "base/cuda_runtime_check.h"

TEST(CudaRuntimeCheck, AFailedCallThrowsAndClearsTheLastError) {
  std::string what;
  symcommResult_t code = symcommSuccess;
  try {
    SYMCOMM_CUDART(cudaSetDevice(1 << 20));  // no such device, on any machine
  } catch (const symcomm::Error& e) {
    what = e.what();
    code = e.code();
  }
  EXPECT_EQ(code, symcommCudaError);
  EXPECT_NE(what.find("cudaSetDevice(1 << 20) failed"), std::string::npos) << what;
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0)
    GTEST_SKIP() << "no GPU: the runtime's last error cannot be cleared here";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}
