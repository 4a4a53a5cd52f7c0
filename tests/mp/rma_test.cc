// One-sided communication on a stream (host API), in both memory spaces: puts and gets of
// random sizes and offsets on every engine, signals and their ordering, every comparison,
// waits and barriers that time out (or have no bound), teams, graph capture, a stress of
// every peer at once, and every bad argument.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "mp.h"
#include "symcomm/device_comm.h"

namespace {

const symcommEngine_t kEngines[] = {symcommEngineAuto, symcommEngineCe, symcommEngineSm};

// Bytes of [p, p + bytes) (this process's memory in the space under test) that differ from
// pattern(who, what, first + i): a piece of a pattern written from index 0 further before.
size_t mismatches(const void* p, size_t bytes, int who, uint64_t what, size_t first = 0) {
  std::vector<uint8_t> got(bytes);
  if (bytes) mp::copy_to_host(got.data(), p, bytes);
  size_t bad = 0;
  for (size_t i = 0; i < bytes; ++i) bad += got[i] != mp::pattern(who, what, first + i);
  return bad;
}

// A communicator of its own whose waits have SYMCOMM_WAIT_TIMEOUT=`bound` (read at creation).
symcommComm_t comm_with_timeout(const char* bound) {
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", bound);
  return mp::new_comm();
}

std::string address(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class Rma : public ::testing::Test {
 protected:
  void SetUp() override {
    // Small chunks, so that transfers cross chunk boundaries.
    mp::ScopedEnv chunk("SYMCOMM_HEAP_CHUNK_SIZE", "2M");
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
    stream_ = mp::new_stream();
  }
  void TearDown() override {
    if (!comm_) return;
    mp::free_stream(stream_);
    if (comm_) {
      EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
    }
  }
  int right() const { return (mp::rank() + 1) % mp::nranks(); }
  int left() const { return (mp::rank() + mp::nranks() - 1) % mp::nranks(); }

  // What reports an on-stream wait's failure on `c`: `rc` itself in the host space; in the
  // cuda space (the stream goes on after the bound; rc is success) the next call.
  symcommResult_t reported(symcommComm_t c, symcommResult_t rc) {
    if (mp::space() != symcommSpaceCuda) return rc;
    EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();
    mp::sync(stream_);
    return symcommQuietOnStream(c, stream_);
  }

  symcommComm_t comm_ = nullptr;
  symcommStream_t stream_ = nullptr;
};

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

TEST_F(Rma, WaitThatCannotSucceedTimesOut) {
  // The bound is read when a communicator is created: this test makes its own.
  const double bound = 0.3;
  symcommComm_t c = comm_with_timeout("0.3");
  ASSERT_NE(c, nullptr);
  uint64_t* word;
  SC_OK(symcommMalloc(c, 8, reinterpret_cast<void**>(&word)));
  mp::write_u64(word, 5);
  SC_OK(symcommHostBarrier(c));
  auto start = std::chrono::steady_clock::now();
  // The stream goes on after the bound in the cuda space; the next call reports it, once.
  symcommResult_t rc =
      reported(c, symcommSignalWaitOnStream(c, word, symcommCmpGt, 1000, stream_));
  const double took = seconds_since(start);
  EXPECT_EQ(rc, symcommTimeout) << symcommGetLastError();
  std::string msg = symcommGetLastError();
  EXPECT_NE(msg.find("> 1000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("last saw 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank " + std::to_string(mp::rank()) + " "), std::string::npos) << msg;
  EXPECT_NE(msg.find(address(word)), std::string::npos) << msg;
  EXPECT_GE(took, 0.9 * bound) << "the wait ended before its bound";
  EXPECT_LT(took, 5.0);
  // Usable afterwards.
  SC_OK(symcommQuietOnStream(c, stream_));
  SC_OK(symcommBarrierOnStream(c, SYMCOMM_TEAM_WORLD, stream_));
  mp::sync(stream_);
  SC_OK(symcommFree(c, word));
  SC_OK(symcommFinalize(c));
}

// SYMCOMM_WAIT_TIMEOUT=0 means no bound in both spaces (read as a bound, the host space
// would time out at once): a signal sent 0.3 s late is still waited for. The smallest
// positive bound, 1 ms, is a bound, not "none".
TEST_F(Rma, WaitTimeoutZeroMeansNoBound) {
  symcommComm_t c = comm_with_timeout("0");
  ASSERT_NE(c, nullptr);
  uint64_t* word;
  SC_OK(symcommMalloc(c, 8, reinterpret_cast<void**>(&word)));
  mp::write_u64(word, 0);
  SC_OK(symcommHostBarrier(c));
  if (mp::rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    SC_OK(symcommPutSignalOnStream(c, nullptr, nullptr, 0, word, 1, symcommSignalSet, 0,
                                   symcommEngineAuto, stream_));
  } else if (mp::rank() == 0) {
    auto start = std::chrono::steady_clock::now();
    SC_OK(symcommSignalWaitOnStream(c, word, symcommCmpGe, 1, stream_));
    mp::sync(stream_);
    SC_OK(symcommQuietOnStream(c, stream_));  // no failure recorded on the device either
    EXPECT_GE(seconds_since(start), 0.2) << "the wait passed before the signal was sent";
    EXPECT_EQ(mp::read_u64(word), 1u);
  }
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(c));
  SC_OK(symcommFree(c, word));
  SC_OK(symcommFinalize(c));

  c = comm_with_timeout("0.001");
  ASSERT_NE(c, nullptr);
  SC_OK(symcommMalloc(c, 8, reinterpret_cast<void**>(&word)));
  mp::write_u64(word, 5);
  SC_OK(symcommHostBarrier(c));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(reported(c, symcommSignalWaitOnStream(c, word, symcommCmpLt, 5, stream_)),
            symcommTimeout) << symcommGetLastError();
  EXPECT_LT(seconds_since(start), 5.0);
  SC_OK(symcommHostBarrier(c));
  SC_OK(symcommFree(c, word));
  SC_OK(symcommFinalize(c));
}

// Every comparison, on words a peer changes with put-signal: each wait cannot pass before
// the peer's signal (the word starts where the comparison fails), and the data behind the
// signal is there once it passes. Then waits that hold already, at their edges.
TEST_F(Rma, EveryComparison) {
  struct Step {
    symcommCmp_t cmp;
    uint64_t value, before, after;  // wait for `cmp value`; the word goes before -> after
  };
  const Step steps[] = {{symcommCmpNe, 7, 7, 8},       {symcommCmpLe, 50, 100, 50},
                        {symcommCmpLt, 5, 10, 4},      {symcommCmpGt, 9, 9, 10},
                        {symcommCmpGe, 30, 29, 30},    {symcommCmpEq, 77, 76, 77}};
  constexpr int kSteps = 6;
  constexpr size_t kData = 4096;
  uint64_t* words;
  char* data;
  SC_OK(symcommMalloc(comm_, 8 * kSteps, reinterpret_cast<void**>(&words)));
  SC_OK(symcommMalloc(comm_, kData * kSteps, reinterpret_cast<void**>(&data)));
  char* src = static_cast<char*>(mp::local_alloc(kData * kSteps));
  for (int i = 0; i < kSteps; ++i) {
    mp::write_u64(&words[i], steps[i].before);
    mp::fill(src + i * kData, kData, mp::rank(), 500 + i);
  }
  mp::fill(data, kData * kSteps, mp::rank(), 499);
  SC_OK(symcommHostBarrier(comm_));
  for (int i = 0; i < kSteps; ++i)
    SC_OK(symcommPutSignalOnStream(comm_, data + i * kData, src + i * kData, kData, &words[i],
                                   steps[i].after, symcommSignalSet, right(),
                                   kEngines[i % 3], stream_));
  for (int i = 0; i < kSteps; ++i) {
    SC_OK(symcommSignalWaitOnStream(comm_, &words[i], steps[i].cmp, steps[i].value, stream_));
    mp::sync(stream_);
    EXPECT_EQ(mp::read_u64(&words[i]), steps[i].after) << "comparison " << steps[i].cmp;
    EXPECT_EQ(mismatches(data + i * kData, kData, left(), 500 + i), 0u)
        << "comparison " << steps[i].cmp << " passed before the data arrived";
  }
  // Already true of words[1] (50 now): each at the edge where a wrong comparison fails.
  const std::pair<symcommCmp_t, uint64_t> now[] = {
      {symcommCmpNe, 49}, {symcommCmpLe, 50}, {symcommCmpLt, 51},
      {symcommCmpGe, 50}, {symcommCmpGt, 49}, {symcommCmpEq, 50}};
  for (const auto& [cmp, value] : now)
    SC_OK(symcommSignalWaitOnStream(comm_, &words[1], cmp, value, stream_));
  mp::sync(stream_);
  SC_OK(symcommQuietOnStream(comm_, stream_));  // no wait failed on the device
  SC_OK(symcommHostBarrier(comm_));
  mp::local_free(src);
  SC_OK(symcommFree(comm_, data));
  SC_OK(symcommFree(comm_, words));
}

// Every comparison at its edges, on a word that holds 50 and that nobody changes: those one
// step past the edge (< 50, > 50, != 50, == 49, <= 49, >= 51) never hold and time out after
// the bound (0.15 s each, naming the comparison), the communicator staying usable; those at
// the edge (<= 50, >= 50, == 50, < 51, > 49, != 49) hold at once. EveryComparison above
// cannot tell an off-by-one comparison (< for <=, say): its signals mostly land before the
// wait starts, and its edges only try comparisons that hold.
TEST_F(Rma, EveryComparisonAtItsEdges) {
  const double bound = 0.15;
  symcommComm_t c = comm_with_timeout("0.15");
  ASSERT_NE(c, nullptr);
  uint64_t* word;
  SC_OK(symcommMalloc(c, 8, reinterpret_cast<void**>(&word)));
  mp::write_u64(word, 50);
  SC_OK(symcommHostBarrier(c));
  struct Edge {
    symcommCmp_t cmp;
    uint64_t value;
    const char* text;  // as the error message writes the comparison
  };
  const Edge refused[] = {{symcommCmpLt, 50, "< 50"},  {symcommCmpGt, 50, "> 50"},
                          {symcommCmpNe, 50, "!= 50"}, {symcommCmpEq, 49, "== 49"},
                          {symcommCmpLe, 49, "<= 49"}, {symcommCmpGe, 51, ">= 51"}};
  for (const Edge& e : refused) {
    SCOPED_TRACE(std::string("word 50, wait for ") + e.text);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(reported(c, symcommSignalWaitOnStream(c, word, e.cmp, e.value, stream_)),
              symcommTimeout) << "a comparison that does not hold passed";
    const double took = seconds_since(start);
    const std::string msg = symcommGetLastError();
    EXPECT_NE(msg.find(std::string("to be ") + e.text + " and last saw 50"), std::string::npos)
        << msg;
    EXPECT_GE(took, 0.9 * bound) << "the wait ended before its bound";
    EXPECT_LT(took, 5.0);
  }
  // Usable: the next calls succeed, no failure left to report.
  SC_OK(symcommQuietOnStream(c, stream_));
  SC_OK(symcommBarrierOnStream(c, SYMCOMM_TEAM_WORLD, stream_));
  mp::sync(stream_);
  const Edge hold[] = {{symcommCmpLe, 50, "<= 50"}, {symcommCmpGe, 50, ">= 50"},
                       {symcommCmpEq, 50, "== 50"}, {symcommCmpLt, 51, "< 51"},
                       {symcommCmpGt, 49, "> 49"},  {symcommCmpNe, 49, "!= 49"}};
  for (const Edge& e : hold) {
    SCOPED_TRACE(std::string("word 50, wait for ") + e.text);
    EXPECT_EQ(reported(c, symcommSignalWaitOnStream(c, word, e.cmp, e.value, stream_)),
              symcommSuccess) << symcommGetLastError();
  }
  EXPECT_EQ(mp::read_u64(word), 50u);
  SC_OK(symcommHostBarrier(c));
  SC_OK(symcommFree(c, word));
  SC_OK(symcommFinalize(c));
}

// A barrier that one member never reaches ends with symcommTimeout naming that member (the
// call itself fails in the host space; the next call in the cuda space, the stream going
// on). The members whose barrier failed refuse barriers from then on, on every team (their
// counts and the absent member's disagree); one-sided calls still run.
TEST_F(Rma, BarrierThatAMemberMissesTimesOut) {
  const double bound = 0.3;
  // The barrier's own bound: SYMCOMM_COLL_CHECK (on by default in the host space) would
  // catch the missed barrier first, at SYMCOMM_BOOTSTRAP_TIMEOUT (coll_check_test.cc).
  mp::ScopedEnv unchecked("SYMCOMM_COLL_CHECK", "0");
  symcommComm_t c = comm_with_timeout("0.3");
  ASSERT_NE(c, nullptr);
  const int n = mp::nranks(), me = mp::rank(), absent = n - 1;
  symcommTeam_t team;
  SC_OK(symcommTeamSplitStrided(c, SYMCOMM_TEAM_WORLD, 0, 1, n, &team));
  SC_OK(symcommHostBarrier(c));
  if (me != absent) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(reported(c, symcommBarrierOnStream(c, team, stream_)), symcommTimeout)
        << symcommGetLastError();
    const double took = seconds_since(start);
    std::string msg = symcommGetLastError();
    EXPECT_NE(msg.find("waited for rank " + std::to_string(absent) + ", which did not arrive"),
              std::string::npos) << msg;
    EXPECT_GE(took, 0.9 * bound);
    EXPECT_LT(took, 5.0);
  }
  SC_OK(symcommHostBarrier(c));
  SC_OK(symcommTeamDestroy(c, team));
  if (me != absent) {
    SC_FAILS(symcommBarrierOnStream(c, SYMCOMM_TEAM_WORLD, stream_), symcommTimeout);
    EXPECT_NE(std::strstr(symcommGetLastError(), "barrier counts may no longer agree"), nullptr)
        << symcommGetLastError();
  }
  // A put, seen after the stream and a host barrier.
  uint64_t* word;
  SC_OK(symcommMalloc(c, 8, reinterpret_cast<void**>(&word)));
  uint64_t* value = static_cast<uint64_t*>(mp::local_alloc(8));
  mp::write_u64(value, 1000 + static_cast<uint64_t>(me));
  mp::write_u64(word, 0);
  SC_OK(symcommHostBarrier(c));
  SC_OK(symcommPutOnStream(c, word, value, 8, right(), symcommEngineAuto, stream_));
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(c));
  EXPECT_EQ(mp::read_u64(word), 1000 + static_cast<uint64_t>(left()));
  SC_OK(symcommHostBarrier(c));
  mp::local_free(value);
  SC_OK(symcommFree(c, word));
  SC_OK(symcommFinalize(c));
}

TEST_F(Rma, BadArguments) {
  char* sym;
  SC_OK(symcommMalloc(comm_, 4096, reinterpret_cast<void**>(&sym)));
  char* local = static_cast<char*>(mp::local_alloc(8192));
  const symcommEngine_t ce = symcommEngineCe;
  SC_FAILS(symcommPutOnStream(comm_, nullptr, local, 8, 0, ce, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "dst is NULL"), nullptr);
  SC_FAILS(symcommPutOnStream(comm_, local, local, 8, 0, ce, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "not inside the symmetric heap"), nullptr);
  SC_FAILS(symcommPutOnStream(comm_, sym + 4000, local, 1 << 30, 0, ce, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommPutOnStream(comm_, sym, nullptr, 8, 0, ce, stream_), symcommInvalidArgument);
  SC_FAILS(symcommPutOnStream(comm_, sym, local, 8, mp::nranks(), ce, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "out of range"), nullptr);
  SC_FAILS(symcommPutOnStream(comm_, sym, local, 8, -1, ce, stream_), symcommInvalidArgument);
  SC_FAILS(symcommPutOnStream(comm_, sym, local, 8, 0, static_cast<symcommEngine_t>(9), stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommGetOnStream(comm_, local, local, 8, 0, ce, stream_), symcommInvalidArgument);
  uint64_t* sig = reinterpret_cast<uint64_t*>(sym + 64);
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, local, 8, sig, 1,
                                    static_cast<symcommSignalOp_t>(7), 0, ce, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, local, 8, reinterpret_cast<uint64_t*>(sym + 3), 1,
                                    symcommSignalSet, 0, ce, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "8-byte aligned"), nullptr);
  SC_FAILS(symcommSignalWaitOnStream(comm_, sig, static_cast<symcommCmp_t>(42), 0, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommSignalWaitOnStream(comm_, reinterpret_cast<uint64_t*>(local), symcommCmpEq, 0,
                                     stream_), symcommInvalidArgument);
  SC_FAILS(symcommBarrierOnStream(comm_, 57, stream_), symcommInvalidArgument);
  SC_FAILS(symcommPutOnStream(nullptr, sym, local, 8, 0, ce, stream_), symcommInvalidArgument);
  // A size that wraps offset + bytes around must not pass the heap's bounds (it once did,
  // and the host space then ran memcpy with it).
  const size_t huge = SIZE_MAX - 100;
  SC_FAILS(symcommPutOnStream(comm_, sym + 4000, local, huge, 0, ce, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "not inside the symmetric heap"), nullptr);
  SC_FAILS(symcommGetOnStream(comm_, local, sym + 4000, huge, 0, ce, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommPutSignalOnStream(comm_, sym + 4000, local, huge, sig, 1, symcommSignalSet, 0,
                                    ce, stream_), symcommInvalidArgument);
  // Get: NULL pointers, pe out of range, an unknown engine.
  SC_FAILS(symcommGetOnStream(comm_, nullptr, sym, 8, 0, ce, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "dst"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommGetOnStream(comm_, local, nullptr, 8, 0, ce, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "src is NULL"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommGetOnStream(comm_, local, sym, 8, mp::nranks(), ce, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommGetOnStream(comm_, local, sym, 8, -1, ce, stream_), symcommInvalidArgument);
  SC_FAILS(symcommGetOnStream(comm_, local, sym, 8, 0, static_cast<symcommEngine_t>(3), stream_),
           symcommInvalidArgument);
  // Put-signal: the signal word NULL or outside the heap, pe out of range, NULL data.
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, local, 8, nullptr, 1, symcommSignalSet, 0, ce,
                                    stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "sig is NULL"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, local, 8, reinterpret_cast<uint64_t*>(local), 1,
                                    symcommSignalSet, 0, ce, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "not inside the symmetric heap"), nullptr);
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, local, 8, sig, 1, symcommSignalSet, mp::nranks(),
                                    ce, stream_), symcommInvalidArgument);
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, local, 8, sig, 1, symcommSignalSet, -1, ce,
                                    stream_), symcommInvalidArgument);
  SC_FAILS(symcommPutSignalOnStream(comm_, nullptr, local, 8, sig, 1, symcommSignalSet, 0, ce,
                                    stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "dst is NULL"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, nullptr, 8, sig, 1, symcommSignalSet, 0, ce,
                                    stream_), symcommInvalidArgument);
  SC_FAILS(symcommSignalWaitOnStream(comm_, nullptr, symcommCmpEq, 0, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "sig is NULL"), nullptr) << symcommGetLastError();
  // Device handles (checked before the memory space is: the same in both spaces).
  SC_FAILS(symcommGetDeviceComm(comm_, SYMCOMM_TEAM_WORLD, nullptr), symcommInvalidArgument);
  symcomm::DeviceComm handle;
  SC_FAILS(symcommGetDeviceComm(comm_, 57, &handle), symcommInvalidArgument);
  SC_FAILS(symcommGetDeviceComm(comm_, SYMCOMM_TEAM_INVALID, &handle), symcommInvalidArgument);
  // Team calls: a pe out of range of its team, a 2D split without columns.
  int pe = -2;
  SC_FAILS(symcommTeamTranslate(comm_, SYMCOMM_TEAM_WORLD, mp::nranks(), SYMCOMM_TEAM_WORLD, &pe),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "out of range"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommTeamTranslate(comm_, SYMCOMM_TEAM_WORLD, -1, SYMCOMM_TEAM_WORLD, &pe),
           symcommInvalidArgument);
  symcommTeam_t xteam = 5, yteam = 5;
  for (int xrange : {0, -3}) {
    SC_FAILS(symcommTeamSplit2D(comm_, SYMCOMM_TEAM_WORLD, xrange, &xteam, &yteam),
             symcommInvalidArgument);
    EXPECT_NE(std::strstr(symcommGetLastError(), "xrange"), nullptr) << symcommGetLastError();
    EXPECT_EQ(xteam, SYMCOMM_TEAM_INVALID);
    EXPECT_EQ(yteam, SYMCOMM_TEAM_INVALID);
  }
  // A team of which this rank is not a member: odd ranks use the even ranks' team id.
  symcommTeam_t even;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 2, (mp::nranks() + 1) / 2, &even));
  const auto even_id = static_cast<symcommTeam_t>(mp::agree(static_cast<uint64_t>(even)));
  if (mp::rank() % 2 == 1) {
    SC_FAILS(symcommGetDeviceComm(comm_, even_id, &handle), symcommInvalidArgument);
    SC_FAILS(symcommBarrierOnStream(comm_, even_id, stream_), symcommInvalidArgument);
  } else {
    SC_OK(symcommTeamDestroy(comm_, even));
  }
  if (mp::space() == symcommSpaceHost) {
    SC_FAILS(symcommPutOnStream(comm_, sym, local, 8, 0, ce,
                                reinterpret_cast<symcommStream_t>(0x1234)),
             symcommInvalidArgument);
    EXPECT_NE(std::strstr(symcommGetLastError(), "host memory space"), nullptr);
    symcomm::DeviceComm h;
    SC_FAILS(symcommGetDeviceComm(comm_, SYMCOMM_TEAM_WORLD, &h), symcommNotSupported);
  }
  mp::sync(stream_);
  mp::local_free(local);
  SC_OK(symcommFree(comm_, sym));
}

// A transfer whose range on either side leaves the allocation it starts in is refused,
// naming the allocation's size, and writes nothing: past the end lies the next allocation.
TEST_F(Rma, TransfersStayInsideTheirAllocation) {
  char *a, *b, *small;
  SC_OK(symcommMalloc(comm_, 4096, reinterpret_cast<void**>(&a)));
  SC_OK(symcommMalloc(comm_, 4096, reinterpret_cast<void**>(&b)));
  SC_OK(symcommMalloc(comm_, 100, reinterpret_cast<void**>(&small)));
  mp::fill(b, 4096, mp::rank(), 5);
  char* local = static_cast<char*>(mp::local_alloc(8192));
  mp::fill(local, 8192, mp::rank(), 6);
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  const int pe = (mp::rank() + 1) % mp::nranks();
  auto refused = [&](symcommResult_t rc, const char* what) {
    EXPECT_EQ(rc, symcommInvalidArgument) << what;
    const std::string e = symcommGetLastError();
    EXPECT_NE(e.find("runs past the end of its allocation"), std::string::npos) << what << ": " << e;
    EXPECT_NE(e.find("has 4096 bytes"), std::string::npos) << what << ": " << e;
  };
  for (symcommEngine_t engine : kEngines) {
    refused(symcommPutOnStream(comm_, a, local, 5000, pe, engine, stream_), "put 5000 into a");
    refused(symcommGetOnStream(comm_, local, a, 5000, pe, engine, stream_), "get 5000 from a");
    refused(symcommPutOnStream(comm_, a + 96, local, 4001, pe, engine, stream_), "put a+96");
    // The symmetric source of a put, the symmetric destination of a get.
    refused(symcommPutOnStream(comm_, b, a + 100, 4000, pe, engine, stream_), "put from a+100");
    refused(symcommGetOnStream(comm_, a + 100, b, 4000, pe, engine, stream_), "get into a+100");
    uint64_t* sig = reinterpret_cast<uint64_t*>(small);
    refused(symcommPutSignalOnStream(comm_, a, local, 4097, sig, 1, symcommSignalSet, pe, engine,
                                     stream_), "put-signal 4097");
  }
  // The size asked for counts, not the allocator's rounding up to 256 bytes.
  SC_FAILS(symcommPutOnStream(comm_, small, local, 101, pe, symcommEngineAuto, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "has 100 bytes"), nullptr) << symcommGetLastError();
  // Freed memory is in no allocation.
  char* gone;
  SC_OK(symcommMalloc(comm_, 4096, reinterpret_cast<void**>(&gone)));
  SC_OK(symcommFree(comm_, gone));
  SC_FAILS(symcommPutOnStream(comm_, gone, local, 8, pe, symcommEngineAuto, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "no live allocation"), nullptr)
      << symcommGetLastError();
  // Collectives: a symmetric buffer that runs past its allocation is refused too.
  const size_t n = static_cast<size_t>(mp::nranks());
  SC_FAILS(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, local, a, 4096 / n + 1,
                                    symcommUint8, "", stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "recv"), nullptr) << symcommGetLastError();
  // What fits exactly is allowed, and nothing refused landed in b (after a, on every rank).
  for (symcommEngine_t engine : kEngines) {
    SC_OK(symcommPutOnStream(comm_, a, local, 4096, pe, engine, stream_));
    SC_OK(symcommGetOnStream(comm_, local, a + 96, 4000, pe, engine, stream_));
  }
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  EXPECT_EQ(mp::count_mismatches(b, 4096, mp::rank(), 5), 0u);
  mp::local_free(local);
  SC_OK(symcommFree(comm_, small));
  SC_OK(symcommFree(comm_, b));
  SC_OK(symcommFree(comm_, a));
}

TEST_F(Rma, Teams) {
  const int n = mp::nranks(), me = mp::rank();
  int r = -1, size = -1;
  SC_OK(symcommTeamRank(comm_, SYMCOMM_TEAM_NODE, &r));
  SC_OK(symcommTeamSize(comm_, SYMCOMM_TEAM_NODE, &size));
  EXPECT_EQ(r, me);
  EXPECT_EQ(size, n);
  // Even ranks.
  symcommTeam_t even;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 2, (n + 1) / 2, &even));
  if (me % 2 == 0) {
    ASSERT_NE(even, SYMCOMM_TEAM_INVALID);
    SC_OK(symcommTeamRank(comm_, even, &r));
    EXPECT_EQ(r, me / 2);
    int world = -1;
    SC_OK(symcommTeamTranslate(comm_, even, r, SYMCOMM_TEAM_WORLD, &world));
    EXPECT_EQ(world, me);
    for (int k = 0; k < 50; ++k) SC_OK(symcommBarrierOnStream(comm_, even, stream_));
  } else {
    EXPECT_EQ(even, SYMCOMM_TEAM_INVALID);
    SC_OK(symcommTeamRank(comm_, even, &r));
    EXPECT_EQ(r, -1);
    SC_FAILS(symcommBarrierOnStream(comm_, even, stream_), symcommInvalidArgument);
  }
  mp::sync(stream_);
  // Rows of two and columns.
  symcommTeam_t row, col;
  SC_OK(symcommTeamSplit2D(comm_, SYMCOMM_TEAM_WORLD, 2, &row, &col));
  SC_OK(symcommTeamRank(comm_, row, &r));
  EXPECT_EQ(r, me % 2);
  SC_OK(symcommTeamSize(comm_, col, &size));
  EXPECT_EQ(size, (n - me % 2 + 1) / 2);
  SC_OK(symcommTeamRank(comm_, col, &r));
  EXPECT_EQ(r, me / 2);
  int in_world = -1, in_row = -2;
  SC_OK(symcommTeamTranslate(comm_, col, 0, SYMCOMM_TEAM_WORLD, &in_world));
  EXPECT_EQ(in_world, me % 2);
  SC_OK(symcommTeamTranslate(comm_, col, 0, row, &in_row));
  EXPECT_EQ(in_row, me < 2 ? me % 2 : -1);
  for (int k = 0; k < 20; ++k) {
    SC_OK(symcommBarrierOnStream(comm_, row, stream_));
    SC_OK(symcommBarrierOnStream(comm_, col, stream_));
  }
  mp::sync(stream_);
  // Members that disagree fail everywhere; bad shapes are refused.
  symcommTeam_t t;
  SC_FAILS(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 1, me == 0 ? 1 : 2, &t),
           symcommInvalidUsage);
  SC_FAILS(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 0, 1, &t),
           symcommInvalidArgument);
  SC_FAILS(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 1, 1, n, &t),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "goes past"), nullptr) << symcommGetLastError();
  // A parent that is a team on no rank (it was a success that made no team).
  SC_FAILS(symcommTeamSplitStrided(comm_, 40, 0, 1, 1, &t), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "parent team 40 is a team on no rank"), nullptr)
      << symcommGetLastError();
  // Teams of one with huge strides, split again (stride x step overflowed into a stride of
  // 0, and index_of divided by zero), and 2D splits with an xrange near INT_MAX.
  symcommTeam_t one, one_again, row_team, col_team;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, n, 1, &one));
  const bool in_one = me == 0;
  EXPECT_EQ(one != SYMCOMM_TEAM_INVALID, in_one);
  SC_OK(symcommTeamSplitStrided(comm_, in_one ? one : SYMCOMM_TEAM_INVALID, 0, 1 << 30, 1,
                                &one_again));
  EXPECT_EQ(one_again != SYMCOMM_TEAM_INVALID, in_one);
  SC_OK(symcommTeamSplit2D(comm_, in_one ? one : SYMCOMM_TEAM_INVALID, 1 << 30, &row_team,
                           &col_team));
  if (in_one) {
    for (symcommTeam_t id : {one_again, row_team, col_team}) {
      int size = 0, rank = -1;
      SC_OK(symcommTeamSize(comm_, id, &size));
      SC_OK(symcommTeamRank(comm_, id, &rank));
      EXPECT_EQ(size, 1);
      EXPECT_EQ(rank, 0);
    }
    SC_OK(symcommBarrierOnStream(comm_, one_again, stream_));
    mp::sync(stream_);
  }
  symcommTeam_t rows, cols;  // the world in one row of n (xrange past its size), columns of one
  SC_OK(symcommTeamSplit2D(comm_, SYMCOMM_TEAM_WORLD, INT_MAX, &rows, &cols));
  int rows_size = 0, cols_size = 0;
  SC_OK(symcommTeamSize(comm_, rows, &rows_size));
  SC_OK(symcommTeamSize(comm_, cols, &cols_size));
  EXPECT_EQ(rows_size, n);
  EXPECT_EQ(cols_size, 1);
  for (symcommTeam_t id : {rows, cols}) SC_OK(symcommTeamDestroy(comm_, id));
  for (symcommTeam_t id : {one_again, row_team, col_team, one})
    if (id != SYMCOMM_TEAM_INVALID) SC_OK(symcommTeamDestroy(comm_, id));
  SC_FAILS(symcommTeamDestroy(comm_, SYMCOMM_TEAM_WORLD), symcommInvalidArgument);
  SC_OK(symcommTeamDestroy(comm_, row));
  SC_OK(symcommTeamDestroy(comm_, col));
  if (even != SYMCOMM_TEAM_INVALID) SC_OK(symcommTeamDestroy(comm_, even));
  SC_FAILS(symcommTeamRank(comm_, row, &r), symcommInvalidArgument);
  // Ids are reused, and a new team starts with a clean barrier.
  symcommTeam_t again;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 1, n, &again));
  for (int k = 0; k < 10; ++k) SC_OK(symcommBarrierOnStream(comm_, again, stream_));
  mp::sync(stream_);
  SC_OK(symcommTeamDestroy(comm_, again));
}

// Rows of three (the last row short unless 3 divides the ranks: 2 ranks make one row of 2,
// 4 a row of 3 and one of 1, 8 rows of 3, 3 and 2), then splits of a team that is not the
// world: its members 1.. and its rows of two.
TEST_F(Rma, TeamsWithAShortRowAndNestedSplits) {
  const int n = mp::nranks(), me = mp::rank();
  auto expect_team = [&](symcommTeam_t t, int rank, int size, int world0, const char* what) {
    int r = -2, z = -2, w = -2;
    SC_OK(symcommTeamRank(comm_, t, &r));
    SC_OK(symcommTeamSize(comm_, t, &z));
    SC_OK(symcommTeamTranslate(comm_, t, 0, SYMCOMM_TEAM_WORLD, &w));
    EXPECT_EQ(r, rank) << what;
    EXPECT_EQ(z, size) << what;
    EXPECT_EQ(w, world0) << what << ": world rank of its member 0";
    int back = -2;
    SC_OK(symcommTeamTranslate(comm_, SYMCOMM_TEAM_WORLD, me, t, &back));
    EXPECT_EQ(back, rank) << what << ": this rank translated from the world";
    for (int k = 0; k < 10; ++k) SC_OK(symcommBarrierOnStream(comm_, t, stream_));
    mp::sync(stream_);
  };
  symcommTeam_t row, col;
  SC_OK(symcommTeamSplit2D(comm_, SYMCOMM_TEAM_WORLD, 3, &row, &col));
  expect_team(row, me % 3, std::min(3, n - me / 3 * 3), me / 3 * 3, "row of 3");
  expect_team(col, me / 3, (n - me % 3 + 2) / 3, me % 3, "column of the rows of 3");
  for (int k = 0; k < (n - me % 3 + 2) / 3; ++k) {
    int in_row = -2;  // member k of my column is world rank me % 3 + 3k: in my row iff k is mine
    SC_OK(symcommTeamTranslate(comm_, col, k, row, &in_row));
    EXPECT_EQ(in_row, k == me / 3 ? me % 3 : -1) << "column member " << k;
  }
  // The even ranks, then splits of that team; odd ranks take part with no parent.
  symcommTeam_t even, tail = SYMCOMM_TEAM_INVALID, erow, ecol;
  const int evens = (n + 1) / 2, e = me / 2;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 2, evens, &even));
  if (evens >= 2)  // the even team's members 1.. : world ranks 2, 4, ...
    SC_OK(symcommTeamSplitStrided(comm_, even, 1, 1, evens - 1, &tail));
  SC_OK(symcommTeamSplit2D(comm_, even, 2, &erow, &ecol));
  if (me % 2 == 0) {
    if (evens >= 2) {
      if (me == 0) EXPECT_EQ(tail, SYMCOMM_TEAM_INVALID);
      else expect_team(tail, e - 1, evens - 1, 2, "even ranks from 2");
    }
    expect_team(erow, e % 2, std::min(2, evens - e / 2 * 2), 4 * (e / 2), "row of the evens");
    expect_team(ecol, e / 2, (evens - e % 2 + 1) / 2, 2 * (e % 2), "column of the evens");
  } else {
    EXPECT_EQ(tail, SYMCOMM_TEAM_INVALID);
    EXPECT_EQ(erow, SYMCOMM_TEAM_INVALID);
    EXPECT_EQ(ecol, SYMCOMM_TEAM_INVALID);
  }
  for (symcommTeam_t t : {row, col, even, tail, erow, ecol})
    if (t != SYMCOMM_TEAM_INVALID) SC_OK(symcommTeamDestroy(comm_, t));
}

// Making a team clears its barrier state on a stream of its own: it does not wait for other
// work on the GPU (here a kernel that runs for 3 s on another stream), as a whole-device
// synchronisation did; and the new team's barrier runs beside that kernel.
TEST_F(Rma, TeamSplitDoesNotWaitForOtherWork) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "GPU work: the cuda space only";
  char* a = static_cast<char*>(mp::local_alloc(64));
  char* b = static_cast<char*>(mp::local_alloc(64));
  mp::copy_after_early_trigger(stream_, a, b, 64, 1);  // loads the kernel before the timing
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  mp::copy_after_early_trigger(stream_, a, b, 64, 3000000);
  const auto start = std::chrono::steady_clock::now();
  symcommTeam_t team;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 1, mp::nranks(), &team));
  symcommStream_t other = mp::new_stream();
  for (int k = 0; k < 10; ++k) SC_OK(symcommBarrierOnStream(comm_, team, other));
  mp::sync(other);
  EXPECT_LT(seconds_since(start), 1.5) << "the split or the barriers waited for the kernel";
  mp::sync(stream_);
  SC_OK(symcommQuietOnStream(comm_, other));
  mp::free_stream(other);
  SC_OK(symcommTeamDestroy(comm_, team));
  mp::local_free(b);
  mp::local_free(a);
}

// Stress: many rounds in which every rank put-signals a piece of random size (0 included)
// and offsets, on a random engine, into its slot on every rank (itself included) at once.
// Each receiver checks every piece, and the poison around it, when it observes the piece's
// signal, poisons the slot again and acknowledges; a sender reuses a slot only after that.
TEST_F(Rma, StressEveryPeerAtOnce) {
  const int n = mp::nranks(), me = mp::rank();
  const int rounds = mp::space() == symcommSpaceHost ? 120 : 60;
  const size_t kMax = 24 << 10, kSlot = kMax + 128;
  char* buf;
  uint64_t* sigs;  // [s]: round of sender s's piece here; [n + r]: acks from receiver r
  SC_OK(symcommMalloc(comm_, kSlot * n, reinterpret_cast<void**>(&buf)));
  SC_OK(symcommMalloc(comm_, 16 * n, reinterpret_cast<void**>(&sigs)));
  char* src = static_cast<char*>(mp::local_alloc(kSlot * n));
  for (int i = 0; i < 2 * n; ++i) mp::write_u64(&sigs[i], 0);
  const auto poison = [](uint64_t k) { return 1000000 + k; };
  const auto what = [&](uint64_t k, int to) { return k * 64 + static_cast<uint64_t>(to); };
  for (int s = 0; s < n; ++s) mp::fill(buf + s * kSlot, kSlot, me, poison(1));  // each slot
  struct Piece {
    size_t bytes, src_off, dst_off;
    symcommEngine_t engine;
  };
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  std::mt19937_64 rng(seed);
  std::vector<Piece> pieces(static_cast<size_t>(n) * n);  // [sender * n + receiver]
  SC_OK(symcommHostBarrier(comm_));
  size_t bad = 0;
  std::string first_bad;
  for (uint64_t k = 1; k <= static_cast<uint64_t>(rounds); ++k) {  // all, even after a failure
    for (Piece& p : pieces) {
      const uint64_t r = rng();
      p.bytes = r % 8 == 0 ? 0 : r % 3 == 0 ? 1 + rng() % 64 : 1 + rng() % kMax;
      p.src_off = rng() % 64;
      p.dst_off = rng() % 64;
      p.engine = kEngines[rng() % 3];
    }
    for (int t = 0; t < n; ++t) {  // send to every rank, once it acknowledged round k - 1
      const Piece& p = pieces[static_cast<size_t>(me * n + t)];
      SC_OK(symcommSignalWaitOnStream(comm_, &sigs[n + t], symcommCmpGe, k - 1, stream_));
      mp::sync(stream_);  // and this rank's previous put from the source is done
      mp::fill(src + t * kSlot + p.src_off, p.bytes, me, what(k, t));
      SC_OK(symcommPutSignalOnStream(comm_, buf + me * kSlot + p.dst_off,
                                     src + t * kSlot + p.src_off, p.bytes, &sigs[me], k,
                                     symcommSignalSet, t, p.engine, stream_));
    }
    for (int s = 0; s < n; ++s) {  // receive from every rank, check, poison again, ack
      const Piece& p = pieces[static_cast<size_t>(s * n + me)];
      SC_OK(symcommSignalWaitOnStream(comm_, &sigs[s], symcommCmpEq, k, stream_));
      mp::sync(stream_);
      char* slot = buf + s * kSlot;
      const size_t end = p.dst_off + p.bytes;
      const size_t wrong = mismatches(slot + p.dst_off, p.bytes, s, what(k, me)) +
                           mismatches(slot, p.dst_off, me, poison(k)) +
                           mismatches(slot + end, kSlot - end, me, poison(k), end);
      if (wrong != 0 && bad == 0)
        first_bad = "round " + std::to_string(k) + " from rank " + std::to_string(s) + ": " +
                    std::to_string(p.bytes) + " bytes at " + std::to_string(p.dst_off) +
                    ", engine " + std::to_string(p.engine);
      bad += wrong;
      mp::fill(slot, kSlot, me, poison(k + 1));
      SC_OK(symcommPutSignalOnStream(comm_, nullptr, nullptr, 0, &sigs[n + me], 1,
                                     symcommSignalAdd, s, symcommEngineAuto, stream_));
    }
  }
  mp::sync(stream_);
  EXPECT_EQ(bad, 0u) << first_bad;
  SC_OK(symcommHostBarrier(comm_));
  mp::local_free(src);
  SC_OK(symcommFree(comm_, sigs));
  SC_OK(symcommFree(comm_, buf));
}

}  // namespace
