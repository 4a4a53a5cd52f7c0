// One-sided communication on a stream (host API), in both memory spaces: puts and gets of
// random sizes and offsets on every engine, signals and their ordering, waits that time
// out, barriers, teams, and every bad argument.
#include <chrono>
#include <cstring>
#include <random>

#include "mp.h"
#include "symcomm/device_comm.h"

namespace {

const symcommEngine_t kEngines[] = {symcommEngineAuto, symcommEngineCe, symcommEngineSm};

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

  symcommComm_t comm_ = nullptr;
  symcommStream_t stream_ = nullptr;
};

TEST_F(Rma, PutAndGetRandomSizesAndOffsets) {
  std::mt19937_64 rng(mp::agree(std::random_device{}()));
  const size_t max_bytes = (5 << 20) + 333;  // beyond a 2 MiB chunk
  char* sym;
  SC_OK(symcommMalloc(comm_, max_bytes + 64, reinterpret_cast<void**>(&sym)));
  char* local = static_cast<char*>(mp::local_alloc(max_bytes + 64));
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
      // The poison around the target is untouched.
      EXPECT_EQ(mp::count_mismatches(sym, dst_off, mp::rank(), 1000000 + what), 0u);
      SC_OK(symcommHostBarrier(comm_));
      // Get: my left neighbour's buffer (which it wrote itself) into my local buffer.
      mp::fill(sym, bytes + 64, mp::rank(), 2000000 + what);
      mp::fill(local, bytes + 64, mp::rank(), 7);
      SC_OK(symcommHostBarrier(comm_));
      SC_OK(symcommGetOnStream(comm_, local + dst_off, sym + src_off, bytes, left(), engine,
                               stream_));
      mp::sync(stream_);
      size_t bad = 0;
      // The left rank's pattern starts at its buffer's start: compare from src_off on.
      std::vector<uint8_t> expect(bytes), got(bytes);
      for (size_t i = 0; i < bytes; ++i) expect[i] = mp::pattern(left(), 2000000 + what, src_off + i);
      mp::copy_to_host(got.data(), local + dst_off, bytes);
      for (size_t i = 0; i < bytes; ++i) bad += got[i] != expect[i];
      EXPECT_EQ(bad, 0u) << "get engine " << engine << " bytes " << bytes;
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
  SC_OK(symcommPutOnStream(comm_, sym, nullptr, 0, right(), symcommEngineAuto, stream_));
  SC_OK(symcommGetOnStream(comm_, nullptr, sym, 0, left(), symcommEngineAuto, stream_));
  mp::sync(stream_);
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

// On-stream operations captured once in a CUDA graph and replayed: barrier counts advance
// on the device, so every replay is a new barrier.
TEST_F(Rma, CapturedInAGraph) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "CUDA graphs need the cuda space";
  uint64_t* word;
  SC_OK(symcommMalloc(comm_, 8, reinterpret_cast<void**>(&word)));
  uint64_t* value = static_cast<uint64_t*>(mp::local_alloc(8));
  mp::write_u64(word, 0);
  SC_OK(symcommHostBarrier(comm_));
  ASSERT_EQ(mp::begin_capture(stream_), 0);
  SC_OK(symcommPutOnStream(comm_, word, value, 8, right(), symcommEngineCe, stream_));
  SC_OK(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_));
  void* exec = mp::end_capture(stream_);
  ASSERT_NE(exec, nullptr);
  for (uint64_t k = 1; k <= 5; ++k) {
    mp::write_u64(value, 100 + k + static_cast<uint64_t>(mp::rank()));
    ASSERT_EQ(mp::launch_graph(exec, stream_), 0);
    mp::sync(stream_);
    EXPECT_EQ(mp::read_u64(word), 100 + k + static_cast<uint64_t>(left())) << "replay " << k;
    SC_OK(symcommHostBarrier(comm_));  // everyone read before the next replay writes
  }
  mp::destroy_graph(exec);
  mp::local_free(value);
  SC_OK(symcommFree(comm_, word));
}

TEST_F(Rma, WaitThatCannotSucceedTimesOut) {
  // The bound is read when a communicator is created: this test makes its own.
  symcommComm_t shared = comm_;
  {
    mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "0.3");
    comm_ = mp::new_comm();
  }
  ASSERT_NE(comm_, nullptr);
  uint64_t* word;
  SC_OK(symcommMalloc(comm_, 8, reinterpret_cast<void**>(&word)));
  mp::write_u64(word, 5);
  SC_OK(symcommHostBarrier(comm_));
  auto start = std::chrono::steady_clock::now();
  symcommResult_t rc = symcommSignalWaitOnStream(comm_, word, symcommCmpGt, 1000, stream_);
  if (mp::space() == symcommSpaceCuda) {
    // The stream goes on after the bound; the next call reports what happened, once.
    EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();
    mp::sync(stream_);
    rc = symcommQuietOnStream(comm_, stream_);
  }
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(rc, symcommTimeout) << symcommGetLastError();
  std::string msg = symcommGetLastError();
  EXPECT_NE(msg.find("> 1000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("last saw 5"), std::string::npos) << msg;
  EXPECT_LT(took, 5.0);
  // Usable afterwards.
  SC_OK(symcommQuietOnStream(comm_, stream_));
  SC_OK(symcommBarrierOnStream(comm_, SYMCOMM_TEAM_WORLD, stream_));
  mp::sync(stream_);
  SC_OK(symcommFree(comm_, word));
  SC_OK(symcommFinalize(comm_));
  comm_ = shared;
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

}  // namespace
