// The device API (symcomm/device.cuh) from kernels: put and get at every scope with any
// size and alignment, barrier_block, and atomics; the Device fixture's shared steps
// (put_round, get_round, run_barriers). Signals, teams and timeouts are in
// device_signal_test.cu, device_team_test.cu and device_timeout_test.cu; the fixture is in
// device_fixture.cuh. Outputs are poisoned before and checked byte by byte after.
#include <algorithm>
#include <string>
#include <vector>

#include "device_fixture.cuh"

namespace device_test {

// ---------------------------------------------------------------------------------------
// 1. put and get at thread, warp and block scope
// ---------------------------------------------------------------------------------------
const char* const kScopeName[] = {"thread", "warp", "block"};

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
// 4. barrier_block
// ---------------------------------------------------------------------------------------
constexpr int kBarriers = 1000;

// Before barrier k each rank adds 1 to the counter of its right neighbour (a relaxed signal)
// and puts k into its mailbox (from `scratch`, plain memory). After barrier k, my left
// neighbour has done k adds and k puts, and cannot do its (k + 2)-th before I enter barrier
// k + 1: counter and mailbox are k or k + 1. The check runs on the block's last thread, not
// the one that wrote. Signals and puts reach a neighbour on another node too (the ring).
__global__ void barrier_kernel(DeviceComm c, int barriers, uint64_t* counter, uint64_t* mailbox,
                               uint64_t* scratch, int* rc_out, ull* bad, uint64_t* first_bad) {
  const int me = symcomm::team_rank(c), n = symcomm::team_size(c), right = (me + 1) % n;
  for (uint64_t k = 1; k <= static_cast<uint64_t>(barriers); ++k) {
    if (threadIdx.x == 0) {
      symcomm::signal_op(c, counter, 1, symcommSignalAdd, right);
      *scratch = k;
      symcomm::put(c, mailbox, scratch, sizeof k, right);
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

// `barriers` barriers of barrier_kernel in one launch of `threads` threads by the members
// of c's team; then the counter, written only by the left neighbour, equals `barriers`.
// c == nullptr: this rank is not a member and takes part in the collective calls only.
void Device::run_barriers(const DeviceComm* c, unsigned threads, int barriers) {
  SCOPED_TRACE(std::to_string(threads) + " threads per block");
  uint64_t* words = symmetric<uint64_t>(2);  // counter, mailbox
  int* rc = plain<int>(1);
  ull* bad = plain<ull>(1);
  uint64_t* first_bad = plain<uint64_t>(3);
  uint64_t* scratch = plain<uint64_t>(1);
  ASSERT_TRUE(words && rc && bad && first_bad && scratch);
  CUDA_OK(cudaMemset(words, 0, 2 * sizeof(uint64_t)));
  CUDA_OK(cudaMemset(rc, 0, sizeof(int)));
  CUDA_OK(cudaMemset(bad, 0, sizeof(ull)));
  CUDA_OK(cudaMemset(first_bad, 0, 3 * sizeof(uint64_t)));
  CUDA_OK(cudaDeviceSynchronize());
  SC_OK(symcommHostBarrier(comm_));
  if (c != nullptr) {
    barrier_kernel<<<1, threads>>>(*c, barriers, words, words + 1, scratch, rc, bad, first_bad);
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

// Whether every member of the handle's team is mapped here (no rank of another node).
bool all_mapped(const DeviceComm& c) { return c.net.slots == nullptr; }

TEST_F(Device, AtomicsAreExact) {
  if (!all_mapped(h_)) GTEST_SKIP() << "atomics need every member mapped (ranks on other nodes)";
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

// ---------------------------------------------------------------------------------------
// 6. Members on other nodes: what the ring cannot take is refused, done nowhere, reported
// ---------------------------------------------------------------------------------------
__global__ void refused_kernel(DeviceComm c, int what, uint64_t* word, char* sym, int pe,
                               uint64_t* got) {
  __shared__ char staged[128];
  if (threadIdx.x != 0) return;
  for (int i = 0; i < 128; ++i) staged[i] = static_cast<char>(i);
  if (what == 0) *got = symcomm::atomic_fetch_add(c, word, 5, pe);
  if (what == 1) symcomm::put(c, sym, staged, 64, pe);  // from shared memory
  // From shared memory, larger than a descriptor carries (kDeviceNetInlineBytes).
  if (what == 2) symcomm::put_signal(c, sym, staged, sizeof staged, word, 1, symcommSignalSet, pe);
}

TEST_F(Device, AtomicsAndSharedMemoryToAMemberOnAnotherNodeAreRefused) {
  if (all_mapped(h_)) GTEST_SKIP() << "needs a member on another node";
  uint64_t* word = symmetric<uint64_t>(1);
  char* sym = symmetric<char>(128);
  uint64_t* got = plain<uint64_t>(1);
  ASSERT_TRUE(word && sym && got);
  static_assert(symcomm::kDeviceNetInlineBytes < 128, "the put-signal below must not fit a descriptor");
  int other = -1;  // the first member that is not mapped here
  for (int pe = 0; pe < n_ && other < 0; ++pe)
    if (symcommPtr(comm_, word, pe) == nullptr) other = pe;
  ASSERT_GE(other, 0);
  CUDA_OK(cudaMemset(word, 0, sizeof(uint64_t)));
  CUDA_OK(cudaMemset(sym, kPoison, 128));
  CUDA_OK(cudaMemset(got, 0xFF, sizeof(uint64_t)));
  CUDA_OK(cudaDeviceSynchronize());
  SC_OK(symcommHostBarrier(comm_));
  struct Case {
    int what;
    symcommResult_t code;
    const char* says;
  };
  for (const Case& k : {Case{0, symcommNotSupported, "atomics need the member mapped"},
                        Case{1, symcommInvalidArgument, "not global memory"},
                        Case{2, symcommInvalidArgument, "not global memory"}}) {
    SCOPED_TRACE(k.says);
    refused_kernel<<<1, 32>>>(h_, k.what, word, sym, other, got);
    LAUNCH_OK();
    const symcommResult_t rc = symcommQuietOnStream(comm_, nullptr);
    const std::string why = symcommGetLastError();
    EXPECT_EQ(rc, k.code) << why;
    EXPECT_NE(why.find(k.says), std::string::npos) << why;
    EXPECT_EQ(symcommQuietOnStream(comm_, nullptr), symcommSuccess) << "reported once";
  }
  uint64_t got_host = 1;
  CUDA_OK(cudaMemcpy(&got_host, got, sizeof got_host, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got_host, 0u) << "a refused atomic returns 0";
  SC_OK(symcommHostBarrier(comm_));  // every rank's refused calls are behind it
  uint64_t word_host = 1;
  std::vector<uint8_t> sym_host(128);
  CUDA_OK(cudaMemcpy(&word_host, word, sizeof word_host, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(sym_host.data(), sym, 128, cudaMemcpyDeviceToHost));
  EXPECT_EQ(word_host, 0u) << "no atomic or signal was applied here";
  EXPECT_EQ(std::count(sym_host.begin(), sym_host.end(), kPoison), 128) << "nothing landed here";
}

}  // namespace device_test
