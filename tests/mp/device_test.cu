// The device API (symcomm/device.cuh) from kernels: put and get at every scope with any
// size and alignment, put_signal ordering, signals from every peer at once, barrier_block,
// atomics, a wait that times out and is reported once, ptr() against symcommPtr, a team
// that is not the world, fence and quiet (every scope) publishing data behind a relaxed
// flag, every comparison with put_signal_warp, team translation on 2D teams, and a barrier
// that a member misses. Outputs are poisoned before and checked byte by byte after.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
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

namespace {

using symcomm::DeviceComm;
using ull = unsigned long long;

constexpr uint8_t kPoison = 0xAB;

__device__ uint64_t now_ns() {
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
const char* const kScopeName[] = {"thread", "warp", "block"};

// One transfer between a writer (or reader) and a peer.
struct Case {
  uint64_t bytes;
  uint32_t src_off, dst_off;
};

// The peer a thread works for: a block of one thread (thread scope), warp w of a block
// (warp scope), or block b (block scope).
__device__ int peer_of(int scope) { return scope == kWarp ? threadIdx.x / 32 : blockIdx.x; }

// Rank `me` puts cases[t] into its slot of `sym` on every team rank t: from
// src + t * kSlot + src_off (plain memory) to sym + me * kSlot + dst_off.
__global__ void put_kernel(DeviceComm c, char* sym, const char* src, const Case* cases,
                           int scope) {
  const int t = peer_of(scope), me = symcomm::team_rank(c);
  const Case k = cases[t];
  char* dst = sym + me * kSlot + k.dst_off;
  const char* from = src + t * kSlot + k.src_off;
  if (scope == kThread) {
    symcomm::put(c, dst, from, k.bytes, t);
    symcomm::quiet(c);
  } else if (scope == kWarp) {
    symcomm::put_warp(c, dst, from, k.bytes, t);
    symcomm::quiet(c);
  } else {
    symcomm::put_block(c, dst, from, k.bytes, t);
    symcomm::quiet_block(c);
  }
}

// Rank `me` gets cases[t] from every team rank t: from sym + me * kSlot + src_off on t to
// local + t * kSlot + dst_off (plain memory).
__global__ void get_kernel(DeviceComm c, char* local, const char* sym, const Case* cases,
                           int scope) {
  const int t = peer_of(scope), me = symcomm::team_rank(c);
  const Case k = cases[t];
  char* dst = local + t * kSlot + k.dst_off;
  const char* from = sym + me * kSlot + k.src_off;
  if (scope == kThread) symcomm::get(c, dst, from, k.bytes, t);
  else if (scope == kWarp) symcomm::get_warp(c, dst, from, k.bytes, t);
  else symcomm::get_block(c, dst, from, k.bytes, t);
}

// A size from 1 byte to kMaxBytes, spread over the orders of magnitude.
uint64_t random_size(std::mt19937_64& rng) {
  static const uint64_t kLimit[] = {16, 300, 5000, 70000, kMaxBytes};
  const uint64_t limit = kLimit[rng() % 5];
  return 1 + rng() % limit;
}

// Mismatches in one slot that should hold `k.bytes` bytes of pattern(who, what, first + i)
// at k.dst_off and the poison byte everywhere else. `first_bad` gets the first bad index.
size_t check_slot(const uint8_t* slot, const Case& k, int who, uint64_t what, size_t first,
                  size_t* first_bad) {
  size_t bad = 0;
  for (size_t i = 0; i < kSlot; ++i) {
    const bool inside = i >= k.dst_off && i < k.dst_off + k.bytes;
    const uint8_t want = inside ? mp::pattern(who, what, first + i - k.dst_off) : kPoison;
    if (slot[i] != want && bad++ == 0) *first_bad = i;
  }
  return bad;
}

// ---------------------------------------------------------------------------------------
// 2. put_signal ordering: a ring of kRing slots to the right neighbour, acknowledged
// ---------------------------------------------------------------------------------------
constexpr int kRing = 4;
struct RingShape {
  size_t chunk;
  int rounds;
  unsigned threads;
  size_t skew;         // source offset: 0 uses 16-byte accesses, 1 single bytes
  uint32_t delay_ns;   // warp w of the sender reaches put_signal_block (w % 8) * delay_ns
                       // late: a signal sent before every warp's data would be caught
};
const RingShape kRingShapes[] = {
    {64 << 10, 200, 512, 0, 0}, {64 << 10, 1000, 1024, 0, 500}, {1 << 20, 50, 1024, 1, 0}};

// Block 0 sends round r from stage + r * chunk into ring slot r % kRing on the right
// neighbour, adding 1 to its data_sig; it reuses a slot only after the neighbour's ack.
// Block 1 waits for round r from the left neighbour, checks it, and acks.
__global__ void ring_kernel(DeviceComm c, RingShape shape, char* ring, const char* stage,
                            uint64_t* data_sig, uint64_t* ack_sig, uint64_t what, ull* bad,
                            int* rc_out) {
  const size_t chunk = shape.chunk;
  const int rounds = shape.rounds;
  const int me = symcomm::team_rank(c), n = symcomm::team_size(c);
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  for (int r = 0; r < rounds; ++r) {
    char* slot = ring + (r % kRing) * chunk;
    if (blockIdx.x == 0) {
      if (r >= kRing) {
        const int rc = symcomm::signal_wait_until_block(c, ack_sig, symcommCmpGe, r - kRing + 1);
        if (rc != 0) {
          if (threadIdx.x == 0) rc_out[0] = rc;
          return;
        }
      }
      const uint64_t until = now_ns() + (threadIdx.x / 32 % 8) * uint64_t{shape.delay_ns};
      while (now_ns() < until) {
      }
      symcomm::put_signal_block(c, slot, stage + r * chunk, chunk, data_sig, 1,
                                symcommSignalAdd, right);
    } else {
      const int rc = symcomm::signal_wait_until_block(c, data_sig, symcommCmpGe, r + 1);
      if (rc != 0) {
        if (threadIdx.x == 0) rc_out[1] = rc;
        return;
      }
      ull mine = 0;
      for (size_t i = threadIdx.x; i < chunk; i += blockDim.x)
        mine += static_cast<uint8_t>(slot[i]) != mp::pattern(left, what + r, i);
      if (mine) atomicAdd(bad, mine);
      __syncthreads();  // every check read the slot before the ack frees it
      if (threadIdx.x == 0) symcomm::signal_op(c, ack_sig, 1, symcommSignalAdd, left);
    }
  }
}

// ---------------------------------------------------------------------------------------
// 3. Every rank signals every peer at once
// ---------------------------------------------------------------------------------------
constexpr size_t kPeerBytes = 16 << 10;

// Block t (one thread): put_signal of sizes[me][t] bytes into my slot on t with SET nonce,
// then wait for t's signal here and check the whole slot t wrote (data, then poison).
__global__ void all_peers_kernel(DeviceComm c, uint8_t* buf, const uint8_t* src,
                                 uint64_t* sigs, const uint32_t* sizes, uint64_t nonce,
                                 uint64_t what, ull* bad, int* rc_out) {
  const int t = blockIdx.x, me = symcomm::team_rank(c), n = symcomm::team_size(c);
  symcomm::put_signal(c, buf + me * kPeerBytes, src + t * kPeerBytes, sizes[me * n + t],
                      sigs + me, nonce, symcommSignalSet, t);
  const int rc = symcomm::signal_wait_until(c, sigs + t, symcommCmpEq, nonce);
  if (rc != 0) {
    atomicCAS(rc_out, 0, rc);
    return;
  }
  const uint32_t bytes = sizes[t * n + me];
  const uint8_t* got = buf + t * kPeerBytes;
  ull mine = 0;
  for (size_t i = 0; i < kPeerBytes; ++i)
    mine += got[i] != (i < bytes ? mp::pattern(t, what, me * kPeerBytes + i) : kPoison);
  if (mine) atomicAdd(bad, mine);
}

// ---------------------------------------------------------------------------------------
// 4. barrier_block
// ---------------------------------------------------------------------------------------
constexpr int kBarriers = 1000;

// Before barrier k each rank adds 1 to the counter of its right neighbour and stores k in
// its mailbox. After barrier k, my left neighbour has done k adds and k stores, and cannot
// do its (k + 2)-th before I enter barrier k + 1: counter and mailbox are k or k + 1. The
// check runs on the block's last thread, not the one that wrote.
__global__ void barrier_kernel(DeviceComm c, int barriers, uint64_t* counter, uint64_t* mailbox,
                               int* rc_out, ull* bad, uint64_t* first_bad) {
  const int me = symcomm::team_rank(c), n = symcomm::team_size(c), right = (me + 1) % n;
  for (uint64_t k = 1; k <= static_cast<uint64_t>(barriers); ++k) {
    if (threadIdx.x == 0) {
      symcomm::atomic_fetch_add(c, counter, 1, right);
      *static_cast<volatile uint64_t*>(symcomm::ptr(c, mailbox, right)) = k;
    }
    const int rc = symcomm::barrier_block(c);
    if (rc != 0) {
      if (threadIdx.x == 0) rc_out[0] = rc;
      return;
    }
    if (threadIdx.x == blockDim.x - 1) {
      const uint64_t v = symcomm::atomic_fetch(c, counter, me);
      const uint64_t m = *static_cast<volatile uint64_t*>(mailbox);
      if ((v < k || v > k + 1 || m < k || m > k + 1) && atomicAdd(bad, 1ull) == 0) {
        first_bad[0] = k;
        first_bad[1] = v;
        first_bad[2] = m;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// 5. Atomics
// ---------------------------------------------------------------------------------------
constexpr int kAddThreads = 256, kAddIters = 64;

// Each thread adds 1 kAddIters times to `total` on team rank 0 (keeping the values it got
// back) and to `each` on every team rank.
__global__ void add_kernel(DeviceComm c, uint64_t* total, uint64_t* each, uint64_t* olds) {
  for (int i = 0; i < kAddIters; ++i) {
    olds[threadIdx.x * kAddIters + i] = symcomm::atomic_fetch_add(c, total, 1, 0);
    for (int pe = 0; pe < symcomm::team_size(c); ++pe) symcomm::atomic_fetch_add(c, each, 1, pe);
  }
}

// Lane 0 of every warp takes a spinlock on team rank 0 `iters` times, built on
// compare_swap, and increments rank 0's `value` with a plain load and store under it.
__global__ void lock_kernel(DeviceComm c, uint64_t* lock, uint64_t* value, int iters,
                            ull* failures) {
  if (threadIdx.x % 32 != 0) return;
  volatile uint64_t* v = symcomm::ptr(c, value, 0);
  for (int i = 0; i < iters; ++i) {
    const uint64_t start = now_ns();
    while (symcomm::atomic_compare_swap(c, lock, 0, 1, 0) != 0) {
      if (now_ns() - start > 20'000'000'000ull) {  // 20 s: the lock is broken
        atomicAdd(failures, 1ull);
        return;
      }
    }
    symcomm::fence(c);  // the increment happens after taking the lock ...
    *v = *v + 1;
    symcomm::fence(c);  // ... and before releasing it
    symcomm::atomic_compare_swap(c, lock, 1, 0, 0);
  }
}

// ---------------------------------------------------------------------------------------
// 6. Waits that time out
// ---------------------------------------------------------------------------------------
__global__ void wait_kernel(DeviceComm c, uint64_t* sig, uint64_t never, int* rc) {
  rc[0] = symcomm::signal_wait_until(c, sig, symcommCmpEq, never);
}

__global__ void wait_block_kernel(DeviceComm c, uint64_t* sig, uint64_t never, int* rc) {
  rc[threadIdx.x] = symcomm::signal_wait_until_block(c, sig, symcommCmpGe, never);
}

// ---------------------------------------------------------------------------------------
// 7. Addresses and team ranks
// ---------------------------------------------------------------------------------------
// Offsets into an allocation: its start, unaligned, and near its end.
__host__ __device__ size_t offset_at(int j) {
  const size_t offsets[] = {0, 1, 255, 4095};
  return offsets[j];
}

// out[pe * 4 + j] = ptr(c, p + offset_at(j), pe); ints = {team_rank, team_size,
// world_rank(0), world_rank(1), ...}.
__global__ void addr_kernel(DeviceComm c, char* p, void** out, int* ints) {
  const int n = symcomm::team_size(c);
  ints[0] = symcomm::team_rank(c);
  ints[1] = n;
  for (int pe = 0; pe < n; ++pe) {
    for (int j = 0; j < 4; ++j) out[pe * 4 + j] = symcomm::ptr(c, p + offset_at(j), pe);
    ints[2 + pe] = symcomm::world_rank(c, pe);
  }
}

// ints: {team_rank, team_size}, then for each team rank pe: world_rank(c, pe),
// team_rank_of(c, that world rank), team_translate(c, pe, other); then team_translate of the
// out-of-range pes -1 and team_size; then team_rank_of(c, w) for every world rank w.
__global__ void translate_kernel(DeviceComm c, DeviceComm other, int nranks, int* ints) {
  const int n = symcomm::team_size(c);
  ints[0] = symcomm::team_rank(c);
  ints[1] = n;
  for (int pe = 0; pe < n; ++pe) {
    const int w = symcomm::world_rank(c, pe);
    ints[2 + 3 * pe] = w;
    ints[3 + 3 * pe] = symcomm::team_rank_of(c, w);
    ints[4 + 3 * pe] = symcomm::team_translate(c, pe, other);
  }
  int* rest = ints + 2 + 3 * n;
  rest[0] = symcomm::team_translate(c, -1, other);
  rest[1] = symcomm::team_translate(c, n, other);
  for (int w = 0; w < nranks; ++w) rest[2 + w] = symcomm::team_rank_of(c, w);
}

// ---------------------------------------------------------------------------------------
// 8. Publishing data behind a flag that orders nothing itself: fence and quiet
// ---------------------------------------------------------------------------------------
enum Publish { kFence = 0, kQuietThread = 1, kQuietWarp = 2, kQuietBlock = 3 };
const char* const kPublishName[] = {"fence", "quiet", "quiet_warp", "quiet_block"};
constexpr size_t kPieceBytes = 8 << 10;
constexpr int kPieces = 64;

// Block 0 puts piece r (stage + r * kPieceBytes) into slot r of `slots` on the right
// neighbour (by one thread, warp 0 or the whole block, as the mode says), then raises the
// neighbour's `flag` to r + 1 with a write that orders nothing by itself: for kFence, fence()
// then a put of the 8-byte value from `values` (values[r] = r + 1); for the quiets, the
// quiet then a relaxed signal_op. Block 1 waits for the flag from the left to reach r + 1
// and checks slot r. Without the fence or the quiet the flag may overtake the piece.
__global__ void publish_kernel(DeviceComm c, int mode, char* slots, const char* stage,
                               uint64_t* flag, const uint64_t* values, uint64_t what, ull* bad,
                               int* rc_out) {
  const int me = symcomm::team_rank(c), n = symcomm::team_size(c);
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  if (blockIdx.x == 0) {
    if (mode == kQuietWarp ? threadIdx.x >= 32 : mode != kQuietBlock && threadIdx.x != 0) return;
    for (int r = 0; r < kPieces; ++r) {
      char* dst = slots + r * kPieceBytes;
      const char* src = stage + r * kPieceBytes;
      if (mode == kQuietBlock) {
        symcomm::put_block(c, dst, src, kPieceBytes, right);
        symcomm::quiet_block(c);
      } else if (mode == kQuietWarp) {
        symcomm::put_warp(c, dst, src, kPieceBytes, right);
        symcomm::quiet_warp(c);
      } else {
        symcomm::put(c, dst, src, kPieceBytes, right);
        if (mode == kFence) symcomm::fence(c);
        else symcomm::quiet(c);
      }
      if (threadIdx.x != 0) continue;
      if (mode == kFence) symcomm::put(c, flag, values + r, sizeof(uint64_t), right);
      else symcomm::signal_op(c, flag, r + 1, symcommSignalSet, right);
    }
    return;
  }
  for (int r = 0; r < kPieces; ++r) {
    const int rc = symcomm::signal_wait_until_block(c, flag, symcommCmpGe, r + 1);
    if (rc != 0) {
      if (threadIdx.x == 0) rc_out[0] = rc;
      return;
    }
    const char* slot = slots + r * kPieceBytes;
    ull mine = 0;
    for (size_t i = threadIdx.x; i < kPieceBytes; i += blockDim.x)
      mine += static_cast<uint8_t>(slot[i]) != mp::pattern(left, what + r, i);
    if (mine) atomicAdd(bad, mine);
  }
}

// ---------------------------------------------------------------------------------------
// 9. Every comparison, with put_signal_warp
// ---------------------------------------------------------------------------------------
struct CmpStep {
  symcommCmp_t cmp;
  uint64_t value, before, after;  // wait for `cmp value`; the word goes from before to after
};
constexpr int kCmpSteps = 6;
constexpr size_t kCmpBytes = 2000 + 3;
struct CmpSteps {
  CmpStep step[kCmpSteps];
};

// Warp 0 of block 0 put_signal_warps piece i (src + i * kCmpBytes) to the right neighbour,
// setting its words[i] to step[i].after; block 1 waits for words[i] with step i's comparison
// (which fails on step[i].before) and checks piece i from the left.
__global__ void cmp_kernel(DeviceComm c, CmpSteps steps, char* data, const char* src,
                           uint64_t* words, uint64_t what, ull* bad, int* rc_out) {
  const int me = symcomm::team_rank(c), n = symcomm::team_size(c);
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  if (blockIdx.x == 0) {
    if (threadIdx.x >= 32) return;
    for (int i = 0; i < kCmpSteps; ++i)
      symcomm::put_signal_warp(c, data + i * kCmpBytes, src + i * kCmpBytes, kCmpBytes,
                               words + i, steps.step[i].after, symcommSignalSet, right);
    return;
  }
  for (int i = 0; i < kCmpSteps; ++i) {
    const CmpStep& k = steps.step[i];
    const int rc = symcomm::signal_wait_until_block(c, words + i, k.cmp, k.value);
    if (rc != 0) {
      if (threadIdx.x == 0) rc_out[0] = rc;
      return;
    }
    ull mine = 0;
    for (size_t j = threadIdx.x; j < kCmpBytes; j += blockDim.x)
      mine += static_cast<uint8_t>(data[i * kCmpBytes + j]) != mp::pattern(left, what + i, j);
    if (mine) atomicAdd(bad, mine);
  }
}

__global__ void barrier_once_kernel(DeviceComm c, int* rc) {
  const int r = symcomm::barrier_block(c);
  if (threadIdx.x == 0) rc[0] = r;
}

// The slot as the host sees it (host-mapped memory, written by kernels).
symcomm::DeviceError snapshot(const symcomm::DeviceError* slot) {
  const volatile symcomm::DeviceError* v = slot;
  symcomm::DeviceError e;
  e.code = v->code;
  e.pe = v->pe;
  e.cmp = v->cmp;
  e.block = v->block;
  e.address = v->address;
  e.expected = v->expected;
  e.observed = v->observed;
  return e;
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
    seed_ = mp::agree(std::random_device{}());  // the same random choices on every rank
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
  std::mt19937_64 rng_;
  std::vector<void*> plain_;
};

// Every rank puts into its slot on every peer; every rank then checks every slot.
void Device::put_round(int scope, int round, char* sym, char* src, Case* cases_dev) {
  SCOPED_TRACE(std::string("put_") + kScopeName[scope] + " round " + std::to_string(round) +
               " seed " + std::to_string(seed_));
  const std::vector<Case> cases = random_cases(round);
  const uint64_t what = rng_();
  dim3 grid, block;
  launch_shape(scope, &grid, &block);
  const size_t total = n_ * kSlot;
  mp::fill(src, total, me_, what);
  CUDA_OK(cudaMemset(sym, kPoison, total));
  CUDA_OK(cudaMemcpy(cases_dev, &cases[static_cast<size_t>(me_) * n_], n_ * sizeof(Case),
                     cudaMemcpyHostToDevice));
  CUDA_OK(cudaDeviceSynchronize());
  SC_OK(symcommHostBarrier(comm_));  // every target is poisoned
  put_kernel<<<grid, block>>>(h_, sym, src, cases_dev, scope);
  LAUNCH_OK();
  SC_OK(symcommHostBarrier(comm_));  // every put is complete
  std::vector<uint8_t> got(total);
  CUDA_OK(cudaMemcpy(got.data(), sym, total, cudaMemcpyDeviceToHost));
  for (int w = 0; w < n_; ++w) {
    const Case& k = cases[static_cast<size_t>(w) * n_ + me_];
    size_t first_bad = 0;
    EXPECT_EQ(check_slot(&got[w * kSlot], k, w, what, me_ * kSlot + k.src_off, &first_bad), 0u)
        << "from rank " << w << ": " << k.bytes << " bytes, src offset " << k.src_off
        << ", dst offset " << k.dst_off << ", first bad byte at " << first_bad;
  }
}

// Every rank fills its buffer; every rank gets a piece of every peer's and checks it.
void Device::get_round(int scope, int round, char* sym, char* local, Case* cases_dev) {
  SCOPED_TRACE(std::string("get_") + kScopeName[scope] + " round " + std::to_string(round) +
               " seed " + std::to_string(seed_));
  const std::vector<Case> cases = random_cases(round);
  const uint64_t what = rng_();
  dim3 grid, block;
  launch_shape(scope, &grid, &block);
  const size_t total = n_ * kSlot;
  mp::fill(sym, total, me_, what);
  CUDA_OK(cudaMemset(local, kPoison, total));
  CUDA_OK(cudaMemcpy(cases_dev, &cases[static_cast<size_t>(me_) * n_], n_ * sizeof(Case),
                     cudaMemcpyHostToDevice));
  CUDA_OK(cudaDeviceSynchronize());
  SC_OK(symcommHostBarrier(comm_));  // every source is filled
  get_kernel<<<grid, block>>>(h_, local, sym, cases_dev, scope);
  LAUNCH_OK();
  std::vector<uint8_t> got(total);
  CUDA_OK(cudaMemcpy(got.data(), local, total, cudaMemcpyDeviceToHost));
  for (int t = 0; t < n_; ++t) {
    const Case& k = cases[static_cast<size_t>(me_) * n_ + t];
    size_t first_bad = 0;
    EXPECT_EQ(check_slot(&got[t * kSlot], k, t, what, me_ * kSlot + k.src_off, &first_bad), 0u)
        << "from rank " << t << ": " << k.bytes << " bytes, src offset " << k.src_off
        << ", dst offset " << k.dst_off << ", first bad byte at " << first_bad;
  }
  SC_OK(symcommHostBarrier(comm_));  // nobody refills a source that a peer still reads
}

TEST_F(Device, PutAndGetAnySizeAndAlignment) {
  const size_t total = n_ * kSlot;
  char* sym = symmetric<char>(total);
  char* src = plain<char>(total);  // puts read plain, not symmetric, memory
  char* local = plain<char>(total);
  Case* cases_dev = plain<Case>(n_);
  ASSERT_TRUE(sym && src && local && cases_dev);
  for (int round = 0; round < 3; ++round) {
    for (int scope : {kThread, kWarp, kBlock}) {
      ASSERT_NO_FATAL_FAILURE(put_round(scope, round, sym, src, cases_dev));
      ASSERT_NO_FATAL_FAILURE(get_round(scope, round, sym, local, cases_dev));
    }
  }
}

TEST_F(Device, PutSignalOrdersDataBeforeSignal) {
  for (const RingShape& shape : kRingShapes) {
    SCOPED_TRACE(std::to_string(shape.chunk) + "-byte chunks, skew " +
                 std::to_string(shape.skew));
    char* ring = symmetric<char>(kRing * shape.chunk);
    uint64_t* sigs = symmetric<uint64_t>(2);  // data, ack
    char* stage = plain<char>(shape.rounds * shape.chunk + shape.skew);
    ull* bad = plain<ull>(1);
    int* rc = plain<int>(2);
    ASSERT_TRUE(ring && sigs && stage && bad && rc);
    stage += shape.skew;
    const uint64_t what = rng_();
    for (int r = 0; r < shape.rounds; ++r)
      mp::fill(stage + r * shape.chunk, shape.chunk, me_, what + r);
    CUDA_OK(cudaMemset(ring, kPoison, kRing * shape.chunk));
    CUDA_OK(cudaMemset(sigs, 0, 2 * sizeof(uint64_t)));
    CUDA_OK(cudaMemset(bad, 0, sizeof(ull)));
    CUDA_OK(cudaMemset(rc, 0, 2 * sizeof(int)));
    CUDA_OK(cudaDeviceSynchronize());
    SC_OK(symcommHostBarrier(comm_));
    ring_kernel<<<2, shape.threads>>>(h_, shape, ring, stage, sigs, sigs + 1, what, bad, rc);
    LAUNCH_OK();
    SC_OK(symcommHostBarrier(comm_));
    ull bad_host = 1;
    int rc_host[2] = {-1, -1};
    uint64_t sigs_host[2] = {0, 0};
    CUDA_OK(cudaMemcpy(&bad_host, bad, sizeof bad_host, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(sigs_host, sigs, sizeof sigs_host, cudaMemcpyDeviceToHost));
    EXPECT_EQ(rc_host[0], 0) << "sender's wait for an ack";
    EXPECT_EQ(rc_host[1], 0) << "receiver's wait for data";
    EXPECT_EQ(bad_host, 0u) << "bytes seen stale or wrong after their signal, seed " << seed_;
    EXPECT_EQ(sigs_host[0], static_cast<uint64_t>(shape.rounds)) << "data signals received";
    EXPECT_EQ(sigs_host[1], static_cast<uint64_t>(shape.rounds)) << "acks received";
  }
}

TEST_F(Device, EveryRankSignalsEveryPeer) {
  uint8_t* buf = symmetric<uint8_t>(n_ * kPeerBytes);
  uint64_t* sigs = symmetric<uint64_t>(n_);
  uint8_t* src = plain<uint8_t>(n_ * kPeerBytes);
  uint32_t* sizes_dev = plain<uint32_t>(static_cast<size_t>(n_) * n_);
  ull* bad = plain<ull>(1);
  int* rc = plain<int>(1);
  ASSERT_TRUE(buf && sigs && src && sizes_dev && bad && rc);
  CUDA_OK(cudaMemset(sigs, 0, n_ * sizeof(uint64_t)));
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + " seed " + std::to_string(seed_));
    std::vector<uint32_t> sizes(static_cast<size_t>(n_) * n_);
    for (uint32_t& s : sizes) s = static_cast<uint32_t>(rng_() % (kPeerBytes + 1));  // 0 too
    const uint64_t what = rng_(), nonce = rng_() | 1;
    mp::fill(src, n_ * kPeerBytes, me_, what);
    CUDA_OK(cudaMemset(buf, kPoison, n_ * kPeerBytes));
    CUDA_OK(cudaMemcpy(sizes_dev, sizes.data(), sizes.size() * sizeof(uint32_t),
                       cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(bad, 0, sizeof(ull)));
    CUDA_OK(cudaMemset(rc, 0, sizeof(int)));
    CUDA_OK(cudaDeviceSynchronize());
    SC_OK(symcommHostBarrier(comm_));
    all_peers_kernel<<<n_, 1>>>(h_, buf, src, sigs, sizes_dev, nonce, what, bad, rc);
    LAUNCH_OK();
    SC_OK(symcommHostBarrier(comm_));  // nobody poisons a buffer a peer still writes
    ull bad_host = 1;
    int rc_host = -1;
    CUDA_OK(cudaMemcpy(&bad_host, bad, sizeof bad_host, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
    EXPECT_EQ(rc_host, 0);
    EXPECT_EQ(bad_host, 0u);
  }
}

// `barriers` barriers of barrier_kernel in one launch of `threads` threads by the members
// of c's team; then the counter, written only by the left neighbour, equals `barriers`.
// c == nullptr: this rank is not a member and takes part in the collective calls only.
void Device::run_barriers(const DeviceComm* c, unsigned threads, int barriers) {
  SCOPED_TRACE(std::to_string(threads) + " threads per block");
  uint64_t* words = symmetric<uint64_t>(2);  // counter, mailbox
  int* rc = plain<int>(1);
  ull* bad = plain<ull>(1);
  uint64_t* first_bad = plain<uint64_t>(3);
  ASSERT_TRUE(words && rc && bad && first_bad);
  CUDA_OK(cudaMemset(words, 0, 2 * sizeof(uint64_t)));
  CUDA_OK(cudaMemset(rc, 0, sizeof(int)));
  CUDA_OK(cudaMemset(bad, 0, sizeof(ull)));
  CUDA_OK(cudaMemset(first_bad, 0, 3 * sizeof(uint64_t)));
  CUDA_OK(cudaDeviceSynchronize());
  SC_OK(symcommHostBarrier(comm_));
  if (c != nullptr) {
    barrier_kernel<<<1, threads>>>(*c, barriers, words, words + 1, rc, bad, first_bad);
    LAUNCH_OK();
  }
  SC_OK(symcommHostBarrier(comm_));
  if (c == nullptr) return;
  int rc_host = -1;
  ull bad_host = 1;
  uint64_t first_host[3] = {0, 0, 0}, words_host[2] = {0, 0};
  CUDA_OK(cudaMemcpy(&rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(&bad_host, bad, sizeof bad_host, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(first_host, first_bad, sizeof first_host, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(words_host, words, sizeof words_host, cudaMemcpyDeviceToHost));
  EXPECT_EQ(rc_host, 0) << symcommGetErrorString(static_cast<symcommResult_t>(rc_host));
  EXPECT_EQ(bad_host, 0u) << "first after barrier " << first_host[0] << ": counter "
                          << first_host[1] << ", mailbox " << first_host[2];
  EXPECT_EQ(words_host[0], static_cast<uint64_t>(barriers));
  EXPECT_EQ(words_host[1], static_cast<uint64_t>(barriers));
}

TEST_F(Device, BarrierBlockOrdersEveryRound) {
  // 1 and 3 threads: fewer threads than members (4 ranks), so threads loop over them.
  for (unsigned threads : {128u, 1u, 3u})
    ASSERT_NO_FATAL_FAILURE(run_barriers(&h_, threads, kBarriers));
}

TEST_F(Device, AtomicsAreExact) {
  uint64_t* words = symmetric<uint64_t>(4);  // total (rank 0), each, lock, value (rank 0)
  uint64_t* olds = plain<uint64_t>(kAddThreads * kAddIters);
  ull* failures = plain<ull>(1);
  ASSERT_TRUE(words && olds && failures);
  CUDA_OK(cudaMemset(words, 0, 4 * sizeof(uint64_t)));
  CUDA_OK(cudaMemset(olds, kPoison, kAddThreads * kAddIters * sizeof(uint64_t)));
  CUDA_OK(cudaMemset(failures, 0, sizeof(ull)));
  CUDA_OK(cudaDeviceSynchronize());
  SC_OK(symcommHostBarrier(comm_));
  add_kernel<<<1, kAddThreads>>>(h_, words, words + 1, olds);
  LAUNCH_OK();
  constexpr int kLockIters = 64;
  lock_kernel<<<2, 128>>>(h_, words + 2, words + 3, kLockIters, failures);  // 8 lockers
  LAUNCH_OK();
  SC_OK(symcommHostBarrier(comm_));

  const uint64_t adds = static_cast<uint64_t>(n_) * kAddThreads * kAddIters;
  uint64_t w[4] = {0, 0, 0, 0};
  ull failures_host = 1;
  CUDA_OK(cudaMemcpy(w, words, sizeof w, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(&failures_host, failures, sizeof failures_host, cudaMemcpyDeviceToHost));
  if (me_ == 0) EXPECT_EQ(w[0], adds) << "the counter on rank 0";
  EXPECT_EQ(w[1], adds) << "the counter on every rank";
  EXPECT_EQ(failures_host, 0u) << "lockers that gave up";
  if (me_ == 0) {
    EXPECT_EQ(w[3], static_cast<uint64_t>(n_) * 8 * kLockIters) << "increments under the lock";
    EXPECT_EQ(w[2], 0u) << "the lock is free at the end";
  }
  // The values fetch_add returned, over every rank: each of 0 .. adds - 1 exactly once.
  std::vector<uint64_t> mine(kAddThreads * kAddIters), all(adds);
  CUDA_OK(cudaMemcpy(mine.data(), olds, mine.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  SC_OK(symcommHostAllgather(comm_, mine.data(), all.data(), mine.size() * sizeof(uint64_t)));
  std::vector<char> seen(adds, 0);
  size_t wrong = 0;
  for (uint64_t v : all) {
    if (v >= adds || seen[v]) ++wrong;
    else seen[v] = 1;
  }
  EXPECT_EQ(wrong, 0u) << "fetch_add results out of range or returned twice";
}

TEST_F(Device, WaitTimesOutAndIsReportedOnce) {
  uint64_t* sig = symmetric<uint64_t>(1);
  int* rc = plain<int>(64);
  ASSERT_TRUE(sig && rc);
  ASSERT_NE(h_.error, nullptr);  // host-mapped: the host reads it directly
  CUDA_OK(cudaMemset(sig, 0, sizeof(uint64_t)));
  CUDA_OK(cudaMemset(rc, 0xff, 64 * sizeof(int)));
  CUDA_OK(cudaDeviceSynchronize());
  SC_OK(symcommHostBarrier(comm_));
  EXPECT_EQ(snapshot(h_.error).code, 0);
  DeviceComm c = h_;  // a plain struct: a copy with a short bound
  c.wait_timeout_ns = 200'000'000;

  // One thread waits for a value nobody writes.
  const uint64_t never = 4'000'000'000'123ull + static_cast<uint64_t>(me_);
  const auto start = std::chrono::steady_clock::now();
  wait_kernel<<<1, 1>>>(c, sig, never, rc);
  LAUNCH_OK();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int rc_host = -1;
  CUDA_OK(cudaMemcpy(&rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
  EXPECT_EQ(rc_host, symcommTimeout);
  EXPECT_GE(seconds, 0.2);
  EXPECT_LT(seconds, 10.0);
  symcomm::DeviceError e = snapshot(h_.error);
  EXPECT_EQ(e.code, symcommTimeout);
  EXPECT_EQ(e.pe, me_);
  EXPECT_EQ(e.cmp, symcommCmpEq);
  EXPECT_EQ(e.block, 0);
  EXPECT_EQ(e.address, reinterpret_cast<uintptr_t>(sig));
  EXPECT_EQ(e.expected, never);
  EXPECT_EQ(e.observed, 0u);
  // The next call on the communicator reports it, naming the value waited for; once.
  SC_FAILS(symcommHostBarrier(comm_), symcommTimeout);
  std::string msg = symcommGetLastError();
  EXPECT_NE(msg.find(std::to_string(never)), std::string::npos) << msg;
  SC_OK(symcommHostBarrier(comm_));
  EXPECT_EQ(snapshot(h_.error).code, 0) << "the report clears the slot";

  // The block variant: every thread gets the code; recorded again now that it was cleared.
  CUDA_OK(cudaMemset(rc, 0xff, 64 * sizeof(int)));
  wait_block_kernel<<<1, 64>>>(c, sig, never + 1, rc);
  LAUNCH_OK();
  std::vector<int> rcs(64, -1);
  CUDA_OK(cudaMemcpy(rcs.data(), rc, 64 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 64; ++i) EXPECT_EQ(rcs[i], symcommTimeout) << "thread " << i;
  e = snapshot(h_.error);
  EXPECT_EQ(e.code, symcommTimeout);
  EXPECT_EQ(e.cmp, symcommCmpGe);
  EXPECT_EQ(e.expected, never + 1);
  SC_FAILS(symcommHostBarrier(comm_), symcommTimeout);
  SC_OK(symcommHostBarrier(comm_));

  // Still usable: puts and a barrier work as before.
  const size_t total = n_ * kSlot;
  char* sym = symmetric<char>(total);
  char* src = plain<char>(total);
  Case* cases_dev = plain<Case>(n_);
  ASSERT_TRUE(sym && src && cases_dev);
  ASSERT_NO_FATAL_FAILURE(put_round(kBlock, 1, sym, src, cases_dev));
  ASSERT_NO_FATAL_FAILURE(run_barriers(&h_, 64, 10));
}

TEST_F(Device, PtrMatchesSymcommPtr) {
  char* p = symmetric<char>(4096);
  void** out = plain<void*>(4 * static_cast<size_t>(n_));
  int* ints = plain<int>(2 + static_cast<size_t>(n_));
  ASSERT_TRUE(p && out && ints);
  CUDA_OK(cudaMemset(out, kPoison, 4 * n_ * sizeof(void*)));
  CUDA_OK(cudaMemset(ints, kPoison, (2 + n_) * sizeof(int)));
  addr_kernel<<<1, 1>>>(h_, p, out, ints);
  LAUNCH_OK();
  std::vector<void*> got(4 * static_cast<size_t>(n_));
  std::vector<int> got_ints(2 + static_cast<size_t>(n_));
  CUDA_OK(cudaMemcpy(got.data(), out, got.size() * sizeof(void*), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(got_ints.data(), ints, got_ints.size() * sizeof(int),
                     cudaMemcpyDeviceToHost));
  EXPECT_EQ(got_ints[0], me_);
  EXPECT_EQ(got_ints[1], n_);
  for (int pe = 0; pe < n_; ++pe) {
    EXPECT_EQ(got_ints[2 + pe], pe);
    for (int j = 0; j < 4; ++j) {
      void* want = symcommPtr(comm_, p + offset_at(j), pe);
      EXPECT_NE(want, nullptr) << symcommGetLastError();
      EXPECT_EQ(got[pe * 4 + j], want) << "pe " << pe << " offset " << offset_at(j);
    }
  }
  EXPECT_EQ(got[me_ * 4], static_cast<void*>(p)) << "ptr to myself is the address itself";
}

// Team ranks everywhere: world ranks 1, 3, 5, ... as a team of n / 2.
TEST_F(Device, StridedTeam) {
  char* p = symmetric<char>(4096);
  ASSERT_NE(p, nullptr);
  const int size = n_ / 2;
  symcommTeam_t team = SYMCOMM_TEAM_INVALID;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 1, 2, size, &team));
  const bool member = me_ % 2 == 1;
  ASSERT_EQ(team != SYMCOMM_TEAM_INVALID, member);
  DeviceComm t{};
  if (member) {
    SC_OK(symcommGetDeviceComm(comm_, team, &t));
    void** out = plain<void*>(4 * static_cast<size_t>(size));
    int* ints = plain<int>(2 + static_cast<size_t>(size));
    ASSERT_TRUE(out && ints);
    CUDA_OK(cudaMemset(out, kPoison, 4 * size * sizeof(void*)));
    CUDA_OK(cudaMemset(ints, kPoison, (2 + size) * sizeof(int)));
    addr_kernel<<<1, 1>>>(t, p, out, ints);
    LAUNCH_OK();
    std::vector<void*> got(4 * static_cast<size_t>(size));
    std::vector<int> got_ints(2 + static_cast<size_t>(size));
    CUDA_OK(cudaMemcpy(got.data(), out, got.size() * sizeof(void*), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(got_ints.data(), ints, got_ints.size() * sizeof(int),
                       cudaMemcpyDeviceToHost));
    EXPECT_EQ(got_ints[0], (me_ - 1) / 2);
    EXPECT_EQ(got_ints[1], size);
    for (int pe = 0; pe < size; ++pe) {
      EXPECT_EQ(got_ints[2 + pe], 1 + 2 * pe);
      for (int j = 0; j < 4; ++j)
        EXPECT_EQ(got[pe * 4 + j], symcommPtr(comm_, p + offset_at(j), 1 + 2 * pe))
            << "team rank " << pe << " offset " << offset_at(j);
    }
  }
  // The team's barrier, run by its members; every rank takes part in the host calls.
  ASSERT_NO_FATAL_FAILURE(run_barriers(member ? &t : nullptr, 32, 100));
}

TEST_F(Device, FenceAndQuietPublishData) {
  char* slots = symmetric<char>(kPieces * kPieceBytes);
  uint64_t* flag = symmetric<uint64_t>(1);
  char* stage = plain<char>(kPieces * kPieceBytes);
  uint64_t* values = plain<uint64_t>(kPieces);
  ull* bad = plain<ull>(1);
  int* rc = plain<int>(1);
  ASSERT_TRUE(slots && flag && stage && values && bad && rc);
  std::vector<uint64_t> v(kPieces);
  for (int r = 0; r < kPieces; ++r) v[r] = static_cast<uint64_t>(r + 1);
  CUDA_OK(cudaMemcpy(values, v.data(), kPieces * sizeof(uint64_t), cudaMemcpyHostToDevice));
  for (int mode : {kFence, kQuietThread, kQuietWarp, kQuietBlock}) {
    SCOPED_TRACE(std::string(kPublishName[mode]) + " seed " + std::to_string(seed_));
    const uint64_t what = rng_();
    for (int r = 0; r < kPieces; ++r) mp::fill(stage + r * kPieceBytes, kPieceBytes, me_, what + r);
    CUDA_OK(cudaMemset(slots, kPoison, kPieces * kPieceBytes));
    CUDA_OK(cudaMemset(flag, 0, sizeof(uint64_t)));
    CUDA_OK(cudaMemset(bad, 0, sizeof(ull)));
    CUDA_OK(cudaMemset(rc, 0, sizeof(int)));
    CUDA_OK(cudaDeviceSynchronize());
    SC_OK(symcommHostBarrier(comm_));
    publish_kernel<<<2, 256>>>(h_, mode, slots, stage, flag, values, what, bad, rc);
    LAUNCH_OK();
    SC_OK(symcommHostBarrier(comm_));
    ull bad_host = 1;
    int rc_host = -1;
    uint64_t flag_host = 0;
    CUDA_OK(cudaMemcpy(&bad_host, bad, sizeof bad_host, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&flag_host, flag, sizeof flag_host, cudaMemcpyDeviceToHost));
    EXPECT_EQ(rc_host, 0);
    EXPECT_EQ(bad_host, 0u) << "bytes of a piece not there when its flag was";
    EXPECT_EQ(flag_host, static_cast<uint64_t>(kPieces));
  }
}

TEST_F(Device, EveryComparisonWithPutSignalWarp) {
  const CmpSteps steps{{{symcommCmpNe, 7, 7, 8},    {symcommCmpLe, 50, 100, 50},
                        {symcommCmpLt, 5, 10, 4},   {symcommCmpGt, 9, 9, 10},
                        {symcommCmpGe, 30, 29, 30}, {symcommCmpEq, 77, 76, 77}}};
  char* data = symmetric<char>(kCmpSteps * kCmpBytes);
  uint64_t* words = symmetric<uint64_t>(kCmpSteps);
  char* src = plain<char>(kCmpSteps * kCmpBytes + 1);
  ull* bad = plain<ull>(1);
  int* rc = plain<int>(1);
  ASSERT_TRUE(data && words && src && bad && rc);
  src += 1;  // the source unaligned against the destination: byte accesses too
  const uint64_t what = rng_();
  for (int i = 0; i < kCmpSteps; ++i) mp::fill(src + i * kCmpBytes, kCmpBytes, me_, what + i);
  uint64_t before[kCmpSteps];
  for (int i = 0; i < kCmpSteps; ++i) before[i] = steps.step[i].before;
  CUDA_OK(cudaMemcpy(words, before, sizeof before, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(data, kPoison, kCmpSteps * kCmpBytes));
  CUDA_OK(cudaMemset(bad, 0, sizeof(ull)));
  CUDA_OK(cudaMemset(rc, 0, sizeof(int)));
  CUDA_OK(cudaDeviceSynchronize());
  SC_OK(symcommHostBarrier(comm_));
  DeviceComm c = h_;
  c.wait_timeout_ns = 10'000'000'000ull;  // a comparison that never holds fails in 10 s
  cmp_kernel<<<2, 128>>>(c, steps, data, src, words, what, bad, rc);
  LAUNCH_OK();
  SC_OK(symcommHostBarrier(comm_));
  ull bad_host = 1;
  int rc_host = -1;
  uint64_t after[kCmpSteps];
  CUDA_OK(cudaMemcpy(&bad_host, bad, sizeof bad_host, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(&rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(after, words, sizeof after, cudaMemcpyDeviceToHost));
  EXPECT_EQ(rc_host, 0);
  EXPECT_EQ(bad_host, 0u) << "a wait passed before its data arrived, seed " << seed_;
  for (int i = 0; i < kCmpSteps; ++i) EXPECT_EQ(after[i], steps.step[i].after) << "step " << i;
}

// Device handles of the rows and columns of a 2D split (rows of 2): ranks, world ranks and
// translations on the device agree with the host's, and each team's barrier works.
TEST_F(Device, TwoDimensionalTeams) {
  symcommTeam_t row = SYMCOMM_TEAM_INVALID, col = SYMCOMM_TEAM_INVALID;
  SC_OK(symcommTeamSplit2D(comm_, SYMCOMM_TEAM_WORLD, 2, &row, &col));
  DeviceComm rh{}, ch{};
  SC_OK(symcommGetDeviceComm(comm_, row, &rh));
  SC_OK(symcommGetDeviceComm(comm_, col, &ch));
  int* ints = plain<int>(4 + 4 * static_cast<size_t>(n_));
  ASSERT_NE(ints, nullptr);
  for (int which = 0; which < 2; ++which) {
    const symcommTeam_t team = which == 0 ? row : col, other = which == 0 ? col : row;
    const DeviceComm& t = which == 0 ? rh : ch;
    SCOPED_TRACE(which == 0 ? "row" : "column");
    int rank = -2, size = -2;
    SC_OK(symcommTeamRank(comm_, team, &rank));
    SC_OK(symcommTeamSize(comm_, team, &size));
    CUDA_OK(cudaMemset(ints, kPoison, (4 + 4 * n_) * sizeof(int)));
    translate_kernel<<<1, 1>>>(t, which == 0 ? ch : rh, n_, ints);
    LAUNCH_OK();
    std::vector<int> got(4 + 4 * static_cast<size_t>(n_));
    CUDA_OK(cudaMemcpy(got.data(), ints, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT_EQ(got[0], rank);
    EXPECT_EQ(got[1], size);
    for (int pe = 0; pe < size; ++pe) {
      int world = -2, there = -2;
      SC_OK(symcommTeamTranslate(comm_, team, pe, SYMCOMM_TEAM_WORLD, &world));
      SC_OK(symcommTeamTranslate(comm_, team, pe, other, &there));
      EXPECT_EQ(got[2 + 3 * pe], world) << "world_rank of " << pe;
      EXPECT_EQ(got[3 + 3 * pe], pe) << "team_rank_of(world_rank(" << pe << "))";
      EXPECT_EQ(got[4 + 3 * pe], there) << "team_translate of " << pe;
    }
    const int* rest = &got[2 + 3 * static_cast<size_t>(size)];
    EXPECT_EQ(rest[0], -1) << "team_translate of pe -1";
    EXPECT_EQ(rest[1], -1) << "team_translate of pe team_size";
    for (int w = 0; w < n_; ++w) {
      int want = -2;
      SC_OK(symcommTeamTranslate(comm_, SYMCOMM_TEAM_WORLD, w, team, &want));
      EXPECT_EQ(rest[2 + w], want) << "team_rank_of world rank " << w;
    }
    ASSERT_NO_FATAL_FAILURE(run_barriers(&t, 32, 100));
  }
  SC_OK(symcommTeamDestroy(comm_, row));
  SC_OK(symcommTeamDestroy(comm_, col));
}

// A barrier_block that the last rank never enters: the others time out, the record names
// the absent member (its world rank as the pe, its slot as the address), and the host
// reports it so. The team is one of its own (its members' barrier counts now disagree);
// the world's barriers still work.
TEST_F(Device, BarrierThatAMemberMissesRecordsIt) {
  symcommTeam_t team = SYMCOMM_TEAM_INVALID;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 1, n_, &team));
  DeviceComm t{};
  SC_OK(symcommGetDeviceComm(comm_, team, &t));
  t.wait_timeout_ns = 200'000'000;
  int* rc = plain<int>(1);
  ASSERT_NE(rc, nullptr);
  CUDA_OK(cudaMemset(rc, 0xff, sizeof(int)));
  CUDA_OK(cudaDeviceSynchronize());
  const int absent = n_ - 1;
  SC_OK(symcommHostBarrier(comm_));
  if (me_ != absent) {
    barrier_once_kernel<<<1, 64>>>(t, rc);
    LAUNCH_OK();
    int rc_host = -1;
    CUDA_OK(cudaMemcpy(&rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
    EXPECT_EQ(rc_host, symcommTimeout);
    const symcomm::DeviceError e = snapshot(h_.error);
    EXPECT_EQ(e.code, symcommTimeout);
    EXPECT_EQ(e.pe, absent) << "the record names the member that did not arrive";
    EXPECT_EQ(e.address, reinterpret_cast<uintptr_t>(t.barrier_slots + absent));
    EXPECT_EQ(e.cmp, symcommCmpGe);
    EXPECT_EQ(e.expected, 1u);
    EXPECT_EQ(e.observed, 0u);
    SC_FAILS(symcommHostBarrier(comm_), symcommTimeout);
    std::string msg = symcommGetLastError();
    EXPECT_NE(msg.find("waited for rank " + std::to_string(absent) + ", which did not arrive"),
              std::string::npos) << msg;
  } else {
    SC_OK(symcommHostBarrier(comm_));
  }
  SC_OK(symcommHostBarrier(comm_));
  SC_OK(symcommTeamDestroy(comm_, team));
  ASSERT_NO_FATAL_FAILURE(run_barriers(&h_, 64, 10));
}

}  // namespace
