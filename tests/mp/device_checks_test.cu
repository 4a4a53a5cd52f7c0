// The device API's bounds checks (SYMCOMM_DEVICE_CHECKS, defined before the header): a call
// whose symmetric range leaves its allocation does nothing, and the communicator's next host
// call reports it (symcommInvalidArgument, naming the size and what was left); calls inside
// their allocation run. This file is compiled with the checks; the rest of mp_device without
// them, in the same binary (their functions live in separate inline namespaces).
#define SYMCOMM_DEVICE_CHECKS 1

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "mp.h"
#include "symcomm/device.cuh"

namespace {

enum What { kPut, kPutWarp, kPutBlock, kGetWarp, kPutSignal, kSignal, kAtomic, kWait };

__global__ void act(const __grid_constant__ symcomm::DeviceComm c, What what, char* sym,
                    char* local, size_t bytes, uint64_t* sig, int pe, int* result) {
  switch (what) {
    case kPut: if (threadIdx.x == 0) symcomm::put(c, sym, local, bytes, pe); break;
    case kPutWarp: if (threadIdx.x < 32) symcomm::put_warp(c, sym, local, bytes, pe); break;
    case kPutBlock: symcomm::put_block(c, sym, local, bytes, pe); break;
    case kGetWarp: if (threadIdx.x < 32) symcomm::get_warp(c, local, sym, bytes, pe); break;
    case kPutSignal:
      symcomm::put_signal_block(c, sym, local, bytes, sig, 1, symcommSignalAdd, pe);
      break;
    case kSignal: if (threadIdx.x == 0) symcomm::signal_op(c, sig, 1, symcommSignalSet, pe); break;
    case kAtomic:
      if (threadIdx.x == 0) *result = static_cast<int>(symcomm::atomic_fetch_add(c, sig, 1, pe));
      break;
    case kWait:
      if (threadIdx.x == 0) *result = symcomm::signal_wait_until(c, sig, symcommCmpEq, 0);
      break;
  }
}

TEST(DeviceChecks, ACallThatLeavesItsAllocationDoesNothingAndIsReported) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "device API needs the cuda space";
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  int device = -1;
  ASSERT_EQ(symcommCommDevice(comm, &device), symcommSuccess);
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
  char *a, *b, *gone;
  SC_OK(symcommMalloc(comm, 4096, reinterpret_cast<void**>(&a)));
  SC_OK(symcommMalloc(comm, 4096, reinterpret_cast<void**>(&b)));
  SC_OK(symcommMalloc(comm, 4096, reinterpret_cast<void**>(&gone)));
  SC_OK(symcommFree(comm, gone));
  symcomm::DeviceComm h;
  SC_OK(symcommGetDeviceComm(comm, SYMCOMM_TEAM_WORLD, &h));
  char* local = static_cast<char*>(mp::local_alloc(8192));
  int* result = static_cast<int*>(mp::local_alloc(sizeof(int)));
  mp::fill(local, 8192, mp::rank(), 6);
  mp::fill(b, 4096, mp::rank(), 5);
  SC_OK(symcommHostBarrier(comm));
  const int pe = (mp::rank() + 1) % mp::nranks();
  uint64_t* word = reinterpret_cast<uint64_t*>(b);  // inside b: allowed
  struct Refused {
    What what;
    char* sym;
    size_t bytes;
    uint64_t* sig;
    const char* left;  // what the message says was left
  };
  const Refused refused[] = {
      {kPut, a, 5000, word, "4096 bytes are left"},
      {kPutWarp, a + 96, 4001, word, "4000 bytes are left"},
      {kPutBlock, a, 4097, word, "4096 bytes are left"},
      {kGetWarp, a + 100, 4000, word, "3996 bytes are left"},
      {kPutSignal, a, 8, reinterpret_cast<uint64_t*>(gone), "0 bytes are left"},
      {kSignal, a, 0, reinterpret_cast<uint64_t*>(a + 4092), "4 bytes are left"},
      {kAtomic, a, 0, reinterpret_cast<uint64_t*>(gone + 8), "0 bytes are left"},
      {kWait, a, 0, reinterpret_cast<uint64_t*>(gone), "0 bytes are left"},
  };
  for (const Refused& r : refused) {
    SCOPED_TRACE("case " + std::to_string(r.what));
    act<<<1, 128>>>(h, r.what, r.sym, local, r.bytes, r.sig, pe, result);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    SC_FAILS(symcommQuietOnStream(comm, nullptr), symcommInvalidArgument);
    const std::string e = symcommGetLastError();
    EXPECT_NE(e.find("SYMCOMM_DEVICE_CHECKS"), std::string::npos) << e;
    EXPECT_NE(e.find(r.left), std::string::npos) << e;
    if (r.what == kAtomic || r.what == kWait) {
      int got = -1;
      mp::copy_to_host(&got, result, sizeof got);
      EXPECT_EQ(got, r.what == kAtomic ? 0 : static_cast<int>(symcommInvalidArgument));
    }
    SC_OK(symcommQuietOnStream(comm, nullptr));  // reported once
  }
  // Calls inside their allocation run, and the refused ones wrote nothing: b (right after a
  // on every rank) still holds its pattern.
  act<<<1, 128>>>(h, kPutBlock, a, local, 4096, word, pe, result);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  SC_OK(symcommQuietOnStream(comm, nullptr));
  SC_OK(symcommHostBarrier(comm));
  const int from = (mp::rank() + mp::nranks() - 1) % mp::nranks();
  EXPECT_EQ(mp::count_mismatches(a, 4096, from, 6), 0u);
  EXPECT_EQ(mp::count_mismatches(b, 4096, mp::rank(), 5), 0u);
  mp::local_free(local);
  mp::local_free(result);
  SC_OK(symcommFree(comm, b));
  SC_OK(symcommFree(comm, a));
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

}  // namespace
