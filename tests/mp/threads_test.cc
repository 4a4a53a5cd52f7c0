// Communicators used at once from threads of one process (symcomm.h: "Different communicators
// may be used concurrently from different threads"). Each rank makes kThreads communicators,
// then each thread takes one with a stream of its own and runs rounds of symcommMalloc, an
// all-reduce in place and an all-gather from plain memory (automatic algorithm), a
// put-signal to the right neighbour and a wait, a check of every result, a host barrier and
// symcommFree, while the other threads do the same on theirs; one thread also makes calls
// that fail, whose messages must stay on that thread. Sizes are small: kernels of different
// communicators share the GPU, and ones that wait for their peers must fit on it together
// (symcomm.h, docs/coll.md "Rules and limits"). The threads copy data in their stream's order
// only (copy_*_host_on): a whole-device synchronisation would wait for other threads' kernels,
// which wait for their peers. First launches of lazily loaded kernels would wait for other
// communicators' waiting kernels and time out in round 0 on a fresh 4 x H200, so all are
// loaded when a communicator is made (src/base/kernel_load.h).
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "mp.h"

namespace {

constexpr int kThreads = 3;
constexpr int kRounds = 10;

// One thread's work on communicator `c` (index k), with `seed` the same on every rank.
// `failed` is set by thread 0 once it made its failing calls (or left early), and the other
// threads wait for it before they check their own message.
void work(symcommComm_t c, int k, uint64_t seed, std::atomic<bool>& failed) {
  mp::use_device(c);
  symcommStream_t stream = mp::new_stream();
  const int n = mp::nranks(), me = mp::rank();
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  SCOPED_TRACE(mp::seed_note(seed));  // gtest's traces are per thread
  std::mt19937_64 rng(seed + static_cast<uint64_t>(k));
  // Plain memory is allocated once: cudaFree may wait for the whole GPU.
  int32_t* plain = static_cast<int32_t*>(mp::local_alloc(1024 * sizeof(int32_t)));
  uint8_t* staged = static_cast<uint8_t*>(mp::local_alloc(64 << 10));
  for (int round = 0; round < kRounds; ++round) {
    const size_t count = 1 + rng() % 2048, gathered = 1 + rng() % 1024;
    const size_t bytes = 1 + rng() % (64 << 10);
    const symcommEngine_t engine = static_cast<symcommEngine_t>(rng() % 3);
    const std::string at = "communicator " + std::to_string(k) + ", round " + std::to_string(round);
    int64_t* sum = nullptr;
    int32_t* all = nullptr;
    uint8_t* inbox = nullptr;
    uint64_t* sig = nullptr;
    SC_OK(symcommMalloc(c, count * sizeof(int64_t), reinterpret_cast<void**>(&sum)));
    SC_OK(symcommMalloc(c, n * gathered * sizeof(int32_t), reinterpret_cast<void**>(&all)));
    SC_OK(symcommMalloc(c, bytes, reinterpret_cast<void**>(&inbox)));
    SC_OK(symcommMalloc(c, sizeof(uint64_t), reinterpret_cast<void**>(&sig)));
    // Inputs: rank r contributes (r + 1) * (i + round + k) to the sum, r * 100000 + i to the
    // gather, and pattern bytes to its right neighbour; the signal word starts at 0.
    std::vector<int64_t> mine(count);
    for (size_t i = 0; i < count; ++i)
      mine[i] = (me + 1) * static_cast<int64_t>(i + static_cast<size_t>(round + k));
    std::vector<int32_t> block(gathered);
    for (size_t i = 0; i < gathered; ++i) block[i] = me * 100000 + static_cast<int32_t>(i);
    std::vector<uint8_t> out(bytes);
    for (size_t i = 0; i < bytes; ++i)
      out[i] = mp::pattern(me, 7000 + static_cast<uint64_t>(round), i);
    const uint64_t zero = 0;
    mp::copy_from_host_on(stream, sum, mine.data(), count * sizeof(int64_t));
    mp::copy_from_host_on(stream, plain, block.data(), gathered * sizeof(int32_t));
    mp::copy_from_host_on(stream, staged, out.data(), bytes);
    mp::copy_from_host_on(stream, sig, &zero, sizeof zero);
    SC_OK(symcommHostBarrier(c));  // every rank's inputs are in place
    SC_OK(symcommAllReduceOnStream(c, SYMCOMM_TEAM_WORLD, sum, sum, count, symcommInt64,
                                   symcommSum, nullptr, stream));
    SC_OK(symcommAllGatherOnStream(c, SYMCOMM_TEAM_WORLD, plain, all, gathered, symcommInt32,
                                   nullptr, stream));
    SC_OK(symcommPutSignalOnStream(c, inbox, staged, bytes, sig, 1, symcommSignalSet, right,
                                   engine, stream));
    SC_OK(symcommSignalWaitOnStream(c, sig, symcommCmpEq, 1, stream));
    if (k == 0 && round == kRounds / 2) {
      // Failing calls here; the other threads' calls go on meanwhile.
      SC_FAILS_SAYING(symcommPutOnStream(c, inbox, staged, bytes, n + 3, engine, stream),
                      symcommInvalidArgument, "pe " + std::to_string(n + 3));
      SC_FAILS_SAYING(symcommAllReduceOnStream(c, SYMCOMM_TEAM_WORLD, sum, sum, count,
                                               symcommInt64, symcommSum, "no-such-algorithm",
                                               stream),
                      symcommInvalidArgument, "no-such-algorithm");
      failed = true;
      failed.notify_all();
    }
    std::vector<int64_t> got_sum(count);
    std::vector<int32_t> got_all(n * gathered);
    std::vector<uint8_t> got_bytes(bytes);
    mp::copy_to_host_on(stream, got_sum.data(), sum, count * sizeof(int64_t));
    mp::copy_to_host_on(stream, got_all.data(), all, got_all.size() * sizeof(int32_t));
    mp::copy_to_host_on(stream, got_bytes.data(), inbox, bytes);
    EXPECT_EQ(symcommQuietOnStream(c, stream), symcommSuccess)
        << at << ": " << symcommGetLastError();
    size_t bad = 0;
    const int64_t ranks_sum = static_cast<int64_t>(n) * (n + 1) / 2;
    for (size_t i = 0; i < count; ++i)
      bad += got_sum[i] != ranks_sum * static_cast<int64_t>(i + static_cast<size_t>(round + k));
    EXPECT_EQ(bad, 0u) << at << ": all-reduce of " << count << " int64";
    bad = 0;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < gathered; ++i)
        bad += got_all[static_cast<size_t>(r) * gathered + i] !=
               r * 100000 + static_cast<int32_t>(i);
    EXPECT_EQ(bad, 0u) << at << ": all-gather of " << gathered << " int32";
    bad = 0;
    for (size_t i = 0; i < bytes; ++i)
      bad += got_bytes[i] != mp::pattern(left, 7000 + static_cast<uint64_t>(round), i);
    EXPECT_EQ(bad, 0u) << at << ": put-signal of " << bytes << " bytes from rank " << left;
    SC_OK(symcommHostBarrier(c));  // every rank checked before the next round writes
    for (void* p : {static_cast<void*>(sum), static_cast<void*>(all), static_cast<void*>(inbox),
                    static_cast<void*>(sig)})
      SC_OK(symcommFree(c, p));
  }
  // Thread 0's failures do not reach this thread's message: once thread 0 made its failing
  // calls (waited for here; without the wait this check could run before them), the message
  // is still what this thread's own calls left, and names neither failure.
  if (k != 0) {
    const std::string own = symcommGetLastError();
    failed.wait(false);
    const std::string after = symcommGetLastError();
    EXPECT_EQ(after, own);
    EXPECT_EQ(after.find("no-such-algorithm"), std::string::npos) << after;
    EXPECT_EQ(after.find("pe " + std::to_string(n + 3)), std::string::npos) << after;
  }
  mp::sync(stream);
  mp::free_stream(stream);
  mp::local_free(staged);
  mp::local_free(plain);
}

TEST(Threads, CommunicatorsUsedAtOnceFromThreads) {
  std::vector<symcommComm_t> comms;
  for (int k = 0; k < kThreads; ++k) {  // collective over the world, in the same order
    comms.push_back(mp::new_comm());
    ASSERT_NE(comms.back(), nullptr);
  }
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));  // this thread's failures; work() names it on its own
  std::atomic<bool> failed{false};  // thread 0 made its failing calls
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k)
    threads.emplace_back([&, k] {
      work(comms[static_cast<size_t>(k)], k, seed, failed);
      if (k == 0) {  // also where it left before them (a failed assertion): nobody waits forever
        failed = true;
        failed.notify_all();
      }
    });
  for (std::thread& t : threads) t.join();
  for (symcommComm_t c : comms)
    EXPECT_EQ(symcommFinalize(c), symcommSuccess) << symcommGetLastError();
}

}  // namespace

namespace {

// A call from a thread that never chose a device (such as a worker thread of the caller's
// runtime) runs on the communicator's GPU and leaves that thread as it found it: no context
// current, and no primary context made on GPU 0 (checked through the driver only). Before, the call "restored" device 0 on
// the way out, which created GPU 0's primary context (hundreds of MiB) in every process
// that did so. Checked on ranks whose GPU is not GPU 0.
TEST(Threads, ACallFromAThreadWithoutADeviceMakesNoContextOnGpu0) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "contexts are the cuda space's";
  int device = -1;
  SC_OK(symcommCommDevice(mp::world(), &device));
  void* sym = nullptr;
  SC_OK(symcommMalloc(mp::world(), 4096, &sym));
  void* local = mp::local_alloc(4096);
  symcommStream_t stream = mp::new_stream();
  using GetState = CUresult (*)(CUdevice, unsigned*, int*);
  using GetCurrent = CUresult (*)(CUcontext*);
  void* state_fn = nullptr;
  void* current_fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &state_fn, 12000,
                                             cudaEnableDefault, &found), cudaSuccess);
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &current_fn, 12000,
                                             cudaEnableDefault, &found),
            cudaSuccess);
  auto gpu0_active = [&] {
    unsigned flags = 0;
    int active = -1;
    EXPECT_EQ(reinterpret_cast<GetState>(state_fn)(0, &flags, &active), CUDA_SUCCESS);
    return active;
  };
  bool checked = false;
  if (device != 0 && gpu0_active() == 0) {
    checked = true;
    symcommResult_t put = symcommInternalError, quiet = symcommInternalError;
    CUcontext after = reinterpret_cast<CUcontext>(1);
    // The thread makes no runtime call of its own: the runtime would pick device 0 for it.
    std::thread t([&] {
      put = symcommPutOnStream(mp::world(), sym, local, 4096, mp::rank(), symcommEngineSm, stream);
      quiet = symcommQuietOnStream(mp::world(), stream);
      reinterpret_cast<GetCurrent>(current_fn)(&after);
    });
    t.join();
    EXPECT_EQ(put, symcommSuccess);
    EXPECT_EQ(quiet, symcommSuccess);
    EXPECT_EQ(after, nullptr) << "a context stayed current on the thread";
    EXPECT_EQ(gpu0_active(), 0) << "the call made GPU 0's primary context";
  }
  mp::sync(stream);
  mp::free_stream(stream);
  mp::local_free(local);
  SC_OK(symcommHostBarrier(mp::world()));
  SC_OK(symcommFree(mp::world(), sym));
  if (!checked)
    GTEST_SKIP() << "this rank's GPU is GPU 0, or GPU 0's context was made before (device "
                 << device << ")";
}

}  // namespace
