// land_on_gpu (transport/net/gpu_landing.h) and the proxy's memory (local_memory.h): the net
// transport's writes into GPU memory from its own CUDA context. Every offset and size lands
// exactly (stream memory operations for a few aligned words, copies of 2 rows or more on copy
// engines for the rest), and neither a landing of 2 bytes or more nor a signal waits for the
// time slice of a kernel that spins in the primary context. One process, GPU 0; exit code 77 (skipped) without a GPU.
#include <cuda.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "base/cuda_driver.h"
#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "transport/net/copy_context.h"
#include "transport/net/gpu_landing.h"
#include "transport/net/local_memory.h"
#include "transport/transport.h"

namespace {

using symcomm::ContextScope;
using symcomm::CopyContext;
using symcomm::CudaDriver;

__global__ void spin(volatile int* stop, unsigned long long max_ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (*stop == 0 && t - t0 < max_ns);
}

#define CK(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call
#define RT(call) ASSERT_EQ((call), cudaSuccess) << #call

class GpuLanding : public ::testing::Test {
 protected:
  static constexpr size_t kBytes = 4 << 20;

  void SetUp() override {
    drv_ = CudaDriver::get();
    int gpus = 0;
    if (!drv_ || cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
      static_cast<void>(cudaGetLastError());
      GTEST_SKIP() << "no GPU";
    }
    RT(cudaSetDevice(0));
    RT(cudaFree(nullptr));
    // GPU memory as the heap has it: mapped with the virtual memory management API, reached by
    // every context of the device.
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CK(drv_->cuMemCreate(&handle_, kBytes, &prop, 0));
    CK(drv_->cuMemAddressReserve(&base_, kBytes, 0, 0, 0));
    CK(drv_->cuMemMap(base_, kBytes, 0, handle_, 0));
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(drv_->cuMemSetAccess(base_, kBytes, &access, 1));
    context_ = std::make_unique<CopyContext>(0);
    {
      ContextScope scope(context_->get(), 0);
      streams_ = std::make_unique<symcomm::LandingStreams>();
    }
    RT(cudaHostAlloc(&src_, 96 << 10, cudaHostAllocPortable));
    RT(cudaHostAlloc(&flag_, sizeof(int), cudaHostAllocPortable | cudaHostAllocMapped));
  }
  void TearDown() override {
    if (!drv_ || !context_) return;
    {
      ContextScope scope(context_->get(), 0);
      streams_.reset();
    }
    context_.reset();
    cudaFreeHost(src_);
    cudaFreeHost(flag_);
    drv_->cuMemUnmap(base_, kBytes);
    drv_->cuMemAddressFree(base_, kBytes);
    drv_->cuMemRelease(handle_);
  }
  char* at(size_t offset) const { return reinterpret_cast<char*>(base_) + offset; }
  // Runs `round(i)` for i < `rounds` while a kernel of the primary context spins (bounded to
  // 20 s); each round's time in microseconds, sorted. *spinning: whether the kernel still ran
  // when the last round ended.
  std::vector<double> beside_a_spinning_kernel(int rounds, const std::function<void(int)>& round,
                                               bool* spinning) {
    *flag_ = 0;
    int* flag_dev = nullptr;
    EXPECT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flag_dev), flag_, 0),
              cudaSuccess);
    cudaStream_t app = nullptr;
    EXPECT_EQ(cudaStreamCreateWithFlags(&app, cudaStreamNonBlocking), cudaSuccess);
    spin<<<1, 32, 0, app>>>(flag_dev, 20ull * 1000 * 1000 * 1000);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    std::vector<double> us;
    for (int i = 0; i < rounds; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      round(i);
      us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    *spinning = cudaStreamQuery(app) == cudaErrorNotReady;
    __atomic_store_n(flag_, 1, __ATOMIC_SEQ_CST);
    EXPECT_EQ(cudaStreamSynchronize(app), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(app), cudaSuccess);
    std::sort(us.begin(), us.end());
    return us;
  }
  // Lands and waits, on the transport's context.
  void land(void* dst, const void* src, size_t bytes) {
    ContextScope scope(context_->get(), 0);
    streams_->land(*drv_, dst, src, bytes);
    streams_->sync(30000);
  }

  const CudaDriver* drv_ = nullptr;
  CUmemGenericAllocationHandle handle_ = 0;
  CUdeviceptr base_ = 0;
  std::unique_ptr<CopyContext> context_;
  std::unique_ptr<symcomm::LandingStreams> streams_;
  char* src_ = nullptr;
  int* flag_ = nullptr;
};

TEST_F(GpuLanding, EveryOffsetAndSizeLandsExactly) {
  constexpr size_t kWindow = 128 << 10;
  const size_t sizes[] = {1,    2,    3,    4,    5,    7,     8,     9,     12,    15,
                          16,   17,   31,   33,   255,  256,   4095,  4096,  4097,  32767,
                          32768, 32769, 65537};
  std::mt19937 rng(1234);
  std::vector<char> back(kWindow);
  for (size_t offset = 0; offset < 10; ++offset) {
    for (size_t bytes : sizes) {
      RT(cudaMemset(at(0), 0xEE, kWindow));
      RT(cudaDeviceSynchronize());
      for (size_t i = 0; i < bytes; ++i) src_[i] = static_cast<char>(rng());
      land(at(1024 + offset), src_, bytes);
      RT(cudaMemcpy(back.data(), at(0), kWindow, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < kWindow; ++i) {
        const bool inside = i >= 1024 + offset && i < 1024 + offset + bytes;
        const char want = inside ? src_[i - 1024 - offset] : static_cast<char>(0xEE);
        ASSERT_EQ(back[i], want) << "byte " << i << " of a landing of " << bytes
                                 << " bytes at offset " << 1024 + offset;
      }
    }
  }
  land(at(0), src_, 0);  // nothing to do
}

TEST_F(GpuLanding, SmallLandingsDoNotWaitForAKernelThatSpins) {
  // A kernel of the primary context spins (bounded to 20 s) while 8-byte landings run in the
  // transport's context. A copy would wait for the kernel's time slice (about 2.4 ms on an
  // H200: gpu_landing.h); stream memory operations took 7 us there.
  bool still_spinning = false;
  const std::vector<double> us = beside_a_spinning_kernel(9, [&](int i) {
    const uint64_t v = 0x0102030405060708ull * static_cast<uint64_t>(i + 1);
    std::memcpy(src_, &v, sizeof v);
    land(at(64), src_, sizeof v);
  }, &still_spinning);
  ASSERT_TRUE(still_spinning) << "the kernel ended before the landings did";
  std::printf("8-byte landings beside a spinning kernel: median %.1f us, max %.1f us\n", us[4],
              us.back());
  EXPECT_LT(us[4], 1000.0) << "a small landing waited for the spinning kernel's time slice";
  uint64_t back = 0;
  RT(cudaMemcpy(&back, at(64), sizeof back, cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, 0x0102030405060708ull * 9);
}

TEST_F(GpuLanding, LandingsOfEverySizeDoNotWaitForAKernelThatSpins) {
  // Plain copies below 32 KiB ran on the compute engine and waited for the spinning kernel's
  // time slice (a 16 KiB put-signal: 2.4 ms one way on 2 H200 as 2 nodes), and 4 KiB as stream
  // memory operations took 441 us. Copies of 2 rows or more run on copy engines. Only a single
  // byte still goes as a plain copy. Each size at an odd address, and at an aligned one.
  const size_t sizes[] = {2,    3,     4,     5,     8,     12,    17,    255,
                          4095, 4096, 16384, 16385, 32767, 32768, 65537};
  std::mt19937 rng(99);
  for (size_t offset : {size_t{3}, size_t{0}}) {
    for (size_t bytes : sizes) {
      for (size_t i = 0; i < bytes; ++i) src_[i] = static_cast<char>(rng());
      bool still_spinning = false;
      const std::vector<double> us = beside_a_spinning_kernel(
          3, [&](int) { land(at(4096 + offset), src_, bytes); }, &still_spinning);
      ASSERT_TRUE(still_spinning) << "the kernel ended before the landings of " << bytes
                                  << " bytes did";
      EXPECT_LT(us[1], 1000.0) << "landings of " << bytes << " bytes at offset " << offset
                               << " waited for the spinning kernel's time slice (median "
                               << us[1] << " us)";
      std::vector<char> back(bytes);
      RT(cudaMemcpy(back.data(), at(4096 + offset), bytes, cudaMemcpyDeviceToHost));
      ASSERT_EQ(std::memcmp(back.data(), src_, bytes), 0) << bytes << " bytes landed wrong";
      if (bytes == 16384 || bytes == 4096)
        std::printf("%zu-byte landings at offset %zu beside a spinning kernel: median %.1f us\n",
                    bytes, offset, us[1]);
    }
  }
}

TEST_F(GpuLanding, SmallLandingsStayFastAfterMidSizedOnes) {
  // With one stream for everything, 8-byte landings after copies that ran on the compute engine
  // waited for the spinning kernel's time slices too (3.2 ms an 8-byte put-signal one way
  // after 16 KiB ones, on 2 H200 as 2 nodes: gpu_landing.h).
  bool still_spinning = false;
  beside_a_spinning_kernel(3, [&](int) { land(at(8192), src_, 16 << 10); }, &still_spinning);
  ASSERT_TRUE(still_spinning) << "the kernel ended before the 16 KiB landings did";
  const std::vector<double> us = beside_a_spinning_kernel(9, [&](int i) {
    const uint64_t v = 0x0807060504030201ull * static_cast<uint64_t>(i + 1);
    std::memcpy(src_, &v, sizeof v);
    land(at(64), src_, sizeof v);
  }, &still_spinning);
  ASSERT_TRUE(still_spinning) << "the kernel ended before the landings did";
  std::printf("8-byte landings after 16 KiB ones, beside a spinning kernel: median %.1f us, "
              "max %.1f us\n", us[4], us.back());
  EXPECT_LT(us[4], 1000.0) << "8-byte landings waited for the spinning kernel's time slice "
                              "after landings on the compute engine";
  uint64_t back = 0;
  RT(cudaMemcpy(&back, at(64), sizeof back, cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, 0x0807060504030201ull * 9);
}

TEST_F(GpuLanding, ASyncThatOutlivesItsBoundFails) {
  // sync_within on a stream whose kernel spins: symcommTimeout after the bound, not a hang.
  *flag_ = 0;
  int* flag_dev = nullptr;
  RT(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flag_dev), flag_, 0));
  cudaStream_t app = nullptr;
  RT(cudaStreamCreateWithFlags(&app, cudaStreamNonBlocking));
  spin<<<1, 32, 0, app>>>(flag_dev, 20ull * 1000 * 1000 * 1000);
  RT(cudaGetLastError());
  const auto t0 = std::chrono::steady_clock::now();
  symcommResult_t code = symcommSuccess;
  try {
    symcomm::sync_within(app, 100);
  } catch (const symcomm::Error& e) {
    code = e.code();
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  __atomic_store_n(flag_, 1, __ATOMIC_SEQ_CST);
  RT(cudaStreamSynchronize(app));
  EXPECT_EQ(code, symcommTimeout);
  EXPECT_GE(ms, 100.0);
  EXPECT_LT(ms, 10000.0);
  symcomm::sync_within(app, 100);  // idle now: returns at once
  RT(cudaStreamDestroy(app));
}

// The space's mover, which the proxy's memory uses only for adds to words with more than one
// writer: none here.
class NoMover final : public symcomm::LoadStoreMover {
 public:
  void put(void*, const void*, size_t, symcommEngine_t, symcommStream_t) override { ADD_FAILURE(); }
  void get(void*, const void*, size_t, symcommEngine_t, symcommStream_t) override { ADD_FAILURE(); }
  void signal(uint64_t*, uint64_t, symcommSignalOp_t, symcommStream_t) override { ADD_FAILURE(); }
  void atomic(uint64_t*, uint64_t, uint64_t, bool, uint64_t*, symcommStream_t) override {
    ADD_FAILURE();
  }
};

TEST_F(GpuLanding, TheProxysWritesDoNotWaitForAKernelThatSpins) {
  // The proxy's memory on a context of its own, new, as a rank's first ping-pong meets it:
  // it reads 8 bytes of a payload from the GPU, then lands 8 bytes, sets a signal and adds to
  // a word with a single writer, each round, while a kernel of the primary context spins.
  // Before its streams began with a copy-engine copy (gpu_landing.h, LandingStreams),
  // the landing and the signal took 2.0-2.1 ms each there on an H200.
  NoMover mover;
  std::unique_ptr<symcomm::LocalMemory> memory = symcomm::make_cuda_memory(*context_, mover);
  memory->single_writer_words(at(512), 64);
  RT(cudaMemset(at(0), 0, 4096));
  RT(cudaDeviceSynchronize());
  bool still_spinning = false;
  const std::vector<double> us = beside_a_spinning_kernel(9, [&](int i) {
    uint64_t payload = 0;
    memory->read_message(&payload, at(128), sizeof payload);
    const uint64_t v = 0x1111111111111111ull * static_cast<uint64_t>(i + 1);
    memory->write_message(at(64), &v, sizeof v);
    memory->signal(reinterpret_cast<uint64_t*>(at(256)), static_cast<uint64_t>(i + 1),
                   symcommSignalSet);
    memory->signal(reinterpret_cast<uint64_t*>(at(520)), 1, symcommSignalAdd);
  }, &still_spinning);
  ASSERT_TRUE(still_spinning) << "the kernel ended before the rounds did";
  std::printf("a read, a landing, a set and an add beside a spinning kernel: median %.1f us, "
              "max %.1f us\n", us[4], us.back());
  EXPECT_LT(us[4], 1000.0) << "the proxy's writes waited for the spinning kernel's time slice";
  uint64_t back[3] = {};
  RT(cudaMemcpy(&back[0], at(64), 8, cudaMemcpyDeviceToHost));
  RT(cudaMemcpy(&back[1], at(256), 8, cudaMemcpyDeviceToHost));
  RT(cudaMemcpy(&back[2], at(520), 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(back[0], 0x1111111111111111ull * 9);
  EXPECT_EQ(back[1], 9u);
  EXPECT_EQ(back[2], 9u) << "adds to a single-writer word, applied as a read and a write";
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  int gpus = 0;
  if (rc == 0 && (!CudaDriver::get() || cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0))
    return 77;
  return rc;
}
