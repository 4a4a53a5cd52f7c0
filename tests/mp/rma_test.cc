// One-sided communication on a stream (host API), in both memory spaces: puts and gets of
// random sizes and offsets on every engine, a source written by an early-triggering kernel,
// empty and pageable transfers, streams of another GPU, signals and their ordering, all
// peers at once, barriers that order puts, graph capture. Waits, bad arguments, teams and
// the stress are in rma_wait_test.cc, rma_errors_test.cc, rma_team_test.cc and
// rma_stress_test.cc (one binary).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "rma_fixture.h"

namespace rma_test {

TEST_F(Rma, PutAndGetRandomSizesAndOffsets) {
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  std::mt19937_64 rng(seed);
  const size_t max_bytes = (5 << 20) + 333;  // beyond a 2 MiB chunk
  char* sym;
  SC_OK(symcommMalloc(comm_, max_bytes + 128, reinterpret_cast<void**>(&sym)));
  char* local = static_cast<char*>(mp::local_alloc(max_bytes + 128));
  uint64_t what = 1;
  for (symcommEngine_t engine : kEngines) {
    for (int trial = 0; trial < 5; ++trial) {
      // 1 byte, small, medium, and once per engine across chunk boundaries.
      size_t bytes = trial == 0   ? 1
                     : trial < 3  ? 1 + rng() % 5000
                     : trial == 3 ? 1 + rng() % (256 << 10)
                                  : (2 << 20) + rng() % (max_bytes - (2 << 20));
      size_t src_off = rng() % 64, dst_off = rng() % 64;
      ++what;
      // Put: my data into my right neighbour's buffer; poisoned first.
      mp::fill(sym, bytes + 128, mp::rank(), 1000000 + what);
      mp::fill(local + src_off, bytes, mp::rank(), what);
      SC_OK(symcommHostBarrier(comm_));
      SC_OK(symcommPutOnStream(comm_, sym + dst_off, local + src_off, bytes, right(), engine,
                               stream_));
      SC_OK(symcommQuietOnStream(comm_, stream_));
      mp::sync(stream_);
      SC_OK(symcommHostBarrier(comm_));
      EXPECT_EQ(mp::count_mismatches(sym + dst_off, bytes, left(), what), 0u)
          << "put engine " << engine << " bytes " << bytes << " offsets " << src_off << "/"
          << dst_off;
      // The poison around the target is untouched, before it and after it.
      EXPECT_EQ(mismatches(sym, dst_off, mp::rank(), 1000000 + what), 0u);
      EXPECT_EQ(mismatches(sym + dst_off + bytes, 128 - dst_off, mp::rank(), 1000000 + what,
                           dst_off + bytes), 0u) << "put wrote past its end, bytes " << bytes;
      SC_OK(symcommHostBarrier(comm_));
      // Get: my left neighbour's buffer (which it wrote itself) into my local buffer.
      mp::fill(sym, bytes + 64, mp::rank(), 2000000 + what);
      mp::fill(local, bytes + 64, mp::rank(), 7);
      SC_OK(symcommHostBarrier(comm_));
      SC_OK(symcommGetOnStream(comm_, local + dst_off, sym + src_off, bytes, left(), engine,
                               stream_));
      mp::sync(stream_);
      // The left rank's pattern starts at its buffer's start: compare from src_off on.
      EXPECT_EQ(mismatches(local + dst_off, bytes, left(), 2000000 + what, src_off), 0u)
          << "get engine " << engine << " bytes " << bytes;
      // The poison around the destination is untouched.
      EXPECT_EQ(mismatches(local, dst_off, mp::rank(), 7), 0u);
      EXPECT_EQ(mismatches(local + dst_off + bytes, 64 - dst_off, mp::rank(), 7, dst_off + bytes),
                0u) << "get wrote past its end, bytes " << bytes;
      SC_OK(symcommHostBarrier(comm_));
    }
  }
  mp::local_free(local);
  SC_OK(symcommFree(comm_, sym));
}

// The source of a put is written by a kernel just before it on the stream, one that lets the
// next kernel launch at once and writes only 1 ms later (written for programmatic
// dependent launch). The SM engine's copy kernel starts early then (launched with PDL): it
// must still copy the data, not what was there before. The CE engine is ordered by the
// stream as any copy.
TEST_F(Rma, PutReadsWhatAnEarlyTriggeringKernelWrote) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "a kernel before the put: GPUs only";
  const size_t bytes = (1 << 20) + 40;
  char* sym;
  SC_OK(symcommMalloc(comm_, bytes, reinterpret_cast<void**>(&sym)));
  char* local = static_cast<char*>(mp::local_alloc(bytes));
  char* data = static_cast<char*>(mp::local_alloc(bytes));
  uint64_t what = 77;
  for (symcommEngine_t engine : kEngines) {
    ++what;
    mp::fill(sym, bytes, mp::rank(), 1000000 + what);
    mp::fill(local, bytes, mp::rank(), 2000000 + what);  // what the put must not copy
    mp::fill(data, bytes, mp::rank(), what);
    // Once before, so that the kernel is loaded (lazy loading can take longer than the delay).
    SC_OK(symcommPutOnStream(comm_, sym, local, bytes, right(), engine, stream_));
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));
    mp::fill(sym, bytes, mp::rank(), 1000000 + what);
    SC_OK(symcommHostBarrier(comm_));
    mp::copy_after_early_trigger(stream_, local, data, bytes, 1000);
    SC_OK(symcommPutOnStream(comm_, sym, local, bytes, right(), engine, stream_));
    SC_OK(symcommQuietOnStream(comm_, stream_));
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));
    EXPECT_EQ(mp::count_mismatches(sym, bytes, left(), what), 0u) << "engine " << engine;
    SC_OK(symcommHostBarrier(comm_));
  }
  mp::local_free(data);
  mp::local_free(local);
  SC_OK(symcommFree(comm_, sym));
}

TEST_F(Rma, ZeroBytesIsANoOp) {
  char* sym;
  SC_OK(symcommMalloc(comm_, 64, reinterpret_cast<void**>(&sym)));
  char* local = static_cast<char*>(mp::local_alloc(64));
  mp::fill(sym, 64, mp::rank(), 11);
  mp::fill(local, 64, mp::rank(), 12);
  SC_OK(symcommHostBarrier(comm_));
  for (symcommEngine_t engine : kEngines) {
    SC_OK(symcommPutOnStream(comm_, sym, nullptr, 0, right(), engine, stream_));
    SC_OK(symcommPutOnStream(comm_, sym + 8, local, 0, right(), engine, stream_));
    SC_OK(symcommGetOnStream(comm_, nullptr, sym, 0, left(), engine, stream_));
    SC_OK(symcommGetOnStream(comm_, local + 8, sym, 0, left(), engine, stream_));
  }
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  EXPECT_EQ(mismatches(sym, 64, mp::rank(), 11), 0u) << "a zero-byte put wrote";
  EXPECT_EQ(mismatches(local, 64, mp::rank(), 12), 0u) << "a zero-byte get wrote";
  mp::local_free(local);
  SC_OK(symcommFree(comm_, sym));
}

// A plain local buffer a kernel of this GPU cannot touch (pageable host memory): auto
// moves it with the copy engines (an SM copy would fault the kernel, ending the context),
// sm refuses it naming the buffer, ce takes it. In the host space all memory is the host's.
TEST_F(Rma, PageableLocalBuffers) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "the host space takes any host memory";
  const size_t bytes = 4096;  // small: auto picks sm for device memory of this size
  char* sym;
  SC_OK(symcommMalloc(comm_, bytes, reinterpret_cast<void**>(&sym)));
  std::vector<uint8_t> src(bytes), dst(bytes, 0);
  for (size_t i = 0; i < bytes; ++i) src[i] = mp::pattern(mp::rank(), 21, i);
  SC_OK(symcommHostBarrier(comm_));
  SC_FAILS_SAYING(symcommPutOnStream(comm_, sym, src.data(), bytes, right(), symcommEngineSm,
                                     stream_),
                  symcommInvalidArgument, "src", "pageable host memory", "symcommEngineCe");
  SC_FAILS_SAYING(symcommGetOnStream(comm_, dst.data(), sym, bytes, left(), symcommEngineSm,
                                     stream_),
                  symcommInvalidArgument, "dst", "pageable host memory");
  for (symcommEngine_t engine : {symcommEngineAuto, symcommEngineCe}) {
    mp::fill(sym, bytes, 0xff, 0);
    SC_OK(symcommHostBarrier(comm_));
    SC_OK(symcommPutOnStream(comm_, sym, src.data(), bytes, right(), engine, stream_));
    SC_OK(symcommQuietOnStream(comm_, stream_));
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));
    EXPECT_EQ(mismatches(sym, bytes, left(), 21), 0u) << "put, engine " << engine;
    std::fill(dst.begin(), dst.end(), 0);
    SC_OK(symcommGetOnStream(comm_, dst.data(), sym, bytes, right(), engine, stream_));
    mp::sync(stream_);
    size_t bad = 0;  // right's sym holds what this rank put
    for (size_t i = 0; i < bytes; ++i) bad += dst[i] != mp::pattern(mp::rank(), 21, i);
    EXPECT_EQ(bad, 0u) << "get, engine " << engine;
    SC_OK(symcommHostBarrier(comm_));
  }
  SC_OK(symcommFree(comm_, sym));
}

// Stream-ordered memory (cudaMallocAsync) as the local side of puts, gets and a put-signal,
// larger than a bounce buffer (8 MiB) and of an odd size: to another node the net transport
// moves such memory through the stream's bounce buffer (transport/net/stream_bounce.h); its
// own copy context crashed inside the driver on it.
TEST_F(Rma, StreamOrderedLocalBuffers) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "stream-ordered memory is the GPU's";
  const size_t bytes = (size_t{17} << 20) + 4099;
  auto stream = static_cast<cudaStream_t>(stream_);
  char* sym;
  uint64_t* word;
  SC_OK(symcommMalloc(comm_, bytes, reinterpret_cast<void**>(&sym)));
  SC_OK(symcommMalloc(comm_, 8, reinterpret_cast<void**>(&word)));
  mp::write_u64(word, 0);
  void* src = nullptr;
  void* dst = nullptr;
  ASSERT_EQ(cudaMallocAsync(&src, bytes, stream), cudaSuccess);
  ASSERT_EQ(cudaMallocAsync(&dst, bytes, stream), cudaSuccess);
  std::vector<uint8_t> host(bytes);
  for (size_t i = 0; i < bytes; ++i) host[i] = mp::pattern(mp::rank(), 31, i);
  mp::copy_from_host_on(stream_, src, host.data(), bytes);
  ASSERT_EQ(cudaMemsetAsync(dst, 0xa5, bytes, stream), cudaSuccess);
  mp::fill(sym, bytes, 0xff, 0);
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  SC_OK(symcommPutOnStream(comm_, sym, src, bytes, right(), symcommEngineAuto, stream_));
  SC_OK(symcommQuietOnStream(comm_, stream_));
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  EXPECT_EQ(mismatches(sym, bytes, left(), 31), 0u) << "put";
  SC_OK(symcommGetOnStream(comm_, dst, sym, bytes, right(), symcommEngineAuto, stream_));
  mp::sync(stream_);
  EXPECT_EQ(mismatches(dst, bytes, mp::rank(), 31), 0u) << "get (right holds this rank's)";
  SC_OK(symcommHostBarrier(comm_));
  // A put-signal small enough to go as one message (SYMCOMM_NET_EAGER_MAX) across nodes.
  const size_t small = 4000;
  for (size_t i = 0; i < small; ++i) host[i] = mp::pattern(mp::rank(), 32, i);
  mp::copy_from_host_on(stream_, src, host.data(), small);
  SC_OK(symcommPutSignalOnStream(comm_, sym, src, small, word, 1, symcommSignalSet, right(),
                                 symcommEngineAuto, stream_));
  SC_OK(symcommSignalWaitOnStream(comm_, word, symcommCmpEq, 1, stream_));
  mp::sync(stream_);
  SC_OK(symcommQuietOnStream(comm_, stream_));  // no wait failed on the device
  EXPECT_EQ(mismatches(sym, small, left(), 32), 0u) << "put-signal";
  SC_OK(symcommHostBarrier(comm_));
  ASSERT_EQ(cudaFreeAsync(src, stream), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(dst, stream), cudaSuccess);
  mp::sync(stream_);
  SC_OK(symcommFree(comm_, word));
  SC_OK(symcommFree(comm_, sym));
}

// A stream of another GPU is refused before anything is enqueued: the communicator's kernels
// would run on that GPU, on addresses it does not map, and the fault would end both GPUs'
// contexts (a put by the SM engine and a barrier would return success and then do so).
TEST_F(Rma, AStreamOfAnotherGpuIsRefused) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "streams are the cuda space's";
  int count = 0, device = -1;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  SC_OK(symcommCommDevice(comm_, &device));
  if (count < 2) GTEST_SKIP() << "one GPU";
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaSetDevice((device + 1) % count), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
  char* sym = nullptr;
  SC_OK(symcommMalloc(comm_, 256, reinterpret_cast<void**>(&sym)));
  symcommStream_t s = reinterpret_cast<symcommStream_t>(other);
  SC_FAILS_SAYING(symcommPutOnStream(comm_, sym, sym + 128, 64, right(), symcommEngineSm, s),
                  symcommInvalidArgument, "primary context of the communicator's device");
  SC_FAILS_SAYING(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, s), symcommInvalidArgument,
                  "another GPU's stream");
  // The communicator's own stream still works.
  SC_OK(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_));
  mp::sync(stream_);
  ASSERT_EQ(cudaStreamDestroy(other), cudaSuccess);
  SC_OK(symcommHostBarrier(comm_));
  SC_OK(symcommFree(comm_, sym));
}

// Many rounds of put-signal into a ring of slots, with acknowledgements: whenever the
// receiver observes the signal of round k, the data of round k must be there in full.
TEST_F(Rma, SignalMeansDataArrived) {
  const int rounds = mp::space() == symcommSpaceHost ? 300 : 100, slots = 4;
  const size_t chunk = 64 << 10;
  char* ring;
  uint64_t* words;  // [0]: data signal (added to by my left), [1]: ack (added to by my right)
  SC_OK(symcommMalloc(comm_, chunk * slots, reinterpret_cast<void**>(&ring)));
  SC_OK(symcommMalloc(comm_, 16, reinterpret_cast<void**>(&words)));
  mp::write_u64(&words[0], 0);
  mp::write_u64(&words[1], 0);
  char* src = static_cast<char*>(mp::local_alloc(chunk * slots));
  SC_OK(symcommHostBarrier(comm_));
  size_t bad = 0;
  for (int k = 1; k <= rounds; ++k) {
    int slot = k % slots;
    // Before reusing a slot, my right neighbour must have read what I put there before.
    if (k > slots) {
      SC_OK(symcommSignalWaitOnStream(comm_, &words[1], symcommCmpGe,
                                      static_cast<uint64_t>(k - slots), stream_));
    }
    mp::sync(stream_);
    mp::fill(src + slot * chunk, chunk, mp::rank(), static_cast<uint64_t>(k));
    SC_OK(symcommPutSignalOnStream(comm_, ring + slot * chunk, src + slot * chunk, chunk, &words[0],
                                   1, symcommSignalAdd, right(),
                                   k % 2 ? symcommEngineCe : symcommEngineSm, stream_));
    SC_OK(symcommSignalWaitOnStream(comm_, &words[0], symcommCmpGe, static_cast<uint64_t>(k),
                                    stream_));
    mp::sync(stream_);
    bad += mp::count_mismatches(ring + slot * chunk, chunk, left(), static_cast<uint64_t>(k));
    SC_OK(symcommPutSignalOnStream(comm_, nullptr, nullptr, 0, &words[1], 1, symcommSignalAdd,
                                   left(), symcommEngineAuto, stream_));
  }
  mp::sync(stream_);
  EXPECT_EQ(bad, 0u);
  SC_OK(symcommHostBarrier(comm_));
  EXPECT_EQ(mp::read_u64(&words[0]), static_cast<uint64_t>(rounds));
  mp::local_free(src);
  SC_OK(symcommFree(comm_, words));
  SC_OK(symcommFree(comm_, ring));
}

TEST_F(Rma, AllPeersAtOnce) {
  const int n = mp::nranks();
  const size_t chunk = 100000 + 13;
  char* buf;
  uint64_t* sigs;
  SC_OK(symcommMalloc(comm_, chunk * n, reinterpret_cast<void**>(&buf)));
  SC_OK(symcommMalloc(comm_, 8 * n, reinterpret_cast<void**>(&sigs)));
  for (int r = 0; r < n; ++r) mp::write_u64(&sigs[r], 0);
  char* src = static_cast<char*>(mp::local_alloc(chunk));
  SC_OK(symcommHostBarrier(comm_));
  for (int round = 1; round <= 3; ++round) {
    mp::fill(src, chunk, mp::rank(), static_cast<uint64_t>(round));
    for (int pe = 0; pe < n; ++pe)
      SC_OK(symcommPutSignalOnStream(comm_, buf + chunk * mp::rank(), src, chunk, &sigs[mp::rank()],
                                     static_cast<uint64_t>(round), symcommSignalSet, pe,
                                     pe % 2 ? symcommEngineSm : symcommEngineCe, stream_));
    for (int pe = 0; pe < n; ++pe)
      SC_OK(symcommSignalWaitOnStream(comm_, &sigs[pe], symcommCmpEq, static_cast<uint64_t>(round),
                                      stream_));
    mp::sync(stream_);
    for (int pe = 0; pe < n; ++pe)
      EXPECT_EQ(mp::count_mismatches(buf + chunk * pe, chunk, pe, static_cast<uint64_t>(round)), 0u)
          << "round " << round << " from " << pe;
    SC_OK(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_));  // before the next round
    mp::sync(stream_);
  }
  mp::local_free(src);
  SC_OK(symcommFree(comm_, sigs));
  SC_OK(symcommFree(comm_, buf));
}

// A put before a barrier is visible after it: each round, my right neighbour's word holds
// the round number once the barrier is passed.
TEST_F(Rma, BarrierOrdersPuts) {
  uint64_t* word;
  SC_OK(symcommMalloc(comm_, 8, reinterpret_cast<void**>(&word)));
  uint64_t* value = static_cast<uint64_t*>(mp::local_alloc(8 * 400));
  for (int k = 0; k < 400; ++k) mp::write_u64(&value[k], static_cast<uint64_t>(k + 1));
  mp::write_u64(word, 0);
  SC_OK(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_));
  int bad = 0;
  for (int k = 0; k < 400; ++k) {
    SC_OK(symcommPutOnStream(comm_, word, &value[k], 8, right(),
                             k % 2 ? symcommEngineSm : symcommEngineCe, stream_));
    SC_OK(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_));
    if (k % 40 == 0 || mp::space() == symcommSpaceHost) {
      mp::sync(stream_);
      bad += mp::read_u64(word) != static_cast<uint64_t>(k + 1);
    }
    // Nobody overwrites my word before I read it.
    SC_OK(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_));
  }
  mp::sync(stream_);
  EXPECT_EQ(bad, 0);
  mp::local_free(value);
  SC_OK(symcommFree(comm_, word));
}

// On-stream operations captured once in a CUDA graph and replayed: a CE put, an SM put, a
// put-signal, a signal wait, a get and barriers. Barrier counts advance on the device, so
// every replay is a new barrier; the signal word is reset by a put (to this rank) after the
// wait, so every replay waits for the same value.
TEST_F(Rma, CapturedInAGraph) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "CUDA graphs need the cuda space";
  // words: [0] CE put, [1] SM put, [2] put-signal data, [3] the signal, [4] zero (for the reset)
  uint64_t* words;
  SC_OK(symcommMalloc(comm_, 5 * 8, reinterpret_cast<void**>(&words)));
  uint64_t* value = static_cast<uint64_t*>(mp::local_alloc(8));
  uint64_t* got = static_cast<uint64_t*>(mp::local_alloc(8));
  for (int i = 0; i < 5; ++i) mp::write_u64(&words[i], 0);
  SC_OK(symcommHostBarrier(comm_));
  ASSERT_EQ(mp::begin_capture(stream_), 0);
  SC_OK(symcommPutOnStream(comm_, &words[0], value, 8, right(), symcommEngineCe, stream_));
  SC_OK(symcommPutOnStream(comm_, &words[1], value, 8, right(), symcommEngineSm, stream_));
  SC_OK(symcommPutSignalOnStream(comm_, &words[2], value, 8, &words[3], 1, symcommSignalSet,
                                 right(), symcommEngineAuto, stream_));
  SC_OK(symcommSignalWaitOnStream(comm_, &words[3], symcommCmpEq, 1, stream_));
  SC_OK(symcommPutOnStream(comm_, &words[3], &words[4], 8, mp::rank(), symcommEngineCe,
                           stream_));
  SC_OK(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_));
  // Every put of this replay has landed: read what my left neighbour received.
  SC_OK(symcommGetOnStream(comm_, got, &words[2], 8, left(), symcommEngineAuto, stream_));
  SC_OK(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_));
  void* exec = mp::end_capture(stream_);
  ASSERT_NE(exec, nullptr);
  const int n = mp::nranks();
  const auto v = [](uint64_t k, int rank) { return 100 * k + static_cast<uint64_t>(rank); };
  for (uint64_t k = 1; k <= 5; ++k) {
    mp::write_u64(value, v(k, mp::rank()));
    mp::write_u64(got, 0);
    SC_OK(symcommHostBarrier(comm_));  // every value is written before any replay reads it
    ASSERT_EQ(mp::launch_graph(exec, stream_), 0);
    mp::sync(stream_);
    SC_OK(symcommQuietOnStream(comm_, stream_));  // no wait failed on the device
    EXPECT_EQ(mp::read_u64(&words[0]), v(k, left())) << "CE put, replay " << k;
    EXPECT_EQ(mp::read_u64(&words[1]), v(k, left())) << "SM put, replay " << k;
    EXPECT_EQ(mp::read_u64(&words[2]), v(k, left())) << "put-signal, replay " << k;
    EXPECT_EQ(mp::read_u64(&words[3]), 0u) << "the signal's reset, replay " << k;
    EXPECT_EQ(mp::read_u64(got), v(k, (mp::rank() + n - 2) % n)) << "get, replay " << k;
    SC_OK(symcommHostBarrier(comm_));  // everyone read before the next replay writes
  }
  mp::destroy_graph(exec);
  mp::local_free(got);
  mp::local_free(value);
  SC_OK(symcommFree(comm_, words));
}

// A barrier captured in a CUDA graph orders, at every replay, the puts before it and the
// reads after it, with nothing else between them: each replay puts a new value into the
// right neighbour's word, passes a barrier and copies its own word (from the left). A
// barrier that a replay passed without waiting (an epoch counted on the host when the graph
// was captured, which the first replay already reached) lets the copy read the previous
// replay's value: across nodes the put takes a network round trip, the copy a few us.
TEST_F(Rma, BarrierReplayedFromAGraphOrdersPuts) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "CUDA graphs need the cuda space";
  uint64_t* word;
  SC_OK(symcommMalloc(comm_, 8, reinterpret_cast<void**>(&word)));
  uint64_t* value = static_cast<uint64_t*>(mp::local_alloc(8));
  uint64_t* got = static_cast<uint64_t*>(mp::local_alloc(8));
  mp::write_u64(word, 0);
  SC_OK(symcommHostBarrier(comm_));
  ASSERT_EQ(mp::begin_capture(stream_), 0);
  SC_OK(symcommPutOnStream(comm_, word, value, 8, right(), symcommEngineAuto, stream_));
  SC_OK(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_));
  SC_OK(symcommGetOnStream(comm_, got, word, 8, mp::rank(), symcommEngineCe, stream_));
  SC_OK(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_));  // read before the next put
  void* exec = mp::end_capture(stream_);
  ASSERT_NE(exec, nullptr);
  const auto v = [](uint64_t k, int rank) { return 1000 * k + static_cast<uint64_t>(rank); };
  for (uint64_t k = 1; k <= 20; ++k) {
    mp::write_u64(value, v(k, mp::rank()));
    SC_OK(symcommHostBarrier(comm_));
    ASSERT_EQ(mp::launch_graph(exec, stream_), 0);
    mp::sync(stream_);
    SC_OK(symcommQuietOnStream(comm_, stream_));  // no wait failed on the device
    EXPECT_EQ(mp::read_u64(got), v(k, left())) << "replay " << k;
  }
  mp::destroy_graph(exec);
  mp::local_free(got);
  mp::local_free(value);
  SC_OK(symcommFree(comm_, word));
}

}  // namespace rma_test
