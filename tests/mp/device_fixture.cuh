// What the device API tests share (device_test.cu, device_signal_test.cu, device_team_test.cu,
// device_timeout_test.cu; one binary, mp_device): the CUDA_OK and LAUNCH_OK checks, the
// poison byte, a clock for kernels, the slots and cases of put and get, and the Device
// fixture (its put_round, get_round and run_barriers are defined in device_test.cu).
#ifndef SYMCOMM_TESTS_MP_DEVICE_FIXTURE_CUH_
#define SYMCOMM_TESTS_MP_DEVICE_FIXTURE_CUH_

#include <cuda_runtime.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "mp.h"
#include "symcomm/device.cuh"

#define CUDA_OK(call)                                                                     \
  do {                                                                                    \
    cudaError_t cuda_rc_ = (call);                                                        \
    ASSERT_EQ(cuda_rc_, cudaSuccess) << #call << ": " << cudaGetErrorString(cuda_rc_);   \
  } while (0)
// After every launch: the launch itself, then the kernel's execution.
#define LAUNCH_OK()                    \
  do {                                 \
    CUDA_OK(cudaGetLastError());       \
    CUDA_OK(cudaDeviceSynchronize());  \
  } while (0)

// A named namespace: every file of the binary must see the same fixture class.
namespace device_test {

using symcomm::DeviceComm;
using ull = unsigned long long;

constexpr uint8_t kPoison = 0xAB;

__device__ inline uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ---------------------------------------------------------------------------------------
// 1. put and get at thread, warp and block scope
// ---------------------------------------------------------------------------------------
constexpr size_t kMaxBytes = size_t{3} << 20;
constexpr size_t kSlot = kMaxBytes + 256;  // room for offsets 0..63; keeps slots 256-aligned
enum Scope { kThread = 0, kWarp = 1, kBlock = 2 };

// One transfer between a writer (or reader) and a peer.
struct Case {
  uint64_t bytes;
  uint32_t src_off, dst_off;
};

// A size from 1 byte to kMaxBytes, spread over the orders of magnitude.
inline uint64_t random_size(std::mt19937_64& rng) {
  static const uint64_t kLimit[] = {16, 300, 5000, 70000, kMaxBytes};
  const uint64_t limit = kLimit[rng() % 5];
  return 1 + rng() % limit;
}

// ---------------------------------------------------------------------------------------
class Device : public ::testing::Test {
 protected:
  void SetUp() override {
    if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "device API needs the cuda space";
    // Small chunks, so that puts and gets of a few MiB cross chunk boundaries.
    mp::ScopedEnv chunk("SYMCOMM_HEAP_CHUNK_SIZE", "2M");
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
    int device = -1;
    SC_OK(symcommCommDevice(comm_, &device));
    CUDA_OK(cudaSetDevice(device));
    SC_OK(symcommGetDeviceComm(comm_, SYMCOMM_TEAM_WORLD, &h_));
    me_ = mp::rank();
    n_ = mp::nranks();
    seed_ = mp::test_seed();  // the same random choices on every rank
    seed_trace_.emplace(__FILE__, __LINE__, mp::seed_note(seed_));  // in every failure
    rng_.seed(seed_);
  }
  void TearDown() override {
    for (void* p : plain_) EXPECT_EQ(cudaFree(p), cudaSuccess);
    if (comm_) EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
  }

  // cudaMalloc'ed memory, freed after the test; nullptr (and a failure) if it fails.
  template <typename T>
  T* plain(size_t count) {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, count * sizeof(T));
    EXPECT_EQ(e, cudaSuccess) << "cudaMalloc: " << cudaGetErrorString(e);
    if (e != cudaSuccess) return nullptr;
    plain_.push_back(p);
    return static_cast<T*>(p);
  }
  // Collective; freed by symcommFinalize.
  template <typename T>
  T* symmetric(size_t count) {
    void* p = nullptr;
    EXPECT_EQ(symcommMalloc(comm_, count * sizeof(T), &p), symcommSuccess)
        << symcommGetLastError();
    return static_cast<T*>(p);
  }

  void put_round(int scope, int round, char* sym, char* src, Case* cases_dev);
  void get_round(int scope, int round, char* sym, char* local, Case* cases_dev);
  void run_barriers(const DeviceComm* c, unsigned threads, int barriers);

  // A table [writer][target] (or [reader][source]), the same on every rank.
  std::vector<Case> random_cases(int round) {
    std::vector<Case> cases(static_cast<size_t>(n_) * n_);
    for (size_t i = 0; i < cases.size(); ++i) {
      Case& k = cases[i];
      k.bytes = random_size(rng_);
      k.src_off = static_cast<uint32_t>(rng_() % 64);
      k.dst_off = static_cast<uint32_t>(rng_() % 64);
      if (round == 0 && i == 0) k.bytes = kMaxBytes;  // the extremes, every time
      if (round == 0 && i == 1) k.bytes = 1;
    }
    return cases;
  }
  // Grid and block of a put/get kernel launch for `scope`.
  void launch_shape(int scope, dim3* grid, dim3* block) {
    static const unsigned kBlockSizes[] = {64, 96, 256, 512, 1024};
    *grid = dim3(scope == kWarp ? 1 : n_);
    if (scope == kThread) *block = dim3(1);                  // one thread per peer
    if (scope == kWarp) *block = dim3(32 * n_);              // one warp per peer
    if (scope == kBlock) *block = dim3(kBlockSizes[rng_() % 5]);  // one block per peer
  }

  symcommComm_t comm_ = nullptr;
  DeviceComm h_{};
  int me_ = -1, n_ = 0;
  uint64_t seed_ = 0;
  std::optional<::testing::ScopedTrace> seed_trace_;  // names seed_ until the test ends
  std::mt19937_64 rng_;
  std::vector<void*> plain_;
};

}  // namespace device_test

#endif  // SYMCOMM_TESTS_MP_DEVICE_FIXTURE_CUH_
